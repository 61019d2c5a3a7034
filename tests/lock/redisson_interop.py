#!/usr/bin/env python3
"""Real Redisson and `lockscope lock` contending on one lock at once (ctest lock.redisson_interop).

For each dialect (Redisson 4.7.0 and 3.16.8: lockscope speaks the jar's release) and lock type
(RLock, fair lock, write lock, readers and writers of a read/write lock, fenced lock from 3.19),
on one throw-away redis-server: one JVM runs Redisson workers
(tests/redisson/RedissonContender.java) while `lockscope lock --redisson R` processes queue for
the same lock, each running lock_hold_marker as its command. Both sides log their holds on
CLOCK_MONOTONIC from inside the hold. Checked:
  - no two holds overlap (0 overlaps), but read holds with each other; fencing tokens grow in
    hold order;
  - wake-ups in both directions: when the lock becomes free while a contender is waiting, the
    next hold starts within 100 ms (a Redisson holder waking lockscope, and lockscope waking Redisson).
    A phase whose only failures are a hand-over between 100 ms and 1 s (a loaded machine), a
    read/write lock's wake-up lost by Redisson's waiters with no lockscope process waiting
    (Redisson's own race, below), or no hand-over across sides is repeated, up to 3 runs; over 1 s is otherwise a lost wake-up.
Skips (exit 77, a WARN line) without ../shared/redisson (searched upwards from the source
directory, or $LOCKSCOPE_REDISSON_DIR), java/javac, the Debian jars, or redis-server.
"""
import argparse
import os
import shutil
import socket
import subprocess
import sys
import time

WAKE_UP_LIMIT_NS = 100_000_000
# A lockscope process counts as waiting this long after it was started: it connects,
# attempts, and subscribes first.
LOCKSCOPE_READY_NS = 300_000_000
JARS = ["netty-buffer", "netty-codec", "netty-codec-dns", "netty-common", "netty-handler", "netty-resolver",
        "netty-resolver-dns", "netty-transport", "netty-transport-native-epoll", "netty-transport-native-kqueue",
        "netty-transport-native-unix-common", "jackson-databind", "jackson-core", "jackson-annotations",
        "jackson-dataformat-yaml", "snakeyaml", "byte-buddy", "slf4j-api", "geronimo-jcache-1.0-spec", "slf4j-simple"]


def skip(why):
    print(f"WARN: lock.redisson_interop skipped: {why}")
    sys.exit(77)


def find_shared(source):
    env = os.environ.get("LOCKSCOPE_REDISSON_DIR")
    if env:
        return env if os.path.isdir(env) else None
    d = os.path.abspath(source)
    while True:
        candidate = os.path.join(os.path.dirname(d), "shared", "redisson")
        if os.path.isdir(candidate):
            return candidate
        if os.path.dirname(d) == d:
            return None
        d = os.path.dirname(d)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_redis(work):
    port = free_port()
    proc = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                             "--appendonly", "no"], stdout=open(os.path.join(work, "redis.log"), "w"),
                            stderr=subprocess.STDOUT)
    for _ in range(100):
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2) as s:
                s.sendall(b"PING\r\n")
                if s.recv(16).startswith(b"+PONG"):
                    return proc, port
        except OSError:
            time.sleep(0.05)
    proc.kill()
    raise SystemExit("redis-server did not start")


def read_holds(path):
    holds = []
    with open(path) as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 3:
                holds.append({"who": parts[0], "start": int(parts[1]), "end": int(parts[2]),
                              "wait": int(parts[3]) if len(parts) > 3 and parts[3] != "-" else None,
                              "token": int(parts[4]) if len(parts) > 4 else None})
    return holds


NO_CROSS_HAND_OVER = "no hand-over between Redisson and lockscope was observed"
PHASE_ATTEMPTS = 3


