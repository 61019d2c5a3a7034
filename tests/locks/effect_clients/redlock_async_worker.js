// One process of the held-out redlock-async recording (record.sh): redlock-async
// 3.1.2-fix.2 (a fork of node-redlock 3, promises instead of callbacks) on ioredis 5,
// unchanged, never used while building lockscope (the eleventh held-out set), contending
// with the other processes on two locks and logging what it did itself, one JSON line per
// event, to stdout:
//   {"t_us", "proc", "event": "attempt"|"acquired"|"gave_up"|"extended"|"released"|"release_refused"|"cleanup"|"expired", "lock", "owner", ...}
// (t_us when the line is written, after the reply came; sent_us, on calls, just before
// the command was handed to the client.)
// Every call is an EVAL of the script's text, one key (not the multi-key EVALSHA scripts of
// redlock 5 in captures/thirdparty): lock `return redis.call("set", KEYS[1], ARGV[1], "NX",
// "PX", ARGV[2])` with one random value (16 bytes hex) for all attempts of a lock() call;
// **after each refused attempt the library sends its unlock script with that value** (it
// answers 0: logged as `cleanup`), then sleeps retryDelay ± retryJitter and tries again,
// retryCount times, then rejects (the give-up, right after that last cleanup). unlock is
// `if redis.call("get", KEYS[1]) == ARGV[1] then return redis.call("del", KEYS[1]) else
// return 0 end`; extend the same with `pexpire`, ARGV[2] the new ttl (its value kept). One
// connection a process. One hold in five outlives its 1 s lease (the worker logs the
// expiry; its unlock then answers 0); one in four is extended twice.
'use strict';
const Redis = require('ioredis');
const Redlock = require('redlock-async');
const { port, proc, rounds, now_us, log, sleep } = require('./truth_log');

const TTL_MS = 1000;
// orders retries 12 times every 100 ± 50 ms; stock 3 times every 300 ± 100 ms, so its
// waiters leave it standing free longer than the idle threshold and some give up.
const POLICY = { orders: { retryCount: 12, retryDelay: 100, retryJitter: 50 },
                 stock: { retryCount: 3, retryDelay: 300, retryJitter: 100 } };

async function main() {
  const client = new Redis({ host: '127.0.0.1', port });
  const probe = new Redlock([client]);
  const cur = { lock: '', value: '', held: false, set_us: 0 };
  // The truth: each script call as the library makes it, by its text, with its answer.
  const evalOrig = client.eval.bind(client);
  client.eval = function (script, nkeys, key, value, ...rest) {
    const cb = typeof rest[rest.length - 1] === 'function' ? rest.pop() : null;
    const sent_us = now_us();
    const p = evalOrig(script, nkeys, key, value, ...rest);
    p.then((r) => {
      if (script === probe.lockScript) {
        log({ event: 'attempt', lock: key, owner: value, reply: r === 'OK' ? 'OK' : null, sent_us });
        if (r === 'OK') { cur.held = true; cur.set_us = sent_us; log({ event: 'acquired', lock: key, owner: value }); }
      } else if (script === probe.extendScript) {
        if (r === 1) cur.set_us = sent_us;
        log({ event: r === 1 ? 'extended' : 'extend_refused', lock: key, owner: value, reply: r, sent_us });
      } else if (script === probe.unlockScript) {
        const holder = cur.held && cur.lock === key && cur.value === value;
        if (holder) cur.held = false;
        log({ event: holder ? (r === 1 ? 'released' : 'release_refused') : 'cleanup', lock: key, owner: value, reply: r, sent_us });
      }
      if (cb) cb(null, r);
    }, (e) => { if (cb) cb(e); });
    return p;
  };
  const locks = { orders: new Redlock([client], POLICY.orders), stock: new Redlock([client], POLICY.stock) };
  for (let i = 0; i < rounds; ++i) {
    const name = i % 2 === 0 ? 'orders' : 'stock';
    const key = `locks:${name}`;
    cur.lock = key; cur.held = false;
    const origRandom = locks[name]._random.bind(locks[name]);
    locks[name]._random = () => (cur.value = origRandom());
    let lock;
    try {
      lock = await locks[name].lock(key, TTL_MS);
    } catch (e) {
      log({ event: 'gave_up', lock: key, owner: cur.value });
      await sleep(Math.random() * 60);
      continue;
    }
    if (i % 5 === 4) {
      await sleep(TTL_MS + 200 + Math.random() * 200);
      log({ event: 'expired', lock: key, owner: lock.value, t_us: cur.set_us + TTL_MS * 1000 });
      await locks[name].unlock(lock).catch(() => {});
    } else if (i % 4 === 1) {
      for (let k = 0; k < 2; ++k) { await sleep(500 + Math.random() * 100); lock = await locks[name].extend(lock, TTL_MS); }
      await sleep(100 + Math.random() * 100);
      await locks[name].unlock(lock);
    } else {
      await sleep(30 + Math.random() * 150);
      await locks[name].unlock(lock);
    }
    await sleep(Math.random() * 60);
  }
  await client.quit();
  process.exit(0);
}
main().catch((e) => {
  log({ event: 'error', message: String(e && e.stack) });
  process.exit(1);
});
