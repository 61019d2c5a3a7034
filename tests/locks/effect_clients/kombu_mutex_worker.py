#!/usr/bin/python3
"""One process of the held-out kombu recording (record.sh): kombu 5.2's Redis transport
(Debian's python3-kombu) on redis-py 4.3 (python3-redis), unchanged; never used while building
lockscope (the fifteenth held-out set). It logs what its mutexes did itself, one JSON line per
event, to stdout, as the other workers do (truth_log.js):
  {"t_us", "proc", "event": "attempt"|"acquired"|"gave_up"|"released"|"release_refused"|
   "expired", "lock", "owner", ...}
(t_us when the line is written, after the reply came; sent_us, on calls, just before the
command was handed to redis-py.)

What the client does: `kombu.transport.redis.Mutex(client, name, expire)` is a context manager
over redis-py's `client.lock(name, timeout=expire)`: one `acquire(blocking=False)` (a new uuid1
token, one `SET name token NX PX expire*1000`), MutexHeld when refused, and at the end of the
block `release()` (redis-py's release script by EVALSHA: NOSCRIPT, SCRIPT LOAD, EVALSHA the first
time), a refused release (the lease ran out) swallowed. Celery's workers take it as
`unacked_mutex` around restoring unacked messages (`QoS.restore_visible`): kombu itself tries it
once from `drain_events` when a BRPOP times out (every tenth time), and this worker's own loop
does the same restore with retries on MutexHeld every 80-120 ms until it gets it or gives up
after 12 tries. A second name, `cleanup_mutex`, is taken by a like loop (8 tries) around a few
ms of work on the queue, one hold in six past its 1 s lease (its release refused). Beside them
the whole time: a kombu Connection on the same server, a producer publishing to a direct
exchange (LPUSH, the exchange's binding set) and a consumer draining it (BRPOP on its own
connection, each delivery kept in the unacked hash and sorted set until its ack, one in four
left unacked past the 1 s visibility timeout so the restores move it back).

  /usr/bin/python3 kombu_mutex_worker.py PORT PROC [ROUNDS]
Needs python3-kombu and python3-redis (Debian).
"""
import random
import socket
import sys
import threading
import time

from python_worker import connect_from_own_address, logger, now_us, write_line
from redis import exceptions as redis_exceptions
from redis.lock import Lock

port = int(sys.argv[1])
proc = sys.argv[2]
rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 8
UNACKED_EXPIRE_S = 2  # unacked_mutex_expire: that mutex's PX (kombu's default is 300 s)
CLEANUP_EXPIRE_S = 1
in_retry_loop = threading.local()
log = logger(proc)


def text(token):
    return token.decode() if isinstance(token, bytes) else str(token)


def lock_name(lock):
    return text(lock.name)


last_token = {}  # lock name -> the token of this process's latest try
held = {}  # lock name -> (token, when its lease began (us, the SET's send), lease (s))
_do_acquire, _acquire, _do_release = Lock.do_acquire, Lock.acquire, Lock.do_release


def do_acquire(self, token):
    sent = now_us()
    ok = _do_acquire(self, token)
    last_token[lock_name(self)] = token
    log(event="attempt", lock=lock_name(self), owner=text(token), reply="OK" if ok else None, sent_us=sent)
    if ok:
        held[lock_name(self)] = (text(token), sent, self.timeout)
        log(event="acquired", lock=lock_name(self), owner=text(token))
    return ok


def acquire(self, *args, **kwargs):
    ok = _acquire(self, *args, **kwargs)
    if not ok and not getattr(in_retry_loop, "on", False):
        # kombu's own single try (restore_visible from drain_events): refused is given up.
        log(event="gave_up", lock=lock_name(self), owner=text(last_token[lock_name(self)]))
    return ok


def do_release(self, expected_token):
    sent = now_us()
    name = lock_name(self)
    try:
        _do_release(self, expected_token)
    except redis_exceptions.LockNotOwnedError:
        token, since, lease = held.pop(name, (text(expected_token), sent, self.timeout))
        log(event="release_refused", lock=name, owner=token, reply=0, sent_us=sent)
        # Refused: its lease ran out first (this worker holds one cleanup in six past it).
        write_line({"t_us": since + int(lease * 1_000_000), "proc": proc, "event": "expired", "lock": name,
                    "owner": token})
        raise
    held.pop(name, None)
    log(event="released", lock=name, owner=text(expected_token), reply=1, sent_us=sent)


Lock.do_acquire, Lock.acquire, Lock.do_release = do_acquire, acquire, do_release

connect_from_own_address(proc)
import kombu  # noqa: E402  (after the patches: its connections bind the own address)
from kombu.transport.redis import Mutex, MutexHeld  # noqa: E402

rng = random.Random(hash(proc) & 0xffff)
conn = kombu.Connection("redis://127.0.0.1:%d//" % port, transport_options={
    "visibility_timeout": 1, "unacked_mutex_expire": UNACKED_EXPIRE_S, "polling_interval": 0.05})
channel = conn.default_channel
exchange = kombu.Exchange("tasks", type="direct", durable=False)
queue = kombu.Queue("tasks", exchange=exchange, routing_key="tasks", durable=False)
producer = conn.Producer(serializer="json")
delivered = []


def on_message(body, message):
    # One delivery in four is left unacked (a worker that died with it): restored later.
    if rng.random() < 0.75:
        message.ack()
    delivered.append(body)


consumer = conn.Consumer(queue, callbacks=[on_message], accept=["json"])
consumer.consume()


def drain(seconds):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            conn.drain_events(timeout=min(0.2, max(0.01, deadline - time.monotonic())))
        except socket.timeout:
            pass


def with_retries(name, expire, tries, work):
    """Takes the mutex as a Celery-style loop does: one try, MutexHeld, sleep, try again."""
    in_retry_loop.on = True
    try:
        for _ in range(tries):
            try:
                with channel.conn_or_acquire() as client, Mutex(client, name, expire):
                    work(client)
                return True
            except MutexHeld:
                time.sleep(rng.uniform(0.08, 0.12))
        log(event="gave_up", lock=name, owner=text(last_token.get(name, "")))
        return False
    finally:
        in_retry_loop.on = False


qos = channel.qos
time.sleep(0.05 * int(proc[-1]) if proc[-1].isdigit() else 0)
for i in range(rounds):
    for _ in range(rng.randint(2, 5)):
        producer.publish({"proc": proc, "round": i}, exchange=exchange, routing_key="tasks", declare=[queue])
    drain(rng.uniform(0.1, 0.4))
    if i % 2 == 0:
        def restore(client):
            ceil = time.time() - qos.visibility_timeout
            visible = client.zrevrangebyscore(qos.unacked_index_key, ceil, 0, start=0, num=10, withscores=True)
            for tag, _score in visible or []:
                qos.restore_by_tag(tag, client)
            time.sleep(rng.uniform(0.1, 0.6))
        with_retries(qos.unacked_mutex_key, UNACKED_EXPIRE_S, 12, restore)
    else:
        long_hold = i % 6 == 3

        def cleanup(client):
            client.llen("tasks")
            time.sleep(rng.uniform(1.2, 1.5) if long_hold else rng.uniform(0.05, 0.4))
        with_retries("cleanup_mutex", CLEANUP_EXPIRE_S, 8, cleanup)
    time.sleep(rng.uniform(0.02, 0.15))
drain(0.3)
consumer.cancel()
conn.release()
