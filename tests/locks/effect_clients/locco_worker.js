// One process of the held-out locco recording (record.sh): @kontsedal/locco 0.1.0's Locker
// over its IoRedisAdapter on ioredis 5, unchanged, never used while building lockscope (the
// sixth held-out set), contending with the other processes on two locks and logging what
// it did itself, one JSON line per event, to stdout:
//   {"t_us", "proc", "event": "attempt"|"acquired"|"gave_up"|"extended"|"released"|"release_refused"|"expired", "lock", "owner", ...}
// (t_us when the line is written, after the reply came; sent_us, on calls, just before
// the command was handed to the client.)
// Each locker.lock() draws a fresh value (16 random bytes, hex) that all its attempts
// share. Acquire `SET key value PX ttl NX`, retried every retryDelay ms up to retryTimes
// attempts in all, then a RetryError (the give-up, right after the last refusal). Release
// and extend are scripts defined in ioredis (EVALSHA, EVAL on NOSCRIPT): release deletes
// if the value matches (1/0); extend re-SETs the value with `PX ttl` if it matches and
// answers the SET's status reply "OK" (else nil): a renewal that rewrites the key.
'use strict';
const Redis = require('ioredis');
const { Locker, IoRedisAdapter } = require('@kontsedal/locco');

const { port, proc, rounds, now_us, log, sleep } = require('./truth_log');
const LEASE_MS = 1000;

async function main() {
  const redis = new Redis({ port, host: '127.0.0.1' });
  let ok_reply_us = 0;
  const set = redis.set.bind(redis);
  redis.set = async (...a) => {
    const sent_us = now_us();
    const r = await set(...a);
    log({ event: 'attempt', lock: a[0], owner: a[1], reply: r === 'OK' ? 'OK' : 0, sent_us });
    if (r === 'OK') ok_reply_us = now_us();
    return r;
  };
  const adapter = new IoRedisAdapter({ client: redis });
  // orders polls every 50 ms, 40 attempts (2 s); stock every 150 ms, 6 attempts, so its
  // waiters leave it standing free longer than the idle threshold and some give up.
  const lockers = {
    orders: new Locker({ adapter, retrySettings: { retryDelay: 50, retryTimes: 40 } }),
    stock: new Locker({ adapter, retrySettings: { retryDelay: 150, retryTimes: 6 } }),
  };
  for (let i = 0; i < rounds; ++i) {
    const name = i % 2 === 0 ? 'orders' : 'stock';
    const key = 'mutex:' + name;
    const lock = lockers[name].lock(key, LEASE_MS);
    const owner = lock.uniqueValue;
    try {
      await lock.acquire();
    } catch (e) {
      if (!/retry|Total time/i.test(String(e && e.message))) throw e;
      log({ event: 'gave_up', lock: key, owner });
      await sleep(Math.random() * 60);
      continue;
    }
    const acquired_us = ok_reply_us;
    log({ event: 'acquired', lock: key, owner });
    // One hold in four is long and extended every 600 ms; one in five of the others
    // outlives its lease without extending: its release then finds another value or none.
    const long = i % 4 === 3, overrun = !long && i % 5 === 4;
    const hold = long ? 1400 + Math.random() * 500 : overrun ? LEASE_MS + 150 + Math.random() * 200 : 30 + Math.random() * 150;
    const end = Date.now() + hold;
    let extended_ok = true;
    while (long && extended_ok && Date.now() + 600 < end) {
      await sleep(600);
      const sent_us = now_us();
      extended_ok = await lock.extend(LEASE_MS).then(() => true, () => false);
      log({ event: 'extended', lock: key, owner, reply: extended_ok ? 'OK' : 0, sent_us });
    }
    await sleep(Math.max(0, end - Date.now()));
    const sent_us = now_us();
    const released = await lock.release({ throwOnFail: true }).then(() => true, () => false);
    log({ event: released ? 'released' : 'release_refused', lock: key, owner, reply: released ? 1 : 0, sent_us });
    if (overrun && !released) log({ event: 'expired', lock: key, owner, t_us: acquired_us + LEASE_MS * 1000 });
    await sleep(Math.random() * 60);
  }
  await redis.quit();
}
main().catch((e) => {
  log({ event: 'error', message: String(e && e.stack) });
  process.exit(1);
});
