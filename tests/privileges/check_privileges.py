#!/usr/bin/python3
"""Least privilege of live capture (`-Z USER`, the default drop to nobody, --no-drop,
and a non-root start holding only CAP_NET_RAW as systemd's AmbientCapabilities gives).

For each variant: a real redis-server on a free loopback port, `lockscope analyze -i lo`
on that port; once it listens, /proc/<pid>/status must show the expected Uid/Gid/Groups
and no capabilities (CapEff, CapPrm, CapInh, CapAmb all zero); then redis-cli takes and
releases a lock, and the analyzer, stopped with SIGINT, must have printed those events:
it still captures after dropping. Also: `decode -i` drops too, `-o` is created as the
new user, a live `--format trace -o` is valid JSON with the hold as a span, and an
unknown user is an error naming it. Needs root (exit 77 = skipped otherwise).

usage: check_privileges.py LOCKSCOPE WORK_DIR
"""
import grp
import json
import os
import pwd
import signal
import subprocess
import sys
import tempfile
import time

# The shared fixtures of the Python tests (tests/support/python).
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support", "python"))
from redis_fixture import Redis  # noqa: E402


SKIP = 77
TARGET_USER = "daemon"  # exists on every Debian system, not root, owns nothing we need


def status(pid):
    fields = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            k, _, v = line.partition(":")
            fields[k] = v.split()
    return fields


def start_analyzer(cmd, stderr_path):
    err = open(stderr_path, "w+")
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, text=True)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        err.seek(0)
        if "listening on lo" in err.read():
            return proc, err
        if proc.poll() is not None:
            break
        time.sleep(0.05)
    err.seek(0)
    proc.kill()
    raise SystemExit(f"analyzer did not start: {cmd}\n{err.read()}")


def wait_for(pid, pred, what):
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        s = status(pid)
        if pred(s):
            return s
        time.sleep(0.02)
    shown = {k: s[k] for k in ("Uid", "Gid", "Groups", "CapInh", "CapPrm", "CapEff", "CapAmb")}
    raise AssertionError(f"{what}: /proc/{pid}/status has {shown}")


def run_variant(name, redis, work, prefix, extra, expect_uid, expect_gid, expect_caps_zero, notice=None,
                command="analyze"):
    lock = f"priv:{name}"
    args = [*prefix, LOCKSCOPE, command, "-i", "lo", "--port", str(redis.port), "--format", "jsonl", *extra]
    if command == "analyze":
        args += ["--no-summary"]
    proc, err = start_analyzer(args, os.path.join(work, f"{name}.stderr"))
    try:
        want_groups = None
        if expect_uid != 0:
            user = pwd.getpwuid(expect_uid)
            want_groups = sorted(os.getgrouplist(user.pw_name, user.pw_gid))
        s = wait_for(proc.pid, lambda s: int(s["Uid"][0]) == expect_uid and (not expect_caps_zero or
                                                                             int(s["CapEff"][0], 16) == 0),
                     f"{name}: uid {expect_uid}")
        assert [int(x) for x in s["Uid"]] == [expect_uid] * 4, f"{name}: Uid {s['Uid']}"
        assert [int(x) for x in s["Gid"]] == [expect_gid] * 4, f"{name}: Gid {s['Gid']}"
        if want_groups is not None:
            assert sorted(int(g) for g in s["Groups"]) == want_groups, f"{name}: Groups {s['Groups']} != {want_groups}"
        caps = {k: int(s[k][0], 16) for k in ("CapEff", "CapPrm", "CapInh", "CapAmb")}
        if expect_caps_zero:
            assert all(v == 0 for v in caps.values()), f"{name}: capabilities left {caps}"
        else:
            assert caps["CapEff"] != 0, f"{name}: --no-drop lost the capabilities {caps}"
        # It still captures: a lock taken and released through a real server.
        assert redis.cli("SET", lock, "token-1", "NX", "PX", "10000").strip() == "OK"
        assert redis.cli("EVAL", "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) "
                         "else return 0 end", "1", lock, "token-1").strip() == "1"
        time.sleep(0.5)
    finally:
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=15)
    err.seek(0)
    stderr = err.read()
    assert proc.returncode == 0, f"{name}: exit {proc.returncode}\n{stderr}"
    if notice is not None:
        assert (notice in stderr) == (expect_uid != 0 and not extra), f"{name}: stderr {stderr!r}"
    if "-o" in extra:
        with open(extra[extra.index("-o") + 1]) as f:
            out = f.read()
    lines = [json.loads(line) for line in out.splitlines() if line.strip()]
    if command == "analyze":
        events = [(e["lock"], e["event"]) for e in lines if e.get("lock") == lock]
        assert (lock, "acquired") in events and (lock, "released") in events, f"{name}: captured {events}\n{stderr}"
    else:
        assert any(lock in json.dumps(e) for e in lines), f"{name}: decode printed nothing about {lock}:\n{out[:500]}"
    print(f"ok   {name}: uid {s['Uid'][0]} gid {s['Gid'][0]} groups {s['Groups']} caps {caps}; captured the lock")
    return stderr


