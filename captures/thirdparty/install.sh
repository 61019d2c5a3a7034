#!/usr/bin/env bash
# Installs the pinned npm clients the third-party recordings use (package.json and
# package-lock.json beside this script) into build/npm-thirdparty/node_modules, a cache
# inside the build tree. Only re-recording (record.sh) needs this; the tests read the
# committed recordings and never need npm or the network.
#
#   captures/thirdparty/install.sh            prints the node_modules path it installed
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
cache=$root/build/npm-thirdparty
command -v npm >/dev/null || { echo "install.sh: npm is missing (apt-get install npm)" >&2; exit 2; }
mkdir -p "$cache"
cp "$here/package.json" "$cache/package.json"
if [[ -f "$here/package-lock.json" ]]; then
  cp "$here/package-lock.json" "$cache/package-lock.json"
  # Already installed from this very lock file: nothing to do.
  if [[ -f "$cache/node_modules/.package-lock.json" ]] && cmp -s "$here/package-lock.json" "$cache/.installed-lock.json"; then
    echo "$cache/node_modules"; exit 0
  fi
  (cd "$cache" && npm ci --prefer-offline --no-audit --no-fund --cache "$cache/.npm" >&2)
else
  # First pin: resolve once and keep the lock file beside the scenarios.
  (cd "$cache" && npm install --no-audit --no-fund --cache "$cache/.npm" >&2)
  cp "$cache/package-lock.json" "$here/package-lock.json"
fi
cp "$cache/package-lock.json" "$cache/.installed-lock.json"
echo "$cache/node_modules"
