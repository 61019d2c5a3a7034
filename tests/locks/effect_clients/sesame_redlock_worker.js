// One process (or, with TASKS=2, two concurrent tasks over one connection) of the held-out
// @sesamecare-oss/redlock recording (record.sh): @sesamecare-oss/redlock 1.4.0 on ioredis
// 5, unchanged, never used while building lockscope (it is the measurement of an unseen
// client), contending with the other processes on two locks and logging what it did
// itself, one JSON line per event, to stdout:
//   {"t_us", "proc", "event": "attempt"|"acquired"|"gave_up"|"extended"|"released"|"expired", "lock", "owner", ...}
// (t_us when the line is written, after the reply's callback ran; sent_us, on calls,
// just before the command was handed to the client.)
// `acquire` draws one value (16 random bytes, hex) per call and polls with it: the
// acquire script (defineCommand: EVALSHA, EVAL on NOSCRIPT) takes ARGV = [db, value,
// ttl], SELECTs the db by pcall, and answers the number of keys it set (1) or 0; it is
// retried every retryDelay ± retryJitter ms, retryCount more times, then the library
// sends its release script for the value (deleting nothing) and throws: a give-up.
// Release and extend are scripts of the same shape, retried the same way when refused
// (a release after the lease ran out is refused retryCount + 1 times). A wrapper around
// the client's acquireLock command logs each attempt; its reply, the number of keys
// set, is logged as "OK" when it is 1 (raw_reply keeps it).
// TASKS=2 runs two tasks per process over the one connection (Node clients multiplex):
// task a works as above; task b holds stock for long stretches (extending it) while task
// a polls orders, so a waiter's connection holds another lock while it waits. With
// SHORT_B=1 task b's holds are 10-40 ms, shorter than task a's spacing: a whole hold of
// stock fits between two of a's attempts (the case the moved-on rule can mistake for a
// give-up until the connection has shown it multiplexes).
'use strict';
const Redis = require('ioredis');
const { Redlock } = require('@sesamecare-oss/redlock');
const { ensureCommands } = require('@sesamecare-oss/redlock/build/scripts.js');

const [port, proc0, rounds] = [Number(process.argv[2]), process.argv[3], Number(process.argv[4] || 8)];
const tasks = Number(process.env.TASKS || 1);
const now_us = () => Math.round((performance.timeOrigin + performance.now()) * 1000);
const log = (proc, o) => process.stdout.write(JSON.stringify({ t_us: now_us(), proc, ...o }) + '\n');
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const LEASE_MS = 1000;

async function main() {
  const redis = new Redis({ port, host: '127.0.0.1' });
  ensureCommands(redis);
  // Which task sent a value: the wrapper logs the attempt under that task's name.
  const task_of_value = new Map();
  const ok_reply_us = new Map();
  const acquireLock = redis.acquireLock.bind(redis);
  redis.acquireLock = async (...a) => {
    const [nkeys, key] = a, value = a[nkeys + 2];
    const proc = task_of_value.get(value) || proc0;
    const sent_us = now_us();
    const r = await acquireLock(...a);
    log(proc, { event: 'attempt', lock: key, owner: value, reply: r === nkeys ? 'OK' : r, raw_reply: r, sent_us });
    if (r === nkeys) ok_reply_us.set(value, now_us());
    return r;
  };
  const redlock = new Redlock([redis], { retryCount: 3, retryDelay: 100, retryJitter: 20 });
  // Learn the value acquire will draw before its first call: the library draws it with
  // _random(); wrap it to tag the value with the task that asked.
  const random = redlock._random.bind(redlock);
  let current_task = proc0;
  redlock._random = () => {
    const v = random();
    task_of_value.set(v, current_task);
    return v;
  };
  // orders polls every 50 ± 15 ms (20 retries); stock every 150 ± 40 ms (8 retries), so
  // its waiters leave it standing free longer than the idle threshold.
  const settings = {
    'locks:orders': { retryCount: 20, retryDelay: 50, retryJitter: 15 },
    'locks:stock': { retryCount: 8, retryDelay: 150, retryJitter: 40 },
  };

  async function run(proc, pick, holdOf) {
    for (let i = 0; i < rounds; ++i) {
      const key = pick(i);
      let lock;
      try {
        current_task = proc;  // read synchronously by _random inside acquire()
        lock = await redlock.acquire([key], LEASE_MS, settings[key]);
      } catch (e) {
        log(proc, { event: 'gave_up', lock: key, owner: '' });
        await sleep(Math.random() * 60);
        continue;
      }
      const owner = lock.value, acquired_us = ok_reply_us.get(owner);
      log(proc, { event: 'acquired', lock: key, owner });
      const { long, overrun, hold } = holdOf(i);
      const end = Date.now() + hold;
      let extended_ok = true;
      while (long && extended_ok && Date.now() + 600 < end) {
        await sleep(600);
        const sent_us = now_us();
        try {
          lock = await lock.extend(LEASE_MS);
        } catch (e) {
          extended_ok = false;
        }
        log(proc, { event: 'extended', lock: key, owner, reply: extended_ok ? 1 : 0, sent_us });
      }
      await sleep(Math.max(0, end - Date.now()));
      const sent_us = now_us();
      const released = await lock.release().then(() => true, () => false);
      log(proc, { event: released ? 'released' : 'release_refused', lock: key, owner, reply: released ? 1 : 0, sent_us });
      if ((overrun || !extended_ok) && !released) log(proc, { event: 'expired', lock: key, owner, t_us: acquired_us + LEASE_MS * 1000 });
      await sleep(Math.random() * 60);
    }
  }
  // One hold in four is long and extended every 600 ms; one in five (of the others)
  // outlives its lease without extending: the release is then refused (retried).
  const usual = (i) => {
    const long = i % 4 === 3, overrun = !long && i % 5 === 4;
    const hold = long ? 1400 + Math.random() * 500 : overrun ? LEASE_MS + 150 + Math.random() * 200 : 30 + Math.random() * 150;
    return { long, overrun, hold };
  };
  if (tasks === 1) {
    await run(proc0, (i) => (i % 2 === 0 ? 'locks:orders' : 'locks:stock'), usual);
  } else {
    await Promise.all([
      run(proc0 + 'a', () => 'locks:orders', usual),
      run(proc0 + 'b', () => 'locks:stock', process.env.SHORT_B
        ? () => ({ long: false, overrun: false, hold: 10 + Math.random() * 30 })
        : () => ({ long: true, overrun: false, hold: 700 + Math.random() * 1200 })),
    ]);
  }
  await redis.quit();
}
main().catch((e) => {
  log(proc0, { event: 'error', message: String(e) });
  process.exit(1);
});
