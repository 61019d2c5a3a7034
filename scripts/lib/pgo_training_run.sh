# Sourced by scripts/pgo-train (and its test, tests/build/check_pgo_training_run.sh).
#
#   pgo_training_run LOCKSCOPE ERRFILE ARGS...
#
# One training run of LOCKSCOPE with ARGS, its output dropped and its stderr kept in
# ERRFILE. Exit status 1 is expected: some bundled captures are damaged on purpose, and
# the output then covers what was read. Any other failure (2: refused arguments or
# output, 128+N: killed by signal N, a crash) would leave a profile of a run that did
# not do its work, so it ends the calling script with status 1 and says which run.
pgo_training_run() {
  local lockscope=$1 errors=$2 status=0
  shift 2
  "$lockscope" "$@" >/dev/null 2>"$errors" || status=$?
  if (( status > 1 )); then
    echo "pgo-train: \`lockscope $*\` failed (exit status $status):" >&2
    tail -5 "$errors" >&2
    exit 1
  fi
}

# Every training run over the bundled CAPTURES (each in every output form, then the HTML
# report of all of them into WORKDIR), through pgo_training_run.
#
#   pgo_train_on_captures LOCKSCOPE WORKDIR CAPTURE...
pgo_train_on_captures() {
  local lockscope=$1 work=$2 f
  shift 2
  for f in "$@"; do
    pgo_training_run "$lockscope" "$work/train.err" analyze --threads 1 "$f"
    pgo_training_run "$lockscope" "$work/train.err" analyze --threads 2 --format jsonl "$f"
    pgo_training_run "$lockscope" "$work/train.err" analyze --summary "$f"
    pgo_training_run "$lockscope" "$work/train.err" decode --format jsonl "$f"
  done
  pgo_training_run "$lockscope" "$work/train.err" analyze --format html -o "$work/report.html" "$@"
}
