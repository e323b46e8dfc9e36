#!/usr/bin/env bash
# Builds the test control plane's binaries into .tools/cluster/<component>-<version>/, each once
# (a version's directory is the cache; Go's module and build caches make a rebuild after a bump fast).
#   etcd, kube-apiserver, -controller-manager, -scheduler, kubectl, the KubeRay operator, the JobSet
#     and Kueue controllers: from the pinned tools modules in ci/cluster/*/ (see pin.sh), versions stamped in;
#   LeaderWorkerSet's CRD (no controller): from its module;
#   kwok, kwokctl: `go install module@version`;
#   the node tier's kubelet, kube-proxy, kube-router and CoreDNS (not in the default list: make
#     node-build): from the pinned tools modules in ci/node/*/; its bucket CSI stand-in from source.
# Usage: ci/cluster/build.sh [component ...]   (default: all); prints the bin directory of each.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
# shellcheck source=../versions.env
. "$here/../versions.env"
tools="$root/.tools/cluster"
export CGO_ENABLED=0 GOFLAGS="${GOFLAGS:-} -trimpath"

if ! command -v go >/dev/null; then
  echo "error: building the test control plane needs Go >= 1.26 (https://go.dev/doc/install)" >&2
  exit 1
fi

module_dir() {  # module@version -> its directory in the Go module cache (downloaded if needed)
  go mod download -json "$1" | sed -n 's/.*"Dir": "\(.*\)",*/\1/p'
}

done_or_build() {  # name version builder: runs builder into a temp dir, then moves it into place
  local dest="$tools/$1-$2"
  if [ ! -f "$dest/.complete" ]; then
    echo "building $1 $2 into $dest" >&2
    local start=$SECONDS
    rm -rf "$dest.partial" && mkdir -p "$dest.partial"
    "$3" "$dest.partial"
    touch "$dest.partial/.complete"
    rm -rf "$dest" && mv "$dest.partial" "$dest"
    echo "built $1 $2 in $((SECONDS - start)) s" >&2
  fi
  echo "$dest"
}

build_etcd() {
  (cd "$here/etcd" && go build -o "$1/etcd" go.etcd.io/etcd/server/v3)
}

