"""The "cluster" scenario's live resharding: moves the slot of one lock to another
master and back, the way `redis-cli --cluster reshard` does it step by step (CLUSTER
SETSLOT IMPORTING on the target, MIGRATING on the source, MIGRATE of the slot's keys,
SETSLOT NODE everywhere), pausing between the steps so that the clients meet ASK (the
lock's key not on the source any more, or not yet created), TRYAGAIN (a multi-key
unlock while the keys are split) and, after the move, MOVED (their slot map is stale).
Each step is logged as JSONL.

  /usr/bin/python3 cluster_reshard.py TRUTH.jsonl LOCK PAUSE_S PORT..."""
import sys
import time

import redis

from truth import TruthLog

truth_path, lock, pause_s, ports = sys.argv[1], sys.argv[2], float(sys.argv[3]), [int(p) for p in sys.argv[4:]]
log = TruthLog(truth_path, proc="reshard")
nodes = {p: redis.Redis(host="127.0.0.1", port=p, decode_responses=True) for p in ports}
ids = {p: r.execute_command("CLUSTER MYID") for p, r in nodes.items()}
slot = nodes[ports[0]].execute_command("CLUSTER KEYSLOT", lock)


def owner_port():
    for entry in nodes[ports[0]].execute_command("CLUSTER SLOTS"):
        if entry[0] <= slot <= entry[1]:
            return int(entry[2][1])
    raise RuntimeError(f"slot {slot} has no owner")


def move(source, target):
    log("migration_started", lock=lock, slot=slot, source=f"127.0.0.1:{source}", target=f"127.0.0.1:{target}")
    nodes[target].execute_command("CLUSTER SETSLOT", slot, "IMPORTING", ids[source])
    nodes[source].execute_command("CLUSTER SETSLOT", slot, "MIGRATING", ids[target])
    time.sleep(pause_s)  # keys on the source: a single-key call on a missing key gets ASK, an unlock TRYAGAIN
    keys = nodes[source].execute_command("CLUSTER GETKEYSINSLOT", slot, 100)
    if keys:
        nodes[source].execute_command("MIGRATE", "127.0.0.1", target, "", 0, 5000, "KEYS", *keys)
    log("keys_migrated", lock=lock, slot=slot, keys=keys, source=f"127.0.0.1:{source}", target=f"127.0.0.1:{target}")
    time.sleep(pause_s)  # keys on the target: calls to the source get ASK
    for p in [target, source] + [p for p in ports if p not in (source, target)]:
        nodes[p].execute_command("CLUSTER SETSLOT", slot, "NODE", ids[target])
    log("migration_done", lock=lock, slot=slot, source=f"127.0.0.1:{source}", target=f"127.0.0.1:{target}")


first = owner_port()
other = next(p for p in ports if p != first)
move(first, other)
time.sleep(2 * pause_s)
move(other, first)
