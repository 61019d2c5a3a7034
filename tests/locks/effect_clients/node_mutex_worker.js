// One process of the held-out node-mutex recording (record.sh): node-mutex 0.2.2 on
// node-redis 2.8, unchanged, never used while building lockscope (the sixth held-out
// set), contending with the other processes on two locks and logging what it did itself,
// one JSON line per event, to stdout:
//   {"t_us", "proc", "event": "attempt"|"acquired"|"released"|"release_refused"|"expired", "lock", "owner", ...}
// (t_us when the line is written, after the reply came; sent_us, on calls, just before
// the command was handed to the client.)
// Each Mutex opens two connections (commands, and a subscriber to `mutex:release`) and
// loads its two scripts once per process with `SCRIPT LOAD` inside MULTI/EXEC: no EVAL is
// ever sent, the texts are seen only there. Each lock() draws a uuid v1 that all its
// attempts share. Acquire: EVALSHA of `SETNX key id` then, if it set, `PEXPIRE key ttl`
// (1/0), retried every sleepTime ms with no limit (the library has no give-up). Release:
// EVALSHA of GET, and DEL if the value is its id, answering nil whatever it did, then
// `PUBLISH mutex:release key` (meant to wake waiters; the library registers a no-op as the
// listener, so waiters only poll). No renewal. The release's nil says nothing, so this
// worker knows whether a release deleted from its hold's length: holds are either under
// 200 ms of a 1 s lease or over 1.15 s of it (then the key has expired: logged as
// `expired` at acquisition + lease and the release as refused).
'use strict';
const createMutex = require('node-mutex');

const { port, proc, rounds, now_us, log, sleep } = require('./truth_log');
const LEASE_MS = 1000;

function instrument(mutex, state) {
  const evalsha = mutex.pub.evalsha.bind(mutex.pub);
  mutex.pub.evalsha = (...a) => {
    const cb = a.pop();
    const sent_us = now_us();
    const [, , key, id] = a;
    const acquire = a.length === 5;  // sha, 1, key, id, ttl (release: sha, 1, key, id)
    return evalsha(...a, (err, res) => {
      if (!err && acquire) {
        log({ event: 'attempt', lock: key, owner: id, reply: Number(res) === 1 ? 'OK' : 0, sent_us });
        if (Number(res) === 1) {
          state.held = { key, id, acquired_us: now_us() };
          log({ event: 'acquired', lock: key, owner: id });
        }
      } else if (!err) {
        const h = state.held;
        if (h && h.overran) {
          log({ event: 'release_refused', lock: key, owner: id, reply: 0, sent_us });
          log({ event: 'expired', lock: key, owner: id, t_us: h.acquired_us + LEASE_MS * 1000 });
        } else {
          log({ event: 'released', lock: key, owner: id, reply: 1, sent_us });
        }
        state.held = null;
      }
      cb(err, res);
    });
  };
}

async function main() {
  // orders polls every 50 ms; stock every 150 ms, so its waiters leave it standing free
  // longer than the idle threshold.
  const state = { held: null };
  const mutexes = {
    orders: createMutex({ host: '127.0.0.1', port, sleepTime: 50, expireTime: LEASE_MS }),
    stock: createMutex({ host: '127.0.0.1', port, sleepTime: 150, expireTime: LEASE_MS }),
  };
  for (const m of Object.values(mutexes)) instrument(m, state);
  for (let i = 0; i < rounds; ++i) {
    const name = i % 2 === 0 ? 'orders' : 'stock';
    const unlock = await mutexes[name].lock(name);  // key mutex:NAME
    // One hold in five outlives its lease (nothing renews it); the others are short.
    const overrun = i % 5 === 4;
    if (overrun) state.held.overran = true;
    await sleep(overrun ? LEASE_MS + 150 + Math.random() * 200 : 30 + Math.random() * 150);
    unlock();
    while (state.held) await sleep(5);  // the release's reply
    await sleep(Math.random() * 60);
  }
  await sleep(100);  // the last PUBLISH
  for (const m of Object.values(mutexes)) { m.pub.quit(); m.sub.quit(); }
  await sleep(50);
  process.exit(0);
}
main().catch((e) => {
  log({ event: 'error', message: String(e && e.stack) });
  process.exit(1);
});
