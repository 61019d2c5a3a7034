#!/usr/bin/env bash
# Does analyze's cost grow with the capture, and no faster? Each shape of shapes_bench.sh at
# MB and at twice MB, `analyze --summary` on each, interleaved (small, large, small, ...) so
# that the machine's load falls on both alike, one and two threads. Prints, per shape and
# thread count, the median CPU time (user + system), wall time and peak RSS of each size,
# the median of the per-pair CPU ratio large/small, and PASS when that ratio is 2 ± 15%
# and the large capture's peak RSS is within 10% (or 4 MiB) of the small one's (issue 43:
# "doubling a shape's size doubles its time and leaves RSS flat"). Exit status 1 when one
# is missed. CPU time, not wall time: it is what grows with the work, and it moves less
# with the machine's load.
#
#   bench/analyzer/scaling_bench.sh [SHAPE...]     (default: storm herd servers3 servers6 soak)
#   MB=150 PAIRS=5 bench/analyzer/scaling_bench.sh storm
#
# The captures are those of shapes_bench.sh (bench/data/shape-SHAPE-MB.pcap, made when
# missing by lock_shape_capture / lock_soak_capture; gitignored). lock.pcap is a recording
# (make_lock_capture.sh) of one size, so it is not a shape here.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${BUILD:-$root/build/default}
lockscope=${LOCKSCOPE:-$build/cli/lockscope}
mb=${MB:-300}
pairs=${PAIRS:-3}
data=$root/bench/data
mkdir -p "$data"
# lock_shape_capture is built on request (`make bench`, as every benchmark): build it if missing.
[[ -x $build/bench/lock_shape_capture ]] || cmake --build "$build" --target lock_shape_capture >&2
[[ -x $lockscope ]] || { echo "scaling_bench: $lockscope is not built" >&2; exit 2; }
[[ -x /usr/bin/time ]] || { echo "scaling_bench: needs /usr/bin/time (Debian: time)" >&2; exit 2; }
shapes=("$@")
[[ ${#shapes[@]} -gt 0 ]] || shapes=(storm herd servers3 servers6 soak)

capture_of() {  # shape size_mb -> file, made when missing
  local shape=$1 size=$2 file=$data/shape-$1-$2.pcap
  if [[ ! -f $file ]]; then
    case "$shape" in
      storm|herd) "$build/bench/lock_shape_capture" "$shape" "$file" "$size" >&2 ;;
      servers3|servers6) "$build/bench/lock_shape_capture" servers "$file" "$size" "${shape#servers}" >&2 ;;
      # lock_soak_capture's scale 1 is 626 MB: a scale that gives about SIZE megabytes.
      soak) "$build/bench/lock_soak_capture" "$file" --connections $(( size * 20000 / 626 )) >&2 ;;
      *) echo "scaling_bench: unknown shape $shape" >&2; exit 2 ;;
    esac
  fi
  echo "$file"
}

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
run() {  # run CAPTURE THREADS -> "cpu_s wall_s rss_kb"
  /usr/bin/time -f '%U %S %e %M' -o "$work/t" "$lockscope" analyze "$1" --summary --port 6379 --threads "$2" >/dev/null 2>&1
  awk '{printf "%.3f %.3f %d\n", $1 + $2, $3, $4}' "$work/t"
}

echo "load average: $(cut -d' ' -f1-3 /proc/loadavg); $pairs pairs per row; MB=$mb against MB=$(( mb * 2 ))"
printf '%-9s %-7s %-28s %-28s %-10s %s\n' shape threads "CPU / wall / RSS, ${mb} MB" "CPU / wall / RSS, $(( mb * 2 )) MB" "CPU ratio" "target: 1.7-2.3, RSS flat"
status=0
for shape in "${shapes[@]}"; do
  small=$(capture_of "$shape" "$mb")
  large=$(capture_of "$shape" $(( mb * 2 )))
  cat "$small" "$large" >/dev/null  # into the page cache before the first timed run
  for threads in 1 2; do
    : >"$work/runs"
    for ((i = 0; i < pairs; i++)); do
      echo "$(run "$small" "$threads") $(run "$large" "$threads")" >>"$work/runs"
    done
    line=$(python3 - "$work/runs" "$shape" "$threads" <<'EOF'
import statistics, sys
rows = [list(map(float, l.split())) for l in open(sys.argv[1])]
med = statistics.median
ratio = med([r[3] / r[0] for r in rows if r[0] > 0])
cols = [(med([r[b] for r in rows]), med([r[b + 1] for r in rows]), med([r[b + 2] for r in rows]) / 1024) for b in (0, 3)]
rss_small, rss_large = cols[0][2], cols[1][2]
flat = rss_large <= max(rss_small * 1.10, rss_small + 4)
ok = 1.7 <= ratio <= 2.3 and flat
fmt = lambda c: f"{c[0]:.2f} s / {c[1]:.2f} s / {c[2]:.1f} MiB"
print(f"{sys.argv[2]:<9} {sys.argv[3]:<7} {fmt(cols[0]):<28} {fmt(cols[1]):<28} {ratio:<10.3f} {'PASS' if ok else 'FAIL'}")
EOF
)
    echo "$line"
    [[ $line == *PASS ]] || status=1
  done
done
exit $status
