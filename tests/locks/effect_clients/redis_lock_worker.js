// One process of the redis-lock recording (record.sh): redis-lock 1.0.0 on node-redis 4,
// unchanged, contending with the other processes on two locks and logging what it did
// itself, one JSON line per event, to stdout:
//   {"t_us", "proc", "event": "attempt"|"acquired"|"released"|"expired", "lock", "owner", ...}
// (t_us when the line is written, after the reply's callback ran; sent_us, on calls,
// just before the command was handed to the client: a busy event loop delays the first.)
// The library polls (SET NX PX every 50 ms) with a fresh value on every attempt (the
// lease's end as a timestamp), and releases with a plain DEL only when that time has not
// passed by its own clock; a hold past its lease sends nothing, and the key expires.
// The client it is given is a facade over node-redis 4 (the library asks for a "v4"
// client): `set` logs each attempt's value and reply, `del` the release.
'use strict';
const { createClient } = require('redis');
const redisLock = require('redis-lock');

const { port, proc, rounds, now_us, log, sleep } = require('./truth_log');
const LEASE_MS = 1000;

async function main() {
  const client = createClient({ socket: { host: '127.0.0.1', port } });
  await client.connect();
  let last = null, last_reply_us = 0;  // the value and reply time of the last attempt answered OK
  const facade = {
    v4: true,
    set: async (key, value, options) => {
      const sent_us = now_us();
      const r = await client.set(key, String(value), options);
      log({ event: 'attempt', lock: key, owner: String(value), reply: r, sent_us });
      if (r === 'OK') [last, last_reply_us] = [String(value), now_us()];
      return r;
    },
    del: async (key) => {
      const sent_us = now_us();
      const r = await client.del(key);
      log({ event: 'released', lock: key, owner: last, reply: r, sent_us });
      return r;
    },
  };
  const lock = redisLock(facade, 50);
  for (let i = 0; i < rounds; ++i) {
    const name = i % 2 === 0 ? 'orders' : 'stock';
    const unlock = await lock(name, LEASE_MS);
    const key = 'lock.' + name, owner = last, acquired_us = last_reply_us;
    log({ event: 'acquired', lock: key, owner });
    // One hold in six outlives its lease: the library then sends nothing, the key expires.
    const overrun = i % 6 === 5;
    await sleep(overrun ? LEASE_MS + 150 + Math.random() * 200 : 30 + Math.random() * 150);
    await unlock();
    if (overrun) log({ event: 'expired', lock: key, owner, t_us: acquired_us + LEASE_MS * 1000 });
    await sleep(Math.random() * 60);
  }
  await client.quit();
}
main().catch((e) => {
  log({ event: 'error', message: String(e) });
  process.exit(1);
});
