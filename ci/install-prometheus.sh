#!/usr/bin/env bash
# Installs the pinned Prometheus (Debian's package, PROMETHEUS_DEB_VERSION) into
# .tools/prometheus-<version>/, once: the package is downloaded and unpacked, never installed, so
# no service starts and nothing outside the clone changes. The local cluster's `up --prometheus`
# runs it. Prints the directory that holds the binary.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
# shellcheck source=versions.env
. "$root/ci/versions.env"
dest="$root/.tools/prometheus-${PROMETHEUS_DEB_VERSION%%+*}"
if [ -x "$dest/prometheus" ]; then echo "$dest"; exit 0; fi
command -v apt-get >/dev/null || {
  echo "error: Prometheus is installed from Debian's package and this machine has no apt-get;" \
    "install Prometheus 2.x or 3.x yourself and put \`prometheus\` on PATH" >&2
  exit 1
}
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
fetch() { (cd "$tmp" && apt-get download -q "prometheus=$PROMETHEUS_DEB_VERSION" >/dev/null 2>&1); }
if ! fetch; then
  # A fresh machine has no package lists yet: read them once (root only), then try again.
  if [ "$(id -u)" -eq 0 ]; then apt-get update -qq >/dev/null && fetch; else false; fi || {
    echo "error: could not download Debian's prometheus=$PROMETHEUS_DEB_VERSION" \
      "(as root: apt-get update, then make prometheus again; or put a Prometheus on PATH)" >&2
    exit 1
  }
fi
dpkg-deb -x "$tmp"/prometheus_*.deb "$tmp/x"
mkdir -p "$dest"
cp "$tmp/x/usr/bin/prometheus" "$tmp/x/usr/bin/promtool" "$dest/"
"$dest/prometheus" --version >/dev/null
echo "$dest"
