#!/usr/bin/python3
"""`lockscope analyze -o FILE`, for every format: the file holds exactly what stdout
would; an unwritable FILE is an error naming it (exit 2); a run that fails while
writing (here: RLIMIT_FSIZE, so write() fails with EFBIG) leaves neither FILE nor
FILE.tmp, and an earlier FILE untouched.

usage: check_output.py LOCKSCOPE SOURCE_DIR WORK_DIR
"""
import os
import resource
import signal
import subprocess
import sys


def main():
    lockscope, source, work = sys.argv[1:4]
    os.makedirs(work, exist_ok=True)
    capture = os.path.join(source, "captures/thirdparty/redisson.pcap")
    variants = {"text": [], "jsonl": ["--format", "jsonl"], "summary": ["--summary"], "trace": ["--format", "trace"]}
    for name, args in variants.items():
        stdout = subprocess.run([lockscope, "analyze", capture, *args], check=True, capture_output=True).stdout
        out = os.path.join(work, f"out.{name}")
        r = subprocess.run([lockscope, "analyze", capture, *args, "-o", out], capture_output=True)
        assert r.returncode == 0 and r.stdout == b"", (name, r.returncode, r.stdout[:200], r.stderr)
        with open(out, "rb") as f:
            written = f.read()
        assert written == stdout and len(written) > 100, f"{name}: -o wrote {len(written)} bytes, stdout {len(stdout)}"
        assert not os.path.exists(out + ".tmp"), f"{name}: {out}.tmp left"
        print(f"ok   -o, {name}: {len(written)} bytes, the same as stdout")

    missing = os.path.join(work, "no-such-dir", "out.txt")
    r = subprocess.run([lockscope, "analyze", capture, "-o", missing], capture_output=True, text=True)
    assert r.returncode == 2 and f"cannot write {missing}: No such file or directory" in r.stderr, (r.returncode, r.stderr)
    print(f"ok   unwritable: exit 2, {r.stderr.strip()!r}")

    # A write that fails midway: the earlier complete file stays, no partial one appears.
    out = os.path.join(work, "out.big")
    with open(out, "w") as f:
        f.write("an earlier complete report\n")

    def small_files():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # EFBIG instead of being killed
        resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))

    for name, args in variants.items():
        if name == "summary":
            continue  # smaller than the limit
        r = subprocess.run([lockscope, "analyze", capture, *args, "-o", out], capture_output=True, text=True,
                           preexec_fn=small_files)
        assert r.returncode == 2 and f"cannot write {out}: File too large" in r.stderr, (name, r.returncode, r.stderr)
        with open(out) as f:
            assert f.read() == "an earlier complete report\n", f"{name}: the earlier file was changed"
        assert not os.path.exists(out + ".tmp"), f"{name}: {out}.tmp left after the failure"
        print(f"ok   failed write, {name}: exit 2, {r.stderr.strip().splitlines()[-1]!r}; earlier file intact")


if __name__ == "__main__":
    main()
