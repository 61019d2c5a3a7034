#!/usr/bin/env bash
# scripts/pgo-train's training runs (scripts/lib/pgo_training_run.sh): exit status 0
# and 1 (a damaged capture) go on; 2 (refused arguments) and a crash stop the training,
# naming the run. Then the runs pgo-train makes over the bundled captures, made with
# LOCKSCOPE, must be one that goes on: a capture that made lockscope fail would stop
# `make pgo` there.
#
#   check_pgo_training_run.sh SOURCE_DIR LOCKSCOPE
set -euo pipefail
source_dir=$1
lockscope=$2
source "$source_dir/scripts/lib/pgo_training_run.sh"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0

fake() {  # a lockscope that says something and ends as asked
  printf '#!/bin/sh\necho "fake lockscope: %s" >&2\n%s\n' "$1" "$2" >"$work/fake"
  chmod +x "$work/fake"
}
expect() {  # expect go|stop, then the run's arguments
  local want=$1 out status=0
  shift
  out=$( (pgo_training_run "$work/fake" "$work/err" "$@"; echo "went on") 2>&1) || status=$?
  if [[ $want == go && ( $status != 0 || $out != *"went on"* ) ]]; then
    echo "FAIL: expected the training to go on: status $status, output: $out"
    failures=$((failures + 1))
  elif [[ $want == stop && ( $status != 1 || $out == *"went on"* || $out != *"lockscope $*"*"failed"* ||
                              $out != *"fake lockscope"* ) ]]; then
    echo "FAIL: expected the training to stop, naming the run and quoting its error: status $status, output: $out"
    failures=$((failures + 1))
  fi
}

fake "fine" "exit 0";                  expect go analyze a.pcap
fake "truncated capture" "exit 1";     expect go analyze --threads 1 b.pcap
fake "unknown option" "exit 2";        expect stop analyze --bogus c.pcap
fake "segfault" 'kill -SEGV $$';       expect stop decode --format jsonl d.pcap
fake "aborted" 'kill -ABRT $$';        expect stop analyze --summary e.pcap

# What pgo-train runs over the bundled captures (pgo_train_on_captures), with this
# build's lockscope: none of the runs may stop the training.
mapfile -t captures < <(find "$source_dir/captures" -name '*.pcap' | sort)
(( ${#captures[@]} > 0 )) || { echo "FAIL: no bundled captures under $source_dir/captures"; exit 1; }
if ! out=$( (pgo_train_on_captures "$lockscope" "$work" "${captures[@]}") 2>&1); then
  echo "FAIL: a run over the bundled captures would stop the training: $out"
  failures=$((failures + 1))
fi
(( failures == 0 )) || exit 1
echo "pgo training runs: statuses 0 and 1 go on, 2 and crashes stop; the runs over all ${#captures[@]} bundled captures go on"
