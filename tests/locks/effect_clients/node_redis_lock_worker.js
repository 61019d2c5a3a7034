// One process of the held-out node-redis-lock recording (record.sh): node-redis-lock 1.0.1
// on node-redis 2.8 with redis-scripto 0.1.3, unchanged, never used while building
// lockscope (the seventh held-out set), contending with the other processes on two locks
// and logging what it did itself, one JSON line per event, to stdout:
//   {"t_us", "proc", "event": "attempt"|"acquired"|"gave_up"|"extended"|"released"|"release_refused"|"expired", "lock", "owner", ...}
// (t_us when the line is written, after the reply came; sent_us, on calls, just before
// the command was handed to the client.)
// A Lock draws one uuid v4 when it is made and uses it for every acquire (this worker's
// one Lock a process: one value for all its attempts and holds, on both locks).
// redis-scripto sends `SCRIPT LOAD` of the three scripts when the Lock is made and again
// on connect, then runs each by EVALSHA (EVAL while the SHA1s are not back yet). Every
// script takes **its value and ttl as KEYS**, not ARGV: `EVALSHA sha 3 key value ttl`.
// Acquire: `SETNX key value`, then `EXPIRE key ttl` (seconds) if it set; answers the
// SETNX's 1/0. One attempt per acquire() (the library does not retry): this worker polls
// every 50 ms up to 30 attempts (orders) or every 150 ms up to 6 (stock), then gives up.
// Release: `GET == value then DEL` (1/0). Renew: `GET == value then EXPIRE key ttl` (1/0).
'use strict';
const Lock = require('node-redis-lock');

const { port, proc, rounds, now_us, log, sleep } = require('./truth_log');
const LEASE_S = 1;

const call = (fn) => new Promise((resolve) => fn((e, r) => resolve(!e && r === true)));

async function main() {
  const lock = new Lock({ namespace: 'locks', port, host: '127.0.0.1' });
  const owner = lock.value;
  const spacing = { orders: 50, stock: 150 }, attempts = { orders: 30, stock: 6 };
  for (let i = 0; i < rounds; ++i) {
    const name = i % 2 === 0 ? 'orders' : 'stock';
    const key = 'locks:' + name;
    let acquired_us = 0;
    for (let n = 1; n <= attempts[name]; ++n) {
      const sent_us = now_us();
      const ok = await call((cb) => lock.acquire(name, LEASE_S, cb));
      log({ event: 'attempt', lock: key, owner, reply: ok ? 'OK' : 0, sent_us });
      if (ok) { acquired_us = now_us(); break; }
      if (n < attempts[name]) await sleep(spacing[name]);
    }
    if (!acquired_us) {
      log({ event: 'gave_up', lock: key, owner });
      await sleep(Math.random() * 60);
      continue;
    }
    let lease_from_us = acquired_us;
    log({ event: 'acquired', lock: key, owner });
    // One hold in four is long and renewed every 600 ms; one in five of the others
    // outlives its 1 s lease without renewing: its release then finds another value or none.
    const long = i % 4 === 3, overrun = !long && i % 5 === 4;
    const hold = long ? 1400 + Math.random() * 500 : overrun ? LEASE_S * 1000 + 150 + Math.random() * 200 : 30 + Math.random() * 150;
    const end = Date.now() + hold;
    let renewed_ok = true;
    while (long && renewed_ok && Date.now() + 600 < end) {
      await sleep(600);
      const sent_us = now_us();
      renewed_ok = await call((cb) => lock.renew(name, LEASE_S, cb));
      log({ event: 'extended', lock: key, owner, reply: renewed_ok ? 1 : 0, sent_us });
      if (renewed_ok) lease_from_us = sent_us;
    }
    await sleep(Math.max(0, end - Date.now()));
    const sent_us = now_us();
    const released = await call((cb) => lock.release(name, cb));
    log({ event: released ? 'released' : 'release_refused', lock: key, owner, reply: released ? 1 : 0, sent_us });
    if (!released) log({ event: 'expired', lock: key, owner, t_us: lease_from_us + LEASE_S * 1000 * 1000 });
    await sleep(Math.random() * 60);
  }
  lock.quit();
  await sleep(50);
  process.exit(0);
}
main().catch((e) => {
  log({ event: 'error', message: String(e && e.stack) });
  process.exit(1);
});
