#!/usr/bin/python3
"""One process of the keyspace-notification recordings (record.sh keyspace_key,
keyspace_event): a lock whose waiters wait on Redis keyspace notifications, not on a
channel the lock's client publishes to, nor by polling. No packaged client doing this was
found (docs/reference/clients.md, "Waiters woken by keyspace notifications"), so this worker
is written on Debian's python3-redis (redis-py 4.3) as such a client would be; it was used while building lockscope's reading of keyspace
notifications, so it is not held out. It logs what its locks did itself, one JSON line per
event, to stdout, as the other workers do (python_worker.py):
  {"t_us", "proc", "event": "attempt"|"acquired"|"gave_up"|"released"|"expired"|"woken",
   "lock", "owner", ...}
(t_us when the line is written, after the reply came; sent_us, on calls, just before the
command was handed to redis-py; `woken`: a notification for the awaited key was read, with
the channel and payload it came as.)

The lock: `SET key owner NX PX 400`, released by a Lua compare-and-delete (redis-py's
register_script: EVALSHA, EVAL after NOSCRIPT); the connection SELECTs db 2, so the
notifications are `__keyspace@2__:…` / `__keyevent@2__:…`. The server is started with
`notify-keyspace-events KEA` (every event: `set` and `expire` notifications too, which
wake no waiter) by record.sh before the capture: an operator's
setting, not in the capture. The waits (WAIT in the environment):
- `key`: after a refused attempt, SUBSCRIBE `__keyspace@2__:<lock>` on the process's pub/sub
  connection, attempt again (the key may have gone meanwhile), then wait for a `del` or
  `expired` message on it and attempt again; UNSUBSCRIBE once acquired or given up.
- `event`: one SUBSCRIBE of `__keyevent@2__:del` and `__keyevent@2__:expired` at start-up,
  kept for the process's life (its pub/sub connection is opened then); a waiter attempts
  again when a message whose payload is its key arrives.
Either way a waiter also attempts again after 500 ms without a notification (a lost one).

The rounds: 3 processes, each round a lock (`lock:orders` or `lock:stock`), a fresh owner
value per wait; one wait in five gives up after 150 ms (gave_up), else after 5 s; held
20-250 ms. Holders killed with SIGKILL: each life of the loop runs in a child process
(python_worker.run_lives); p1's and p3's children are killed once mid-hold, the key expires
its lease after its acquiring call (logged by the parent as expired) and its `expired`
notification wakes the waiters; a new child goes on over new connections.

  WAIT=key|event /usr/bin/python3 keyspace_worker.py PORT PROC [ROUNDS]
Needs python3-redis (Debian) and redis-server.
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
LEASE_MS = 400
DB = 2
WAIT = os.environ.get("WAIT", "key")
log = logger(proc)

RELEASE = """
if redis.call('get', KEYS[1]) == ARGV[1] then
  return redis.call('del', KEYS[1])
end
return 0
"""

if len(sys.argv) <= 4 or sys.argv[4] != "--life":
    run_lives(os.path.abspath(__file__), port, proc, rounds, {"p1": rounds // 3, "p3": (2 * rounds) // 3}.get(proc, -1),
              LEASE_MS * 1000)
    sys.exit(0)

start, kill_round = int(sys.argv[5]), int(sys.argv[6])
connect_from_own_address(proc)
import redis  # noqa: E402  (after the patch: its connections bind the own address)

r = redis.Redis(host="127.0.0.1", port=port, db=DB)
release = r.register_script(RELEASE)
pubsub = r.pubsub(ignore_subscribe_messages=True)
WAKE_EVENTS = (b"del", b"expired")
if WAIT == "event":
    pubsub.subscribe("__keyevent@%d__:del" % DB, "__keyevent@%d__:expired" % DB)
    pubsub.get_message(timeout=1.0)  # its confirmations
    pubsub.get_message(timeout=1.0)


def wakes(message, lock):
    """Whether a pub/sub message is a release or expiry of `lock`."""
    if message is None or message.get("type") not in ("message", "pmessage"):
        return False
    channel, data = message["channel"], message["data"]
    if WAIT == "event":
        return data == lock.encode()
    return channel == ("__keyspace@%d__:%s" % (DB, lock)).encode() and data in WAKE_EVENTS


def wait_for_wake(lock, owner, until):
    """Reads the pub/sub connection until a notification for `lock`, at most 500 ms (a lost
    notification) or until `until`."""
    deadline = min(until, time.monotonic() + 0.5)
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return
        m = pubsub.get_message(timeout=left)
        if wakes(m, lock):
            log(event="woken", lock=lock, owner=owner, channel=m["channel"].decode(), payload=m["data"].decode())
            return


def attempt(lock, owner):
    # What came before this attempt tells nothing of the hold that may refuse it (the
    # process's own release, another lock's, an earlier holder's): read and dropped.
    while pubsub.subscribed and pubsub.get_message(timeout=0.0) is not None:
        pass
    sent = now_us()
    ok = r.set(lock, owner, nx=True, px=LEASE_MS)
    log(event="attempt", lock=lock, owner=owner, reply="OK" if ok else None, sent_us=sent)
    return ok, sent


rng = random.Random()
for i in range(start, rounds):
    lock = "lock:orders" if rng.random() < 0.6 else "lock:stock"
    owner = uuid.uuid4().hex
    patience_s = 0.15 if rng.random() < 0.2 else 5.0
    began = time.monotonic()
    subscribed = False
    ok, sent = attempt(lock, owner)
    while not ok:
        if time.monotonic() - began > patience_s:
            break
        if WAIT == "key" and not subscribed:
            pubsub.subscribe("__keyspace@%d__:%s" % (DB, lock))
            subscribed = True
            ok, sent = attempt(lock, owner)  # the key may have gone before the subscription
            continue
        wait_for_wake(lock, owner, began + patience_s + 0.001)
        ok, sent = attempt(lock, owner)
    if subscribed:
        pubsub.unsubscribe("__keyspace@%d__:%s" % (DB, lock))
        while pubsub.get_message(timeout=0.0) is not None:  # its confirmation, and what came before it
            pass
    if not ok:
        log(event="gave_up", lock=lock, owner=owner)
        time.sleep(rng.uniform(0.02, 0.15))
        continue
    log(event="acquired", lock=lock, owner=owner)
    if i == kill_round:
        write_line({"event": "kill_me", "round": i, "lock": lock, "owner": owner, "sent_us": sent})
        time.sleep(30)
    time.sleep(rng.uniform(0.02, 0.25))
    sent = now_us()
    reply = release(keys=[lock], args=[owner])
    log(event="released", lock=lock, owner=owner, reply=1 if reply == 1 else 0, sent_us=sent)
    time.sleep(rng.uniform(0.02, 0.15))
