#!/usr/bin/env bash
# Times `lockscope decode` against tshark and tcpdump: see capture_bench.sh.
exec "$(dirname "$0")/capture_bench.sh" decode "$@"
