#!/usr/bin/env bash
# `lockscope analyze --format trace` against `--format jsonl` on one capture: wall time,
# peak RSS and output size of each, one run each (the files go to a temporary
# directory, removed after).
#
#   bench/analyzer/trace_bench.sh [CAPTURE]
#
# CAPTURE defaults to bench/data/lock.pcap (make it with make_lock_capture.sh, or
# symlink an existing one). Wall time and peak RSS come from /usr/bin/time -v.
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
capture=${1:-$root/bench/data/lock.pcap}
lockscope=${LOCKSCOPE:-$root/build/default/cli/lockscope}
[[ -f "$capture" ]] || { echo "trace_bench: $capture: no such file (run make_lock_capture.sh)" >&2; exit 2; }
[[ -x "$lockscope" ]] || { echo "trace_bench: $lockscope is not built" >&2; exit 2; }
[[ -x /usr/bin/time ]] || { echo "trace_bench: /usr/bin/time is missing (apt-get install time)" >&2; exit 2; }

cat "$capture" > /dev/null  # page cache
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
echo "capture: $capture ($(stat -c %s "$capture") bytes), load: $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-8s %10s %12s %14s\n' format wall_s max_rss_MB output_MB
for format in jsonl trace; do
  /usr/bin/time -v "$lockscope" analyze "$capture" --format "$format" -o "$out/out.$format" 2> "$out/time.$format"
  wall=$(awk -F': ' '/Elapsed \(wall clock\)/ {split($2, t, ":"); print t[1] * 60 + t[2]}' "$out/time.$format")
  rss=$(awk -F': ' '/Maximum resident set size/ {printf "%.0f", $2 / 1024}' "$out/time.$format")
  size=$(stat -c %s "$out/out.$format")
  printf '%-8s %10.2f %12s %14.0f\n' "$format" "$wall" "$rss" "$((size / 1000000))"
done
