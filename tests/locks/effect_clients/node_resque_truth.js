// The truth logging the two node-resque recordings share (node_resque_lock_worker.js,
// node_resque_leader_worker.js): node-resque 9.7.1 on ioredis 5, unchanged, never used while
// building lockscope (the sixteenth held-out set). Each wraps the library's own calls on
// one of its connections and logs them with their replies, as truth_log.js's lines.
'use strict';
const { now_us, log } = require('./truth_log');

// Replaces redis[name] by a wrapper that sees every call of the library on that connection
// (ioredis's promise form: node-resque awaits each; MULTI goes through its own queue).
function wrap(redis, name, around) {
  const original = redis[name].bind(redis);
  redis[name] = (...args) => around(original, ...args);
}

// JobLock (plugins/JobLock.js): beforePerform is `SET key <now s + lockTimeout + 1> EX
// lockTimeout NX`; OK runs the job, anything else re-enqueues it (enqueueIn) and skips it:
// this worker gives that job up at once (whoever takes the re-enqueued copy tries anew).
// afterPerform is a plain `DEL key`, whatever holds it. The value, a whole-second
// timestamp, is the owner on the wire: processes that try in the same second send the same.
function logJobLock(worker, prefix) {
  const redis = worker.connection.redis;
  const held = new Map();  // key -> the value this worker set
  wrap(redis, 'set', async (set, ...a) => {
    if (!String(a[0]).startsWith(prefix)) return set(...a);
    const sent_us = now_us();
    const res = await set(...a);
    const owner = String(a[1]), ok = res === 'OK';
    log({ event: 'attempt', lock: a[0], owner, reply: ok ? 'OK' : 0, sent_us });
    if (ok) {
      held.set(a[0], owner);
      log({ event: 'acquired', lock: a[0], owner });
    } else {
      log({ event: 'gave_up', lock: a[0], owner });
    }
    return res;
  });
  wrap(redis, 'del', async (del, ...a) => {
    if (!String(a[0]).startsWith(prefix)) return del(...a);
    const sent_us = now_us();
    const res = await del(...a);
    const owner = held.get(a[0]) || '';
    held.delete(a[0]);
    log({ event: res === 1 ? 'released' : 'release_refused', lock: a[0], owner, reply: res, sent_us });
    return res;
  });
}

// The Scheduler's leader election (core/scheduler.js): tryForLeader is `SET key <name> EX
// leaderLockTimeout NX`; refused, `GET key`, and when that answers its own name `EXPIRE key
// leaderLockTimeout` (it keeps leadership). releaseLeaderLock (end()) is tryForLeader, then,
// when leader, a plain `DEL key`. Logged as the scheduler sees it: a refused SET followed by
// its own name is its renewal's first step, not an attempt; a refused SET followed by another
// name (or none) is an attempt refused, and when it thought itself leader, its lease had run
// out (expired, at its last lease + the timeout); a SET that succeeds while it thought itself
// leader means the same, then a new acquisition. Returns the state the worker reads
// (waiting: refused since its last hold, so a follower that ends gave up).
function logLeader(scheduler, ttl_s) {
  const redis = scheduler.connection.redis;
  const key = scheduler.queue.leaderKey();
  const owner = scheduler.options.name;
  const state = { leader: false, lease_from_us: 0, waiting: false, key, owner };
  let refused = null;  // the refused SET awaiting its GET: {sent_us, reply_us}
  const lost = () => {
    log({ event: 'expired', lock: key, owner, t_us: state.lease_from_us + ttl_s * 1e6 });
    state.leader = false;
  };
  wrap(redis, 'set', async (set, ...a) => {
    if (a[0] !== key) return set(...a);
    const sent_us = now_us();
    const res = await set(...a);
    const reply_us = now_us();
    if (res === 'OK') {
      if (state.leader) lost();
      log({ event: 'attempt', lock: key, owner, reply: 'OK', sent_us, t_us: reply_us });
      log({ event: 'acquired', lock: key, owner });
      Object.assign(state, { leader: true, lease_from_us: sent_us, waiting: false });
    } else {
      refused = { sent_us, reply_us };
    }
    return res;
  });
  wrap(redis, 'get', async (get, ...a) => {
    if (a[0] !== key) return get(...a);
    const res = await get(...a);
    if (refused) {
      if (res !== owner) {
        if (state.leader) lost();
        log({ event: 'attempt', lock: key, owner, reply: 0, sent_us: refused.sent_us, t_us: refused.reply_us });
        state.waiting = true;
      }
      refused = null;
    }
    return res;
  });
  wrap(redis, 'expire', async (expire, ...a) => {
    if (a[0] !== key) return expire(...a);
    const sent_us = now_us();
    const res = await expire(...a);
    log({ event: 'extended', lock: key, owner, reply: res, sent_us });
    if (res === 1) state.lease_from_us = sent_us;
    return res;
  });
  wrap(redis, 'del', async (del, ...a) => {
    if (a[0] !== key) return del(...a);
    const sent_us = now_us();
    const res = await del(...a);
    log({ event: res === 1 ? 'released' : 'release_refused', lock: key, owner, reply: res, sent_us });
    state.leader = false;
    return res;
  });
  return state;
}

// What each node-resque process of both recordings runs: a Queue, a Worker on queue `jobs`
// and a Scheduler, each on a connection of its own, connected in that order, the
// scheduler's election logged (logLeader).
async function connectProcess(port, jobs, { workerTimeout, schedulerTimeout, leaderTtlS }) {
  const { Queue, Worker, Scheduler } = require('node-resque');
  const connection = { pkg: 'ioredis', host: '127.0.0.1', port, namespace: 'resque' };
  const queue = new Queue({ connection }, jobs);
  const worker = new Worker({ connection, queues: ['jobs'], timeout: workerTimeout }, jobs);
  const scheduler = new Scheduler({ connection, timeout: schedulerTimeout, leaderLockTimeout: leaderTtlS });
  for (const o of [queue, worker, scheduler]) o.on('error', (e) => log({ event: 'error', message: String(e) }));
  await queue.connect();
  await worker.connect();
  await scheduler.connect();
  return { queue, worker, scheduler, leader: logLeader(scheduler, leaderTtlS) };
}

module.exports = { logJobLock, connectProcess };
