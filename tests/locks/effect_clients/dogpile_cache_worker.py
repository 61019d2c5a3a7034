#!/usr/bin/python3
"""One process of the held-out dogpile.cache recording (record.sh dogpile_cache): dogpile.cache
1.1.8's Redis backend with its distributed lock (Debian's python3-dogpile.cache,
dogpile/cache/backends/redis.py and dogpile/lock.py) on redis-py 4.3 (python3-redis),
unchanged; never used while building lockscope (the twenty-eighth held-out set). It logs what
its locks did itself, one JSON line per event, to stdout, as the other workers do
(truth_log.js):
  {"t_us", "proc", "event": "attempt"|"acquired"|"gave_up"|"released"|"release_refused"|
   "expired", "lock", "owner", ...}
(t_us when the line is written, after the reply came; sent_us, on calls, just before the
command was handed to redis-py.)

What the client does: a cache region's get_or_create(key, creator) reads the value (`GET
key`, a pickled (payload, metadata) pair); when it is missing or older than the region's
expiration_time, the dogpile lock decides who regenerates it: the backend's mutex is redis-py's
Lock on `_lock<key>` (distributed_lock=True), whose acquire() draws one token (uuid1 hex) for
all its tries and sends `SET _lock<key> token NX PX lock_timeout`. Without a value in the cache
the caller blocks (a try every lock_sleep, 0.1 s here, never giving up) and, once it has the
lock, reads the value again: another process may have made it meanwhile; with a stale value it
makes a single try (blocking=False) and, refused, returns the stale value at once (someone else
is regenerating). The creator's value is written (`SETEX key redis_expiration_time value`),
then the lock is released by redis-py's release script (`EVALSHA` of `local token =
redis.call('get', KEYS[1]) if not token or token ~= ARGV[1] then return 0 end
redis.call('del', KEYS[1]) return 1`; its text loaded by SCRIPT LOAD on NOSCRIPT), raising
LockNotOwnedError on 0. There is no renewal. lock_timeout is 1 s, so a dead holder's lock runs
out within the run.

The rounds: 3 processes on the keys `orders` and `stock` (one after the other), values
stale after 0.3 s; one round in three first deletes the key's value (an eviction: every
process then blocks for the lock), the creator takes 30-350 ms, one in seven 1.15-1.35 s (past
the lock's lease: its key expires, logged then, and the release answers 0). Holders killed with
SIGKILL: each life of the loop runs in a child process whose lines come back through a pipe;
p2's and p3's children are killed once in the middle of a regeneration (the lock expires 1 s
after its SET, logged by the parent at that time), and a new child goes on with the next
rounds over a new connection.

  /usr/bin/python3 dogpile_cache_worker.py PORT PROC [ROUNDS]
  /usr/bin/python3 dogpile_cache_worker.py PORT PROC ROUNDS --life FROM KILL_ROUND   (a child)
Needs python3-dogpile.cache and python3-redis (Debian).
"""
import os
import random
import sys
import time

from python_worker import connect_from_own_address, logger, now_us, run_lives, write_line

port = int(sys.argv[1])
proc = sys.argv[2]
rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 8
LEASE_S = 1
log = logger(proc)

if len(sys.argv) <= 4 or sys.argv[4] != "--life":
    # The parent: runs the rounds in children, killing p2's and p3's once mid-hold.
    run_lives(os.path.abspath(__file__), port, proc, rounds,
              {"p2": rounds // 3, "p3": (2 * rounds) // 3 + 1}.get(proc, -1), LEASE_S * 1_000_000)
    sys.exit(0)

# A child: rounds FROM.. of the loop, over its own connection.
start, kill_round = int(sys.argv[5]), int(sys.argv[6])
connect_from_own_address(proc)
import redis.lock  # noqa: E402  (after the patch: its connections bind the own address)
from dogpile.cache import make_region  # noqa: E402


def text(b):
    return b.decode() if isinstance(b, bytes) else str(b)


held = {}  # lock -> (owner, when its SET was sent)
last_try = {}  # lock -> the token of this process's latest try
_do_acquire = redis.lock.Lock.do_acquire
_do_release = redis.lock.Lock.do_release
_acquire = redis.lock.Lock.acquire


def logged_do_acquire(self, token):
    sent = now_us()
    ok = _do_acquire(self, token)
    key, owner = text(self.name), text(token)
    last_try[key] = owner
    log(event="attempt", lock=key, owner=owner, reply="OK" if ok else None, sent_us=sent)
    if ok:
        held[key] = (owner, sent)
        log(event="acquired", lock=key, owner=owner)
    return ok


def logged_do_release(self, expected_token):
    sent = now_us()
    key, owner = text(self.name), text(expected_token)
    try:
        _do_release(self, expected_token)
    except redis.exceptions.LockNotOwnedError:
        log(event="release_refused", lock=key, owner=owner, reply=0, sent_us=sent)
        held.pop(key, None)
        raise
    log(event="released", lock=key, owner=owner, reply=1, sent_us=sent)
    held.pop(key, None)


def logged_acquire(self, *args, **kwargs):
    ok = _acquire(self, *args, **kwargs)
    if not ok:
        key = text(self.name)
        log(event="gave_up", lock=key, owner=last_try.get(key, ""), single_try=True)
    return ok


redis.lock.Lock.do_acquire = logged_do_acquire
redis.lock.Lock.do_release = logged_do_release
redis.lock.Lock.acquire = logged_acquire

rng = random.Random()
region = make_region().configure(
    "dogpile.cache.redis",
    expiration_time=0.3,
    arguments={"host": "127.0.0.1", "port": port, "db": 0, "redis_expiration_time": 30,
               "distributed_lock": True, "thread_local_lock": False, "lock_timeout": LEASE_S, "lock_sleep": 0.1})
time.sleep(0.05 * int(proc[-1]) if proc[-1].isdigit() else 0)
for i in range(start, rounds):
    name = "orders" if i % 2 == 0 else "stock"
    lock_key = "_lock" + name

    def create(i=i, name=name, lock_key=lock_key):
        if 0 <= kill_round <= i:  # the first regeneration from that round on
            owner, sent = held[lock_key]
            write_line({"event": "kill_me", "round": i, "lock": lock_key, "owner": owner, "sent_us": sent})
            time.sleep(30)
        if i % 7 == 3:
            owner, sent = held[lock_key]
            time.sleep(LEASE_S + rng.uniform(0.15, 0.35))
            log(event="expired", lock=lock_key, owner=owner, t_us=sent + LEASE_S * 1_000_000)
        else:
            time.sleep(rng.uniform(0.03, 0.35))
        return "%s by %s in round %d" % (name, proc, i)

    if i % 3 == 1:
        region.delete(name)
    try:
        region.get_or_create(name, create)
    except redis.exceptions.LockNotOwnedError:
        pass  # the creator outlived the lock's lease (logged)
    time.sleep(rng.uniform(0.02, 0.15))
