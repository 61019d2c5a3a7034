// One process of the held-out nest_common_lock recording (record.sh): the distributed lock
// of @meta-1/nest-common 0.0.39 (its @WithLock decorator over its Redis lock backend) on
// ioredis 5, unchanged, used outside Nest (the backend made by createRedisLockBackend and
// injected by injectLockBackend, as its LockInitializer does), never used while building
// lockscope (the twenty-sixth held-out set), contending with the other processes on two
// locks and logging what it did itself, one JSON line per event, to stdout:
//   {"t_us", "proc", "event": "attempt"|"acquired"|"gave_up"|"extended"|"released"|"release_refused"|"expired", "lock", "owner", ...}
// (t_us when the line is written, after the reply came; sent_us, on calls, just before
// the command was handed to the client.)
// Each decorated call draws a fresh randomUUID, its value for every attempt and the hold.
// The acquire is `SET lock:<key> uuid PX ttl NX`, repeated every retryInterval ms until
// waitTimeout has passed (the last sleep cut to what is left, so the give-up follows its
// last refusal at once); with waitTimeout 0 it is tried once. While the method runs, a
// watchdog (setInterval, every ttl/2) sends the renewal, an EVAL of `if redis.call("get",
// KEYS[1]) == ARGV[1] then return redis.call("pexpire", KEYS[1], tonumber(ARGV[2])) else
// return 0 end` with ARGV = [uuid, ttl]; in a `finally` the watchdog stops and the release
// is an EVAL of the same check then `del`. A give-up throws (AppError, code 110) and sends
// nothing more. Each process runs its rounds in a child process (one connection); p2's and
// p3's children kill themselves with SIGKILL once in the middle of a hold (logging the key's
// expiry, its last SET or renewal + the lease, just before) and a new child goes on with the
// next round. One hold in seven stalls its event loop past its lease (a long synchronous
// step: the watchdog cannot run, the key expires, the release answers 0); one round in five
// is a single try (waitTimeout 0).
// With TASKS=n (nest_common_lock_mux), n decorated calls run at once over the child's one
// connection, as a Nest service's requests share its Redis client: each task takes the next
// round, with its own uuid, so one connection carries several waiters and holders; each
// task logs under its own name (p1a, p1b, ...), as one process of its own. A round that
// stalls or is killed first lets the others finish and starts no new one beside it, so
// that only its own hold runs out.
'use strict';
const path = require('path');
const { AsyncLocalStorage } = require('async_hooks');
const { proc, rounds, now_us, log, sleep, runRoundsInChildren } = require('./truth_log');

// orders: a 300 ms lease (renewed every 150 ms), waiters patient for 1.2 s polling every
// 50 ms; stock: a 500 ms lease (renewed every 250 ms), waiters giving up after 250 ms
// polling every 100 ms, so its waiters give up often and may leave it standing free.
const POLICY = { orders: { ttl: 300, waitTimeout: 1200, retryInterval: 50 },
                 stock: { ttl: 500, waitTimeout: 250, retryInterval: 100 } };
const KILL_ROUND = { p2: 8, p3: 12 };  // rounds on orders, whose waiters are patient
const TASKS = Number(process.env.TASKS || 1);

function libraryFile(rel) {
  // The package's `exports` hides its dist files, and its index needs Nest's whole stack.
  for (const dir of (process.env.NODE_PATH || '').split(path.delimiter).filter(Boolean)) {
    const f = path.join(dir, '@meta-1', 'nest-common', 'dist', rel);
    try { return require(f); } catch (e) { if (e.code !== 'MODULE_NOT_FOUND') throw e; }
  }
  throw new Error(`@meta-1/nest-common not found under NODE_PATH (${rel})`);
}

