#!/usr/bin/python3
"""Runs the commands that README.md and docs/guide/*.md show, and checks their output.

usage: run_docs.py --lockscope PATH --source DIR [--embed-lock PATH] [--rules] [FILE.md ...]

FILE.md is relative to DIR (default: README.md and every docs/guide/*.md). With --rules,
the rules that keep the documents in shape are checked instead (see tests/docs/README.md).

A ```console block is a shell session: each line that starts with `$ ` is a command (a
line ending in `\\` continues on the next), and the lines up to the next command are its
expected stdout. The block runs as one bash script in a scratch directory where
captures/, docs/, examples/ and tests/ are the source tree's, with the lockscope under
test first on PATH, TZ=UTC. Every command must exit 0 (an example meant to fail shows its
status itself: `... || echo "exit status $?"`); the block's stdout must equal the
expected lines. In the expected lines, a line `...` stands for any number of lines and
`[...]` within a line for any text. A comment `<!-- doc-test: numbers-vary -->` just
before a block compares it with every run of digits read as one number, every duration
(digits with µs, ms or s) as one duration and every run of spaces as one space (live
traffic: ports, times), and two adjacent events less than 1 ms apart in either order (two
connections' packets of one moment).

A block whose commands name port 6379, `lockscope lock` (or `semaphore`, `latch`), `redis-cli` or `./embed_lock`
gets a fresh redis-server of its own on a free loopback port (FLUSHALL before each
block): 6379 in the commands becomes that port, and LOCKSCOPE_REDIS names it. 9479 (the
metrics port) becomes another free port. `./embed_lock` is --embed-lock, the built
examples/embed_lock.cpp. A block that captures live (`-i IFACE`, tcpdump) is skipped,
with a message, when the process may not capture (no CAP_NET_RAW).

```sh blocks are not run; each must be one of EXEMPT below, or the test fails. A ```cpp
block preceded by `<!-- doc-test: same-as FILE -->` must equal a run of FILE's lines.
"""
import argparse
import difflib
import glob
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

# The shared fixtures of the Python tests (tests/support/python).
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support", "python"))
from redis_fixture import Redis, free_port  # noqa: E402


# ```sh blocks that are shown and not run, by their first command, with the reason.
EXEMPT = {
    "make demo": "the set-up itself: it builds what this test runs",
    "cmake -S . -B build/lib": "a second build of the libraries (minutes); "
                               "package.find_package and package.add_subdirectory build consumers of them",
    "useradd --system": "changes the host (a user, a systemd unit); privileges.systemd_unit checks the unit",
}

BLOCK_TIMEOUT = 90
README_MAX_LINES = 240  # a user's guide: set-up, what it is, three tasks, links
DATE = re.compile(r"\b20\d\d-[01]\d-[0-3]\d\b")


