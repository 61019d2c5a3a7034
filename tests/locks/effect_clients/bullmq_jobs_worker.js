// One process of the held-out BullMQ recording (record.sh bullmq_jobs): bullmq 6.7.0 on
// ioredis 5, unchanged, never used while building lockscope (the seventeenth held-out set).
// Three processes run a Worker each on queue `jobs` (concurrency 3, a job lock of
// LOCK_MS, renewed by the worker's lock manager, the stalled-jobs check every second); p1
// also runs the Queue that adds the jobs (50-1500 ms of work each). Each Worker runs in a
// child process of its own: p3's parent kills its child with SIGKILL once, mid-run, while
// it holds jobs; their locks run out, another worker's stalled check moves the jobs back to
// the wait list and another worker takes them (under the same lock key, a new token).
//
// The job lock is `bull:jobs:<id>:lock`, its value the worker's token for that job
// (`<worker id>:<n>`). Logged, one JSON line per event (truth_log.js), by wrapping the
// worker's own backend calls:
// - moveToActive, and moveToFinished when it hands the next job back: the script SETs the
//   lock to the token with PX LOCK_MS; an attempt (always answered: the key is new) and an
//   acquisition, its owner the token;
// - extendLocks: per job, `extended` with reply 1 unless the script listed it as failed;
// - moveToFinished: the script checks the token and DELetes the lock: `released`, or
//   `release_refused` when it answers an error code (the lock was gone or another's);
// - the killed child's locks: its parent dates each one's end, the last PX it was set
//   with (sent time of its last acquire or successful renewal) + LOCK_MS, as `expired`.
'use strict';
const { port, proc, rounds, now_us, log, sleep } = require('./truth_log');
const { jobLockBook, runKilledOnce } = require('./job_lock_truth');

const QUEUE = 'jobs';
const LOCK_MS = 1200;
const KILLED = 'p3';
const KILL_AFTER_MS = 3000;  // after the child's start: past record.sh's mid-run join (1.5 s)
const lockKey = (id) => `bull:${QUEUE}:${id}:lock`;

async function child() {
  const { Queue, Worker } = require('bullmq');
  const connection = { host: '127.0.0.1', port };
  const { held, report, call, acquired, released, release_refused } = jobLockBook(lockKey);
  const worker = new Worker(QUEUE, async () => { await sleep(50 + Math.random() * 1450); }, {
    connection, concurrency: 3, lockDuration: LOCK_MS, stalledInterval: 1000, maxStalledCount: 3,
    autorun: false,
  });
  worker.on('error', (e) => log({ event: 'error', message: String(e) }));
  worker.on('stalled', (id) => log({ event: 'stalled', lock: lockKey(id) }));
  const backend = worker.backend;
  const moveToActive = backend.moveToActive.bind(backend);
  backend.moveToActive = async (token, name) => {
    const sent_us = now_us();
    const res = await call(() => moveToActive(token, name));
    if (res && res[0]) acquired(res[1], token, sent_us);
    return res;
  };
  const moveToFinished = backend.moveToFinished.bind(backend);
  backend.moveToFinished = async (jobId, args) => {
    const id = String(jobId);
    const token = held.has(id) ? held.get(id).token : '';
    const sent_us = now_us();
    let res;
    try {
      res = await call(() => moveToFinished(jobId, args));
    } catch (e) {
      release_refused(id, token, sent_us, e);
      throw e;
    }
    released(id, token, sent_us);
    if (res && res[0]) acquired(res[1], token, sent_us);
    return res;
  };
  const extendLocks = backend.extendLocks.bind(backend);
  backend.extendLocks = async (jobIds, tokens, duration) => {
    const sent_us = now_us();
    const failed = await call(() => extendLocks(jobIds, tokens, duration));
    const bad = new Set((failed || []).map(String));
    jobIds.forEach((id, i) => {
      const ok = !bad.has(String(id));
      log({ event: 'extended', lock: lockKey(id), owner: tokens[i], reply: ok ? 1 : 0, sent_us });
      if (ok && held.has(String(id))) held.get(String(id)).lease_from_us = sent_us;
    });
    report();
    return failed;
  };
  worker.run();
  let queue = null;
  if (proc === 'p1') {
    queue = new Queue(QUEUE, { connection });
    for (let i = 0; i < rounds; ++i) {
      await queue.add('work', { i });
      await sleep(60 + Math.random() * 120);
    }
  }
  // Until every job has run somewhere (the killed worker's too), seen so three times in a row.
  const counts = new Queue(QUEUE, { connection });
  for (let quiet = 0; quiet < 3;) {
    await sleep(300);
    const c = await counts.getJobCounts('waiting', 'active', 'delayed', 'prioritized', 'paused', 'completed', 'failed');
    const done = c.completed + c.failed;
    quiet = done >= rounds && done === Object.values(c).reduce((a, b) => a + b, 0) ? quiet + 1 : 0;
  }
  await worker.close();
  await counts.close();
  if (queue) await queue.close();
}

runKilledOnce({ child, childEnv: 'BULLMQ_CHILD', lockKey, lockMs: LOCK_MS, killed: KILLED, killAfterMs: KILL_AFTER_MS });
