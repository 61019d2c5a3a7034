#!/usr/bin/env bash
# Records real Redisson (a jar of /work/shared/redisson, default 4.7.0) driving every lock
# type against a throw-away redis-server, with tcpdump, and Redisson's own log of what it
# did: tests/redisson/redisson-<release>.pcap and .log.jsonl (the oracle of
# tests/locks/test_redisson_releases.cpp's "[real]" case). PROTOCOL=RESP3 makes Redisson
# speak RESP3 (Config.setProtocol: 3.27.2 and 4.7.0 have it, 3.16.8 not):
# redisson-<release>-resp3.pcap and .log.jsonl.
#
#   [PROTOCOL=RESP3] tests/redisson/record.sh [RELEASE]        (run as a user that may capture on lo)
#
# DRIVER and PREFIX choose another driver and the recording's name (record_permits.sh).
#
# Needs JDK 17, redis-server, tcpdump and the Debian jars Redisson runs on
# (libnetty-java libjackson2-databind-java libjackson2-dataformat-yaml libbyte-buddy-java
# libslf4j-java libgeronimo-jcache-1.0-spec-java; /work/shared/redisson/README.md).
set -euo pipefail
release=${1:-4.7.0}
here=$(cd "$(dirname "$0")" && pwd)
. "$here/classpath.sh"
redisson_protocol || exit 2
driver=${DRIVER:-RedissonLockDriver}
name=${PREFIX:-redisson}-$release$protocol_suffix
CP=$(redisson_classpath "$release") || exit 1
work=$(mktemp -d)
trap 'kill $tcpdump_pid $redis_pid 2>/dev/null || true; rm -rf "$work"' EXIT
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
javac -cp "$CP" -d "$work/classes" "$here/$driver.java" "$here/RedissonProtocol.java"
redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --daemonize no >"$work/redis.log" 2>&1 &
redis_pid=$!
for _ in $(seq 50); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done
tcpdump -i lo -U -s 0 -w "$work/capture.pcap" "tcp port $port" 2>"$work/tcpdump.log" &
tcpdump_pid=$!
sleep 1
java -Dorg.slf4j.simpleLogger.defaultLogLevel=warn -cp "$work/classes:$CP" "$driver" "$port" "$work/log.jsonl" "${protocol_arg[@]}"
sleep 1
kill -INT $tcpdump_pid
wait $tcpdump_pid || true
cp "$work/capture.pcap" "$here/$name.pcap"
cp "$work/log.jsonl" "$here/$name.log.jsonl"
ls -l "$here/$name.pcap" "$here/$name.log.jsonl"
