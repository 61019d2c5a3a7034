#!/usr/bin/env python3
"""The same capture must read the same, whatever the host's load, the thread count or the run.

  check_determinism.py LOCKSCOPE [--load N] [--runs N] [--formats K] [CAPTURE ...]

Every capture given (without any: every bundled one, captures/**, tests/**) is analysed
`--format jsonl` with `--threads 1` (the reference), with `--threads 2` (the default), and
`--runs` more times alternating the two; with `--load N`, N CPU spinners (started and
stopped here) then run while each is analysed once more on one thread and on two. stdout,
stderr and the exit status of every run must be byte for byte the reference's.

The first `--formats` captures are also analysed as text, `--summary`, `--format html` and
`--format trace`, each compared across the same runs.

`analyze --replay F --replay-speed 0 --format jsonl` (the live loop) must give the same bytes
run after run (and under load), and the events of `analyze F --threads 1` with what
docs/guide/live-service.md (`--replay FILE`) and docs/design/pipeline.md say differs live:
events come in time order, not grouped per lock (lines are compared sorted); a subscriber
event's guessed link is held 1 s of capture time live, 10 s in files (`owner` and
`confidence` of `subscribed`/`notified` are left out); and keys set once are a files-only
stage (docs/guide/analyzer.md, keys set once: a lock acquired once live may be missing from
the file's output, with what followed that acquisition).

Exit status 0 when nothing differs; 1 with every difference listed (capture, mode, the
first differing line).
"""
import argparse
import concurrent.futures
import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def bundled_captures():
    found = []
    for base in ("captures", "tests"):
        for p in sorted((ROOT / base).rglob("*")):
            if p.suffix in (".pcap", ".pcapng") and p.is_file():
                found.append(str(p.relative_to(ROOT)))
    return found


def run(argv):
    env = dict(os.environ)
    env.pop("TZ", None)  # text output names the start in the local zone too when TZ is set
    p = subprocess.run(argv, cwd=ROOT, stdin=subprocess.DEVNULL, capture_output=True, env=env)
    return p.stdout, p.stderr, p.returncode


def first_difference(a: bytes, b: bytes) -> str:
    la, lb = a.splitlines(), b.splitlines()
    for i, (x, y) in enumerate(zip(la, lb)):
        if x != y:
            return f"line {i + 1}: {x[:300]!r} / {y[:300]!r}"
    return f"{len(la)} lines / {len(lb)} lines"


class Spinners:
    """N processes that only burn CPU, stopped by their own ids."""

    def __init__(self, n):
        self.procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]

    def stop(self):
        for p in self.procs:
            p.send_signal(signal.SIGKILL)
        for p in self.procs:
            p.wait()


def live_comparable(out: bytes):
    """The JSONL events as a sorted list, without what the docs say differs live."""
    events = []
    for line in out.splitlines():
        e = json.loads(line)
        if e.get("event") in ("subscribed", "notified"):
            e.pop("owner", None)
            e.pop("confidence", None)
        events.append(e)
    keyed = sorted(json.dumps(e, sort_keys=True) for e in events)
    return events, keyed


def compare_live(file_out: bytes, live_out: bytes):
    file_events, file_keyed = live_comparable(file_out)
    live_events, live_keyed = live_comparable(live_out)
    file_locks = {e.get("lock") for e in file_events}
    set_once = {e.get("lock") for e in live_events if e.get("lock") not in file_locks}
    set_once = {l for l in set_once if sum(e.get("event") == "acquired" for e in live_events if e.get("lock") == l) == 1}
    if set_once:
        live_keyed = sorted(json.dumps(e, sort_keys=True) for e in live_events if e.get("lock") not in set_once)
    if file_keyed == live_keyed:
        return None
    only_file = sorted(set(file_keyed) - set(live_keyed))
    only_live = sorted(set(live_keyed) - set(file_keyed))
    return (f"{len(file_keyed)} events in the file's output, {len(live_keyed)} live; "
            f"first only in the file's: {only_file[:1]}, first only live: {only_live[:1]}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("lockscope")
    ap.add_argument("captures", nargs="*")
    ap.add_argument("--load", type=int, default=0, help="CPU spinners running during the loaded runs (0: none)")
    ap.add_argument("--runs", type=int, default=2, help="runs more, alternating one and two threads")
    ap.add_argument("--formats", type=int, default=4, help="captures also compared as text, summary, HTML and trace")
    ap.add_argument("--jobs", type=int, default=2)
    args = ap.parse_args()
    lockscope = str(Path(args.lockscope).resolve())
    captures = args.captures or bundled_captures()
    captures = [str(Path(c).resolve().relative_to(ROOT)) if Path(c).exists() else c for c in captures]

    def jsonl(c, threads):
        return [lockscope, "analyze", c, "--format", "jsonl", "--threads", str(threads)]

    def replay(c):
        return [lockscope, "analyze", "--replay", c, "--replay-speed", "0", "--format", "jsonl"]

    other_formats = {
        "text": [],
        "summary": ["--summary"],
        "html": ["--format", "html"],
        "trace": ["--format", "trace"],
    }
    reference = {}  # (capture, mode) -> (out, err, rc)
    differences = []
    checked = 0

    def job_list(label, threads_cycle):
        jobs = []
        for i, threads in enumerate(threads_cycle):
            for c in captures:
                jobs.append((c, "jsonl", f"{label} threads {threads}", jsonl(c, threads)))
            for c in captures[: args.formats]:
                for name, extra in other_formats.items():
                    jobs.append((c, name, f"{label} threads {threads}",
                                 [lockscope, "analyze", c, "--threads", str(threads)] + extra))
            if i == 0:
                for c in captures:
                    jobs.append((c, "replay", label, replay(c)))
        return jobs

    def execute(jobs):
        nonlocal checked
        with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
            results = list(pool.map(lambda j: run(j[3]), jobs))
        for (c, mode, label, argv), got in zip(jobs, results):
            checked += 1
            want = reference.setdefault((c, mode), got + (label,))
            if want[:3] == got:
                continue
            for what, a, b in (("stdout", want[0], got[0]), ("stderr", want[1], got[1])):
                if a != b:
                    differences.append(f"{c}: {mode}, {label} against {want[3]}: {what} differs "
                                       f"(md5 {hashlib.md5(a).hexdigest()[:8]} / {hashlib.md5(b).hexdigest()[:8]}), "
                                       f"{first_difference(a, b)}")
            if want[2] != got[2]:
                differences.append(f"{c}: {mode}, {label} against {want[3]}: exit status {want[2]} / {got[2]}")

    started = time.monotonic()
    execute(job_list("quiet", [1, 2]))
    if args.load > 0:
        spinners = Spinners(args.load)
        try:
            execute(job_list(f"{args.load} spinners", [1, 2]))
        finally:
            spinners.stop()
    execute(job_list("again", [1 + i % 2 for i in range(args.runs)]))

    for c in captures:
        file_out = reference[(c, "jsonl")][0]
        live_out = reference[(c, "replay")][0]
        try:
            d = compare_live(file_out, live_out)
        except json.JSONDecodeError as e:
            d = f"not JSONL: {e}"
        if d is not None:
            differences.append(f"{c}: replay against the file (threads 1): {d}")

    for d in differences:
        print(f"check_determinism: {d}")
    print(f"check_determinism: {len(captures)} captures, {checked} runs in {time.monotonic() - started:.0f} s, "
          f"{len(differences)} differences")
    return 1 if differences else 0


if __name__ == "__main__":
    sys.exit(main())
