// One process of the held-out redis-mutex recording (record.sh): runWithMutex of
// redis-mutex 2.0.1 on node-redis 3, unchanged, never used while building lockscope (the
// fifth held-out set), contending with the other processes on two locks and logging what
// it did itself, one JSON line per event, to stdout:
//   {"t_us", "proc", "event": "attempt"|"acquired"|"gave_up"|"extended"|"released", "lock", "owner", ...}
// (t_us when the line is written, after the reply came; sent_us, on calls, just before
// the command was handed to the client.)
// No script: acquire `SET key mutex PX intervalTime NX` with the same value "mutex" for
// every process and every attempt; renew `SET key mutex PX intervalTime XX` (no owner
// check) every intervalTime - renewTime ms while the job runs; release a bare `DEL key`
// (sent without waiting for its reply). A refused attempt is retried after attemptInterval
// ms, up to `attempts` attempts, then it gives up ("Other instance is running!"). A failed
// renewal or a job past maxTime ends the process, so a hold never outlives its lease here
// (no expiry to measure).
'use strict';
const redis = require('redis');
const { runWithMutex } = require('redis-mutex');

const { port, proc, rounds, now_us, log, sleep } = require('./truth_log');

async function main() {
  const client = redis.createClient({ host: '127.0.0.1', port });
  await new Promise((resolve) => client.once('ready', resolve));
  const send = client.send_command.bind(client);
  client.send_command = (command, args, cb) => {
    const sent_us = now_us();
    return send(command, args, (err, res) => {
      const key = args[0];
      const nx = args.some((a) => String(a).toLowerCase() === 'nx');
      if (!err && command === 'set' && nx) {
        log({ event: 'attempt', lock: key, owner: 'mutex', reply: res === 'OK' ? 'OK' : 0, sent_us });
        if (res === 'OK') log({ event: 'acquired', lock: key, owner: 'mutex' });
      } else if (!err && command === 'set') {
        log({ event: 'extended', lock: key, owner: 'mutex', reply: res, sent_us });
      }
      if (cb) cb(err, res);
    });
  };
  const del = client.del.bind(client);
  client.del = (key, cb) => {
    const sent_us = now_us();
    return del(key, (err, res) => {
      log({ event: 'released', lock: key, owner: 'mutex', reply: res, sent_us });
      if (cb) cb(err, res);
    });
  };
  for (let i = 0; i < rounds; ++i) {
    const name = i % 2 === 0 ? 'orders' : 'stock';
    const key = `mutex:${name}`;
    // One hold in four is long (renewed every 300 ms of a 500 ms lease); orders tries for
    // up to 2 s (40 attempts 50 ms apart), stock 250 ms (5 attempts): some give up.
    const long = i % 4 === 3;
    try {
      await runWithMutex({
        key, redisClient: client, intervalTime: 500, renewTime: 200, maxTime: 30000,
        attempts: name === 'orders' ? 40 : 5, attemptInterval: 50,
      }, () => sleep(long ? 700 + Math.random() * 500 : 30 + Math.random() * 170));
    } catch (e) {
      if (!/Other instance is running/.test(String(e && e.message))) throw e;
      log({ event: 'gave_up', lock: key, owner: 'mutex' });
    }
    await sleep(Math.random() * 60);
  }
  await sleep(100);  // the last DEL's reply
  client.quit();
  await sleep(50);
  process.exit(0);
}
main().catch((e) => {
  log({ event: 'error', message: String(e && e.stack) });
  process.exit(1);
});
