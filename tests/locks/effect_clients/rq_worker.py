#!/usr/bin/python3
"""One process of the held-out RQ recording (record.sh): RQ 1.13 (Debian's python3-rq) on
redis-py 4.3 (python3-redis), unchanged; never used while building lockscope (the fourteenth
held-out set). Each process enqueues jobs, runs a worker in burst mode and a scheduler over
two queues, orders and stock; the locks are the scheduler's per-queue locks. It logs what
those did itself, one JSON line per event, to stdout, as the node workers do (truth_log.js):
  {"t_us", "proc", "event": "attempt"|"acquired"|"gave_up"|"group"|"rq_expire"|"rq_del", "lock",
   "owner", ...}
and rq_truth.py turns rq_expire and rq_del into extended, released and force_released lines
from all processes' logs merged (record.sh).
(t_us when the line is written, after the reply came; sent_us, on calls, just before the
command was handed to redis-py.)

What the client does: RQScheduler.acquire_locks() sends, for each of its queues, one
`SET rq:scheduler-lock:<queue> <pid> NX EX <interval + 60>` (no retry: a refused queue is
left to another scheduler); heartbeat() re-expires the locks it holds, `EXPIRE key
<interval + 60>` in a MULTI/EXEC pipeline, without looking at the value; release_locks()
sends one `DEL` of every queue's lock key, held or not: a scheduler holding one of two
deletes the other's lock too (force_released: its count and the others' logs say so). A
burst worker (`work(burst=True, with_scheduler=True)`) takes the locks, moves due scheduled
jobs into their queues and releases at once; the longer rounds here keep a scheduler's locks
for 0.3-2 s, beating every 0.4 s. The lease (61 s at interval 1) is never outlived: RQ
allows no shorter one. Beside the locks, the whole time: job hashes, queue lists and
registries (sorted sets) written in MULTI/EXEC pipelines, worker registration, the worker's
pub/sub channel, and the worker's cleaning lock `SET rq:clean_registries:<queue> 1 NX EX
899`, taken once per queue by the first worker and never released (logged too). Every lock
call is logged from what it returned (the scheduler's SET and DEL replies, the heartbeat
pipeline's EXPIRE replies, Queue.acquire_cleaning_lock's answer), wrapped, not replaced.

  /usr/bin/python3 rq_worker.py PORT PROC [ROUNDS]
Needs python3-rq and python3-redis (Debian).
"""
import json
import logging
import os
import random
import sys
import threading
import time
from datetime import timedelta

import redis
import redis.client
from rq import Queue, SimpleWorker
from rq.scheduler import RQScheduler
from python_worker import connect_from_own_address

port = int(sys.argv[1])
proc = sys.argv[2]
rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 8
out_lock = threading.Lock()
# The queues each process serves: p2 only orders (its scheduler's heartbeat is a plain
# EXPIRE); p1 and p3 both, so their release's DEL names orders even when p2 holds it.
QUEUES = {"p2": ["orders"]}.get(proc, ["orders", "stock"])


def now_us():
    return time.time_ns() // 1000


def log(**o):
    line = {"t_us": now_us(), "proc": proc}
    line.update(o)
    with out_lock:
        sys.stdout.write(json.dumps(line, separators=(",", ":")) + "\n")
        sys.stdout.flush()


# The pipeline's replies, for the heartbeat's EXPIREs (one per held lock, in order).
_execute = redis.client.Pipeline.execute
last_pipeline = threading.local()


def execute(self, *args, **kwargs):
    results = _execute(self, *args, **kwargs)
    last_pipeline.results = results
    return results


redis.client.Pipeline.execute = execute
owner = str(os.getpid())
_acquire_locks, _heartbeat, _release_locks = RQScheduler.acquire_locks, RQScheduler.heartbeat, RQScheduler.release_locks


def logged_connection(scheduler):
    """The scheduler's own connection with its SET and DEL replies logged."""
    connection = scheduler.connection
    if getattr(connection, "_logged", False):
        return connection
    plain_set, plain_delete, plain_expire = connection.set, connection.delete, connection.expire

    def logged_set(key, value, **kwargs):
        sent = now_us()
        ok = plain_set(key, value, **kwargs)
        log(event="attempt", lock=key, owner=str(value), reply="OK" if ok else None, sent_us=sent)
        if ok:
            log(event="acquired", lock=key, owner=str(value))
        else:  # no retry: the queue is left to the scheduler that holds it
            log(event="gave_up", lock=key, owner=str(value), waited_ms=(now_us() - sent) / 1000)
        return ok

    def logged_delete(*keys):
        sent = now_us()
        count = plain_delete(*keys)
        # What DEL removed is told by its count only with the other schedulers' logs (it names
        # every queue's key, held or not): rq_truth.py reads these lines after the merge.
        log(event="rq_del", keys=list(keys), count=count, owner=owner, sent_us=sent)
        return count

    def logged_expire(key, seconds, **kwargs):
        reply = plain_expire(key, seconds, **kwargs)
        scheduler._last_expire = reply
        return reply

    connection.set, connection.delete, connection.expire = logged_set, logged_delete, logged_expire
    connection._logged = True
    return connection


