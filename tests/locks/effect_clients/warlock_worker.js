// One process of the node-redis-warlock recording (record.sh): node-redis-warlock 1.0.2 on
// ioredis 5, unchanged, contending with the other processes on two locks and logging what
// it did itself, one JSON line per event, to stdout:
//   {"t_us", "proc", "event": "attempt"|"acquired"|"gave_up"|"extended"|"released", "lock", "owner", ...}
// (t_us when the line is written, after the reply's callback ran; sent_us, on calls,
// just before the command was handed to the client: a busy event loop delays the first.)
// `optimistic` polls (SET NX PX every 60 ms, at most 20 attempts) with a fresh id on
// every attempt; the release script copies KEYS/ARGV into Lua locals; `touch` takes the
// TTL and the id as KEYS[2] and KEYS[3] and extends with SET XX PX. A thin wrapper
// around the client's `set` logs each attempt's id and reply.
'use strict';
const Redis = require('ioredis');
const Warlock = require('node-redis-warlock');

const { port, proc, rounds, now_us, log, sleep } = require('./truth_log');
const LEASE_MS = 1000;

async function main() {
  const redis = new Redis({ port, host: '127.0.0.1' });
  let last = null;
  const set = redis.set.bind(redis);
  redis.set = (...a) => {
    const cb = a.pop();
    const sent_us = now_us();
    return set(...a, (err, r) => {
      log({ event: 'attempt', lock: a[0], owner: a[1], reply: r, sent_us });
      if (r === 'OK') last = a[1];
      cb(err, r);
    });
  };
  const warlock = Warlock(redis);
  const optimistic = (name) =>
    new Promise((resolve) => warlock.optimistic(name, LEASE_MS, 20, 60, (err, unlock) => resolve(err ? null : unlock)));
  const unlocked = (unlock) => new Promise((resolve) => unlock((err, r) => resolve(r)));
  for (let i = 0; i < rounds; ++i) {
    const name = i % 2 === 0 ? 'orders' : 'stock';
    const key = name + ':lock';
    const unlock = await optimistic(name);
    if (unlock === null) {
      log({ event: 'gave_up', lock: key, owner: '' });
      await sleep(Math.random() * 60);
      continue;
    }
    const owner = last;
    log({ event: 'acquired', lock: key, owner });
    // One hold in four outlives the lease, touched every 600 ms.
    const hold = i % 4 === 3 ? 1400 + Math.random() * 500 : 40 + Math.random() * 200;
    const end = Date.now() + hold;
    while (Date.now() + 600 < end) {
      await sleep(600);
      const sent_us = now_us();
      const r = await warlock.touch(name, owner, LEASE_MS);
      log({ event: 'extended', lock: key, owner, reply: r, sent_us });
    }
    await sleep(Math.max(0, end - Date.now()));
    const sent_us = now_us();
    const r = await unlocked(unlock);
    log({ event: r === 1 ? 'released' : 'release_refused', lock: key, owner, reply: r, sent_us });
    await sleep(Math.random() * 60);
  }
  await redis.quit();
}
main().catch((e) => {
  log({ event: 'error', message: String(e) });
  process.exit(1);
});
