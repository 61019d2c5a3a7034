// One process of the held-out nestjs_simple_lock recording (record.sh):
// @huangang/nestjs-simple-redis-lock 0.7.1 (a NestJS lock service) on ioredis 5, unchanged,
// used outside Nest (its RedisLockService made by hand, its @RedisLock decorator applied by
// hand), never used while building lockscope (the twenty-fourth held-out set), contending
// with the other processes on two locks and logging what it did itself, one JSON line per
// event, to stdout:
//   {"t_us", "proc", "event": "attempt"|"acquired"|"gave_up"|"extended"|"released"|"release_refused"|"cleanup"|"expired", "lock", "owner", ...}
// (t_us when the line is written, after the reply came; sent_us, on calls, just before
// the command was handed to the client.)
// The service draws one uuid when it is made and sends it for every attempt and hold of
// every lock: one value per process (per child here). lockOnce(name, expire) is
// `SET lock:<name> uuid PX expire NX`; lock(name, expire, retryInterval, maxRetryTimes)
// repeats it, sleeping retryInterval after each refusal, and throws once it has been refused
// maxRetryTimes + 1 times (after that last sleep: the give-up). unlock(name) is an EVAL of
// `if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else
// return 0 end`; setTTL(name, ms) a bare `PEXPIRE lock:<name> ms` (no check of the owner):
// the renewal. The @RedisLock decorator wraps a method in lock() and, in a `finally`,
// unlock() (not awaited): a method whose lock() gave up still sends the unlock, answered 0
// (logged as `cleanup`). Each process runs its rounds in a child process (one connection);
// p2's and p3's children kill themselves with SIGKILL once in the middle of a hold (logging
// the key's expiry, its last SET or PEXPIRE + the lease, just before) and a new child goes
// on with the next round. One hold in seven outlives its lease (the worker logs the expiry;
// its unlock then answers 0); one in four is renewed twice; one round in five is a single
// try (lockOnce).
'use strict';
const { proc, rounds, now_us, log, sleep, runRoundsInChildren } = require('./truth_log');

const TTL_MS = 1000;
// orders is retried every 50 ms up to 30 times (1.5 s); stock every 150 ms 3 times, so its
// waiters give up more often and may leave it standing free past the idle threshold.
const POLICY = { orders: { retryInterval: 50, maxRetryTimes: 30 }, stock: { retryInterval: 150, maxRetryTimes: 3 } };
const KILL_ROUND = { p2: 7, p3: 12 };

async function child(start) {
  require('reflect-metadata');
  const Redis = require('ioredis');
  const { RedisLockService, RedisLock } = require('@huangang/nestjs-simple-redis-lock');
  const client = new Redis({ host: '127.0.0.1', port: Number(process.argv[2]) });
  const service = new RedisLockService({ client });
  const owner = service.uuid;
  const cur = { lock: '', held: false, set_us: 0 };
  // The truth: the service's calls on the connection, with their answers.
  const setOrig = client.set.bind(client);
  client.set = async (key, value, ...rest) => {
    const sent_us = now_us();
    const r = await setOrig(key, value, ...rest);
    log({ event: 'attempt', lock: key, owner: value, reply: r === 'OK' ? 'OK' : null, sent_us });
    if (r === 'OK') {
      cur.held = true; cur.set_us = sent_us;
      log({ event: 'acquired', lock: key, owner: value });
    }
    return r;
  };
  const evalOrig = client.eval.bind(client);
  client.eval = async (script, nkeys, key, value) => {
    const sent_us = now_us();
    const holder = cur.held && cur.lock === key;
    if (holder) cur.held = false;
    const r = await evalOrig(script, nkeys, key, value);
    log({ event: holder ? (r === 1 ? 'released' : 'release_refused') : 'cleanup', lock: key, owner: value, reply: r, sent_us });
    return r;
  };
  const pexpireOrig = client.pexpire.bind(client);
  client.pexpire = async (key, ms) => {
    const sent_us = now_us();
    const r = await pexpireOrig(key, ms);
    if (r === 1) cur.set_us = sent_us;
    log({ event: 'extended', lock: key, owner, reply: r, sent_us });
    return r;
  };

  // A job guarded by the decorator, as a Nest service's method would be.
  class Jobs {
    constructor() { this.lockService = service; }
    async run(name, hold) { return hold(); }
  }
  const methods = {};
  for (const [name, p] of Object.entries(POLICY)) {
    const descriptor = { value: Jobs.prototype.run, writable: true, configurable: true };
    RedisLock(name, TTL_MS, p.retryInterval, p.maxRetryTimes)(Jobs.prototype, 'run', descriptor);
    methods[name] = descriptor.value;
  }
  const jobs = new Jobs();
  const key = (name) => `lock:${name}`;

  const hold = (i, name) => async () => {
    if (KILL_ROUND[proc] === i) {
      await sleep(100 + Math.random() * 100);
      log({ event: 'expired', lock: key(name), owner, t_us: cur.set_us + TTL_MS * 1000 });
      process.kill(process.pid, 'SIGKILL');
      await sleep(10_000);
    }
    if (i % 7 === 3) {
      // Outlives its lease: the key expires TTL after its SET; the unlock then answers 0.
      await sleep(TTL_MS + 200 + Math.random() * 200);
      log({ event: 'expired', lock: key(name), owner, t_us: cur.set_us + TTL_MS * 1000 });
    } else if (i % 4 === 1) {
      // A longer hold, renewed twice.
      for (let k = 0; k < 2; ++k) { await sleep(500 + Math.random() * 100); await service.setTTL(name, TTL_MS); }
      await sleep(100 + Math.random() * 100);
    } else {
      await sleep(20 + Math.random() * 380);
    }
  };

  for (let i = start; i < rounds; ++i) {
    const name = i % 2 === 0 ? 'orders' : 'stock';
    cur.lock = key(name); cur.held = false;
    if (i % 5 === 4) {
      // A single try: lockOnce, then unlock only when it got the lock.
      if (await service.lockOnce(name, TTL_MS)) {
        await hold(i, name)();
        await service.unlock(name);
      } else {
        log({ event: 'gave_up', lock: key(name), owner, single_try: true });
      }
    } else {
      try {
        await methods[name].call(jobs, name, hold(i, name));
      } catch (e) {
        if (!/timed out/.test(String(e && e.message))) throw e;
        log({ event: 'gave_up', lock: key(name), owner });
      }
      await sleep(5);  // the decorator's unlock is not awaited: let its reply be logged
    }
    await sleep(Math.random() * 60);
  }
  await client.quit();
  process.exit(0);
}

runRoundsInChildren(__filename, KILL_ROUND[proc], child);
