// One process of the simple-redis-mutex recording (record.sh): simple-redis-mutex 3.0.0
// on node-redis 5, unchanged, contending with the other processes on two locks and
// logging what it did itself, one JSON line per event, to stdout:
//   {"t_us", "proc", "event": "acquired"|"released"|"attempt", "lock", "owner", ...}
// The library sends a fresh random value on every attempt (SET NX PX) and releases with
// a script that answers nil whatever it did; a thin wrapper around the client's `set`
// logs each attempt (its value and the server's reply) and the value that acquired.
'use strict';
const { createClient } = require('redis');
const { lock } = require('simple-redis-mutex');

const { port, proc, rounds, now_us, log, sleep } = require('./truth_log');

async function main() {
  const client = createClient({ socket: { host: '127.0.0.1', port } });
  await client.connect();
  let last = null;  // the value of the last attempt that answered OK
  const set = client.set.bind(client);
  client.set = async (key, value, options) => {
    const r = await set(key, value, options);
    log({ event: 'attempt', lock: key, owner: value, reply: r });
    if (r === 'OK') last = value;
    return r;
  };
  for (let i = 0; i < rounds; ++i) {
    const name = i % 2 === 0 ? 'orders' : 'stock';
    const release = await lock(client, name, { timeout: 3000, pollingInterval: 150 });
    const key = '@simple-redis-mutex:lock-' + name;
    const owner = last;
    log({ event: 'acquired', lock: key, owner });
    await sleep(30 + Math.random() * 170);
    await release();
    log({ event: 'released', lock: key, owner });
    await sleep(Math.random() * 60);
  }
  await client.quit();
  process.exit(0);  // the library's subscriber connection stays open
}
main().catch((e) => {
  log({ event: 'error', message: String(e) });
  process.exit(1);
});
