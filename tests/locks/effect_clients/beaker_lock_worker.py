#!/usr/bin/python3
"""One process of the held-out Beaker recording (record.sh beaker_lock): Beaker 1.11's Redis
creation lock (Debian's python3-beaker, beaker/ext/redisnm.py's RedisSynchronizer) on redis-py
4.3 (python3-redis), unchanged; never used while building lockscope (the twenty-third
held-out set). It logs what its locks did itself, one JSON line per event, to stdout, as the
other workers do (truth_log.js):
  {"t_us", "proc", "event": "attempt"|"acquired"|"gave_up"|"released"|"expired", "lock",
   "owner", ...}
(t_us when the line is written, after the reply came; sent_us, on calls, just before the
command was handed to redis-py.)

What the client does: the lock a cache namespace takes while it creates a value
(`RedisNamespaceManager(namespace, url).get_creation_lock(key)`) is the key
`beaker_lock:beaker_cache:<namespace>:<key>`, its value the owner id
`<machine id>-<pid>-<thread id>` (one per thread: every attempt and hold of a process sends
the same). `acquire_write_lock(wait=True)` sends `SET key owner EX LOCK_EXPIRATION NX` and,
refused, sleeps 0.2 s and tries again until it gets it (it never gives up);
`acquire_write_lock(wait=False)` is a single try (Beaker's own use: a stale value is served
while another creates the new one). The release is no script but redis-py's optimistic
transaction: `WATCH key`, `GET key` and, when it reads the owner's id, `DEL key` sent at once
(the pipeline executes immediately while it watches), then an empty `MULTI`/`EXEC` that the
DEL itself aborts (nil), so redis-py runs it all again: `WATCH`, `GET` (nil now, no DEL),
`MULTI`, `EXEC`. There is no renewal. LOCK_EXPIRATION (a class attribute, 900 s by default)
is set to 1 s here so a dead holder's key runs out within the run.

The rounds: 3 processes on the namespace `reports`, each round the key `orders` (two rounds in
three) or `stock`, a hold of 20-400 ms; one round in five a single try (refused: gave_up), the
others waiting until they get the lock. Holders killed with SIGKILL: each life of the loop runs
in a child process whose lines come back through a pipe; p1's and p3's children are killed once
in the middle of a hold (the key expires 1 s after its SET, logged by the parent as expired at
that time), and a new child goes on with the next rounds over a new connection.

  /usr/bin/python3 beaker_lock_worker.py PORT PROC [ROUNDS]
  /usr/bin/python3 beaker_lock_worker.py PORT PROC ROUNDS --life FROM KILL_ROUND   (a child)
Needs python3-beaker and python3-redis (Debian).
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
    # The parent: runs the rounds in children, killing p1's and p3's once mid-hold.
    run_lives(os.path.abspath(__file__), port, proc, rounds, {"p1": rounds // 3, "p3": (2 * rounds) // 3}.get(proc, -1),
              LEASE_S * 1_000_000)
    sys.exit(0)

# A child: rounds FROM.. of the loop, over its own connection.
start, kill_round = int(sys.argv[5]), int(sys.argv[6])
connect_from_own_address(proc)
import redis  # noqa: E402  (after the patch: its connections bind the own address)
from beaker.ext.redisnm import RedisNamespaceManager, RedisSynchronizer  # noqa: E402

RedisSynchronizer.LOCK_EXPIRATION = LEASE_S


def text(b):
    return b.decode() if isinstance(b, bytes) else str(b)


last_owner = {}  # key -> the value of this process's latest try
held = {}  # key -> (owner, when its SET was sent)
_set = redis.Redis.set
_immediate = redis.client.Pipeline.immediate_execute_command


def logged_set(self, name, value, *args, **kwargs):
    if not (kwargs.get("nx") and text(name).startswith("beaker_lock:")):
        return _set(self, name, value, *args, **kwargs)
    sent = now_us()
    ok = _set(self, name, value, *args, **kwargs)
    key, owner = text(name), text(value)
    last_owner[key] = owner
    log(event="attempt", lock=key, owner=owner, reply="OK" if ok else None, sent_us=sent)
    if ok:
        held[key] = (owner, sent)
        log(event="acquired", lock=key, owner=owner)
    return ok


def logged_immediate(self, *args, **options):
    if not (args and text(args[0]).upper() == "DEL" and len(args) == 2 and text(args[1]).startswith("beaker_lock:")):
        return _immediate(self, *args, **options)
    sent = now_us()
    reply = _immediate(self, *args, **options)
    key = text(args[1])
    owner, _ = held.pop(key, (last_owner.get(key, ""), sent))
    log(event="released", lock=key, owner=owner, reply=reply, sent_us=sent)
    return reply


redis.Redis.set = logged_set
redis.client.Pipeline.immediate_execute_command = logged_immediate

rng = random.Random()
namespace = RedisNamespaceManager("reports", "redis://127.0.0.1:%d/0" % port)
time.sleep(0.05 * int(proc[-1]) if proc[-1].isdigit() else 0)
for i in range(start, rounds):
    name = "orders" if rng.random() < 2 / 3 else "stock"
    lock = namespace.get_creation_lock(name)
    key = lock.identifier
    single_try = rng.random() < 0.2
    if not lock.acquire_write_lock(wait=not single_try):
        log(event="gave_up", lock=key, owner=last_owner.get(key, ""))
    else:
        if i == kill_round:
            owner, sent = held[key]
            write_line({"event": "kill_me", "round": i, "lock": key, "owner": owner, "sent_us": sent})
            time.sleep(30)
        time.sleep(rng.uniform(0.02, 0.4))
        lock.release_write_lock()
        if key in held:
            # No DEL: the GET read another value (the lease ran out while held).
            owner, sent = held.pop(key)
            write_line({"t_us": sent + LEASE_S * 1_000_000, "proc": proc, "event": "expired", "lock": key,
                        "owner": owner})
    time.sleep(rng.uniform(0.02, 0.15))
