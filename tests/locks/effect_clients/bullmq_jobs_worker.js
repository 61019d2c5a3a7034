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
const { fork } = require('child_process');
const { port, proc, rounds, now_us, log, sleep } = require('./truth_log');

const QUEUE = 'jobs';
const LOCK_MS = 1200;
const KILLED = 'p3';
const KILL_AFTER_MS = 3000;  // after the child's start: past record.sh's mid-run join (1.5 s)
const lockKey = (id) => `bull:${QUEUE}:${id}:lock`;

async function child() {
  const { Queue, Worker } = require('bullmq');
  const connection = { host: '127.0.0.1', port };
  const held = new Map();  // job id -> {token, lease_from_us}
  let pending = 0;  // lock calls sent and not answered: no kill while one may change a lock
  const report = () => process.send && process.send({ pending, held: [...held].map(([id, h]) => ({ id, ...h })) });
  const call = async (f) => { ++pending; try { return await f(); } finally { --pending; } };
  const acquired = (id, token, sent_us) => {
    if (!id) return;
    log({ event: 'attempt', lock: lockKey(id), owner: token, reply: 'OK', sent_us });
    log({ event: 'acquired', lock: lockKey(id), owner: token });
    held.set(String(id), { token, lease_from_us: sent_us });
    report();
  };
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
      log({ event: 'release_refused', lock: lockKey(id), owner: token, sent_us, message: String(e) });
      held.delete(id);
      report();
      throw e;
    }
    log({ event: 'released', lock: lockKey(id), owner: token, sent_us });
    held.delete(id);
    report();
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

// The parent: forks the worker, and for KILLED kills it with SIGKILL once it has run
// KILL_AFTER_MS and holds at least two jobs, logging the end of each of their locks.
function parent() {
  const kid = fork(__filename, process.argv.slice(2), { env: { ...process.env, BULLMQ_CHILD: '1' }, stdio: 'inherit' });
  const started = Date.now();
  let killed = false;
  kid.on('message', (m) => {
    if (proc !== KILLED || killed || Date.now() - started < KILL_AFTER_MS || m.pending || m.held.length < 2) return;
    killed = true;
    kid.kill('SIGKILL');
    log({ event: 'killed', jobs: m.held.length });
    for (const h of m.held) {
      log({ event: 'expired', lock: lockKey(h.id), owner: h.token, t_us: h.lease_from_us + LOCK_MS * 1000 });
    }
  });
  kid.on('exit', () => process.exit(0));
}

if (process.env.BULLMQ_CHILD) {
  child().then(() => process.exit(0), (e) => {
    log({ event: 'error', message: String(e && e.stack) });
    process.exit(1);
  });
} else {
  parent();
}
