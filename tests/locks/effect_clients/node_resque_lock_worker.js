// One process of the held-out node-resque JobLock recording (record.sh): node-resque 9.7.1 on
// ioredis 5, unchanged, never used while building lockscope (the sixteenth held-out set).
// Each process runs what a node-resque deployment runs: a Queue that enqueues jobs, a Worker
// on queue `jobs` (polling every 100 ms, its ping written as often) and a Scheduler (polling
// every 200 ms for delayed jobs, leader lock of 2 s), each on its own connection. Every job
// `work(resource, id)` uses the JobLock plugin on its resource (3 of them), so the three
// processes' workers collide on the same lock key: a worker refused re-enqueues the job
// 300 ms later (a delayed job the leading scheduler moves back) and moves on. The plugin's
// key is set to the resource alone (its `key` option): by default it is every argument, and
// two refused copies of one job re-enqueued in the same second make enqueueAt throw, after
// which afterPerform DELetes a lock another worker holds. Logs, one JSON line per event
// (node_resque_truth.js): the JobLock's attempts, acquisitions, give-ups and releases, and
// the scheduler's leader election as it sees it.
'use strict';
const { Plugins } = require('node-resque');
const { port, proc, rounds, log, sleep } = require('./truth_log');
const { logJobLock, connectProcess } = require('./node_resque_truth');

const RESOURCES = ['alpha', 'beta', 'gamma'];
const LEADER_TTL_S = 2;
const jobs = {
  work: {
    plugins: [Plugins.JobLock],
    pluginOptions: {
      JobLock: {
        lockTimeout: 5,
        enqueueTimeout: 300,
        key: function () { return this.worker.connection.key('workerslock', this.func, this.queue, this.args[0]); },
      },
    },
    perform: async (resource, id) => { await sleep(60 + Math.random() * 160); return id; },
  },
};

async function main() {
  const { queue, worker, scheduler, leader } =
    await connectProcess(port, jobs, { workerTimeout: 100, schedulerTimeout: 200, leaderTtlS: LEADER_TTL_S });
  logJobLock(worker, 'resque:workerslock:');
  await scheduler.start();
  await worker.start();
  for (let i = 0; i < rounds; ++i) {
    const resource = RESOURCES[Math.floor(Math.random() * RESOURCES.length)];
    await queue.enqueue('jobs', 'work', [resource, `${proc}-${i}`]);
    await sleep(40 + Math.random() * 120);
  }
  // Until nothing is left to run anywhere (no queued or delayed job, this worker idle),
  // seen so three times in a row.
  for (let quiet = 0; quiet < 3;) {
    await sleep(300);
    const queued = await queue.length('jobs');
    const delayed = await queue.connection.redis.zcard(queue.connection.key('delayed_queue_schedule'));
    quiet = queued === 0 && delayed === 0 && !worker.working ? quiet + 1 : 0;
  }
  await worker.end();
  await scheduler.end();
  if (leader.waiting) log({ event: 'gave_up', lock: leader.key, owner: leader.owner });
  await queue.end();
}

main().then(() => process.exit(0), (e) => {
  log({ event: 'error', message: String(e && e.stack) });
  process.exit(1);
});
