// One process of the held-out safe_redis_leader recording (record.sh): safe-redis-leader
// 0.0.6 (leader election by Lua scripts) on ioredis 5, unchanged, never used while building
// lockscope (the twenty-fifth held-out set), contending with the other processes on two
// locks and logging what it did itself, one JSON line per event, to stdout:
//   {"t_us", "proc", "event": "attempt"|"acquired"|"gave_up"|"extended"|"released"|"release_refused"|"cleanup"|"expired", "lock", "owner", ...}
// (t_us when the line is written, after the reply came; sent_us, on calls, just before
// the command was handed to the client.)
// createSafeRedisLeader({ asyncRedis, ttl, wait, key }) draws one id when it is made
// (`leader:` + SHA1 of 32 random bytes), the value of every attempt and hold of that
// candidate, for the key `leader:` + SHA1(key). elect() is `SET key id PX ttl NX`, retried
// every `wait` ms while refused; once elected, every ttl/2 ms it renews by a script sent
// through ioredis' defineCommand (EVALSHA, EVAL on NOSCRIPT) that copies KEYS[1] and
// ARGV into Lua locals: `GET key`, and when it is the id, `PEXPIRE key ms`, 1; else 0.
// stop() stops polling and renewing and sends the second script the same way: `GET key`,
// and when it is the id, `DEL key`, 1; else 0 (so a candidate that gives up while polling
// sends it too, answered 0: logged as `cleanup`).
// Each process runs its rounds in a child process (one connection) with one candidate per
// lock, made once and elected again each round: one id per lock per child. A round elects
// on `orders` (polled every 50 ms, patience 1.5 s) or `stock` (every 150 ms, patience
// 0.6 s); one round in five gives up after its first refusal (a single try); holds of
// 20-400 ms, one in four 0.9-1.3 s (renewed), one in seven blocks its event loop past the
// lease (the key expires; its stop() then answers 0). p2's and p3's children kill
// themselves with SIGKILL once in the middle of a hold (logging the key's expiry, its last
// SET or renewal + the lease, just before) and a new child goes on with the next round.
// With DEMOTE=1 (safe_redis_leader_demoted) one round in three blocks its event loop past
// the lease after its renewal timer is set and then holds on: the overdue renewal answers 0
// (the library emits `demoted` and, by itself, polls again with SET NX, taking the lock back
// when it stands free), and the round's stop() at its end gives up a poll still going
// (logged as `gave_up`, its delete answered 0) or releases the lock taken back.
'use strict';
const { proc, rounds, now_us, log, sleep, runRoundsInChildren } = require('./truth_log');

const TTL_MS = 600;
const POLICY = { orders: { wait: 50, patience: 1500 }, stock: { wait: 150, patience: 600 } };
const KILL_ROUND = { p2: 8, p3: 14 };
const DEMOTE = process.env.DEMOTE === '1';

