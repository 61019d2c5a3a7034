"""A real redis-server on a free 127.0.0.1 port for the Python test scripts (never a
mock): started without persistence in a scratch folder, asked with redis-cli, stopped.

    from redis_fixture import Redis, free_port
    redis = Redis(work_dir)        # waits until it answers PING (10 s), else exits
    redis.cli("SET", "k", "v");  redis.stop()
"""
import socket
import subprocess
import time


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Redis:
    def __init__(self, work):
        self.port = free_port()
        self.proc = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
             "--dir", work], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if self.cli("PING").strip() == "PONG":
                return
            time.sleep(0.05)
        self.stop()
        raise SystemExit(f"redis-server did not start on 127.0.0.1:{self.port}")

    def cli(self, *args):
        return subprocess.run(["redis-cli", "-h", "127.0.0.1", "-p", str(self.port), *args],
                              capture_output=True, text=True).stdout

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
