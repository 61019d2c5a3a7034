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
// the expiry; its release then answers 0); one in four is extended twice.
'use strict';
const { proc, rounds, now_us, log, sleep, runRoundsInChildren } = require('./truth_log');

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
  const port = Number(process.argv[2]);
  const client = redis.createClient({ host: '127.0.0.1', port });
  const probe = new Redlock([client]);
  const role = {};  // SHA1 or text -> script name
  for (const [name, s] of Object.entries(probe.scripts)) { role[s.hash] = name; role[s.value] = name; }
  const cur = { lock: '', value: '', held: false, set_us: 0, releasing: false };
  // The truth: each script call as it reaches the client (node-redis 3 flattens the
  // library's `(sha1, [nkeys, key, value, ttl], cb)`), by its SHA1 or text, with its
  // answer; an EVALSHA answered NOSCRIPT did nothing (its EVAL follows) and is not logged.
  const wrap = (command) => {
    const orig = client[command].bind(client);
    client[command] = function (...args) {
      const cb = typeof args[args.length - 1] === 'function' ? args.pop() : null;
      const [script, , key, value] = args.flat();
      const sent_us = now_us();
      return orig(...args, (err, r) => {
        if (!err) {
          const name = role[script];
          if (name === 'lockScript') {
            // The acquire answers how many keys it set: 1 is a won attempt ("OK" in the log).
            log({ event: 'attempt', lock: key, owner: value, reply: r === 1 ? 'OK' : r, sent_us });
            if (r === 1) { cur.held = true; cur.set_us = sent_us; log({ event: 'acquired', lock: key, owner: value }); }
          } else if (name === 'extendScript') {
            if (r === 1) cur.set_us = sent_us;
            log({ event: r === 1 ? 'extended' : 'extend_refused', lock: key, owner: value, reply: r, sent_us });
          } else if (name === 'unlockScript') {
            const holder = cur.releasing && cur.held && cur.lock === key && cur.value === value;
            if (holder) cur.held = false;
            log({ event: holder ? (r === 1 ? 'released' : 'release_refused') : 'cleanup', lock: key, owner: value,
                  reply: r, sent_us });
          }
        }
        if (cb) cb(err, r);
      });
    };
  };
  wrap('evalsha');
  wrap('eval');
  const expire_held = () => log({ event: 'expired', lock: cur.lock, owner: cur.value, t_us: cur.set_us + TTL_MS * 1000 });
  const release = async (lock) => {
    cur.releasing = true;
    try { await lock.unlock(); } finally { cur.releasing = false; }
  };
  const locks = {};
  for (const name of Object.keys(POLICY)) {
    locks[name] = new Redlock([client], POLICY[name]);
    locks[name + '_once'] = new Redlock([client], { ...POLICY[name], retryCount: 0 });
  }
  for (let i = start; i < rounds; ++i) {
    const name = i % 2 === 0 ? 'stock' : 'audit';
    const key = `inventory:${name}`;
    const redlock = locks[i % 6 === 5 ? name + '_once' : name];
    cur.lock = key; cur.value = ''; cur.held = false;
    const origRandom = redlock._random.bind(redlock);
    redlock._random = () => (cur.value = origRandom());
    let lock;
    try {
      lock = await redlock.lock(key, TTL_MS);
    } catch (e) {
      log({ event: 'gave_up', lock: key, owner: cur.value });
      await sleep(Math.random() * 60);
      continue;
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
  await new Promise((r) => client.quit(r));
  process.exit(0);
}

runRoundsInChildren(__filename, KILL_ROUND[proc], child);
