#!/usr/bin/python3
"""`lockscope analyze --format trace` on every bundled capture, checked two ways:

1. against tests/trace/trace_event_format.schema.json (written from Google's Trace
   Event Format document) with Debian's python3-jsonschema, an independent validator;
2. against `--format jsonl` of the same capture: every JSONL event is in the trace
   (as an instant's args, or an X span's begin/end), X holds = acquisitions and ended
   holds, instants per renewal / notification / anomaly kind, pid/tid mapping
   consistent with the metadata and the owners, X spans on a thread properly nested
   (the viewers draw a thread's slices as a stack), ts/dur equal to the JSONL times.

Then it breaks good traces on purpose and checks each break is caught, so the checks
can fail.

usage: check_trace.py LOCKSCOPE SOURCE_DIR WORK_DIR
"""
import collections
import copy
import decimal
import glob
import json
import os
import subprocess
import sys

import jsonschema

HOLD_CLOSERS = {"released", "expired", "force_released"}
INSTANT_EVENTS = {"renewed", "renew_failed", "unlock_rejected", "subscribed", "notified", "unsubscribed"}


class Bad(Exception):
    pass


def us(seconds):
    """JSONL ts (seconds.micros, read as a Decimal) → integer microseconds."""
    return int(seconds * 1_000_000)


def canon(obj):
    return json.dumps(obj, sort_keys=True, default=str)


def load(text):
    return json.loads(text, parse_float=decimal.Decimal)


