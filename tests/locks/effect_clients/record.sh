#!/usr/bin/env bash
# Re-records a recording and its truth log: 3 processes of a lock client contending on
# two locks against a redis-server on a free loopback port, captured by tcpdump from
# before the clients connect. Each process logs what it did itself (the worker); the
# test (test_effect_recorded.cpp) compares lockscope's events with those logs.
#
#   tests/locks/effect_clients/record.sh NODE_MODULES_DIR redis_semaphore   # mutex_worker.js
#   tests/locks/effect_clients/record.sh NODE_MODULES_DIR simple_redis_mutex # srm_worker.js
#   tests/locks/effect_clients/record.sh NODE_MODULES_DIR redis_semaphore_sem # semaphore_worker.js
#
# NODE_MODULES_DIR holds the clients, e.g. made by
#   npm install --prefix /tmp/effect_npm redis-semaphore@5.8.0 ioredis@5 simple-redis-mutex@3.0.0 redis@5
# Needs redis-server, tcpdump (root or CAP_NET_RAW) and node.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
modules=${1:?usage: record.sh NODE_MODULES_DIR redis_semaphore|simple_redis_mutex|redis_semaphore_sem}
name=${2:-redis_semaphore}
case $name in
  redis_semaphore) worker=mutex_worker.js; scenario="redis-semaphore 5.8.0 Mutex" ;;
  simple_redis_mutex) worker=srm_worker.js; scenario="simple-redis-mutex 3.0.0" ;;
  redis_semaphore_sem) worker=semaphore_worker.js; scenario="redis-semaphore 5.8.0 Semaphore (2 permits)" ;;
  *) echo "record.sh: unknown recording $name" >&2; exit 2 ;;
esac
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
redis-server --port "$port" --save '' --appendonly no --dir "$work" >"$work/redis.log" 2>&1 &
for _ in $(seq 50); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done
tcpdump -i lo -U -s 0 -w "$work/capture.pcap" "tcp port $port" 2>"$work/tcpdump.log" &
dump=$!
sleep 1
start_us=$(date +%s%6N)
pids=()
for p in p1 p2 p3; do
  NODE_PATH="$modules" node "$here/$worker" "$port" "$p" 8 >"$work/$p.jsonl" &
  pids+=($!)
done
for pid in "${pids[@]}"; do wait "$pid"; done
stop_us=$(date +%s%6N)
sleep 2  # let tcpdump drain what the kernel holds (a loaded machine lags)
kill -INT "$dump"; wait "$dump" || true
{
  echo "{\"event\":\"recording\",\"scenario\":\"$scenario\",\"capture_start_us\":$start_us,\"capture_stop_us\":$stop_us,\"servers\":[\"127.0.0.1:$port\"]}"
  cat "$work"/p*.jsonl | python3 -c 'import sys,json; [print(l.strip()) for l in sorted(sys.stdin, key=lambda l: json.loads(l)["t_us"])]'
} >"$here/$name.truth.jsonl"
cp "$work/capture.pcap" "$here/$name.pcap"
echo "recorded $(grep -c '"acquired"' "$here/$name.truth.jsonl") acquisitions, $(stat -c %s "$here/$name.pcap") bytes"
