// One process of the held-out @medusajs/locking-redis recording (record.sh): the
// RedisLockingProvider of @medusajs/locking-redis 2.21.2 on ioredis 5, unchanged, never used
// while building lockscope (the fourth held-out set), contending with the other processes on
// two locks and logging what it did itself, one JSON line per event, to stdout:
//   {"t_us", "proc", "event": "attempt"|"acquired"|"gave_up"|"extended"|"released"|"expired", "lock", "owner", ...}
// (t_us when the line is written, after the reply came; sent_us, on calls, just before
// the command was handed to the client.)
// Its scripts go by ioredis defineCommand (EVALSHA, EVAL on NOSCRIPT) and copy KEYS/ARGV
// into Lua locals: acquire `SET key owner NX EX ttl` (seconds) with ARGV = [owner, ttl,
// awaitQueue], answering 1 or 0; extend `GET == owner then EXPIRE key ttl`; release `GET ==
// owner then DEL`. `execute` draws one owner `execute:<uuid>` per call, retries a refused
// attempt after a jittered exponential backoff (20 ms doubling up to 1 s, each pause 50-100%
// of it), gives up after its timeout (whole seconds, at least 1; the loop's next turn stops),
// and renews the hold every third of its lease while the job runs. `acquire` + `release`
// (no renewal, no timeout) is used for the holds that outlive their lease.
// The package requires @medusajs/framework/utils for two helpers only (MedusaError and
// promiseAll); the framework is a whole server, so this worker supplies those two (the
// lock code itself is the package's, unchanged).
'use strict';
const Module = require('module');
const load = Module._load;
Module._load = function (request, parent, isMain) {
  if (request === '@medusajs/framework/utils') {
    class MedusaError extends Error {
      constructor(type, message) { super(message); this.type = type; }
    }
    MedusaError.Types = { CONFLICT: 'conflict' };
    return { MedusaError, promiseAll: (ps) => Promise.all(ps) };
  }
  return load.apply(this, arguments);
};
const Redis = require('ioredis');
const { RedisLockingProvider } = require('@medusajs/locking-redis/dist/services/redis-lock');

const { port, proc, rounds, now_us, log, sleep } = require('./truth_log');
const TTL_S = 1;

async function main() {
  const client = new Redis({ host: '127.0.0.1', port });
  const provider = new RedisLockingProvider({ redisClient: client, prefix: 'locks:' }, {});
  let ok_reply_us = 0;
  const last_owner = {};  // key -> the owner of its latest attempt (execute draws it inside)
  const gave_up = new Set();  // owners whose execute timed out (a late acquire is handed back)
  const acquireLock = client.acquireLock.bind(client);
  client.acquireLock = async (key, owner, ttl, awaitQueue) => {
    const sent_us = now_us();
    last_owner[key] = owner;
    const r = await acquireLock(key, owner, ttl, awaitQueue);
    log({ event: 'attempt', lock: key, owner, reply: r === 1 ? 'OK' : 0, sent_us });
    if (r === 1) {
      ok_reply_us = now_us();
      // The timeout fired while this attempt was on the wire: execute releases it at once.
      if (gave_up.has(owner)) log({ event: 'acquired', lock: key, owner, late: true });
    }
    return r;
  };
  const extendLock = client.extendLock.bind(client);
  client.extendLock = async (key, owner, ttl) => {
    const sent_us = now_us();
    const r = await extendLock(key, owner, ttl);
    log({ event: 'extended', lock: key, owner, reply: r, sent_us });
    return r;
  };
  const releaseLock = client.releaseLock.bind(client);
  client.releaseLock = async (key, owner) => {
    const sent_us = now_us();
    const r = await releaseLock(key, owner);
    log({ event: r === 1 ? 'released' : 'release_refused', lock: key, owner, reply: r, sent_us });
    return r;
  };
  for (let i = 0; i < rounds; ++i) {
    const name = i % 2 === 0 ? 'orders' : 'stock';
    const key = `locks:${name}`;
    if (i % 5 === 4) {
      // A hold that outlives its 1 s lease: acquire (no renewal, no timeout), then a release
      // that finds the key gone or another's (refused): logged as expired.
      const owner = `${proc}:${i}:${Math.random().toString(36).slice(2)}`;
      await provider.acquire(name, { ownerId: owner, expire: TTL_S, awaitQueue: true });
      const acquired_us = ok_reply_us;
      log({ event: 'acquired', lock: key, owner });
      await sleep(TTL_S * 1000 + 150 + Math.random() * 200);
      const released = await provider.release(name, { ownerId: owner });
      if (!released) log({ event: 'expired', lock: key, owner, t_us: acquired_us + TTL_S * 1000 * 1000 });
      await sleep(Math.random() * 60);
      continue;
    }
    // One hold in four is long (renewed every 333 ms); orders waits up to 3 s, stock 1 s:
    // some give up.
    const long = i % 4 === 3;
    try {
      await provider.execute(name, async () => {
        log({ event: 'acquired', lock: key, owner: last_owner[key] });
        await sleep(long ? 900 + Math.random() * 500 : 30 + Math.random() * 170);
      }, { timeout: name === 'orders' ? 3 : 1, expire: TTL_S });
    } catch (e) {
      if (!/Timed-out/.test(String(e && e.message))) throw e;
      gave_up.add(last_owner[key]);
      log({ event: 'gave_up', lock: key, owner: last_owner[key] });
    }
    await sleep(Math.random() * 60);
  }
  await sleep(300);  // a late acquire's hand-back
  await client.quit();
  process.exit(0);
}
main().catch((e) => {
  log({ event: 'error', message: String(e) });
  process.exit(1);
});
