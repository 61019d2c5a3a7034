#!/usr/bin/env bash
# ctest's browser.report: installs puppeteer-core (tests/browser/install.sh, a cache in
# build/) and checks the HTML report of every bundled capture in headless chromium.
#   tests/browser/run.sh LOCKSCOPE
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
lockscope=$1
[[ -x ${CHROMIUM:-/usr/bin/chromium} ]] || { echo "run.sh: ${CHROMIUM:-/usr/bin/chromium} is missing (scripts/install-deps installs chromium)" >&2; exit 1; }
modules=$("$here/install.sh")
cd "$root"
NODE_PATH=$modules exec node "$here/report_test.js" "$lockscope" captures/*.pcap captures/thirdparty/*.pcap \
  captures/crafted/*.pcap captures/recorded/*.pcap
