#!/usr/bin/env bash
# Every output lockscope makes of every bundled capture, as one SHA-256 a line:
#   MODE CAPTURE STREAM SHA256 (STREAM: out, err, or rc=N for the exit status)
# A restructuring that changes no behaviour must leave every line as it was: the lines
# made before it are stored in tests/outputs/digests.txt, and CI compares (outputs.digests).
# A change that is meant to change an output stores new digests in the same commit
# (output_digests.sh LOCKSCOPE METRICS_TOOL > tests/outputs/digests.txt) and says which
# outputs changed and why; the diff of digests.txt lists them by mode and capture.
#
#   output_digests.sh LOCKSCOPE METRICS_TOOL            print the digests
#   output_digests.sh LOCKSCOPE METRICS_TOOL --check F  compare with F, list what differs
#
# Run from anywhere; captures are named relative to the repository root, so paths that
# the outputs print are the same in every checkout. METRICS_TOOL is
# tests/outputs/metrics_of_capture (the exposition text the live metrics server would
# serve after the capture, its process gauges zeroed).
set -euo pipefail
unset TZ  # text output names the capture start in UTC, and in the local zone too when TZ is set
lockscope=$(realpath "$1")
metrics_tool=$(realpath "$2")
mode=${3:-print}
expected=${4:-}
[[ -n "$expected" ]] && expected=$(realpath "$expected")
cd "$(dirname "$0")/../.."

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

digest() { sha256sum "$1" | cut -d' ' -f1; }
# stderr names the -o file: the scratch folder's name is replaced by a fixed one.
digest_err() { sed "s|$work|WORK|g" "$1" | sha256sum | cut -d' ' -f1; }

# run MODE CAPTURE CMD...: the command's stdout, stderr and status, digested.
run() {
  local name=$1 capture=$2
  shift 2
  local rc=0
  "$@" >"$work/out" 2>"$work/err" </dev/null || rc=$?
  echo "$name $capture out $(digest "$work/out")"
  echo "$name $capture err $(digest_err "$work/err")"
  echo "$name $capture rc=$rc"
}

# run_file MODE CAPTURE CMD...: a command that writes $work/file (-o); its contents digested.
run_file() {
  local name=$1 capture=$2
  shift 2
  local rc=0
  rm -f "$work/file"
  "$@" >"$work/out" 2>"$work/err" </dev/null || rc=$?
  echo "$name $capture out $(digest "$work/out")"
  echo "$name $capture err $(digest_err "$work/err")"
  if [[ -f "$work/file" ]]; then echo "$name $capture file $(digest "$work/file")"; else echo "$name $capture file none"; fi
  echo "$name $capture rc=$rc"
}

produce() {
  local captures
  mapfile -t captures < <(find captures -name '*.pcap' -o -name '*.pcapng' | LC_ALL=C sort)
  for c in "${captures[@]}"; do
    run decode.text "$c" "$lockscope" decode "$c"
    run decode.jsonl "$c" "$lockscope" decode "$c" --format jsonl
    run decode.eval "$c" "$lockscope" decode "$c" --command EVAL,EVALSHA,SUBSCRIBE,UNSUBSCRIBE --max-argument 40
    run analyze.text "$c" "$lockscope" analyze "$c"
    # --threads 1 in text only: "captures: one thread and two give the same events" compares the
    # JSONL of both for every bundled capture.
    run analyze.text.threads1 "$c" "$lockscope" analyze "$c" --threads 1
    run analyze.jsonl "$c" "$lockscope" analyze "$c" --format jsonl
    cp "$work/out" "$work/jsonl"  # its first lock names the SVG's below
    run analyze.summary "$c" "$lockscope" analyze "$c" --summary
    run analyze.summary.top2 "$c" "$lockscope" analyze "$c" --summary --top 2
    run analyze.merge_servers "$c" "$lockscope" analyze "$c" --format jsonl --merge-servers
    run analyze.max_locks2 "$c" "$lockscope" analyze "$c" --max-locks 2
    run analyze.verbose "$c" "$lockscope" analyze "$c" -v --no-summary
    run_file analyze.html "$c" "$lockscope" analyze "$c" --format html -o "$work/file"
    run_file analyze.html.coarse "$c" "$lockscope" analyze "$c" --format html --html-detail 20 --html-max-locks 2 -o "$work/file"
    run analyze.trace "$c" "$lockscope" analyze "$c" --format trace
    # The SVG of the capture's first lock (by the JSONL's first "lock" field).
    local first
    first=$(sed -n 's/.*"lock":"\([^"]*\)".*/\1/p' "$work/jsonl" | head -1 || true)
    if [[ -n "$first" ]]; then
      run_file analyze.svg "$c" "$lockscope" analyze "$c" --format svg --lock "$first" -o "$work/file"
      run analyze.lock_filter "$c" "$lockscope" analyze "$c" --lock "$first"
    fi
    run analyze.replay "$c" "$lockscope" analyze --replay "$c" --replay-speed 0 --format jsonl
    run analyze.replay.text "$c" "$lockscope" analyze --replay "$c" --replay-speed 0
    run metrics "$c" "$metrics_tool" "$c"
  done
}

case "$mode" in
  print) produce ;;
  --check)
    [[ -f "$expected" ]] || { echo "output_digests: no stored digests at $expected" >&2; exit 2; }
    produce >"$work/now"
    if diff <(LC_ALL=C sort "$expected") <(LC_ALL=C sort "$work/now") >"$work/diff"; then
      echo "output_digests: $(wc -l <"$work/now") outputs, every one as stored"
    else
      echo "output_digests: outputs that changed (< stored, > now):" >&2
      cat "$work/diff" >&2
      exit 1
    fi
    ;;
  *) echo "usage: output_digests.sh LOCKSCOPE METRICS_TOOL [--check DIGESTS]" >&2; exit 2 ;;
esac
