// One process of the held-out redlock 4 recording (record.sh): redlock 4.2.0 (node-redlock
// itself, the last release before its TypeScript rewrite) on node-redis 3.1, unchanged,
// never used while building lockscope (the twenty-seventh held-out set), contending with
// the other processes on two locks and logging what it did itself, one JSON line per
// event, to stdout:
//   {"t_us", "proc", "event": "attempt"|"acquired"|"gave_up"|"extended"|"extend_refused"|"released"|"release_refused"|"cleanup"|"expired", "lock", "owner", ...}
// (t_us when the line is written, after the reply came; sent_us, on calls, just before
// the command was handed to the client.)
// Its scripts are the multi-key ones of redlock 5 in captures/thirdparty (acquire: `exists`
// on every key, then `set key ARGV[1] PX ARGV[2]` on each, answering #KEYS or 0; release:
// `get` == ARGV[1] then `pcall("del")`, answering how many; extend: `get` ~= ARGV[1] answers
// 0, else `set ... PX` again), indented with tabs: other SHA1s than redlock 5's. Each call
// is an EVALSHA, its EVAL text sent only when the server answers NOSCRIPT (once per script
// for the whole server: the cache is shared by every connection). One random value (16
// bytes hex) for all attempts of a lock() call; **after each refused attempt the library
// sends its release script with that value** (it answers 0: logged as `cleanup`), then
// sleeps retryDelay ± retryJitter and tries again, retryCount times, then rejects (the
// give-up, right after that last clean-up). An extend runs the same retry loop with the
// extend script (its value kept). Each process runs its rounds in a child process (one
// connection); p3's child kills itself with SIGKILL once in the middle of a hold (it logs
// the key's expiry, its last set + ttl, just before: nothing after is sent) and a new
// child goes on with the next round. One hold in seven outlives its lease (the worker logs
// the expiry; its release then answers 0); one in four is extended twice. Over several
// servers (a comma-separated PORT) a Redlock quorum: every call goes to each server, a
// line names its server, and {"event": "group"} lines tell of each quorum acquired (with
// the servers that voted for it) and each attempt that failed its quorum (its clean-up); a
// quorum won while a server still refused is a give-up on that server, and a server won by
// an attempt that failed its quorum is released by its clean-up.
'use strict';
const { proc, rounds, now_us, log, sleep, runRoundsInChildren, processServers,
        redlocksOfPolicies } = require('./truth_log');

const TTL_MS = 600;
// stock retries 10 times every 80 ± 40 ms; audit 2 times every 200 ± 60 ms, so its
// waiters give up more often and may leave it standing free past the idle threshold. One
// round in six is a single try (retryCount 0).
const POLICY = { stock: { retryCount: 10, retryDelay: 80, retryJitter: 40 },
                 audit: { retryCount: 2, retryDelay: 200, retryJitter: 60 } };
const KILL_ROUND = { p3: 8 };  // stock

