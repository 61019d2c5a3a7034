// One process of the held-out bottleneck recording (record.sh): Bottleneck 2.19.5 (a task
// scheduler and concurrency limiter) clustered over Redis through ioredis 5, unchanged, never
// used while building lockscope (the twenty-second held-out set), contending with the other
// processes on two limiters and logging what it did itself, one JSON line per event, to stdout:
//   {"t_us", "proc", "event": "attempt"|"acquired"|"gave_up"|"released"|"expired", "lock", "owner", ...}
// (t_us when the line is written, after the reply came; sent_us, on calls, just before
// the command was handed to the client.)
// A limiter `<id>` keeps no lock key: its state is 8 keys `b_<id>_*` changed only by
// Bottleneck's scripts (SCRIPT-defined by ioredis: EVALSHA, EVAL on NOSCRIPT), each called
// with KEYS [b_<id>_settings, _job_weights, _job_expirations, _job_clients, _client_running,
// _client_num_queued, _client_last_registered, _client_last_seen] and ARGV [now (the
// client's Date.now()), client id, ...]. The count of running jobs is the `running` field
// of the settings hash, its limit `maxConcurrent` beside it. A job is let in by `register`
// (ARGV [now, client, index, weight, expiration]: a new random index drawn for each try),
// which HINCRBYs `running` by its weight when that stays within maxConcurrent and records
// the index in the hashes of holders (index -> weight, index -> client) and its expiry
// (now + expiration) in a sorted set, answering {1, wait, reservoir}, else {nil}; it is
// given back by `free` (ARGV [now, client, index]: its expiry set to 0, answering the
// count still running). Every script first drops the jobs whose expiry has passed
// (HINCRBY running by minus their weights) and PUBLISHes the capacity freed on `b_<id>`,
// on which each client's second connection listens and tries its queued jobs again. So
// this log's lock is the counter's key, `b_<id>_settings`, and a job's owner its index.
// `submit` (once per job) counts it queued; a `heartbeat` every 5 s. No renewal.
// Each process runs its rounds in a child process (one ioredis connection and its
// subscriber, shared by both limiters), alternately on `orders` (maxConcurrent 1) and
// `pool` (2), a job of weight 1 a round with an expiration of 1 s; a job still queued
// after its patience is dropped the way Bottleneck drops queued jobs itself (stop() with
// dropWaitingJobs, a HWM or a block), between two tries: a give-up. p1's and p3's children
// each kill themselves with SIGKILL once in the middle of a job (one on each limiter):
// the job's count is held until its expiry (the child logs it, register's now + 1 s, just
// before: nothing after it is sent) and dropped by the next script any client calls.
'use strict';
const path = require('path');
const { port, proc, rounds, now_us, log, sleep, superviseRounds } = require('./truth_log');

const modules = process.env.NODE_PATH;
const EXPIRATION_MS = 1000;
// orders: one job at a time, given up after 0.5 s; pool: two, given up after 0.3 s.
const POLICY = { orders: { maxConcurrent: 1, patience: 500 }, pool: { maxConcurrent: 2, patience: 300 } };
const KILL_ROUND = { p1: 6, p3: 13 };  // orders for p1, pool for p3

async function child(start) {
  const Redis = require(path.join(modules, 'ioredis'));
  const Bottleneck = require(path.join(modules, 'bottleneck'));
  const redis = new Redis({ host: '127.0.0.1', port });
  const connection = new Bottleneck.IORedisConnection({ client: redis });
  const limiters = {};
  for (const [id, p] of Object.entries(POLICY)) {
    limiters[id] = new Bottleneck({ id, datastore: 'ioredis', connection, maxConcurrent: p.maxConcurrent, clearDatastore: false });
    await limiters[id].ready();
  }

  // The truth: the scripts' calls as the limiters make them (ioredis commands named after
  // the scripts, callback style), each with its arguments and reply.
  // (numKeys, 8 keys, now, client, ...script's own)
  const registeredAt = new Map();  // index -> register's now (ms)
  const wrap = (name, after) => {
    const orig = redis[name];
    redis[name] = (...a) => {
      const cb = typeof a[a.length - 1] === 'function' ? a.pop() : null;
      const sent_us = now_us();
      return orig.call(redis, ...a, (err, res) => {
        if (!err) after(a, res, sent_us);
        if (cb) cb(err, res);
      });
    };
  };
  wrap('register', (a, res, sent_us) => {
    const lock = a[1], index = a[11];
    const ok = Array.isArray(res) && res[0] === 1;
    log({ event: 'attempt', lock, owner: index, reply: ok ? 'OK' : 0, sent_us });
    if (ok) { registeredAt.set(index, Number(a[9])); log({ event: 'acquired', lock, owner: index }); }
  });
  wrap('free', (a, res, sent_us) => {
    // Its reply is the count still running, not whether it freed anything (`reply` would
    // read as a DEL's): a job's free always gives back what its register took.
    log({ event: 'released', lock: a[1], owner: a[11], running: res, sent_us });
  });

  for (let i = start; i < rounds; ++i) {
    const id = i % 2 === 0 ? 'orders' : 'pool';
    const lock = `b_${id}_settings`;
    const limiter = limiters[id];
    const killed = KILL_ROUND[proc] === i;
    const hold = id === 'orders' ? 20 + Math.random() * 380 : 200 + Math.random() * 200;
    let started = false;
    const job = limiter.schedule({ expiration: EXPIRATION_MS }, async () => {
      started = true;
      if (!killed) { await sleep(hold); return; }
      await sleep(150 + Math.random() * 200);
      // The running job's index: the latest register of this process that took.
      const index = [...registeredAt.keys()].pop();
      log({ event: 'expired', lock, owner: index, t_us: (registeredAt.get(index) + EXPIRATION_MS) * 1000 });
      process.kill(process.pid, 'SIGKILL');
      await sleep(10_000);
    });
    const patience = setTimeout(() => {
      // Between two tries (they run under the register lock), as stop() drops them.
      if (!started) limiter._registerLock.schedule(() => { limiter._dropAllQueued(); return Promise.resolve(); });
    }, POLICY[id].patience);
    const held = await job.then(() => true, (e) => {
      if (!/dropped/.test(String(e && e.message))) throw e;
      return false;
    });
    clearTimeout(patience);
    if (!held) log({ event: 'gave_up', lock });
    await sleep(Math.random() * 60);
  }
  await Promise.all(Object.values(limiters).map((l) => l.disconnect()));
  await redis.quit().catch(() => {});
  process.exit(0);
}

const main = process.argv[5] === 'rounds' ? () => child(Number(process.argv[6])) : () => superviseRounds(__filename, KILL_ROUND[proc]);
main().catch((e) => {
  log({ event: 'error', message: String(e && e.stack) });
  process.exit(1);
});
