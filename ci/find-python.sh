#!/usr/bin/env bash
# Prints the path of a Python 3.12 interpreter, or explains how to get one.
set -euo pipefail
for candidate in "${PYTHON:-}" python3.12 "$(command -v pyenv >/dev/null && pyenv root 2>/dev/null)"/versions/3.12*/bin/python3.12 /usr/bin/python3.12 /usr/local/bin/python3.12; do
  [ -n "$candidate" ] || continue
  if path=$(command -v "$candidate" 2>/dev/null) && "$path" -c 'import sys; assert sys.version_info[:2] == (3, 12)' 2>/dev/null; then
    echo "$path"; exit 0
  fi
done
echo "error: Python 3.12 not found. Install it (e.g. 'pyenv install 3.12', or 'apt-get install python3.12') or pass PYTHON=/path/to/python3.12" >&2
exit 1
