#!/usr/bin/python3
"""docs/lockscope-analyze.service: the settings the README promises (a dedicated user,
no root, CAP_NET_RAW only, NoNewPrivileges, lockscope analyze -i as ExecStart), then,
when systemd-analyze is installed, `systemd-analyze verify` on a copy whose ExecStart
names the built binary (the shipped path need not exist here).

usage: check_unit.py UNIT LOCKSCOPE WORK_DIR
"""
import os
import re
import shutil
import subprocess
import sys


def parse(path):
    sections, current = {}, None
    with open(path) as f:
        for raw in f:
            line = raw.strip()
            if not line or line[0] in "#;":
                continue
            m = re.fullmatch(r"\[(\w+)\]", line)
            if m:
                current = sections.setdefault(m.group(1), {})
                continue
            key, sep, value = line.partition("=")
            if not sep or current is None:
                raise SystemExit(f"{path}: cannot parse {line!r}")
            current.setdefault(key.strip(), []).append(value.strip())
    return sections


def main():
    unit, lockscope, work = sys.argv[1:4]
    s = parse(unit)
    service = s.get("Service", {})
    one = lambda k: service.get(k, [None])[-1]
    problems = []
    if one("User") in (None, "root", "0"):
        problems.append(f"User={one('User')}: a dedicated unprivileged user is required")
    if one("AmbientCapabilities") != "CAP_NET_RAW":
        problems.append(f"AmbientCapabilities={one('AmbientCapabilities')}, want CAP_NET_RAW only")
    if one("CapabilityBoundingSet") != "CAP_NET_RAW":
        problems.append(f"CapabilityBoundingSet={one('CapabilityBoundingSet')}, want CAP_NET_RAW only")
    if one("NoNewPrivileges") != "yes":
        problems.append("NoNewPrivileges=yes missing")
    exec_start = one("ExecStart") or ""
    if not re.search(r"lockscope analyze -i \S+", exec_start) or "--no-drop" in exec_start:
        problems.append(f"ExecStart={exec_start!r}: want `lockscope analyze -i IFACE` without --no-drop")
    if "WantedBy" not in s.get("Install", {}):
        problems.append("[Install] WantedBy missing")
    if problems:
        raise SystemExit("\n".join(problems))
    print(f"ok   {unit}: User={one('User')}, CAP_NET_RAW only (ambient, bounding), NoNewPrivileges")
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        print("systemd-analyze not installed: verify skipped (keys checked above)")
        return
    os.makedirs(work, exist_ok=True)
    copy = os.path.join(work, os.path.basename(unit))
    with open(unit) as f, open(copy, "w") as out:
        out.write(re.sub(r"^ExecStart=\S+", f"ExecStart={lockscope}", f.read(), flags=re.M))
    r = subprocess.run([analyze, "verify", "--man=no", copy], capture_output=True, text=True)
    # Lines about the host (no systemd running, other units) are not the unit's.
    ours = [l for l in (r.stdout + r.stderr).splitlines() if os.path.basename(unit) in l]
    if r.returncode != 0 or ours:
        raise SystemExit(f"systemd-analyze verify: exit {r.returncode}\n{r.stdout}{r.stderr}")
    print("ok   systemd-analyze verify: no complaint")


if __name__ == "__main__":
    main()
