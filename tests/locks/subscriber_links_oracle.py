#!/usr/bin/env python3
"""Subscriber links against the processes that own the connections (ctest locks.subscriber_links.*).

Several client processes contend for one lock on a throw-away redis-server while tcpdump records
the traffic and a poller reads, with `ss -tnp`, which process owns each local port (the truth:
the kernel's own table, not anything lockscope infers). Then `lockscope analyze --format jsonl`
runs on the recording, and every subscriber event (`subscribed`, `notified`, `unsubscribed`)
that names a waiter is checked: the waiter's owner is mapped to its process by the owner's
command-connection events (acquired/contended/...), the subscriber connection to its process by
the poller's table. An event is right (same process), wrong (another), or unlinked (no owner).

  lockscope   one holder and three `lockscope lock --wait 10s` waiters per round, on one host
  redisson    several Redisson JVMs (tests/redisson/RedissonContender.java), several threads each

  subscriber_links_oracle.py MODE --lockscope CLI [--rounds N] [--keep PCAP] [--check]
  subscriber_links_oracle.py lockscope --lockscope CLI --pcap PCAP [--cut-seconds N] [--check]
(--cut-seconds: the recording without its first N seconds, as a capture joined mid-run;
--sweep-cuts 1,3,5: each of those cuts in turn, judged together.)
The recordings in tests/locks/recordings/links_*.pcap (each with PCAP.owners.json, the truth) were made with
  subscriber_links_oracle.py lockscope --lockscope CLI --rounds 12 --keep links_lockscope.pcap
  subscriber_links_oracle.py redisson --lockscope CLI --jvms 3 --workers 3 --rounds 10 [--stagger 1.0] --keep ...
(links_lockscope_shared_name.pcap and links_lockscope_shared_name2.pcap: by a build whose `lockscope lock` named every
connection `lockscope-lock` (cli/lock_command.cpp's client_name);
links_redisson_together5.pcap: --jvms 4 --workers 3 --rounds 8, on a loaded host).
--check asserts the issue's bar: >= 98% of subscriber events right, none wrong above `low`, and (plain
contention, every waiter woken) no anomaly at all. Exits 77 (skip) when tcpdump cannot capture on lo,
or redis-server / java are missing.
"""
import argparse
import json
import re
import os
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time

SUBSCRIBER_EVENTS = ("subscribed", "notified", "unsubscribed")
COMMAND_EVENTS = ("acquired", "contended", "released", "reentered", "renewed", "gave_up")
JARS = ["netty-buffer", "netty-codec", "netty-codec-dns", "netty-common", "netty-handler", "netty-resolver",
        "netty-resolver-dns", "netty-transport", "netty-transport-native-epoll", "netty-transport-native-kqueue",
        "netty-transport-native-unix-common", "jackson-databind", "jackson-core", "jackson-annotations",
        "jackson-dataformat-yaml", "snakeyaml", "byte-buddy", "slf4j-api", "geronimo-jcache-1.0-spec", "slf4j-simple"]


def skip(why):
    print(f"WARN: subscriber links oracle skipped: {why}")
    sys.exit(77)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PortOwners:
    """Polls `ss -tnp` for the client ends of connections to the server: local port -> pid."""

    def __init__(self, server_port):
        self.server_port = server_port
        self.owner = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()

    def poll(self):
        out = subprocess.run(["ss", "-tnpH", "dst", f"127.0.0.1:{self.server_port}"],
                             capture_output=True, text=True).stdout
        for line in out.splitlines():
            fields = line.split()
            if len(fields) < 6 or "pid=" not in line:
                continue
            local = fields[3]
            # A child that inherited the socket is listed too: the truth is the set.
            pids = frozenset(int(p) for p in re.findall(r"pid=(\d+)", line))
            port = int(local.rsplit(":", 1)[1])
            self.owner[port] = self.owner.get(port, frozenset()) | pids

    def _run(self):
        while not self._stop.is_set():
            self.poll()
            time.sleep(0.005)


def start_redis(work):
    port = free_port()
    proc = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                             "--appendonly", "no"], stdout=open(os.path.join(work, "redis.log"), "w"),
                            stderr=subprocess.STDOUT)
    for _ in range(100):
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return proc, port
        except OSError:
            time.sleep(0.05)
    proc.kill()
    skip("redis-server did not start")


def start_tcpdump(work, port, pcap):
    proc = subprocess.Popen(["tcpdump", "-i", "lo", "-U", "-s", "0", "-w", pcap, f"tcp port {port}"],
                            stdout=subprocess.DEVNULL, stderr=open(os.path.join(work, "tcpdump.log"), "w"))
    time.sleep(1.0)
    if proc.poll() is not None:
        skip("tcpdump could not capture on lo (needs CAP_NET_RAW)")
    return proc


