"""One process of the "cluster" scenario: redis-py 4.3's RedisCluster (Debian's
python3-redis) running Redisson's lock protocol on a 3-master Redis Cluster the way
Redisson 3.2x does in cluster mode: the one-branch acquire script, the latched unlock
script with the publish command passed as ARGV[4] = SPUBLISH (then a DEL of the latch
key), and waits on sharded pub/sub: SSUBSCRIBE redisson_lock__channel:{name} on the
master that owns the lock's slot, retry once subscribed, then wait for the `smessage`
(or the holder's TTL) and retry. RedisCluster routes every script by its keys' slot and
follows MOVED (refreshing its map), ASK (ASKING + the call on the importing node) and
TRYAGAIN itself; this script does not see them. When a slot moves, the node drops its
shard subscribers (a `sunsubscribe` push): the waiter subscribes again on the new owner.
Each call is logged as JSONL (see ../README.md).

  /usr/bin/python3 cluster_worker.py PROC TRUTH.jsonl CONTROL_DIR PORT [LOCK...]"""
import os
import random
import sys
import time
import uuid

import redis
from redis.cluster import RedisCluster
from redis.exceptions import RedisError, ResponseError

from truth import TruthLog, now_us

proc, truth_path, control, port = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
locks = sys.argv[5:] or ["orders", "stock"]
log = TruthLog(truth_path, proc=proc)
cluster = RedisCluster(host="127.0.0.1", port=port)
client_id = str(uuid.uuid4())
owner = f"{client_id}:1"
LEASE_MS = 3000

# Redisson's scripts, as lockscope's lock_patterns.cpp has them (known_scripts()).
ACQUIRE = ("if ((redis.call('exists', KEYS[1]) == 0) or (redis.call('hexists', KEYS[1], ARGV[2]) == 1)) then "
           "redis.call('hincrby', KEYS[1], ARGV[2], 1); redis.call('pexpire', KEYS[1], ARGV[1]); return nil; end; "
           "return redis.call('pttl', KEYS[1]);")
UNLOCK = ("local val = redis.call('get', KEYS[3]); if val ~= false then return tonumber(val);end; "
          "if (redis.call('hexists', KEYS[1], ARGV[3]) == 0) then return nil;end; "
          "local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1); if (counter > 0) then "
          "redis.call('pexpire', KEYS[1], ARGV[2]); redis.call('set', KEYS[3], 0, 'px', ARGV[5]); return 0; "
          "else redis.call('del', KEYS[1]); redis.call(ARGV[4], KEYS[2], ARGV[1]); "
          "redis.call('set', KEYS[3], 1, 'px', ARGV[5]); return 1; end; ")


def channel(name):
    return f"redisson_lock__channel:{{{name}}}"


def node_of(key):
    node = cluster.get_node_from_key(key)
    return f"{node.host}:{node.port}"


class Subscriber:
    """The process's subscriber connection to one master (Redisson keeps one per node)."""

    def __init__(self):
        self.node = None
        self.client = None
        self.channel = None

    def subscribe(self, name):
        node = node_of(channel(name))
        if node != self.node:
            self.close()
            host, p = node.rsplit(":", 1)
            self.client = redis.Redis(host=host, port=int(p), single_connection_client=True)
            self.node = node
        self.channel = channel(name)
        sent = now_us()
        self.client.connection.send_command("SSUBSCRIBE", self.channel)
        reply = self.client.connection.read_response()  # [b'ssubscribe', channel, count] or a MOVED error
        log("subscribed", lock=name, owner=owner, channel=self.channel, node=node, sent_us=sent, reply=str(reply))

    def unsubscribe(self, name):
        if self.client is None or self.channel is None:
            return
        try:
            self.client.connection.send_command("SUNSUBSCRIBE", self.channel)
            self.client.connection.read_response()
            log("unsubscribed", lock=name, owner=owner, channel=self.channel, node=self.node)
        except RedisError as e:
            log("unsubscribe_failed", lock=name, owner=owner, error=str(e))
            self.close()
        self.channel = None

    def wait(self, name, timeout_s):
        """Until a message (True), the timeout (False) or the server dropping the channel (None)."""
        deadline = time.monotonic() + timeout_s
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or not self.client.connection.can_read(timeout=left):
                return False
            push = self.client.connection.read_response()
            kind = push[0].decode() if isinstance(push, list) and push else ""
            if kind == "smessage":
                log("woken", lock=name, owner=owner, channel=push[1].decode(), message=push[2].decode(), node=self.node)
                return True
            if kind == "sunsubscribe":
                log("channel_dropped", lock=name, owner=owner, channel=push[1].decode(), node=self.node)
                self.channel = None
                return None

    def close(self):
        if self.client is not None:
            self.client.close()
        self.client = self.node = self.channel = None