# A free stretch this long with a waiter is a lost wake-up, not a slow one: the waiters
# then sleep out the holder's remaining lease (the watchdog keeps it at 20 s or more).
LOST_WAKE_UP_NS = 1_000_000_000
SLOW_HAND_OVER = "(slow, not lost)"
# Redisson's read/write-lock waiters lose a wake-up now and then, with nobody else involved:
# both lock types publish READ_UNLOCK_MESSAGE, on which Redisson's LockPubSub.onMessage
# releases the entry's latch only `getQueueLength()` times, i.e. only for threads already
# parked on it. A waiter whose failed try was answered just before the release, and which
# has not parked yet, misses the message and sleeps out the holder's TTL (plain, fair and
# fenced locks publish UNLOCK_MESSAGE, whose `release()` leaves a permit for such a waiter;
# semaphores release `min(subscribers, permits)`, the latch wakes every listener).
# Measured with Redisson alone (lock.redisson_read_unlock_race, RedissonWakeUpRace.java):
# write locks lose about 1 in 300 such hand-overs, plain RLocks none (redisson/redisson#3891,
# #4744). lockscope's waiters keep a message that lands while an attempt is in flight
# (acquire_fsm::on_signal), so a loss where a lockscope process waited fails at once.
REDISSON_OWN_LOSS = "(lost by Redisson's read/write-lock waiters, no lockscope process waiting)"


def late_wake_up(gap_ns, text, redisson_only=False, read_unlock_message=False):
    """The failure for a free stretch of gap_ns with a waiter, or None within the bound.
    redisson_only: only Redisson threads waited; read_unlock_message: the object is a
    read/write lock, whose release Redisson's waiters can miss (above)."""
    if gap_ns <= WAKE_UP_LIMIT_NS:
        return None
    if gap_ns <= LOST_WAKE_UP_NS:
        return f"{text} {SLOW_HAND_OVER}"
    if redisson_only and read_unlock_message:
        return f"{text} {REDISSON_OWN_LOSS}"
    return f"{text} (a lost wake-up)"


def inconclusive(failures):
    """True when a phase's only failures say nothing about the lock's correctness, so the
    phase is repeated (up to PHASE_ATTEMPTS; the last run's failures stand):
    - no hand-over crossed sides: which side wakes next is the scheduler's choice (read
      holds merge into few busy blocks), so such a run proves nothing either way;
    - a hand-over slower than WAKE_UP_LIMIT_NS but far below LOST_WAKE_UP_NS: a machine
      busy with other work delays a JVM's wake-up by a few hundred ms (seen on 2 loaded
      cores), where a lost wake-up waits out a lease of seconds and fails at once;
    - a read/write lock's wake-up lost by Redisson's waiters with no lockscope process
      waiting: Redisson's own race (above), which lock.redisson_read_unlock_race shows
      without lockscope. Should lockscope's traffic ever cause such losses, they would recur
      in every run, and the last run's failure stands. Any other lost wake-up (a lockscope
      waiter's, or on a lock, fair or fenced lock, a semaphore or the latch) fails at once."""
    benign = (NO_CROSS_HAND_OVER, SLOW_HAND_OVER, REDISSON_OWN_LOSS)
    return bool(failures) and all(f.endswith(benign) for f in failures)