def check_semantics(trace, jsonl):
    events = trace["traceEvents"]
    process_name, thread_name, thread_pid = {}, {}, {}
    for e in events:
        if e["ph"] != "M":
            continue
        if e["name"] == "process_name":
            if e["pid"] in process_name:
                raise Bad(f"pid {e['pid']} named twice")
            process_name[e["pid"]] = e["args"]["name"]
        elif e["name"] == "thread_name":
            if e["tid"] in thread_name:
                raise Bad(f"tid {e['tid']} named twice")
            thread_name[e["tid"]] = e["args"]["name"]
            thread_pid[e["tid"]] = e["pid"]
    body = [e for e in events if e["ph"] != "M"]
    if {e["ph"] for e in body} - {"X", "i"}:
        raise Bad(f"unexpected phases {sorted({e['ph'] for e in body})}")

    # pid/tid mapping: every event's process and thread named, a tid in one process only,
    # the thread named after the owner and the process after the lock.
    for e in body:
        if e["pid"] not in process_name or e["tid"] not in thread_name:
            raise Bad(f"event on an unnamed process/thread: {e}")
        if thread_pid[e["tid"]] != e["pid"]:
            raise Bad(f"tid {e['tid']} named in pid {thread_pid[e['tid']]} used in pid {e['pid']}")
        parts = [e["args"]] if "event" in e["args"] else [e["args"][k] for k in ("begin", "end") if k in e["args"]]
        if not parts:
            raise Bad(f"event without JSONL args: {e}")
        for a in parts:
            owner = a.get("owner") or "(no owner)"
            if owner != thread_name[e["tid"]]:
                raise Bad(f"owner {owner!r} on the thread named {thread_name[e['tid']]!r}")
            name = process_name[e["pid"]]
            if a["event"] == "multilock":
                expected = "multilock " + ",".join(a["keys"])
                if name != expected:
                    raise Bad(f"multilock on process {name!r}, expected {expected!r}")
            elif not (name == a["lock"] or name.startswith(a["lock"] + " @") or name.startswith(a["lock"] + " db")
                      or name == "quorum " + a["lock"] or name.startswith("quorum " + a["lock"] + " db")):
                raise Bad(f"lock {a['lock']!r} on process {name!r}")

    # Every JSONL event is in the trace, and nothing else is.
    want = collections.Counter(canon(j) for j in jsonl)
    seen = set()
    for e in body:
        a = e["args"]
        for part in ([a] if "event" in a else [a[k] for k in ("begin", "end") if k in a]):
            seen.add(canon(part))
    missing = set(want) - seen
    extra = seen - set(want)
    if missing:
        raise Bad(f"{len(missing)} JSONL events not in the trace, e.g. {sorted(missing)[0]}")
    if extra:
        raise Bad(f"{len(extra)} trace args that are no JSONL event, e.g. {sorted(extra)[0]}")

    count = collections.Counter(j["event"] for j in jsonl)
    anomalies = collections.Counter(j["kind"] for j in jsonl if j["event"] == "anomaly")
    xs = [e for e in body if e["ph"] == "X"]
    inst = [e for e in body if e["ph"] == "i"]
    holds = [e for e in xs if e["name"] == "hold"]
    ended = [e for e in holds if "end" in e["args"]]
    # A release of a hold acquired before the capture began, with no held_ms, has no
    # span to close: it is an instant.
    unspanned = [e for e in inst if e["name"] in HOLD_CLOSERS]
    if any("held_ms" in e["args"] for e in unspanned):
        raise Bad("a release with held_ms shown as an instant, not a hold span")
    if len(ended) + len(unspanned) != sum(count[k] for k in HOLD_CLOSERS):
        raise Bad(f"{len(ended)} ended hold spans + {len(unspanned)} instants, JSONL has "
                  f"{sum(count[k] for k in HOLD_CLOSERS)} released/expired/force_released")
    if any(e["args"]["end"]["event"] not in HOLD_CLOSERS for e in ended):
        raise Bad("a hold span ended by another event")
    begun = [e for e in holds if "begin" in e["args"]]
    if len(begun) != count["acquired"] or any(e["args"]["begin"]["event"] != "acquired" for e in begun):
        raise Bad(f"{len(begun)} hold spans from an acquisition, JSONL has {count['acquired']} acquired")
    reentered = [e for e in xs if e["name"] == "reentered"]
    if len(reentered) != count["reentered"]:
        raise Bad(f"{len(reentered)} reentered spans, JSONL has {count['reentered']}")
    waits = [e for e in xs if e["name"] == "wait"]
    waited = sum(1 for j in jsonl if j["event"] == "acquired" and j.get("wait_ms", 0) > 0)
    if sum(1 for e in waits if e["args"].get("end", {}).get("event") == "acquired") != waited:
        raise Bad(f"wait spans ending in an acquisition != {waited} acquisitions that waited")
    retries = sum(1 for e in inst if e["name"] == "contended")
    if retries + sum(1 for e in waits if e["args"].get("begin", {}).get("event") == "contended") != count["contended"]:
        raise Bad("contended attempts: retries + waits begun != JSONL contended")
    for k in INSTANT_EVENTS:
        n = sum(1 for e in inst if e["name"] == k and e["cat"] == "lock")
        if n != count[k]:
            raise Bad(f"{n} {k} instants, JSONL has {count[k]}")
    for k, n in anomalies.items():
        got = [e for e in inst if e["cat"] == "anomaly" and e["name"] == k]
        if len(got) != n or any(e["s"] != "p" or e["args"]["kind"] != k for e in got):
            raise Bad(f"{len(got)} {k} anomaly instants (scope p), JSONL has {n}")
    if sum(1 for e in inst if e["cat"] == "anomaly") != count["anomaly"]:
        raise Bad("anomaly instants != JSONL anomalies")
    groups = [e for e in xs if e["name"] in ("quorum", "multilock")]
    if len(groups) != count["quorum"] + count["multilock"]:
        raise Bad("quorum/multilock spans != JSONL quorum/multilock events")

    # Times: the JSONL's, in microseconds.
    for e in inst:
        if e["ts"] != us(e["args"]["ts"]):
            raise Bad(f"instant ts {e['ts']} != its event's {e['args']['ts']}")
    for e in xs:
        a = e["args"]
        if "event" in a:
            if e["ts"] != us(a["start"]) or e["ts"] + e["dur"] != us(a["end"]):
                raise Bad(f"group span {e['ts']}+{e['dur']} != start/end {a['start']}..{a['end']}")
            continue
        if "end" in a and e["ts"] + e["dur"] != us(a["end"]["ts"]) and not a.get("gave_up"):
            raise Bad(f"span end {e['ts'] + e['dur']} != its closing event's {a['end']['ts']}")
        if "begin" in a and e["name"] != "wait" and e["ts"] != us(a["begin"]["ts"]):
            raise Bad(f"span start {e['ts']} != its opening event's {a['begin']['ts']}")
        if e["name"] == "wait" and a.get("end", {}).get("wait_ms") is not None and not a.get("gave_up"):
            if abs(e["dur"] - int(a["end"]["wait_ms"] * 1000)) > 1:
                raise Bad(f"wait span of {e['dur']} µs, its acquisition says wait_ms {a['end']['wait_ms']}")
        if "held_ms" in a.get("end", {}) and e["name"] == "hold" and abs(e["dur"] - int(a["end"]["held_ms"] * 1000)) > 1:
            raise Bad(f"hold span of {e['dur']} µs, its end says held_ms {a['end']['held_ms']}")

    # Nesting: on each thread, X spans sorted by start (longest first) form a stack.
    per_thread = collections.defaultdict(list)
    for e in xs:
        per_thread[(e["pid"], e["tid"])].append(e)
    for key, spans in per_thread.items():
        spans.sort(key=lambda e: (e["ts"], -e["dur"]))
        stack = []
        for e in spans:
            while stack and e["ts"] >= stack[-1]["ts"] + stack[-1]["dur"]:
                stack.pop()
            if stack and e["ts"] + e["dur"] > stack[-1]["ts"] + stack[-1]["dur"]:
                raise Bad(f"thread {key}: {e['name']} {e['ts']}+{e['dur']} overlaps {stack[-1]['name']} "
                          f"{stack[-1]['ts']}+{stack[-1]['dur']} without nesting")
            stack.append(e)
    return collections.Counter(e["name"] for e in xs), collections.Counter(e["name"] for e in inst)