def acquire_locks(self, auto_start=False):
    logged_connection(self)
    taken = _acquire_locks(self, auto_start=auto_start)
    if len(taken) >= 2:
        # One call took several queues' locks, kept, renewed and released together: a
        # multi-key acquisition (measure.py's groups). One of two taken is a single lock kept.
        log(event="group", lock=",".join(sorted(self.get_locking_key(n) for n in taken)), owner=owner)
    return taken


def heartbeat(self):
    sent = now_us()
    names = list(self._acquired_locks)
    logged_connection(self)
    _heartbeat(self)
    # Several queues: one EXPIRE per lock it took in a pipeline; one queue: a plain EXPIRE of
    # its key (RQ sends it held or not; here it beats only after it took it). Whether the
    # key was still its own (another's DEL may have taken it, another's SET then) is told
    # by the other schedulers' logs: rq_truth.py reads these lines after the merge.
    replies = last_pipeline.results if len(self._queue_names) > 1 else [self._last_expire]
    for name, reply in zip(names, replies):
        log(event="rq_expire", lock=self.get_locking_key(name), owner=owner, reply=1 if reply else 0, sent_us=sent)


def release_locks(self):
    logged_connection(self)
    return _release_locks(self)


RQScheduler.acquire_locks, RQScheduler.heartbeat, RQScheduler.release_locks = acquire_locks, heartbeat, release_locks
_acquire_cleaning_lock = Queue.acquire_cleaning_lock


def acquire_cleaning_lock(self):
    sent = now_us()
    ok = _acquire_cleaning_lock(self)
    key = self.registry_cleaning_key
    log(event="attempt", lock=key, owner="1", reply="OK" if ok else None, sent_us=sent)
    log(event="acquired" if ok else "gave_up", lock=key, owner="1", **({} if ok else {"waited_ms": 0}))
    return ok


Queue.acquire_cleaning_lock = acquire_cleaning_lock

# Each process connects from a loopback address of its own (p1 from 127.0.0.11, ...), as
# processes on separate hosts or pods do (SAME_HOST=1: all from 127.0.0.1).
connect_from_own_address(proc)
logging.disable(logging.INFO)
connection = redis.Redis(host="127.0.0.1", port=port)
queues = [Queue(name, connection=connection) for name in QUEUES]
rng = random.Random(hash(proc) & 0xffff)
time.sleep(0.05 * int(proc[-1]) if proc[-1].isdigit() else 0)
for i in range(rounds):
    # Work arrives every round: a job now, one scheduled a little later (math.factorial:
    # a job function the worker imports; RQ refuses functions of __main__).
    rng.choice(queues).enqueue("math.factorial", rng.randrange(200, 900))
    rng.choice(queues).enqueue_in(timedelta(milliseconds=rng.randrange(100, 1500)), "math.factorial", 100)
    if i % 2 == 1:
        # A burst worker: its scheduler takes the queues' locks, moves the due jobs and lets go
        # at once; then it works the queues empty.
        SimpleWorker(queues, connection=connection).work(burst=True, with_scheduler=True, logging_level="WARNING")
        time.sleep(rng.uniform(0.05, 0.3))
        continue
    # A scheduler that keeps the locks it got for 0.3-2 s, beating every 0.4 s.
    scheduler = RQScheduler(QUEUES, connection=connection, interval=1, logging_level=logging.WARNING)
    scheduler.acquire_locks()
    if scheduler.acquired_locks:
        deadline = time.monotonic() + rng.uniform(0.3, 2.0)
        while time.monotonic() < deadline:
            scheduler.enqueue_scheduled_jobs()
            time.sleep(min(0.4, max(0.0, deadline - time.monotonic())))
            if time.monotonic() < deadline:
                scheduler.heartbeat()
        if i == rounds - 2 and proc.endswith("1"):
            # The first process's last scheduler dies holding: its locks stay until their
            # lease (61 s) ends, after the recording.
            os._exit(0)
        scheduler.release_locks()
    SimpleWorker(queues, connection=connection).work(burst=True, with_scheduler=False, logging_level="WARNING")
    time.sleep(rng.uniform(0.05, 0.3))
