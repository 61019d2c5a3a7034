#!/usr/bin/env bash
# Keeping up with a saturated Redis port (issue 14): redis-benchmark sends the seed's
# acquire EVAL as fast as it can on lo while, in turn, one capturing tool runs:
#   lockscope  `lockscope analyze -i lo --port P --summary`
#   tcpdump    `tcpdump -i lo -w /dev/null` (what capture alone costs)
#   tshark     `tshark -i lo` with the RESP dissector (the peer)
# and prints per tool: kernel drops, exchanges counted vs requests sent, and CPU as a
# share of one core (utime + stime from /proc/PID/stat, the tool's and its children's:
# tshark captures through a dumpcap child, over the load's wall time), then lockscope's
# CPU per exchange against tshark's.
#
#   bench/analyzer/keepup.sh [TOOLS...]      (default: lockscope tcpdump tshark)
#   REQUESTS=2000000 CLIENTS=100 PIPELINE=64 BUFFER_MB=32 bench/analyzer/keepup.sh
#   REPEAT=5 bench/analyzer/keepup.sh        (rounds of every tool in turn; medians)
#
# On a shared 2-core VM one run's CPU figure varies by ±20% (the same binary measured
# 0.59 to 0.83 µs per exchange), so the ratio is taken from the medians of REPEAT rounds.
#
# lockscope is build/pgo's (`make pgo`: profile-guided, what a deployment should run)
# when it is built, else the default build's; LOCKSCOPE=path picks another.
#
# Every tool gets the same kernel buffer (BUFFER_MB, lockscope's --buffer-mb default)
# and the same BPF filter. Needs root (capture), redis-server, redis-benchmark, tcpdump,
# tshark and a built lockscope. A benchmark, not a test: run it on a quiet machine.
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
lockscope=${LOCKSCOPE:-}
if [[ -z $lockscope ]]; then
  lockscope=$root/build/default/cli/lockscope
  [[ -x $root/build/pgo/cli/lockscope ]] && lockscope=$root/build/pgo/cli/lockscope
