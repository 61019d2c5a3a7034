// One process of the held-out Bull recording (record.sh bull_jobs): bull 4.16.5 (BullMQ's
// predecessor, its own Lua scripts) on ioredis 5, unchanged, never used while building
// lockscope (the nineteenth held-out set). Three processes run a Queue processing jobs
// (concurrency 3, a job lock of LOCK_MS renewed every LOCK_MS / 3 by the queue's lock
// extender, the stalled-jobs check every second); p1 also adds the jobs (50-1500 ms of work
// each). Each Queue runs in a child process of its own: p3's parent kills its child with
// SIGKILL once, mid-run, while it holds jobs; their locks run out, another process's
// stalled check moves the jobs back to the wait list and another process takes them.
//
// The job lock is `bull:jobs:<id>:lock`, its value the Queue's token (one uuid per Queue:
// every job a process holds has the same value). Logged, one JSON line per event
// (truth_log.js), by wrapping bull's own script calls (lib/scripts.js):
// - moveToActive, and moveToFinished when it hands the next job back: the script SETs the
//   lock to the token with PX LOCK_MS; an attempt (always answered: the key is new) and an
//   acquisition, its owner the token;
// - extendLock: `extended` with the script's reply (1, or 0 when the lock was not the token's);
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
  const Queue = require('bull');
  const scripts = require('bull/lib/scripts');
  const redis = { host: '127.0.0.1', port };
  const { held, report, call, acquired, released, release_refused } = jobLockBook(lockKey);
  const moveToActive = scripts.moveToActive;
  scripts.moveToActive = async (queue, jobId) => {
    const sent_us = now_us();
    const res = await call(() => moveToActive.call(scripts, queue, jobId));
    if (res && res[1]) acquired(res[1], queue.token, sent_us);
    return res;
  };
  const moveToFinished = scripts.moveToFinished;
  scripts.moveToFinished = async (job, ...rest) => {
    const id = String(job.id);
    const token = job.queue.token;
    const sent_us = now_us();
    let res;
    try {
      res = await call(() => moveToFinished.call(scripts, job, ...rest));
    } catch (e) {
      release_refused(id, token, sent_us, e);
      throw e;
    }
    released(id, token, sent_us);
    if (res && res[1]) acquired(res[1], token, sent_us);
    return res;
  };
  const extendLock = scripts.extendLock;
  scripts.extendLock = async (queue, jobId, duration) => {
    const sent_us = now_us();
    const reply = await call(() => extendLock.call(scripts, queue, jobId, duration));
    const id = String(jobId);
    log({ event: 'extended', lock: lockKey(id), owner: queue.token, reply: reply ? 1 : 0, sent_us });
    if (reply && held.has(id)) held.get(id).lease_from_us = sent_us;
    report();
    return reply;
  };
  const queue = new Queue(QUEUE, {
    redis,
    settings: { lockDuration: LOCK_MS, lockRenewTime: LOCK_MS / 3, stalledInterval: 1000, maxStalledCount: 3 },
  });
  queue.on('error', (e) => log({ event: 'error', message: String(e) }));
  queue.on('stalled', (job) => log({ event: 'stalled', lock: lockKey(job.id) }));
  queue.process(3, async () => { await sleep(50 + Math.random() * 1450); });
  if (proc === 'p1') {
    for (let i = 0; i < rounds; ++i) {
      await queue.add({ i });
      await sleep(60 + Math.random() * 120);
    }
  }
  // Until every job has run somewhere (the killed child's too), seen so three times in a row.
  for (let quiet = 0; quiet < 3;) {
    await sleep(300);
    const c = await queue.getJobCounts();
    const done = c.completed + c.failed;
    quiet = done >= rounds && done === Object.values(c).reduce((a, b) => a + b, 0) ? quiet + 1 : 0;
  }
  await queue.close();
}

runKilledOnce({ child, childEnv: 'BULL_CHILD', lockKey, lockMs: LOCK_MS, killed: KILLED, killAfterMs: KILL_AFTER_MS });
