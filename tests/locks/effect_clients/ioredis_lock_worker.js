// One process of the held-out ioredis-lock recording (record.sh): ioredis-lock 4.0.0 on
// ioredis 4, unchanged, never used while building lockscope's recognizer (it is the
// measurement of an unseen client), contending with the other processes on two locks
// and logging what it did itself, one JSON line per event, to stdout:
//   {"t_us", "proc", "event": "attempt"|"acquired"|"gave_up"|"extended"|"released"|"expired", "lock", "owner", ...}
// (t_us when the line is written, after the reply's callback ran; sent_us, on calls,
// just before the command was handed to the client.)
// A Lock object draws its value (a uuid v1) once: this process keeps one per lock, so
// every hold and attempt of it on that lock carries the same value. It polls (SET PX NX
// every `delay` ms, `retries` more times); release and extend are scripts the library
// defines in ioredis (EVALSHA, EVAL on NOSCRIPT): delete / PEXPIRE if the value matches,
// answering 1/0. A wrapper around the client's `set` logs each attempt.
'use strict';
const Redis = require('ioredis');
const redislock = require('ioredis-lock');

const { port, proc, rounds, now_us, log, sleep } = require('./truth_log');
const LEASE_MS = 1000;

async function main() {
  const redis = new Redis({ port, host: '127.0.0.1' });
  let ok_reply_us = 0;
  const set = redis.set.bind(redis);
  redis.set = async (...a) => {
    const sent_us = now_us();
    const r = await set(...a);
    log({ event: 'attempt', lock: a[0], owner: a[1], reply: r, sent_us });
    if (r === 'OK') ok_reply_us = now_us();
    return r;
  };
  // orders polls every 50 ms (20 retries); stock every 150 ms (8 retries), so its
  // waiters leave it standing free longer than the idle threshold.
  const locks = {
    orders: redislock.createLock(redis, { timeout: LEASE_MS, retries: 20, delay: 50 }),
    stock: redislock.createLock(redis, { timeout: LEASE_MS, retries: 8, delay: 150 }),
  };
  for (let i = 0; i < rounds; ++i) {
    const name = i % 2 === 0 ? 'orders' : 'stock';
    const lock = locks[name], key = 'mutex:' + name;
    try {
      await lock.acquire(key);
    } catch (e) {
      log({ event: 'gave_up', lock: key, owner: '' });
      await sleep(Math.random() * 60);
      continue;
    }
    const owner = lock._id, acquired_us = ok_reply_us;
    log({ event: 'acquired', lock: key, owner });
    // One hold in four is long and extended every 600 ms; one in five (of the others)
    // outlives its lease without extending: the release then finds another value or none.
    const long = i % 4 === 3, overrun = !long && i % 5 === 4;
    const hold = long ? 1400 + Math.random() * 500 : overrun ? LEASE_MS + 150 + Math.random() * 200 : 30 + Math.random() * 150;
    const end = Date.now() + hold;
    let extended_ok = true;
    while (long && extended_ok && Date.now() + 600 < end) {
      await sleep(600);
      const sent_us = now_us();
      extended_ok = await lock.extend(LEASE_MS).then(() => true, () => false);
      log({ event: 'extended', lock: key, owner, reply: extended_ok ? 1 : 0, sent_us });
    }
    await sleep(Math.max(0, end - Date.now()));
    if (!extended_ok) continue;  // the library forgot the hold when the extend failed
    const sent_us = now_us();
    const released = await lock.release().then(() => true, () => false);
    log({ event: released ? 'released' : 'release_refused', lock: key, owner, reply: released ? 1 : 0, sent_us });
    if (overrun && !released) log({ event: 'expired', lock: key, owner, t_us: acquired_us + LEASE_MS * 1000 });
    await sleep(Math.random() * 60);
  }
  await redis.quit();
}
main().catch((e) => {
  log({ event: 'error', message: String(e) });
  process.exit(1);
});
