// One process of the held-out redlock-universal recording (record.sh): redlock-universal
// 0.8.5 on ioredis 5, unchanged, never used while building lockscope's recognizer (it
// is the measurement of an unseen client), contending with the other processes on two
// locks and logging what it did itself, one JSON line per event, to stdout:
//   {"t_us", "proc", "event": "attempt"|"acquired"|"gave_up"|"extended"|"released"|"expired", "lock", "owner", ...}
// (t_us when the line is written, after the reply's callback ran; sent_us, on calls,
// just before the command was handed to the client.)
// A SimpleLock polls (SET PX NX every 50 or 150 ms, at most 21 or 9 attempts) with one value for
// all attempts of an acquire; its scripts are SCRIPT LOADed, then sent as EVALSHA:
// release deletes if the value matches (answers 1/0), extend re-expires if it matches
// (1/0), and the adapter's atomicExtend takes [value, minTTL, newTTL] and answers a
// list {1, ttl before}. A wrapper around the adapter's setNX logs each attempt.
'use strict';
const Redis = require('ioredis');
const { createLock, IoredisAdapter } = require('redlock-universal');

const { port, proc, rounds, now_us, log, sleep } = require('./truth_log');
const LEASE_MS = 1000;

async function main() {
  const redis = new Redis({ port, host: '127.0.0.1' });
  const adapter = new IoredisAdapter(redis);
  let ok_reply_us = 0;
  const setNX = adapter.setNX.bind(adapter);
  adapter.setNX = async (key, value, ttl) => {
    const sent_us = now_us();
    const r = await setNX(key, value, ttl);
    log({ event: 'attempt', lock: key, owner: value, reply: r, sent_us });
    if (r === 'OK') ok_reply_us = now_us();
    return r;
  };
  const locks = {};
  // orders polls every 50 ms; stock every 150 ms, so its waiters leave it standing free
  // for longer than the idle threshold (free-while-waiting stretches).
  for (const [name, retryAttempts, retryDelay] of [['orders', 20, 50], ['stock', 8, 150]]) {
    const key = 'locks:' + name;
    locks[name] = createLock({ adapter, key, ttl: LEASE_MS, retryAttempts, retryDelay });
  }
  for (let i = 0; i < rounds; ++i) {
    const name = i % 2 === 0 ? 'orders' : 'stock';
    const lock = locks[name], key = 'locks:' + name;
    let handle;
    try {
      handle = await lock.acquire();
    } catch (e) {
      log({ event: 'gave_up', lock: key, owner: '' });
      await sleep(Math.random() * 60);
      continue;
    }
    const owner = handle.value, acquired_us = ok_reply_us;
    log({ event: 'acquired', lock: key, owner });
    // One hold in four is long and extended every 600 ms (alternately by the extend
    // script and by atomicExtend); one in five outlives its lease without extending.
    const long = i % 4 === 3, overrun = !long && i % 5 === 4;
    const hold = long ? 1400 + Math.random() * 500 : overrun ? LEASE_MS + 150 + Math.random() * 200 : 30 + Math.random() * 150;
    const end = Date.now() + hold;
    let n = 0;
    while (long && Date.now() + 600 < end) {
      await sleep(600);
      const sent_us = now_us();
      if (n++ % 2 === 0) {
        const r = await lock.extend(handle, LEASE_MS);
        log({ event: 'extended', lock: key, owner, reply: r ? 1 : 0, sent_us, how: 'extend' });
      } else {
        const r = await adapter.atomicExtend(key, owner, 100, LEASE_MS);
        log({ event: 'extended', lock: key, owner, reply: [r.resultCode, r.actualTTL], sent_us, how: 'atomicExtend' });
      }
    }
    await sleep(Math.max(0, end - Date.now()));
    const sent_us = now_us();
    const r = await lock.release(handle);
    log({ event: r ? 'released' : 'release_refused', lock: key, owner, reply: r ? 1 : 0, sent_us });
    if (overrun && !r) log({ event: 'expired', lock: key, owner, t_us: acquired_us + LEASE_MS * 1000 });
    await sleep(Math.random() * 60);
  }
  await redis.quit();
}
main().catch((e) => {
  log({ event: 'error', message: String(e) });
  process.exit(1);
});