async function child(start) {
  const redis = require('redis');
  const Redlock = require('redlock');
  const { servers, quorum, at } = processServers();
  const clients = servers.map((s) => redis.createClient({ host: '127.0.0.1', port: Number(s.split(':')[1]) }));
  const probe = new Redlock(clients);
  const role = {};  // SHA1 or text -> script name
  for (const [name, s] of Object.entries(probe.scripts)) { role[s.hash] = name; role[s.value] = name; }
  const cur = { lock: '', value: '', releasing: false, failed_logged: false };
  const held = new Map();  // server -> when this process last set its key there
  const refused = new Set();  // servers refused since this process last took the key there
  // The truth: each script call as it reaches the client (node-redis 3 flattens the
  // library's `(sha1, [nkeys, key, value, ttl], cb)`), by its SHA1 or text, with its
  // answer; an EVALSHA answered NOSCRIPT did nothing (its EVAL follows) and is not logged.
  const wrap = (client, server, command) => {
    const orig = client[command].bind(client);
    client[command] = function (...args) {
      const cb = typeof args[args.length - 1] === 'function' ? args.pop() : null;
      const [script, , key, value] = args.flat();
      const name = role[script];
      if (quorum && name === 'unlockScript' && !cur.releasing && !cur.failed_logged) {
        // An attempt's clean-up: it did not get its majority, a quorum attempt that failed.
        cur.failed_logged = true;
        log({ event: 'group', outcome: 'failed', lock: key, owner: value, servers: [...held.keys()] });
      }
      const sent_us = now_us();
      return orig(...args, (err, r) => {
        if (!err) {
          if (name === 'lockScript') {
            cur.failed_logged = false;
            // The acquire answers how many keys it set: 1 is a won attempt ("OK" in the log).
            log({ event: 'attempt', lock: key, owner: value, ...at(server), reply: r === 1 ? 'OK' : r, sent_us });
            if (r === 1) {
              held.set(server, sent_us); refused.delete(server);
              log({ event: 'acquired', lock: key, owner: value, ...at(server) });
            } else {
              refused.add(server);
            }
          } else if (name === 'extendScript') {
            if (r === 1) held.set(server, sent_us);
            log({ event: r === 1 ? 'extended' : 'extend_refused', lock: key, owner: value, ...at(server), reply: r, sent_us });
          } else if (name === 'unlockScript') {
            // A release of a key this value holds there: the hold's end, whether the round
            // released it or a quorum attempt that failed cleaned up a server it had won.
            const holder = held.has(server) && cur.lock === key && cur.value === value;
            if (holder) held.delete(server);
            log({ event: holder ? (r === 1 ? 'released' : 'release_refused') : 'cleanup', lock: key, owner: value,
                  ...at(server), reply: r, sent_us });
          }
        }
        if (cb) cb(err, r);
      });
    };
  };
  clients.forEach((client, n) => { wrap(client, servers[n], 'evalsha'); wrap(client, servers[n], 'eval'); });
  const expire_held = () => {
    for (const [server, set_us] of held) log({ event: 'expired', lock: cur.lock, owner: cur.value, ...at(server), t_us: set_us + TTL_MS * 1000 });
  };
  const release = async (lock) => {
    cur.releasing = true;
    try { await lock.unlock(); } finally { cur.releasing = false; }
  };
  const locks = redlocksOfPolicies(Redlock, clients, POLICY, (value) => { cur.value = value; });
  for (let i = start; i < rounds; ++i) {
    const name = i % 2 === 0 ? 'stock' : 'audit';
    const key = `inventory:${name}`;
    const redlock = locks[i % 6 === 5 ? name + '_once' : name];
    cur.lock = key; cur.value = ''; held.clear(); refused.clear();
    let lock;
    try {
      lock = await redlock.lock(key, TTL_MS);
    } catch (e) {
      // On one server the give-up is the lock's; on several, each server that refused it.
      for (const server of quorum ? refused : [null]) log({ event: 'gave_up', lock: key, owner: cur.value, ...at(server) });
      await sleep(Math.random() * 60);
      continue;
    }
    if (quorum) {
      log({ event: 'group', outcome: 'acquired', lock: key, owner: lock.value, servers: [...held.keys()] });
      // A majority that split the servers: on a server that refused this value to the end,
      // the process stops waiting now that it holds the lock by the others.
      for (const server of refused) log({ event: 'gave_up', lock: key, owner: lock.value, ...at(server) });
    }
    if (KILL_ROUND[proc] === i) {
      await sleep(100 + Math.random() * 150);
      expire_held();
      process.kill(process.pid, 'SIGKILL');
      await sleep(10_000);
    }
    if (i % 7 === 3) {
      await sleep(TTL_MS + 150 + Math.random() * 100);
      expire_held();
      await release(lock).catch(() => {});
    } else if (i % 4 === 1) {
      for (let k = 0; k < 2; ++k) { await sleep(150 + Math.random() * 100); lock = await lock.extend(TTL_MS); }
      await sleep(20 + Math.random() * 100);
      await release(lock);
    } else {
      await sleep(20 + Math.random() * 380);
      await release(lock);
    }
    await sleep(Math.random() * 60);
  }
  await Promise.all(clients.map((c) => new Promise((r) => c.quit(r))));
  process.exit(0);
}

runRoundsInChildren(__filename, KILL_ROUND[proc], child);
