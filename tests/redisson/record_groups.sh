#!/usr/bin/env bash
# Records real Redisson (default 4.7.0) read/write locks, MultiLocks and RedLocks, with
# each JVM's own log of what it did (RedissonGroupsDriver.java):
#   tests/redisson/groups-<release>-rw.pcap      one redis-server; two readers leave 1 s
#                                                apart while a writer waits
#   tests/redisson/groups-<release>-multi.pcap   three redis-servers; two JVMs of 3 threads
#   tests/redisson/groups-<release>-red.pcap     each contending for a MultiLock / RedLock
# and the .log.jsonl beside each (the oracle of tests/locks/test_groups_recorded.cpp).
# PROTOCOL=RESP3 makes Redisson speak RESP3: groups-<release>-resp3-<name>.pcap.
#
#   [PROTOCOL=RESP3] tests/redisson/record_groups.sh [RELEASE]   (run as a user that may capture on lo)
#
# Needs what record.sh needs (JDK 17, redis-server, tcpdump, Debian's jars).
set -euo pipefail
release=${1:-4.7.0}
here=$(cd "$(dirname "$0")" && pwd)
. "$here/classpath.sh"
redisson_protocol || exit 2
protocol_property=()
(( ${#protocol_arg[@]} == 0 )) || protocol_property=(-Dlockscope.protocol="${protocol_arg[0]}")
CP=$(redisson_classpath "$release") || exit 1
work=$(mktemp -d)
pids=()
trap 'kill "${pids[@]}" 2>/dev/null || true; rm -rf "$work"' EXIT
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
javac -cp "$CP" -d "$work/classes" "$here/RedissonGroupsDriver.java" "$here/RedissonProtocol.java"
ports=()
for i in 1 2 3; do
  p=$(free_port)
  redis-server --port "$p" --bind 127.0.0.1 --save '' --appendonly no --daemonize no >"$work/redis-$i.log" 2>&1 &
  pids+=($!)
  ports+=("$p")
done
for p in "${ports[@]}"; do
  for _ in $(seq 50); do redis-cli -p "$p" ping >/dev/null 2>&1 && break; sleep 0.1; done
done
run() {  # run NAME MODE PORTS JVMS [THREADS ROUNDS]
  local name=$1 mode=$2 list=$3 jvms=$4
  shift 4
  local filter="tcp port ${list//,/ or tcp port }"
  rm -f "$work/log.jsonl"
  tcpdump -i lo -U -s 0 -w "$work/$name.pcap" "$filter" 2>"$work/tcpdump.log" &
  local dump=$!
  sleep 1
  local java_pids=()
  for k in $(seq "$jvms"); do
    java -Dorg.slf4j.simpleLogger.defaultLogLevel=warn "${protocol_property[@]}" -cp "$work/classes:$CP" RedissonGroupsDriver \
      "$mode" "$list" "$work/log.jsonl" "jvm-$k" "$@" &
    java_pids+=($!)
  done
  wait "${java_pids[@]}"
  sleep 1
  kill -INT $dump
  wait $dump || true
  local out=$here/groups-$release$protocol_suffix-$name
  cp "$work/$name.pcap" "$out.pcap"
  cp "$work/log.jsonl" "$out.log.jsonl"
  ls -l "$out.pcap" "$out.log.jsonl"
}
run rw rw "${ports[0]}" 1
all=$(IFS=,; echo "${ports[*]}")
run multi multi "$all" 2 3 8
run red red "$all" 2 3 8