def check(holds, lockscope_waits, label, read_write=False):
    """Overlaps and late wake-ups; returns a list of failures. Holds labelled `-r-` are
    read holds, which may overlap each other. read_write: a read/write lock (write or rw)."""
    failures = []
    holds.sort(key=lambda h: h["start"])
    for h in holds:
        if h["wait"] is None:  # a lockscope hold: its process's start, plus its set-up time
            h["wait"] = lockscope_waits.get(h["who"], h["start"]) + LOCKSCOPE_READY_NS
    reader = lambda h: "-r-" in h["who"]
    overlaps = 0
    for i, a in enumerate(holds):
        for b in holds[i + 1:]:
            if b["start"] >= a["end"]:
                break
            if not (reader(a) and reader(b)):
                overlaps += 1
                failures.append(f"{label}: {a['who']} and {b['who']} overlap by "
                                f"{(min(a['end'], b['end']) - b['start']) / 1e6:.3f} ms")
    # The lock's busy blocks (overlapping read holds merge); between two blocks it was free.
    blocks = []
    for h in holds:
        if blocks and h["start"] < blocks[-1]["end"]:
            if h["end"] > blocks[-1]["end"]:
                blocks[-1]["end"], blocks[-1]["last"] = h["end"], h
        else:
            blocks.append({"start": h["start"], "end": h["end"], "last": h, "first": h})
    worst = {"lockscope->java": 0, "java->lockscope": 0, "java->java": 0, "lockscope->lockscope": 0}
    for prev, nxt in zip(blocks, blocks[1:]):
        released = prev["end"]
        waiting = [h for h in holds if h["wait"] < released and h["start"] >= released]
        if not waiting:
            continue
        gap = nxt["start"] - released
        kind = ("java" if prev["last"]["who"].startswith("java") else "lockscope") + "->" + \
               ("java" if nxt["first"]["who"].startswith("java") else "lockscope")
        worst[kind] = max(worst[kind], gap)
        redisson_only = all(w["who"].startswith("java") for w in waiting)
        late = late_wake_up(gap, f"{label}: the lock stayed free {gap / 1e6:.1f} ms after {prev['last']['who']} "
                                 f"released it while {', '.join(sorted({w['who'] for w in waiting}))} waited",
                            redisson_only, read_write)
        if late:
            failures.append(late)
    tokens = [h["token"] for h in holds if h["token"] is not None]
    if tokens:
        if len(tokens) != len(holds):
            failures.append(f"{label}: {len(holds) - len(tokens)} holds without a fencing token")
        for prev, nxt in zip(holds, holds[1:]):
            if prev["token"] is not None and nxt["token"] is not None and nxt["token"] <= prev["token"]:
                failures.append(f"{label}: fencing token {nxt['token']} of {nxt['who']} after "
                                f"{prev['token']} of {prev['who']}")
        print(f"{label}: fencing tokens {tokens[0]}..{tokens[-1]}, increasing in hold order")
    java = sum(1 for h in holds if h["who"].startswith("java"))
    print(f"{label}: {len(holds)} holds ({java} Redisson, {len(holds) - java} lockscope), "
          f"0 overlaps expected, {overlaps} found; worst hand-over: " +
          ", ".join(f"{k} {v / 1e6:.1f} ms" for k, v in worst.items() if v))
    if not any(v for k, v in worst.items() if k in ("lockscope->java", "java->lockscope")):
        failures.append(f"{label}: {NO_CROSS_HAND_OVER}")
    return failures


