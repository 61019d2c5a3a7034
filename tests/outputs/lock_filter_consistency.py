#!/usr/bin/env python3
"""`--lock NAME` chooses what is written, not what is analysed.

For each capture given, and for every lock in it (at most --most, the busiest first), the
JSON lines of `lockscope analyze CAPTURE --format jsonl --lock NAME` must be exactly the
events of NAME in the whole analysis's JSON lines (a MultiLock's events where NAME is one
of its keys included). Before, `--lock` dropped the other locks' operations before the
timeline: a MultiLock of two keys vanished, and rules that read a connection's other
locks (a single try ended by its client's next lock, subscriber links learnt on another
lock) gave other answers.

  lock_filter_consistency.py LOCKSCOPE CAPTURE... [--most N]
"""
import argparse
import collections
import json
import subprocess
import sys


def jsonl(cli, args):
    out = subprocess.run([cli, "analyze", *args, "--format", "jsonl"], capture_output=True, text=True)
    if out.returncode not in (0,):
        raise SystemExit(f"lockscope analyze {' '.join(args)}: exit {out.returncode}: {out.stderr.strip()}")
    return [line for line in out.stdout.splitlines() if line.strip()]


def concerns(event, name):
    return event.get("lock") == name or name in (event.get("keys") or []) or name in (event.get("acquired_keys") or [])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("lockscope")
    ap.add_argument("captures", nargs="+")
    ap.add_argument("--most", type=int, default=6)
    args = ap.parse_args()
    failures = checked = 0
    for capture in args.captures:
        whole = jsonl(args.lockscope, [capture])
        events = [json.loads(line) for line in whole]
        busiest = collections.Counter(e["lock"] for e in events if "lock" in e)
        for name, _ in busiest.most_common(args.most):
            if any(c in name for c in "*?[]"):
                continue  # a name that reads as a glob would select others too
            want = [line for line, e in zip(whole, events) if concerns(e, name)]
            got = jsonl(args.lockscope, [capture, "--lock", name])
            checked += 1
            if got != want:
                failures += 1
                print(f"FAIL {capture} --lock {name}: {len(got)} lines, the whole analysis has {len(want)} for it")
                for a, b in zip(got, want):
                    if a != b:
                        print(f"  --lock: {a}\n  whole:  {b}")
                        break
    print(f"{checked} locks checked, {failures} differ")
    return 1 if failures or checked == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
