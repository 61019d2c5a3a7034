// One process of the held-out redislock recording (record.sh): redislock 1.3.0 on
// node-redis 2.8, unchanged, never used while building lockscope (the seventh held-out
// set), contending with the other processes on two locks and logging what it did itself,
// one JSON line per event, to stdout:
//   {"t_us", "proc", "event": "attempt"|"acquired"|"gave_up"|"extended"|"released"|"release_refused"|"expired", "lock", "owner", ...}
// (t_us when the line is written, after the reply came; sent_us, on calls, just before
// the command was handed to the client.)
// A Lock draws one uuid v1 when it is created and uses it for every attempt and hold it
// makes. Acquire `SET key id PX timeout NX`, retried every `delay` ms up to `retries`
// more times, then a LockAcquisitionError right after the last refusal (the give-up).
// Release and extend are scripts run by redis-evalsha (EVALSHA of the text's SHA1, EVAL
// on NOSCRIPT): `GET == ARGV[1] then DEL` (1/0) and `GET == ARGV[1] then PEXPIRE
// ARGV[2]` (1/0). orders takes a new Lock (a new id) for each acquire, as the README's
// example does; stock keeps one Lock per process, so one id for all its holds.
'use strict';
const redis = require('redis');
const redislock = require('redislock');

const { port, proc, rounds, now_us, log, sleep } = require('./truth_log');
const LEASE_MS = 1000;

async function main() {
  const client = redis.createClient(port, '127.0.0.1');
  // redislock promisifies client.set when its first Lock is made: wrap it before.
  let ok_reply_us = 0;
  const set = client.set.bind(client);
  client.set = (...a) => {
    const cb = a.pop();
    const sent_us = now_us();
    return set(...a, (err, r) => {
      if (!err) {
        log({ event: 'attempt', lock: a[0], owner: a[1], reply: r === 'OK' ? 'OK' : 0, sent_us });
        if (r === 'OK') ok_reply_us = now_us();
      }
      cb(err, r);
    });
  };
  // orders polls every 50 ms, 30 retries (1.5 s); stock every 150 ms, 5 retries, so its
  // waiters leave it standing free longer than the idle threshold and some give up.
  const options = { orders: { timeout: LEASE_MS, retries: 30, delay: 50 },
                    stock: { timeout: LEASE_MS, retries: 5, delay: 150 } };
  const stock = redislock.createLock(client, options.stock);
  for (let i = 0; i < rounds; ++i) {
    const name = i % 2 === 0 ? 'orders' : 'stock';
    const key = 'lock:' + name;
    const lock = name === 'stock' ? stock : redislock.createLock(client, options.orders);
    const owner = lock._id;
    try {
      await lock.acquire(key);
    } catch (e) {
      if (!(e instanceof redislock.LockAcquisitionError) || !/Could not acquire/.test(e.message)) throw e;
      log({ event: 'gave_up', lock: key, owner });
      await sleep(Math.random() * 60);
      continue;
    }
    let lease_from_us = ok_reply_us;
    log({ event: 'acquired', lock: key, owner });
    // One hold in four is long and extended every 600 ms; one in five of the others
    // outlives its lease without extending: its release then finds another id or none.
    const long = i % 4 === 3, overrun = !long && i % 5 === 4;
    const hold = long ? 1400 + Math.random() * 500 : overrun ? LEASE_MS + 150 + Math.random() * 200 : 30 + Math.random() * 150;
    const end = Date.now() + hold;
    let extended_ok = true;
    while (long && extended_ok && Date.now() + 600 < end) {
      await sleep(600);
      const sent_us = now_us();
      extended_ok = await lock.extend(LEASE_MS).then(() => true, () => false);
      log({ event: 'extended', lock: key, owner, reply: extended_ok ? 1 : 0, sent_us });
      if (extended_ok) lease_from_us = sent_us;
    }
    await sleep(Math.max(0, end - Date.now()));
    if (!extended_ok) {  // the Lock forgot its key: release() would send nothing
      log({ event: 'expired', lock: key, owner, t_us: lease_from_us + LEASE_MS * 1000 });
      continue;
    }
    const sent_us = now_us();
    const released = await lock.release().then(() => true, () => false);
    log({ event: released ? 'released' : 'release_refused', lock: key, owner, reply: released ? 1 : 0, sent_us });
    if (!released) log({ event: 'expired', lock: key, owner, t_us: lease_from_us + LEASE_MS * 1000 });
    await sleep(Math.random() * 60);
  }
  client.quit();
  await sleep(50);
  process.exit(0);
}
main().catch((e) => {
  log({ event: 'error', message: String(e && e.stack) });
  process.exit(1);
});