def check(trace, jsonl, validator):
    errors = sorted(validator.iter_errors(trace), key=lambda e: list(e.absolute_path))
    if errors:
        raise Bad(f"schema: {errors[0].message} at {list(errors[0].absolute_path)}")
    return check_semantics(trace, jsonl)


def mutations(trace):
    """Broken variants of a good trace, each of which the checks must reject."""
    ev = trace["traceEvents"]

    def variant(name, f):
        t = copy.deepcopy(trace)
        if f(t["traceEvents"]) is not False:
            yield name, t

    def first(t, pred):
        return next((e for e in t if pred(e)), None)

    is_x = lambda e: e["ph"] == "X"
    is_i = lambda e: e["ph"] == "i"
    yield from variant("X without dur", lambda t: first(t, is_x).pop("dur"))
    yield from variant("unknown phase", lambda t: first(t, is_x).update(ph="Q"))
    yield from variant("string ts", lambda t: first(t, is_x).update(ts=str(first(t, is_x)["ts"])))
    yield from variant("instant scope 'x'", lambda t: first(t, is_i).update(s="x") if first(t, is_i) else False)
    yield from variant("scope on an X", lambda t: first(t, is_x).update(s="t"))
    yield from variant("metadata name unknown", lambda t: first(t, lambda e: e["ph"] == "M").update(name="proc_name"))
    yield from variant("sort_index not a number",
                       lambda t: first(t, lambda e: e.get("name") == "thread_sort_index")["args"].update(sort_index="1"))
    yield from variant("a hold span dropped", lambda t: t.remove(first(t, lambda e: e.get("name") == "hold")))
    yield from variant("an instant dropped", lambda t: t.remove(first(t, is_i)) if first(t, is_i) else False)
    yield from variant("tid moved to another thread", lambda t: first(t, is_x).update(tid=first(t, is_x)["tid"] + 1)
                       if len({e.get("tid") for e in t if e["ph"] == "M" and e["name"] == "thread_name"}) > 1 else False)
    yield from variant("pid changed", lambda t: first(t, is_x).update(pid=first(t, is_x)["pid"] + 1000))
    yield from variant("span shifted by 1 µs", lambda t: first(t, is_x).update(ts=first(t, is_x)["ts"] + 1))
    yield from variant("args field changed", lambda t: (first(t, is_i) or {"args": {}})["args"].update(db=99)
                       if first(t, is_i) else False)

    def overlap(t):
        x = [e for e in t if is_x(e) and e["dur"] > 2]
        if not x:
            return False
        e = copy.deepcopy(x[0])
        e["ts"] += e["dur"] // 2
        e["name"] = "hold"
        t.append(e)
    yield from variant("a hold overlapping another without nesting", overlap)


def main():
    lockscope, source, work = sys.argv[1:4]
    os.makedirs(work, exist_ok=True)
    with open(os.path.join(source, "tests/trace/trace_event_format.schema.json")) as f:
        schema = json.load(f)
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    captures = sorted(glob.glob(os.path.join(source, "captures/*.pcap")) +
                      glob.glob(os.path.join(source, "captures/crafted/*.pcap")) +
                      glob.glob(os.path.join(source, "captures/thirdparty/*.pcap")))
    if not captures:
        raise SystemExit("no captures found")
    failures = 0
    caught = collections.Counter()
    for cap in captures:
        name = os.path.relpath(cap, source)
        out = os.path.join(work, os.path.basename(cap) + ".trace.json")
        subprocess.run([lockscope, "analyze", cap, "--format", "trace", "-o", out], check=True,
                       stderr=subprocess.DEVNULL)
        if os.path.exists(out + ".tmp"):
            raise SystemExit(f"{name}: {out}.tmp left behind")
        jsonl_text = subprocess.run([lockscope, "analyze", cap, "--format", "jsonl"], check=True, capture_output=True,
                                    text=True).stdout
        jsonl = [load(line) for line in jsonl_text.splitlines()]
        with open(out) as f:
            trace = load(f.read())
        try:
            spans, instants = check(trace, jsonl, validator)
            print(f"ok   {name}: {len(jsonl)} events; X {dict(spans)}; i {dict(instants)}")
        except Bad as e:
            failures += 1
            print(f"FAIL {name}: {e}")
            continue
        for what, broken in mutations(trace):
            try:
                check(broken, jsonl, validator)
                failures += 1
                print(f"FAIL {name}: broken trace ({what}) passed the checks")
            except Bad:
                caught[what] += 1
    print(f"broken traces rejected: {dict(caught)}")
    if failures:
        raise SystemExit(f"{failures} failures")


if __name__ == "__main__":
    main()
