#!/usr/bin/env python3
"""Real Redisson and lockscope processes on a 3-master Redis 7 cluster with sharded pub/sub
(ctest lock.redisson_interop_cluster).

One cluster (3 masters, no replicas) for the whole run, and per Redisson release (4.7.0 and
3.16.8 by default) one JVM (tests/redisson/RedissonClusterContender.java, useClusterServers())
that plays Redisson's side of every phase, while `lockscope lock|semaphore|latch --redis
redis-cluster://... --redisson R` processes contend for the same objects:
  - lock, fair, write, rw (readers and writers), fenced (3.19+): holds logged from inside by
    both sides; 0 overlaps (read holds may overlap each other), fencing tokens increasing,
    and no lost wake-up: whenever the lock became free while someone waited, the next hold
    started within 100 ms, in both directions (Redisson waking lockscope and the reverse);
  - semaphore and the permit-expirable semaphore (lockscope semaphore --lease): never more
    holders than permits, and a free permit with a waiter taken within 100 ms;
  - the latch: Redisson's count-down wakes lockscope's awaits and lockscope's count-down
    wakes Redisson's, each within 100 ms.
While each phase runs, the nodes' PUBSUB SHARDCHANNELS / PUBSUB CHANNELS are sampled: in a
release from 3.22 the phase's channels must be sharded only (SSUBSCRIBE), in 3.16 classic
only. A phase whose only failures are a hand-over between 100 ms and 1 s (a loaded machine),
a read/write lock's wake-up lost by Redisson's waiters with no lockscope process waiting
(Redisson's own race: see redisson_interop.py) or no hand-over across sides is repeated, up to 3 runs; over 1 s is otherwise a lost wake-up.
With --single the same phases run on one redis-server (useSingleServer(), redis://), where
every release uses classic pub/sub (ctest lock.redisson_interop_single).
Skips (exit 77) as lock.redisson_interop does, and without redis-cli or cluster support.
"""
import argparse
import os
import queue
import shutil
import socket
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from redisson_interop import (NO_CROSS_HAND_OVER, PHASE_ATTEMPTS, check, inconclusive,  # noqa: E402
                              java_side_or_skip, late_wake_up, read_holds, skip, start_redis)


# --- a minimal RESP client for the test's own looks at the nodes -----------------------------

def command(port, *args):
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        out = f"*{len(args)}\r\n" + "".join(f"${len(str(a).encode())}\r\n{a}\r\n" for a in args)
        s.sendall(out.encode())
        f = s.makefile("rb")
        return read_reply(f)


def read_reply(f):
    line = f.readline().rstrip(b"\r\n")
    kind, rest = line[:1], line[1:]
    if kind == b"+":
        return rest.decode()
    if kind == b"-":
        raise RuntimeError(rest.decode())
    if kind == b":":
        return int(rest)
    if kind == b"$":
        n = int(rest)
        if n < 0:
            return None
        data = f.read(n + 2)[:-2]
        return data.decode(errors="replace")
    if kind == b"*":
        n = int(rest)
        return None if n < 0 else [read_reply(f) for _ in range(n)]
    raise RuntimeError(f"unexpected reply {line!r}")


# --- the cluster ------------------------------------------------------------------------------

def free_cluster_port():
    """A free port whose bus port (+10000) is free too."""
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port > 55000:
            continue
        try:
            with socket.socket() as b:
                b.bind(("127.0.0.1", port + 10000))
            return port
        except OSError:
            continue


def start_cluster(work, masters=3):
    ports, procs = [], []
    for _ in range(masters):
        port = free_cluster_port()
        d = os.path.join(work, f"node-{port}")
        os.makedirs(d, exist_ok=True)
        procs.append(subprocess.Popen(
            ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--dir", d, "--save", "", "--appendonly", "no",
             "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "5000"],
            stdout=open(os.path.join(d, "redis.log"), "w"), stderr=subprocess.STDOUT))
        ports.append(port)
    for port in ports:
        for _ in range(100):
            try:
                if command(port, "PING") == "PONG":
                    break
            except OSError:
                time.sleep(0.05)
    created = subprocess.run(["redis-cli", "--cluster", "create", *[f"127.0.0.1:{p}" for p in ports],
                              "--cluster-replicas", "0", "--cluster-yes"], capture_output=True, text=True)
    if created.returncode != 0:
        raise SystemExit("redis-cli --cluster create failed: " + created.stdout[-1000:] + created.stderr[-1000:])
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        infos = [command(p, "CLUSTER", "INFO") for p in ports]
        if all("cluster_state:ok" in i and f"cluster_known_nodes:{masters}" in i for i in infos):
            return procs, ports
        time.sleep(0.1)
    raise SystemExit("the cluster did not reach cluster_state:ok in 20 s")


