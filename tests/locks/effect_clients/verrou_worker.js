// One process of the held-out verrou recording (record.sh): @verrou/core 0.5.2 with its
// Redis store on ioredis 5, unchanged, never used while building lockscope (the eleventh
// held-out set), contending with the other processes on two locks and logging what it did
// itself, one JSON line per event, to stdout:
//   {"t_us", "proc", "event": "attempt"|"acquired"|"gave_up"|"extended"|"released"|"release_refused"|"force_released"|"expired", "lock", "owner", ...}
// (t_us when the line is written, after the reply came; sent_us, on calls, just before
// the command was handed to the client.)
// verrou's Redis store is a mutex only (no semaphore in 0.5.2): a Lock draws its owner once
// (Math.random().toString(36)) when it is made and keeps it for every attempt. acquire() is
// `SET key owner PX ttl NX`, retried every `delay` ms until `attempts` or `timeout` runs
// out (then it answers false right after its last refusal: the give-up); acquireImmediately()
// is one such SET. release() is an EVAL of a Lua text (leading newline and indentation)
// `if redis.call("get", KEYS[1]) == ARGV[1] then return redis.call("del", KEYS[1]) else
// return 0 end` that throws E_LOCK_NOT_OWNED on a 0; extend(ttl) the same with
// `pexpire KEYS[1] ARGV[2]`; forceRelease() a bare `DEL key`. All processes share one
// connection each (the store's). One hold in five outlives its 1 s lease (the worker then
// logs the expiry and its release is refused); one in four renews twice; one in seven
// ends with forceRelease() (the holder's own DEL).
'use strict';
const path = require('path');
const { pathToFileURL } = require('url');
const { port, proc, rounds, now_us, log, sleep } = require('./truth_log');

const modules = process.env.NODE_PATH;
const TTL_MS = 1000;
// orders retries every 50 ms for up to 2 s; stock every 200 ms, 5 attempts at most, so its
// waiters leave it standing free longer than the idle threshold and some give up.
const POLICY = { orders: { retry: { delay: 50, timeout: 2000 } }, stock: { retry: { delay: 200, attempts: 5 } } };

async function main() {
  const Redis = require(path.join(modules, 'ioredis'));
  const core = await import(pathToFileURL(path.join(modules, '@verrou/core/build/index.js')).href);
  const { redisStore, RedisStore } = await import(pathToFileURL(path.join(modules, '@verrou/core/build/src/drivers/redis.js')).href);
  // The truth: the store's calls as the Lock makes them (their arguments and answers).
  const cur = { lock: '', owner: '', set_us: 0 };
  const save = RedisStore.prototype.save;
  RedisStore.prototype.save = async function (key, owner, ttl) {
    const sent_us = now_us();
    const ok = await save.call(this, key, owner, ttl);
    log({ event: 'attempt', lock: key, owner, reply: ok ? 'OK' : null, sent_us });
    if (ok) { cur.set_us = sent_us; log({ event: 'acquired', lock: key, owner }); }
    return ok;
  };
  const extend = RedisStore.prototype.extend;
  RedisStore.prototype.extend = async function (key, owner, duration) {
    const sent_us = now_us();
    try {
      await extend.call(this, key, owner, duration);
    } catch (e) {
      log({ event: 'extend_refused', lock: key, owner, reply: 0, sent_us });
      throw e;
    }
    cur.set_us = sent_us;
    log({ event: 'extended', lock: key, owner, reply: 1, sent_us });
  };
  const del = RedisStore.prototype.delete;
  RedisStore.prototype.delete = async function (key, owner) {
    const sent_us = now_us();
    try {
      await del.call(this, key, owner);
    } catch (e) {
      log({ event: 'release_refused', lock: key, owner, reply: 0, sent_us });
      throw e;
    }
    log({ event: 'released', lock: key, owner, reply: 1, sent_us });
  };
  const forceDelete = RedisStore.prototype.forceDelete;
  RedisStore.prototype.forceDelete = async function (key) {
    const sent_us = now_us();
    await forceDelete.call(this, key);
    log({ event: 'force_released', lock: key, owner: cur.owner, sent_us });
  };

  const connection = new Redis({ host: '127.0.0.1', port });
  // A LockFactory per lock (its retry policy) over the one store and connection, as
  // verrou.use() builds them.
  const store = redisStore({ connection }).factory();
  const factories = { orders: new core.LockFactory(store, POLICY.orders), stock: new core.LockFactory(store, POLICY.stock) };
  for (let i = 0; i < rounds; ++i) {
    const name = i % 2 === 0 ? 'orders' : 'stock';
    const key = `jobs:${name}`;
    const lock = factories[name].createLock(key, TTL_MS);
    cur.lock = key; cur.owner = lock.getOwner();
    // One acquisition in six is a single try (acquireImmediately), the rest wait.
    const once = i % 6 === 5;
    const ok = once ? await lock.acquireImmediately() : await lock.acquire();
    if (!ok) {
      log({ event: 'gave_up', lock: key, owner: lock.getOwner(), ...(once ? { single_try: true } : {}) });
      await sleep(Math.random() * 60);
      continue;
    }
    if (i % 5 === 4) {
      // Outlives its lease: the key expires TTL after its SET; the release then answers 0.
      await sleep(TTL_MS + 200 + Math.random() * 200);
      log({ event: 'expired', lock: key, owner: lock.getOwner(), t_us: cur.set_us + TTL_MS * 1000 });
      await lock.release().catch(() => {});
    } else if (i % 4 === 1) {
      // A longer hold, renewed twice.
      for (let k = 0; k < 2; ++k) { await sleep(500 + Math.random() * 100); await lock.extend(TTL_MS); }
      await sleep(100 + Math.random() * 100);
      await lock.release();
    } else {
      await sleep(30 + Math.random() * 150);
      if (i % 7 === 3) await lock.forceRelease(); else await lock.release();
    }
    await sleep(Math.random() * 60);
  }
  await connection.quit();
  process.exit(0);
}
main().catch((e) => {
  log({ event: 'error', message: String(e && e.stack) });
  process.exit(1);
});
