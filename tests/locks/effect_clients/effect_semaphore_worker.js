// One process of the held-out effect_semaphore recording (record.sh): effect-distributed-lock
// 0.0.11 (a distributed semaphore for the Effect library) with its Redis backing on ioredis
// 5, unchanged, never used while building lockscope (the twentieth held-out set), contending
// with the other processes on two semaphores and logging what it did itself, one JSON line
// per event, to stdout:
//   {"t_us", "proc", "event": "attempt"|"acquired"|"gave_up"|"extended"|"extend_refused"|"released"|"release_refused"|"expired", "lock", "owner", ...}
// (t_us when the line is written, after the reply came; sent_us, on calls, just before
// the command was handed to the client.)
// A semaphore is a sorted set `semaphore:<name>` of permits `<holder id>_<i>` scored by the
// client's clock (Date.now(), sent as an argument): the acquire script (EVAL, KEYS [key],
// ARGV [limit, permits, holder id, ttl ms, now]) drops the members older than now - ttl,
// then adds the holder's permits and PEXPIREs the key when they fit under the limit (1),
// else answers 0; the refresh script (the same ARGV) re-scores them when `<holder id>_0` is
// still there (1, else 0); the release script (KEYS [key, `semaphore:<name>:released`],
// ARGV [permits, holder id, "1"]) ZREMs them and PUBLISHes the count on the channel. A
// permit outlives its holder until the next script drops it (score + ttl). take() draws one
// holder id (crypto.randomUUID()) for all its attempts, polls on a fixed spacing and, on a
// connection of its own (redis.duplicate(): SUBSCRIBE, then UNSUBSCRIBE and close when the
// take ends), retries at once on each release message; once held, a keep-alive refreshes at
// once and then every ttl/3. Give-ups are the caller's: take() under Effect.timeout (the
// pending attempt is interrupted, the subscriber closed); one round in six is a single try
// (tryTake). `orders` has 1 permit (a mutex), `pool` 2; every take asks for 1.
// Each process runs its rounds in a child process (one ioredis connection, plus the waits'
// subscribers); p1's and p3's children each kill themselves with SIGKILL once in the middle
// of a hold, between refreshes (the child logs the permit's end, its last score + ttl, just
// before: nothing after it is sent), and a new child goes on with the next round.
'use strict';
const path = require('path');
const { pathToFileURL } = require('url');
const { port, proc, rounds, now_us, log, sleep, runRoundsInChildren } = require('./truth_log');

const modules = process.env.NODE_PATH;
const TTL_MS = 600;  // refreshed every 200 ms
// orders polls every 100 ms with a patience of 0.5 s; pool every 250 ms for 0.3 s, so its
// waiters give up more often and may leave a permit standing free past the idle threshold.
const POLICY = { orders: { limit: 1, spacing: 100, patience: 500 }, pool: { limit: 2, spacing: 250, patience: 300 } };
const KILL_ROUND = { p1: 6, p3: 13 };  // orders for p1, pool for p3

async function child(start) {
  const Redis = require(path.join(modules, 'ioredis'));
  const imp = (p) => import(pathToFileURL(path.join(modules, p)).href);
  const { Effect, Either, Duration, Schedule } = await imp('effect/dist/esm/index.js');
  const { DistributedSemaphore, RedisBacking } = await imp('effect-distributed-lock/dist/index.js');
  const redis = new Redis({ host: '127.0.0.1', port });

  // The truth: the backing's script calls as the semaphore makes them (by their text), each
  // with its arguments and reply.
  const gaveUp = new Set();  // holder ids whose take the worker gave up
  const lastScore = new Map();  // holder id -> the `now` of its latest acquire or refresh that took
  const evalScript = redis.eval.bind(redis);
  redis.eval = async (script, numKeys, ...args) => {
    const sent_us = now_us();
    const res = await evalScript(script, numKeys, ...args);
    const lock = args[0];
    if (script.includes('zcard')) {  // acquire: [limit, permits, holder, ttl, now]
      const owner = args[3];
      log({ event: 'attempt', lock, owner, reply: res === 1 ? 'OK' : 0, sent_us });
      if (res === 1) {
        lastScore.set(owner, Number(args[5]));
        log({ event: 'acquired', lock, owner });
        // Answered after the take was given up: the client drops it, the permit runs out.
        if (gaveUp.has(owner)) log({ event: 'expired', lock, owner, t_us: (Number(args[5]) + TTL_MS) * 1000 });
      }
    } else if (script.includes('zscore')) {  // refresh: [limit, permits, holder, ttl, now]
      const owner = args[3];
      if (res === 1) lastScore.set(owner, Number(args[5]));
      log({ event: res === 1 ? 'extended' : 'extend_refused', lock, owner, reply: res, sent_us });
    } else if (script.includes('zrem')) {  // release: KEYS [key, channel], ARGV [permits, holder, publish]
      const owner = args[3];
      log({ event: res >= 1 ? 'released' : 'release_refused', lock, owner, reply: res, sent_us });
    }
    return res;
  };

  const layer = RedisBacking.layer(redis, { keyPrefix: 'semaphore:' });
  const sems = {};
  for (const [name, p] of Object.entries(POLICY)) {
    sems[name] = await Effect.runPromise(DistributedSemaphore.make(name, {
      limit: p.limit, ttl: Duration.millis(TTL_MS), acquireRetryPolicy: Schedule.spaced(Duration.millis(p.spacing)),
    }).pipe(Effect.provide(layer)));
  }

  for (let i = start; i < rounds; ++i) {
    const name = i % 2 === 0 ? 'orders' : 'pool';
    const lock = `semaphore:${name}`;
    const sem = sems[name];
    const owner = crypto.randomUUID();
    const once = i % 6 === 5;
    const killed = KILL_ROUND[proc] === i;
    const hold = name === 'orders' ? 20 + Math.random() * 380 : 200 + Math.random() * 200;
    const body = Effect.promise(async () => {
      if (!killed) { await sleep(hold); return; }
      // Between refreshes (every ttl/3 from the first, right after the acquire).
      await sleep(250);
      for (;;) {
        const since = Date.now() - lastScore.get(owner);
        if (since > 40 && since < TTL_MS / 3 - 40) break;
        await sleep(5);
      }
      log({ event: 'expired', lock, owner, t_us: (lastScore.get(owner) + TTL_MS) * 1000 });
      process.kill(process.pid, 'SIGKILL');
      await sleep(10_000);
    });
    const round = once
      ? sem.withPermitsIfAvailable(1, { identifier: owner })(body).pipe(Effect.map((o) => o._tag === 'Some'))
      : Effect.scoped(Effect.gen(function* () {
        const got = yield* Effect.either(sem.take(1, { identifier: owner }).pipe(
          Effect.timeout(Duration.millis(POLICY[name].patience))));
        if (Either.isLeft(got)) {
          if (got.left._tag !== 'TimeoutException') return yield* Effect.fail(got.left);
          return false;
        }
        yield* body;
        return true;
      }));
    const held = await Effect.runPromise(round.pipe(Effect.provide(layer)));
    if (!held) {
      gaveUp.add(owner);
      log({ event: 'gave_up', lock, owner, ...(once ? { single_try: true } : {}) });
      // An acquire answered 1 as the timeout interrupted it: dropped, the permit runs out.
      if (lastScore.has(owner)) log({ event: 'expired', lock, owner, t_us: (lastScore.get(owner) + TTL_MS) * 1000 });
    }
    await sleep(Math.random() * 60);
  }
  await redis.quit();
  process.exit(0);
}

runRoundsInChildren(__filename, KILL_ROUND[proc], child);
