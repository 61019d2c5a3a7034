// One process of the held-out ioredis-mutex recording (record.sh): ioredis-mutex 1.0.0 (on
// its own ioredis 3), unchanged, never used while building lockscope (the fourth held-out
// set), contending with the other processes on two locks and logging what it did itself,
// one JSON line per event, to stdout:
//   {"t_us", "proc", "event": "attempt"|"acquired"|"released", "lock", "owner", ...}
// (t_us when the line is written, after the reply came; sent_us, on calls, just before
// the command was handed to the client.)
// The client's whole protocol, over two module-wide connections: `SET key mutex NX` (the
// same value "mutex" for every holder, no expiry); a refused attempt waits for a message
// on the channel `mutex-unlock` (SUBSCRIBEd once at start-up, on the second connection)
// naming its key, then every waiter on that key attempts again; the release is `DEL key`,
// then `PUBLISH mutex-unlock key`. It has no timeout (no give-up), no lease (no expiry) and
// no extend.
'use strict';
const path = require('path');
const { port, proc, rounds, now_us, log, sleep } = require('./truth_log');

process.env.REDIS_URL = `redis://127.0.0.1:${port}`;
// The ioredis the package itself loads (its own 3.x), to see its calls.
const mutexDir = path.dirname(require.resolve('ioredis-mutex'));
const Redis = require(require.resolve('ioredis', { paths: [mutexDir] }));
const set = Redis.prototype.set;
Redis.prototype.set = function (key, value, mode, cb) {
  const sent_us = now_us();
  return set.call(this, key, value, mode, (err, r) => {
    if (!err) log({ event: 'attempt', lock: key, owner: value, reply: r === 'OK' ? 'OK' : 0, sent_us });
    cb(err, r);
  });
};
const del = Redis.prototype.del;
Redis.prototype.del = function (key) {
  const sent_us = now_us();
  return del.call(this, key).then((r) => {
    log({ event: r === 1 ? 'released' : 'release_refused', lock: key, owner: 'mutex', reply: r, sent_us });
    return r;
  });
};
const mutex = require('ioredis-mutex');

async function main() {
  await sleep(200);  // its connections and SUBSCRIBE, made at require time
  for (let i = 0; i < rounds; ++i) {
    const key = i % 2 === 0 ? 'locks:orders' : 'locks:stock';
    await mutex.getMutex(key);
    log({ event: 'acquired', lock: key, owner: 'mutex' });
    // One hold in four is long.
    await sleep(i % 4 === 3 ? 300 + Math.random() * 300 : 30 + Math.random() * 150);
    await mutex.freeMutex(key);
    await sleep(Math.random() * 60);
  }
  await sleep(100);  // the last PUBLISH
  process.exit(0);
}
main().catch((e) => {
  log({ event: 'error', message: String(e) });
  process.exit(1);
});
