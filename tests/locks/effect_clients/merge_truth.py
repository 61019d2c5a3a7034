#!/usr/bin/env python3
"""Merges the processes' truth logs (stdin: their lines) into one, by time (record.sh).

What no one process knows alone: a holder that finds its key gone after its lease ran out
logs it as expired, but when another process force-released that key (a bare DEL, logged
as force_released) before the lease ran out, the hold ended there, not by expiry. Such an
expired line is dropped: the force_released line stands for the hold's end.
"""
import json
import sys

lines = sorted((json.loads(l) for l in sys.stdin if l.strip()), key=lambda o: o["t_us"])
forced = [(o["lock"], o.get("sent_us", o["t_us"])) for o in lines if o["event"] == "force_released"]
acquired = {}  # (lock, owner) -> when its acquisition was logged
out = []
for o in lines:
    if o["event"] == "acquired":
        acquired[(o["lock"], o["owner"])] = o["t_us"]
    if o["event"] == "expired":
        began = acquired.get((o["lock"], o["owner"]), 0)
        if any(lock == o["lock"] and began <= t <= o["t_us"] for lock, t in forced):
            continue
    out.append(o)
for o in out:
    print(json.dumps(o, separators=(",", ":")))
