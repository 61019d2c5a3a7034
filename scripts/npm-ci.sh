#!/usr/bin/env bash
# Installs the pinned npm packages of a folder (its package.json and package-lock.json)
# into build/<cache>/node_modules, a cache inside the build tree, and prints that path.
# Nothing is installed again while the lock file is the one installed.
#
#   scripts/npm-ci.sh tests/browser npm-browser
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
here=$(cd "$1" && pwd)
cache=$root/build/$2
command -v npm >/dev/null || { echo "npm-ci.sh: npm is missing (apt-get install npm)" >&2; exit 2; }
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
  # First pin: resolve once and keep the lock file beside package.json.
  (cd "$cache" && npm install --no-audit --no-fund --cache "$cache/.npm" >&2)
  cp "$cache/package-lock.json" "$here/package-lock.json"
fi
cp "$cache/package-lock.json" "$cache/.installed-lock.json"
echo "$cache/node_modules"
