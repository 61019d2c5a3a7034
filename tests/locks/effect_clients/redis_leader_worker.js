// One process of the held-out redis-leader recording (record.sh): redis-leader 0.1.0 (leader
// election) on ioredis 5, unchanged, never used while building lockscope (the ninth
// held-out set), contending with the other processes on two locks and logging what it did
// itself, one JSON line per event, to stdout:
//   {"t_us", "proc", "event": "attempt"|"acquired"|"gave_up"|"extended"|"released"|"expired", "lock", "owner", ...}
// (t_us when the line is written, after the reply came; sent_us, on calls, just before
// the command was handed to the client.)
// A Leader draws one uuid v4 when it is made (its id, the value of every attempt and
// hold) for the key `leader:` + SHA1(name). elect() is `SET key id PX ttl NX`, retried every
// `wait` ms while refused; once elected, every ttl/2 ms it renews: `GET key`, then, when that
// answers its id, `PEXPIRE key ttl` (else it stops renewing, emits `revoked` and polls
// again). stop() is `GET key`, then, when it answers its id, `DEL key`; either way it stops
// polling. A leader is long-lived and dies as leaders do.
// Each round this process starts a candidate in a child process of its own (one ioredis
// connection), which does one of:
//   - steps down after its term: stop() (GET, DEL), then QUIT;
//   - is killed with SIGKILL while leader, between renewals (nothing in flight): its
//     connection closes with the key still set, which expires ttl after its last renewal
//     (the child logs that expiry just before it kills itself: nothing after it is sent);
//   - stalls (its event loop blocked ttl + 300 ms, as a long GC pause would): its key
//     expires, a follower may take over, and its next renewal's GET shows it is no longer
//     leader (`revoked`): logged as expired, then stop() (GET only) and QUIT;
//   - as a follower, gives up after its patience right after a refusal: stop() (GET only),
//     QUIT; one give-up in four is a follower killed with SIGKILL instead.
'use strict';
const { spawn } = require('child_process');
const { port, proc, rounds, now_us, log, sleep } = require('./truth_log');

const TTL_MS = 1000;
// orders polls every 100 ms (patience 2.5 s); stock every 300 ms (patience 1.5 s), so its
// followers leave it standing free longer than the idle threshold and some give up.
const POLICY = { orders: { wait: 100, patience: 2500 }, stock: { wait: 300, patience: 1500 } };

async function supervise() {
  for (let i = 0; i < rounds; ++i) {
    const name = i % 2 === 0 ? 'orders' : 'stock';
    const child = spawn(process.execPath, [__filename, String(port), proc, String(rounds), 'candidate', name, String(i)],
                        { stdio: ['ignore', 'inherit', 'inherit'] });
    const code = await new Promise((r) => child.on('exit', (c, sig) => r(sig || c)));
    if (code !== 0 && code !== 'SIGKILL') throw new Error(`candidate exited with ${code}`);
    await sleep(Math.random() * 60);
  }
}

async function candidate(name, round) {
  const Redis = require('ioredis');
  const Leader = require('redis-leader');
  const redis = new Redis({ host: '127.0.0.1', port });
  const { wait, patience } = POLICY[name];
  const leader = new Leader(redis, { ttl: TTL_MS, wait, key: name });
  const key = leader.key, id = leader.id;
  const plan = round % 4 === 3 ? 'killed' : round % 5 === 4 ? 'stall' : 'step_down';
  const term = round % 3 === 1 ? 1300 + Math.random() * 700 : 60 + Math.random() * 250;
  const deadline = Date.now() + patience;
  let lease_from_us = 0, done = false, elected = false;
  let finish;
  const finished = new Promise((r) => { finish = r; });

  const quit = async () => { await redis.quit().catch(() => {}); finish(); };
  const kill = () => process.kill(process.pid, 'SIGKILL');

  // The library's calls, wrapped to log each with its reply (callback style, as it calls them).
  const set = redis.set.bind(redis);
  redis.set = (...a) => {
    const cb = a.pop();
    const sent_us = now_us();
    return set(...a, (err, res) => {
      const ok = !err && res === 'OK';
      if (!err) log({ event: 'attempt', lock: key, owner: id, reply: ok ? 'OK' : 0, sent_us });
      if (ok) { lease_from_us = sent_us; elected = true; log({ event: 'acquired', lock: key, owner: id }); }
      cb(err, res);  // the library schedules its next attempt (or its renewals) here
      if (!err && !ok && !done && Date.now() >= deadline) {
        done = true;
        log({ event: 'gave_up', lock: key, owner: id });
        if (round % 8 === 5) kill();  // a follower that dies
        leader.stop();
        setTimeout(quit, 20);
      }
    });
  };
  const pexpire = redis.pexpire.bind(redis);
  redis.pexpire = (k, ttl, cb) => {
    const sent_us = now_us();
    return pexpire(k, ttl, (err, res) => {
      if (!err) log({ event: 'extended', lock: key, owner: id, reply: res, sent_us });
      if (!err && res === 1) lease_from_us = sent_us;
      cb(err, res);
    });
  };
  const del = redis.del.bind(redis);
  redis.del = (k, cb) => {
    const sent_us = now_us();
    return del(k, (err, res) => {
      if (!err) log({ event: res === 1 ? 'released' : 'release_refused', lock: key, owner: id, reply: res, sent_us });
      cb(err, res);
    });
  };
  leader.on('error', (e) => { log({ event: 'error', message: String(e) }); process.exit(1); });
  leader.on('revoked', () => {
    if (plan !== 'stall' || done) return;  // a step-down's DEL also emits revoked
    done = true;
    log({ event: 'expired', lock: key, owner: id, t_us: lease_from_us + TTL_MS * 1000 });
    leader.stop();  // GET only: no longer leader
    setTimeout(quit, 20);
  });
  leader.on('elected', async () => {
    if (done) return;
    const end = Date.now() + (plan === 'stall' ? Math.max(term, 600) : term);
    // Act between renewals (GET + PEXPIRE take a few ms; renewals come every ttl/2).
    const quiet = () => { const since = (now_us() - lease_from_us) / 1000 % (TTL_MS / 2); return since > 60 && since < TTL_MS / 2 - 60; };
    await sleep(end - Date.now());
    while (!quiet()) await sleep(10);
    if (plan === 'killed') {
      done = true;
      log({ event: 'expired', lock: key, owner: id, t_us: lease_from_us + TTL_MS * 1000 });
      kill();
    } else if (plan === 'stall') {
      const until = Date.now() + TTL_MS + 300;
      while (Date.now() < until) { /* the event loop blocked: no renewal goes out */ }
    } else {
      done = true;
      leader.stop();  // GET, then DEL
      setTimeout(quit, 50);
    }
  });
  leader.elect();
  await finished;
  process.exit(0);
}

const main = process.argv[5] === 'candidate' ? () => candidate(process.argv[6], Number(process.argv[7])) : supervise;
main().catch((e) => {
  log({ event: 'error', message: String(e && e.stack) });
  process.exit(1);
});
