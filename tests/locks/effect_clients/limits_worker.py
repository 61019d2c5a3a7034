#!/usr/bin/python3
"""One process of the held-out limits recording (record.sh), a negative control: limits 2.8's
Redis storage (Debian's python3-limits) on redis-py 4.3 (python3-redis), unchanged; never used
while building lockscope (the fifteenth held-out set). Rate limiters, not locks: it takes no
lock at all, so every lock event lockscope shows on this traffic is false. Its log says so with
one line {"event": "no_locks"} (measure.py then counts every kind's events as false), then one
line per hit for whoever reads the log:
  {"t_us", "proc", "event": "no_locks"|"hit", "limit", "strategy", "allowed"}

What the client does, per strategy (limits/storage/redis.py and its Lua scripts):
- moving window: `hit` is acquire_moving_window.lua by EVALSHA (NOSCRIPT, SCRIPT LOAD, EVALSHA
  the first time): LINDEX of the list at limit - amount, refused (nil) when that entry is still
  inside the window, else LPUSH of the timestamp, LTRIM to the limit and EXPIRE of the window,
  answering 1; `get_window_stats` is moving_window.lua (LRANGE, counting) and a TTL.
- fixed window: `hit` is incr_expire.lua (INCRBY, EXPIRE when the count equals the amount,
  answering the count; refused client-side when above the limit); `test` is a GET.
- fixed window, elastic expiry: plain INCRBY then EXPIRE on every hit.
Three limits on keys shared by the three processes, hit in bursts that go over them, with
pauses between so windows empty again; `clear` (a DEL) of one limit now and then.

  /usr/bin/python3 limits_worker.py PORT PROC [ROUNDS]
Needs python3-limits and python3-redis (Debian).
"""
import random
import sys
import time

from python_worker import connect_from_own_address, logger

port = int(sys.argv[1])
proc = sys.argv[2]
rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 8


log = logger(proc)
connect_from_own_address(proc)

from limits import parse  # noqa: E402
from limits.storage import RedisStorage  # noqa: E402
from limits.strategies import (FixedWindowElasticExpiryRateLimiter, FixedWindowRateLimiter,  # noqa: E402
                               MovingWindowRateLimiter)

rng = random.Random(hash(proc) & 0xffff)
storage = RedisStorage("redis://127.0.0.1:%d" % port)
moving = MovingWindowRateLimiter(storage)
fixed = FixedWindowRateLimiter(storage)
elastic = FixedWindowElasticExpiryRateLimiter(storage)
limits = [
    ("moving", moving, parse("6 per 1 second"), "api"),
    ("moving", moving, parse("3 per 2 seconds"), "login"),
    ("fixed", fixed, parse("10 per 1 second"), "search"),
    ("elastic", elastic, parse("4 per 1 second"), "upload"),
]
log(event="no_locks")
time.sleep(0.05 * int(proc[-1]) if proc[-1].isdigit() else 0)
for i in range(rounds):
    strategy, limiter, item, who = limits[i % len(limits)]
    for _ in range(rng.randint(3, 9)):
        allowed = limiter.hit(item, who, proc if who == "upload" else "shared")
        log(event="hit", limit=str(item), strategy=strategy, who=who, allowed=allowed)
        if rng.random() < 0.3:
            limiter.test(item, who, "shared")
        time.sleep(rng.uniform(0.01, 0.08))
    if strategy == "moving":
        limiter.get_window_stats(item, who, "shared")
    if i % 7 == 6:
        limiter.clear(item, who, "shared")
    time.sleep(rng.uniform(0.1, 0.5))
