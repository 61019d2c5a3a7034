#!/usr/bin/env python3
"""Runs resp_decode_bench and prints lockscope vs hiredis throughput per workload.

    bench/decode_ratio.py [--bench build/default/bench/resp_decode_bench] [--min-time 0.3]

Targets: lockscope/hiredis throughput ratio >= 3 on lock_mix and nested, >= 1 on
bulk_4k, and 0 heap allocations per message for lockscope in steady state.
Exit status: 0 when every row passes, 1 when one fails, 2 when the bench cannot run.
Python standard library only.
"""
import argparse
import json
import os
import subprocess
import sys

RATIO_TARGETS = {"lock_mix": 3.0, "nested": 3.0, "bulk_4k": 1.0}
CHUNKS = (1460, 16384)


def default_bench_path():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    return os.path.join(root, "build", "default", "bench", "resp_decode_bench")


def run_bench(bench, min_time, repetitions):
    command = [
        bench,
        "--benchmark_filter=^decode/",
        "--benchmark_format=json",
        f"--benchmark_repetitions={repetitions}",
        "--benchmark_report_aggregates_only=true",
        f"--benchmark_min_time={min_time}",
    ]
    print("$ " + " ".join(command), flush=True)
    result = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if result.returncode != 0:
        sys.stderr.write(result.stderr)
        sys.exit(f"{bench} exited with status {result.returncode}")
    return json.loads(result.stdout)


def medians(report):
    """Maps (decoder, workload, chunk) to the median run of that benchmark."""
    rows = {}
    for run in report["benchmarks"]:
        # With one repetition there are no aggregates: take the plain run.
        if run.get("run_type") == "aggregate" and run.get("aggregate_name") != "median":
            continue
        if run.get("error_occurred"):
            sys.exit(f"{run['run_name']}: {run.get('error_message')}")
        parts = run["run_name"].split("/")
        if len(parts) != 4 or parts[0] != "decode":
            continue
        _, decoder, workload, chunk = parts
        rows[(decoder, workload, int(chunk))] = run
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bench", default=default_bench_path(), help="resp_decode_bench executable")
    parser.add_argument("--min-time", default="0.3", help="seconds per benchmark repetition")
    parser.add_argument("--repetitions", type=int, default=3)
    args = parser.parse_args()
    if not os.access(args.bench, os.X_OK):
        print(f"{args.bench}: not built (cmake --build build/default --target resp_decode_bench)",
              file=sys.stderr)
        return 2

    report = run_bench(args.bench, args.min_time, args.repetitions)
    build_type = report.get("context", {}).get("library_build_type")
    rows = medians(report)

    header = ("workload", "chunk", "lockscope MB/s", "hiredis MB/s", "ratio", "target",
              "allocs/msg ls", "allocs/msg hi", "verdict")
    table = []
    all_pass = True
    for workload, target in RATIO_TARGETS.items():
        for chunk in CHUNKS:
            ours = rows.get(("lockscope", workload, chunk))
            theirs = rows.get(("hiredis", workload, chunk))
            if ours is None or theirs is None:
                table.append((workload, str(chunk), "-", "-", "-", f">= {target:g}", "-", "-", "MISSING"))
                all_pass = False
                continue
            ours_mbs = ours["bytes_per_second"] / 1e6
            theirs_mbs = theirs["bytes_per_second"] / 1e6
            ratio = ours_mbs / theirs_mbs
            our_allocs = ours["allocs_per_msg"]
            verdict_ok = ratio >= target and our_allocs == 0
            all_pass &= verdict_ok
            reasons = []
            if ratio < target:
                reasons.append("ratio")
            if our_allocs != 0:
                reasons.append("allocs")
            table.append((workload, str(chunk), f"{ours_mbs:.1f}", f"{theirs_mbs:.1f}", f"{ratio:.2f}",
                          f">= {target:g}", f"{our_allocs:g}", f"{theirs['allocs_per_msg']:.2f}",
                          "PASS" if verdict_ok else "FAIL (" + ", ".join(reasons) + ")"))

    widths = [max(len(row[i]) for row in table + [header]) for i in range(len(header))]
    line = lambda row: "  ".join(cell.rjust(w) if i not in (0, 8) else cell.ljust(w)
                                 for i, (cell, w) in enumerate(zip(row, widths)))
    print()
    print(line(header))
    print(line(tuple("-" * w for w in widths)))
    for row in table:
        print(line(row))
    print()
    print(f"MB = 10^6 bytes; medians of {args.repetitions} repetitions; allocs/msg counted on one "
          "steady-state pass after a warm-up pass.")
    if build_type:
        print(f"Google Benchmark library build type: {build_type} (Debian's package reports "
              "'debug'; the code under test is built by the preset).")
    print("RESULT: " + ("PASS" if all_pass else "FAIL"))
    return 0 if all_pass else 1


if __name__ == "__main__":
    sys.exit(main())
