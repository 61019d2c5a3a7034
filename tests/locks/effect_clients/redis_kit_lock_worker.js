// One process of the held-out @redis-kit/lock recording (record.sh): @redis-kit/lock
// 0.1.0-3 on node-redis 5, unchanged, never used while building lockscope (the third
// held-out set), contending with the other processes on two locks and logging what it
// did itself, one JSON line per event, to stdout:
//   {"t_us", "proc", "event": "attempt"|"acquired"|"gave_up"|"extended"|"released"|"expired", "lock", "owner", ...}
// (t_us when the line is written, after the reply came; sent_us, on calls, just before
// the command was handed to the client.)
// A Redlock over one server whose scripts are always sent as EVAL text (never EVALSHA):
// the acquire `if EXISTS(unpack(KEYS)) > 0 then return 0 end; SET each key token PX ttl;
// return 1` with ARGV = [token, ttl], a NEW random token on every attempt; after a refused
// attempt it releases that attempt's token at once (a release that finds nothing,
// logged as "cleanup") and retries after retryDelayMs ± retryJitterMs, maxRetryAttempts
// times, then answers null (a give-up); the release script GETs and DELs each key whose
// value is the token and answers the count; the extend script MGETs the keys and, when all
// hold the token, SETs each again with PX (not PEXPIRE) and answers 1. Auto-extension
// extends when the lease has less than a threshold left.
'use strict';
const { createClient } = require('redis');
const { Redlock } = require('@redis-kit/lock');

const { port, proc, rounds, now_us, log, sleep } = require('./truth_log');
const TTL_MS = 1000;

async function main() {
  const client = createClient({ socket: { host: '127.0.0.1', port } });
  await client.connect();
  let ok_reply_us = 0;
  const wrap = (redlock) => {
    const acquireOn = redlock.acquireOnInstance.bind(redlock);
    const releaseOn = redlock.releaseOnInstance.bind(redlock);
    const extendOn = redlock.extendOnInstance.bind(redlock);
    let refused = null;  // the token of the latest refused attempt: its release is a clean-up
    redlock.acquireOnInstance = async (c, keys, token, ttl) => {
      const sent_us = now_us();
      const r = await acquireOn(c, keys, token, ttl);
      log({ event: 'attempt', lock: keys[0], owner: token, reply: r ? 'OK' : 0, sent_us });
      if (r) ok_reply_us = now_us(); else refused = token;
      return r;
    };
    redlock.releaseOnInstance = async (c, keys, token) => {
      const sent_us = now_us();
      const r = await releaseOn(c, keys, token);
      const event = token === refused ? 'cleanup' : r ? 'released' : 'release_refused';
      log({ event, lock: keys[0], owner: token, reply: r ? 1 : 0, sent_us });
      return r;
    };
    redlock.extendOnInstance = async (c, keys, token, ttl) => {
      const sent_us = now_us();
      const r = await extendOn(c, keys, token, ttl);
      log({ event: 'extended', lock: keys[0], owner: token, reply: r ? 1 : 0, sent_us });
      return r;
    };
    return redlock;
  };
  // orders: 8 retries 50 ± 25 ms apart; stock: 3: some give up.
  const redlocks = {
    'locks:orders': wrap(new Redlock([client], { retryDelayMs: 50, retryJitterMs: 25, maxRetryAttempts: 8 })),
    'locks:stock': wrap(new Redlock([client], { retryDelayMs: 50, retryJitterMs: 25, maxRetryAttempts: 3 })),
  };
  for (let i = 0; i < rounds; ++i) {
    const key = i % 2 === 0 ? 'locks:orders' : 'locks:stock';
    // One hold in four is long, auto-extended when under 500 ms of lease is left; one in
    // five (of the others) outlives its 1 s lease: its release then finds nothing.
    const long = i % 4 === 3, overrun = !long && i % 5 === 4;
    const lock = await redlocks[key].acquire(key, TTL_MS);
    if (!lock) {
      log({ event: 'gave_up', lock: key });
      await sleep(Math.random() * 60);
      continue;
    }
    const acquired_us = ok_reply_us;
    const owner = lock.token;
    log({ event: 'acquired', lock: key, owner });
    if (long) lock.startAutoExtension(500);
    const hold = long ? 1400 + Math.random() * 500 : overrun ? TTL_MS + 150 + Math.random() * 200 : 30 + Math.random() * 150;
    await sleep(hold);
    lock.stopAutoExtension();
    const released = await lock.release();
    if (overrun && !released) log({ event: 'expired', lock: key, owner, t_us: acquired_us + TTL_MS * 1000 });
    await sleep(Math.random() * 60);
  }
  await client.quit();
  process.exit(0);
}
main().catch((e) => {
  log({ event: 'error', message: String(e) });
  process.exit(1);
});
