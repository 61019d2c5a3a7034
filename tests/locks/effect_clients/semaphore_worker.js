// One process of the redis-semaphore Semaphore recording (record.sh redis_semaphore_sem):
// redis-semaphore's Semaphore (a sorted set: a member per holder, the limit compared with
// ZCARD) on ioredis, unchanged, 3 processes contending for 2 permits of one semaphore,
// each logging what it did itself, one JSON line per event, to stdout:
//   {"t_us", "proc", "event", "lock", "owner", ...}
//   acquired  acquire() resolved (owner: the Semaphore's identifier, the set's member)
//   refused   an acquire attempt the script answered 0 (seen by a thin wrapper around the
//             client's evalsha/eval: a call for an identifier not held yet)
//   refresh   a call of the refresh script (an identifier held), with the server's reply
//   released  release() resolved
//   unrefreshed  this hold is not refreshed (refreshInterval 0) and outlives its
//             lockTimeout (1000 ms): its permit is lost at acquired + 1000 ms
'use strict';
const Redis = require('ioredis');
const { Semaphore } = require('redis-semaphore');

const { port, proc, rounds, now_us, log, sleep } = require('./truth_log');

async function main() {
  const client = new Redis({ port, host: '127.0.0.1', lazyConnect: false });
  const held = new Set();
  for (const verb of ['evalsha', 'eval']) {
    const f = client[verb].bind(client);
    client[verb] = async (...a) => {
      const r = await f(...a);
      // [script|sha, 1, key, limit, identifier, lockTimeout, now]
      if (a.length === 7) {
        const [key, id] = [a[2], a[4]];
        if (held.has(id)) log({ event: 'refresh', lock: key, owner: id, reply: r });
        else if (+r !== 1) log({ event: 'refused', lock: key, owner: id });
      }
      return r;
    };
  }
  for (let i = 0; i < rounds; ++i) {
    const lost = proc === 'p1' && i === 4;
    const sem = new Semaphore(client, 'pool', 2, {
      lockTimeout: 1000, acquireTimeout: 30000, retryInterval: 40, ...(lost ? { refreshInterval: 0 } : {}),
    });
    await sem.acquire();
    held.add(sem.identifier);
    log({ event: 'acquired', lock: 'semaphore:pool', owner: sem.identifier });
    if (lost) log({ event: 'unrefreshed', lock: 'semaphore:pool', owner: sem.identifier, lock_timeout_ms: 1000 });
    // Most holds are short; one in four outlives the refresh interval (800 ms).
    await sleep(lost ? 1500 : i % 4 === 3 ? 1300 + Math.random() * 500 : 40 + Math.random() * 160);
    await sem.release();
    held.delete(sem.identifier);
    log({ event: 'released', lock: 'semaphore:pool', owner: sem.identifier });
    await sleep(Math.random() * 60);
  }
  await client.quit();
}
main().catch((e) => {
  log({ event: 'error', message: String(e) });
  process.exit(1);
});
