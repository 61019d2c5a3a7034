"""The seed's 004 anti-pattern with redis-py (python3-redis): locks taken with
SET NX PX and released with a plain DEL, which carries no owner.

  /usr/bin/python3 del_other.py HOST PORT TRUTH.jsonl

Three connections of one process (c1, c2, c3), each its own single-connection client:
  job:report  c1 SET a NX PX 300; c2 SET b NX PX 5000 at +500 ms (c1's lease ran out);
              c3 starts polling SET w NX PX 2000 every 250 ms; c1 (still believing it
              holds) DELs: that deletes b's lock; c3's next poll gets it, the lock having
              sat free while c3 slept; c2 finds w instead of b and does not DEL;
              c3 releases its own lock with a plain DEL.
  job:cleanup c2 holds b2 (PX 5000), c1 polls every 200 ms; c2 releases with a plain DEL
              (the right owner, but unchecked); c1's next poll gets it; c1 DELs.
The script knows who holds what because it orchestrates it; each line says so."""
import sys
import threading
import time
import uuid

import redis

from truth import TruthLog, endpoint

host, port, truth_path = sys.argv[1], int(sys.argv[2]), sys.argv[3]
server = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
log = TruthLog(truth_path, proc="p1", server=server)
clients = {name: redis.Redis(host=host, port=port, single_connection_client=True) for name in ("c1", "c2", "c3")}
for c in clients.values():
    c.ping()
log("connections", conns={name: endpoint(c) for name, c in clients.items()})


def token():
    return uuid.uuid1().hex


def take(conn, key, value, px):
    sent = int(time.time_ns() // 1000)
    ok = clients[conn].set(key, value, nx=True, px=px)
    log("acquired" if ok else "attempt_failed", lock=key, owner=value, conn=endpoint(clients[conn]), client=conn, sent_us=sent, lease_ms=px)
    return bool(ok)


def poll(conn, key, value, px, every_s):
    """Polls like a naive client: a failed SET NX, then sleep."""
    first_failed = None
    while True:
        sent_us = time.time_ns() // 1000
        if clients[conn].set(key, value, nx=True, px=px):
            waited = (time.time_ns() // 1000 - first_failed) / 1000 if first_failed else 0
            log("acquired", lock=key, owner=value, conn=endpoint(clients[conn]), client=conn, sent_us=sent_us, lease_ms=px,
                contended=first_failed is not None, waited_ms=waited, woken_by="poll")
            return
        if first_failed is None:
            first_failed = time.time_ns() // 1000
        log("attempt_failed", lock=key, owner=value, conn=endpoint(clients[conn]), client=conn, sent_us=sent_us, sleep_ms=every_s * 1000)
        time.sleep(every_s)


def plain_del(conn, key, owner, holder):
    """DEL as a release; holder is whose lock the key really held at that moment."""
    sent = time.time_ns() // 1000
    deleted = clients[conn].delete(key)
    log("released", lock=key, owner=owner, conn=endpoint(clients[conn]), client=conn, sent_us=sent, deleted=deleted,
        method="DEL", deleted_owner=holder, released_other_owner=holder is not None and holder != owner)


# job:report
a, b, w = token(), token(), token()
take("c1", "job:report", a, 300)
time.sleep(0.5)
log("lease_expired", lock="job:report", owner=a, client="c1", note="c1's 300 ms lease ran out while c1 still works")
take("c2", "job:report", b, 5000)
poller = threading.Thread(target=poll, args=("c3", "job:report", w, 2000, 0.25))
poller.start()
time.sleep(0.12)
plain_del("c1", "job:report", a, holder=b)
poller.join()
time.sleep(0.3)
current = clients["c2"].get("job:report")
log("lost_lock", lock="job:report", owner=b, conn=endpoint(clients["c2"]), client="c2", found=current.decode() if current else None,
    note="c2 checks its lock before releasing and finds another value: no DEL")
time.sleep(0.2)
plain_del("c3", "job:report", w, holder=w)

# job:cleanup
time.sleep(0.3)
b2, a2 = token(), token()
take("c2", "job:cleanup", b2, 5000)
poller = threading.Thread(target=poll, args=("c1", "job:cleanup", a2, 5000, 0.2))
poller.start()
time.sleep(0.45)
plain_del("c2", "job:cleanup", b2, holder=b2)
poller.join()
time.sleep(0.15)
plain_del("c1", "job:cleanup", a2, holder=a2)
time.sleep(0.2)
log("stopped")