build_kubernetes() {
  local minor=${K8S_VERSION#v1.}
  minor=${minor%%.*}
  # Without these /version says v0.0.0 and Helm's kubeVersion checks fail.
  local ldflags="-s -w
    -X k8s.io/component-base/version.gitVersion=$K8S_VERSION
    -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor
    -X k8s.io/component-base/version.gitTreeState=clean
    -X k8s.io/client-go/pkg/version.gitVersion=$K8S_VERSION
    -X k8s.io/client-go/pkg/version.gitMajor=1 -X k8s.io/client-go/pkg/version.gitMinor=$minor"
  local cmd
  # One at a time: each link takes ~2 GiB.
  for cmd in kube-apiserver kube-controller-manager kube-scheduler kubectl; do
    (cd "$here/k8s" && go build -ldflags "$ldflags" -o "$1/$cmd" "k8s.io/kubernetes/cmd/$cmd")
  done
}

build_node_kubernetes() {  # the node tier's kubelet and kube-proxy (ci/node/k8s), stamped as above
  local minor=${K8S_VERSION#v1.}
  minor=${minor%%.*}
  local ldflags="-s -w
    -X k8s.io/component-base/version.gitVersion=$K8S_VERSION
    -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor
    -X k8s.io/component-base/version.gitTreeState=clean"
  local cmd
  for cmd in kubelet kube-proxy; do
    (cd "$root/ci/node/k8s" && go build -ldflags "$ldflags" -o "$1/$cmd" "k8s.io/kubernetes/cmd/$cmd")
  done
}

build_kube_router() {
  (cd "$root/ci/node/kube-router" && go build -ldflags "-s -w" -o "$1/kube-router" github.com/cloudnativelabs/kube-router/v2/cmd/kube-router)
}

build_coredns() {
  (cd "$root/ci/node/coredns" && go build -ldflags "-s -w" -o "$1/coredns" github.com/coredns/coredns)
}

build_bucket_csi() {  # the node tier's stand-in for gcsfuse's CSI driver: our own source
  (cd "$root/ci/node/bucket-csi" && go build -ldflags "-s -w" -o "$1/bucket-csi" .)
}

build_kwok() {
  GOBIN="$1" go install "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION" "sigs.k8s.io/kwok/cmd/kwokctl@$KWOK_VERSION"
  # kwok's default stages less pod-complete, which marks every Job pod Succeeded at once: Saxml's
  # model servers (Job pods of a JobSet) run until stopped, so here they stay Running.
  local src
  src=$(module_dir "sigs.k8s.io/kwok@$KWOK_VERSION")
  mkdir -p "$1/stages"
  cp "$src"/kustomize/stage/node/fast/node-initialize.yaml \
    "$src"/kustomize/stage/node/heartbeat-with-lease/node-heartbeat-with-lease.yaml \
    "$src"/kustomize/stage/pod/fast/pod-ready.yaml "$src"/kustomize/stage/pod/fast/pod-delete.yaml \
    "$1/stages/"
  chmod -R u+w "$1/stages"
}

build_kuberay() {
  (cd "$here/kuberay" && go build -ldflags "-s -w" -o "$1/kuberay-operator" github.com/ray-project/kuberay/ray-operator)
  # The CRDs that belong to this operator, from its module.
  local src
  src=$(module_dir "github.com/ray-project/kuberay/ray-operator@$KUBERAY_VERSION")
  mkdir -p "$1/crds" && cp "$src"/config/crd/bases/*.yaml "$1/crds/" && chmod u+w "$1"/crds/*
}

build_jobset() {
  (cd "$here/jobset" && go build -ldflags "-s -w" -o "$1/jobset-controller" sigs.k8s.io/jobset)
  local src
  src=$(module_dir "sigs.k8s.io/jobset@$JOBSET_VERSION")
  mkdir -p "$1/crds" && cp "$src"/config/components/crd/bases/*.yaml "$1/crds/"
  # Its webhook registrations (+ kustomize patches): control_plane.py points them at 127.0.0.1.
  cp -r "$src/config/components/webhook" "$1/webhook" && chmod -R u+w "$1"
}

build_kueue() {
  (cd "$here/kueue" && go build -ldflags "-s -w" -o "$1/kueue-controller" sigs.k8s.io/kueue/cmd/kueue)
  local src
  src=$(module_dir "sigs.k8s.io/kueue@$KUEUE_VERSION")
  mkdir -p "$1/crds" && cp "$src"/config/components/crd/bases/*.yaml "$1/crds/"
  # GKE's ProvisioningRequest (flex-start's queued provisioning), at the version Kueue builds
  # against: with it installed Kueue runs its admission check for it.
  local autoscaler
  autoscaler=$(cd "$here/kueue" && go list -m -f '{{.Dir}}' k8s.io/autoscaler/cluster-autoscaler/apis)
  cp "$autoscaler"/config/crd/autoscaling.x-k8s.io_provisioningrequests.yaml "$1/crds/"
  # Its webhook registrations: control_plane.py points them at 127.0.0.1.
  cp -r "$src/config/components/webhook" "$1/webhook" && chmod -R u+w "$1"
}

build_lws() {  # the CRD only: no controller runs here (the chart's LeaderWorkerSet is admitted, not run)
  local src
  src=$(module_dir "sigs.k8s.io/lws@$LWS_VERSION")
  mkdir -p "$1/crds" && cp "$src"/config/crd/bases/*.yaml "$1/crds/" && chmod u+w "$1"/crds/*
}

components=("$@")
[ ${#components[@]} -gt 0 ] || components=(etcd kwok kubernetes kuberay jobset kueue lws)
for c in "${components[@]}"; do
  case $c in
    etcd) done_or_build etcd "$ETCD_VERSION" build_etcd ;;
    kwok) done_or_build kwok "$KWOK_VERSION" build_kwok ;;
    kubernetes) done_or_build kubernetes "$K8S_VERSION" build_kubernetes ;;
    kuberay) done_or_build kuberay "$KUBERAY_VERSION" build_kuberay ;;
    jobset) done_or_build jobset "$JOBSET_VERSION" build_jobset ;;
    kueue) done_or_build kueue "$KUEUE_VERSION" build_kueue ;;
    lws) done_or_build lws "$LWS_VERSION" build_lws ;;
    node-kubernetes) done_or_build node-kubernetes "$K8S_VERSION" build_node_kubernetes ;;
    kube-router) done_or_build kube-router "$KUBE_ROUTER_VERSION" build_kube_router ;;
    coredns) done_or_build coredns "$COREDNS_VERSION" build_coredns ;;
    bucket-csi) done_or_build bucket-csi "$(cat "$root"/ci/node/bucket-csi/{main.go,go.sum} | sha256sum | cut -c1-12)" build_bucket_csi ;;
    *) echo "error: unknown component '$c' (etcd kwok kubernetes kuberay jobset kueue lws node-kubernetes kube-router coredns bucket-csi)" >&2; exit 2 ;;
  esac
done
