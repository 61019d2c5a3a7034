#!/usr/bin/env bash
# The HTML report of the bench capture: generation time, peak RSS and size
# (`lockscope analyze --format html`), then its time-to-interactive in headless
# chromium (report_tti.js). Not a test: run it by hand on an otherwise idle machine.
#   bench/analyzer/report_bench.sh [CAPTURE] [LOCKSCOPE]
#   (default bench/data/lock.pcap, made by make_lock_capture.sh; build/default/cli/lockscope)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
capture=${1:-$root/bench/data/lock.pcap}
lockscope=${2:-$root/build/default/cli/lockscope}
out=$(mktemp --suffix=.html)
trap 'rm -f "$out"' EXIT
echo "== $lockscope analyze $capture --format html -o $out"
/usr/bin/time -f "wall %e s, user %U s, sys %S s, peak RSS %M KiB" "$lockscope" analyze "$capture" --format html -o "$out"
echo "report: $(stat -c %s "$out") bytes"
modules=$("$root/tests/browser/install.sh")
NODE_PATH=$modules node "$root/bench/analyzer/report_tti.js" "$out" 3
