#!/usr/bin/python3
"""`lockscope analyze --format trace` on every bundled capture, checked two ways:

1. against tests/trace/trace_event_format.schema.json (written from Google's Trace
   Event Format document) with Debian's python3-jsonschema, an independent validator;
2. against `--format jsonl` of the same capture: every JSONL event is in the trace
   (as an instant's args, or an X span's begin/end), X holds = acquisitions and ended
   holds, instants per renewal / notification / anomaly kind, pid/tid mapping
   consistent with the metadata and the owners, X spans on a thread properly nested
   (the viewers draw a thread's slices as a stack) and written in start order, ts/dur
   equal to the JSONL times.

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


SYNTHETIC = ({"open_at_end": True}, {"ended_with_hold": True})


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
    xs = [e for e in body if e["ph"] == "X"]
    inst = [e for e in body if e["ph"] == "i"]

    # Each JSONL event is the args of exactly one trace event; the other args are the
    # documented notes on spans no event closed.
    real = [e for e in body if "event" in e["args"]]
    got = collections.Counter(canon(e["args"]) for e in real)
    want = collections.Counter(canon(j) for j in jsonl)
    if got != want:
        missing, extra = want - got, got - want
        raise Bad(f"trace args vs JSONL: {sum(missing.values())} missing (e.g. {next(iter(missing), None)}), "
                  f"{sum(extra.values())} extra (e.g. {next(iter(extra), None)})")
    for e in body:
        if "event" not in e["args"] and (e["ph"] != "X" or e["args"] not in SYNTHETIC):
            raise Bad(f"args neither a JSONL event nor a documented note: {e}")

    # pid/tid mapping: every event's process and thread named, a tid in one process only,
    # the thread named after the owner and the process after the lock.
    for e in body:
        if e["pid"] not in process_name or e["tid"] not in thread_name:
            raise Bad(f"event on an unnamed process/thread: {e}")
        if thread_pid[e["tid"]] != e["pid"]:
            raise Bad(f"tid {e['tid']} named in pid {thread_pid[e['tid']]} used in pid {e['pid']}")
        a = e["args"]
        if "event" not in a:
            continue
        owner = a.get("owner") or "(no owner)"
        if owner != thread_name[e["tid"]]:
            raise Bad(f"owner {owner!r} on the thread named {thread_name[e['tid']]!r}")
        name = process_name[e["pid"]]
        if a["event"] == "multilock":
            if name != "multilock " + ",".join(a["keys"]):
                raise Bad(f"multilock of {a['keys']} on process {name!r}")
        elif not (name == a["lock"] or name.startswith(a["lock"] + " @") or name.startswith(a["lock"] + " db")
                  or name == "quorum " + a["lock"] or name.startswith("quorum " + a["lock"] + " db")):
            raise Bad(f"lock {a['lock']!r} on process {name!r}")

    # What each kind of trace event carries.
    for e in inst:
        a = e["args"]
        expected = (a["kind"], "anomaly", "p") if a["event"] == "anomaly" else (a["event"], "lock", "t")
        if (e["name"], e["cat"], e["s"]) != expected:
            raise Bad(f"instant {e['name']}/{e['cat']}/{e['s']} for a {a['event']} event, want {expected}")
        if e["ts"] != us(a["ts"]):
            raise Bad(f"instant ts {e['ts']} != its event's {a['ts']}")
        if a["event"] in HOLD_CLOSERS and "held_ms" in a:
            raise Bad(f"a {a['event']} with held_ms as an instant, not the end of a hold span")
        if a["event"] == "acquired" and a.get("wait_ms", 0) > 0:
            raise Bad("an acquisition after a wait as an instant, not the end of a wait span")
        if a["event"] in ("quorum", "multilock"):
            raise Bad(f"a {a['event']} event as an instant")
    spans_by_event = {"hold": HOLD_CLOSERS, "wait": {"acquired", "gave_up"}, "reentered": {"partially_released"},
                      "quorum": {"quorum"}, "multilock": {"multilock"}}
    for e in xs:
        a = e["args"]
        if e["name"] not in spans_by_event:
            raise Bad(f"unknown span {e['name']}")
        if "event" not in a:
            note = next(iter(a))
            allowed = {"hold": "open_at_end", "wait": "open_at_end", "reentered": ("ended_with_hold", "open_at_end")}
            if note not in allowed.get(e["name"], ()):
                raise Bad(f"a {e['name']} span with note {a}")
            continue
        if a["event"] not in spans_by_event[e["name"]]:
            raise Bad(f"a {e['name']} span closed by {a['event']}")
        if e["name"] in ("quorum", "multilock"):
            if e["ts"] != us(a["start"]) or e["ts"] + e["dur"] != us(a["end"]):
                raise Bad(f"group span {e['ts']}+{e['dur']} != start/end {a['start']}..{a['end']}")
            continue
        if a["event"] == "gave_up":  # known later than it ended: from its first attempt, for its wait
            if e["ts"] != us(a["since"]):
                raise Bad(f"gave_up wait span starts at {e['ts']}, its since is {a['since']}")
        elif e["ts"] + e["dur"] != us(a["ts"]):
            raise Bad(f"{e['name']} span ends at {e['ts'] + e['dur']}, its closing event at {a['ts']}")
        # The timeline's own account of the span's length.
        length = a.get("held_ms") if e["name"] == "hold" else a.get("wait_ms") if e["name"] == "wait" else None
        if length is not None and e["dur"] != int(length * 1000):
            raise Bad(f"{e['name']} span of {e['dur']} µs, its closing event says {length} ms")
    # One hold span per acquisition (from the JSONL alone: an owner's acquisition while it
    # already holds that lock nests in the open one), plus releases of holds acquired
    # before the capture began that say how long they were held.
    holding, expected_holds = set(), 0
    for j in jsonl:
        k = (j["lock"], j.get("lock_server", j["server"]), j["db"], j["owner"])  # a cluster's lock: one
        if j["event"] == "acquired" and k not in holding:
            holding.add(k)
            expected_holds += 1
        elif j["event"] in HOLD_CLOSERS:
            if k not in holding and "held_ms" in j:
                expected_holds += 1
            holding.discard(k)
    holds = sum(1 for e in xs if e["name"] == "hold")
    if holds != expected_holds:
        raise Bad(f"{holds} hold spans, the JSONL has {expected_holds} holds")
    # Holds still open at the end begin at an acquisition of that owner on that lock.
    acquired_at = {(j["lock"], j["owner"], us(j["ts"])) for j in jsonl if j["event"] in ("acquired", "reentered")}
    for e in xs:
        if e["name"] == "hold" and e["args"] == {"open_at_end": True}:
            name = process_name[e["pid"]]
            owner = thread_name[e["tid"]]
            if not any(k[1] == owner and k[2] == e["ts"] and (name == k[0] or name.startswith(k[0] + " "))
                       for k in acquired_at):
                raise Bad(f"open hold at {e['ts']} on {name}/{owner} matches no acquisition")

    # In the file, each thread's X spans come in start order, the longer first at the same
    # start (viewers take the first as the parent).
    last = {}
    for e in xs:
        order = (e["ts"], -e["dur"])
        if order < last.get((e["pid"], e["tid"]), order):
            raise Bad(f"thread {(e['pid'], e['tid'])}: {e['name']} at {e['ts']} written after a span starting at "
                      f"{last[(e['pid'], e['tid'])][0]}")
        last[(e["pid"], e["tid"])] = order
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
    def hold_as_instant(t):
        e = first(t, lambda e: e.get("name") == "hold" and "event" in e["args"])
        if e is None:
            return False
        e.update(ph="i", s="t", ts=e["ts"] + e.pop("dur"), name=e["args"]["event"])
    yield from variant("a hold span made an instant", hold_as_instant)
    yield from variant("an anomaly on the wrong lock", lambda t: first(t, lambda e: e.get("cat") == "anomaly").update(
        pid=first(t, lambda e: e.get("cat") == "anomaly")["pid"] % max(e["pid"] for e in t) + 1)
        if first(t, lambda e: e.get("cat") == "anomaly") and max(e["pid"] for e in t) > 1 else False)
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

    def swap_thread_spans(t):
        by_thread = collections.defaultdict(list)
        for i, e in enumerate(t):
            if is_x(e):
                by_thread[(e["pid"], e["tid"])].append(i)
        pair = next((v[:2] for v in by_thread.values() if len(v) >= 2 and t[v[0]]["ts"] != t[v[1]]["ts"]), None)
        if pair is None:
            return False
        t[pair[0]], t[pair[1]] = t[pair[1]], t[pair[0]]
    yield from variant("a thread's spans out of start order", swap_thread_spans)


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
        if len(jsonl) > 200:
            continue  # the breaks are checked on the smaller captures: seconds, not tens
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