def run_lockscope(cli, port, rounds, owners):
    """One holder, then three waiters --wait 10s, per round; all on one host (127.0.0.1)."""
    url = f"redis://127.0.0.1:{port}"
    for r in range(rounds):
        name = "links"
        holder = subprocess.Popen([cli, "lock", name, "--redis", url, "--", "sleep", "0.3"])
        time.sleep(0.08)
        waiters = [subprocess.Popen([cli, "lock", name, "--redis", url, "--wait", "10s", "--", "sleep", "0.05"])
                   for _ in range(3)]
        for p in [holder] + waiters:
            if p.wait(timeout=60) != 0:
                raise SystemExit(f"round {r}: a lockscope lock process exited {p.returncode}")
        owners.poll()


def find_shared(source):
    env = os.environ.get("LOCKSCOPE_REDISSON_DIR")
    if env:
        return env if os.path.isdir(env) else None
    d = os.path.abspath(source)
    while os.path.dirname(d) != d:
        candidate = os.path.join(os.path.dirname(d), "shared", "redisson")
        if os.path.isdir(candidate):
            return candidate
        d = os.path.dirname(d)
    return None


def run_redisson(source, work, port, jvms, workers, rounds, release, stagger):
    shared = find_shared(source)
    if shared is None or shutil.which("java") is None or shutil.which("javac") is None:
        skip("no ../shared/redisson or no JDK")
    jar = os.path.join(shared, f"redisson-{release}-offline.jar")
    cp = ":".join([jar] + [f"/usr/share/java/{j}.jar" for j in JARS])
    classes = os.path.join(work, "classes")
    subprocess.run(["javac", "-cp", cp, "-d", classes,
                    os.path.join(source, "tests", "redisson", "RedissonContender.java")], check=True)
    procs = []
    for j in range(jvms):
        p = subprocess.Popen(["java", "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", "-cp", f"{classes}:{cp}",
                              "RedissonContender", str(port), "lock", str(workers), str(rounds), "20",
                              os.path.join(work, f"jvm{j}.log")],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        procs.append(p)
        # Services on one host start apart: each JVM opens its connections when it starts.
        if stagger > 0:
            if p.stdout.readline().strip() != "ready":
                raise SystemExit("a JVM did not start")
            time.sleep(stagger)
    for p in procs if stagger <= 0 else []:
        if p.stdout.readline().strip() != "ready":
            raise SystemExit("a JVM did not start")
    for p in procs:
        p.stdin.write("go\n")
        p.stdin.flush()
    for p in procs:
        if p.wait(timeout=300) != 0:
            raise SystemExit(f"a JVM exited {p.returncode}")


def cut_pcap(source, target, seconds):
    """Writes `source` (classic pcap) without its first `seconds`: a capture joined mid-run.

    Connections open before the cut are seen mid-stream, with no SYN and no SUBSCRIBE, as
    when a user starts tcpdump while the clients already run. Plain Python, no editcap.
    """
    with open(source, "rb") as f:
        data = f.read()
    magic = data[:4]
    orders = {b"\xd4\xc3\xb2\xa1": ("<", 1e-6), b"\xa1\xb2\xc3\xd4": (">", 1e-6),
              b"\x4d\x3c\xb2\xa1": ("<", 1e-9), b"\xa1\xb2\x3c\x4d": (">", 1e-9)}
    if magic not in orders:
        raise SystemExit(f"{source}: not a classic pcap file (pcapng cannot be cut here)")
    order, unit = orders[magic]
    record = struct.Struct(order + "IIII")
    out = [data[:24]]
    start = None
    offset = 24
    while offset + record.size <= len(data):
        sec, frac, caplen, _ = record.unpack_from(data, offset)
        end = offset + record.size + caplen
        if end > len(data):
            break  # a truncated last record: dropped, as a reader would
        t = sec + frac * unit
        if start is None:
            start = t
        if t - start >= seconds:
            out.append(data[offset:end])
        offset = end
    with open(target, "wb") as f:
        f.write(b"".join(out))


def measure(events, port_owner):
    def pid_of(client):
        return port_owner.get(int(client.rsplit(":", 1)[1]))

    owner_pid = {}
    for e in events:
        if e["event"] in COMMAND_EVENTS and e.get("owner") and e.get("client"):
            pid = pid_of(e["client"])
            if pid is not None:
                owner_pid.setdefault(e["owner"], pid)
    result = {"right": 0, "wrong": 0, "unlinked": 0, "unknown_truth": 0, "wrong_by_confidence": {},
              "anomalies": {}, "subscriber_events": 0}
    for e in events:
        if e["event"] == "anomaly":
            result["anomalies"][e["kind"]] = result["anomalies"].get(e["kind"], 0) + 1
        if e["event"] not in SUBSCRIBER_EVENTS:
            continue
        result["subscriber_events"] += 1
        truth = pid_of(e["client"])
        if not e.get("owner"):
            result["unlinked"] += 1
            continue
        claimed = owner_pid.get(e["owner"])
        if truth is None or claimed is None:
            result["unknown_truth"] += 1
        elif truth & claimed:
            result["right"] += 1
        else:
            result["wrong"] += 1
            c = e.get("confidence", "none")
            result["wrong_by_confidence"][c] = result["wrong_by_confidence"].get(c, 0) + 1
    return result


def add_results(a, b):
    """The sum of two measures (a sweep of cuts)."""
    total = {}
    for key, value in a.items():
        if isinstance(value, dict):
            merged = dict(value)
            for k, n in b[key].items():
                merged[k] = merged.get(k, 0) + n
            total[key] = merged
        else:
            total[key] = value + b[key]
    return total


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["lockscope", "redisson"])
    ap.add_argument("--lockscope", required=True, help="the lockscope CLI")
    ap.add_argument("--source", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
    ap.add_argument("--rounds", type=int, default=12)
    ap.add_argument("--jvms", type=int, default=3)
    ap.add_argument("--workers", type=int, default=3)
    ap.add_argument("--release", default="3.27.2")
    ap.add_argument("--stagger", type=float, default=0.0, help="redisson: seconds between the JVMs' starts")
    ap.add_argument("--keep", help="copy the recording (and its truth, PCAP.owners.json) here")
    ap.add_argument("--pcap", help="analyze this recording (with PCAP.owners.json) instead of recording")
    ap.add_argument("--truth", help="with --pcap: the processes' own log (JSONL `connections` events: conn, sub_conn)")
    ap.add_argument("--cut-seconds", type=float, default=0.0,
                    help="with --pcap: analyze the recording without its first N seconds (joined mid-run)")
    ap.add_argument("--sweep-cuts", help="with --pcap: a comma-separated list of cuts (seconds), each analyzed as "
                                         "its own capture joined mid-run; --check judges their sum")
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--min-right", type=float, default=0.98, help="--check: the share of subscriber events right")
    ap.add_argument("--anomalies", choices=["all", "links", "none"], default="all",
                    help="--check: no anomaly at all, none resting on a link (subscription_lost, woken_by_timeout), "
                         "or no check (a recording with real lost wake-ups)")
    args = ap.parse_args()
    for tool in ("redis-server", "tcpdump", "ss"):
        if args.pcap is None and shutil.which(tool) is None:
            skip(f"no {tool}")
    with tempfile.TemporaryDirectory() as work:
        if args.pcap and args.truth:
            # A recording's own truth file: each process logged its connections.
            pcap = args.pcap
            port_owner = {}
            with open(args.truth) as f:
                for line in f:
                    e = json.loads(line)
                    if e.get("event") != "connections":
                        continue
                    for key in ("conn", "sub_conn"):
                        if e.get(key):
                            port_owner[int(e[key].rsplit(":", 1)[1])] = frozenset([e["proc"]])
        elif args.pcap:
            pcap = args.pcap
            with open(pcap + ".owners.json") as f:
                port_owner = {int(k): frozenset(v) for k, v in json.load(f).items()}
        else:
            pcap = os.path.join(work, "capture.pcap")
            redis, port = start_redis(work)
            try:
                dump = start_tcpdump(work, port, pcap)
                with PortOwners(port) as owners:
                    if args.mode == "lockscope":
                        run_lockscope(args.lockscope, port, args.rounds, owners)
                    else:
                        run_redisson(args.source, work, port, args.jvms, args.workers, args.rounds, args.release,
                                     args.stagger)
                time.sleep(0.5)
                dump.terminate()
                dump.wait()
            finally:
                redis.kill()
                redis.wait()
            port_owner = owners.owner
            if args.keep:
                shutil.copy(pcap, args.keep)
                with open(args.keep + ".owners.json", "w") as f:
                    json.dump({str(k): sorted(v) for k, v in sorted(port_owner.items())}, f, indent=0)
        cuts = [float(c) for c in args.sweep_cuts.split(",")] if args.sweep_cuts else [args.cut_seconds]
        result = None
        for seconds in cuts:
            source = pcap
            if args.pcap and seconds > 0:
                source = os.path.join(work, "cut.pcap")
                cut_pcap(pcap, source, seconds)
            out = subprocess.run([args.lockscope, "analyze", source, "--format", "jsonl"], capture_output=True,
                                 text=True, check=True).stdout
            events = [json.loads(line) for line in out.splitlines() if line.strip()]
            one = measure(events, port_owner)
            if args.sweep_cuts:
                print(f"cut {seconds:g} s:", json.dumps(one, sort_keys=True))
            result = one if result is None else add_results(result, one)
    linked = result["right"] + result["wrong"] + result["unlinked"]
    result["right_share"] = round(result["right"] / linked, 4) if linked else 1.0
    print(json.dumps(result, sort_keys=True))
    if not args.check:
        return
    failures = []
    if linked == 0:
        failures.append("no subscriber event was seen")
    if result["right_share"] < args.min_right:
        failures.append(f"only {result['right']} of {linked} subscriber events name the right process")
    high = {c: n for c, n in result["wrong_by_confidence"].items() if c not in ("low", "none")}
    if high:
        failures.append(f"wrong links above low: {high}")
    link_kinds = ("subscription_lost", "woken_by_timeout")
    found = {k: n for k, n in result["anomalies"].items()
             if args.anomalies == "all" or (args.anomalies == "links" and k in link_kinds)}
    if found:
        failures.append(f"anomalies in plain contention: {found}")
    for f in failures:
        print("FAIL:", f)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
