// One process of the held-out distributed-lock recording (record.sh): distributed-lock
// 1.0.5's RedisDistributedLockService on its ioredis 2.5, unchanged, never used while
// building lockscope (the eighth held-out set), contending with the other processes on two
// locks and logging what it did itself, one JSON line per event, to stdout:
//   {"t_us", "proc", "event": "attempt"|"acquired"|"gave_up"|"released"|"release_refused"|"expired", "lock", "owner", ...}
// (t_us when the line is written, after the reply came; sent_us, on calls, just before
// the command was handed to the client.)
// Each service.lock(id, expire) draws a uuid v4 that all its attempts share (key
// `distributed_lock:ID`). Acquire and release are scripts defined in ioredis (EVALSHA, EVAL
// on NOSCRIPT), both copying into Lua locals: acquire `local success = SETNX key value; if
// success == 1 then PEXPIRE key expire end; return success` (1/0), retried every
// retryInterval ms; release `local value = GET key; local result = 0; if value == ARGV[1]
// then result = DEL key end; return result` (1/0). A timer lockAwait ms after lock() was
// called cancels a wait still refused (the give-up: between attempts, nothing on the wire
// marks it; an attempt already in flight may still set the key, which the client then
// never releases: logged as acquired, and expired at its lease). No renewal.
// The library merges its defaults over the caller's config, so the retry interval and
// await timeout are set on the service's config object before each lock() (read there at
// each retry). Its logger (tracer-logger) prints to stdout and writes daily files under
// ../logs of the working directory: its console output goes to stderr here, and the
// worker runs from a scratch directory.
'use strict';
const fs = require('fs');
const os = require('os');
const path = require('path');
const util = require('util');

const { port, proc, rounds, now_us, log, sleep } = require('./truth_log');
const LEASE_MS = 1000;

const scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'distributed_lock_'));
fs.mkdirSync(path.join(scratch, 'run'));
process.chdir(path.join(scratch, 'run'));
console.log = console.info = (...a) => process.stderr.write(util.format(...a) + '\n');
const { RedisDistributedLockService } = require('distributed-lock');

async function main() {
  const service = new RedisDistributedLockService({ port, host: '127.0.0.1' });
  const config = service[Symbol.for('config')];
  const client = service[Symbol.for('client')];
  // Per lock() call: its value, whether it was cancelled, when its SETNX won.
  const calls = new Map();  // value -> {key, cancelled, acquired_us, late}
  const acquire = client.lock.bind(client);
  client.lock = (key, value, expire, cb) => {
    const sent_us = now_us();
    return acquire(key, value, expire, (err, res) => {
      if (!err) {
        log({ event: 'attempt', lock: key, owner: value, reply: res === 1 ? 'OK' : 0, sent_us });
        const call = calls.get(value);
        if (res === 1 && call) {
          call.acquired_us = now_us();
          if (call.cancelled) {  // set after the give-up: held until its lease runs out
            log({ event: 'acquired', lock: key, owner: value });
            log({ event: 'expired', lock: key, owner: value, t_us: call.acquired_us + LEASE_MS * 1000 });
          }
        }
      }
      cb(err, res);
    });
  };
  let release_reply = null;
  const unlock = client.unlock.bind(client);
  client.unlock = (key, value, cb) => unlock(key, value, (err, res) => { release_reply = res; cb(err, res); });

  // orders polls every 50 ms and gives up after 2 s; stock every 300 ms (the library's
  // default) and gives up after 1.2 s, so its waiters leave it standing free longer than
  // the idle threshold and some give up.
  const settings = { orders: { retryInterval: 50, lockAwait: 2000 }, stock: { retryInterval: 300, lockAwait: 1200 } };
  for (let i = 0; i < rounds; ++i) {
    const name = i % 2 === 0 ? 'orders' : 'stock';
    const key = 'distributed_lock:' + name;
    Object.assign(config, settings[name]);
    // The value is drawn inside lock(): learn it from the first attempt's call.
    let value = null;
    const before = client.lock;
    client.lock = (k, v, e, cb) => {
      if (value === null) { value = v; calls.set(v, { key: k, cancelled: false, acquired_us: 0 }); }
      return before(k, v, e, cb);
    };
    let locked;
    try {
      locked = await service.lock(name, LEASE_MS);
    } catch (e) {
      if (!/await timeout/.test(String(e && e.message))) throw e;
      calls.get(value).cancelled = true;
      log({ event: 'gave_up', lock: key, owner: value });
      client.lock = before;
      await sleep(Math.random() * 60);
      continue;
    }
    client.lock = before;
    const owner = locked.resource, acquired_us = calls.get(owner).acquired_us;
    log({ event: 'acquired', lock: key, owner });
    // One hold in five outlives its lease (nothing renews it): its release then finds
    // another value or none. The others are short.
    const overrun = i % 5 === 4;
    await sleep(overrun ? LEASE_MS + 150 + Math.random() * 200 : 30 + Math.random() * 150);
    const sent_us = now_us();
    await service.unlock(locked);
    const released = release_reply === 1;
    log({ event: released ? 'released' : 'release_refused', lock: key, owner, reply: released ? 1 : 0, sent_us });
    if (!released) log({ event: 'expired', lock: key, owner, t_us: acquired_us + LEASE_MS * 1000 });
    await sleep(Math.random() * 60);
  }
  await sleep(2500);  // lockAwait timers of this process's last calls
  await client.quit();
  fs.rmSync(scratch, { recursive: true, force: true });
  process.exit(0);
}
main().catch((e) => {
  log({ event: 'error', message: String(e && e.stack) });
  process.exit(1);
});
