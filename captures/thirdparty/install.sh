#!/usr/bin/env bash
# Installs the pinned npm clients the third-party recordings use (package.json and
# package-lock.json beside this script) into build/npm-thirdparty/node_modules, a cache
# inside the build tree. Only re-recording (record.sh) needs this; the tests read the
# committed recordings and never need npm or the network.
#
#   captures/thirdparty/install.sh            prints the node_modules path it installed
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
exec "$here/../../scripts/npm-ci.sh" "$here" npm-thirdparty
