#!/usr/bin/env python3
"""Extracts every Lua lock script Redisson sends, release by release, from the Java
source of each release tag of redisson/redisson (a git directory with its tags).

    extract_scripts.py GIT_DIR > tests/redisson/redisson_scripts.json

For each tag redisson-3.10.0 ... redisson-4.7.x, every Java file of the lock classes
(org/redisson/Redisson*Lock*.java and org/redisson/renewal/*.java) is tokenised; each
chain of Java string literals joined by `+` whose text runs `redis.call` is a script.
The chain is joined exactly as javac does (escapes resolved, nothing else changed), so
the text is the bytes Redisson sends after EVAL and its SHA1 is what EVALSHA names.
Beside the text the script records where it came from (class, method, the Redis
command constant) and what the Java call passes as KEYS and ARGV: these, not
lockscope's classifier, are the truth the tests compare the recogniser with.

The output groups the scripts by distinct text: one entry per text with every release
that sends it. Exit status 1 when a script chain has a non-literal operand (the bytes
would then depend on run-time values; none does from 3.10 to 4.7).
"""
import hashlib
import json
import re
import subprocess
import sys

TAG = re.compile(r"^redisson-(\d+)\.(\d+)\.(\d+)$")


def git(git_dir, *args):
    return subprocess.run(["git", "--git-dir", git_dir, *args], check=True, capture_output=True).stdout


def releases(git_dir):
    tags = []
    for t in git(git_dir, "tag").decode().split():
        m = TAG.match(t)
        if m:
            v = tuple(int(x) for x in m.groups())
            if (3, 10, 0) <= v < (4, 8, 0):
                tags.append((v, t))
    return [t for _, t in sorted(tags)]


def lock_files(git_dir, tag):
    names = git(git_dir, "ls-tree", "-r", "--name-only", tag, "--", "redisson/src/main/java/org/redisson/").decode().split("\n")
    out = []
    for n in names:
        base = n.rsplit("/", 1)[-1]
        if n.startswith("redisson/src/main/java/org/redisson/renewal/") and base.endswith(".java"):
            out.append(n)
        elif n.count("/") == 6 and re.match(r"Redisson\w*Lock\w*\.java$", base):
            out.append(n)
    return out


# ---- a Java tokenizer: enough for string literals, comments, brackets and commas ----

def unescape(body):
    out, i = [], 0
    while i < len(body):
        c = body[i]
        if c != "\\":
            out.append(c)
            i += 1
            continue
        n = body[i + 1]
        if n in "btnfr\"'\\s":
            out.append({"b": "\b", "t": "\t", "n": "\n", "f": "\f", "r": "\r", "s": " "}.get(n, n))
            i += 2
        elif n == "u":
            j = i + 1
            while body[j] == "u":
                j += 1
            out.append(chr(int(body[j:j + 4], 16)))
            i = j + 4
        elif n in "01234567":
            j = i + 1
            while j < len(body) and j < i + 4 and body[j] in "01234567":
                j += 1
            out.append(chr(int(body[i + 1:j], 8)))
            i = j
        else:
            raise ValueError("bad escape \\" + n)
    return "".join(out)


def tokens(src):
    """(kind, text, offset): kind in str, chr, id, num, op."""
    i, n = 0, len(src)
    while i < n:
        c = src[i]
        if c.isspace():
            i += 1
        elif src.startswith("//", i):
            i = src.find("\n", i)
            i = n if i < 0 else i
        elif src.startswith("/*", i):
            i = src.index("*/", i + 2) + 2
        elif src.startswith('"""', i):
            raise ValueError("text block at %d" % i)
        elif c == '"' or c == "'":
            j = i + 1
            while src[j] != c:
                j += 2 if src[j] == "\\" else 1
            yield ("str" if c == '"' else "chr", src[i + 1:j], i)
            i = j + 1
        elif c.isalpha() or c in "_$":
            j = i
            while j < n and (src[j].isalnum() or src[j] in "_$"):
                j += 1
            yield ("id", src[i:j], i)
            i = j
        elif c.isdigit():
            j = i
            while j < n and (src[j].isalnum() or src[j] in "._"):
                j += 1
            yield ("num", src[i:j], i)
            i = j
        else:
            yield ("op", c, i)
            i += 1


def source_text(toks, a, b):
    """Java source of tokens [a, b) with single spaces, for the records of arguments."""
    parts = []
    for kind, text, _ in toks[a:b]:
        parts.append('"%s"' % text if kind == "str" else text)
    s = " ".join(parts)
    return re.sub(r" ?([().,<>\[\]]) ?", r"\1", s)