class ChannelWatch:
    """Samples, every 50 ms, which channels containing `needle` have subscribers on any node,
    sharded (PUBSUB SHARDCHANNELS) and classic (PUBSUB CHANNELS)."""

    def __init__(self, ports, needle):
        self.ports, self.needle = ports, needle
        self.sharded, self.classic = set(), set()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self):
        pattern = f"*{self.needle}*"
        while not self.stop.is_set():
            for p in self.ports:
                try:
                    self.sharded.update(command(p, "PUBSUB", "SHARDCHANNELS", pattern) or [])
                    self.classic.update(command(p, "PUBSUB", "CHANNELS", pattern) or [])
                except (OSError, RuntimeError):
                    pass
            self.stop.wait(0.05)

    def finish(self, sharded_expected, label):
        self.stop.set()
        self.thread.join()
        kind = "SSUBSCRIBE" if sharded_expected else "SUBSCRIBE"
        shown = lambda channels: f"{len(channels)} {sorted(channels)[:2]}{' ...' if len(channels) > 2 else ''}"  # noqa: E731
        print(f"{label}: channels subscribed: sharded {shown(self.sharded)}, classic {shown(self.classic)}")
        wanted, unwanted = (self.sharded, self.classic) if sharded_expected else (self.classic, self.sharded)
        failures = []
        if not wanted:
            failures.append(f"{label}: no waiter was seen subscribed with {kind}")
        if unwanted:
            failures.append(f"{label}: {sorted(unwanted)} subscribed the other way than {kind}")
        return failures


# --- Redisson's side --------------------------------------------------------------------------

class Jvm:
    def __init__(self, classes, cp, seeds, log, err):
        self.proc = subprocess.Popen(
            ["java", "-Xshare:auto", "-XX:TieredStopAtLevel=1", "-Dorg.slf4j.simpleLogger.defaultLogLevel=error",
             "-cp", f"{classes}:{cp}", "RedissonClusterContender", seeds, log],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=open(err, "w"), text=True)
        self.err = err
        self.lines = queue.Queue()
        threading.Thread(target=self.pump, daemon=True).start()

    def pump(self):
        for line in self.proc.stdout:
            self.lines.put(line.strip())
        self.lines.put(None)

    def send(self, line):
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def expect(self, word, timeout=120):
        try:
            got = self.lines.get(timeout=timeout)
        except queue.Empty:
            got = f"nothing in {timeout} s"
        if got != word:
            raise SystemExit(f"the JVM answered {got!r} where {word!r} was due: "
                             + open(self.err).read()[-3000:])

    def poll_line(self):
        try:
            return self.lines.get_nowait()
        except queue.Empty:
            return False


def dialect_at_least(release, version):
    return [int(x) for x in release.split(".")] >= version


def lockscope_processes(args, url, release, work, log, label_of, argv_of, total, running_limit):
    """A launcher that keeps `running_limit` lockscope processes contending until `total` ran."""
    state = {"n": 0, "running": [], "started": {}}

    def launch():
        n = state["n"]
        state["n"] += 1
        label = label_of(n)
        state["started"][label] = time.monotonic_ns()
        state["running"].append(subprocess.Popen(
            [args.lockscope, *argv_of(n), "--redis", url, "--redisson", release, "--wait", "30s", "--",
             args.marker, log, label, str(args.hold_ms)],
            stdout=subprocess.DEVNULL, stderr=open(os.path.join(work, label + ".err"), "w")))

    def step():
        for p in list(state["running"]):
            if p.poll() is not None:
                state["running"].remove(p)
                if p.returncode != 0:
                    raise SystemExit(f"{p.args[1]} {release}: lockscope exited {p.returncode}: {p.args}")
                if state["n"] < total:
                    launch()

    for _ in range(running_limit):
        launch()
    return state, step


