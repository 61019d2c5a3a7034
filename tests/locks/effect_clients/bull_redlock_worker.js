// One process of the held-out bull-redlock recording (record.sh): bull-redlock 2.2.1 (a fork
// of node-redlock 2 kept for the Bull queue, with retry and extend rules of its own) on
// ioredis 5, unchanged, never used while building lockscope (the twenty-first held-out
// set), contending with the other processes on two locks and logging what it did itself,
// one JSON line per event, to stdout:
//   {"t_us", "proc", "event": "attempt"|"acquired"|"gave_up"|"extended"|"extend_refused"|"released"|"release_refused"|"cleanup"|"expired", "lock", "owner", ...}
// (t_us when the line is written, after the reply came; sent_us, on calls, just before
// the command was handed to the client.)
// The acquire is `return redis.call("set", KEYS[1], ARGV[1], "NX", "PX", ARGV[2])` as an
// ioredis defineCommand (EVALSHA, EVAL once per connection on NOSCRIPT), one random value
// (16 bytes hex) for all attempts of a lock() call; after each refused attempt the library
// sends its unlock script as EVAL text with that value (it answers 0: logged as `cleanup`),
// then sleeps retryDelay ± retryJitter and tries again, retryCount times, then rejects (the
// give-up, right after that last clean-up). unlock is `if redis.call("get", KEYS[1]) ==
// ARGV[1] then return redis.call("del", KEYS[1]) else return 0 end`; extend runs the same
// retry loop as the acquire with the `pexpire` form of it (EVAL text, its value kept), and
// a refused extend is followed by that unlock too. Each process runs its rounds in a child
// process (one connection); p2's child kills itself with SIGKILL once in the middle of a
// hold (it logs the key's expiry, its last set + ttl, just before: nothing after is sent)
// and a new child goes on with the next round. One hold in seven outlives its lease (the
// worker logs the expiry; its unlock then answers 0); one in four is extended twice.
'use strict';
const { proc, rounds, now_us, log, sleep, runRoundsInChildren, processServers,
        redlocksOfPolicies } = require('./truth_log');

const TTL_MS = 500;
// invoice retries 10 times every 100 ± 50 ms; ledger 2 times every 150 ± 50 ms, so its
// waiters give up more often and may leave it standing free past the idle threshold. One
// round in six is a single try (retryCount 0).
const POLICY = { invoice: { retryCount: 10, retryDelay: 100, retryJitter: 50 },
                 ledger: { retryCount: 2, retryDelay: 150, retryJitter: 50 } };
const KILL_ROUND = { p2: 9 };  // ledger

async function child(start) {
  const Redis = require('ioredis');
  const Redlock = require('bull-redlock');
  const { servers, quorum, at } = processServers();
  const clients = servers.map((s) => new Redis({ host: '127.0.0.1', port: Number(s.split(':')[1]) }));
  const probe = new Redlock(clients);
  const cur = { lock: '', value: '', releasing: false, failed_logged: false };
  const held = new Map();  // server -> set_us of this process's key there
  const refused = new Set();  // servers refused since this process last took the key there
  // The truth: each script call as the library makes it, with its answer. The acquire is
  // the command the library defines on the connection; unlock and extend are EVAL texts.
  clients.forEach((client, n) => {
    const server = servers[n];
    const defineOrig = client.defineCommand.bind(client);
    client.defineCommand = function (name, def) {
      defineOrig(name, def);
      const cmdOrig = client[name].bind(client);
      client[name] = function (key, value, ttl, cb) {
        cur.failed_logged = false;
        const sent_us = now_us();
        const p = cmdOrig(key, value, ttl);
        p.then((r) => {
          log({ event: 'attempt', lock: key, owner: value, ...at(server), reply: r === 'OK' ? 'OK' : null, sent_us });
          if (r === 'OK') {
            held.set(server, sent_us); refused.delete(server);
            log({ event: 'acquired', lock: key, owner: value, ...at(server) });
          } else {
            refused.add(server);
          }
          cb(null, r);
        }, (e) => cb(e));
        return p;
      };
    };
    const evalOrig = client.eval.bind(client);
    client.eval = function (script, nkeys, key, value, ...rest) {
      const cb = typeof rest[rest.length - 1] === 'function' ? rest.pop() : null;
      if (quorum && script === probe.unlockScript && !cur.releasing && !cur.failed_logged) {
        // An attempt's clean-up: it did not get its majority, a quorum attempt that failed.
        cur.failed_logged = true;
        log({ event: 'group', outcome: 'failed', lock: key, owner: value, servers: [...held.keys()] });
      }
      const sent_us = now_us();
      const p = evalOrig(script, nkeys, key, value, ...rest);
      p.then((r) => {
        if (script === probe.extendScript) {
          if (r === 1) held.set(server, sent_us);
          log({ event: r === 1 ? 'extended' : 'extend_refused', lock: key, owner: value, ...at(server), reply: r, sent_us });
        } else if (script === probe.unlockScript) {
          const holder = held.has(server) && cur.lock === key && cur.value === value;
          if (holder) held.delete(server);
          log({ event: holder ? (r === 1 ? 'released' : 'release_refused') : 'cleanup', lock: key, owner: value,
                ...at(server), reply: r, sent_us });
        }
        if (cb) cb(null, r);
      }, (e) => { if (cb) cb(e); });
      return p;
    };
  });
  const expire_held = (key, value) => {
    for (const [server, set_us] of held) log({ event: 'expired', lock: key, owner: value, ...at(server), t_us: set_us + TTL_MS * 1000 });
  };
  const release = async (redlock, lock) => {
    cur.releasing = true;
    try { await redlock.unlock(lock); } finally { cur.releasing = false; }
  };
  const locks = redlocksOfPolicies(Redlock, clients, POLICY, (value) => { cur.value = value; });
  for (let i = start; i < rounds; ++i) {
    const name = i % 2 === 0 ? 'invoice' : 'ledger';
    const key = `billing:${name}`;
    const redlock = locks[i % 6 === 5 ? name + '_once' : name];
    cur.lock = key; cur.value = ''; held.clear(); refused.clear();
    let lock;
    try {
      lock = await redlock.lock(key, TTL_MS);
    } catch (e) {
      for (const server of refused) log({ event: 'gave_up', lock: key, owner: cur.value, ...at(server) });
      await sleep(Math.random() * 60);
      continue;
    }
    if (quorum) log({ event: 'group', outcome: 'acquired', lock: key, owner: lock.value, servers: [...held.keys()] });
    if (KILL_ROUND[proc] === i) {
      await sleep(100 + Math.random() * 100);
      expire_held(key, lock.value);
      process.kill(process.pid, 'SIGKILL');
      await sleep(10_000);
    }
    if (i % 7 === 3) {
      await sleep(TTL_MS + 150 + Math.random() * 100);
      expire_held(key, lock.value);
      await release(redlock, lock).catch(() => {});
    } else if (i % 4 === 1) {
      for (let k = 0; k < 2; ++k) { await sleep(120 + Math.random() * 40); lock = await redlock.extend(lock, TTL_MS); }
      await sleep(20 + Math.random() * 100);
      await release(redlock, lock);
    } else {
      await sleep(20 + Math.random() * 380);
      await release(redlock, lock);
    }
    await sleep(Math.random() * 60);
  }
  await Promise.all(clients.map((c) => c.quit()));
  process.exit(0);
}

runRoundsInChildren(__filename, KILL_ROUND[proc], child);
