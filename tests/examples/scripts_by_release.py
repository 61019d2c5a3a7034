#!/usr/bin/python3
"""`lockscope scripts --redisson RELEASE` against Redisson's own Java source.

tests/redisson/redisson_scripts.json was extracted from every release tag's Java source
by tests/redisson/extract_scripts.py (not from lockscope). For each release here, every
row the command lists must print bytes whose SHA1 (hashlib's) is the row's, and those
bytes must be a script that release's source sends, with the same type and role; and
every lock script the release sends must be listed.

usage: scripts_by_release.py LOCKSCOPE SOURCE_DIR
"""
import hashlib
import json
import os
import subprocess
import sys

RELEASES = ["3.10.0", "3.13.3", "3.16.8", "3.19.0", "3.22.0", "3.24.0", "3.27.2", "3.38.0", "3.44.0", "4.4.0",
            "4.7.0"]


def run(lockscope, *args):
    return subprocess.run([lockscope, "scripts", *args], capture_output=True)


def main():
    lockscope, source = sys.argv[1], sys.argv[2]
    truth = json.load(open(os.path.join(source, "tests", "redisson", "redisson_scripts.json")))
    failures = []
    for release in RELEASES:
        listed = run(lockscope, "--redisson", release)
        if listed.returncode != 0:
            failures.append(f"{release}: exit {listed.returncode}: {listed.stderr.decode()}")
            continue
        rows = [line.split(None, 3) for line in listed.stdout.decode().splitlines()[1:]]
        sent = {}  # SHA1 -> {TYPE.ROLE}: one text may serve two types (RLock's and the spin lock's acquire)
        for s in truth["scripts"]:
            if release in s["releases"]:
                sent.setdefault(s["sha1"], set()).add(f"{s['type']}.{s['role']}")
        seen = set()
        for name, sha1, size, _ in rows:
            text = run(lockscope, "--redisson", release, name).stdout
            if hashlib.sha1(text).hexdigest() != sha1 or len(text) != int(size):
                failures.append(f"{release} {name}: the bytes printed are not the listed SHA1 {sha1} / {size} bytes")
            roles = sent.get(sha1)
            if roles is None:
                failures.append(f"{release} {name}: {sha1} is not a script Redisson {release}'s source sends")
                continue
            if name.split("#")[0] not in roles:
                failures.append(f"{release} {name}: Redisson's source has it as {', '.join(sorted(roles))}")
            seen.add((sha1, name.split("#")[0]))
        missing = [f"{r} {h[:8]}" for h, roles in sent.items() for r in roles
                   if (h, r) not in seen]
        if missing:
            failures.append(f"{release}: sent by Redisson, not listed: {', '.join(sorted(missing))}")
        print(f"Redisson {release}: {len(rows)} scripts listed, each Redisson's own bytes and role")
    bad = run(lockscope, "--redisson", "3.9.0")
    if bad.returncode != 64 or b"not a Redisson release from 3.10.0 to 4.7.0" not in bad.stderr:
        failures.append(f"--redisson 3.9.0: exit {bad.returncode}, {bad.stderr!r}")
    unknown = run(lockscope, "--redisson", "4.7.0", "lock.nope")
    if unknown.returncode != 64 or b"sends no script named 'lock.nope' (it sends: lock.acquire," not in unknown.stderr:
        failures.append(f"unknown name: exit {unknown.returncode}, {unknown.stderr!r}")
    for f in failures:
        print("FAIL:", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