def run_phase(args, jvm, ports, url, release, kind, work, total_java, attempt):
    """One contended object: JVM workers and lockscope processes at once. Returns (holds, started)."""
    name = f"{kind}-{release}" + (f"-{attempt}" if attempt else "")
    log = os.path.join(work, f"{name}.log")
    if kind in ("semaphore", "expirable"):
        extra = ["--lease", "10s"] if kind == "expirable" else []
        argv_of = lambda n: ["semaphore", name, "--permits", str(args.permits), *extra]  # noqa: E731
        label_of = lambda n: f"lockscope-{n}"  # noqa: E731
    else:
        flag = {"lock": [], "fair": ["--fair"], "write": ["--write"], "fenced": ["--fenced"]}.get(kind, [])
        argv_of = (lambda n: ["lock", name, "--read" if n % 2 else "--write"]) if kind == "rw" \
            else (lambda n: ["lock", name, *flag])
        label_of = (lambda n: f"lockscope-{'r' if n % 2 else 'w'}-{n}") if kind == "rw" else (lambda n: f"lockscope-{n}")
    if kind in ("semaphore", "expirable"):  # the permits exist before Redisson's workers start
        setter = ["semaphore", name, "--permits", str(args.permits), *(["--lease", "10s"] if kind == "expirable" else [])]
        subprocess.run([args.lockscope, *setter, "--redis", url, "--redisson", release, "--", "true"], check=True)
    jvm.send(f"log {log}")
    jvm.expect("done")
    watch = ChannelWatch(ports, name)
    state, step = lockscope_processes(args, url, release, work, log, label_of, argv_of, total_java, args.processes)
    time.sleep(0.3)  # lockscope's processes are queued before Redisson's workers start
    jvm.send(f"hold {kind} {name} {args.workers} {args.rounds} {args.hold_ms}")
    deadline = time.monotonic() + 120
    answer = False
    while answer is False and time.monotonic() < deadline:
        step()
        answer = jvm.poll_line()
        time.sleep(0.005)
    if answer != "done":
        raise SystemExit(f"{release} {kind}: the JVM answered {answer!r}: " + open(jvm.err).read()[-3000:])
    while state["n"] < total_java or state["running"]:
        if time.monotonic() > deadline:
            raise SystemExit(f"{release} {kind}: lockscope processes did not finish")
        step()
        time.sleep(0.005)
    return read_holds(log), state["started"], watch


def check_semaphore(holds, started, permits, label):
    """Never more than `permits` holders; a permit freed while someone waited is taken within 100 ms."""
    failures = []
    for h in holds:
        if h["wait"] is None:
            h["wait"] = started.get(h["who"], h["start"]) + 300_000_000
    events = sorted([(h["start"], 1, h) for h in holds] + [(h["end"], -1, h) for h in holds],
                    key=lambda e: (e[0], e[1]))
    inside, most, worst = 0, 0, {}
    for t, delta, h in events:
        inside += delta
        most = max(most, inside)
        if inside > permits:
            failures.append(f"{label}: {inside} holders at once with {permits} permits (at {h['who']})")
        if delta < 0 and inside < permits:
            waiting = [w for w in holds if w["wait"] < t and w["start"] >= t]
            if waiting:
                nxt = min(w["start"] for w in holds if w["start"] >= t)
                taker = next(w for w in holds if w["start"] == nxt)
                kind = ("java" if h["who"].startswith("java") else "lockscope") + "->" + \
                       ("java" if taker["who"].startswith("java") else "lockscope")
                worst[kind] = max(worst.get(kind, 0), nxt - t)
                redisson_only = all(w["who"].startswith("java") for w in waiting)
                late = late_wake_up(nxt - t, f"{label}: a permit stayed free {(nxt - t) / 1e6:.1f} ms after "
                                             f"{h['who']} released it while "
                                             f"{', '.join(sorted({w['who'] for w in waiting}))} waited", redisson_only)
                if late:
                    failures.append(late)
    java = sum(1 for h in holds if h["who"].startswith("java"))
    print(f"{label}: {len(holds)} holds ({java} Redisson, {len(holds) - java} lockscope), at most {most} at once "
          f"of {permits} permits; worst hand-over: " + ", ".join(f"{k} {v / 1e6:.1f} ms" for k, v in worst.items()))
    if not any(k in worst for k in ("lockscope->java", "java->lockscope")):
        failures.append(f"{label}: {NO_CROSS_HAND_OVER}")
    return failures


