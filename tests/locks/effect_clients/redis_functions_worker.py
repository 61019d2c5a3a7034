#!/usr/bin/python3
"""One process of the Redis Functions recording (record.sh redis_functions): locks written as
Redis 7 Functions, loaded once with FUNCTION LOAD and called with FCALL / FCALL_RO through
redis-py 4.3 (Debian's python3-redis: `function_load`, `fcall`, `fcall_ro`). Used while
building lockscope's reading of Functions, so not held out. It logs what its locks did itself,
one JSON line per event, to stdout, as the other workers do (python_worker.py):
  {"t_us", "proc", "event": "attempt"|"acquired"|"gave_up"|"released"|"extended"|"expired",
   "lock", "owner", ...}
(t_us when the line is written, after the reply came; sent_us, on calls, just before the
command was handed to redis-py; reply 1 / "OK" for a call that did what it asked, whatever
the function answered, and `raw` for the function's own answer.)

Two libraries, written here (no client ships them), loaded by p1 at its start with REPLACE:
- `api_mutex`, registered positionally: `mutex_lock(keys, args)` = SET NX PX answering 1/0,
  `mutex_unlock` and `mutex_extend` comparing the value first (1/0), for the locks
  `mutex:orders` and `mutex:stock`;
- `cls_lock`, registered in the table form (`redis.register_function{function_name=...,
  callback=..., flags=...}`) with Ceph RGW's shape and answers: `lock(keys={name},
  args={cookie, duration_ms})` answers 0 when taken and -16 (EBUSY) when another cookie holds
  it, `renew` 0 / -16 / -2 (ENOENT), `unlock` 0 / -16 / -2, and a read-only `lock_owner`
  (flags no-writes, called by FCALL_RO before each wait: a read, no lock event), for the lock
  `rgw:gc`.

The rounds: 3 processes, each round a lock (`mutex:orders` or `mutex:stock` half the time,
else `rgw:gc`), a fresh owner value per wait, polled every 40-60 ms until taken or, one wait
in five, a patience of 150 ms runs out (gave_up); held 20-400 ms with a lease of 300 ms,
extended every 120 ms during longer holds. Holders killed with SIGKILL: each life of the
loop runs in a child process whose lines come back through a pipe; p1's and p3's children
are killed once in the middle of a hold (python_worker.run_lives: the key expires a lease
after its acquiring call, logged by the parent as expired then), and a new child goes on with
the next rounds over a new connection.

  /usr/bin/python3 redis_functions_worker.py PORT PROC [ROUNDS]
  /usr/bin/python3 redis_functions_worker.py PORT PROC ROUNDS --life FROM KILL_ROUND   (a child)
Needs python3-redis (Debian) and redis-server 7.
"""
import os
import random
import sys
import time
import uuid

from python_worker import connect_from_own_address, logger, now_us, run_lives, write_line

port = int(sys.argv[1])
proc = sys.argv[2]
rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 8
LEASE_MS = 300
EXTEND_EVERY_S = 0.12
log = logger(proc)

API_MUTEX = """#!lua name=api_mutex
local function mutex_lock(keys, args)
  if redis.call('SET', keys[1], args[1], 'NX', 'PX', args[2]) then
    return 1
  end
  return 0
end

local function mutex_unlock(keys, args)
  if redis.call('GET', keys[1]) == args[1] then
    redis.call('DEL', keys[1])
    return 1
  end
  return 0
end

local function mutex_extend(keys, args)
  if redis.call('GET', keys[1]) == args[1] then
    redis.call('PEXPIRE', keys[1], args[2])
    return 1
  end
  return 0
end

redis.register_function('mutex_lock', mutex_lock)
redis.register_function('mutex_unlock', mutex_unlock)
redis.register_function('mutex_extend', mutex_extend)
"""

