#!/usr/bin/env bash
# Times `lockscope decode --format jsonl` or `lockscope analyze --summary` against tshark
# and tcpdump on one capture, in one run.
#
#   bench/analyzer/capture_bench.sh decode|analyze [CAPTURE] [PORT]
#   (decode_bench.sh and analyze_bench.sh are shorthands)
#
# CAPTURE defaults to bench/data/lock.pcap (make it with make_lock_capture.sh), PORT
# to the number in CAPTURE.port. The file is read once first to put it in the page
# cache. lockscope and tcpdump then run three times each and their median run counts;
# tshark (~40 s) runs once. Wall time and peak RSS come from /usr/bin/time -v.
# analyze runs with its default two threads (ingest on one, the timeline on the
# other); its one-thread time is printed too, for the record, with no target.
# Targets (issues 4 and 5, the same for both): lockscope >= 40x faster than tshark, <= 3x tcpdump's time, peak
# RSS <= 64 MB; for analyze also issue 9's: two threads <= 1.5x and one thread <= 2.5x tcpdump's time. Exit status 1 when a target is missed, 2 when the bench cannot run.
set -euo pipefail

mode=${1:-}
case "$mode" in
  decode) lockscope_args=(decode --no-progress --format jsonl); label="lockscope decode --format jsonl" ;;
  analyze) lockscope_args=(analyze --summary); label="lockscope analyze --summary" ;;
  *) echo "usage: capture_bench.sh decode|analyze [CAPTURE] [PORT]" >&2; exit 2 ;;
esac
shift
name="${mode}_bench"
root=$(cd "$(dirname "$0")/../.." && pwd)
capture=${1:-$root/bench/data/lock.pcap}
port=${2:-$(cat "$capture.port" 2>/dev/null || echo 6379)}
lockscope=${LOCKSCOPE:-$root/build/default/cli/lockscope}

[[ -f "$capture" ]] || { echo "$name: $capture: no such file (run make_lock_capture.sh)" >&2; exit 2; }
[[ -x "$lockscope" ]] || { echo "$name: $lockscope is not built" >&2; exit 2; }
[[ -x /usr/bin/time ]] || { echo "$name: /usr/bin/time is missing (apt-get install time)" >&2; exit 2; }

cat "$capture" > /dev/null  # page cache

# Prints "seconds rss_kb" for one command (stdout discarded).
measure() {
  local log
  log=$(mktemp)
  /usr/bin/time -v "$@" > /dev/null 2> "$log" || { echo "$name: failed: $*" >&2; tail -5 "$log" >&2; rm -f "$log"; exit 2; }
  awk -F': ' '
    /Elapsed \(wall clock\)/ { n = split($2, t, ":"); s = 0; for (i = 1; i <= n; i++) s = s * 60 + t[i]; }
    /Maximum resident set size/ { rss = $2 }
    END { printf "%.3f %d\n", s, rss }' "$log"
  rm -f "$log"
}

# The median of three runs (by time): one run on a shared 2-core machine is noisy.
measure_median() {
  local i
  for i in 1 2 3; do measure "$@"; done | sort -n | sed -n 2p
}

size_mb=$(awk -v b="$(stat -L -c %s "$capture")" 'BEGIN { printf "%.0f", b / 1e6 }')
echo "capture: $capture ($size_mb MB), server port $port"

read -r ls_s ls_rss < <(measure_median "$lockscope" "${lockscope_args[@]}" "$capture")
if [[ "$mode" == analyze ]]; then  # for the record: the same on one thread (no target)
  read -r one_s one_rss < <(measure_median "$lockscope" "${lockscope_args[@]}" --threads 1 "$capture")
fi
read -r td_s td_rss < <(measure_median tcpdump -r "$capture" -w /dev/null)
if command -v tshark >/dev/null; then
  read -r ts_s ts_rss < <(measure tshark -r "$capture" -d "tcp.port==$port,resp" -Y resp -T fields -e resp.bulk_string.value)
else
  ts_s=""; ts_rss=""
fi

printf '%-44s %9s %10s\n' tool seconds "peak RSS"
printf '%-44s %9s %7d MB\n' "$label" "$ls_s" $((ls_rss / 1024))
[[ -n "${one_s:-}" ]] && printf '%-44s %9s %7d MB\n' "$label --threads 1" "$one_s" $((one_rss / 1024))
printf '%-44s %9s %7d MB\n' "tcpdump -r FILE -w /dev/null" "$td_s" $((td_rss / 1024))
[[ -n "$ts_s" ]] && printf '%-44s %9s %7d MB\n' "tshark -Y resp -T fields -e resp.bulk_string.value" "$ts_s" $((ts_rss / 1024))

status=0
check() {  # name, ok (1/0), detail
  if [[ "$2" == 1 ]]; then echo "PASS  $1 ($3)"; else echo "FAIL  $1 ($3)"; status=1; fi
}
if [[ -n "$ts_s" ]]; then
  speedup=$(awk -v a="$ts_s" -v b="$ls_s" 'BEGIN { printf "%.1f", a / b }')
  check "faster than tshark: >= 40x" "$(awk -v x="$speedup" 'BEGIN { print (x >= 40) }')" "${speedup}x"
fi
ratio=$(awk -v a="$ls_s" -v b="$td_s" 'BEGIN { printf "%.2f", a / b }')
check "time vs tcpdump: <= 3x" "$(awk -v x="$ratio" 'BEGIN { print (x <= 3) }')" "${ratio}x"
check "peak RSS: <= 64 MB" "$(( ls_rss <= 65536 ))" "$((ls_rss / 1024)) MB"
if [[ "$mode" == analyze ]]; then  # issue 9's offline-speed aims
  check "two threads vs tcpdump: <= 1.5x" "$(awk -v x="$ratio" 'BEGIN { print (x <= 1.5) }')" "${ratio}x"
  one_ratio=$(awk -v a="$one_s" -v b="$td_s" 'BEGIN { printf "%.2f", a / b }')
  check "one thread vs tcpdump: <= 2.5x" "$(awk -v x="$one_ratio" 'BEGIN { print (x <= 2.5) }')" "${one_ratio}x"
fi
exit $status
