#!/usr/bin/env bash
# pytest for the Makefile's test targets: exit code 5 (no tests collected) is a failure with a
# message, never a silent pass; every other code passes through.
set -uo pipefail
python="$1"
shift
"$python" -m pytest "$@"
code=$?
if [ "$code" -eq 5 ]; then
  echo "error: pytest collected no tests (pytest $*): a test tier that runs nothing is broken" >&2
fi
exit "$code"
