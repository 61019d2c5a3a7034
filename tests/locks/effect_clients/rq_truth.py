#!/usr/bin/env python3
"""RQ's scheduler locks, what no one process knows alone (record.sh, after merge_truth.py).

A scheduler's release is one DEL of every queue's lock key, held or not, and its heartbeat
re-expires the keys it took without looking at their value: DEL's count and EXPIRE's reply
say how many keys existed, not whose they were. rq_worker.py logs them as rq_del and
rq_expire; this replays the merged logs in the order the calls were sent, keeping who holds
each key from the SET NX replies (attempt lines), and writes for each
  rq_del: a released line per key the sender held, a force_released line (owner "") per
          key another held (the DEL took it from them);
  rq_expire: an extended line when the sender holds the key (another's key re-expired by a
          scheduler that lost it is no renewal of that scheduler's).
Each reply is checked against the replayed state (a SET NX refused on a free key, a count
the holders do not explain): a mismatch is printed to stderr and the recording rejected.
Stdin: merged truth lines; stdout: the same with the rq_* lines resolved (kept too).
"""
import json
import sys

lines = [json.loads(l) for l in sys.stdin if l.strip()]
holder = {}  # key -> (proc, owner)
out = []
mismatches = 0


def when(o):
    return o.get("sent_us", o["t_us"])


def mismatch(what, o):
    global mismatches
    mismatches += 1
    print("rq_truth.py: %s: %s" % (what, json.dumps(o)), file=sys.stderr)


for o in sorted(lines, key=when):
    ev = o["event"]
    out.append(o)
    if ev == "attempt" and o["lock"].startswith("rq:scheduler-lock:"):
        if (o.get("reply") == "OK") == (o["lock"] in holder):
            mismatch("SET NX reply against a key %s" % ("held" if o["lock"] in holder else "free"), o)
        if o.get("reply") == "OK":
            holder[o["lock"]] = (o["proc"], o["owner"])
    elif ev == "rq_expire":
        held_by = holder.get(o["lock"])
        if bool(o["reply"]) != (held_by is not None):
            mismatch("EXPIRE reply", o)
        if held_by == (o["proc"], o["owner"]):
            out.append(dict(t_us=o["t_us"], proc=o["proc"], event="extended", lock=o["lock"], owner=o["owner"],
                            reply=1, sent_us=o["sent_us"]))
    elif ev == "rq_del":
        existing = [k for k in o["keys"] if k in holder]
        if len(existing) != o["count"]:
            mismatch("DEL count", o)
        for key in existing:
            proc, owner = holder.pop(key)
            mine = proc == o["proc"] and owner == o["owner"]
            out.append(dict(t_us=o["t_us"], proc=o["proc"], event="released" if mine else "force_released", lock=key,
                            owner=owner if mine else "", reply=1, sent_us=o["sent_us"]))
if mismatches:
    sys.exit("rq_truth.py: %d replies the replayed state does not explain" % mismatches)
for o in sorted(out, key=lambda o: o["t_us"]):
    print(json.dumps(o, separators=(",", ":")))
