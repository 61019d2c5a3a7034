"""One redis-py (python3-redis) process of the "pylock" scenario: redis.lock.Lock on
py:inventory and py:orders (timeout 1.5 s, polling every 300 ms, giving up after 3 s),
holding 80-700 ms, extending during longer holds, one hold in ten stalling past its
timeout (its release then fails: LockNotOwnedError). Waiters poll and sleep, so a lock
freed while they sleep sits free until their next poll. A thin subclass logs what the
Lock did (each SET NX attempt, extend, release) as JSONL (see ../README.md).

  /usr/bin/python3 pylock_worker.py HOST PORT PROC TRUTH.jsonl CONTROL_DIR"""
import os
import random
import sys
import time

import redis
from redis.exceptions import LockError, LockNotOwnedError
from redis.lock import Lock

from truth import TruthLog, endpoint, now_us

host, port, proc, truth_path, control = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
server = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
log = TruthLog(truth_path, proc=proc, server=server)
client = redis.Redis(host=host, port=port, single_connection_client=True)
client.ping()
conn = endpoint(client)
TIMEOUT_S, SLEEP_S, BLOCKING_TIMEOUT_S = 1.5, 0.3, 3.0


class LoggedLock(Lock):
    """redis-py's Lock, unchanged, with each call to the server logged."""

    first_failed = None
    acquired_at = None

    def do_acquire(self, token):
        sent = now_us()
        ok = super().do_acquire(token)
        owner = token.decode()
        if ok:
            contended = self.first_failed is not None
            log("acquired", lock=self.name, owner=owner, conn=conn, sent_us=sent, lease_ms=TIMEOUT_S * 1000, contended=contended,
                waited_ms=(now_us() - self.first_failed) / 1000 if contended else 0, woken_by="poll" if contended else None)
            self.acquired_at = now_us()
        else:
            if self.first_failed is None:
                self.first_failed = now_us()
            log("attempt_failed", lock=self.name, owner=owner, conn=conn, sent_us=sent, sleep_ms=SLEEP_S * 1000)
        return ok

    def do_extend(self, additional_time, replace_ttl):
        sent = now_us()
        owner = self.local.token.decode()
        try:
            result = super().do_extend(additional_time, replace_ttl)
        except LockNotOwnedError:
            log("extend_failed", lock=self.name, owner=owner, conn=conn, sent_us=sent)
            raise
        log("extended", lock=self.name, owner=owner, conn=conn, sent_us=sent, added_ms=additional_time * 1000)
        return result

    def do_release(self, expected_token):
        sent = now_us()
        owner = expected_token.decode()
        try:
            super().do_release(expected_token)
        except LockNotOwnedError:
            log("release_failed", lock=self.name, owner=owner, conn=conn, sent_us=sent,
                held_ms=(now_us() - self.acquired_at) / 1000)
            raise
        log("released", lock=self.name, owner=owner, conn=conn, sent_us=sent, held_ms=(now_us() - self.acquired_at) / 1000)


def one_hold(name):
    lock = LoggedLock(client, name, timeout=TIMEOUT_S, sleep=SLEEP_S, blocking_timeout=BLOCKING_TIMEOUT_S)
    start = now_us()
    if not lock.acquire():
        log("gave_up", lock=name, conn=conn, waited_ms=(now_us() - (lock.first_failed or start)) / 1000)
        return
    if random.random() < 0.1:
        time.sleep(TIMEOUT_S + random.uniform(0.2, 0.5))  # stalls: the lease runs out
    else:
        hold_s = random.uniform(0.08, 0.7) if random.random() < 0.8 else random.uniform(1.2, 2.0)
        began = time.monotonic()
        while time.monotonic() - began + 0.9 < hold_s:
            time.sleep(0.6)
            lock.extend(1)
        time.sleep(max(0.0, hold_s - (time.monotonic() - began)))
    try:
        lock.release()
    except LockError:
        pass


log("connections", pid=os.getpid(), conn=conn)
open(os.path.join(control, f"{proc}.ready"), "w").close()
while not os.path.exists(os.path.join(control, "go")):
    time.sleep(0.01)
while not os.path.exists(os.path.join(control, "stop")):
    one_hold(random.choice(["py:inventory", "py:inventory", "py:orders"]))
    time.sleep(random.uniform(0, 0.15))
log("stopped", conn=conn)
