"""Shared by the python scenarios: a wall clock in microseconds and a JSONL truth writer
(the same line format as truth.js)."""
import json
import os
import threading
import time


def now_us():
    return time.time_ns() // 1000


class TruthLog:
    """One JSON object per line, flushed at once; safe to share between threads."""

    def __init__(self, path, **common):
        self._file = open(path, "a", buffering=1)
        self._common = common
        self._mutex = threading.Lock()

    def __call__(self, event, **fields):
        line = {"t_us": now_us(), **self._common, "event": event, **fields}
        with self._mutex:
            self._file.write(json.dumps(line, separators=(",", ":")) + "\n")
            self._file.flush()
            os.fsync(self._file.fileno())


def endpoint(client):
    """The local "ip:port" of a single-connection redis.Redis client ([ip]:port for IPv6)."""
    sock = client.connection._sock
    host, port = sock.getsockname()[:2]
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
