#!/usr/bin/env bash
# Two builds of lockscope on one capture, in one run: `analyze --summary` of each,
# interleaved (old, new, old, new, ...) so that the machine's load falls on both alike.
# Prints each build's median CPU time (user + system), wall time and peak RSS, and the
# median and range of the per-pair CPU ratio new/old. Outputs must be equal: the
# summaries are compared once, and a difference stops the run (exit 1).
#
#   bench/analyzer/compare_builds.sh OLD_LOCKSCOPE NEW_LOCKSCOPE [CAPTURE] [PORT] [PAIRS]
#
# CAPTURE defaults to bench/data/lock.pcap (make_lock_capture.sh), PORT to the number
# in CAPTURE.port, PAIRS to 9. Extra analyze arguments: ARGS="--threads 1".
set -euo pipefail

old=${1:?usage: compare_builds.sh OLD NEW [CAPTURE] [PORT] [PAIRS]}
new=${2:?usage: compare_builds.sh OLD NEW [CAPTURE] [PORT] [PAIRS]}
here=$(cd "$(dirname "$0")" && pwd)
capture=${3:-$here/../data/lock.pcap}
port=${4:-$(cat "$capture.port" 2>/dev/null || true)}
pairs=${5:-9}
for f in "$old" "$new"; do [[ -x $f ]] || { echo "compare_builds: $f is not an executable" >&2; exit 2; }; done
[[ -r $capture ]] || { echo "compare_builds: cannot read $capture" >&2; exit 2; }
[[ -x /usr/bin/time ]] || { echo "compare_builds: needs /usr/bin/time (Debian: time)" >&2; exit 2; }
read -r -a extra <<<"${ARGS:-}"
args=(analyze "$capture" --summary ${port:+--port "$port"} "${extra[@]}")

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cat "$capture" >/dev/null  # into the page cache before the first timed run
"$old" "${args[@]}" >"$work/old.out" 2>/dev/null
"$new" "${args[@]}" >"$work/new.out" 2>/dev/null
if ! cmp -s "$work/old.out" "$work/new.out"; then
  echo "compare_builds: the two builds' summaries differ:" >&2
  diff "$work/old.out" "$work/new.out" | head -20 >&2
  exit 1
fi

run() {  # run BUILD → "cpu_s wall_s rss_kb"
  /usr/bin/time -f '%U %S %e %M' -o "$work/t" "$1" "${args[@]}" >/dev/null 2>&1
  awk '{printf "%.3f %.3f %d\n", $1 + $2, $3, $4}' "$work/t"
}
: >"$work/runs"
for ((i = 0; i < pairs; i++)); do
  echo "$(run "$old") $(run "$new")" >>"$work/runs"
done
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$work/runs" "$old" "$new" <<'EOF'
import statistics, sys
rows = [list(map(float, l.split())) for l in open(sys.argv[1])]
med = lambda xs: statistics.median(xs)
ratios = [r[3] / r[0] for r in rows if r[0] > 0]
for name, base in ((sys.argv[2], 0), (sys.argv[3], 3)):
    print(f"{name}: CPU {med([r[base] for r in rows]):.3f} s, wall {med([r[base + 1] for r in rows]):.3f} s, "
          f"peak RSS {med([r[base + 2] for r in rows]) / 1024:.1f} MiB (medians of {len(rows)})")
print(f"CPU ratio new/old per pair: median {med(ratios):.3f}, range {min(ratios):.3f}-{max(ratios):.3f}")
EOF
