#!/usr/bin/env python3
"""Checks that data flows one way through the libraries' includes.

  check_include_graph.py [SOURCE_DIR]        exit 0 when the graph is clean, 1 otherwise

Rules:
  1. Libraries form a chain: resp < lock < ingest < locks < live. A library includes
     only its own headers and those of earlier libraries (lock: only its scripts and
     naming, the one source of truth the analyzer shares with the client).
  2. Inside ingest and locks, every file belongs to a stage, and stages form a chain
     (below). A file includes only headers of its own stage or of earlier ones.
       ingest: capture < packet < tcp < session < output < pipeline
       locks:  vocabulary < recognize < pipe < timeline < groups < markers < output < pipeline
     A source file's stage is its folder (src/<stage>/). A public header's stage is the
     folder of the source file that implements it (the .cpp whose first include it is);
     a header no source implements takes its stage from HEADER_STAGES below.
  3. No include loop among the files (a header that reaches itself).
Each violation is printed with the file, the line and the rule.
"""
import os
import re
import sys

LIBRARIES = [  # (name, folder, include prefix) in data-flow order
    ("resp", "resp", "lockscope/resp/"),
    ("lock", "lock", "lockscope/lock/"),
    ("ingest", "analyzer/ingest", "lockscope/ingest/"),
    ("locks", "analyzer/locks", "lockscope/locks/"),
    ("live", "analyzer/live", "lockscope/live/"),
]
STAGES = {
    "ingest": ["capture", "packet", "tcp", "session", "output", "pipeline"],
    "locks": ["vocabulary", "recognize", "pipe", "timeline", "groups", "markers", "output", "pipeline"],
}
# Public headers with no source file of their own: the stage whose type they name.
HEADER_STAGES = {
    "lockscope/ingest/capture.hpp": "capture",
    "lockscope/ingest/clock_steps.hpp": "capture",
    "lockscope/ingest/counted.hpp": "capture",  # wording of counts: any stage may print one
    "lockscope/ingest/exchange.hpp": "session",
    "lockscope/ingest/short_bytes.hpp": "session",
    "lockscope/ingest/port_set.hpp": "packet",  # the server ports a segment is filtered by
    "lockscope/locks/command_words.hpp": "vocabulary",
}
# What the analyzer may include of the lock client: the scripts and their naming.
LOCK_HEADERS_SHARED = {"lockscope/lock/scripts.hpp", "lockscope/lock/naming.hpp"}

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def library_of(path):
    for rank, (name, folder, _) in enumerate(LIBRARIES):
        if path.startswith(folder + "/"):
            return rank, name
    return None, None


def main():
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "../.."))
    os.chdir(root)
    files = []
    for _, folder, _ in LIBRARIES:
        for dirpath, _, names in os.walk(folder):
            for n in names:
                if n.endswith((".hpp", ".cpp", ".h")):
                    files.append(os.path.join(dirpath, n))
    files.sort()
    prefix_to_dir = {prefix: os.path.join(folder, "include", prefix) for _, folder, prefix in LIBRARIES}

    def resolve(including, name):
        for prefix, directory in prefix_to_dir.items():
            if name.startswith(prefix):
                path = os.path.join(directory, name[len(prefix):])
                return path if os.path.exists(path) else None
        # A private header: beside the including file, or under its library's src/.
        candidates = [os.path.join(os.path.dirname(including), name)]
        _, lib = library_of(including)
        if lib is not None:
            candidates.append(os.path.join(dict((n, f) for n, f, _ in LIBRARIES)[lib], "src", name))
        for c in candidates:
            if os.path.exists(c):
                return os.path.normpath(c)
        return None

    edges = {}
    lines_of = {}
    for f in files:
        text = open(f, encoding="utf-8").read()
        found = []
        for m in INCLUDE.finditer(text):
            target = resolve(f, m.group(1))
            line = text.count("\n", 0, m.start()) + 1
            if target is not None:
                found.append((target, m.group(1), line))
        edges[f] = found
        lines_of[f] = text

    # A public header's stage: the folder of the source that includes it first.
    stage_of = {}
    for f in files:
        lib_rank, lib = library_of(f)
        if lib not in STAGES:
            continue
        src_root = dict((n, fo) for n, fo, _ in LIBRARIES)[lib] + "/src/"
        if f.startswith(src_root):
            stage = f[len(src_root):].split("/")[0]
            if "/" not in f[len(src_root):]:
                stage = None  # a source outside the stage folders: reported below
            stage_of[f] = stage
    for f in files:
        _, lib = library_of(f)
        if lib in STAGES and f.endswith(".cpp") and stage_of.get(f) and edges[f]:
            first_target = edges[f][0][0]
            if "/include/" in first_target and first_target not in stage_of and library_of(first_target)[1] == lib:
                stage_of[first_target] = stage_of[f]
    problems = []
    for f in files:
        _, lib = library_of(f)
        if lib not in STAGES or f in stage_of:
            continue
        name = f.split("/include/", 1)[1] if "/include/" in f else None
        if name and name in HEADER_STAGES:
            stage_of[f] = HEADER_STAGES[name]
        else:
            problems.append(f"{f}: no stage (put it in a stage folder, or add it to HEADER_STAGES)")
    for f, stage in stage_of.items():
        _, lib = library_of(f)
        if stage is None:
            problems.append(f"{f}: outside the stage folders of {lib} ({', '.join(STAGES[lib])})")
        elif stage not in STAGES[lib]:
            problems.append(f"{f}: folder '{stage}' is not a stage of {lib} ({', '.join(STAGES[lib])})")

    for f in files:
        rank, lib = library_of(f)
        for target, name, line in edges[f]:
            trank, tlib = library_of(target)
            if trank is None:
                continue
            if trank > rank:
                problems.append(f"{f}:{line}: includes {name}: {lib} comes before {tlib} (rule 1)")
                continue
            if tlib == "lock" and lib != "lock" and name not in LOCK_HEADERS_SHARED:
                problems.append(f"{f}:{line}: includes {name}: only the lock scripts and naming are shared (rule 1)")
            if tlib == lib and lib in STAGES:
                s, t = stage_of.get(f), stage_of.get(target)
                if s in STAGES[lib] and t in STAGES[lib] and STAGES[lib].index(t) > STAGES[lib].index(s):
                    problems.append(f"{f}:{line}: includes {name}: stage {s} comes before stage {t} (rule 2)")

    # Rule 3: include loops (depth-first search with colours).
    colour = {}
    stack = []

    def visit(f):
        colour[f] = 1
        stack.append(f)
        for target, _, _ in edges.get(f, []):
            if colour.get(target) == 1:
                loop = stack[stack.index(target):] + [target]
                problems.append("include loop: " + " -> ".join(loop) + " (rule 3)")
            elif colour.get(target) is None and target in edges:
                visit(target)
        stack.pop()
        colour[f] = 2

    for f in files:
        if colour.get(f) is None:
            visit(f)

    if problems:
        for p in problems:
            print(p)
        print(f"check_include_graph: {len(problems)} problem(s) in {len(files)} files")
        return 1
    counts = {lib: sum(1 for f in files if library_of(f)[1] == lib) for lib, _, _ in LIBRARIES}
    print(f"check_include_graph: {len(files)} files, {sum(len(e) for e in edges.values())} includes: "
          f"one way ({', '.join(f'{k} {v}' for k, v in counts.items())}), no loop")
    return 0


if __name__ == "__main__":
    sys.exit(main())
