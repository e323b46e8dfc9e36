#!/usr/bin/env bash
# Installs what the node tier's real node runs, from Debian's packages (root; once: what is there
# is kept): containerd and runc (the container runtime), the CNI plugins (the bridge the pods are
# on), iptables, ipset and conntrack (kube-proxy's Services and kube-router's NetworkPolicy), and
# busybox-static, whose binary is the probe image, debootstrap (the stand-in Ray base's Debian:
# ci/node/images.py) and docker.io (the launcher image from its Dockerfile:
# ci/node/launcher_image.py). Debian's versions on bookworm: containerd 1.6.20, runc 1.1.5,
# containernetworking-plugins 1.1.1, docker.io 20.10.24.
set -euo pipefail
packages=(containerd runc containernetworking-plugins iptables ipset conntrack busybox-static
  debootstrap docker.io)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null; then
  echo "error: the node tier needs Debian's ${missing[*]} (a root shell on Debian or Ubuntu:" \
    "apt-get install ${missing[*]}); it runs real pods, which need a container runtime" >&2
  exit 1
fi
echo "installing ${missing[*]} (Debian's packages) for the node tier" >&2
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
# Debian starts containerd and dockerd as services where systemd runs; the node starts its own
# (ci/node/node.py, ci/node/launcher_image.py), on sockets and state of their own.
