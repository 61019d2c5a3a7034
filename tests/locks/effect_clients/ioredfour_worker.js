// One process of the ioredfour recording (record.sh): ioredfour 1.4.3 on ioredis 5,
// unchanged, contending with the other processes on two locks and logging what it did
// itself, one JSON line per event, to stdout:
//   {"t_us", "proc", "event": "attempt"|"acquired"|"gave_up"|"extended"|"released", "lock", "owner", ...}
// (t_us when the line is written, after the reply's callback ran; sent_us, on calls,
// just before the command was handed to the client: a busy event loop delays the first.)
// The lock is a hash whose owner is an index the acquire script draws from a shared
// counter (KEYS[2]) and answers in a list {1, index, ttl} ({0, -1, pttl} when busy);
// waiters wake on a release channel shared by every lock, or when the TTL they were
// told runs out. `acquireLock` (one attempt) is wrapped to log each attempt.
'use strict';
const Lock = require('ioredfour');

const { port, proc, rounds, now_us, log, sleep } = require('./truth_log');
const LEASE_MS = 1000;

async function main() {
  const lock = new Lock({ redis: { port, host: '127.0.0.1' }, namespace: 'rf' });
  const attempt = lock.acquireLock.bind(lock);
  lock.acquireLock = async (id, ttl) => {
    const sent_us = now_us();
    const r = await attempt(id, ttl);
    log({ event: 'attempt', lock: 'rf:' + id, owner: r.success ? String(r.index) : '', reply: r.success ? 'OK' : null, sent_us });
    return r;
  };
  await sleep(200);  // the subscriber's SUBSCRIBE first
  for (let i = 0; i < rounds; ++i) {
    const name = i % 2 === 0 ? 'orders' : 'stock';
    const key = 'rf:' + name;
    const held = await lock.waitAcquireLock(name, LEASE_MS, 2500);
    if (!held.success) {
      log({ event: 'gave_up', lock: key, owner: '' });
      continue;
    }
    const owner = String(held.index);
    log({ event: 'acquired', lock: key, owner });
    const hold = i % 4 === 3 ? 1300 + Math.random() * 400 : 40 + Math.random() * 200;
    const end = Date.now() + hold;
    while (Date.now() + 600 < end) {
      await sleep(600);
      const sent_us = now_us();
      const r = await lock.extendLock(held, LEASE_MS);
      log({ event: 'extended', lock: key, owner, reply: r.success ? 1 : 0, sent_us });
    }
    await sleep(Math.max(0, end - Date.now()));
    const sent_us = now_us();
    const r = await lock.releaseLock(held);
    log({ sent_us, event: r.success && r.result === 'released' ? 'released' : 'release_refused', lock: key, owner, reply: r.result });
    await sleep(Math.random() * 60);
  }
  process.exit(0);
}
main().catch((e) => {
  log({ event: 'error', message: String(e) });
  process.exit(1);
});
