#!/usr/bin/env bash
# The keep-up load (keepup.sh) recorded once, then measured offline through the live
# loop, for working on lockscope's CPU per exchange on a machine too busy for stable
# live figures:
#   - instructions per exchange (valgrind --tool=callgrind: the same on a loaded machine)
#     over the first PACKETS packets of the recording;
#   - task-clock (perf stat) of the whole recording, ROUNDS times, per binary.
# Both run `lockscope analyze --replay FILE --replay-speed 0 --summary --port P`: the
# live code path (live loop, timers, summary), fed from the file instead of the kernel.
#
#   bench/analyzer/keepup_offline.sh [LOCKSCOPE...]    (default: the built one)
#   REQUESTS=500000 PACKETS=12000 ROUNDS=5 CAPTURE=/tmp/keepup.pcap bench/analyzer/keepup_offline.sh
#   NAMES=1000 CAPTURE=/tmp/ku1000.pcap bench/analyzer/keepup_offline.sh   (the same load on fewer locks)
#
# The recording (CAPTURE, kept for later runs; delete it to record again) needs root
# (tcpdump), redis-server and redis-benchmark; the measurements need valgrind and perf
# (scripts/install-deps --bench). A benchmark, not a test.
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
binaries=("$@")
(( ${#binaries[@]} > 0 )) || binaries=("${LOCKSCOPE:-$root/build/default/cli/lockscope}")
requests=${REQUESTS:-500000}
names=${NAMES:-100000}  # lock names drawn at random (keepup.sh's load: 100,000)
packets=${PACKETS:-12000}
rounds=${ROUNDS:-5}
capture=${CAPTURE:-/tmp/lockscope-keepup.pcap}

for tool in valgrind perf tcpdump redis-server redis-benchmark; do
  command -v "$tool" >/dev/null || { echo "keepup_offline: $tool is not installed" >&2; exit 2; }
done

if [[ ! -s $capture || ! -s $capture.port ]]; then
  source "$(dirname "$0")/redis_server.sh"
  dump_pid=""
  trap '[[ -n "$dump_pid" ]] && kill -INT "$dump_pid" 2>/dev/null; stop_redis_server' EXIT
  start_redis_server
  script=$("${binaries[0]}" scripts acquire)
  tcpdump -i lo -B 32768 -s 262144 -w "$capture" "tcp port $port" 2>"$workdir/tcpdump.log" &
  dump_pid=$!
  sleep 2
  redis-benchmark -p "$port" -c 100 -P 64 -n "$requests" -r "$names" -q \
    EVAL "$script" 1 "myLock:__rand_int__" 30000 "80e6bb0b-b3bb-4ce0-b120-9c7ce917b767:12" >/dev/null
  sleep 1
  kill -INT "$dump_pid"
  wait "$dump_pid" || true
  dump_pid=""
  echo "$port" >"$capture.port"
  echo "keepup_offline: recorded $requests requests on $names names to $capture: $(grep -E 'captured|dropped' "$workdir/tcpdump.log" | tr '\n' ' ')" >&2
  stop_redis_server
  trap - EXIT
fi
port=$(cat "$capture.port")
small=$(mktemp --suffix=.pcap)
trap 'rm -f "$small" "$small.cg"' EXIT
tcpdump -r "$capture" -c "$packets" -w "$small" 2>/dev/null

echo "keepup_offline: load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
for b in "${binaries[@]}"; do
  out=$(valgrind --tool=callgrind --callgrind-out-file="$small.cg" \
        "$b" analyze --replay "$small" --replay-speed 0 --summary --port "$port" 2>&1 >/dev/null)
  exchanges=$(grep -oP ' \K[0-9]+(?= exchanges, )' <<<"$out")
  instructions=$(grep -oP 'refs:\s+\K[0-9,]+' <<<"$out" | tr -d ,)
  (( exchanges > 0 )) || { echo "keepup_offline: $b counted no exchanges in the first $packets packets" >&2; exit 1; }
  ms=()
  for _ in $(seq "$rounds"); do
    ms+=("$(perf stat -x, -e task-clock "$b" analyze --replay "$capture" --replay-speed 0 --summary --port "$port" \
            2>&1 >/dev/null | grep task-clock | cut -d, -f1)")
  done
  all=$("$b" analyze --replay "$capture" --replay-speed 0 --summary --port "$port" 2>&1 >/dev/null |
        grep -oP ' \K[0-9]+(?= exchanges, )')
  median=$(printf '%s\n' "${ms[@]}" | sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }')
  printf '%s: %d instructions per exchange (first %d packets, %d exchanges); task-clock median %.0f ms over %d exchanges = %.2f µs each (%d runs)\n' \
    "$b" $((instructions / exchanges)) "$packets" "$exchanges" "$median" "$all" \
    "$(echo "1000 * $median / $all" | bc -l)" "$rounds"
done
echo "keepup_offline: load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
