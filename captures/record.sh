#!/usr/bin/env bash
# Re-records captures/recorded/*.pcap: real tcpdump recordings of our lock client
# (tests/locks/record_lock_traffic.cpp) against redis-server, and writes each
# one's expected timeline beside it (.timeline.txt, .jsonl) with `lockscope analyze`.
#
#   captures/record.sh [BUILD_DIR [NAME...]]   (default build/default and every
#                                               scenario; needs root for tcpdump)
#
# Scenarios: contend (3 clients, reentrancy, watchdog), expiry (a lease running out
# without renewal), resp3, evalsha (scripts loaded before the recording), stress
# (mutual exclusion), fair (FIFO queue), fenced (tokens), rwlock (readers and writers),
# redlock (three redis-servers in one capture). What the driver printed (its own log
# of the order of events) is kept as NAME.driver.txt. Review the new goldens before
# committing them.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build/default}
recorder=$build/tests/locks/record_lock_traffic
lockscope=$build/cli/lockscope
out=$root/captures/recorded
for tool in redis-server redis-cli tcpdump python3 "$recorder" "$lockscope"; do
  command -v "$tool" >/dev/null || { echo "record.sh: $tool is missing (build record_lock_traffic and lockscope)" >&2; exit 2; }
done
mkdir -p "$out"

server_pids=()
tcpdump_pid=""
workdir=$(mktemp -d)
cleanup() {
  [[ -n "$tcpdump_pid" ]] && kill -INT "$tcpdump_pid" 2>/dev/null && wait "$tcpdump_pid" 2>/dev/null || true
  for pid in "${server_pids[@]}"; do kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null || true; done
  rm -rf "$workdir"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# record NAME SCENARIO [WARMUP [SERVERS]]: SERVERS redis-servers (default 1), all in the capture.
record() {
  local name=$1 scenario=$2 warmup=${3:-} servers=${4:-1}
  local ports=() filter="" port
  for _ in $(seq "$servers"); do
    port=$(free_port)
    ports+=("$port")
    filter+="${filter:+ or }tcp port $port"
    redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no --dir "$workdir" \
      --logfile "$workdir/redis-$name-$port.log" &
    server_pids+=($!)
    for _ in $(seq 50); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done
  done
  [[ -n "$warmup" ]] && "$recorder" "$warmup" "${ports[0]}"
  rm -f "$out/$name.pcap"
  tcpdump -i lo -U --immediate-mode -B 65536 -s 262144 -w "$out/$name.pcap" "$filter" 2>"$workdir/tcpdump.log" &
  tcpdump_pid=$!
  for _ in $(seq 50); do [[ -s "$out/$name.pcap" ]] && break; sleep 0.1; done
  sleep 0.3
  "$recorder" "$scenario" "${ports[@]}" > "$workdir/driver.txt"
  sleep 0.5
  kill -INT "$tcpdump_pid"; wait "$tcpdump_pid" 2>/dev/null || true; tcpdump_pid=""
  for pid in "${server_pids[@]}"; do kill "$pid"; wait "$pid" 2>/dev/null || true; done
  server_pids=()
  if [[ -s "$workdir/driver.txt" ]]; then cp "$workdir/driver.txt" "$out/$name.driver.txt"; fi
  "$lockscope" analyze "$out/$name.pcap" > "$out/$name.timeline.txt" 2>/dev/null
  "$lockscope" analyze --format jsonl "$out/$name.pcap" > "$out/$name.jsonl" 2>/dev/null
  echo "record.sh: $out/$name.pcap ($(stat -c %s "$out/$name.pcap") bytes)" >&2
}

wanted() { [[ ${#selected[@]} -eq 0 ]] || [[ " ${selected[*]} " == *" $1 "* ]]; }
selected=("${@:2}")
wanted contend && record contend contend
wanted expiry && record expiry expiry
wanted resp3 && record resp3 resp3
wanted evalsha && record evalsha evalsha evalsha-warmup
wanted stress && record stress stress
wanted fair && record fair fair
wanted fenced && record fenced fenced
wanted rwlock && record rwlock rwlock
wanted redlock && record redlock redlock "" 3
true
