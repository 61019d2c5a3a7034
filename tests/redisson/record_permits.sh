#!/usr/bin/env bash
# Records real Redisson (a jar of /work/shared/redisson, default 4.7.0) driving its
# RSemaphore, RPermitExpirableSemaphore and RCountDownLatch under contention
# (RedissonPermitsDriver.java) against a throw-away redis-server, with tcpdump, and each
# thread's own log of what it did: tests/redisson/permits-<release>.pcap and .log.jsonl
# (the oracle of tests/locks/test_permits.cpp). PROTOCOL=RESP3 makes Redisson speak RESP3:
# permits-<release>-resp3.pcap and .log.jsonl. The recording itself is record.sh's.
#
#   [PROTOCOL=RESP3] tests/redisson/record_permits.sh [RELEASE]   (run as a user that may capture on lo)
set -euo pipefail
DRIVER=RedissonPermitsDriver PREFIX=permits exec "$(dirname "$0")/record.sh" "$@"
