// One node-redisson process of the "redisson" scenario: THREADS async loops ("threads",
// each its own lock owner <executor uuid>:<thread>) take random locks of LOCKS with
// lock() (watchdog leases), hold them briefly and unlock. The library is used as
// published; only thin wrappers around its methods log what it did, as JSONL lines
// (see ../README.md for the fields).
//
//   node redisson_worker.js PORT PROC TRUTH.jsonl CONTROL_DIR
// It warms up (connections, scripts loaded), writes CONTROL_DIR/PROC.ready, starts
// contending once CONTROL_DIR/go exists and stops once CONTROL_DIR/stop exists.
'use strict';
const fs = require('node:fs');
const path = require('node:path');
const { AsyncLocalStorage, AsyncResource } = require('node:async_hooks');
const { Redisson } = require('node-redisson');
const { SYMBOL_TIMEOUT } = require('node-redisson/dist/contracts/ICommandExecutor');
const { truthLog, sleep, endpoint } = require('./truth');

const [port, proc, truthPath, control] = process.argv.slice(2);
const THREADS = 2;
const LOCKS = ['res:alpha', 'res:beta', 'res:gamma'];
const server = `127.0.0.1:${port}`;
const log = truthLog(truthPath, { proc, server });
const clock = log.clock;
const exists = (name) => fs.existsSync(path.join(control, name));
const rand = (lo, hi) => lo + Math.floor(Math.random() * (hi - lo + 1));

// 2.5 s watchdog leases, renewed every ~833 ms: a failed attempt's TTL, and so a
// waiter's timer, is at most 2.5 s.
const redisson = new Redisson({ redis: { options: { host: '127.0.0.1', port: Number(port) } }, lockWatchdogTimeout: 2500n });
const executor = redisson.commandExecutor;
const command = executor.redis;
const subscriber = executor.subscribeRedis;
const context = new AsyncLocalStorage();  // { thread, wait } of the code running now
const conns = () => ({ conn: endpoint(command.stream), sub_conn: endpoint(subscriber.stream) });

// Which channels the subscriber connection is subscribed to, as the server will see it:
// updated when a (UN)SUBSCRIBE is sent, since one connection's commands run in order.
const subscribedChannels = new Set();
// Threads of this process now waiting, per channel.
const waitingOn = new Map();
const waitersOf = (channel) => [...(waitingOn.get(channel) || [])];

// A message being dispatched: the executor's own 'message' listener runs between
// these two, and any UNSUBSCRIBE it sends on the way is caused by that message.
let dispatching = null;
subscriber.prependListener('message', (channel) => {
  dispatching = channel;
  // The waits whose handler is registered now: this message wakes them all.
  for (const listener of executor.eventEmitter.listeners(channel)) {
    const wait = waitOfListener.get(listener);
    if (wait) wait.messaged = true;
  }
});
subscriber.on('message', (channel, message) => {
  dispatching = null;
  log('message', { channel, message: String(message), waiters: waitersOf(channel).map((t) => t.owner), ...conns() });
});

const subscribe = subscriber.subscribe.bind(subscriber);
subscriber.subscribe = async (channel) => {
  const store = context.getStore() || {};
  const sent = clock();
  subscribedChannels.add(channel);
  const count = await subscribe(channel);
  log('subscribed', { lock: store.lock, owner: store.owner, channel, sent_us: sent, count, ...conns() });
  return count;
};
const unsubscribe = subscriber.unsubscribe.bind(subscriber);
subscriber.unsubscribe = async (channel) => {
  const store = context.getStore() || {};
  const wait = store.wait;
  const cause = dispatching === channel ? 'message' : wait && wait.ended ? 'stale_timer' : 'timer';
  const wasSubscribed = subscribedChannels.has(channel);
  subscribedChannels.delete(channel);
  // Waiters of this process that still wait on the channel (other than this wait, and
  // other than those the same message is waking).
  const others = waitersOf(channel).filter((t) => (!wait || t.wait !== wait) && !(cause === 'message' && t.wait && t.wait.messaged))
    .map((t) => t.owner);
  const sent = clock();
  const count = await unsubscribe(channel);
  log('unsubscribed', { lock: store.lock, owner: store.owner, channel, cause, sent_us: sent, count, was_subscribed: wasSubscribed,
    still_waiting: others, ...conns() });
  return count;
};

// The library's message handlers run from the socket's callbacks, outside the wait's
// async context; bind each to the context it was registered in (keeping the library's
// own off() working), so a handler's UNSUBSCRIBE is logged with its waiter.
const boundListeners = new Map();
const waitOfListener = new WeakMap();
const once = executor.eventEmitter.once.bind(executor.eventEmitter);
executor.eventEmitter.once = (event, listener) => {
  const bound = AsyncResource.bind(listener);
  boundListeners.set(listener, bound);
  waitOfListener.set(bound, (context.getStore() || {}).wait);
  return once(event, bound);
};
const off = executor.eventEmitter.off.bind(executor.eventEmitter);
executor.eventEmitter.off = (event, listener) => {
  const bound = boundListeners.get(listener);
  boundListeners.delete(listener);
  return off(event, bound || listener);
};

