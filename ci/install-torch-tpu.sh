#!/usr/bin/env bash
# Installs the torch image's TorchTPU (torch-tpu, with the torch and libtpu it brings, at the
# versions images/launcher/requirements-torch.lock pins) into its own venv, .tools/torch-tpu-<v>/,
# once: tests/image/test_torch_tpu_env.py runs its own slice derivation beside the launcher's.
# Not in .venv: TorchTPU loads itself whenever torch is imported (docs/torch.md).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
lock="$root/images/launcher/requirements-torch.lock"
version="$(sed -n 's/^torch-tpu==\([^ ]*\) .*/\1/p' "$lock")"
[ -n "$version" ] || { echo "error: $lock pins no torch-tpu" >&2; exit 1; }
dest="$root/.tools/torch-tpu-$version"
[ -x "$dest/bin/python" ] && [ -f "$dest/.installed" ] && exit 0
# shellcheck source=versions.env
. "$root/ci/versions.env"
uv="$root/.tools/uv-$UV_VERSION/bin/uv"
[ -x "$uv" ] || { echo "error: $uv is missing: run make venv first" >&2; exit 1; }
"$uv" venv -q --allow-existing -p "$("$root/ci/find-python.sh")" "$dest"
"$uv" pip install -q -p "$dest/bin/python" "torch-tpu==$version" --constraint "$lock"
touch "$dest/.installed"
