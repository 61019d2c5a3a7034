#!/usr/bin/env bash
# Re-records captures/thirdparty/*.pcap and their truth logs (*.truth.jsonl): real
# third-party lock clients against redis-servers started here on free loopback ports,
# recorded with tcpdump, each client logging what it did itself (see README.md).
#
#   captures/thirdparty/record.sh [NAME...]     (default: every scenario; needs root
#                                                 for tcpdump, npm for the node ones)
#
# Scenarios: redisson (node-redisson, 3 processes, RESP3, joined mid-run), redlock
# (node-redlock v5 over three redis-servers, EVALSHA only, RESP2), del_other (the seed
# 004 anti-pattern: a plain DEL releasing someone else's lock, redis-py), pylock
# (redis-py Lock pollers over IPv6, tcpdump -i any), cluster (redis-py RedisCluster with
# Redisson's scripts on a 3-master cluster resharded live: MOVED, ASK, TRYAGAIN,
# SSUBSCRIBE/SPUBLISH/smessage; the same run captured mid-stream as cluster_midstream).
# The tests only read the results.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
scenarios=$here/scenarios
pyth=/usr/bin/python3   # Debian's, with python3-redis
for tool in redis-server redis-cli tcpdump "$pyth"; do
  command -v "$tool" >/dev/null || { echo "record.sh: $tool is missing" >&2; exit 2; }
done

