"""What the Python workers of the fifteenth held-out set (kombu_mutex_worker.py,
limits_worker.py) share: their truth log, one JSON line per event on stdout
({"t_us", "proc", ...}, t_us when the line is written), and a loopback address of their own
for every TCP connection the process opens (p1 from 127.0.0.11, ...), as processes on
separate hosts have (SAME_HOST=1: all from 127.0.0.1). Imported before the client's package,
so that its connections bind that address.
"""
import json
import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time

_out_lock = threading.Lock()


def now_us():
    return time.time_ns() // 1000


def write_line(o):
    with _out_lock:
        sys.stdout.write(json.dumps(o, separators=(",", ":")) + "\n")
        sys.stdout.flush()


def logger(proc):
    """log(**fields): a truth line of `proc` dated now."""
    def log(**o):
        line = {"t_us": now_us(), "proc": proc}
        line.update(o)
        write_line(line)
    return log


def connect_from_own_address(proc):
    own = "127.0.0.%d" % (10 + int(proc[-1])) if proc[-1].isdigit() and not os.environ.get("SAME_HOST") else "127.0.0.1"
    connect = socket.socket.connect

    def bound_connect(sock, address):
        if sock.family == socket.AF_INET:
            sock.bind((own, 0))
        return connect(sock, address)

    socket.socket.connect = bound_connect


def run_lives(script, port, proc, rounds, kill, lease_us):
    """The parent of a worker whose holders are killed with SIGKILL: runs the rounds in
    children (`script PORT PROC ROUNDS --life FROM KILL_ROUND`, each over its own
    connection), passing their lines on. A child that writes {"event": "kill_me", "round",
    "lock", "owner", "sent_us"} mid-hold is killed 20-300 ms later, so nothing is released;
    its key runs out its lease, logged as expired lease_us after the acquiring call was sent,
    and a new child goes on with the next rounds. `kill` is the round to kill in (-1: none)."""
    start = 0
    rng = random.Random()
    while start < rounds:
        child = subprocess.Popen([sys.executable, script, str(port), proc, str(rounds), "--life",
                                  str(start), str(kill)], stdout=subprocess.PIPE, text=True)
        nxt = rounds
        for line in child.stdout:
            o = json.loads(line)
            if o.get("event") != "kill_me":
                sys.stdout.write(line)
                sys.stdout.flush()
                continue
            time.sleep(rng.uniform(0.02, 0.3))
            child.send_signal(signal.SIGKILL)
            write_line({"t_us": o["sent_us"] + lease_us, "proc": proc, "event": "expired",
                        "lock": o["lock"], "owner": o["owner"], "killed": True})
            nxt = o["round"] + 1
            kill = -1
            break
        child.stdout.close()
        child.wait()
        start = nxt
