// One process of the held-out redlock-node recording (record.sh): redlock-node 2.1.4 on
// node-redis 3, unchanged, never used while building lockscope (the eighth held-out set;
// it stands in for node-redlock 2.3.0, whose package ships only its TypeScript sources and
// cannot be loaded by node), contending with the other processes on two locks and logging
// what it did itself, one JSON line per event, to stdout:
//   {"t_us", "proc", "event": "attempt"|"acquired"|"gave_up"|"extended"|"released"|"release_refused"|"expired", "lock", "owner", ...}
// (t_us when the line is written, after the reply came; sent_us, on calls, just before
// the command was handed to the client.)
// redlock.lock(key, seconds) is one attempt: `SET key value EX seconds NX` with a fresh
// value (Date.now() and 13 random characters) on every call; the library has no retry,
// so this worker polls as its README's users do: lock() again every spacing ms, up to a
// number of attempts, then gives up (right after its last refusal). unlock is `GET key`
// then, if it answers the lock's value, `DEL key` (no script: a refused release sends
// only the GET); extend is `GET key` then, if it matches, `EXPIRE key seconds` (1).
'use strict';
const redis = require('redis');
const Redlock = require('redlock-node');

const { port, proc, rounds, now_us, log, sleep } = require('./truth_log');
const LEASE_S = 1;

async function main() {
  const client = redis.createClient(port, '127.0.0.1');
  // The replies of the calls the library makes: SET (each attempt), DEL (a release),
  // EXPIRE (an extend), each logged by the caller below with when it was sent.
  const last = {};
  for (const cmd of ['SET', 'DEL', 'expire']) {
    const orig = client[cmd].bind(client);
    client[cmd] = (...a) => {
      const cb = a.pop();
      last[cmd] = { sent_us: now_us(), args: a.slice(), reply: undefined, reply_us: 0 };
      const entry = last[cmd];
      return orig(...a, (err, res) => { entry.reply = err ? null : res; entry.reply_us = now_us(); cb(err, res); });
    };
  }
  const redlock = new Redlock(client);
  redlock.on('lockError', () => {});
  redlock.on('unlockError', () => {});
  redlock.on('extendError', () => {});
  // orders polls every 50 ms, 40 attempts (2 s); stock every 150 ms, 8 attempts, so its
  // waiters leave it standing free longer than the idle threshold and some give up.
  const policy = { orders: { spacing: 50, attempts: 40 }, stock: { spacing: 150, attempts: 8 } };
  for (let i = 0; i < rounds; ++i) {
    const name = i % 2 === 0 ? 'orders' : 'stock';
    const key = 'lock:' + name;
    let lock = null, acquired_us = 0, value = '';
    for (let n = 0; n < policy[name].attempts && !lock; ++n) {
      if (n > 0) await sleep(policy[name].spacing);
      lock = await redlock.lock(key, LEASE_S).catch(() => null);
      const set = last.SET;
      value = set.args[1];  // the attempt's value, refused or not
      log({ event: 'attempt', lock: key, owner: value, reply: lock ? 'OK' : 0, sent_us: set.sent_us });
      if (lock) acquired_us = set.reply_us;
    }
    if (!lock) {
      log({ event: 'gave_up', lock: key, owner: '' });
      await sleep(Math.random() * 60);
      continue;
    }
    const owner = lock.value;
    log({ event: 'acquired', lock: key, owner });
    // One hold in four is long and extended every 600 ms (EXPIRE 1 s); one in five of the
    // others outlives its lease without extending: its release then finds another value
    // or none.
    const long = i % 4 === 3, overrun = !long && i % 5 === 4;
    const hold = long ? 1400 + Math.random() * 500 : overrun ? LEASE_S * 1000 + 150 + Math.random() * 200 : 30 + Math.random() * 150;
    const end = Date.now() + hold;
    let extended_ok = true, lease_from_us = acquired_us;
    while (long && extended_ok && Date.now() + 600 < end) {
      await sleep(600);
      const sent_us = now_us();
      last.expire = null;
      extended_ok = await lock.extend(LEASE_S).then(() => true, () => false);
      log({ event: 'extended', lock: key, owner, reply: extended_ok ? 1 : 0, sent_us });
      if (extended_ok) lease_from_us = last.expire.reply_us;
    }
    await sleep(Math.max(0, end - Date.now()));
    const sent_us = now_us();
    last.DEL = null;
    const released = await lock.unlock().then(() => last.DEL && last.DEL.reply === 1, () => false);
    log({ event: released ? 'released' : 'release_refused', lock: key, owner, reply: released ? 1 : 0, sent_us });
    if (!released) log({ event: 'expired', lock: key, owner, t_us: lease_from_us + LEASE_S * 1000000 });
    await sleep(Math.random() * 60);
  }
  client.quit();
}
main().catch((e) => {
  log({ event: 'error', message: String(e && e.stack) });
  process.exit(1);
});