fi
echo "keepup: lockscope is $lockscope" >&2
requests=${REQUESTS:-2000000}
clients=${CLIENTS:-100}
pipeline=${PIPELINE:-64}
buffer_mb=${BUFFER_MB:-32}
repeat=${REPEAT:-1}
tools=("$@")
(( ${#tools[@]} > 0 )) || tools=(lockscope tcpdump tshark)

for tool in redis-server redis-benchmark redis-cli tcpdump tshark python3; do
  command -v "$tool" >/dev/null || { echo "keepup: $tool is not installed" >&2; exit 2; }
done
[[ -x "$lockscope" ]] || { echo "keepup: $lockscope is not built (make build)" >&2; exit 2; }

source "$(dirname "$0")/redis_server.sh"
tool_pid=""
cleanup() {
  [[ -n "$tool_pid" ]] && kill -INT "$tool_pid" 2>/dev/null && wait "$tool_pid" 2>/dev/null || true
  stop_redis_server
}
trap cleanup EXIT
start_redis_server

script=$("$lockscope" scripts acquire)  # lock/scripts.hpp, the one source of truth
owner="80e6bb0b-b3bb-4ce0-b120-9c7ce917b767:12"
ticks=$(getconf CLK_TCK)
filter="tcp port $port"

cpu_ticks() {  # utime + stime of a process and its children (tshark's dumpcap)
  local total=0 pid
  for pid in "$1" $(pgrep -P "$1" || true); do
    total=$(( total + $(awk '{ print $14 + $15 }' "/proc/$pid/stat" 2>/dev/null || echo 0) ))
  done
  echo "$total"
}

echo "keepup: port $port, $requests requests, -c $clients -P $pipeline -r 100000, kernel buffer $buffer_mb MiB," \
     "load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
printf '%-10s %12s %12s %12s %9s %10s %14s\n' tool kernel_drops exchanges requests counted cpu_core cpu_us/exchange
for round in $(seq "$repeat"); do
for tool in "${tools[@]}"; do
  redis-cli -p "$port" flushall >/dev/null
  log=$workdir/$tool.log
  out=$workdir/$tool.out
  case $tool in
    lockscope)
      "$lockscope" analyze -i lo --port "$port" --summary --buffer-mb "$buffer_mb" --stats-interval 0 \
        >"$out" 2>"$log" &
      ;;
    tcpdump)
      # -Z root: tcpdump otherwise chowns its -w file, /dev/null itself, to its own user.
      tcpdump -i lo -Z root -B $((buffer_mb * 1024)) -s 262144 -w /dev/null "$filter" >"$out" 2>"$log" &
      ;;
    tshark)
      # One field per request array (EVAL has 6 elements): counted below.
      tshark -i lo -B "$buffer_mb" -f "$filter" -d "tcp.port==$port,resp" -T fields -e resp.array.length \
        >"$out" 2>"$log" &
      ;;
    *) echo "keepup: unknown tool $tool" >&2; exit 2 ;;
  esac
  tool_pid=$!
  # Ready once it says it listens (tshark: "Capturing on"), then a moment more.
  for _ in $(seq 100); do grep -qE 'listening on|Capturing on' "$log" 2>/dev/null && break; sleep 0.1; done
  sleep 1
  before=$(cpu_ticks "$tool_pid")
  start=$(date +%s.%N)
  redis-benchmark -p "$port" -c "$clients" -P "$pipeline" -n "$requests" -r ${RANDOM_KEYS:-100000} -q \
    EVAL "$script" 1 "myLock:__rand_int__" 30000 "$owner" | tr '\r' '\n' | tail -1 >"$workdir/bench.txt"
  end=$(date +%s.%N)
  # Let the tool drain its buffer (a tool that fell behind, as tshark does at 100% of a
  # core, goes on working after the load ends): sample its CPU once it has been idle
  # for a second (at most 120 s), then stop it.
  after=$(cpu_ticks "$tool_pid")
  for _ in $(seq 120); do
    sleep 1
    now=$(cpu_ticks "$tool_pid")
    (( now - after <= 1 )) && { after=$now; break; }
    after=$now
  done
  kill -INT "$tool_pid"
  wait "$tool_pid" 2>/dev/null || true
  tool_pid=""
  case $tool in
    lockscope)
      drops=$(grep -oP 'kernel drops \K[0-9]+' "$log" | tail -1)
      exchanges=$(grep -oP ' \K[0-9]+(?= exchanges, )' "$log" | tail -1)
      ;;
    tcpdump)
      drops=$(grep -oP '^[0-9]+(?= packets dropped by kernel)' "$log" | tail -1)
      exchanges=n/a
      ;;
    tshark)
      drops=$(grep -oP '[0-9]+(?= packets dropped)' "$log" | tail -1 || true)
      drops=${drops:-0}
      exchanges=$(tr ',' '\n' <"$out" | grep -c '^6$' || true)
      ;;
  esac
  wall=$(echo "$end - $start" | bc -l)
  cpu_s=$(echo "($after - $before) / $ticks" | bc -l)
  share=$(printf '%.1f%%' "$(echo "100 * $cpu_s / $wall" | bc -l)")
  if [[ $exchanges == n/a ]]; then
    counted=n/a
    per=n/a
  else
    counted=$(printf '%.2f%%' "$(echo "100 * $exchanges / $requests" | bc -l)")
    per=$(printf '%.3f' "$(echo "1000000 * $cpu_s / ($exchanges + ($exchanges == 0))" | bc -l)")
  fi
  printf '%-10s %12s %12s %12s %9s %10s %14s\n' "$tool" "$drops" "$exchanges" "$requests" "$counted" "$share" "$per"
  echo "keepup: $tool: redis-benchmark $(sed 's/.*: \([0-9.]* requests per second\)/\1/' "$workdir/bench.txt")," \
       "load $(printf '%.1f' "$wall") s; tool CPU $(printf '%.2f' "$cpu_s") s" >&2
  eval "per_$tool+=(\"\$per\")"
done
done
median() {  # of the numbers among the arguments (n/a and empty left out); empty when none
  printf '%s\n' "$@" | awk '$1 ~ /^[0-9.]+$/' | sort -g |
    awk '{ v[NR] = $1 } END { if (NR) print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) }'
}
median_lockscope=$(median "${per_lockscope[@]:-}")
median_tshark=$(median "${per_tshark[@]:-}")
if (( repeat > 1 )); then
  echo "keepup: CPU µs per exchange over $repeat rounds: lockscope ${per_lockscope[*]:-} (median ${median_lockscope:-n/a})," \
       "tshark ${per_tshark[*]:-} (median ${median_tshark:-n/a})" >&2
fi
if [[ -n "$median_lockscope" && -n "$median_tshark" ]]; then
  printf 'lockscope uses %.1f× less CPU per exchange than tshark (target ≥ 20×)\n' \
    "$(echo "$median_tshark / $median_lockscope" | bc -l)"
  # The margin: each round's ratio (the two tools measured minutes apart, in the same
  # round), and how many rounds met the target on their own.
  if (( repeat > 1 )); then
    ratios=() met=0 paired=0
    for i in $(seq 0 $((repeat - 1))); do
      l=${per_lockscope[$i]:-} t=${per_tshark[$i]:-}
      [[ $l =~ ^[0-9.]+$ && $t =~ ^[0-9.]+$ ]] && (( $(echo "$l > 0" | bc -l) )) || continue
      r=$(printf '%.1f' "$(echo "$t / $l" | bc -l)")
      ratios+=("$r×")
      paired=$((paired + 1))
      (( $(echo "$r >= 20" | bc -l) )) && met=$((met + 1))
    done
    (( paired > 0 )) && echo "per round: ${ratios[*]} ($met of $paired rounds at or above 20×)"
  fi
fi
