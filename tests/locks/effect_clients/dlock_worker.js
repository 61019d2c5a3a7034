// One process of the held-out dlock recording (record.sh): dlock 12.1.1 (a distributed
// callback queue over Redis pub/sub) on ioredis-lock 4.0.0 and ioredis 4, unchanged, never
// used while building lockscope (the tenth held-out set), contending with the other
// processes on two locks and logging what it did itself, one JSON line per event, to stdout:
//   {"t_us", "proc", "event": "attempt"|"acquired"|"gave_up"|"extended"|"released"|"release_refused"|"expired", "lock", "owner", ...}
// (t_us when the line is written, after the reply came; sent_us, on calls, just before
// the command was handed to the client.)
// Each push(suffix, cb) makes a new ioredis-lock Lock (a uuid v1 drawn once, shared by that
// push's attempts): SET key uuid PX timeout NX, `retries` more times every `delay` ms. The
// winner gets a `done(err, ...result)`: it first extends the lock (EVALSHA of
// `pexpireifequal`: PEXPIRE if GET == value, answering 1/0; a refusal ends there: no
// publish, no release), then PUBLISHes `["<key>", [err, ...result]]` on the one channel
// every process subscribes to (`pubsubChannel`, on a second connection), then releases
// (EVALSHA of `delifequal`: DEL if GET == value, answering the DEL's 1 or 0). A push whose
// attempts were all refused throws; its callback is called by the holder's publication
// (or by a local timer at twice the lease).
//   orders: the pub/sub-woken mutex dlock's Semaphore means to be (its class catches with a
//     bluebird-only filtered catch on push's native promise and spins instead, so its loop is
//     written out here): a burst of 4 attempts 50 ms apart, then a wait for the holder's
//     publication, then a new push (a new value); one wait until it wins, never a give-up.
//   stock: push as a callback queue: 9 attempts 150 ms apart, then a give-up (the process
//     takes the holder's published result instead).
// One hold in four is long, extended every 600 ms through done.lock; one in five of the
// others outlives its lease: done's extend then finds the key gone (expired) and nothing
// is published or released. The lease is 1 s (`timeout`).
'use strict';
const Redis = require('ioredis');
const DLock = require('dlock');

const { port, proc, rounds, now_us, log, sleep } = require('./truth_log');
const LEASE_MS = 1000;

async function main() {
  const client = new Redis({ port, host: '127.0.0.1' });
  const pubsub = new Redis({ port, host: '127.0.0.1' });
  const dlock = new DLock({ client, pubsub, pubsubChannel: 'dlock', lockPrefix: 'dlock:', log: false,
                            lock: { timeout: LEASE_MS, retries: 3, delay: 50 } });
  const won = {};  // key -> {owner, us}: the latest SET NX that answered OK
  const tried = {};  // key -> the value of this process's latest attempt
  const set = client.set.bind(client);
  client.set = (...a) => {
    const sent_us = now_us();
    return set(...a).then((r) => {
      log({ event: 'attempt', lock: a[0], owner: a[1], reply: r, sent_us });
      tried[a[0]] = a[1];
      if (r === 'OK') won[a[0]] = { owner: a[1], us: now_us() };
      return r;
    });
  };
  dlock.getLock();  // defines delifequal / pexpireifequal on the client, wrapped below
  const lease_from = {};  // key -> when its lease was last set (acquired or extended)
  const extend = client.pexpireifequal.bind(client);
  client.pexpireifequal = (key, value, ttl) => {
    const sent_us = now_us();
    return extend(key, value, ttl).then((r) => {
      log({ event: 'extended', lock: key, owner: value, reply: r, sent_us });
      if (r === 1) lease_from[key] = now_us();
      else log({ event: 'expired', lock: key, owner: value, t_us: lease_from[key] + LEASE_MS * 1000 });
      return r;
    });
  };
  const release = client.delifequal.bind(client);
  client.delifequal = (key, value) => {
    const sent_us = now_us();
    return release(key, value).then((r) => {
      log({ event: r === 1 ? 'released' : 'release_refused', lock: key, owner: value, reply: r, sent_us });
      return r;
    });
  };
  await sleep(200);  // the subscription

  const settings = { orders: { retries: 3, delay: 50 }, stock: { retries: 8, delay: 150 } };
  const isRefusal = (e) => e && e.name === 'LockAcquisitionError';
  for (let i = 0; i < rounds; ++i) {
    const name = i % 2 === 0 ? 'orders' : 'stock';
    const key = 'dlock:' + name;
    Object.assign(dlock.lockOptions, settings[name]);
    let done = null;
    for (;;) {
      let woken;
      const publication = new Promise((r) => { woken = r; });
      try {
        done = await dlock.push(name, (err) => woken(err));
        break;
      } catch (e) {
        if (!isRefusal(e)) throw e;
        if (name === 'stock') {
          log({ event: 'gave_up', lock: key, owner: tried[key] });
          await publication;  // the holder's result (or the local timer)
          break;
        }
        await publication;  // orders: woken by the holder's publication, then a new push
      }
    }
    if (!done) {
      await sleep(Math.random() * 60);
      continue;
    }
    const { owner, us: acquired_us } = won[key];
    lease_from[key] = acquired_us;
    log({ event: 'acquired', lock: key, owner });
    const long = i % 4 === 3, overrun = !long && i % 5 === 4;
    const hold = long ? 1400 + Math.random() * 500 : overrun ? LEASE_MS + 150 + Math.random() * 200 : 30 + Math.random() * 150;
    const end = Date.now() + hold;
    let extended_ok = true;
    while (long && extended_ok && Date.now() + 600 < end) {
      await sleep(600);
      extended_ok = await done.lock.extend(LEASE_MS).then(() => true, () => false);
    }
    await sleep(Math.max(0, end - Date.now()));
    if (extended_ok) await done(null, 'result of ' + proc);  // extend, publish, release
    await sleep(Math.random() * 60);
  }
  await sleep(300);  // the last release's reply
  client.disconnect();
  pubsub.disconnect();
  process.exit(0);
}
main().catch((e) => {
  log({ event: 'error', message: String(e && e.stack) });
  process.exit(1);
});
