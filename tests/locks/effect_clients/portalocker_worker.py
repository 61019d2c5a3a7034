#!/usr/bin/python3
"""One process of the held-out portalocker recording (record.sh): portalocker 2.2.1's
RedisLock (Debian's python3-portalocker) on redis-py 4.3 (python3-redis), unchanged; never
used while building lockscope (the thirteenth held-out set). It contends with the other
processes on two locks and logs what it did itself, one JSON line per event, to stdout, as
the node workers do (truth_log.js):
  {"t_us", "proc", "event": "attempt"|"acquired"|"gave_up"|"released", "lock", "owner", ...}
(t_us when the line is written, after the reply came; sent_us, on calls, just before the
command was handed to redis-py.)

What the client does: no key at all. A lock is a pub/sub channel (its name); whoever is
subscribed to it holds it. acquire() asks PUBSUB NUMSUB of the channel; while it answers
more than 0 it pings the holder (a new pub/sub connection subscribes to a random response
channel, PUBLISHes a JSON ping on the lock's channel, waits up to 1 s for the holder's
thread to PUBLISH back, closes) and asks again every check_interval until its timeout,
then raises AlreadyLocked. On 0 it names its connection (CLIENT SETNAME <channel>-lock),
SUBSCRIBEs to the channel on a new pub/sub connection, and asks PUBSUB NUMSUB again: 1 is
the lock taken. release() stops the answering thread, UNSUBSCRIBEs and closes that
connection; a process that dies holding releases by its connection closing. There is no
lease and no renewal. The lock has no owner value on the wire: the owner logged here is
the holding pub/sub connection's local port (lockscope names a holder by its connection
where a script names no value).

  /usr/bin/python3 portalocker_worker.py PORT PROC [ROUNDS]
Needs python3-portalocker and python3-redis (Debian).
"""
import json
import os
import random
import sys
import time

import redis
from portalocker import exceptions
from portalocker.redis import RedisLock
from python_worker import connect_from_own_address

port = int(sys.argv[1])
proc = sys.argv[2]
rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 8


def now_us():
    return time.time_ns() // 1000


def log(**o):
    line = {"t_us": now_us(), "proc": proc}
    line.update(o)
    sys.stdout.write(json.dumps(line, separators=(",", ":")) + "\n")
    sys.stdout.flush()


class LoggedRedisLock(RedisLock):
    """portalocker's RedisLock with its PUBSUB NUMSUB calls logged as attempts: a count above
    0 before it subscribed is a refusal; the count after its SUBSCRIBE, 1, is the attempt
    that took the lock, sent when that attempt's first NUMSUB (answered 0) was."""

    current = None  # the lock acquiring now (one at a time per process)

    def acquire(self, *args, **kwargs):
        LoggedRedisLock.current = self
        return super().acquire(*args, **kwargs)

    def get_connection(self):
        connection = super().get_connection()
        if not getattr(connection, "_logged", False):
            numsub = connection.pubsub_numsub

            def logged_numsub(*channels):
                lock = LoggedRedisLock.current
                sent = now_us()
                answer = numsub(*channels)
                count = answer[0][1]
                if lock.pubsub is None:
                    if count:
                        log(event="attempt", lock=lock.channel, owner="", reply=None, sent_us=sent)
                    else:
                        lock._attempt_sent = sent
                elif count == 1:
                    lock.conn_port = lock.pubsub.connection._sock.getsockname()[1]
                    log(event="attempt", lock=lock.channel, owner="", conn_port=lock.conn_port, reply="OK", sent_us=lock._attempt_sent)
                    log(event="acquired", lock=lock.channel, owner="", conn_port=lock.conn_port)
                else:  # another subscribed at the same moment: portalocker lets go and tries again
                    log(event="attempt", lock=lock.channel, owner="", reply=None, sent_us=lock._attempt_sent)
                return answer

            connection.pubsub_numsub = logged_numsub
            connection._logged = True
        return connection

    def release(self, die=False):
        sent = None
        if self.thread:
            self.thread.stop()
            self.thread.join()
            # The hold ended on the wire as the answering thread ended: redis-py's
            # PubSubWorkerThread closes its pub/sub connection (FIN) as the last thing its
            # loop does, which wakes only every sleep time after stop(); the UNSUBSCRIBE
            # below then finds no connection to send on. So the release is dated here.
            sent = now_us()
            self.thread = None
            time.sleep(0.01)
        if self.pubsub and self.conn_port is None:  # a racing subscription let go: no hold
            self.pubsub.unsubscribe(self.channel)
            self.pubsub.close()
            self.pubsub = None
        if self.pubsub:
            if sent is None:
                sent = now_us()
            if die:  # the process goes without a word: its pub/sub connection closes
                log(event="released", lock=self.channel, owner="", conn_port=self.conn_port, sent_us=sent, how="connection_closed")
                os._exit(0)
            self.pubsub.unsubscribe(self.channel)
            self.pubsub.close()
            self.pubsub = None
            log(event="released", lock=self.channel, owner="", conn_port=self.conn_port, sent_us=sent)
            self.conn_port = None


# Each process connects from a loopback address of its own (p1 from 127.0.0.11, ...), as
# processes on separate hosts or pods do: the client host is all that tells such a
# client's processes apart on the wire.
# (SAME_HOST=1: all from 127.0.0.1, as processes on one host.)
connect_from_own_address(proc)
connection = redis.Redis(host="127.0.0.1", port=port, health_check_interval=10)
rng = random.Random(hash(proc) & 0xffff)
time.sleep(0.05 * int(proc[-1]) if proc[-1].isdigit() else 0)
for i in range(rounds):
    name = "orders" if i % 2 == 0 else "stock"
    # orders waits up to 3 s, asking every 250 ms; stock up to 1 s every 100 ms, so some
    # give up. One try in six gives up at the first refusal (fail_when_locked).
    once = i % 6 == 5
    timeout, interval = (3.0, 0.25) if name == "orders" else (1.0, 0.1)
    lock = LoggedRedisLock(name, connection=connection, timeout=timeout, check_interval=interval,
                           fail_when_locked=once)
    lock.conn_port = None
    started = now_us()
    try:
        lock.acquire()
    except exceptions.AlreadyLocked:
        log(event="gave_up", lock=name, owner="", waited_ms=(now_us() - started) / 1000)
        time.sleep(rng.uniform(0.05, 0.2))
        continue
    # Hold 150-700 ms (stock's waiters give up past 1 s; orders' wait through).
    time.sleep(rng.uniform(0.15, 0.7) if name == "orders" else rng.uniform(0.2, 1.3))
    # The last round of the first process dies holding: its connection's close frees the lock.
    lock.release(die=(i == rounds - 1 and proc.endswith("1")))
    time.sleep(rng.uniform(0.02, 0.15))
