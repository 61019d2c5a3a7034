#!/usr/bin/python3
"""`lockscope analyze -o FILE`, for every format: the file holds exactly what stdout
would; an unwritable FILE is an error naming it (exit 2); a run that fails while
writing (here: RLIMIT_FSIZE, so write() fails with EFBIG) leaves neither FILE nor
FILE.tmp, and an earlier FILE untouched. A FILE that is a FIFO or a device is written
in place, never replaced by a regular file (`-o /dev/null` as root once replaced the
system's /dev/null); a symlink stays a symlink and its target gets the output.

usage: check_output.py LOCKSCOPE SOURCE_DIR WORK_DIR
"""
import os
import resource
import signal
import stat
import subprocess
import sys
import threading


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

    summary = subprocess.run([lockscope, "analyze", capture, "--summary"], check=True, capture_output=True).stdout

    # A named pipe: its reader gets the output, and it is still a pipe.
    fifo = os.path.join(work, "out.fifo")
    if os.path.lexists(fifo):
        os.unlink(fifo)
    os.mkfifo(fifo)
    got = []
    reader = threading.Thread(target=lambda: got.append(open(fifo, "rb").read()), daemon=True)
    reader.start()
    r = subprocess.run([lockscope, "analyze", capture, "--summary", "-o", fifo], capture_output=True, timeout=60)
    reader.join(timeout=20)
    assert r.returncode == 0 and got == [summary], (r.returncode, r.stderr, got[:1])
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode), "the FIFO was replaced"
    assert not os.path.exists(fifo + ".tmp"), f"{fifo}.tmp left"
    print(f"ok   -o FIFO: its reader got the {len(summary)} bytes; still a FIFO")

    # A character device: a private copy of /dev/null (1, 3), so that a regression
    # replaces only this node. Making one needs CAP_MKNOD (root); else skipped.
    null = os.path.join(work, "null")
    if os.path.lexists(null):
        os.unlink(null)
    try:
        os.mknod(null, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    except PermissionError:
        print("skip -o DEVICE: mknod needs CAP_MKNOD")
    else:
        for name, args in variants.items():
            r = subprocess.run([lockscope, "analyze", capture, *args, "-o", null], capture_output=True)
            assert r.returncode == 0, (name, r.returncode, r.stderr)
            assert stat.S_ISCHR(os.lstat(null).st_mode), f"{name}: the device node was replaced by a file"
            assert not os.path.exists(null + ".tmp"), f"{name}: {null}.tmp left"
        print("ok   -o DEVICE: every format written to a character device, still a device")

    # A symlink: the file it names gets the output, and the link stays.
    target = os.path.join(work, "target.txt")
    link = os.path.join(work, "link.txt")
    for p in (target, link):
        if os.path.lexists(p):
            os.unlink(p)
    with open(target, "w") as f:
        f.write("an earlier report\n")
    os.symlink("target.txt", link)
    r = subprocess.run([lockscope, "analyze", capture, "--summary", "-o", link], capture_output=True)
    assert r.returncode == 0, (r.returncode, r.stderr)
    assert os.path.islink(link) and os.readlink(link) == "target.txt", "the symlink was replaced"
    with open(target, "rb") as f:
        assert f.read() == summary, "the symlink's target did not get the output"
    assert not os.path.exists(target + ".tmp") and not os.path.exists(link + ".tmp")
    print("ok   -o SYMLINK: the target holds the output, the link stays")

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
