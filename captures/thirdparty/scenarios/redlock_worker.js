// One node-redlock v5 process of the "redlock" scenario: a Redlock over three
// independent redis-servers (ioredis, RESP2), taking rl:payment or rl:ledger for a
// 1000 ms lease, extending it during longer holds, and releasing it. One hold in ten
// stalls past its lease before extending (the extend fails; the release finds nothing).
// The truth log has Redlock's own results (its quorum stats: which servers voted for)
// and each server's reply to each script, as JSONL (see ../README.md).
//
//   node redlock_worker.js PROC TRUTH.jsonl CONTROL_DIR PORT1 PORT2 PORT3
'use strict';
const fs = require('node:fs');
const path = require('node:path');
const Redis = require('ioredis');
const Redlock = require('redlock').default;
const { ExecutionError } = require('redlock');
const { truthLog, sleep, endpoint } = require('./truth');

const [proc, truthPath, control, ...ports] = process.argv.slice(2);
const RESOURCES = ['rl:payment', 'rl:ledger'];
const STAMPEDE = 'rl:batch';
const LEASE_MS = 1000;
const log = truthLog(truthPath, { proc });
const clock = log.clock;
const exists = (name) => fs.existsSync(path.join(control, name));
const rand = (lo, hi) => lo + Math.floor(Math.random() * (hi - lo + 1));

// Each process lists the servers in its own order (rotated by its number), so two
// processes attempting at once reach them in different orders and can split the votes.
const rotation = Number(proc.replace(/\D/g, '')) % ports.length;
ports.push(...ports.splice(0, rotation));
const clients = ports.map((port) => new Redis({ host: '127.0.0.1', port: Number(port), protocol: 2 }));
const serverOf = new Map(clients.map((client, i) => [client, `127.0.0.1:${ports[i]}`]));
const redlock = new Redlock(clients, { retryCount: 8, retryDelay: 200, retryJitter: 100 });
const scriptKind = new Map(Object.entries(redlock.scripts).map(([kind, script]) => [script.hash, kind.replace('Script', '')]));

// Each server's reply to each script call, as ioredis returned it to Redlock.
for (const client of clients) {
  const evalsha = client.evalsha.bind(client);
  client.evalsha = async (hash, numKeys, args) => {
    const sent = clock();
    const server = serverOf.get(client);
    const conn = endpoint(client.stream);
    const [keys, argv] = [args.slice(0, numKeys), args.slice(numKeys)];
    try {
      const reply = await evalsha(hash, numKeys, args);
      log('server_reply', { server, conn, script: scriptKind.get(hash), lock: keys.join(','), owner: argv[0], sent_us: sent, reply });
      return reply;
    } catch (error) {
      log('server_reply', { server, conn, script: scriptKind.get(hash), lock: keys.join(','), owner: argv[0], sent_us: sent, error: String(error.message) });
      throw error;
    }
  };
}

// Redlock's per-round statistics: which servers voted for, in each attempt.
async function rounds(attempts) {
  const stats = await Promise.all(attempts);
  return stats.map((s) => ({ for: [...s.votesFor].map((c) => serverOf.get(c)).sort(), against: [...s.votesAgainst.keys()].map((c) => serverOf.get(c)).sort() }));
}

async function hold(resource, settings) {
  const start = clock();
  let lock;
  try {
    lock = await redlock.acquire([resource], LEASE_MS, settings);
  } catch (error) {
    const r = error instanceof ExecutionError ? await rounds(error.attempts) : [];
    log('gave_up', { lock: resource, attempts: r.length, waited_ms: (clock() - start) / 1000, rounds: r, message: String(error.message) });
    return;
  }
  const r = await rounds(lock.attempts);
  log('acquired', { lock: resource, owner: lock.value, attempts: r.length, contended: r.length > 1, waited_ms: (clock() - start) / 1000,
    acquired_on: r[r.length - 1].for, rounds: r, lease_ms: LEASE_MS });
  const stall = resource !== STAMPEDE && Math.random() < 0.1;
  const holdFor = stall ? 0 : resource === STAMPEDE ? rand(50, 200) : rand(100, 1800);
  const began = clock();
  if (stall) await sleep(LEASE_MS + rand(150, 400));
  // Extend while the work outlasts the lease's first half.
  while (!stall && (clock() - began) / 1000 + 500 < holdFor) {
    await sleep(450);
    try {
      lock = await lock.extend(LEASE_MS);
      const e = await rounds(lock.attempts);
      log('extended', { lock: resource, owner: lock.value, lease_ms: LEASE_MS, extended_on: e[e.length - 1].for, attempts: e.length });
    } catch (error) {
      log('extend_failed', { lock: resource, owner: lock.value, message: String(error.message) });
      break;
    }
  }
  if (stall) {
    try {
      lock = await lock.extend(LEASE_MS);
      log('extended', { lock: resource, owner: lock.value, lease_ms: LEASE_MS, stalled: true });
    } catch (error) {
      const e = error instanceof ExecutionError ? await rounds(error.attempts) : [];
      log('extend_failed', { lock: resource, owner: lock.value, stalled: true, rounds: e, message: String(error.message) });
    }
  } else {
    const left = holdFor - (clock() - began) / 1000;
    if (left > 0) await sleep(left);
  }
  try {
    const released = await lock.release();
    const e = await rounds(released.attempts);
    log('released', { lock: resource, owner: lock.value, released_on: e[e.length - 1].for, attempts: e.length });
  } catch (error) {
    const e = error instanceof ExecutionError ? await rounds(error.attempts) : [];
    log('release_failed', { lock: resource, owner: lock.value, attempts: e.length, message: String(error.message) });
  }
}

async function main() {
  await Promise.all(clients.map((c) => c.ping()));
  // Load the three scripts on every server before the recording starts.
  const warm = await redlock.acquire([`warmup:${proc}`], LEASE_MS);
  await (await warm.extend(LEASE_MS)).release();
  log('connections', { pid: process.pid, conns: Object.fromEntries(clients.map((c) => [serverOf.get(c), endpoint(c.stream)])) });
  fs.writeFileSync(path.join(control, `${proc}.ready`), '');
  while (!exists('go')) await sleep(10);
  while (!exists('stop')) {
    // About one cycle in three is a stampede, as cron-like jobs make: the processes take
    // rl:batch once each (no retries) on a shared 500 ms wall-clock tick, and
    // simultaneous attempts are where quorums split.
    // The wait ends by spinning, so the processes attempt within microseconds.
    if (Math.random() < 0.35) {
      const tick = (Math.floor(clock() / 500_000) + 1) * 500_000;
      await sleep(Math.max(0, (tick - clock()) / 1000 - 3));
      while (clock() < tick) { /* spin */ }
      await hold(STAMPEDE, { retryCount: 0 });
    } else {
      await hold(RESOURCES[rand(0, RESOURCES.length - 1)]);
    }
    await sleep(rand(0, 150));
  }
  log('stopped', {});
  await redlock.quit();
}

main().catch((error) => { log('error', { message: String(error && error.stack || error) }); process.exit(1); });