def run(args, classes, cp, release, lock_type):
    work = os.path.join(args.work, f"{release}-{lock_type}")
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    log = os.path.join(work, "holds.log")
    redis, port = start_redis(work)
    jvm = None
    try:
        jvm = subprocess.Popen(["java", "-Xshare:auto", "-XX:TieredStopAtLevel=1",
                                "-Dorg.slf4j.simpleLogger.defaultLogLevel=error", "-cp", f"{classes}:{cp}",
                                "RedissonContender", str(port), lock_type, str(args.workers), str(args.rounds),
                                str(args.hold_ms), log],
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=open(os.path.join(work, "jvm.err"), "w"),
                               text=True)
        if jvm.stdout.readline().strip() != "ready":
            raise SystemExit(f"{release} {lock_type}: the JVM did not start: "
                             + open(os.path.join(work, "jvm.err")).read()[-2000:])
        flag = {"lock": [], "fair": ["--fair"], "write": ["--write"], "fenced": ["--fenced"], "rw": []}[lock_type]
        started = {}
        running = []
        n = 0

        def launch():
            nonlocal n
            mode = flag
            label = f"lockscope-{n}"
            if lock_type == "rw":  # readers and writers in turn
                mode = ["--read"] if n % 2 else ["--write"]
                label = f"lockscope-{'r' if n % 2 else 'w'}-{n}"
            n += 1
            started[label] = time.monotonic_ns()
            running.append(subprocess.Popen(
                [args.lockscope, "lock", "interop", "--redis", f"redis://127.0.0.1:{port}", "--redisson", release,
                 "--wait", "30s", *mode, "--", args.marker, log, label, str(args.hold_ms)],
                stdout=subprocess.DEVNULL, stderr=open(os.path.join(work, label + ".err"), "w")))

        for _ in range(args.processes):
            launch()
        time.sleep(0.3)  # the lockscope processes are queued before Redisson starts
        jvm.stdin.write("go\n")
        jvm.stdin.flush()
        deadline = time.monotonic() + 120
        while jvm.poll() is None and time.monotonic() < deadline:
            for p in list(running):
                if p.poll() is not None:
                    running.remove(p)
                    if p.returncode != 0:
                        raise SystemExit(f"{release} {lock_type}: lockscope lock exited {p.returncode}")
                    if n < args.workers * args.rounds:
                        launch()  # keep lockscope contending while Redisson runs, as many holds as its side
            time.sleep(0.005)
        if jvm.poll() is None:
            raise SystemExit(f"{release} {lock_type}: the JVM did not finish in 120 s")
        if jvm.returncode != 0:
            raise SystemExit(f"{release} {lock_type}: the JVM exited {jvm.returncode}: "
                             + open(os.path.join(work, "jvm.err")).read()[-2000:])
        for p in running:
            if p.wait(timeout=60) != 0:
                raise SystemExit(f"{release} {lock_type}: lockscope lock exited {p.returncode}")
    finally:
        if jvm and jvm.poll() is None:
            jvm.kill()
        redis.kill()
        redis.wait()
    return check(read_holds(log), started, f"Redisson {release} {lock_type}", lock_type in ("write", "rw"))


def java_side_or_skip(source, tools):
    """The Redisson jars' folder and Debian's jars Redisson runs on; skips the test (a
    WARN line, exit 77) when they or one of `tools` are missing."""
    shared = find_shared(source)
    if not shared:
        skip(f"no shared/redisson above {source} (real Redisson jars; set LOCKSCOPE_REDISSON_DIR)")
    for tool in tools:
        if not shutil.which(tool):
            skip(f"no {tool} on PATH (scripts/install-deps --test installs it)")
    cp_jars = [f"/usr/share/java/{j}.jar" for j in JARS]
    missing = [j for j in cp_jars if not os.path.exists(j)]
    if missing:
        skip(f"missing {', '.join(missing)} (scripts/install-deps --test installs them)")
    return shared, cp_jars


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--lockscope", required=True)
    parser.add_argument("--marker", required=True)
    parser.add_argument("--source", required=True)
    parser.add_argument("--work", required=True)
    parser.add_argument("--releases", default="4.7.0,3.16.8")
    parser.add_argument("--types", default="lock,fair,write,rw,fenced")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--hold-ms", type=int, default=30)
    args = parser.parse_args()

    shared, cp_jars = java_side_or_skip(args.source, ("java", "javac", "redis-server"))
    os.makedirs(args.work, exist_ok=True)
    driver = os.path.join(args.source, "tests", "redisson", "RedissonContender.java")
    failures = []
    for release in args.releases.split(","):
        jar = os.path.join(shared, f"redisson-{release}-offline.jar")
        if not os.path.exists(jar):
            skip(f"no {jar}")
        cp = ":".join([jar] + cp_jars)
        classes = os.path.join(args.work, f"classes-{release}")
        os.makedirs(classes, exist_ok=True)
        subprocess.run(["javac", "-nowarn", "-cp", cp, "-d", classes, driver], check=True)
        for lock_type in args.types.split(","):
            if lock_type == "fenced" and [int(x) for x in release.split(".")] < [3, 19, 0]:
                continue  # RedissonFencedLock first shipped in 3.19.0
            for attempt in range(PHASE_ATTEMPTS):
                got = run(args, classes, cp, release, lock_type)
                if not inconclusive(got) or attempt + 1 == PHASE_ATTEMPTS:
                    break
                print(f"repeating the phase: {got[0]}")
            failures += got
    for f in failures:
        print("FAIL:", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
