// One process of the held-out node-resque leader recording (record.sh): node-resque 9.7.1 on
// ioredis 5, unchanged, never used while building lockscope (the sixteenth held-out set).
// Each round this process starts a node-resque process in a child of its own, as a deploy
// restarts one: a Scheduler (polling every 150 ms, a leader lock of 1 s, the shortest the
// library allows: it is EX seconds), a Worker on queue `jobs` (its ping every 200 ms) and a
// Queue that enqueues a delayed job every 300 ms (the leader moves them to `jobs` when due),
// each on its own connection. The Scheduler elects a leader by `SET key name EX 1 NX`; a
// follower polls so, the leader keeps it by that SET (refused), `GET key` (its own name)
// and `EXPIRE key 1` each poll; end() does the same and then `DEL key`. The child:
//   - as leader, after its term (1.2-2.4 s, between polls): ends (its DEL releases the lock)
//     or, one round in two, is killed with SIGKILL (its key expires 1 s after its last
//     EXPIRE; logged just before it kills itself: nothing after it is sent);
//   - as follower, after its patience (2.5-4 s) ends: its end()'s SET is one more refused
//     attempt, then it gives up.
// Logs, one JSON line per event (node_resque_truth.js), the leader election as each
// scheduler sees it.
'use strict';
const { spawn } = require('child_process');
const { port, proc, rounds, log, sleep } = require('./truth_log');
const { connectProcess } = require('./node_resque_truth');

const LEADER_TTL_S = 1;
const jobs = { tick: { perform: async (n) => n } };

async function supervise() {
  for (let i = 0; i < rounds; ++i) {
    const child = spawn(process.execPath, [__filename, String(port), proc, String(rounds), 'child', String(i)],
                        { stdio: ['ignore', 'inherit', 'inherit'] });
    const code = await new Promise((r) => child.on('exit', (c, sig) => r(sig || c)));
    if (code !== 0 && code !== 'SIGKILL') throw new Error(`child exited with ${code}`);
    await sleep(100 + Math.random() * 300);
  }
}

async function child(round) {
  const { queue, worker, scheduler, leader } =
    await connectProcess(port, jobs, { workerTimeout: 200, schedulerTimeout: 150, leaderTtlS: LEADER_TTL_S });
  let n = 0, stopped = false;
  const enqueuing = (async () => {
    while (!stopped) {
      await queue.enqueueIn(200 + Math.random() * 800, 'jobs', 'tick', [`${proc}-${round}-${n++}`]);
      await sleep(300);
    }
  })();
  await scheduler.start();
  await worker.start();
  const kill = round % 2 === 1;
  const patience = Date.now() + 2500 + Math.random() * 1500;
  let term_end = null;
  for (;;) {
    await sleep(20);
    if (leader.leader && term_end === null) term_end = Date.now() + 1200 + Math.random() * 1200;
    if (term_end === null ? Date.now() >= patience : Date.now() >= term_end) break;
  }
  // Between polls: nothing of the election in flight.
  while (scheduler.processing) await sleep(5);
  if (term_end !== null && leader.leader && kill) {
    log({ event: 'expired', lock: leader.key, owner: leader.owner, t_us: leader.lease_from_us + LEADER_TTL_S * 1e6 });
    process.kill(process.pid, 'SIGKILL');
  }
  stopped = true;
  await enqueuing;
  await worker.end();
  await scheduler.end();
  if (leader.waiting) log({ event: 'gave_up', lock: leader.key, owner: leader.owner });
  await queue.end();
}

const main = process.argv[5] === 'child' ? () => child(Number(process.argv[6])) : supervise;
main().then(() => process.exit(0), (e) => {
  log({ event: 'error', message: String(e && e.stack) });
  process.exit(1);
});
