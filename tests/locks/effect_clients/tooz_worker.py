#!/usr/bin/python3
"""One process of the held-out tooz recording (record.sh): OpenStack tooz 3.1's redis driver
(Debian's python3-tooz) on redis-py 4.3 (python3-redis), unchanged; never used while building
lockscope (the fourteenth held-out set). A coordinator per process, its heart beating, group
membership and a leader election running the whole time beside two contended locks. It logs
what its locks did itself, one JSON line per event, to stdout, as the node workers do
(truth_log.js):
  {"t_us", "proc", "event": "attempt"|"acquired"|"gave_up"|"extended"|"released"|
   "release_refused"|"expired", "lock", "owner", ...}
(t_us when the line is written, after the reply came; sent_us, on calls, just before the
command was handed to redis-py.)

What the client does: `coord.get_lock(name)` is redis-py's Lock on the key
`_tooz_<name>_lock`: each acquire() draws a uuid1 token and sends `SET key token NX PX
lease` every 100 ms until its blocking timeout (blocking=False: once); release() and the
heart's renewal of every held lock (`reacquire`: PEXPIRE to the whole lease when the token
still holds) are EVALSHA scripts (NOSCRIPT, SCRIPT LOAD, EVALSHA the first time). The heart
beats every min(lease, membership timeout) / 2: PSETEX of the member's beat key, then a
renewal of each held lock. Group membership: create_group/delete_group/update_capabilities
are tooz's own EVALSHA scripts on a hash and a set; join_group is WATCH/EXISTS/MULTI/HSET/
EXEC; get_members is a transaction reading the hash and each member's beat key. The leader
election (run_watchers) tries `_tooz_leader_of_<group>_lock` with blocking=False from a new
Lock object each time, even in the process that leads (refused by its own earlier token);
the leader keeps it, renewed by its heart, until it stops. Every lock call is logged here
from what redis-py's Lock methods returned (do_acquire, do_release, do_reacquire, acquire),
wrapped, not replaced.

  /usr/bin/python3 tooz_worker.py PORT PROC [ROUNDS]
Needs python3-tooz and python3-redis (Debian).
"""
import json
import os
import random
import sys
import threading
import time

from redis import exceptions as redis_exceptions
from redis.lock import Lock
from tooz import coordination
from python_worker import connect_from_own_address

port = int(sys.argv[1])
proc = sys.argv[2]
rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 8
LEASE_S = 2  # lock_timeout: the locks' PX; the heart beats every LEASE_S / 2
out_lock = threading.Lock()


def now_us():
    return time.time_ns() // 1000


def log(**o):
    line = {"t_us": now_us(), "proc": proc}
    line.update(o)
    with out_lock:
        sys.stdout.write(json.dumps(line, separators=(",", ":")) + "\n")
        sys.stdout.flush()


def text(token):
    return token.decode() if isinstance(token, bytes) else str(token)


held = {}  # lock name -> (token, when its lease last began (us, the call's send))
_do_acquire, _acquire, _do_release, _do_reacquire = Lock.do_acquire, Lock.acquire, Lock.do_release, Lock.do_reacquire


def do_acquire(self, token):
    sent = now_us()
    ok = _do_acquire(self, token)
    self._last_token = token
    log(event="attempt", lock=self.name, owner=text(token), reply="OK" if ok else None, sent_us=sent)
    if ok:
        held[self.name] = (text(token), sent)
        log(event="acquired", lock=self.name, owner=text(token))
    return ok


def acquire(self, *args, **kwargs):
    started = now_us()
    ok = _acquire(self, *args, **kwargs)
    if not ok:
        log(event="gave_up", lock=self.name, owner=text(self._last_token), waited_ms=(now_us() - started) / 1000)
    return ok


def do_release(self, expected_token):
    sent = now_us()
    try:
        _do_release(self, expected_token)
    except redis_exceptions.LockNotOwnedError:
        log(event="release_refused", lock=self.name, owner=text(expected_token), reply=0, sent_us=sent)
        held.pop(self.name, None)
        raise
    held.pop(self.name, None)
    log(event="released", lock=self.name, owner=text(expected_token), reply=1, sent_us=sent)


def do_reacquire(self):
    sent = now_us()
    token = text(self.local.token)
    try:
        ok = _do_reacquire(self)
    except redis_exceptions.LockNotOwnedError:
        log(event="extended", lock=self.name, owner=token, reply=0, sent_us=sent)
        raise
    if self.name in held:
        held[self.name] = (token, sent)
    log(event="extended", lock=self.name, owner=token, reply=1, sent_us=sent)
    return ok


Lock.do_acquire, Lock.acquire, Lock.do_release, Lock.do_reacquire = do_acquire, acquire, do_release, do_reacquire

# Each process connects from a loopback address of its own (p1 from 127.0.0.11, ...), as
# processes on separate hosts or pods do (SAME_HOST=1: all from 127.0.0.1).
connect_from_own_address(proc)
rng = random.Random(hash(proc) & 0xffff)
member = ("worker-" + proc).encode()
coord = coordination.get_coordinator(
    "redis://127.0.0.1:%d?timeout=5&lock_timeout=%d&membership_timeout=%d" % (port, LEASE_S, LEASE_S), member)
coord.start(start_heart=True)
group = b"workers"
try:
    coord.create_group(group).get()
except coordination.GroupAlreadyExist:
    pass
coord.join_group(group, capabilities={"proc": proc, "round": 0}).get()
coord.watch_elected_as_leader(group, lambda event: None)
time.sleep(0.05 * int(proc[-1]) if proc[-1].isdigit() else 0)
for i in range(rounds):
    # Group work every round: the election try, the members and capabilities.
    coord.run_watchers()
    coord.get_members(group).get()
    coord.update_capabilities(group, {"proc": proc, "round": i}).get()
    name = "orders" if i % 2 == 0 else "stock"
    lock = coord.get_lock(name)
    # orders waits up to 3 s; stock up to 1 s, so some give up; one try in six is
    # blocking=False (one SET, a give-up at its refusal).
    blocking = False if i % 6 == 5 else (3.0 if name == "orders" else 1.0)
    if not lock.acquire(blocking=blocking):
        time.sleep(rng.uniform(0.05, 0.2))
        continue
    # Hold 150-700 ms (orders) or 200-1300 ms (stock); one orders hold in four 2.5-3.5 s,
    # past its 2 s lease: the heart renews it.
    if name == "orders" and i % 8 == 4:
        hold = rng.uniform(2.5, 3.5)
    else:
        hold = rng.uniform(0.15, 0.7) if name == "orders" else rng.uniform(0.2, 1.3)
    deadline = time.monotonic() + hold
    coord.get_members(group).get()
    time.sleep(max(0.0, deadline - time.monotonic()))
    if i >= rounds - 2 and proc.endswith("1"):
        # The first of the last two rounds of the first process that acquires dies holding: no release, its heart stops;
        # each lock it holds expires a lease after its last renewal (or acquire) was sent.
        coord.heart.stop()
        coord.heart.wait()
        with out_lock:
            for key, (token, since) in held.items():
                sys.stdout.write(json.dumps({"t_us": since + LEASE_S * 1_000_000, "proc": proc, "event": "expired",
                                             "lock": key, "owner": token}, separators=(",", ":")) + "\n")
            sys.stdout.flush()
            os._exit(0)
    lock.release()
    time.sleep(rng.uniform(0.02, 0.15))
coord.leave_group(group).get()
coord.stop()  # releases the leader lock when this process holds it
