// One process of the held-out redis-promise-lock recording (record.sh): redis-promise-lock
// 1.0.4 on node-redis 5, unchanged, never used while building lockscope (the third
// held-out set), contending with the other processes on two locks and logging what it
// did itself, one JSON line per event, to stdout:
//   {"t_us", "proc", "event": "attempt"|"acquired"|"gave_up"|"released"|"expired", "lock", "owner", ...}
// (t_us when the line is written, after the reply came; sent_us, on calls, just before
// the command was handed to the client.)
// The client's whole protocol: SETNX key payload, then, when it answered 1, a separate
// EXPIRE key ttl (whole seconds); a refused SETNX is retried every retryDelay ms, at most
// retryLimit times, then acquireLock answers false (a give-up). The payload is
// `{"lockedSince": <ISO time>}`, one per acquireLock call, so it is the owner of every
// attempt of one acquire; releaseLock is a bare DEL with no owner check. It has no
// extend. A hold that outlives its TTL is not released (a worker that died holding it:
// its DEL would delete the next holder's lock), and logged as expired.
'use strict';
const { createClient } = require('redis');
const { Lock } = require('redis-promise-lock');

const { port, proc, rounds, now_us, log, sleep } = require('./truth_log');
const TTL_S = 1;

async function main() {
  const client = createClient({ socket: { host: '127.0.0.1', port } });
  await client.connect();
  let ok_reply_us = 0, expire_sent_us = 0;
  const setNX = client.setNX.bind(client);
  client.setNX = async (key, payload) => {
    const sent_us = now_us();
    const r = await setNX(key, payload);
    log({ event: 'attempt', lock: key, owner: payload, reply: r === 1 || r === true ? 'OK' : 0, sent_us });
    if (r === 1 || r === true) ok_reply_us = now_us();
    return r;
  };
  const expire = client.expire.bind(client);
  client.expire = async (key, ttl) => {
    expire_sent_us = now_us();
    return expire(key, ttl);
  };
  const del = client.del.bind(client);
  let releasing = null;
  client.del = async (key) => {
    const sent_us = now_us();
    const r = await del(key);
    log({ event: r === 1 ? 'released' : 'release_refused', lock: key, owner: releasing, reply: r, sent_us });
    return r;
  };
  const lock = new Lock(client, { ttl: TTL_S });
  // orders: up to 8 retries 50 ms apart (about 400 ms); stock: 3 retries (150 ms): some give up.
  const opts = { orders: { retryLimit: 8, retryDelay: 50 }, stock: { retryLimit: 3, retryDelay: 50 } };
  let current = null;
  const take = client.setNX;
  client.setNX = async (key, payload) => { current = payload; return take(key, payload); };
  for (let i = 0; i < rounds; ++i) {
    const name = i % 2 === 0 ? 'orders' : 'stock';
    const key = `redis-promise-lock:${name}`;
    // One hold in five outlives its 1 s TTL (never released: logged as expired).
    const overrun = i % 5 === 4;
    const got = await lock.acquireLock(name, opts[name]);
    const owner = current;
    if (!got) {
      log({ event: 'gave_up', lock: key, owner });
      await sleep(Math.random() * 60);
      continue;
    }
    log({ event: 'acquired', lock: key, owner });
    if (overrun) {
      await sleep(TTL_S * 1000 + 200 + Math.random() * 200);
      log({ event: 'expired', lock: key, owner, t_us: expire_sent_us + TTL_S * 1000 * 1000 });
    } else {
      await sleep(30 + Math.random() * 150);
      releasing = owner;
      await lock.releaseLock(name);
    }
    await sleep(Math.random() * 60);
  }
  await client.quit();
  process.exit(0);
}
main().catch((e) => {
  log({ event: 'error', message: String(e) });
  process.exit(1);
});
