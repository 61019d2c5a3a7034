#!/usr/bin/env bash
# Records a >= 300 MB capture of Redisson lock traffic for the decode benchmark.
#
#   bench/analyzer/make_lock_capture.sh [OUT.pcap] [MIN_MB]
#
# Starts redis-server on a free loopback port, records it with
# `tcpdump -i lo -w OUT port P`, and runs redis-benchmark with the seed's acquire EVAL
# (000_*.txt §4.2.1) on random lock names (-r) until the file holds MIN_MB (default
# 300). Writes OUT.port beside the capture for decode_bench.sh. Needs root (tcpdump),
# redis-server, redis-benchmark, tcpdump and a built lockscope (for the script text).
# Captures go to bench/data/ (gitignored).
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
out=${1:-$root/bench/data/lock.pcap}
min_mb=${2:-300}
mkdir -p "$(dirname "$out")"

for tool in redis-server redis-benchmark tcpdump python3; do
  command -v "$tool" >/dev/null || { echo "make_lock_capture: $tool is not installed" >&2; exit 2; }
done
lockscope=${LOCKSCOPE:-$root/build/default/cli/lockscope}
[[ -x "$lockscope" ]] || { echo "make_lock_capture: $lockscope is not built (make test builds it)" >&2; exit 2; }

source "$(dirname "$0")/redis_server.sh"
tcpdump_pid=""
cleanup() {
  [[ -n "$tcpdump_pid" ]] && kill -INT "$tcpdump_pid" 2>/dev/null && wait "$tcpdump_pid" 2>/dev/null || true
  stop_redis_server
}
trap cleanup EXIT
start_redis_server

rm -f "$out"
# A large kernel buffer (-B, KiB): redis-benchmark outpaces the default 2 MiB.
tcpdump -i lo -U -B 262144 -s 262144 -w "$out" "tcp port $port" 2>"$workdir/tcpdump.log" &
tcpdump_pid=$!
for _ in $(seq 50); do [[ -s "$out" ]] && break; sleep 0.1; done
sleep 0.3

# The acquire script from lock/scripts.hpp, the one source of truth.
script=$("$lockscope" scripts acquire)
owner="80e6bb0b-b3bb-4ce0-b120-9c7ce917b767:12"

while :; do
  size_mb=$(( $(stat -c %s "$out") / 1000000 ))
  (( size_mb >= min_mb )) && break
  echo "make_lock_capture: ${size_mb} MB so far; running redis-benchmark" >&2
  redis-benchmark -p "$port" -c 20 -n 200000 -r 1000000 -q \
    EVAL "$script" 1 "myLock:__rand_int__" 30000 "$owner" | tr "\r" "\n" | tail -1 >&2
  sleep 0.5
done

kill -INT "$tcpdump_pid"
wait "$tcpdump_pid" 2>/dev/null || true
tcpdump_pid=""
cat "$workdir/tcpdump.log" >&2
echo "$port" > "$out.port"
echo "make_lock_capture: $out: $(( $(stat -c %s "$out") / 1000000 )) MB, server port $port" >&2