def latch_phase(args, jvm, ports, url, release, work, java_counts_down, attempt, sharded, where):
    """Two lockscope awaits and two of Redisson's on one latch; one side counts it down."""
    direction = "Redisson->lockscope" if java_counts_down else "lockscope->Redisson"
    name = f"latch-{release}-{'j' if java_counts_down else 'l'}" + (f"-{attempt}" if attempt else "")
    label = f"Redisson {release} latch {direction} ({where})"
    log = os.path.join(work, f"{name}.log")
    base = [args.lockscope, "latch", name, "--redis", url, "--redisson", release]
    subprocess.run([*base, "--count", "1"], check=True)
    jvm.send(f"log {log}")
    jvm.expect("done")
    woke = {}

    def await_one(i):
        p = subprocess.Popen([*base, "--await", "--wait", "30s"], stderr=open(os.path.join(work, f"{name}-{i}.err"), "w"))
        code = p.wait()
        woke[f"lockscope-latch-{i}"] = (time.monotonic_ns(), code)

    threads = [threading.Thread(target=await_one, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    jvm.send(f"await {name} 2")
    jvm.expect("awaiting")
    # Everybody listens: lockscope's two clients and Redisson's one subscription.
    channel = "redisson_countdownlatch__channel__{" + name + "}"
    deadline = time.monotonic() + 30
    counts = (0, 0)
    while time.monotonic() < deadline:
        counts = (sum(command(p, "PUBSUB", "SHARDNUMSUB", channel)[1] for p in ports),
                  sum(command(p, "PUBSUB", "NUMSUB", channel)[1] for p in ports))
        if sum(counts) >= 3:
            break
        time.sleep(0.02)
    failures = []
    if counts != ((3, 0) if sharded else (0, 3)):
        failures.append(f"{label}: subscribers (sharded, classic) {counts}, "
                        f"{(3, 0) if sharded else (0, 3)} expected")
    time.sleep(0.1)
    if java_counts_down:
        jvm.send(f"countdown {name}")
        jvm.expect("done")
    else:
        # Conservative: from before the process starts, connects and loads the slot map.
        counted = time.monotonic_ns()
        subprocess.run([*base, "--count-down"], check=True)
        with open(log, "a") as f:
            f.write(f"lockscope-countdown {counted}\n")
    for t in threads:
        t.join(timeout=40)
    jvm.send("joined")
    jvm.expect("done")
    marks = {}
    with open(log) as f:
        for line in f:
            who, ns = line.split()
            marks[who] = int(ns)
    counted = marks.pop("java-countdown" if java_counts_down else "lockscope-countdown")
    for who, (ns, code) in woke.items():
        if code != 0:
            failures.append(f"{label}: {who} exited {code}")
        marks[who] = ns
    gaps = {who: (ns - counted) / 1e6 for who, ns in marks.items()}
    print(f"{label}: woken after the count-down (ms): " + ", ".join(f"{w} {g:.1f}" for w, g in sorted(gaps.items())))
    if len(gaps) != 4:
        failures.append(f"{label}: {len(gaps)} of 4 waiters woke")
    for who, gap in gaps.items():
        late = late_wake_up(gap * 1e6, f"{label}: {who} woke {gap:.1f} ms after the count-down")
        if late:
            failures.append(late)
    return failures


def run_release(args, shared, cp_jars, ports, release):
    jar = os.path.join(shared, f"redisson-{release}-offline.jar")
    if not os.path.exists(jar):
        skip(f"no {jar}")
    cp = ":".join([jar] + cp_jars)
    work = os.path.join(args.work, release)
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    classes = os.path.join(work, "classes")
    subprocess.run(["javac", "-nowarn", "-cp", cp, "-d", classes,
                    os.path.join(args.source, "tests", "redisson", "RedissonClusterContender.java")], check=True)
    if args.single:
        url, seeds, where = f"redis://127.0.0.1:{ports[0]}", f"single:127.0.0.1:{ports[0]}", "single server"
    else:
        url = "redis-cluster://" + ",".join(f"127.0.0.1:{p}" for p in ports)
        seeds, where = ",".join(f"127.0.0.1:{p}" for p in ports), "cluster"
    jvm = Jvm(classes, cp, seeds, os.path.join(work, "jvm.log"), os.path.join(work, "jvm.err"))
    failures = []
    # Sharded pub/sub is a cluster's: on one server every release SUBSCRIBEs and PUBLISHes.
    sharded = not args.single and dialect_at_least(release, [3, 22, 0])
    try:
        jvm.expect("ready")
        total = args.workers * args.rounds
        for kind in args.types.split(","):
            if kind == "fenced" and not dialect_at_least(release, [3, 19, 0]):
                continue  # RedissonFencedLock first shipped in 3.19.0
            label = f"Redisson {release} {kind} ({where})"
            for attempt in range(PHASE_ATTEMPTS):
                holds, started, watch = run_phase(args, jvm, ports, url, release, kind, work, total, attempt)
                got = check_semaphore(holds, started, args.permits, label) if kind in ("semaphore", "expirable") \
                    else check(holds, started, label, kind in ("write", "rw"))
                got += watch.finish(sharded, label)
                if not inconclusive(got) or attempt + 1 == PHASE_ATTEMPTS:
                    break
                print(f"repeating the phase: {got[0]}")
            failures += got
        if args.latch:
            for java_counts_down in (True, False):
                for attempt in range(PHASE_ATTEMPTS):
                    got = latch_phase(args, jvm, ports, url, release, work, java_counts_down, attempt, sharded,
                                      where)
                    if not inconclusive(got) or attempt + 1 == PHASE_ATTEMPTS:
                        break
                    print(f"repeating the phase: {got[0]}")
                failures += got
        jvm.send("quit")
        jvm.expect("done")
    finally:
        if jvm.proc.poll() is None:
            try:
                jvm.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                jvm.proc.kill()
    return failures


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--lockscope", required=True)
    parser.add_argument("--marker", required=True)
    parser.add_argument("--source", required=True)
    parser.add_argument("--work", required=True)
    parser.add_argument("--releases", default="4.7.0,3.16.8")
    parser.add_argument("--types", default="lock,fair,write,rw,fenced,semaphore,expirable")
    parser.add_argument("--no-latch", dest="latch", action="store_false")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--permits", type=int, default=2)
    parser.add_argument("--hold-ms", type=int, default=30)
    parser.add_argument("--single", action="store_true", help="one redis-server instead of a 3-master cluster")
    args = parser.parse_args()

    shared, cp_jars = java_side_or_skip(args.source, ("java", "javac", "redis-server", "redis-cli"))
    version = subprocess.run(["redis-server", "--version"], capture_output=True, text=True).stdout
    major = int(version.split("v=")[1].split(".")[0]) if "v=" in version else 0
    if major < 7:
        skip(f"redis-server {major} has no sharded pub/sub (Redis 7): {version.strip()}")
    os.makedirs(args.work, exist_ok=True)
    began = time.monotonic()
    if args.single:
        os.makedirs(os.path.join(args.work, "cluster"), exist_ok=True)
        server, port = start_redis(os.path.join(args.work, "cluster"))
        procs, ports = [server], [port]
    else:
        procs, ports = start_cluster(os.path.join(args.work, "cluster"))
    failures = []
    try:
        for release in args.releases.split(","):
            failures += run_release(args, shared, cp_jars, ports, release)
    finally:
        for p in procs:
            p.kill()
            p.wait()
        shutil.rmtree(os.path.join(args.work, "cluster"), ignore_errors=True)
    print(f"took {time.monotonic() - began:.1f} s")
    for f in failures:
        print("FAIL:", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
