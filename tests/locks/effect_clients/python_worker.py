"""What the Python workers of the fifteenth held-out set (kombu_mutex_worker.py,
limits_worker.py) share: their truth log, one JSON line per event on stdout
({"t_us", "proc", ...}, t_us when the line is written), and a loopback address of their own
for every TCP connection the process opens (p1 from 127.0.0.11, ...), as processes on
separate hosts have (SAME_HOST=1: all from 127.0.0.1). Imported before the client's package,
so that its connections bind that address.
"""
import json
import os
import socket
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
