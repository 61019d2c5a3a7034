// One process of the held-out murlock recording (record.sh): the MurLockService of murlock
// 4.4.0 (a NestJS lock service) on node-redis 4, unchanged, never used while building
// lockscope (the fifth held-out set), contending with the other processes on two locks and
// logging what it did itself, one JSON line per event, to stdout:
//   {"t_us", "proc", "event": "attempt"|"acquired"|"gave_up"|"released"|"release_refused"|"expired", "lock", "owner", ...}
// (t_us when the line is written, after the reply came; sent_us, on calls, just before
// the command was handed to the client.)
// Its scripts go as EVAL text every time (never EVALSHA) and copy KEYS/ARGV into Lua
// locals: acquire `GET == clientId or SET key clientId NX PX releaseTime`, answering 1 or 0
// (re-entrant for the same clientId); release `GET == clientId then DEL`, else 0.
// runWithLock draws one clientId (a uuid) per call, retries a refused attempt after
// wait * n ms (n the attempt's number: a linear backoff) or after what the caller's wait
// function answers, and gives up after maxAttempts attempts. No renewal: a hold longer than
// releaseTime outlives its lease, and its release answers 0 (ignoreUnlockFail keeps it quiet).
// Nest's dependency injection is not used: the service is built with its options and a
// stand-in for its async-storage service (which only keeps the call's clientId); the lock
// code itself is the package's, unchanged.
'use strict';
const { MurLockService } = require('murlock/dist/murlock.service');

const { port, proc, rounds, now_us, log, sleep } = require('./truth_log');
const LEASE_MS = 1000;

async function main() {
  const context = new Map();
  const storage = { registerContext() {}, setClientID: (k, v) => context.set(k, v), get: (k) => context.get(k) };
  const service = new MurLockService({
    redisOptions: { socket: { host: '127.0.0.1', port } },
    wait: 40, maxAttempts: 6, logLevel: 'error', ignoreUnlockFail: true,
  }, storage);
  await service.onModuleInit();
  const client = service.redisClient;
  let ok_reply_us = 0;
  let last_release = null;
  const sendCommand = client.sendCommand.bind(client);
  client.sendCommand = async (args, ...rest) => {
    const sent_us = now_us();
    const r = await sendCommand(args, ...rest);
    if (args[0] === 'EVAL' && args[1] === service.lockScript) {
      log({ event: 'attempt', lock: args[3], owner: args[4], reply: r === 1 ? 'OK' : 0, sent_us });
      if (r === 1) ok_reply_us = now_us();
    } else if (args[0] === 'EVAL' && args[1] === service.unlockScript) {
      last_release = r;
      // 0: the key had gone (its lease ran out) or was another's: logged as expired below.
      if (r === 1) log({ event: 'released', lock: args[3], owner: args[4], reply: r, sent_us });
    }
    return r;
  };
  for (let i = 0; i < rounds; ++i) {
    const name = i % 2 === 0 ? 'orders' : 'stock';
    const key = `murlock:${name}`;
    // One hold in five outlives its 1 s lease; one in four is long (still within it).
    const outlives = i % 5 === 4;
    const long = i % 4 === 3;
    // orders: the default linear backoff (40, 80, ... 200 ms: 600 ms over 6 attempts);
    // stock: a fixed 25 ms between attempts (125 ms over 6): some give up.
    const wait = name === 'orders' ? undefined : () => 25;
    try {
      const run = async () => {
        const owner = context.get('clientId');
        const acquired_us = ok_reply_us;
        log({ event: 'acquired', lock: key, owner });
        await sleep(outlives ? LEASE_MS + 150 + Math.random() * 200
                             : long ? 500 + Math.random() * 300 : 30 + Math.random() * 170);
        if (outlives) context.set('expired_at', acquired_us + LEASE_MS * 1000);
      };
      if (wait) await service.runWithLock(key, LEASE_MS, wait, run);
      else await service.runWithLock(key, LEASE_MS, run);
      if (outlives && last_release !== 1) {
        log({ event: 'expired', lock: key, owner: context.get('clientId'), t_us: context.get('expired_at') });
      }
    } catch (e) {
      if (!/Failed to obtain lock/.test(String(e && e.message))) throw e;
      log({ event: 'gave_up', lock: key, owner: context.get('clientId') });
    }
    await sleep(Math.random() * 60);
  }
  await client.quit();
  process.exit(0);
}
main().catch((e) => {
  log({ event: 'error', message: String(e && e.stack) });
  process.exit(1);
});
