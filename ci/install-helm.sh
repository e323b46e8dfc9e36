#!/usr/bin/env bash
# Builds a pinned helm from its Go module into .tools/helm-<version>/helm, once (then cached).
# Stamps the version and the Kubernetes version helm assumes, as helm's own Makefile does.
set -euo pipefail
version=${1:?usage: ci/install-helm.sh vX.Y.Z}
major=${version%%.*}
dest="$(cd "$(dirname "$0")/.." && pwd)/.tools/helm-$version"
[ -x "$dest/helm" ] && exit 0
if ! command -v go >/dev/null; then
  echo "error: building helm $version needs Go (https://go.dev/doc/install), or put helm $version at $dest/helm" >&2
  exit 1
fi
module="helm.sh/helm/$major"
gomod=$(go mod download -json "$module@$version" | sed -n 's/.*"GoMod": "\(.*\)",*/\1/p')
client_go=$(sed -n 's/^[[:space:]]*k8s.io\/client-go v0\.\([0-9]*\)\..*/\1/p' "$gomod" | head -1)
ldflags="-X $module/internal/version.version=$version"
if [ "$major" = v3 ] && [ -n "$client_go" ]; then
  for pkg in pkg/lint/rules pkg/chartutil; do
    ldflags="$ldflags -X $module/$pkg.k8sVersionMajor=1 -X $module/$pkg.k8sVersionMinor=$client_go"
  done
fi
echo "building helm $version (Kubernetes 1.$client_go) into $dest"
GOBIN="$dest" CGO_ENABLED=0 go install -trimpath -ldflags "$ldflags" "$module/cmd/helm@$version"
"$dest/helm" version --short
