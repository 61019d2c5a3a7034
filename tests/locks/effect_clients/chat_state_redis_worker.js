// One process of the held-out chat_state_redis recording (record.sh): the lock of
// @chat-adapter/state-redis 4.41.1 (the Chat SDK's Redis state adapter) on its node-redis 5,
// unchanged, never used while building lockscope (the tenth held-out set), contending with
// the other processes on two locks as the SDK's message handling does, and logging what it
// did itself, one JSON line per event, to stdout:
//   {"t_us", "proc", "event": "attempt"|"acquired"|"gave_up"|"extended"|"released"|"release_refused"|"force_released"|"expired", "lock", "owner", ...}
// (t_us when the line is written, after the reply came; sent_us, on calls, just before
// the command was handed to the client.)
// acquireLock(thread, ttl) is one try: `SET chat-sdk:lock:THREAD token NX PX ttl` with a new
// token (`redis_<ms>_<random>`) on every call, so every attempt of a waiter carries a new
// value; the SDK's caller decides what a refusal means (here: polled, then a give-up).
// releaseLock and extendLock are EVAL text (never EVALSHA): `if GET == ARGV[1] then return
// DEL / PEXPIRE ARGV[2] else return 0`; forceReleaseLock is a bare DEL (the SDK's
// onLockConflict "force"). Beside the lock, as the SDK does for each incoming message: a
// dedupe `SET chat-sdk:cache:dedupe:… true NX PX 600000` (not a lock: a marker kept ten
// minutes, never deleted), and on a give-up on stock the message is queued for the holder
// (EVAL: RPUSH, LTRIM, PEXPIRE, LLEN on chat-sdk:queue:stock), which the holder drains by
// LPOP before its release (the SDK's "queue" strategy).
//   orders: polled every 50 ms, a give-up after 2 s.
//   stock: polled every 150 ms, 8 attempts, then a give-up; one give-up in three forces:
//     DEL of the holder's key, then one more acquire (the holder's release then finds
//     another token, or none).
// One hold in four is long, extended every third of the lease as the SDK's heartbeat does;
// one in five of the others outlives its lease (1 s) and its release finds another token
// or none.
'use strict';
const path = require('path');
const { port, proc, rounds, now_us, log, sleep } = require('./truth_log');
const LEASE_MS = 1000;
const quiet = { error() {}, warn() {}, info() {}, debug() {}, child() { return quiet; } };

async function main() {
  // An ES module: imported from the modules folder record.sh gives in NODE_PATH.
  const mod = await import(path.join(process.env.NODE_PATH, '@chat-adapter/state-redis/dist/index.js'));
  const state = mod.createRedisState({ url: `redis://127.0.0.1:${port}`, logger: quiet });
  await state.connect();
  const client = state.getClient();
  // The adapter draws its token inside acquireLock: learn it from the SET it sends.
  let last_set = null;  // {key, token, reply, sent_us}
  const set = client.set.bind(client);
  client.set = async (...a) => {
    const sent_us = now_us();
    const r = await set(...a);
    if (String(a[0]).includes(':lock:')) last_set = { key: a[0], token: a[1], reply: r, sent_us };
    return r;
  };
  let last_eval = null;  // the reply of the adapter's latest EVAL
  const evaluate = client.eval.bind(client);
  client.eval = async (...a) => {
    const sent_us = now_us();
    const r = await evaluate(...a);
    last_eval = { reply: r, sent_us };
    return r;
  };
  const del = client.del.bind(client);
  let del_sent_us = 0;
  client.del = async (...a) => { del_sent_us = now_us(); return del(...a); };

  const attempt = async (thread) => {
    const lock = await state.acquireLock(thread, LEASE_MS);
    log({ event: 'attempt', lock: last_set.key, owner: last_set.token, reply: lock ? 'OK' : 0, sent_us: last_set.sent_us });
    return lock ? { lock, acquired_us: now_us() } : null;
  };
  const settings = { orders: { every: 50, tries: 41 }, stock: { every: 150, tries: 8 } };
  for (let i = 0; i < rounds; ++i) {
    const thread = i % 2 === 0 ? 'orders' : 'stock';
    const key = 'chat-sdk:lock:' + thread;
    await state.setIfNotExists(`dedupe:worker:${proc}-${i}`, true, 600000);
    let held = null;
    for (let n = 0; n < settings[thread].tries && !held; ++n) {
      if (n) await sleep(settings[thread].every);
      held = await attempt(thread);
    }
    if (!held) {
      log({ event: 'gave_up', lock: key, owner: last_set.token });
      if (thread === 'stock' && i % 3 === 0) {
        await state.forceReleaseLock(thread);
        log({ event: 'force_released', lock: key, owner: '', sent_us: del_sent_us });
        held = await attempt(thread);
      } else {
        if (thread === 'stock') await state.enqueue(thread, { id: `${proc}-${i}`, expiresAt: Date.now() + 60000 }, 10);
        await sleep(Math.random() * 60);
        continue;
      }
      if (!held) continue;
    }
    const { lock, acquired_us } = held;
    log({ event: 'acquired', lock: key, owner: lock.token });
    const long = i % 4 === 3, overrun = !long && i % 5 === 4;
    const hold = long ? 1400 + Math.random() * 500 : overrun ? LEASE_MS + 150 + Math.random() * 200 : 30 + Math.random() * 150;
    const end = Date.now() + hold;
    let lease_from = acquired_us, extended_ok = true;
    while (long && extended_ok && Date.now() + LEASE_MS / 3 < end) {
      await sleep(LEASE_MS / 3);
      extended_ok = await state.extendLock(lock, LEASE_MS);
      log({ event: 'extended', lock: key, owner: lock.token, reply: extended_ok ? 1 : 0, sent_us: last_eval.sent_us });
      if (extended_ok) lease_from = now_us();
    }
    await sleep(Math.max(0, end - Date.now()));
    if (thread === 'stock') while (await state.dequeue(thread)) {}  // the messages queued meanwhile
    await state.releaseLock(lock);
    const released = last_eval.reply === 1;
    log({ event: released ? 'released' : 'release_refused', lock: key, owner: lock.token, reply: last_eval.reply,
          sent_us: last_eval.sent_us });
    // Refused after its lease ran out: expired. An extend refused within the lease (every
    // third of it) means another process forced the key away: no expiry.
    if (!released && extended_ok && last_eval.sent_us >= lease_from + LEASE_MS * 1000)
      log({ event: 'expired', lock: key, owner: lock.token, t_us: lease_from + LEASE_MS * 1000 });
    await sleep(Math.random() * 60);
  }
  await state.disconnect();
  process.exit(0);
}
main().catch((e) => {
  log({ event: 'error', message: String(e && e.stack) });
  process.exit(1);
});