def scripts_of(src, cls, tag):
    toks = list(tokens(src))
    # Method spans: at brace depth 1 (the class body), `id ( ... ) [throws ...] {`.
    depth, method_at, method_start = 0, {}, {}
    current, pending, pending_at, current_at = None, None, 0, 0
    for k, (kind, text, off) in enumerate(toks):
        if kind == "op" and text == "{":
            if depth == 1 and pending is not None:
                current, current_at = pending, pending_at
            depth += 1
            pending = None
        elif kind == "op" and text == "}":
            depth -= 1
            if depth == 1:
                current = None
        elif depth == 1 and kind == "id" and k + 1 < len(toks) and toks[k + 1][1] == "(" and text not in ("new", "if", "for", "while", "switch", "catch", "synchronized", "return"):
            pending, pending_at = text, off
        elif depth == 1 and kind == "op" and text in ";=":
            pending = None
        method_at[k] = current
        method_start[k] = current_at
    found, errors = [], []
    k = 0
    while k < len(toks):
        if toks[k][0] != "str":
            k += 1
            continue
        a = k
        parts = [unescape(toks[k][1])]
        dynamic = False
        while k + 2 < len(toks) and toks[k + 1][1] == "+":
            if toks[k + 2][0] == "str":
                parts.append(unescape(toks[k + 2][1]))
                k += 2
            else:
                dynamic = True
                break
        if a > 0 and toks[a - 1][1] == "+":
            dynamic = True
        b = k + 1
        k += 1
        text = "".join(parts)
        if "redis.call" not in text and "redis.pcall" not in text:
            continue
        if dynamic:
            errors.append("%s %s: a script chain with a non-literal operand at offset %d" % (tag, cls, toks[a][2]))
        # The call that takes the script: walk back to its '(' and forward to its ')'.
        d, o = 0, a - 1
        while o >= 0:
            t = toks[o][1]
            if t in ")]}":
                d += 1
            elif t in "([{":
                if d == 0:
                    break
                d -= 1
            o -= 1
        callee = toks[o - 1][1] if o > 0 else ""
        args, d, s = [], 0, o + 1
        e = o + 1
        while e < len(toks):
            t = toks[e][1] if toks[e][0] == "op" else None
            if t in ("(", "[", "{"):
                d += 1
            elif t in (")", "]", "}"):
                if d == 0:
                    args.append((s, e))
                    break
                d -= 1
            elif t == "," and d == 0:
                args.append((s, e))
                s = e + 1
            e += 1
        script_arg = next(i for i, (x, y) in enumerate(args) if x <= a < y)
        before = [source_text(toks, x, y) for x, y in args[:script_arg]]
        after = [source_text(toks, x, y) for x, y in args[script_arg + 1:]]
        command = next((x for x in before if "RedisCommands." in x or x == "command"), before[-1] if before else "")
        if command == "command":
            # tryLockInnerAsync(..., command): the branch's `if (command == RedisCommands.X)`.
            tests = re.findall(r"command\s*==\s*RedisCommands\.(\w+)", src[method_start.get(a, 0):toks[a][2]])
            command = "RedisCommands." + tests[-1] if tests else "command"
        keys_expr = after[0] if after else ""
        found.append({
            "text": text,
            "class": cls,
            "method": method_at.get(a),
            "callee": callee,
            "command": command,
            "keys": split_list(keys_expr),
            "argv": after[1:],
        })
    return found, errors


def split_list(expr):
    """KEYS as the Java call passes them: Arrays.asList(a, b) / singletonList(a) → [a, b];
    any other expression (a list built at run time) → [expr] marked dynamic."""
    m = re.match(r"^(?:Arrays\.(?:<\w+>)?asList|Collections\.(?:<\w+>)?singletonList|List\.of)\((.*)\)$", expr)
    if not m:
        return {"dynamic": expr}
    out, d, s, body = [], 0, 0, m.group(1)
    for i, c in enumerate(body):
        if c in "([{<":
            d += 1 if c != "<" else 0
        elif c in ")]}":
            d -= 1
        elif c == "," and d == 0:
            out.append(body[s:i].strip())
            s = i + 1
    out.append(body[s:].strip())
    return out


# ---- each script's role, from the Java method that sends it ----

