#!/bin/sh
# lockscope ($LOCKSCOPE) with its process id added to stderr: a program whose output
# changes with the run, which check_determinism.py must report (outputs.determinism_finds_a_difference).
"$LOCKSCOPE" "$@"
rc=$?
echo "run $$" >&2
exit $rc
