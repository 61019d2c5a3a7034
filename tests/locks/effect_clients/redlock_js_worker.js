// One process of the held-out redlock-js recording (record.sh): redlock-js 1.1.2 on
// ioredis 5, unchanged, never used while building lockscope (the ninth held-out set),
// contending with the other processes on two locks and logging what it did itself, one
// JSON line per event, to stdout:
//   {"t_us", "proc", "event": "attempt"|"acquired"|"gave_up"|"released"|"expired", "lock", "owner", ...}
// (t_us when the line is written, after the reply came; sent_us, on calls, just before
// the command was handed to the client.)
// A RedLock object is one key (`redlock-js:NAME`) and **its own connection** (`new Redis`
// in the constructor; release() is `DEL key` then QUIT). lock() loops `SETNX key value`
// every `interval` ms while it answers 0 (and sleeps `interval` once more after the 1);
// on a 1 it sends `EXPIRE key seconds` without waiting for it. The value is
// `new Date().toString()`, drawn at each attempt: whole seconds, so **a waiter's value
// changes every second and processes attempting in the same second send the same value**.
// No owner check anywhere (the release is a bare DEL), no renewal, no give-up: lock()
// loops until it wins. The worker gives up as a caller with a deadline would: after a
// refusal past its deadline it calls end() (QUIT) during the library's sleep, so the
// loop's next SETNX fails and lock() rejects (the give-up, right after its last refusal).
// One hold in five outlives its 1 s lease: the worker then ends the connection without the
// DEL (which would delete the next holder's key) and logs the expiry.
'use strict';
const RedLock = require('redlock-js');

const { port, proc, rounds, now_us, log, sleep } = require('./truth_log');
const LEASE_S = 1;

async function main() {
  // orders polls every 50 ms and gives up after 2 s; stock every 150 ms, after 0.8 s, so
  // its waiters leave it standing free longer than the idle threshold and some give up.
  const policy = { orders: { interval: 50, patience: 2000 }, stock: { interval: 150, patience: 800 } };
  for (let i = 0; i < rounds; ++i) {
    const name = i % 2 === 0 ? 'orders' : 'stock';
    const lock = new RedLock({ redis: { host: '127.0.0.1', port }, key: name, interval: policy[name].interval, expire: LEASE_S });
    const key = lock.key, client = lock.client;
    const deadline = Date.now() + policy[name].patience;
    let won = null, gave_up = false, last_value = '', expire_sent_us = 0;
    const setnx = client.setnx.bind(client);
    client.setnx = async (k, value) => {
      const sent_us = now_us();
      last_value = value;
      const r = await setnx(k, value);
      log({ event: 'attempt', lock: k, owner: value, reply: r === 1 ? 'OK' : 0, sent_us });
      if (r === 1) {
        won = value;
        log({ event: 'acquired', lock: k, owner: value });
      } else if (Date.now() >= deadline && !gave_up) {
        gave_up = true;
        log({ event: 'gave_up', lock: k, owner: value });
        lock.end().catch(() => {});
      }
      return r;
    };
    const expire = client.expire.bind(client);
    client.expire = (...a) => { expire_sent_us = now_us(); return expire(...a); };
    const del = client.del.bind(client);
    client.del = async (k) => {
      const sent_us = now_us();
      const r = await del(k);
      log({ event: r === 1 ? 'released' : 'release_refused', lock: k, owner: won, reply: r, sent_us });
      return r;
    };
    const ok = await lock.lock().then(() => true, () => false);
    if (!ok || won === null) {
      if (!gave_up) throw new Error('lock() failed without a give-up');
      await sleep(Math.random() * 60);
      continue;
    }
    const overrun = i % 5 === 4;
    if (overrun) {
      await sleep(LEASE_S * 1000 + 200 + Math.random() * 200);
      log({ event: 'expired', lock: key, owner: won, t_us: expire_sent_us + LEASE_S * 1000 * 1000 });
      await lock.end();
    } else {
      await sleep(30 + Math.random() * 150);
      await lock.release();
    }
    await sleep(Math.random() * 60);
  }
  process.exit(0);
}
main().catch((e) => {
  log({ event: 'error', message: String(e && e.stack) });
  process.exit(1);
});
