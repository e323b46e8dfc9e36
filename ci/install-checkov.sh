#!/usr/bin/env bash
# Installs a pinned checkov (the Kubernetes policy scanner the cluster tests run on the objects
# read back from the API server) into its own venv, .tools/checkov-<version>/, once.
set -euo pipefail
version=${1:?usage: ci/install-checkov.sh X.Y.Z}
root="$(cd "$(dirname "$0")/.." && pwd)"
dest="$root/.tools/checkov-$version"
[ -x "$dest/bin/checkov" ] && exit 0
# shellcheck source=versions.env
. "$root/ci/versions.env"
uv="$root/.tools/uv-$UV_VERSION/bin/uv"
[ -x "$uv" ] || { echo "error: $uv is missing: run make venv first" >&2; exit 1; }
"$uv" venv -q -p "$("$root/ci/find-python.sh")" "$dest"
"$uv" pip install -q -p "$dest/bin/python" "checkov==$version"
"$dest/bin/checkov" --version
