#!/usr/bin/env bash
# Re-records captures/recorded/*.pcap: real tcpdump recordings of our lock client
# (tests/timeline/record_lock_traffic.cpp) against redis-server, and writes each
# one's expected timeline beside it (.timeline.txt, .jsonl) with `lockscope analyze`.
#
#   captures/record.sh [BUILD_DIR]        (default build/default; needs root for tcpdump)
#
# Scenarios: contend (3 clients, reentrancy, watchdog), expiry (a lease running out
# without renewal), resp3, evalsha (scripts loaded before the recording), stress
# (mutual exclusion). Review the new goldens before committing them.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build/default}
recorder=$build/tests/timeline/record_lock_traffic
lockscope=$build/cli/lockscope
out=$root/captures/recorded
for tool in redis-server redis-cli tcpdump python3 "$recorder" "$lockscope"; do
  command -v "$tool" >/dev/null || { echo "record.sh: $tool is missing (build record_lock_traffic and lockscope)" >&2; exit 2; }
done
mkdir -p "$out"

server_pid=""
tcpdump_pid=""
workdir=$(mktemp -d)
cleanup() {
  [[ -n "$tcpdump_pid" ]] && kill -INT "$tcpdump_pid" 2>/dev/null && wait "$tcpdump_pid" 2>/dev/null || true
  [[ -n "$server_pid" ]] && kill "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null || true
  rm -rf "$workdir"
}
trap cleanup EXIT

record() {
  local name=$1 scenario=$2 warmup=${3:-}
  local port
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no --dir "$workdir" \
    --logfile "$workdir/redis-$name.log" &
  server_pid=$!
  for _ in $(seq 50); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done
  [[ -n "$warmup" ]] && "$recorder" "$warmup" "$port"
  rm -f "$out/$name.pcap"
  tcpdump -i lo -U --immediate-mode -B 65536 -s 262144 -w "$out/$name.pcap" "tcp port $port" 2>"$workdir/tcpdump.log" &
  tcpdump_pid=$!
  for _ in $(seq 50); do [[ -s "$out/$name.pcap" ]] && break; sleep 0.1; done
  sleep 0.3
  "$recorder" "$scenario" "$port"
  sleep 0.5
  kill -INT "$tcpdump_pid"; wait "$tcpdump_pid" 2>/dev/null || true; tcpdump_pid=""
  kill "$server_pid"; wait "$server_pid" 2>/dev/null || true; server_pid=""
  "$lockscope" analyze "$out/$name.pcap" > "$out/$name.timeline.txt" 2>/dev/null
  "$lockscope" analyze --format jsonl "$out/$name.pcap" > "$out/$name.jsonl" 2>/dev/null
  echo "record.sh: $out/$name.pcap ($(stat -c %s "$out/$name.pcap") bytes)" >&2
}

record contend contend
record expiry expiry
record resp3 resp3
record evalsha evalsha evalsha-warmup
record stress stress