def main():
    global LOCKSCOPE
    LOCKSCOPE, work = sys.argv[1], sys.argv[2]
    if os.geteuid() != 0:
        print("SKIPPED: needs root (live capture on lo, switching users); run the suite as root")
        sys.exit(SKIP)
    os.makedirs(work, exist_ok=True)
    os.chmod(work, 0o755)
    target = pwd.getpwnam(TARGET_USER)
    nobody = pwd.getpwnam("nobody")
    redis = Redis(tempfile.mkdtemp(dir=work))
    try:
        run_variant("Z", redis, work, [], ["-Z", TARGET_USER], target.pw_uid, target.pw_gid, True)
        run_variant("default", redis, work, [], [], nobody.pw_uid, nobody.pw_gid, True,
                    notice="running as `nobody`")
        run_variant("no-drop", redis, work, [], ["--no-drop"], 0, 0, False)
        # As docs/lockscope-analyze.service starts it: a plain user with CAP_NET_RAW in its
        # ambient set, the bounding set CAP_NET_RAW alone, no_new_privs.
        run_variant("ambient", redis, work,
                    ["setpriv", f"--reuid={target.pw_uid}", f"--regid={target.pw_gid}", "--init-groups",
                     "--inh-caps=+net_raw", "--ambient-caps=+net_raw", "--bounding-set=-all,+net_raw",
                     "--no-new-privs"], [], target.pw_uid, target.pw_gid, True)
        run_variant("decode", redis, work, [], ["-Z", TARGET_USER], target.pw_uid, target.pw_gid, True,
                    command="decode")
        # -o is created after the drop, as that user, in a directory it may write.
        outdir = tempfile.mkdtemp(dir=work)
        os.chmod(outdir, 0o777)
        out = os.path.join(outdir, "events.jsonl")
        run_variant("output", redis, work, [], ["-Z", TARGET_USER, "-o", out], target.pw_uid, target.pw_gid, True)
        st = os.stat(out)
        assert st.st_uid == target.pw_uid, f"-o file owned by uid {st.st_uid}, not {target.pw_uid}"
        assert not os.path.exists(out + ".tmp")
        assert any(json.loads(l)["event"] == "acquired" for l in open(out)), "-o file lacks the events"
        print(f"ok   output: {out} written by uid {st.st_uid} after the drop")
        # Live --format trace -o: valid JSON once stopped, the lock's hold as a span.
        trace = os.path.join(outdir, "live.trace.json")
        proc, err = start_analyzer([LOCKSCOPE, "analyze", "-i", "lo", "--port", str(redis.port), "--format", "trace",
                                    "-o", trace, "-Z", TARGET_USER], os.path.join(work, "trace.stderr"))
        try:
            wait_for(proc.pid, lambda s: int(s["Uid"][0]) == target.pw_uid, "trace: uid")
            assert redis.cli("SET", "priv:trace", "t", "NX", "PX", "10000").strip() == "OK"
            assert redis.cli("EVAL", "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) "
                             "else return 0 end", "1", "priv:trace", "t").strip() == "1"
            time.sleep(0.5)
        finally:
            proc.send_signal(signal.SIGINT)
            proc.communicate(timeout=15)
        assert proc.returncode == 0, f"trace: exit {proc.returncode}"
        with open(trace) as f:
            events = json.load(f)["traceEvents"]
        holds = [e for e in events if e["ph"] == "X" and e["name"] == "hold" and e["args"].get("lock") == "priv:trace"]
        assert len(holds) == 1 and holds[0]["args"]["event"] == "released", f"trace: {events}"
        print(f"ok   live trace: {len(events)} trace events, the hold of priv:trace as a {holds[0]['dur']} µs span")
        # An unknown user: a clear error naming it, and no capture run.
        r = subprocess.run([LOCKSCOPE, "analyze", "-i", "lo", "--port", str(redis.port), "-Z", "no-such-user-lockscope"],
                           capture_output=True, text=True, timeout=20)
        assert r.returncode == 2 and "unknown user 'no-such-user-lockscope'" in r.stderr, (r.returncode, r.stderr)
        print(f"ok   unknown user: exit 2, {r.stderr.strip().splitlines()[-1]!r}")
    finally:
        redis.stop()


if __name__ == "__main__":
    main()
