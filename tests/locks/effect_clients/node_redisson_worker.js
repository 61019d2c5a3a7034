// One process of the held-out node-redisson recording (record.sh): node-redisson 1.0.4 on
// ioredis 5, unchanged, never used while building lockscope (it is the measurement of an
// unseen client), contending with the other processes on two locks and logging what it
// did itself, one JSON line per event, to stdout:
//   {"t_us", "proc", "event": "attempt"|"acquired"|"gave_up"|"extended"|"released"|"expired", "lock", "owner", ...}
// (t_us when the line is written, after the reply's callback ran; sent_us, on calls,
// just before the command was handed to the client.)
// A Redisson look-alike, not byte for byte: a reentrant hash lock whose field is
// `<client uuid>:<lock object uuid>`; the acquire script takes ARGV = [lease, owner]
// (nil = acquired, else the PTTL), the unlock script KEYS = [lock, channel, latch] and
// ARGV = [message, lease, owner, latch ttl], and PUBLISHes. A refused tryLock tries
// again at once, then SUBSCRIBEs (on a second connection of the process) to the lock's
// channel, waits for a message or min(PTTL, time left), UNSUBSCRIBEs and tries again; a
// tryLock whose wait time runs out answers false: a give-up. Without a lease, a watchdog
// renews the lock every lockWatchdogTimeout / 3 (here 1.5 s / 3). The scripts are
// ioredis `scripts` (EVALSHA, EVAL on NOSCRIPT). Wrappers around the client's script
// commands log each attempt (a nil reply logged as "OK"), renewal and unlock.
'use strict';
const { Redisson } = require('node-redisson');

const { port, proc, rounds, now_us, log, sleep } = require('./truth_log');
const LEASE_MS = 1000;

async function main() {
  const redisson = new Redisson({
    redis: { options: { host: '127.0.0.1', port } },
    lockWatchdogTimeout: 1500n,
  });
  const redis = redisson.redis;
  let ok_reply_us = 0;
  const tryLockInner = redis.rTryLockInner.bind(redis);
  redis.rTryLockInner = async (key, lease, owner) => {
    const sent_us = now_us();
    const r = await tryLockInner(key, lease, owner);
    log({ event: 'attempt', lock: key, owner, reply: r === null ? 'OK' : r, sent_us });
    if (r === null) ok_reply_us = now_us();
    return r;
  };
  const renew = redis.rRenewExpiration.bind(redis);
  redis.rRenewExpiration = async (key, lease, owner) => {
    const sent_us = now_us();
    const r = await renew(key, lease, owner);
    log({ event: 'extended', lock: key, owner, reply: r, sent_us });
    return r;
  };
  const unlockInner = redis.rUnlockInner.bind(redis);
  redis.rUnlockInner = async (...a) => {
    const sent_us = now_us();
    const r = await unlockInner(...a);
    const [key, , , , , owner] = a;
    log({ event: r === 1 ? 'released' : 'release_refused', lock: key, owner, reply: r, sent_us });
    return r;
  };
  // orders: a waiter waits up to 900 ms; stock up to 350 ms, so some waits give up.
  const wait_ms = { 'locks:orders': 900, 'locks:stock': 350 };
  for (let i = 0; i < rounds; ++i) {
    const key = i % 2 === 0 ? 'locks:orders' : 'locks:stock';
    // A lock object per use, as a request handler would take one: a new owner each time.
    const lock = redisson.getLock(key);
    const owner = `${lock.id}:${lock.clientId}`;
    // One hold in four is long, under the watchdog (renewed every 500 ms); one in five
    // (of the others) takes a 1 s lease and outlives it: its unlock is then refused.
    const long = i % 4 === 3, overrun = !long && i % 5 === 4;
    const lease = long ? true : LEASE_MS;
    const got = await lock.tryLock(wait_ms[key], lease);
    if (!got) {
      log({ event: 'gave_up', lock: key, owner });
      await sleep(Math.random() * 60);
      continue;
    }
    const acquired_us = ok_reply_us;
    log({ event: 'acquired', lock: key, owner });
    const hold = long ? 1400 + Math.random() * 500 : overrun ? LEASE_MS + 150 + Math.random() * 200 : 30 + Math.random() * 150;
    await sleep(hold);
    const released = await lock.unlock().then(() => true, () => false);
    if (overrun && !released) log({ event: 'expired', lock: key, owner, t_us: acquired_us + LEASE_MS * 1000 });
    await sleep(Math.random() * 60);
  }
  await redisson.quit();
  // The library's wait timers are not cleared when a message came first: leave at once.
  process.exit(0);
}
main().catch((e) => {
  log({ event: 'error', message: String(e) });
  process.exit(1);
});