def may_capture():
    """CAP_NET_RAW (bit 13) in the effective set."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("CapEff:"):
                return bool(int(line.split()[1], 16) & (1 << 13))
    return False


class Block:
    def __init__(self, path, line, lang, body, directives):
        self.path, self.line, self.lang, self.body, self.directives = path, line, lang, body, directives

    def where(self):
        return f"{self.path}:{self.line}"


def blocks_of(path, text):
    """Fenced blocks with their language, first line number and the doc-test directives
    in the comment lines right before them."""
    lines = text.split("\n")
    out = []
    i = 0
    while i < len(lines):
        m = re.match(r"^```(\S*)\s*$", lines[i])
        if not m:
            i += 1
            continue
        directives = []
        j = i - 1
        while j >= 0 and lines[j].startswith("<!--"):
            d = re.match(r"<!--\s*doc-test:\s*(.*?)\s*-->", lines[j])
            if d:
                directives.append(d.group(1))
            j -= 1
        start = i + 1
        i += 1
        while i < len(lines) and lines[i].rstrip() != "```":
            i += 1
        if i >= len(lines):
            raise SystemExit(f"{path}:{start}: a fenced block that never ends")
        out.append(Block(path, start, m.group(1), lines[start:i], directives))
        i += 1
    return out


def session(block):
    """[(command, [expected lines])] of a console block."""
    steps = []
    body = block.body
    k = 0
    while k < len(body):
        line = body[k]
        if line.startswith("$ "):
            command = line[2:]
            while command.endswith("\\") and k + 1 < len(body):
                k += 1
                command = command + "\n" + body[k]
            steps.append((command, []))
        elif not steps:
            raise SystemExit(f"{block.where()}: a console block must start with a `$ ` command")
        else:
            steps[-1][1].append(line)
        k += 1
    if not steps:
        raise SystemExit(f"{block.where()}: a console block without a `$ ` command")
    return steps


def expected_pattern(lines, loose):
    parts = []
    for line in lines:
        if line == "...":
            parts.append(r"(?:[^\n]*\n)*?")
            continue
        if loose:
            line = normalize_line(line)
        pieces = [re.escape(p) for p in line.split("[...]")]
        parts.append(r"[^\n]*".join(pieces) + r"\n")
    return re.compile("".join(parts))


def normalize_line(line):
    # A duration's unit varies with it (277µs one run, 1.7ms the next): any duration matches any.
    line = re.sub(r"\d+(?:\.\d+)?(?:µs|ms|s)\b", "0s", line)
    return re.sub(r" +", " ", re.sub(r"\d+", "0", line)).rstrip()


EVENT_TIME = re.compile(r"^\s*\+(\d+\.\d+)\s")


def swap_same_moment(expected, out_lines):
    """`out_lines` with each two adjacent events less than 10 ms apart (`+S.SSSSSS` first)
    swapped where the document shows them the other way round: live, a publish reaches its
    subscriber and the unlock's reply its client in one turn of the server, on two
    connections, captured in either order (microseconds apart on an idle machine, 1.7 ms
    seen in CI with both cores busy). Only for a document without `...` (lines align one
    to one)."""
    if "..." in expected or len(expected) != len(out_lines):
        return out_lines
    def fits(pattern_line, line):
        return expected_pattern([pattern_line], True).fullmatch(normalize_line(line) + "\n") is not None
    def time_of(line):
        m = EVENT_TIME.match(line)
        return float(m.group(1)) if m else None
    out = list(out_lines)
    i = 0
    while i + 1 < len(out):
        a, b = time_of(out[i]), time_of(out[i + 1])
        if (a is not None and b is not None and abs(b - a) < 0.010 and not fits(expected[i], out[i]) and
                fits(expected[i], out[i + 1]) and fits(expected[i + 1], out[i])):
            out[i], out[i + 1] = out[i + 1], out[i]
            i += 2
        else:
            i += 1
    return out


def normalize(text, loose, expected=()):
    if not loose:
        return text
    return "".join(normalize_line(l) + "\n" for l in swap_same_moment(list(expected), text.splitlines()))


def needs_redis(commands):
    return any(re.search(r"6379|lockscope (?:lock|semaphore|latch)|redis-cli|\./embed_lock", c) for c in commands)


def needs_capture(commands):
    return any(re.search(r"(^|\s)-i\s|\btcpdump\b", c) for c in commands)


class Runner:
    def __init__(self, args):
        self.args = args
        self.source = os.path.abspath(args.source)
        self.lockscope = os.path.abspath(args.lockscope)
        self.embed = os.path.abspath(args.embed_lock) if args.embed_lock else None
        self.failures = 0
        self.ran = 0
        self.skipped = 0
        self.capture = may_capture()

    def work_dir(self):
        work = tempfile.mkdtemp(prefix="lockscope-docs-")
        for name in ("captures", "docs", "examples", "tests"):
            os.symlink(os.path.join(self.source, name), os.path.join(work, name))
        return work

    def env(self, redis, work):
        env = dict(os.environ)
        bin_dir = os.path.join(work, ".bin")
        os.makedirs(bin_dir, exist_ok=True)
        target = os.path.join(bin_dir, "lockscope")
        if not os.path.exists(target):
            os.symlink(self.lockscope, target)
        env["PATH"] = bin_dir + os.pathsep + env.get("PATH", "/usr/bin:/bin")
        env["TZ"] = "UTC"
        env["LC_ALL"] = "C.UTF-8"
        env.pop("LOCKSCOPE_SENTINEL_PASSWORD", None)
        if redis:
            env["LOCKSCOPE_REDIS"] = f"redis://127.0.0.1:{redis.port}"
        else:
            env.pop("LOCKSCOPE_REDIS", None)
        return env

    def run_file(self, rel):
        path = os.path.join(self.source, rel)
        with open(path, encoding="utf-8") as f:
            text = f.read()
        work = self.work_dir()
        redis = None
        try:
            for block in blocks_of(rel, text):
                if block.lang == "console":
                    redis = self.run_console(block, work, redis)
                elif block.lang in ("sh", "bash", "shell", "shell-session"):
                    self.check_exempt(block)
                elif any(d.startswith("same-as ") for d in block.directives):
                    self.check_same_as(block)
                elif any(l.startswith(("$ ", "lockscope ", "sudo ")) for l in block.body):
                    self.fail(block, f"a command in a ```{block.lang or 'plain'} block is not run: "
                                     "make it a ```console block with its output")
        finally:
            if redis:
                redis.stop()
            shutil.rmtree(work, ignore_errors=True)

    def fail(self, block, message):
        self.failures += 1
        print(f"FAIL {block.where()}: {message}", flush=True)

    def check_exempt(self, block):
        first = next((l for l in block.body if l.strip() and not l.lstrip().startswith("#")), "")
        for prefix, reason in EXEMPT.items():
            if first.startswith(prefix):
                print(f"not run {block.where()}: `{prefix}`: {reason}", flush=True)
                return
        self.fail(block, f"a ```{block.lang} block is not run: make it a ```console block with its "
                         f"output, or add it to EXEMPT in tests/docs/run_docs.py with the reason ({first!r})")

    def check_same_as(self, block):
        name = next(d for d in block.directives if d.startswith("same-as ")).split(None, 1)[1]
        with open(os.path.join(self.source, name), encoding="utf-8") as f:
            file_lines = f.read().split("\n")
        n = len(block.body)
        if any(file_lines[i:i + n] == block.body for i in range(len(file_lines) - n + 1)):
            self.ran += 1
            print(f"ok {block.where()}: the same lines as {name}", flush=True)
        else:
            self.fail(block, f"the block is not a run of {name}'s lines: copy them again")

    def run_console(self, block, work, redis):
        steps = session(block)
        commands = [c for c, _ in steps]
        if needs_capture(commands) and not self.capture:
            self.skipped += 1
            print(f"SKIP {block.where()}: live capture needs CAP_NET_RAW (run as root)", flush=True)
            return redis
        if any("./embed_lock" in c for c in commands) and not self.embed:
            self.skipped += 1
            print(f"SKIP {block.where()}: no --embed-lock binary given", flush=True)
            return redis
        if needs_redis(commands):
            if redis is None:
                redis = Redis(work)
            redis.cli("FLUSHALL")
        metrics_port = str(free_port())
        script = ["exec 3>\"$DOCS_STATUS\""]
        for n, command in enumerate(commands):
            c = command
            if redis:
                c = c.replace("6379", str(redis.port))
            c = c.replace("9479", metrics_port)
            if self.embed:
                c = re.sub(r"(^|[\s;&|(])\./embed_lock\b", lambda m: m.group(1) + self.embed, c)
            script.append(c)
            script.append(f"echo \"{n} $?\" >&3")
        status_file = os.path.join(work, ".status")
        env = self.env(redis, work)
        env["DOCS_STATUS"] = status_file
        proc = subprocess.Popen(["bash", "-c", "\n".join(script) + "\n"], cwd=work, env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
        try:
            out, err = proc.communicate(timeout=BLOCK_TIMEOUT)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, err = proc.communicate()
            self.fail(block, f"timed out after {BLOCK_TIMEOUT} s\nstderr:\n{err.decode(errors='replace')}")
            return redis
        out_text = out.decode("utf-8", errors="replace")
        err_text = err.decode("utf-8", errors="replace")
        statuses = {}
        with open(status_file) as f:
            for line in f:
                n, s = line.split()
                statuses[int(n)] = int(s)
        problems = []
        for n, command in enumerate(commands):
            if n not in statuses:
                problems.append(f"`{command}` did not finish")
            elif statuses[n] != 0:
                problems.append(f"`{command}` exited {statuses[n]}")
        loose = "numbers-vary" in block.directives
        expected = [l for _, lines in steps for l in lines]
        if not expected_pattern(expected, loose).fullmatch(normalize(out_text, loose, expected)):
            diff = difflib.unified_diff(expected, out_text.splitlines(), "the document", "the output", lineterm="")
            problems.append("stdout differs from the document (`...` and `[...]` elide):\n" + "\n".join(diff))
        if problems:
            self.fail(block, "\n".join(problems) + ("\n--- stderr\n" + err_text if err_text else ""))
        else:
            self.ran += 1
            print(f"ok {block.where()}: {len(commands)} command(s)", flush=True)
        return redis

    def check_rules(self):
        docs = ["README.md", "CHANGELOG.md"] + sorted(
            os.path.relpath(p, self.source) for p in glob.glob(os.path.join(self.source, "docs", "**", "*.md"),
                                                              recursive=True))
        for rel in docs:
            path = os.path.join(self.source, rel)
            if not os.path.exists(path):
                self.failures += 1
                print(f"FAIL {rel}: missing", flush=True)
                continue
            with open(path, encoding="utf-8") as f:
                text = f.read()
            lines = text.split("\n")
            if rel == "README.md" and len(text.splitlines()) > README_MAX_LINES:
                self.failures += 1
                print(f"FAIL README.md: {len(text.splitlines())} lines, more than {README_MAX_LINES}", flush=True)
            if rel != "CHANGELOG.md":
                fenced = set()
                for b in blocks_of(rel, text):  # outputs may show a capture's own times
                    fenced.update(range(b.line + 1, b.line + 1 + len(b.body)))
                for n, line in enumerate(lines, 1):
                    if n not in fenced and DATE.search(line):
                        self.failures += 1
                        print(f"FAIL {rel}:{n}: a date in a user document (history goes to CHANGELOG.md)",
                              flush=True)
            for n, line in enumerate(lines, 1):
                for target in re.findall(r"\]\(([^)\s]+)\)", line):
                    if re.match(r"[a-z]+:", target) or target.startswith("#"):
                        continue
                    file_part = target.split("#", 1)[0]
                    resolved = os.path.normpath(os.path.join(os.path.dirname(path), file_part))
                    if not os.path.exists(resolved):
                        self.failures += 1
                        print(f"FAIL {rel}:{n}: link to {target}: no such file", flush=True)
            self.ran += 1
        print(f"checked {len(docs)} documents", flush=True)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--lockscope", required=True)
    parser.add_argument("--source", required=True)
    parser.add_argument("--embed-lock")
    parser.add_argument("--rules", action="store_true")
    parser.add_argument("files", nargs="*")
    args = parser.parse_args()
    runner = Runner(args)
    if args.rules:
        runner.check_rules()
    else:
        files = args.files or ["README.md"] + sorted(
            os.path.relpath(p, runner.source) for p in glob.glob(os.path.join(runner.source, "docs", "guide", "*.md")))
        for rel in files:
            runner.run_file(rel)
    print(f"{runner.ran} passed, {runner.failures} failed, {runner.skipped} skipped", flush=True)
    return 1 if runner.failures else 0


if __name__ == "__main__":
    sys.exit(main())
