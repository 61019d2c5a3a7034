#!/usr/bin/python3
# A real redis-py (Debian python3-redis) client for test_give_ups.cpp, logging what it
# did as JSON lines (its truth; times are the epoch in microseconds, the capture's clock):
#   holder PORT LOCK HOLD_S LEASE_S [LOG N]
#                                       acquires LOCK with a LEASE_S lease, holds it
#                                       HOLD_S, releases it; given LOG, holds it until LOG
#                                       has N gave_up lines of LOCK (at most HOLD_S): a
#                                       loaded machine may start a poller a second late,
#                                       and it must still find the lock held.
#   waiter PORT LOCK TIMEOUT_S LINGER_S acquire(blocking_timeout=TIMEOUT_S) polling every
#                                       100 ms while the holder holds: it gives up; logs
#                                       when it began, each attempt, and when it gave up;
#                                       keeps its connection LINGER_S longer, then exits
#                                       (LINGER_S 0: closes it at once, logged as closed_us).
#   held PORT LOCK                      returns once LOCK exists (at most 10 s): the
#                                       recording starts a waiter only then, however
#                                       slowly a loaded machine started the holder.
import json
import sys
import time

import redis
from redis.lock import Lock


def now_us():
    return int(time.time() * 1e6)


def log(event, **fields):
    fields["event"] = event
    fields.setdefault("t_us", now_us())
    print(json.dumps(fields), flush=True)


class CountingLock(Lock):
    attempts = 0

    def do_acquire(self, token):
        CountingLock.attempts += 1
        return super().do_acquire(token)


def main():
    mode, port, name = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    r = redis.Redis(port=port, single_connection_client=True)
    if mode == "held":
        deadline = time.monotonic() + 10
        while not r.exists(name):
            if time.monotonic() > deadline:
                sys.exit(f"{name} was not taken within 10 s")
            time.sleep(0.005)
        return
    if mode == "holder":
        hold_s, lease_s = float(sys.argv[4]), float(sys.argv[5])
        lock = Lock(r, name, timeout=lease_s)
        assert lock.acquire(blocking=False)
        log("acquired", owner=lock.local.token.decode())
        until = time.monotonic() + hold_s
        if len(sys.argv) > 6:
            given_up = lambda: sum(1 for line in open(sys.argv[6]) if '"gave_up"' in line and name in line)
            while time.monotonic() < until and given_up() < int(sys.argv[7]):
                time.sleep(0.01)
            time.sleep(0.05)
        else:
            time.sleep(hold_s)
        token = lock.local.token.decode()
        lock.release()
        log("released", owner=token)
        return
    timeout_s, linger_s = float(sys.argv[4]), float(sys.argv[5])
    r.ping()  # connected before the clock starts
    lock = CountingLock(r, name, timeout=10, sleep=0.1)
    began = now_us()
    got = lock.acquire(blocking_timeout=timeout_s)
    ended = now_us()
    assert not got
    closed = {}
    if linger_s == 0:  # closed at once: a loaded machine may take long to end the process
        r.close()  # with single_connection_client, hands the connection back to the pool
        r.connection_pool.disconnect()  # the FIN
        closed["closed_us"] = now_us()
    log("gave_up", began_us=began, t_us=ended, wait_us=ended - began, attempts=CountingLock.attempts, **closed)
    time.sleep(linger_s)


if __name__ == "__main__":
    main()
