#!/usr/bin/env bash
# Installs puppeteer-core (pinned: package.json and package-lock.json beside this script)
# into build/npm-browser/node_modules and prints that path. It drives /usr/bin/chromium;
# no browser is downloaded.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
export PUPPETEER_SKIP_DOWNLOAD=1
exec "$here/../../scripts/npm-ci.sh" "$here" npm-browser
