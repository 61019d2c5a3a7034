#!/usr/bin/env bash
# Re-records redisson_trylock.pcap and .log.jsonl (RedissonTryLockDriver.java) and
# redisson_dead_holder.pcap and .log.jsonl (RedissonDeadHolderDriver.java, its holder JVM
# SIGKILLed here) on real Redisson 3.27.2 against a throw-away redis-server, with tcpdump.
#   tests/locks/recordings/record_redisson_trylock.sh   (as a user that may capture on lo)
# Needs JDK 17, redis-server, tcpdump and the Debian jars (/work/shared/redisson/README.md).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../../redisson/classpath.sh"
CP=$(redisson_classpath 3.27.2) || exit 1
work=$(mktemp -d)
tcpdump_pid=
trap 'kill $tcpdump_pid $redis_pid 2>/dev/null || true; rm -rf "$work"' EXIT
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
javac -cp "$CP" -d "$work/classes" "$here/RedissonTryLockDriver.java" "$here/RedissonDeadHolderDriver.java"
redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --daemonize no >"$work/redis.log" 2>&1 &
redis_pid=$!
for _ in $(seq 50); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done
java_cmd=(java -Dorg.slf4j.simpleLogger.defaultLogLevel=warn -cp "$work/classes:$CP")
record() {  # record NAME COMMAND...: the capture and the log of COMMAND
  local name=$1
  shift
  tcpdump -i lo -U --immediate-mode -B 65536 -s 0 -w "$work/$name.pcap" "tcp port $port" 2>"$work/tcpdump.log" &
  tcpdump_pid=$!
  sleep 1
  "$@" >"$work/$name.log.jsonl"
  sleep 1
  kill -INT $tcpdump_pid
  wait $tcpdump_pid || true
  cp "$work/$name.pcap" "$work/$name.log.jsonl" "$here/"
  ls -l "$here/$name.pcap" "$here/$name.log.jsonl"
}
dead_holder() {
  "${java_cmd[@]}" RedissonDeadHolderDriver "$port" holder &
  local holder=$!
  # Its JVM starts and takes the lock (10 s lease), then the waiter's starts and waits.
  for _ in $(seq 300); do grep -q '"who":"H"' "$work/redisson_dead_holder.log.jsonl" && break; sleep 0.1; done
  "${java_cmd[@]}" RedissonDeadHolderDriver "$port" waiter &
  local waiter=$!
  sleep 5
  echo "{\"t_us\":$(date +%s%6N),\"event\":\"killed\"}"
  kill -9 $holder
  wait $waiter
}
record redisson_trylock "${java_cmd[@]}" RedissonTryLockDriver "$port"
record redisson_dead_holder dead_holder
