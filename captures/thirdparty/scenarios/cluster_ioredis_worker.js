// One ioredis process of the "cluster" scenario: ioredis's own Redis.Cluster client
// (package.json's pin) with `shardedSubscribers: true`, running Redisson 3.2x's lock
// protocol like cluster_worker.py: the one-branch acquire, the latched unlock with
// ARGV[4] = SPUBLISH, and waits on sharded pub/sub (SSUBSCRIBE on the slot's master
// through ioredis's per-node subscriber, retry once subscribed, then the `smessage` or
// the TTL). ioredis routes by slot and follows MOVED, ASK (ASKING) and TRYAGAIN
// itself. Each call is logged as JSONL (see ../README.md).
//
//   node cluster_ioredis_worker.js PROC TRUTH.jsonl CONTROL_DIR PORT [LOCK...]
'use strict';
const fs = require('node:fs');
const path = require('node:path');
const crypto = require('node:crypto');
const Redis = require('ioredis');
const { truthLog, sleep } = require('./truth.js');

const [proc, truthPath, control, port, ...names] = process.argv.slice(2);
const locks = names.length > 0 ? names : ['orders', 'stock'];
const log = truthLog(truthPath, { proc });
const owner = `${crypto.randomUUID()}:1`;
const LEASE_MS = 3000;
const ACQUIRE = "if ((redis.call('exists', KEYS[1]) == 0) or (redis.call('hexists', KEYS[1], ARGV[2]) == 1)) then " +
  "redis.call('hincrby', KEYS[1], ARGV[2], 1); redis.call('pexpire', KEYS[1], ARGV[1]); return nil; end; " +
  "return redis.call('pttl', KEYS[1]);";
const UNLOCK = "local val = redis.call('get', KEYS[3]); if val ~= false then return tonumber(val);end; " +
  "if (redis.call('hexists', KEYS[1], ARGV[3]) == 0) then return nil;end; " +
  "local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1); if (counter > 0) then " +
  "redis.call('pexpire', KEYS[1], ARGV[2]); redis.call('set', KEYS[3], 0, 'px', ARGV[5]); return 0; " +
  "else redis.call('del', KEYS[1]); redis.call(ARGV[4], KEYS[2], ARGV[1]); " +
  "redis.call('set', KEYS[3], 1, 'px', ARGV[5]); return 1; end; ";
const channel = (name) => `redisson_lock__channel:{${name}}`;

const cluster = new Redis.Cluster([{ host: '127.0.0.1', port: Number(port) }], { shardedSubscribers: true });
const wakers = new Map();  // channel → resolve of the wait on it
cluster.on('smessage', (ch, message) => {
  log('woken', { lock: ch.slice(ch.indexOf('{') + 1, -1), owner, channel: ch, message });
  const wake = wakers.get(ch);
  if (wake) wake(true);
});
cluster.on('error', (e) => log('client_error', { owner, error: String(e) }));

async function call(what, name, fn) {
  for (let attempt = 0; ; ++attempt) {
    const sent = log.clock();
    try {
      return [sent, await fn()];
    } catch (e) {  // a redirect ioredis gave up on: start the call again
      log(`${what}_retry`, { lock: name, owner, sent_us: sent, error: String(e), attempt });
      await sleep(50);
    }
  }
}

function waitMessage(ch, ms) {
  return new Promise((resolve) => {
    const timer = setTimeout(() => { wakers.delete(ch); resolve(false); }, ms);
    wakers.set(ch, (v) => { clearTimeout(timer); wakers.delete(ch); resolve(v); });
  });
}

async function acquire(name) {
  const start = log.clock();
  let firstFailed = null, subscribed = false, wokenBy = null;
  for (;;) {
    const [sent, ttl] = await call('acquire', name, () => cluster.eval(ACQUIRE, 1, name, LEASE_MS, owner));
    if (ttl === null) {
      const contended = firstFailed !== null;
      log('acquired', { lock: name, owner, sent_us: sent, lease_ms: LEASE_MS, contended,
        waited_ms: contended ? (log.clock() - firstFailed) / 1000 : 0, woken_by: wokenBy });
      if (subscribed) {
        await cluster.sunsubscribe(channel(name)).catch((e) => log('unsubscribe_failed', { lock: name, owner, error: String(e) }));
        log('unsubscribed', { lock: name, owner, channel: channel(name) });
      }
      return true;
    }
    log('attempt_failed', { lock: name, owner, sent_us: sent, ttl_ms: ttl });
    if (firstFailed === null) firstFailed = sent;
    if (log.clock() - start > 6e6) {
      log('gave_up', { lock: name, owner, waited_ms: (log.clock() - firstFailed) / 1000 });
      return false;
    }
    if (!subscribed) {
      const s = log.clock();
      await cluster.ssubscribe(channel(name));
      subscribed = true;
      wokenBy = 'subscribed';
      log('subscribed', { lock: name, owner, channel: channel(name), sent_us: s });
      continue;  // Redisson retries once the subscription is confirmed
    }
    wokenBy = (await waitMessage(channel(name), Math.min(ttl, LEASE_MS))) ? 'message' : 'timeout';
  }
}

async function release(name, acquiredUs) {
  const latch = `redisson_unlock_latch:{${name}}:${crypto.randomBytes(16).toString('hex')}`;
  const [sent, result] = await call('unlock', name,
    () => cluster.eval(UNLOCK, 3, name, channel(name), latch, 0, LEASE_MS, owner, 'SPUBLISH', 20000));
  log(result === 1 ? 'released' : 'release_failed', { lock: name, owner, sent_us: sent, result,
    held_ms: (log.clock() - acquiredUs) / 1000 });
  await cluster.del(latch).catch(() => {});
}

(async () => {
  for (const name of locks) await cluster.eval('return 1', 1, name);  // connected to every master
  log('connections', { owner });
  fs.writeFileSync(path.join(control, `${proc}.ready`), '');
  while (!fs.existsSync(path.join(control, 'go'))) await sleep(20);
  while (!fs.existsSync(path.join(control, 'stop'))) {
    const name = locks[Math.floor(Math.random() * locks.length)];
    if (await acquire(name)) {
      const t = log.clock();
      await sleep(80 + Math.random() * 270);
      await release(name, t);
    }
    await sleep(Math.random() * 150);
  }
  cluster.disconnect();
})().catch((e) => { log('crashed', { owner, error: String(e && e.stack) }); process.exit(1); });