async function child(start) {
  const Redis = require('ioredis');
  const { createSafeRedisLeader } = require('safe-redis-leader');
  const client = new Redis({ host: '127.0.0.1', port: Number(process.argv[2]) });
  // What this process holds on the wire, per key: its id and when its SET or latest renewal
  // was sent (the library's own races can take a lock outside any round: stop() while a
  // renewal is in flight re-arms the renewal, whose refusal starts a poll; stop() while a
  // SET is in flight leaves its poll running; a stopped candidate elected stops again).
  const held = new Map();  // key -> { id, set_us }
  const ids = {};  // key -> this process's candidate id on it (one candidate a key)
  const holds = (key) => held.has(key) && held.get(key).id === ids[key];
  // The round in progress: its key, whether its SET is in flight, refused since it last
  // held, and how it ends (acquired, or given up after a refusal).
  const cur = { lock: '', inFlight: false, refused: false, giveUpPending: false, done: null };
  const expireAll = () => {
    // Nothing goes out while the event loop is blocked or after SIGKILL: every key held
    // expires its lease after its SET or latest renewal.
    for (const [key, h] of held) log({ event: 'expired', lock: key, owner: h.id, t_us: h.set_us + TTL_MS * 1000 });
    held.clear();
  };

  const setOrig = client.set.bind(client);
  client.set = async (key, value, ...rest) => {
    const sent_us = now_us();
    ids[key] = value;
    const ours = key === cur.lock;
    if (ours) cur.inFlight = true;
    const r = await setOrig(key, value, ...rest);
    if (ours) cur.inFlight = false;
    log({ event: 'attempt', lock: key, owner: value, reply: r === 'OK' ? 'OK' : null, sent_us });
    if (r === 'OK') {
      held.set(key, { id: value, set_us: sent_us });
      log({ event: 'acquired', lock: key, owner: value });
      if (ours) {
        cur.refused = false; cur.giveUpPending = false;
        if (cur.done) cur.done('acquired');
      }
    } else if (ours) {
      cur.refused = true;
      // After the library has set its next poll's timer: stop() clears it.
      if (cur.giveUpPending) setTimeout(() => cur.done && cur.done('give_up'), 0);
    }
    return r;
  };
  // The library defines its two scripts on the connection the first time it needs each.
  const defineOrig = client.defineCommand.bind(client);
  client.defineCommand = (name, def) => {
    defineOrig(name, def);
    const orig = client[name].bind(client);
    client[name] = async (key, id, ms) => {
      const sent_us = now_us();
      if (name === 'getIsEqualSetPExpire') {
        const r = await orig(key, id, ms);
        if (r === 1 && held.has(key) && held.get(key).id === id) held.get(key).set_us = sent_us;
        else if (r !== 1 && held.has(key) && held.get(key).id === id) held.delete(key);  // lost: demoted
        log({ event: 'extended', lock: key, owner: id, reply: r, sent_us });
        return r;
      }
      const holder = held.has(key) && held.get(key).id === id;
      if (holder) held.delete(key);
      const r = await orig(key, id);
      log({ event: holder ? (r === 1 ? 'released' : 'release_refused') : 'cleanup', lock: key, owner: id, reply: r, sent_us });
      return r;
    };
  };

  const candidates = {};
  for (const [name, p] of Object.entries(POLICY)) {
    candidates[name] = await createSafeRedisLeader({ asyncRedis: client, ttl: TTL_MS, wait: p.wait, key: name });
  }
  const keyOf = (name) => 'leader:' + require('crypto').createHash('sha1').update(name).digest('hex');
  // Gives up the round's poll: not while its SET is in flight (stop() would leave the poll
  // running), and only when it still does not hold.
  const giveUp = async (leader, extra) => {
    while (cur.inFlight) await sleep(1);
    if (holds(cur.lock)) return false;
    if (cur.refused) log({ event: 'gave_up', lock: cur.lock, owner: ids[cur.lock], ...extra });
    await leader.stop();
    return true;
  };

  for (let i = start; i < rounds; ++i) {
    const name = i % 2 === 0 ? 'orders' : 'stock';
    const leader = candidates[name];
    const singleTry = i % 5 === 4;
    const patience = singleTry ? 10 : POLICY[name].patience;
    Object.assign(cur, { lock: keyOf(name), inFlight: false, refused: false, giveUpPending: false });
    const outcome = new Promise((r) => { cur.done = r; });
    const timer = setTimeout(() => {
      if (holds(cur.lock)) return;
      if (cur.inFlight) cur.giveUpPending = true;
      else cur.done('give_up');
    }, patience);
    leader.elect();
    const what = await outcome;
    clearTimeout(timer);
    cur.done = null;
    if (what === 'give_up') {
      await giveUp(leader, singleTry ? { single_try: true } : {});
    } else {
      if (KILL_ROUND[proc] === i) {
        await sleep(100 + Math.random() * 100);
        expireAll();
        process.kill(process.pid, 'SIGKILL');
        await sleep(10_000);
      }
      if (DEMOTE && i % 3 === 2) {
        // Blocked past the lease once the renewal timer is set, then held on: the overdue
        // renewal answers 0 and the library polls again by itself.
        await sleep(20);
        const until = Date.now() + TTL_MS + 100 + Math.random() * 200;
        while (Date.now() < until) { /* blocked */ }
        expireAll();
        await sleep(400 + Math.random() * 500);
        if (await giveUp(leader, {})) {
          await sleep(Math.random() * 60);
          continue;
        }
      } else if (i % 7 === 3) {
        // The event loop blocked past the lease (a long pause): no renewal goes out, the
        // key expires TTL after its SET or last renewal, and stop() then answers 0.
        const until = Date.now() + TTL_MS + 200 + Math.random() * 200;
        while (Date.now() < until) { /* blocked */ }
        expireAll();
      } else if (i % 4 === 1) {
        await sleep(900 + Math.random() * 400);  // renewed every ttl/2 by the library
      } else {
        await sleep(20 + Math.random() * 380);
      }
      await leader.stop();
    }
    await sleep(Math.random() * 60);
  }
  await client.quit();
  process.exit(0);
}

runRoundsInChildren(__filename, KILL_ROUND[proc], child);