subscriber = Subscriber()


def try_acquire(name):
    while True:
        sent = now_us()
        try:
            return sent, cluster.eval(ACQUIRE, 1, name, LEASE_MS, owner)
        except RedisError as e:
            log("acquire_retry", lock=name, owner=owner, sent_us=sent, error=str(e))
            time.sleep(0.05)


def acquire(name, give_up_s=6.0):
    start = now_us()
    first_failed = None
    subscribed = False
    woken_by = None
    while True:
        sent, ttl = try_acquire(name)
        if ttl is None:
            contended = first_failed is not None
            log("acquired", lock=name, owner=owner, sent_us=sent, node=node_of(name), lease_ms=LEASE_MS, contended=contended,
                waited_ms=(now_us() - first_failed) / 1000 if contended else 0, woken_by=woken_by)
            if subscribed:
                subscriber.unsubscribe(name)
            return True
        log("attempt_failed", lock=name, owner=owner, sent_us=sent, node=node_of(name), ttl_ms=ttl)
        if first_failed is None:
            first_failed = sent
        if now_us() - start > give_up_s * 1e6:
            log("gave_up", lock=name, owner=owner, waited_ms=(now_us() - first_failed) / 1000)
            if subscribed:
                subscriber.unsubscribe(name)
            return False
        if not subscribed:
            try:
                subscriber.subscribe(name)
                subscribed = True
                woken_by = "subscribed"
                continue  # Redisson retries once the subscription is confirmed
            except ResponseError as e:  # MOVED: the slot map is stale; RedisCluster refreshes it on its next call
                log("subscribe_failed", lock=name, owner=owner, error=str(e))
                subscriber.close()
                time.sleep(0.05)
                continue
        got = subscriber.wait(name, min(ttl, LEASE_MS) / 1000)
        if got is None:
            subscribed = False
            cluster.nodes_manager.initialize()
            woken_by = "resubscribed"
        else:
            woken_by = "message" if got else "timeout"


def release(name, acquired_us):
    latch = f"redisson_unlock_latch:{{{name}}}:{uuid.uuid4().hex}"
    for attempt in range(80):  # TRYAGAIN while the slot migrates: RedisCluster gives up after a few tries
        sent = now_us()
        try:
            result = cluster.eval(UNLOCK, 3, name, channel(name), latch, 0, LEASE_MS, owner, "SPUBLISH", 20000)
        except RedisError as e:  # TRYAGAIN past RedisCluster's own retries ("TTL exhausted")
            log("unlock_retry", lock=name, owner=owner, sent_us=sent, error=str(e), attempt=attempt)
            time.sleep(0.05)
            continue
        log("released" if result == 1 else "release_failed", lock=name, owner=owner, sent_us=sent, node=node_of(name),
            result=result, held_ms=(now_us() - acquired_us) / 1000, attempts=attempt + 1)
        cluster.delete(latch)
        return
    log("release_gave_up", lock=name, owner=owner)


def connections():
    ends = []
    for node in cluster.get_nodes():
        pool = node.redis_connection.connection_pool
        for c in list(pool._available_connections) + list(pool._in_use_connections):
            if c._sock is not None:
                host, p = c._sock.getsockname()[:2]
                ends.append(f"{host}:{p}")
    return ends


for name in locks:  # connect to every master before the capture may start
    cluster.eval("return 1", 1, name)
log("connections", owner=owner, client_id=client_id, conns=connections())
open(os.path.join(control, f"{proc}.ready"), "w").close()
while not os.path.exists(os.path.join(control, "go")):
    time.sleep(0.02)
random.seed(hash(proc))
while not os.path.exists(os.path.join(control, "stop")):
    name = random.choice(locks)
    if acquire(name):
        t = now_us()
        time.sleep(random.uniform(0.08, 0.35))
        release(name, t)
    time.sleep(random.uniform(0.0, 0.15))
subscriber.close()
log("connections", owner=owner, client_id=client_id, conns=connections())