selected=("$@")
wanted() { [[ ${#selected[@]} -eq 0 ]] || [[ " ${selected[*]} " == *" $1 "* ]]; }
node_modules=""
need_node() {
  [[ -n "$node_modules" ]] && return
  command -v node >/dev/null || { echo "record.sh: node is missing" >&2; exit 2; }
  node_modules=$("$here/install.sh")
  export NODE_PATH=$node_modules
}

server_pids=()
worker_pids=()
tcpdump_pid=""
workdir=$(mktemp -d)
cleanup() {
  [[ -n "$tcpdump_pid" ]] && kill -INT "$tcpdump_pid" 2>/dev/null && wait "$tcpdump_pid" 2>/dev/null || true
  for pid in "${worker_pids[@]}"; do kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null || true; done
  for pid in "${server_pids[@]}"; do kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null || true; done
  rm -rf "$workdir"
}
trap cleanup EXIT

now_us() { date +%s%6N; }
free_port() { "$pyth" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# start_server PORT [BIND]: a throwaway redis-server; waits until it answers.
start_server() {
  local port=$1 bind=${2:-127.0.0.1}
  redis-server --port "$port" --bind "$bind" --save "" --appendonly no --dir "$workdir" \
    --logfile "$workdir/redis-$port.log" &
  server_pids+=($!)
  for _ in $(seq 50); do redis-cli -h "$bind" -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done
}
stop_servers() {
  for pid in "${server_pids[@]}"; do kill "$pid"; wait "$pid" 2>/dev/null || true; done
  server_pids=()
}

# start_capture FILE INTERFACE FILTER: tcpdump writing FILE; returns once it records.
capture_start_us=0
start_capture() {
  rm -f "$1"
  tcpdump -i "$2" -U --immediate-mode -B 65536 -s 262144 -w "$1" "$3" 2>"$workdir/tcpdump.log" &
  tcpdump_pid=$!
  for _ in $(seq 50); do [[ -s "$1" ]] && break; sleep 0.1; done
  sleep 0.3
  capture_start_us=$(now_us)
}
capture_stop_us=0
stop_capture() {
  capture_stop_us=$(now_us)
  kill -INT "$tcpdump_pid"; wait "$tcpdump_pid" 2>/dev/null || true; tcpdump_pid=""
}

# wait_ready DIR N: until N workers wrote DIR/*.ready.
wait_ready() {
  for _ in $(seq 300); do
    [[ $(find "$1" -name '*.ready' | wc -l) -ge $2 ]] && return
    sleep 0.1
  done
  echo "record.sh: workers did not get ready" >&2; exit 1
}

# finish NAME: merges the workers' truth logs by time behind a "recording" line
# (the capture's window and the scenario's servers), and reports the sizes.
finish() {
  local name=$1; shift
  local truth=$here/$name.truth.jsonl
  # The window is the packets' own: tcpdump records from before start_capture returns
  # (and the tests judge what the capture can show by these two times).
  capture_start_us=$(tcpdump -r "$here/$name.pcap" -tt -c 1 2>/dev/null | awk '{ split($1, t, "."); print t[1] t[2] }')
  capture_stop_us=$(tcpdump -r "$here/$name.pcap" -tt 2>/dev/null | tail -n 1 | awk '{ split($1, t, "."); print t[1] t[2] }')
  {
    printf '{"t_us":%s,"event":"recording","scenario":"%s","capture_start_us":%s,"capture_stop_us":%s,"servers":[%s]}\n' \
      "$capture_start_us" "$name" "$capture_start_us" "$capture_stop_us" "$*"
    cat "$workdir/$name".*.jsonl
  } > "$truth"
  "$pyth" - "$truth" <<'PY'
import json, sys
# Only what happened around the capture: from 1.5 s before it (waits and holds it
# joins in the middle of) to 0.5 s after it, and every process's connections line.
lines = [json.loads(l) for l in open(sys.argv[1])]
start, stop = lines[0]["capture_start_us"], lines[0]["capture_stop_us"]
lines[1:] = sorted((e for e in lines[1:] if e["event"] == "connections" or start - 1_500_000 <= e["t_us"] <= stop + 500_000),
                   key=lambda e: e["t_us"])
with open(sys.argv[1], "w") as f:
    for e in lines:
        f.write(json.dumps(e, separators=(",", ":")) + "\n")
PY
  echo "record.sh: $here/$name.pcap ($(stat -c %s "$here/$name.pcap") bytes), $truth ($(wc -l < "$truth") lines)" >&2
  local limit_kb=${size_limit_kb:-300}
  for file in "$here/$name.pcap" "$truth"; do
    if [[ $(stat -c %s "$file") -gt $((limit_kb * 1024)) ]]; then
      echo "record.sh: $file is over $limit_kb KB: re-record with a shorter run (see the *_SECONDS variables)" >&2
    fi
  done
}

# redisson: three node-redisson processes, two lock owners each, contending for three
# locks with watchdog leases; the capture starts 2 s into the contention (connections
# open, scripts loaded, locks held and waited for) and lasts REDISSON_SECONDS.
record_redisson() {
  need_node
  local port control=$workdir/redisson
  port=$(free_port); mkdir -p "$control"
  start_server "$port"
  for proc in p1 p2 p3; do
    node "$scenarios/redisson_worker.js" "$port" "$proc" "$workdir/redisson.$proc.jsonl" "$control" &
    worker_pids+=($!)
  done
  wait_ready "$control" 3
  touch "$control/go"
  sleep 2
  start_capture "$here/redisson.pcap" lo "tcp port $port"
  sleep "${REDISSON_SECONDS:-12}"
  stop_capture
  touch "$control/stop"
  for pid in "${worker_pids[@]}"; do wait "$pid"; done
  worker_pids=()
  stop_servers
  finish redisson "\"127.0.0.1:$port\""
}

# redlock: four node-redlock processes over three redis-servers; the capture starts
# 2 s into the contention (scripts loaded: EVALSHA only) and lasts REDLOCK_SECONDS.
record_redlock() {
  need_node
  local ports=() filter="" servers="" port control=$workdir/redlock
  mkdir -p "$control"
  for _ in 1 2 3; do
    port=$(free_port); ports+=("$port"); start_server "$port"
    filter+="${filter:+ or }tcp port $port"; servers+="${servers:+,}\"127.0.0.1:$port\""
  done
  for proc in p1 p2 p3 p4; do
    node "$scenarios/redlock_worker.js" "$proc" "$workdir/redlock.$proc.jsonl" "$control" "${ports[@]}" &
    worker_pids+=($!)
  done
  wait_ready "$control" 4
  touch "$control/go"
  sleep 2
  start_capture "$here/redlock.pcap" lo "$filter"
  sleep "${REDLOCK_SECONDS:-10}"
  stop_capture
  touch "$control/stop"
  for pid in "${worker_pids[@]}"; do wait "$pid"; done
  worker_pids=()
  stop_servers
  finish redlock "$servers"
}

# del_other: redis-py's plain SET NX PX / DEL anti-pattern (seed 004), whole connections.
record_del_other() {
  local port
  port=$(free_port); start_server "$port"
  start_capture "$here/del_other.pcap" lo "tcp port $port"
  (cd "$scenarios" && "$pyth" del_other.py 127.0.0.1 "$port" "$workdir/del_other.p1.jsonl")
  sleep 0.3
  stop_capture
  stop_servers
  finish del_other "\"127.0.0.1:$port\""
}

# pylock: four redis-py Lock processes over IPv6 (::1), recorded with tcpdump -i any
# (LINUX_SLL2 frames) from before they connect, for PYLOCK_SECONDS of contention.
record_pylock() {
  local port control=$workdir/pylock
  port=$(free_port); mkdir -p "$control"
  start_server "$port" ::1
  start_capture "$here/pylock.pcap" any "ip6 and tcp port $port"
  for proc in p1 p2 p3 p4; do
    (cd "$scenarios" && exec "$pyth" pylock_worker.py ::1 "$port" "$proc" "$workdir/pylock.$proc.jsonl" "$control") &
    worker_pids+=($!)
  done
  wait_ready "$control" 4
  touch "$control/go"
  sleep "${PYLOCK_SECONDS:-12}"
  touch "$control/stop"
  for pid in "${worker_pids[@]}"; do wait "$pid"; done
  worker_pids=()
  sleep 0.3
  stop_capture
  stop_servers
  finish pylock "\"[::1]:$port\""
}

# cluster_port: a free port whose cluster bus port (+10000) is free too.
cluster_port() {
  "$pyth" - <<'PY'
import socket
while True:
    s = socket.socket(); s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]
    if port + 10000 > 65535:
        continue
    try:
        b = socket.socket(); b.bind(("127.0.0.1", port + 10000)); b.close()
    except OSError:
        continue
    print(port); break
PY
}

# cluster (and cluster_midstream, the same run): a 3-master Redis Cluster started here
# (redis-server --cluster-enabled yes x3, redis-cli --cluster create), three redis-py
# RedisCluster processes and two ioredis Cluster ones (shardedSubscribers) running
# Redisson's scripts with SPUBLISH and SSUBSCRIBE waits on two locks, and a live resharding of one lock's slot to another master and back
# (cluster_reshard.py: ASK, TRYAGAIN, then MOVED). `cluster` is captured from before
# the clients connect (their CLUSTER SLOTS included); `cluster_midstream` by a second
# tcpdump started 1.5 s into the contention, connections open and scripts running.
record_cluster() {
  need_node
  local ports=() filter="" servers="" port control=$workdir/cluster pause=${CLUSTER_PAUSE_SECONDS:-0.7}
  mkdir -p "$control"
  for _ in 1 2 3; do
    port=$(cluster_port); ports+=("$port")
    redis-server --port "$port" --bind 127.0.0.1 --cluster-enabled yes --cluster-config-file "$workdir/nodes-$port.conf" \
      --cluster-node-timeout 5000 --save "" --appendonly no --dir "$workdir" --logfile "$workdir/redis-$port.log" &
    server_pids+=($!)
    filter+="${filter:+ or }tcp port $port"; servers+="${servers:+,}\"127.0.0.1:$port\""
  done
  for port in "${ports[@]}"; do
    for _ in $(seq 50); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done
  done
  redis-cli --cluster create "${ports[@]/#/127.0.0.1:}" --cluster-replicas 0 --cluster-yes >"$workdir/create.log"
  for port in "${ports[@]}"; do
    for _ in $(seq 100); do redis-cli -p "$port" cluster info | grep -q 'cluster_state:ok' && break; sleep 0.1; done
  done
  sleep 1  # every node agrees on the slots
  start_capture "$here/cluster.pcap" lo "$filter"
  local whole_pid=$tcpdump_pid
  for proc in p1 p2 p3; do
    (cd "$scenarios" && exec "$pyth" cluster_worker.py "$proc" "$workdir/cluster.$proc.jsonl" "$control" "${ports[0]}" orders stock) &
    worker_pids+=($!)
  done
  for proc in n1 n2; do
    node "$scenarios/cluster_ioredis_worker.js" "$proc" "$workdir/cluster.$proc.jsonl" "$control" "${ports[1]}" orders stock &
    worker_pids+=($!)
  done
  wait_ready "$control" 5
  touch "$control/go"
  sleep 1.5
  tcpdump -i lo -U --immediate-mode -B 65536 -s 262144 -w "$here/cluster_midstream.pcap" "$filter" 2>"$workdir/tcpdump2.log" &
  local mid_pid=$!
  worker_pids+=("$mid_pid")  # stopped by cleanup if anything fails
  sleep 0.5
  (cd "$scenarios" && "$pyth" cluster_reshard.py "$workdir/cluster.reshard.jsonl" orders "$pause" "${ports[@]}")
  sleep 1.5
  touch "$control/stop"
  for pid in "${worker_pids[@]}"; do [[ $pid == "$mid_pid" ]] || wait "$pid"; done
  worker_pids=()
  sleep 0.3
  kill -INT "$mid_pid"; wait "$mid_pid" 2>/dev/null || true
  tcpdump_pid=$whole_pid; stop_capture
  stop_servers
  for f in "$workdir"/cluster.*.jsonl; do cp "$f" "$workdir/cluster_midstream.${f#"$workdir"/cluster.}"; done
  size_limit_kb=2048 finish cluster "$servers"
  size_limit_kb=2048 finish cluster_midstream "$servers"
  # These two also keep their expected timelines (tests/locks/test_cluster.cpp).
  local lockscope=${LOCKSCOPE:-$here/../../build/default/cli/lockscope}
  for name in cluster cluster_midstream; do
    "$lockscope" analyze "$here/$name.pcap" > "$here/$name.timeline.txt" 2>/dev/null
    "$lockscope" analyze --format jsonl "$here/$name.pcap" > "$here/$name.jsonl" 2>/dev/null
  done
}

wanted redisson && record_redisson
wanted redlock && record_redlock
wanted del_other && record_del_other
wanted pylock && record_pylock
wanted cluster && record_cluster
true