# (class, method, command) → (lock type, role). The command tells apart the fair lock's
# two acquires: tryLock() without arguments sends EVAL_NULL_BOOLEAN (nil = acquired,
# 1 = busy), the others EVAL_LONG (nil = acquired, integer = ms to wait).
TYPES = {
    "RedissonLock": "lock", "RedissonBaseLock": "lock", "LockTask": "lock",
    "RedissonFairLock": "fair", "RedissonReadLock": "read", "ReadLockTask": "read",
    "RedissonWriteLock": "write", "RedissonSpinLock": "spin", "RedissonFencedLock": "fenced",
    "RedissonFasterMultiLock": "faster_multi", "FastMultilockTask": "faster_multi",
    "RedissonNonReentrantLock": "non_reentrant", "RedissonNonReentrantFairLock": "non_reentrant_fair",
}


def role_of(cls, method, command):
    if cls in ("LockTask", "ReadLockTask"):
        return "renew_batch"
    if cls == "FastMultilockTask":
        return "renew"
    if method == "tryLockInnerAsync":
        if command == "RedisCommands.EVAL_NULL_BOOLEAN":
            return "try_acquire"
        if command == "RedisCommands.EVAL_LONG_LIST":
            return "acquire_token"
        return "acquire"
    return {
        "tryLockOnceInnerAsync": "acquire_once",
        "unlockInnerAsync": "unlock",
        "forceUnlockAsync": "force_unlock",
        "renewExpirationAsync": "renew",
        "acquireFailedAsync": "acquire_failed",
        "expireAsync": "expire", "expireAtAsync": "expire", "clearExpireAsync": "expire",
        "isLocked": "query", "isLockedAsync": "query", "isHeldByThreadAsync": "query",
    }[method]


# The calls whose ARGV is a list built before the call (`params.toArray()`,
# `args.toArray()`): positions read from the `params.add(...)` lines of each method
# (RedissonFasterMultiLock 3.38.0 and 4.7.0, renewal/*Task.java 3.44.0 and 4.7.0).
#   (class, method) → (owner ARGV, lease ARGV)
BUILT_ARGV = {
    ("RedissonFasterMultiLock", "tryLockInnerAsync"): (3, 1),      # lease, now, owner, fields...
    ("RedissonFasterMultiLock", "tryLockOnceInnerAsync"): (3, 2),  # now, lease, owner, fields...
    ("RedissonFasterMultiLock", "unlockInnerAsync"): (1, 3),       # owner, message, lease, publish, timeout, now, fields...
    ("RedissonFasterMultiLock", "forceUnlockAsync"): (0, 0),       # message, publish, fields...
    ("RedissonFasterMultiLock", "renewExpirationAsync"): (1, 2),   # owner, lease, now, fields... (3.38-3.43)
    ("RedissonFasterMultiLock", "isLockedAsync"): (0, 0),
    ("RedissonFasterMultiLock", "isHeldByThreadAsync"): (0, 0),
    ("FastMultilockTask", "renew"): (3, 1),                        # lease, now, owner, fields...
    ("FastMultilockTask", "buildChunk"): (3, 1),
    ("LockTask", "renew"): (2, 1),                                 # lease, owner of KEYS[1], of KEYS[2]...
    ("LockTask", "buildChunk"): (2, 1),
    ("ReadLockTask", "renew"): (2, 1),                             # KEYS: name, prefix per lock; ARGV: lease, owners
    ("ReadLockTask", "buildChunk"): (2, 1),                        # 4.4+: lease, then per lock a count and its owners
}

LEASES = ("internalLockLeaseTime", "unit.toMillis(leaseTime)")


def positions(s):
    """1-based KEYS/ARGV positions from the Java call's arguments (0 = none)."""
    keys = s["keys"] if isinstance(s["keys"], list) else []
    argv = s["argv"]

    def find(items, pred):
        return next((i + 1 for i, x in enumerate(items) if pred(x)), 0)

    lock = find(keys, lambda k: k in ("getName()", "getRawName()", "firstName"))
    if not isinstance(s["keys"], list):
        lock = 1  # LockTask / ReadLockTask: every KEYS (every other one) is a lock
    channel = find(keys, lambda k: k == "getChannelName()")
    latch = find(keys, lambda k: k.startswith("getUnlockLatchName"))
    if (s["class"], s["method"]) in BUILT_ARGV:
        owner, lease = BUILT_ARGV[(s["class"], s["method"])]
    else:
        owner = find(argv, lambda a: a == "getLockName(threadId)")
        lease = find(argv, lambda a: a in LEASES)
    return {"lock_key": lock, "channel_key": channel, "latch_key": latch, "owner_argv": owner, "lease_argv": lease}


