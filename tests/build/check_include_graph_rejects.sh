#!/usr/bin/env bash
# build.include_graph_rejects: the include-graph check fails on a copy of the libraries
# with a backwards include planted in each rule's way (a later library, a later stage,
# a loop), and names each one. Guards the check itself against passing everything.
#   check_include_graph_rejects.sh SOURCE_DIR
set -euo pipefail
src=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp -r "$src/resp" "$src/lock" "$src/analyzer" "$work/"
mkdir -p "$work/tests/build"
cp "$src/tests/build/check_include_graph.py" "$work/tests/build/"
check() { python3 "$work/tests/build/check_include_graph.py" "$work"; }

check >/dev/null || { echo "the unchanged copy should pass"; check; exit 1; }

expect() {  # expect WHAT-THE-MESSAGE-SAYS: the check fails and says it
  local out rc=0
  out=$(check) || rc=$?
  if [[ $rc -ne 1 ]] || ! grep -q -- "$1" <<<"$out"; then
    echo "expected a failure naming: $1"; echo "$out"; exit 1
  fi
}
recognizer=$(ls "$work"/analyzer/locks/src/recognize/*.cpp | head -1)
ingest_file=$(ls "$work"/analyzer/ingest/src/session/*.cpp | head -1)

cp "$ingest_file" "$work/saved_ingest"
cp "$recognizer" "$work/saved_recognizer"

echo '#include "lockscope/locks/lock_timeline.hpp"' >>"$ingest_file"
expect "ingest comes before locks (rule 1)"
cp "$work/saved_ingest" "$ingest_file"

echo '#include "lockscope/locks/lock_report.hpp"' >>"$recognizer"
expect "stage recognize comes before stage output (rule 2)"
cp "$work/saved_recognizer" "$recognizer"

echo '#include "lockscope/lock/client.hpp"' >>"$ingest_file"
expect "only the lock scripts and naming are shared (rule 1)"
cp "$work/saved_ingest" "$ingest_file"

# A loop between two headers of one stage: a.hpp -> b.hpp -> a.hpp.
mkdir -p "$work/analyzer/locks/src/timeline"
printf '#pragma once\n#include "timeline/loop_b.hpp"\n' >"$work/analyzer/locks/src/timeline/loop_a.hpp"
printf '#pragma once\n#include "timeline/loop_a.hpp"\n' >"$work/analyzer/locks/src/timeline/loop_b.hpp"
expect "include loop"
echo "the include-graph check rejected each planted violation"