const waitSubscribeOnce = executor.waitSubscribeOnce.bind(executor);
executor.waitSubscribeOnce = async (channel, timeout) => {
  const thread = context.getStore();
  const wait = { started: clock(), timeout, ended: false };
  thread.wait = wait;
  if (!waitingOn.has(channel)) waitingOn.set(channel, new Set());
  waitingOn.get(channel).add(thread);
  log('wait', { lock: thread.lock, owner: thread.owner, channel, timeout_ms: timeout, ...conns() });
  const result = await context.run({ ...thread, wait }, () => waitSubscribeOnce(channel, timeout));
  wait.ended = true;
  waitingOn.get(channel).delete(thread);
  thread.lastWake = result === SYMBOL_TIMEOUT ? 'timer' : 'message';
  log('woken', { lock: thread.lock, owner: thread.owner, channel, by: thread.lastWake, slept_ms: (clock() - wait.started) / 1000,
    subscribed_at_end: subscribedChannels.has(channel), ...conns() });
  return result;
};

// The watchdog's renewals (rRenewExpiration KEYS[1]=name ARGV=[lease, owner]).
const renew = command.rRenewExpiration.bind(command);
command.rRenewExpiration = async (name, lease, owner) => {
  const sent = clock();
  const result = await renew(name, lease, owner);
  log(result ? 'extended' : 'extend_failed', { lock: name, owner, sent_us: sent, lease_ms: Number(lease), ...conns() });
  return result;
};

function instrument(lock, thread) {
  const tryAcquire = lock.tryAcquire.bind(lock);
  lock.tryAcquire = async (options) => {
    const sent = clock();
    const ttl = await tryAcquire(options);
    const now = clock();
    if (ttl === null) {
      const contended = thread.firstFailed !== null;
      log('acquired', { lock: thread.lock, owner: thread.owner, sent_us: sent, attempts: thread.attempts + 1,
        contended, waited_ms: contended ? (now - thread.firstFailed) / 1000 : 0,
        woken_by: contended ? thread.lastWake : null, lease_ms: 2500, ...conns() });
      thread.acquiredAt = now;
    } else {
      if (thread.firstFailed === null) thread.firstFailed = now;
      log('attempt_failed', { lock: thread.lock, owner: thread.owner, sent_us: sent, ttl_ms: Number(ttl), ...conns() });
    }
    thread.attempts += 1;
    return ttl;
  };
  const unlockInner = lock.unlockInner.bind(lock);
  lock.unlockInner = async (...args) => {
    const sent = clock();
    const result = await unlockInner(...args);
    log(result === null ? 'release_failed' : 'released', { lock: thread.lock, owner: thread.owner, sent_us: sent,
      held_ms: (clock() - thread.acquiredAt) / 1000, ...conns() });
    return result;
  };
}

async function runThread(tid) {
  const thread = { tid, owner: `${executor.id}:${tid}`, lock: null, wait: null };
  const locks = new Map(LOCKS.map((name) => [name, redisson.getLock(name, String(tid))]));
  for (const lock of locks.values()) instrument(lock, thread);
  await context.run(thread, async () => {
    while (!exists('stop')) {
      thread.lock = LOCKS[rand(0, LOCKS.length - 1)];
      Object.assign(thread, { firstFailed: null, attempts: 0, lastWake: null });
      const lock = locks.get(thread.lock);
      await lock.lock();
      // Mostly short holds; one in ten outlives the watchdog's renewal period.
      await sleep(Math.random() < 0.1 ? rand(900, 1600) : rand(20, 260));
      await lock.unlock();
      await sleep(rand(0, 120));
    }
  });
}

async function main() {
  await command.ping();
  await subscriber.ping();
  // Run every script the scenario sends once, so the recording (which starts later)
  // holds only EVALSHA: ioredis sends EVAL the first time a connection runs a script.
  // A watchdog hold past one renewal period (2500 / 3 ms) runs the renew script too.
  const warm = redisson.getLock(`warmup:${proc}`, '0');
  await warm.lock();
  await sleep(1000);
  await warm.unlock();
  log('connections', { pid: process.pid, executor_id: executor.id, owners: [1, 2].map((t) => `${executor.id}:${t}`), ...conns() });
  fs.writeFileSync(path.join(control, `${proc}.ready`), '');
  while (!exists('go')) await sleep(10);
  await Promise.all(Array.from({ length: THREADS }, (_, i) => runThread(i + 1)));
  log('stopped', conns());
  await sleep(2700);  // the library's leftover wait timers (≤ 2.5 s) still UNSUBSCRIBE
  await redisson.quit();
}

main().catch((error) => { log('error', { message: String(error && error.stack || error) }); process.exit(1); });