def version(v):
    return tuple(int(x) for x in v.split("."))


def cpp_string(text):
    out, line = [], ""
    for ch in text:
        e = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\t": "\\t"}.get(ch)
        if e is None:
            e = ch if 32 <= ord(ch) < 127 else "\\%03o" % ord(ch)
        line += e
        if len(line) >= 96 and ch == " ":
            out.append('"%s"' % line)
            line = ""
    if line or not out:
        out.append('"%s"' % line)
    return "\n        ".join(out)


def write_catalogue(data, path):
    """lock/src/redisson_catalogue.inc: one row per (text, lock type, role) and range of
    releases, in lock/include/lockscope/lock/scripts.hpp's redisson_script layout."""
    rows = []
    for s in data["scripts"]:
        p = s["positions"]
        rows.append("    {\"%s\", \"%s\", redisson_lock_type::%s, redisson_role::%s, \"%s\",\n        %s,\n        \"%s\", %d, %d, %d, %d, %d},"
                    % (s["releases"][0], s["releases"][-1], s["type"], s["role"], " ".join(s["sources"]),
                       cpp_string(s["text"]), s["sha1"], p["lock_key"], p["channel_key"], p["latch_key"],
                       p["owner_argv"], p["lease_argv"]))
    with open(path, "w") as f:
        f.write("// Generated by tests/redisson/extract_scripts.py from the redisson/redisson release tags\n"
                "// %s to %s (%d releases); do not edit. Every lock script of every release, byte for\n"
                "// byte, with the releases that send it and its KEYS/ARGV positions as the Java call\n"
                "// passes them. Included by scripts.cpp.\n" % (data["releases"][0], data["releases"][-1], len(data["releases"])))
        f.write("\n".join(rows) + "\n")


def main():
    git_dir = sys.argv[1]
    cpp_out = sys.argv[2] if len(sys.argv) > 2 else None
    by_text, errors = {}, []
    tags = releases(git_dir)
    for tag in tags:
        for path in lock_files(git_dir, tag):
            src = git(git_dir, "show", "%s:%s" % (tag, path)).decode("utf-8")
            if "redis.call" not in src:
                continue
            cls = path.rsplit("/", 1)[-1][:-5]
            found, errs = scripts_of(src, cls, tag)
            errors += errs
            for s in found:
                s["type"] = TYPES[s["class"]]
                s["role"] = role_of(s["class"], s["method"], s["command"])
                s["positions"] = positions(s)
                # One entry per (text, lock type, role): the same text sent by another
                # method of the same role (a renewal moved to another class) joins it.
                key = (s["text"], s["type"], s["role"])
                entry = by_text.setdefault(key, dict(s, releases=[], sources=[]))
                if entry["positions"] != s["positions"]:
                    errors.append("%s %s.%s: positions differ from %s.%s" % (tag, s["class"], s["method"], entry["class"], entry["method"]))
                where = "%s.%s" % (s["class"], s["method"])
                if where not in entry["sources"]:
                    entry["sources"].append(where)
                if tag[len("redisson-"):] not in entry["releases"]:
                    entry["releases"].append(tag[len("redisson-"):])
    all_releases = [t[len("redisson-"):] for t in tags]
    out = []
    for (text, _, _), e in by_text.items():
        e["sha1"] = hashlib.sha1(text.encode("utf-8")).hexdigest()
        cls, method = e.pop("class"), e.pop("method")
        # One row per unbroken range of releases (a text that comes back later gets two).
        first = all_releases.index(e["releases"][0])
        run = all_releases[first:first + len(e["releases"])]
        if run != e["releases"]:
            errors.append("%s.%s %s: releases not contiguous: %s" % (cls, method, e["sha1"], e["releases"]))
        out.append(e)
    order = list(dict.fromkeys(TYPES.values()))
    out.sort(key=lambda e: (order.index(e["type"]), e["role"], version(e["releases"][0]), e["sha1"]))
    data = {"releases": all_releases, "scripts": out}
    json.dump(data, sys.stdout, indent=1, ensure_ascii=False)
    sys.stdout.write("\n")
    if cpp_out:
        write_catalogue(data, cpp_out)
    for e in errors:
        print(e, file=sys.stderr)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
