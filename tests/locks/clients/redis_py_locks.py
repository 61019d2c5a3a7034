#!/usr/bin/python3
# A real redis-py (Debian python3-redis) client for test_real_clients.cpp, logging what it
# did as JSON lines (its truth): `load PORT` loads the scripts (before the recording, so
# the capture holds only EVALSHA of them), `run PORT` does the traffic.
#   job:py     two redis.lock.Lock owners: A acquires, B polls and gives up, A extends
#              (adds time) and reacquires (resets it), releases; B acquires, releases.
#              Their scripts are redis-py's with a comment added: SHA1s no table knows.
#   job:del    seed 004: c1 SET a NX PX 300, c2 SET b NX PX 5000 500 ms later, c1 DEL
#              (removes b's lock), one connection per client.
import json
import sys
import time

import redis
from redis.lock import Lock


class VariantLock(Lock):
    LUA_RELEASE_SCRIPT = Lock.LUA_RELEASE_SCRIPT + "-- lockscope test variant\n"
    LUA_EXTEND_SCRIPT = Lock.LUA_EXTEND_SCRIPT + "-- lockscope test variant\n"
    LUA_REACQUIRE_SCRIPT = Lock.LUA_REACQUIRE_SCRIPT + "-- lockscope test variant\n"


def log(event, **fields):
    fields["event"] = event
    fields["t_us"] = int(time.time() * 1e6)
    print(json.dumps(fields), flush=True)


def main():
    mode, port = sys.argv[1], int(sys.argv[2])
    r = redis.Redis(port=port, single_connection_client=True)
    if mode == "load":
        for text in (VariantLock.LUA_RELEASE_SCRIPT, VariantLock.LUA_EXTEND_SCRIPT, VariantLock.LUA_REACQUIRE_SCRIPT):
            r.script_load(text)
        return
    a = VariantLock(r, "job:py", timeout=2, sleep=0.05)
    rb = redis.Redis(port=port, single_connection_client=True)
    b = VariantLock(rb, "job:py", timeout=2, sleep=0.05)
    assert a.acquire(blocking=False)
    log("acquired", owner=a.local.token.decode())
    got = b.acquire(blocking_timeout=0.3)
    assert not got
    log("gave_up", owner="")
    a.extend(1)
    log("extended", owner=a.local.token.decode())
    a.reacquire()
    log("extended", owner=a.local.token.decode())
    token = a.local.token.decode()
    a.release()
    log("released", owner=token)
    assert b.acquire(blocking=False)
    log("acquired", owner=b.local.token.decode())
    token = b.local.token.decode()
    b.release()
    log("released", owner=token)

    c1 = redis.Redis(port=port, single_connection_client=True)
    c2 = redis.Redis(port=port, single_connection_client=True)
    assert c1.set("job:del", "a", nx=True, px=300)
    log("acquired", owner="a")
    time.sleep(0.5)
    assert c2.set("job:del", "b", nx=True, px=5000)
    log("acquired", owner="b")
    deleted = c1.delete("job:del")
    log("released", owner="a", deleted=deleted, deleted_owner="b")


main()
