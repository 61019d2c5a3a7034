// One process of the redis-semaphore recording (record.sh): redis-semaphore's Mutex on
// ioredis, unchanged, contending with the other processes on two locks, and logging what
// it did itself, one JSON line per event, to stdout:
//   {"t_us", "proc", "event": "acquired"|"released"|"refresh", "lock", "owner", ...}
// `acquired` is logged when acquire() resolved, with `attempts` = the SET NX calls it
// made (seen by a thin wrapper around the client's `set`); `refresh` is each call of the
// Mutex's own refresh script with the server's reply; `released` when release() resolved.
'use strict';
const Redis = require('ioredis');
const { Mutex } = require('redis-semaphore');

const { port, proc, rounds, now_us, log, sleep } = require('./truth_log');

async function main() {
  const client = new Redis({ port, host: '127.0.0.1', lazyConnect: false });
  // Thin wrappers: count each SET NX attempt and log each refresh script call's reply.
  const attempts = new Map();
  const set = client.set.bind(client);
  client.set = async (...a) => {
    const r = await set(...a);
    attempts.set(a[1], (attempts.get(a[1]) || 0) + 1);
    return r;
  };
  for (const verb of ['evalsha', 'eval']) {
    const f = client[verb].bind(client);
    client[verb] = async (...a) => {
      const r = await f(...a);
      // The refresh script takes [key, identifier, lockTimeout]; the release [key, identifier].
      if (a.length === 5) log({ event: 'refresh', lock: a[2], owner: a[3], reply: r });
      return r;
    };
  }
  for (let i = 0; i < rounds; ++i) {
    const name = i % 2 === 0 ? 'orders' : 'stock';
    const mutex = new Mutex(client, name, { lockTimeout: 1000, acquireTimeout: 20000, retryInterval: 40 });
    await mutex.acquire();
    log({ event: 'acquired', lock: 'mutex:' + name, owner: mutex.identifier, attempts: attempts.get(mutex.identifier) });
    // Most holds are short; one in four outlives the refresh interval (800 ms) once or twice.
    await sleep(i % 4 === 3 ? 1300 + Math.random() * 700 : 40 + Math.random() * 160);
    await mutex.release();
    log({ event: 'released', lock: 'mutex:' + name, owner: mutex.identifier });
    await sleep(Math.random() * 60);
  }
  await client.quit();
}
main().catch((e) => {
  log({ event: 'error', message: String(e) });
  process.exit(1);
});
