#!/usr/bin/env bash
# Prints the path of the helm on PATH when it is the pinned version (ci/versions.env), else
# nothing: the Makefile then builds the pinned one into .tools.
set -euo pipefail
version=${1:?usage: ci/find-helm.sh vX.Y.Z}
helm=$(command -v helm 2>/dev/null) || exit 0
[ "$("$helm" version --short 2>/dev/null | cut -d+ -f1)" = "$version" ] && echo "$helm"
exit 0