async function child(start) {
  require('reflect-metadata');
  const { Logger } = require('@nestjs/common');
  Logger.overrideLogger(false);  // its logger writes to stdout, where the truth goes
  const Redis = require('ioredis');
  const { WithLock, injectLockBackend } = libraryFile('decorators/with-lock.decorator.js');
  const { createRedisLockBackend } = libraryFile('decorators/lock-backend.redis.js');
  const client = new Redis({ host: '127.0.0.1', port: Number(process.argv[2]) });
  // Each task's own call: its name, its value and when its lease was last set.
  const task = new AsyncLocalStorage();
  const tlog = (o) => log(TASKS > 1 ? { proc: task.getStore().name, ...o } : o);
  // The truth: the backend's calls on the connection, with their answers.
  const setOrig = client.set.bind(client);
  client.set = async (key, value, ...rest) => {
    const sent_us = now_us();
    const r = await setOrig(key, value, ...rest);
    tlog({ event: 'attempt', lock: key, owner: value, reply: r === 'OK' ? 'OK' : null, sent_us });
    const cur = task.getStore();
    cur.owner = value;
    if (r === 'OK') {
      cur.set_us = sent_us;
      tlog({ event: 'acquired', lock: key, owner: value });
    }
    return r;
  };
  const evalOrig = client.eval.bind(client);
  client.eval = async (script, nkeys, key, value, ...rest) => {
    const sent_us = now_us();
    const renewal = /pexpire/.test(script);
    const r = await evalOrig(script, nkeys, key, value, ...rest);
    if (renewal) {
      if (r === 1) task.getStore().set_us = sent_us;
      tlog({ event: 'extended', lock: key, owner: value, reply: r, sent_us });
    } else {
      tlog({ event: r === 1 ? 'released' : 'release_refused', lock: key, owner: value, reply: r, sent_us });
    }
    return r;
  };

  // A job guarded by the decorator, as a Nest service's method would be.
  class Jobs {
    async run(name, hold) { return hold(); }
  }
  const methods = {};
  for (const [name, p] of Object.entries(POLICY)) {
    for (const single of [false, true]) {
      const descriptor = { value: Jobs.prototype.run, writable: true, configurable: true };
      WithLock({ key: name, ttl: p.ttl, waitTimeout: single ? 0 : p.waitTimeout, retryInterval: p.retryInterval })(
        Jobs.prototype, 'run', descriptor);
      methods[name + (single ? ':once' : '')] = descriptor.value;
    }
  }
  const jobs = new Jobs();
  injectLockBackend(jobs, createRedisLockBackend(client));
  const key = (name) => `lock:${name}`;

  const hold = (i, name) => async () => {
    const ttl = POLICY[name].ttl;
    const cur = task.getStore();
    if (KILL_ROUND[proc] === i) {
      await sleep(60 + Math.random() * 60);
      tlog({ event: 'expired', lock: key(name), owner: cur.owner, t_us: cur.set_us + ttl * 1000 });
      process.kill(process.pid, 'SIGKILL');
      await sleep(10_000);
    }
    if (i % 7 === 3) {
      // A synchronous stall past the lease: no renewal can run; the key expires ttl after
      // its SET (or last renewal), and the release then answers 0.
      const until = Date.now() + ttl + 100 + Math.random() * 100;
      while (Date.now() < until) { /* the event loop is blocked */ }
      tlog({ event: 'expired', lock: key(name), owner: cur.owner, t_us: cur.set_us + ttl * 1000 });
    } else {
      await sleep(20 + Math.random() * 380);
    }
  };

  const round = async (i) => {
    const name = i % 2 === 0 ? 'orders' : 'stock';
    const single = i % 5 === 4;
    const cur = task.getStore();
    try {
      await methods[name + (single ? ':once' : '')].call(jobs, name, hold(i, name));
    } catch (e) {
      if (!(e && e.code === 110)) throw e;
      tlog({ event: 'gave_up', lock: key(name), owner: cur.owner, ...(single ? { single_try: true } : {}) });
    }
  };
  let next = start, busy = 0, alone = null;
  const runTask = async (_, n) => {
    for (;;) {
      while (alone) await alone;
      const i = next++;
      if (i >= rounds) return;
      let done = null;
      if (KILL_ROUND[proc] === i || i % 7 === 3) {
        alone = new Promise((r) => { done = r; });
        while (busy > 0) await sleep(5);
      }
      ++busy;
      await task.run({ name: proc + 'abc'[n], owner: '', set_us: 0 }, () => round(i));
      --busy;
      if (done) { alone = null; done(); }
      await sleep(Math.random() * 60);
    }
  };
  await Promise.all(Array.from({ length: TASKS }, runTask));
  await client.quit();
  process.exit(0);
}

runRoundsInChildren(__filename, KILL_ROUND[proc], child);
