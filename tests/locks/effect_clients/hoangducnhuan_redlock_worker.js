// One process of the held-out @hoangducnhuan/redlock recording (record.sh):
// @hoangducnhuan/redlock 6.0.0 (node-redlock 5 ported to node-redis 4: its scripts byte
// for byte, so the SHA1s lockscope has built in for redlock 5, on another driver) on
// node-redis 4.7, unchanged, never used while building lockscope (the twenty-seventh
// held-out set, beside redlock 4), contending with the other processes on two locks and
// logging what it did itself, one JSON line per event, to stdout:
//   {"t_us", "proc", "event": "attempt"|"acquired"|"gave_up"|"extended"|"extend_refused"|"released"|"release_refused"|"cleanup"|"expired", "lock", "owner", ...}
// (t_us when the line is written, after the reply came; sent_us, on calls, just before
// the command was handed to the client.)
// Each call is `evalSha` (`EVAL` text on `NOSCRIPT`, once per script for the whole server).
// One random value (16 bytes hex) for all attempts of an acquire(); a refused attempt is
// followed by nothing but a sleep of retryDelay ± retryJitter, and only **when the last
// attempt is refused does the library send its release script once with that value** (it
// answers 0: logged as `cleanup`), then rejects (the give-up, right after it). One hold in
// four runs under using(): the library extends it itself each time it comes within
// automaticExtensionThreshold of its expiry (the extend script, which sets the key again
// with PX). Each process runs its rounds in a child process (one connection); p2's child
// kills itself with SIGKILL once in the middle of a hold (it logs the key's expiry, its
// last set + ttl, just before: nothing after is sent) and a new child goes on with the
// next round. One hold in seven outlives its lease (the worker logs the expiry; its
// release then answers 0).
'use strict';
const { proc, rounds, now_us, log, sleep, runRoundsInChildren, redlocksOfPolicies } = require('./truth_log');

const TTL_MS = 600;
const EXTEND_BEFORE_MS = 250;  // automaticExtensionThreshold: an extend every ~350 ms under using()
// orders retries 12 times every 70 ± 30 ms; stock 3 times every 180 ± 60 ms, so its
// waiters give up more often and may leave it standing free past the idle threshold. One
// round in six is a single try (retryCount 0).
const POLICY = { orders: { retryCount: 12, retryDelay: 70, retryJitter: 30, automaticExtensionThreshold: EXTEND_BEFORE_MS },
                 stock: { retryCount: 3, retryDelay: 180, retryJitter: 60, automaticExtensionThreshold: EXTEND_BEFORE_MS } };
const KILL_ROUND = { p2: 7 };  // stock

async function child(start) {
  const { createClient } = require('redis');
  const Redlock = require('@hoangducnhuan/redlock').default;
  const client = createClient({ socket: { host: '127.0.0.1', port: Number(process.argv[2]) } });
  await client.connect();
  const probe = new Redlock([client]);
  const role = {};  // SHA1 or text -> script name
  for (const [name, s] of Object.entries(probe.scripts)) { role[s.hash] = name; role[s.value] = name; }
  const cur = { lock: '', value: '', held: false, set_us: 0 };
  // The truth: each script call as the library makes it, by its SHA1 or text, with its
  // answer; an evalSha answered NOSCRIPT did nothing (its EVAL follows) and is not logged.
  const wrap = (command) => {
    const orig = client[command].bind(client);
    client[command] = async (script, options) => {
      const [key] = options.keys;
      const [value] = options.arguments;
      const sent_us = now_us();
      const r = await orig(script, options);
      const name = role[script];
      if (name === 'acquireScript') {
        // The acquire answers how many keys it set: 1 is a won attempt ("OK" in the log).
        log({ event: 'attempt', lock: key, owner: value, reply: r === 1 ? 'OK' : r, sent_us });
        if (r === 1) { cur.held = true; cur.set_us = sent_us; log({ event: 'acquired', lock: key, owner: value }); }
      } else if (name === 'extendScript') {
        if (r === 1) cur.set_us = sent_us;
        log({ event: r === 1 ? 'extended' : 'extend_refused', lock: key, owner: value, reply: r, sent_us });
      } else if (name === 'releaseScript') {
        const holder = cur.held && cur.lock === key && cur.value === value;
        if (holder) cur.held = false;
        log({ event: holder ? (r === 1 ? 'released' : 'release_refused') : 'cleanup', lock: key, owner: value,
              reply: r, sent_us });
      }
      return r;
    };
  };
  wrap('evalSha');
  wrap('eval');
  const expire_held = () => { if (cur.held) log({ event: 'expired', lock: cur.lock, owner: cur.value, t_us: cur.set_us + TTL_MS * 1000 }); };
  const locks = redlocksOfPolicies(Redlock, [client], POLICY, (value) => { cur.value = value; });
  for (let i = start; i < rounds; ++i) {
    const name = i % 2 === 0 ? 'orders' : 'stock';
    const key = `shop:${name}`;
    const redlock = locks[i % 6 === 5 ? name + '_once' : name];
    cur.lock = key; cur.value = ''; cur.held = false;
    const kill = async () => {
      await sleep(100 + Math.random() * 150);
      expire_held();
      process.kill(process.pid, 'SIGKILL');
      await sleep(10_000);
    };
    try {
      if (i % 4 === 2) {
        // A longer hold under using(): 450-950 ms, extended by the library as it goes.
        await redlock.using([key], TTL_MS, async () => {
          if (KILL_ROUND[proc] === i) await kill();
          await sleep(450 + Math.random() * 500);
        });
      } else {
        const lock = await redlock.acquire([key], TTL_MS);
        if (KILL_ROUND[proc] === i) await kill();
        if (i % 7 === 3) {
          await sleep(TTL_MS + 150 + Math.random() * 100);
          expire_held();
          await lock.release().catch(() => {});
        } else {
          await sleep(20 + Math.random() * 380);
          await lock.release();
        }
      }
    } catch (e) {
      if (cur.held) throw e;
      log({ event: 'gave_up', lock: key, owner: cur.value });
    }
    await sleep(Math.random() * 60);
  }
  await client.quit();
  process.exit(0);
}

runRoundsInChildren(__filename, KILL_ROUND[proc], child);
