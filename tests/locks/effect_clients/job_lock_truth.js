// What the job-queue recordings share (bullmq_jobs_worker.js, bull_jobs_worker.js): a
// child process runs the queue's worker and logs each job lock it takes, renews and gives
// back; its parent kills it with SIGKILL once (for the process named `killed`) while it
// holds at least two jobs, and dates the end of each of their locks, the last PX it was
// set with (sent time of its last acquire or successful renewal) + the lock's lease.
'use strict';
const { fork } = require('child_process');
const { proc, now_us, log } = require('./truth_log');

// The child's book of the job locks it holds, reported to the parent after each change.
function jobLockBook(lockKey) {
  const held = new Map();  // job id -> {token, lease_from_us}
  let pending = 0;  // lock calls sent and not answered: no kill while one may change a lock
  const report = () => process.send && process.send({ pending, held: [...held].map(([id, h]) => ({ id, ...h })) });
  return {
    held,
    report,
    // A lock call: counted as pending until answered.
    call: async (f) => { ++pending; try { return await f(); } finally { --pending; } },
    // The script that moved job `id` to active SET its lock to `token` (always answered).
    acquired: (id, token, sent_us) => {
      if (!id) return;
      log({ event: 'attempt', lock: lockKey(id), owner: token, reply: 'OK', sent_us });
      log({ event: 'acquired', lock: lockKey(id), owner: token });
      held.set(String(id), { token, lease_from_us: sent_us });
      report();
    },
    released: (id, token, sent_us) => {
      log({ event: 'released', lock: lockKey(id), owner: token, sent_us });
      held.delete(String(id));
      report();
    },
    release_refused: (id, token, sent_us, e) => {
      log({ event: 'release_refused', lock: lockKey(id), owner: token, sent_us, message: String(e) });
      held.delete(String(id));
      report();
    },
  };
}

// Runs `child` in a forked process (marked by the environment variable `childEnv`); the
// parent kills the `killed` process's child once it has run `killAfterMs` and holds two jobs.
function runKilledOnce({ child, childEnv, lockKey, lockMs, killed, killAfterMs }) {
  if (process.env[childEnv]) {
    child().then(() => process.exit(0), (e) => {
      log({ event: 'error', message: String(e && e.stack) });
      process.exit(1);
    });
    return;
  }
  const kid = fork(require.main.filename, process.argv.slice(2), { env: { ...process.env, [childEnv]: '1' }, stdio: 'inherit' });
  const started = Date.now();
  let done = false;
  kid.on('message', (m) => {
    if (proc !== killed || done || Date.now() - started < killAfterMs || m.pending || m.held.length < 2) return;
    done = true;
    kid.kill('SIGKILL');
    log({ event: 'killed', jobs: m.held.length });
    for (const h of m.held) {
      log({ event: 'expired', lock: lockKey(h.id), owner: h.token, t_us: h.lease_from_us + lockMs * 1000 });
    }
  });
  kid.on('exit', () => process.exit(0));
}

module.exports = { jobLockBook, runKilledOnce, now_us };
