#!/usr/bin/env python3
"""Redisson alone loses read/write-lock wake-ups (ctest lock.redisson_read_unlock_race).

The interop tests (redisson_interop.py, redisson_interop_cluster.py) repeat a phase whose
only lost wake-up is a read/write lock's, lost by Redisson's own waiters with no lockscope
process waiting. This test shows that loss with no lockscope at all, so the tolerance rests
on a measured fact and ends when Redisson fixes it: per release (4.7.0 and 3.16.8), one JVM
(tests/redisson/RedissonWakeUpRace.java) with two Redisson clients on a throw-away
redis-server, a holder releasing while a waiter's lock() is getting its "busy" replies.
  - write lock: at least one waiter sleeps out the holder's lease after the release
    (Redisson's LockPubSub wakes only threads already parked on READ_UNLOCK_MESSAGE); if
    none does in 3000 trials, the test fails and says to drop the interop tests' tolerance;
  - plain RLock, the same trials: no wake-up lost (UNLOCK_MESSAGE leaves a permit), which
    also shows the trials themselves lose nothing.
Skips (exit 77) as lock.redisson_interop does.
"""
import argparse
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from redisson_interop import java_side_or_skip, start_redis  # noqa: E402

LEASE_MS = 600
SPREAD_US = 2000


def trials(classes, cp, port, lock_type, most, stop_after):
    out = subprocess.run(["java", "-Xshare:auto", "-XX:TieredStopAtLevel=1",
                          "-Dorg.slf4j.simpleLogger.defaultLogLevel=error", "-cp", f"{classes}:{cp}",
                          "RedissonWakeUpRace", f"127.0.0.1:{port}", lock_type, str(most), str(LEASE_MS),
                          str(SPREAD_US), str(stop_after)], capture_output=True, text=True, timeout=240)
    if out.returncode != 0 or not out.stdout.strip():
        raise SystemExit(f"RedissonWakeUpRace {lock_type} exited {out.returncode}: {out.stderr[-2000:]}")
    _, run, lost, worst = out.stdout.split()[-4:]
    return int(run), int(lost), int(worst)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--source", required=True)
    parser.add_argument("--work", required=True)
    parser.add_argument("--releases", default="4.7.0,3.16.8")
    parser.add_argument("--plain-trials", type=int, default=1000)
    args = parser.parse_args()
    shared, cp_jars = java_side_or_skip(args.source, ("java", "javac", "redis-server"))
    os.makedirs(args.work, exist_ok=True)
    failures = []
    for release in args.releases.split(","):
        jar = os.path.join(shared, f"redisson-{release}-offline.jar")
        if not os.path.exists(jar):
            failures.append(f"no {jar}")
            continue
        cp = ":".join([jar] + cp_jars)
        classes = os.path.join(args.work, f"classes-{release}")
        subprocess.run(["javac", "-nowarn", "-cp", cp, "-d", classes,
                        os.path.join(args.source, "tests", "redisson", "RedissonWakeUpRace.java")], check=True)
        redis, port = start_redis(args.work)
        try:
            run, lost, worst = trials(classes, cp, port, "write", 3000, 2)
            print(f"Redisson {release} write lock: {lost} wake-ups lost in {run} trials (worst wait after the "
                  f"release {worst} ms, lease {LEASE_MS} ms)")
            if lost == 0:
                failures.append(f"Redisson {release}: no write-lock wake-up lost in {run} trials. If this release "
                                f"fixed the race, the interop tests must stop tolerating it (REDISSON_OWN_LOSS "
                                f"in tests/lock/redisson_interop.py)")
            plain_run, plain_lost, plain_worst = trials(classes, cp, port, "lock", args.plain_trials, 1)
            print(f"Redisson {release} RLock: {plain_lost} wake-ups lost in {plain_run} trials "
                  f"(worst {plain_worst} ms)")
            if plain_lost:
                failures.append(f"Redisson {release}: a plain RLock's wake-up was lost: the trials, not "
                                f"Redisson's read/write race, lose wake-ups")
        finally:
            redis.kill()
            redis.wait()
    for f in failures:
        print("FAIL:", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