CLS_LOCK = """#!lua name=cls_lock
local EBUSY = -16
local ENOENT = -2

redis.register_function{
  function_name = 'lock',
  callback = function(keys, args)
    local name, cookie, duration = keys[1], args[1], args[2]
    local holder = redis.call('GET', name)
    if not holder then
      redis.call('SET', name, cookie, 'PX', duration)
      return 0
    end
    return EBUSY
  end
}

redis.register_function{
  function_name = 'renew',
  callback = function(keys, args)
    local holder = redis.call('GET', keys[1])
    if not holder then return ENOENT end
    if holder ~= args[1] then return EBUSY end
    redis.call('PEXPIRE', keys[1], args[2])
    return 0
  end
}

redis.register_function{
  function_name = 'unlock',
  callback = function(keys, args)
    local holder = redis.call('GET', keys[1])
    if not holder then return ENOENT end
    if holder ~= args[1] then return EBUSY end
    redis.call('DEL', keys[1])
    return 0
  end
}

redis.register_function{
  function_name = 'lock_owner',
  callback = function(keys, args)
    return redis.call('GET', keys[1])
  end,
  flags = {'no-writes'}
}
"""

if len(sys.argv) <= 4 or sys.argv[4] != "--life":
    # The parent: runs the rounds in children, killing p1's and p3's once mid-hold.
    run_lives(os.path.abspath(__file__), port, proc, rounds, {"p1": rounds // 3, "p3": (2 * rounds) // 3}.get(proc, -1),
              LEASE_MS * 1000)
    sys.exit(0)

# A child: rounds FROM.. of the loop, over its own connection.
start, kill_round = int(sys.argv[5]), int(sys.argv[6])
connect_from_own_address(proc)
import redis  # noqa: E402  (after the patch: its connections bind the own address)

r = redis.Redis(host="127.0.0.1", port=port)
if proc == "p1" and start == 0:
    r.function_load(API_MUTEX, replace=True)
    r.function_load(CLS_LOCK, replace=True)
else:
    time.sleep(0.3 + 0.05 * int(proc[-1]))  # the libraries are loaded by p1


def call(function, lock, *args):
    """The function's answer, and whether it did what it asked (1/0 or 0/-errno)."""
    sent = now_us()
    reply = r.fcall(function, 1, lock, *args)
    ok = reply == 1 if function.startswith("mutex_") else reply == 0
    return sent, reply, ok


def names(lock):
    if lock.startswith("mutex:"):
        return "mutex_lock", "mutex_extend", "mutex_unlock"
    return "lock", "renew", "unlock"


rng = random.Random()
for i in range(start, rounds):
    pick = rng.random()
    lock = "rgw:gc" if pick < 0.5 else "mutex:orders" if pick < 0.8 else "mutex:stock"
    take, extend, free = names(lock)
    owner = uuid.uuid4().hex
    patience_s = 0.15 if rng.random() < 0.2 else 5.0
    if not lock.startswith("mutex:"):
        r.fcall_ro("lock_owner", 1, lock)  # who holds it, before waiting: a read
    began = time.monotonic()
    acquired = False
    while True:
        sent, reply, ok = call(take, lock, owner, LEASE_MS)
        log(event="attempt", lock=lock, owner=owner, reply="OK" if ok else reply, raw=reply, sent_us=sent)
        if ok:
            acquired = True
            log(event="acquired", lock=lock, owner=owner)
            break
        if time.monotonic() - began > patience_s:
            break
        time.sleep(rng.uniform(0.04, 0.06))
    if not acquired:
        log(event="gave_up", lock=lock, owner=owner)
        time.sleep(rng.uniform(0.02, 0.15))
        continue
    if i == kill_round:
        write_line({"event": "kill_me", "round": i, "lock": lock, "owner": owner, "sent_us": sent})
        time.sleep(30)
    hold_s = rng.uniform(0.02, 0.4)
    held_until = time.monotonic() + hold_s
    while held_until - time.monotonic() > EXTEND_EVERY_S:
        time.sleep(EXTEND_EVERY_S)
        sent, reply, ok = call(extend, lock, owner, LEASE_MS)
        log(event="extended", lock=lock, owner=owner, reply=1 if ok else 0, raw=reply, sent_us=sent)
    time.sleep(max(0.0, held_until - time.monotonic()))
    sent, reply, ok = call(free, lock, owner)
    log(event="released", lock=lock, owner=owner, reply=1 if ok else 0, raw=reply, sent_us=sent)
    time.sleep(rng.uniform(0.02, 0.15))
