#!/usr/bin/env bash
# Regenerates the README's screenshots of the HTML report (docs/*.png) in headless
# chromium: the seed reconstruction, and node-redisson's lost wake-up
# (captures/thirdparty/redisson.pcap) zoomed to its first subscription_lost.
#   scripts/report-screenshots.sh [LOCKSCOPE]     (default build/default/cli/lockscope)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
lockscope=${1:-$root/build/default/cli/lockscope}
modules=$("$root/tests/browser/install.sh")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$root"
"$lockscope" analyze captures/seed-redisson.pcap --format html -o "$tmp/seed.html" 2>/dev/null
"$lockscope" analyze captures/thirdparty/redisson.pcap --format html -o "$tmp/redisson.html" 2>/dev/null
NODE_PATH=$modules node scripts/report-screenshots.js "$root/docs/report-seed.png" "$tmp/seed.html"
NODE_PATH=$modules node scripts/report-screenshots.js "$root/docs/report-lost-wakeup.png" "$tmp/redisson.html" subscription_lost
echo "docs/report-seed.png docs/report-lost-wakeup.png"
