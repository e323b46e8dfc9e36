"""A FAKE `gcloud` (and `docker`): GKE, Artifact Registry, Cloud Build and Cloud Storage cannot
run here, so this script stands in for the commands the launcher's GKE road runs. It keeps the
project's state in a JSON file, records every call, and answers as the real services do where
the road depends on it: what exists, what a filter matches, what the API refuses (a node pool
in a cluster that does not exist, a multi-host TPU pool without its topology or with the wrong
number of nodes, an Ironwood pool placed without its workload policy, a bucket in a zone, a push
to a repository that does not exist, a create of what exists). Facts it holds the launcher to
are named with their source where they are checked.

    install(bin_dir, state_file) -> writes bin_dir/gcloud and bin_dir/docker
    install(bin_dir, state_file, real_helm) -> and bin_dir/helm: Artifact Registry's OCI side
        for charts (push, pull, install from oci://) here, every other helm command the real one
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import shutil
import sys
import tarfile
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from tests.support import gke_discovery

PROJECT_NUMBER = "123456789012"
# The user's target in the cluster tests: the variables GKE's tutorials export.
PROJECT, CLUSTER, LOCATION, BUCKET = "my-proj", "ml", "us-east5-b", "my-proj-ckpts"
# The account GKE's nodes and (in projects made since 2024) Cloud Build's builds run as.
COMPUTE_ACCOUNT = f"{PROJECT_NUMBER}-compute@developer.gserviceaccount.com"
# What a new cluster on the regular channel runs, unless the state says otherwise.
GKE_VERSION = "1.35.1-gke.1396000"
# The API each command group calls (Service Usage: a disabled one refuses every call), and the
# title its refusal names.
SERVICES = {
    "container": ("container.googleapis.com", "Kubernetes Engine API"),
    "compute": ("compute.googleapis.com", "Compute Engine API"),
    "artifacts": ("artifactregistry.googleapis.com", "Artifact Registry API"),
    "builds": ("cloudbuild.googleapis.com", "Cloud Build API"),
    "storage": ("storage.googleapis.com", "Cloud Storage JSON API"),
    "iam": ("iam.googleapis.com", "Identity and Access Management (IAM) API"),
}
# GKE's "Use Image streaming": a cluster made with it needs the Container File System API on.
IMAGE_STREAMING_API = ("containerfilesystem.googleapis.com", "Container File System API")


# GKE's facts this fake holds the launcher to, from Google's pages (quoted, read 2026-11) or its
# API's discovery document, never from the launcher's own TPU table: read from there, a wrong
# entry would pass on both sides.
#
# GKE's "Plan TPUs in GKE": the TPU machine types, each a generation and its chips per VM, and
# the node label of each generation (cloud.google.com/gke-tpu-accelerator).
TPU_MACHINES = {
    "ct4p-hightpu-4t": ("v4", 4),
    "ct5lp-hightpu-1t": ("v5e", 1),
    "ct5lp-hightpu-4t": ("v5e", 4),
    "ct5lp-hightpu-8t": ("v5e", 8),
    "ct5p-hightpu-4t": ("v5p", 4),
    "ct6e-standard-1t": ("v6e", 1),
    "ct6e-standard-4t": ("v6e", 4),
    "ct6e-standard-8t": ("v6e", 8),
    "tpu7x-standard-4t": ("tpu7x", 4),  # GKE: "About Ironwood (TPU7x) in GKE"
}
ACCELERATOR_LABEL, TOPOLOGY_LABEL = (
    "cloud.google.com/gke-tpu-accelerator",
    "cloud.google.com/gke-tpu-topology",
)
ACCELERATORS = {
    "v4": "tpu-v4-podslice",
    "v5e": "tpu-v5-lite-podslice",
    "v5p": "tpu-v5p-slice",
    "v6e": "tpu-v6e-slice",
    "tpu7x": "tpu7x",
}
# Cloud TPU's "TPU regions and zones" (docs.cloud.google.com/tpu/docs/regions-zones): "You can
# create TPU VMs in the zones shown in the following table" (single-tenant zones left out).
ZONES_PAGE = "Cloud TPU: TPU regions and zones"
TPU_ZONES = {
    "v4": {"us-central2-b"},
    "v5e": {"us-central1-a", "us-south1-a", "us-west1-c", "us-west4-a", "europe-west4-b",
            "asia-southeast1-b"},
    "v5p": {"us-central1-a", "us-east5-a", "europe-west4-b"},
    "v6e": {"us-central1-b", "us-east1-d", "us-east5-a", "us-east5-b", "us-central1-ai1a",
            "us-south1-ai1b", "europe-west4-a", "asia-northeast1-b", "southamerica-west1-a"},
    "tpu7x": {"us-central1-c", "us-central1-ai1a"},
}  # fmt: skip
# GKE's "About flex-start provisioning mode": "Flex-start supports the following version and
# zones": TPU v6e asia-northeast1-b, us-east5-a, us-east5-b; TPU v5e us-west4-a; TPU v5p
# us-east5-a; "TPU v3 and v4 are not supported" (TPU7x not listed).
FLEX_START_PAGE = "GKE: About flex-start provisioning mode"
FLEX_START_ZONES = {
    "v6e": {"asia-northeast1-b", "us-east5-a", "us-east5-b"},
    "v5e": {"us-west4-a"},
    "v5p": {"us-east5-a"},
}
# GKE's "About Ironwood (TPU7x) in GKE": a workload policy "replaces the --tpu-topology flag
# used by other TPU versions".
PLACED_BY_WORKLOAD_POLICY = {"tpu7x"}
# GKE's "Spot VMs": GKE gives pods 15 seconds of the 30-second notice, critical system pods
# the other 15; "You can extend the graceful termination period to up to 120 seconds" through
# the node system configuration, with the control plane on 1.35.0-gke.1171000 or later.
SPOT_POD_SHUTDOWN_S, SPOT_CRITICAL_PODS_S = 15, 15
SPOT_SHUTDOWN_MIN_GKE = "1.35.0-gke.1171000"


def _tpu_machine(machine: str) -> tuple[str, int] | None:
    """(generation, chips per host) of a TPU machine type, None for a CPU machine."""
    return TPU_MACHINES.get(machine)


def _version(text: str) -> tuple[int, ...]:
    """GKE's versions compare number by number (1.35.0-gke.1171000)."""
    return tuple(int(n) for n in re.findall(r"\d+", text))


def _chips(topology: str) -> int:
    return math.prod(int(d) for d in topology.split("x"))


def enforces_network_policy(cluster: dict) -> bool:
    """Whether GKE enforces NetworkPolicy in this cluster: Dataplane V2 ("About Dataplane V2":
    built-in network policy enforcement) or network policy enforcement turned on ("Creating a
    cluster network policy": --enable-network-policy). Otherwise a NetworkPolicy is stored and
    ignored."""
    datapath = cluster.get("networkConfig", {}).get("datapathProvider")
    return datapath == "ADVANCED_DATAPATH" or bool(cluster.get("networkPolicy", {}).get("enabled"))


class Refused(Exception):
    """What the real command prints to stderr and exits 1 with."""


def _flags(args: list[str]) -> tuple[list[str], dict[str, str]]:
    positional, flags = [], {}
    for a in args:
        if a.startswith("--"):
            key, _, value = a[2:].partition("=")
            flags[key] = value if _ else "true"
        else:
            positional.append(a)
    return positional, flags


def _lookup(obj: dict, dotted: str) -> object:
    for part in dotted.split("."):
        if not isinstance(obj, dict) or part not in obj:
            return None
        obj = obj[part]
    return obj


def _split_outside_parentheses(expression: str, operator: str) -> list[str]:
    parts, depth, start, i = [], 0, 0, 0
    while i < len(expression):
        if expression[i] in "()":
            depth += 1 if expression[i] == "(" else -1
        elif depth == 0 and expression.startswith(operator, i):
            parts.append(expression[start:i])
            i += len(operator)
            start = i
            continue
        i += 1
    return [*parts, expression[start:]]


def matches(obj: dict, expression: str) -> bool:
    """gcloud's --filter, the part the launcher uses: terms joined by AND, a parenthesised
    group of terms joined by OR, each term `key=value`, `key~regex`, `key:value` or
    `NOT term`; booleans compare as true/false. AND and OR side by side unparenthesised is
    refused (`gcloud topic filters` gives them an order few readers remember)."""
    expression = expression.strip()
    ands = _split_outside_parentheses(expression, " AND ")
    ors = _split_outside_parentheses(expression, " OR ")
    if len(ands) > 1 and len(ors) > 1:
        raise Refused(f"ERROR: this fake refuses AND beside OR without parentheses: {expression}")
    if len(ands) > 1:
        return all(matches(obj, part) for part in ands)
    if len(ors) > 1:
        return any(matches(obj, part) for part in ors)
    if expression.startswith("(") and expression.endswith(")"):
        return matches(obj, expression[1:-1])
    return _term(obj, expression)


def _term(obj: dict, term: str) -> bool:
    negate = term.startswith("NOT ")
    term = term.removeprefix("NOT ")
    if ":" in term and "=" not in term:  # `key:value`, gcloud's "has": a word match
        key, _, wanted = term.partition(":")
        value = _lookup(obj, key)
        values = value if isinstance(value, list) else [value]
        ok = value is not None and any(_has_words(str(v), wanted) for v in values)
    elif "~" in term:
        key, _, pattern = term.partition("~")
        value = _lookup(obj, key)
        ok = value is not None and re.search(pattern.strip("/"), str(value)) is not None
    else:
        key, _, expected = term.partition("=")
        value = _lookup(obj, key)
        shown = str(value).lower() if isinstance(value, bool) else str(value)
        ok = value is not None and shown == expected
    return ok != negate


def _has_words(text: str, pattern: str) -> bool:
    """gcloud topic filters: `key:simple-pattern` is true "if key contains simple-pattern",
    case-insensitively, matched on words (letters and digits between punctuation): `my-res`
    has the words of `my-res-2`, so it matches it."""
    words = re.findall(r"[a-z0-9]+", text.lower())
    want = re.findall(r"[a-z0-9]+", pattern.lower())
    return any(words[i : i + len(want)] == want for i in range(len(words) - len(want) + 1))


def _value(obj: dict, fmt: str) -> str:
    """--format=value(a.b) or value(name.basename())."""
    inner = re.fullmatch(r"value\((.*)\)", fmt)
    if not inner:
        return json.dumps(obj)
    shown = []
    for field in inner[1].split(","):  # several: tab-separated, an absent one empty
        if field.endswith(".basename()"):
            shown.append(str(_lookup(obj, field.removesuffix(".basename()"))).rsplit("/", 1)[-1])
        else:
            value = _lookup(obj, field)
            if isinstance(value, list):  # gcloud's value() joins a list's items with ';'
                value = ";".join(str(v) for v in value)
            shown.append("" if value is None else str(value))
    return "\t".join(shown)


class Gcloud:
    def __init__(self, state: dict) -> None:
        self.state = state
        for key in (
            "clusters",
            "repositories",
            "images",
            "buckets",
            "bindings",
            "builds",
            "policies",
        ):
            state.setdefault(key, {} if key not in ("bindings", "builds") else [])

    # -- container clusters -------------------------------------------------------------------
    def _cluster(self, name: str, flags: dict) -> dict:
        key = f"{flags.get('project')}/{flags.get('location')}/{name}"
        cluster = self.state["clusters"].get(key)
        if cluster is None:
            raise Refused(
                f"ERROR: (gcloud.container) ResponseError: code=404, message=Not found: "
                f"projects/{flags.get('project')}/locations/{flags.get('location')}/clusters/{name}."
            )
        return cluster

    def clusters(self, verb: str, pos: list[str], flags: dict) -> str:
        if verb == "list":
            found = [
                c
                for c in self.state["clusters"].values()
                if c["project"] == flags.get("project")
                # gcloud without --location lists every location's (GKE's `locations/-`).
                and flags.get("location") in (None, c["location"])
            ]
            found = [c for c in found if matches(c, flags.get("filter", "name~."))]
            return "\n".join(_value(c, flags.get("format", "value(name)")) for c in found)
        name = pos[0]
        key = f"{flags.get('project')}/{flags.get('location')}/{name}"
        if verb == "create":
            if key in self.state["clusters"]:
                raise Refused(f"ERROR: (gcloud.container.clusters.create) Already exists: {name}")
            api, title = IMAGE_STREAMING_API
            if "enable-image-streaming" in flags and api not in self.state.get("services", []):
                raise Refused(
                    "ERROR: (gcloud.container.clusters.create) ResponseError: code=400, "
                    f"message=Image streaming needs the {title} ({api}) enabled in project "
                    f"{PROJECT_NUMBER}."
                )
            # gcloud: "Addons specified by this flag will be enabled. The others will be
            # disabled. Default addons: HttpLoadBalancing, HorizontalPodAutoscaling."
            given = flags.get("addons")
            addons = (
                [a for a in given.split(",") if a]
                if given is not None
                else ["HttpLoadBalancing", "HorizontalPodAutoscaling"]
            )
            labels = dict(kv.split("=", 1) for kv in flags.get("labels", "").split(",") if kv)
            self.state["clusters"][key] = {
                "name": name,
                "project": flags["project"],
                "location": flags["location"],
                "addonsConfig": {f"{a[0].lower()}{a[1:]}Config": {"enabled": True} for a in addons},
                "workloadIdentityConfig": {"workloadPool": flags.get("workload-pool")},
                # The API's Cluster: Dataplane V2 is chosen at creation (ADVANCED_DATAPATH).
                "networkConfig": {
                    "datapathProvider": "ADVANCED_DATAPATH"
                    if "enable-dataplane-v2" in flags
                    else "LEGACY_DATAPATH"
                },
                "networkPolicy": {"enabled": "enable-network-policy" in flags},
                "resourceLabels": labels,
                "currentMasterVersion": flags.get("cluster-version")
                or self.state.get("gke_version", GKE_VERSION),
                "releaseChannel": {"channel": flags.get("release-channel", "regular").upper()},
                "nodePools": {
                    "default-pool": {
                        "name": "default-pool",
                        "machineType": flags.get("machine-type", "e2-medium"),
                        "nodes": int(flags.get("num-nodes", 3)),
                        "config": {
                            "workloadMetadataConfig": {
                                "mode": flags.get("workload-metadata", "GCE_METADATA")
                            }
                        },
                    }
                },
            }
            return ""
        cluster = self._cluster(name, flags)
        if verb == "describe":
            return _value(cluster, flags.get("format", "json"))
        if verb == "update":
            if "update-addons" in flags:
                for item in flags["update-addons"].split(","):
                    addon, _, state = item.partition("=")
                    cfg = f"{addon[0].lower()}{addon[1:]}Config"
                    cluster["addonsConfig"][cfg] = {"enabled": state == "ENABLED"}
            if "enable-network-policy" in flags:
                # gcloud: "the network policy addon must first be enabled on the master by
                # using --update-addons=NetworkPolicy=ENABLED flag".
                if not cluster["addonsConfig"].get("networkPolicyConfig", {}).get("enabled"):
                    raise Refused(
                        "ERROR: (gcloud.container.clusters.update) ResponseError: code=400, "
                        "message=Network policy addon must be enabled first."
                    )
                cluster["networkPolicy"] = {"enabled": True}
            if "workload-pool" in flags:
                # Existing pools keep their metadata mode (GKE's Workload Identity how-to:
                # "migrate existing node pools" with --workload-metadata=GKE_METADATA).
                cluster["workloadIdentityConfig"] = {"workloadPool": flags["workload-pool"]}
            return ""
        if verb == "get-credentials":
            self.state["credentials"] = key
            context = f"gke_{flags['project']}_{flags['location']}_{name}"  # gcloud's name
            if backing := os.environ.get("FAKE_GKE_KUBECONFIG"):
                _write_context(Path(backing), Path(os.environ["KUBECONFIG"]), context)
            return f"kubeconfig entry generated for {name}."
        if verb == "delete":
            del self.state["clusters"][key]
            return ""
        raise Refused(f"ERROR: (gcloud.container.clusters) unknown command {verb}")

    def server_config(self, flags: dict) -> str:
        """GKE's ServerConfig: every channel's default version is the one a new cluster gets
        here (the state's gke_version); --flatten=channels makes a row of each, as gcloud
        does, for --filter and --format."""
        version = self.state.get("gke_version", GKE_VERSION)
        config = {
            "defaultClusterVersion": version,
            "channels": [
                {"channel": c, "defaultVersion": version, "validVersions": [version]}
                for c in ("RAPID", "REGULAR", "STABLE")
            ],
        }
        if flags.get("flatten") != "channels":
            return _value(config, flags.get("format", "json"))
        rows = [{**config, "channels": c} for c in config["channels"]]
        rows = [r for r in rows if matches(r, flags.get("filter", ""))]
        return "\n".join(_value(r, flags.get("format", "json")) for r in rows)

    def node_pools(self, verb: str, pos: list[str], flags: dict) -> str:
        cluster = self._cluster(flags.get("cluster", ""), flags)
        pools = cluster["nodePools"]
        if verb == "list":
            found = [p for p in pools.values() if matches(p, flags.get("filter", "name~."))]
            return "\n".join(_value(p, flags.get("format", "value(name)")) for p in found)
        name = pos[0]
        if verb == "create":
            if name in pools:
                raise Refused(f"ERROR: (gcloud.container.node-pools.create) Already exists: {name}")
            pools[name] = self._new_pool(name, flags, cluster)
            return ""
        if name not in pools:
            raise Refused(f"ERROR: (gcloud.container.node-pools.{verb}) Not found: {name}")
        if verb == "describe":
            return _value(pools[name], flags.get("format", "json"))
        if verb == "update":
            if "workload-metadata" in flags and not cluster["workloadIdentityConfig"].get(
                "workloadPool"
            ):
                # gcloud's own refusal (container node-pools update, GKE_METADATA).
                raise Refused(
                    "ERROR: (gcloud.container.node-pools.update) ResponseError: code=400, "
                    "message=Workload Identity metadata can only be enabled if Workload "
                    "Identity is enabled at the cluster level."
                )
            if "workload-metadata" in flags:
                pools[name]["config"]["workloadMetadataConfig"]["mode"] = flags["workload-metadata"]
            return ""
        if verb == "delete":
            del pools[name]
            return ""
        raise Refused(f"ERROR: (gcloud.container.node-pools) unknown command {verb}")

    def _new_pool(self, name: str, flags: dict, cluster: dict) -> dict:
        machine = flags["machine-type"]
        nodes = int(flags.get("num-nodes", 3))
        tpu = _tpu_machine(machine)
        topology = flags.get("tpu-topology")
        if tpu and "placement-policy" in flags:
            topology = self._placement_topology(flags, tpu[0], machine)
        elif tpu and tpu[0] in PLACED_BY_WORKLOAD_POLICY and topology:
            # GKE's "About Ironwood (TPU7x)": a workload policy "replaces the --tpu-topology
            # flag used by other TPU versions".
            raise Refused(
                "ERROR: (gcloud.container.node-pools.create) ResponseError: code=400, "
                f"message=--tpu-topology is not supported for {machine}; use a workload policy "
                "(--placement-policy)"
            )
        if tpu:
            _, chips_per_host = tpu
            # GKE's "Deploy TPU workloads in GKE Standard": a multi-host slice's pool has
            # --tpu-topology and exactly chips / chips-per-host nodes; single-host pools take
            # no topology.
            zone = flags.get("node-locations") or flags.get("location", "")
            if zone not in TPU_ZONES[tpu[0]]:
                raise Refused(
                    "ERROR: (gcloud.container.node-pools.create) ResponseError: code=400, "
                    f"message=Machine type {machine} is not available in zone {zone} "
                    f"({ZONES_PAGE})"
                )
            if "flex-start" in flags and zone not in FLEX_START_ZONES.get(tpu[0], ()):
                raise Refused(
                    "ERROR: (gcloud.container.node-pools.create) ResponseError: code=400, "
                    f"message=Flex-start is not available for {machine} in zone {zone} "
                    f"({FLEX_START_PAGE})"
                )
            if topology:
                hosts = _chips(topology) // chips_per_host
                if "enable-autoscaling" in flags:  # an empty pool; the slice is its ceiling
                    nodes = int(flags.get("total-max-nodes", 0))
                if hosts <= 1:
                    raise Refused(
                        "ERROR: (gcloud.container.node-pools.create) tpu-topology is not "
                        f"supported for single-host machine type {machine}"
                    )
                if nodes != hosts:
                    raise Refused(
                        "ERROR: (gcloud.container.node-pools.create) ResponseError: code=400, "
                        f"message=node count {nodes} does not match TPU topology {topology} "
                        f"({hosts} nodes)"
                    )
            chips = nodes * chips_per_host
            used = sum(
                p.get("chips", 0)
                for c in self.state["clusters"].values()
                for p in c["nodePools"].values()
            )
            limit = self.state.get("quota", {}).get("tpu_chips")
            if limit is not None and used + chips > limit:
                raise Refused(
                    "ERROR: (gcloud.container.node-pools.create) ResponseError: code=403, "
                    "message=Insufficient quota to satisfy the request: Quota 'TPU chips' "
                    f"exceeded. Limit: {float(limit)}."
                )
        kubelet = {}
        if path := flags.get("system-config-from-file"):
            kubelet = self._kubelet_config(Path(path), cluster, tpu is not None and "spot" in flags)
        if flags.get("workload-metadata", "GKE_METADATA") != "GKE_METADATA":
            raise Refused("ERROR: this fake only models GKE_METADATA on new pools")
        if not cluster["workloadIdentityConfig"].get("workloadPool"):
            raise Refused(
                "ERROR: (gcloud.container.node-pools.create) --workload-metadata=GKE_METADATA "
                "needs Workload Identity on the cluster"
            )
        return {
            "name": name,
            "machineType": machine,
            "nodes": nodes,
            "tpuTopology": topology,
            "chips": nodes * tpu[1] if tpu else 0,
            "zone": flags.get("node-locations"),
            "spot": "spot" in flags,
            "flags": sorted(flags),
            # As the API's NodePool has them (what `describe --format=value(...)` and list's
            # filters read).
            "config": {
                "machineType": machine,
                "workloadMetadataConfig": {"mode": "GKE_METADATA"},
                "spot": "spot" in flags,
                "flexStart": "flex-start" in flags,
                "kubeletConfig": kubelet,
                "labels": dict(
                    kv.split("=", 1) for kv in flags.get("node-labels", "").split(",") if kv
                ),
                "reservationAffinity": {
                    "consumeReservationType": {
                        "specific": "SPECIFIC_RESERVATION",
                        "none": "NO_RESERVATION",
                    }.get(flags.get("reservation-affinity", ""), "ANY_RESERVATION"),
                    "values": [flags["reservation"]] if "reservation" in flags else [],
                },
            },
            "placementPolicy": {
                "tpuTopology": topology,  # Ironwood's: its workload policy's
                "policyName": flags.get("placement-policy"),
            },
            "queuedProvisioning": {"enabled": "enable-queued-provisioning" in flags},
        }

    def _loader_only(self, pos: list[str], flags: dict, nowhere: str) -> str:
        """GKE's API overridden (gke up's gcloud check): gcloud reads the system configuration
        (its loader refuses what it does not know), then its request meets the refused
        connection; nothing is made."""
        if pos[:3] == ["container", "node-pools", "create"] and (
            path := flags.get("system-config-from-file")
        ):
            self._loaded(Path(path))
        raise Refused(
            f"ERROR: gcloud crashed (ConnectionError): HTTPConnectionPool(host='127.0.0.1', "
            f"port=1): Max retries exceeded ({nowhere}: [Errno 111] Connection refused)"
        )

    def _kubelet_config(self, path: Path, cluster: dict, spot: bool) -> dict:
        """A node system configuration's kubeletConfig; a Spot pool's node shutdown (GKE's
        "Spot VMs": up to 120 seconds, the control plane on 1.35.0-gke.1171000 or later; the
        values GKE's API allows, from its discovery document)."""
        kubelet = self._loaded(path)
        return self._api_takes(kubelet, cluster, spot)

    def _loaded(self, path: Path) -> dict:
        """What gcloud's loader does with the file, before any request: its kubeletConfig, or
        the refusal of a field this gcloud does not know."""
        import yaml

        if not path.is_file():
            raise Refused(f"ERROR: (gcloud.container.node-pools.create) No such file: {path}")
        kubelet = (yaml.safe_load(path.read_text()) or {}).get("kubeletConfig", {})
        if unknown := sorted(set(kubelet) & set(self.state.get("gcloud_unknown", []))):
            # An older gcloud's loader (528.0.0's api_lib/container/util.py), word for word.
            raise Refused(
                "ERROR: (gcloud.container.node-pools.create) Invalid node config: unknown "
                f'fields: {unknown} in "kubeletConfig"'
            )
        return kubelet

    def _api_takes(self, kubelet: dict, cluster: dict, spot: bool) -> dict:
        shutdown = kubelet.get("shutdownGracePeriodSeconds")
        critical = kubelet.get("shutdownGracePeriodCriticalPodsSeconds")
        # GKE's own rules on both fields, from its API's discovery document.
        allowed = gke_discovery.allowed_values("NodeKubeletConfig", "shutdownGracePeriodSeconds")
        low, high = gke_discovery.value_range(
            "NodeKubeletConfig", "shutdownGracePeriodCriticalPodsSeconds"
        ) or (0, 0)
        if shutdown is not None and allowed is not None and shutdown not in allowed:
            raise Refused(
                "ERROR: (gcloud.container.node-pools.create) ResponseError: code=400, "
                f"message=shutdownGracePeriodSeconds={shutdown}: allowed values "
                f"{', '.join(map(str, allowed))}"
            )
        if critical is not None and (
            shutdown is None or not low <= critical <= min(high, shutdown)
        ):
            raise Refused(
                "ERROR: (gcloud.container.node-pools.create) ResponseError: code=400, "
                f"message=shutdownGracePeriodCriticalPodsSeconds={critical}: in [{low}, {high}], "
                "at most shutdownGracePeriodSeconds, and only with it"
            )
        if shutdown is not None:
            old = _version(cluster["currentMasterVersion"]) < _version(SPOT_SHUTDOWN_MIN_GKE)
            longest = max(allowed or (0,))
            if not spot or shutdown > longest or old:
                raise Refused(
                    "ERROR: (gcloud.container.node-pools.create) ResponseError: code=400, "
                    f"message=shutdownGracePeriodSeconds={shutdown}: only on Spot node pools, "
                    f"at most {longest}, with GKE {SPOT_SHUTDOWN_MIN_GKE} or later"
                )
        return kubelet

    def _placement_topology(self, flags: dict, generation: str, machine: str) -> str:
        """The topology a pool's workload policy names; the policy must exist in the pool's
        project and region, and only Ironwood's pools take one (GKE: About Ironwood (TPU7x))."""
        if generation not in PLACED_BY_WORKLOAD_POLICY:
            raise Refused(
                "ERROR: (gcloud.container.node-pools.create) ResponseError: code=400, "
                f"message=workload policies are not supported for {machine}"
            )
        # Compute Engine: a zone's name is its region's and a suffix, an AI zone's too
        # (us-central1-ai1a is in us-central1); a region's name has one hyphen.
        location = flags.get("location", "")
        region = location.rsplit("-", 1)[0] if location.count("-") == 2 else location
        key = f"{flags.get('project')}/{region}/{flags['placement-policy']}"
        policy = self.state["policies"].get(key)
        if policy is None:
            raise Refused(
                "ERROR: (gcloud.container.node-pools.create) ResponseError: code=404, "
                f"message=resource policy {key} not found"
            )
        return policy["acceleratorTopology"]

    # -- compute resource-policies -------------------------------------------------------------
    def resource_policies(self, verb: str, pos: list[str], flags: dict) -> str:
        if verb == "create":
            kind, name = pos[0], pos[1]
            key = f"{flags.get('project')}/{flags.get('region')}/{name}"
            if kind != "workload-policy" or flags.get("type") not in (
                "HIGH_THROUGHPUT",
                "HIGH_AVAILABILITY",
            ):
                raise Refused(f"ERROR: (gcloud.compute.resource-policies.create) bad {pos} {flags}")
            if key in self.state["policies"]:
                raise Refused(f"ERROR: (gcloud.compute.resource-policies.create) exists: {key}")
            self.state["policies"][key] = {
                "name": name,
                "type": flags["type"],
                "acceleratorTopology": flags.get("accelerator-topology"),
            }
            return ""
        key = f"{flags.get('project')}/{flags.get('region')}/{pos[0]}"
        if key not in self.state["policies"]:
            raise Refused(f"ERROR: (gcloud.compute.resource-policies.{verb}) Not found: {key}")
        if verb == "describe":
            return json.dumps(self.state["policies"][key])
        if verb == "delete":
            users = [
                c
                for c in self.state["clusters"].values()
                for p in c["nodePools"].values()
                if (p.get("placementPolicy") or {}).get("policyName") == pos[0]
            ]
            if users:  # Compute Engine refuses to delete a policy a resource still uses
                raise Refused(f"ERROR: (gcloud.compute.resource-policies.delete) {key} is in use")
            del self.state["policies"][key]
            return ""
        raise Refused(f"ERROR: unknown command {verb}")

    # -- artifacts, builds --------------------------------------------------------------------
    def repositories(self, verb: str, pos: list[str], flags: dict) -> str:
        loc, project = flags.get("location"), flags.get("project")
        if verb == "list":
            found = [
                r
                for r in self.state["repositories"].values()
                if r["name"].startswith(f"projects/{project}/locations/{loc}/")
            ]
            found = [r for r in found if matches(r, flags.get("filter", "name~."))]
            return "\n".join(_value(r, flags.get("format", "value(name)")) for r in found)
        full = f"projects/{project}/locations/{loc}/repositories/{pos[0]}"
        if verb == "create":
            if full in self.state["repositories"]:
                raise Refused(
                    f"ERROR: (gcloud.artifacts.repositories.create) ALREADY_EXISTS: {full}"
                )
            labels = dict(kv.split("=", 1) for kv in flags.get("labels", "").split(",") if kv)
            self.state["repositories"][full] = {
                "name": full,
                "format": flags.get("repository-format"),
                "labels": labels,
            }
            return ""
        if full not in self.state["repositories"]:
            raise Refused(f"ERROR: (gcloud.artifacts.repositories.{verb}) NOT_FOUND: {full}")
        if verb == "describe":
            return json.dumps(self.state["repositories"][full])
        if verb == "delete":
            del self.state["repositories"][full]
            prefix = f"{loc}-docker.pkg.dev/{project}/{pos[0]}/"
            self.state["images"] = {
                k: v for k, v in self.state["images"].items() if not k.startswith(prefix)
            }
            return ""
        raise Refused(f"ERROR: unknown command {verb}")

    def push(self, ref: str) -> None:
        """An Artifact Registry push: the repository must exist (host <region>-docker.pkg.dev,
        path <project>/<repository>/<image>)."""
        m = re.fullmatch(r"([a-z0-9-]+)-docker\.pkg\.dev/([^/]+)/([^/]+)/(.+):(.+)", ref)
        if not m:
            raise Refused(f"denied: {ref} is not an Artifact Registry image reference")
        region, project, repo = m[1], m[2], m[3]
        if (
            f"projects/{project}/locations/{region}/repositories/{repo}"
            not in self.state["repositories"]
        ):
            raise Refused(f'name unknown: Repository "{repo}" not found')
        # What `gcloud artifacts docker images describe` shows of an image (its digest: one
        # per push, as a rebuilt image's content differs).
        pushed = f"{ref} {len(self.state['images'])}".encode()
        digest = "sha256:" + hashlib.sha256(pushed).hexdigest()
        self.state["images"][ref] = {"pushed": True, "image_summary": {"digest": digest}}

    def builds_submit(self, pos: list[str], flags: dict) -> str:
        source = Path(pos[0] if pos else ".")
        config = Path(flags["config"])
        if not config.is_file() or not (source / "images/launcher/Dockerfile").is_file():
            raise Refused(
                f"ERROR: (gcloud.builds.submit) no build config or Dockerfile at {source}"
            )
        subs = dict(kv.split("=", 1) for kv in flags.get("substitutions", "").split(","))
        image = subs["_IMAGE"]
        if "service-account" in flags:
            self._build_account_may(flags, config, image)
        else:
            # Cloud Build: the build runs as the Compute Engine default account, which may not
            # push (or read the source, or write logs) without the Cloud Build Service Account
            # role.
            grant = {
                "resource": f"projects/{flags.get('project')}",
                "member": f"serviceAccount:{COMPUTE_ACCOUNT}",
                "role": "roles/cloudbuild.builds.builder",
            }
            if grant not in self.state["bindings"]:
                raise Refused(
                    "ERROR: (gcloud.builds.submit) build failed: denied: Permission "
                    '"artifactregistry.repositories.uploadArtifacts" denied on resource '
                    f"(or it may not exist) for {COMPUTE_ACCOUNT}"
                )
        self.state["builds"].append({"source": str(source.resolve()), "image": image})
        self.push(image)
        return f"DONE\n{image}"

    def _build_account_may(self, flags: dict, config: Path, image: str) -> None:
        """Cloud Build's "Run builds with a user-managed service account": the account must
        exist; the build's logs must go to Cloud Logging (or a user's bucket), which it may
        write; it reads the staged source and pushes the image with its own grants."""
        email = flags["service-account"].rsplit("/", 1)[-1]
        if email not in self.state.get("service_accounts", []):
            raise Refused(f"ERROR: (gcloud.builds.submit) NOT_FOUND: service account {email}")
        built = yaml.safe_load(config.read_text())
        if (built.get("options") or {}).get("logging") != "CLOUD_LOGGING_ONLY":
            raise Refused(
                "ERROR: (gcloud.builds.submit) INVALID_ARGUMENT: if 'build.service_account' is "
                "specified, the build must either (a) specify 'build.logs_bucket', (b) use the "
                "REGIONAL_USER_OWNED_BUCKET build.options.default_logs_bucket_behavior option, "
                "or (c) use either CLOUD_LOGGING_ONLY / NONE logging options"
            )
        staging = flags.get("gcs-source-staging-dir", f"gs://{flags.get('project')}_cloudbuild")
        bucket = "gs://" + staging.removeprefix("gs://").split("/", 1)[0]
        m = re.fullmatch(r"([a-z0-9-]+)-docker\.pkg\.dev/([^/]+)/([^/]+)/.+", image)
        repo = f"projects/{m[2]}/locations/{m[1]}/repositories/{m[3]}" if m else ""
        needed = [
            (f"projects/{flags.get('project')}", "roles/logging.logWriter", "write its logs"),
            (bucket, "roles/storage.objectViewer", f"read the source in {bucket}"),
            (repo, "roles/artifactregistry.writer", f"push to {repo}"),
        ]
        member = f"serviceAccount:{email}"
        for resource, role, what in needed:
            if {"resource": resource, "member": member, "role": role} not in self.state["bindings"]:
                raise Refused(
                    f"ERROR: (gcloud.builds.submit) build failed: {email} may not {what} "
                    f"({role} on {resource})"
                )

    # -- storage, iam, projects ---------------------------------------------------------------
    def buckets(self, verb: str, pos: list[str], flags: dict) -> str:
        bucket = pos[0].removeprefix("gs://")
        if verb == "create":
            location = flags.get("location", "US")
            if re.fullmatch(r"[a-z]+-[a-z]+\d+-[a-z]", location):
                # Cloud Storage's bucket locations are regions, dual- or multi-regions.
                raise Refused(
                    "ERROR: (gcloud.storage.buckets.create) HTTPError 400: Invalid location "
                    f"'{location}'"
                )
            if bucket in self.state["buckets"]:
                raise Refused(f"ERROR: HTTPError 409: bucket {bucket} exists")
            self.state["buckets"][bucket] = {
                "location": location,
                "hns": "enable-hierarchical-namespace" in flags,
                "uniform": "uniform-bucket-level-access" in flags,
            }
            return ""
        if bucket not in self.state["buckets"]:
            raise Refused(f"ERROR: HTTPError 404: gs://{bucket} not found")
        if verb == "describe":
            return json.dumps(self.state["buckets"][bucket])
        if verb == "add-iam-policy-binding":
            if "${" in flags["member"]:
                raise Refused(f"ERROR: invalid member {flags['member']}")
            condition = flags.get("condition")
            if (
                condition
                and condition != "None"
                and not self.state["buckets"][bucket].get("uniform", True)
            ):
                # Cloud Storage: IAM Conditions need uniform bucket-level access.
                raise Refused("ERROR: HTTPError 400: IAM conditions need uniform access")
            self._bind(f"gs://{bucket}", flags["member"], flags["role"], condition)
            return ""
        raise Refused(f"ERROR: unknown command {verb}")

    def _bind(self, resource: str, member: str, role: str, condition: str | None = None) -> None:
        """An IAM policy holds each (member, role, condition) once, however often it is added.
        Once a resource's policy holds a conditional binding, gcloud asks which condition a new
        binding takes, and with no terminal to ask on fails: every grant must say (`None`)."""
        conditional = any(
            b["resource"] == resource and "condition" in b for b in self.state["bindings"]
        )
        if conditional and condition is None:
            raise Refused(
                "ERROR: (gcloud.add-iam-policy-binding) Adding a binding without specifying a "
                "condition to a policy containing conditions is prohibited in non-interactive "
                "mode. Run the command again with `--condition=None`"
            )
        binding = {"resource": resource, "member": member, "role": role}
        if condition and condition != "None":
            binding["condition"] = condition
        if binding not in self.state["bindings"]:
            self.state["bindings"].append(binding)

    def services(self, verb: str, pos: list[str], flags: dict) -> str:
        enabled = self.state.setdefault("services", [])
        if verb == "enable":
            enabled += [s for s in pos if s not in enabled]
            return ""
        if verb == "list" and "enabled" in flags:
            found = [{"config": {"name": s}} for s in enabled]
            found = [s for s in found if matches(s, flags.get("filter", "config.name~."))]
            return "\n".join(_value(s, flags.get("format", "value(config.name)")) for s in found)
        raise Refused(f"ERROR: (gcloud.services) unknown command {verb}")

    def _require_service(self, group: str, argv: list[str]) -> None:
        """Service Usage: a call to an API not enabled on the project fails, with its text."""
        if group not in SERVICES:
            return
        api, title = SERVICES[group]
        if api not in self.state.setdefault("services", []):
            command = ".".join(a for a in argv[:3] if not a.startswith("-"))
            raise Refused(
                f"ERROR: (gcloud.{command}) ResponseError: code=403, message={title} has not "
                f"been used in project {PROJECT_NUMBER} before or it is disabled. Enable it by "
                f"visiting https://console.developers.google.com/apis/api/{api}/overview?project="
                f"{PROJECT_NUMBER} then retry. If you enabled this API recently, wait a few "
                "minutes for the action to propagate to our systems and retry."
            )

    def run(self, argv: list[str]) -> str:
        pos, flags = _flags(argv)
        if nowhere := os.environ.get(ENDPOINT_OVERRIDE):
            return self._loader_only(pos, flags, nowhere)
        group = pos[:2]
        if group == ["config", "get-value"]:  # gcloud prints nothing (and "(unset)" to stderr)
            return str(self.state.get("config", {}).get(pos[2], ""))
        if pos[:1] == ["services"]:
            return self.services(pos[1], pos[2:], flags)
        self._require_service(pos[0], pos)
        if pos[:3] == ["artifacts", "repositories", "add-iam-policy-binding"]:
            where = f"projects/{flags.get('project')}/locations/{flags.get('location')}"
            full = f"{where}/repositories/{pos[3]}"
            if full not in self.state["repositories"]:
                raise Refused(f"ERROR: (gcloud.artifacts.repositories) NOT_FOUND: {full}")
            self._bind(full, flags["member"], flags["role"], flags.get("condition"))
            return ""
        if pos[:2] == ["projects", "add-iam-policy-binding"]:
            self._bind(f"projects/{pos[2]}", flags["member"], flags["role"], flags.get("condition"))
            return ""
        if group == ["auth", "configure-docker"]:  # Docker's (and so Helm's) credential helper
            self.state.setdefault("docker_auth", []).append(pos[2])
            return ""
        if group == ["container", "get-server-config"]:
            return self.server_config(flags)
        if group == ["container", "clusters"]:
            return self.clusters(pos[2], pos[3:], flags)
        if group == ["container", "node-pools"]:
            return self.node_pools(pos[2], pos[3:], flags)
        if group == ["artifacts", "repositories"]:
            return self.repositories(pos[2], pos[3:], flags)
        if group == ["compute", "resource-policies"]:
            return self.resource_policies(pos[2], pos[3:], flags)
        if pos[:3] == ["artifacts", "docker", "images"]:
            if pos[4] not in self.state["images"]:
                raise Refused(
                    f"ERROR: (gcloud.artifacts.docker.images.describe) NOT_FOUND: {pos[4]}"
                )
            return _value(self.state["images"][pos[4]], flags.get("format", "json"))
        if group == ["builds", "submit"]:
            return self.builds_submit(pos[2:], flags)
        if group == ["storage", "buckets"]:
            return self.buckets(pos[2], pos[3:], flags)
        if group == ["compute", "zones"] and pos[2] == "describe":
            # Compute Engine's "AI zones": a project sees an AI zone once its AI zone
            # visibility is on (`ai_zones_visible` in the state); a standard zone always.
            zone = pos[3]
            if "-ai" in zone and not self.state.get("ai_zones_visible"):
                raise Refused(
                    f"ERROR: (gcloud.compute.zones.describe) Could not fetch resource:\n - "
                    f"The resource 'projects/{flags.get('project')}/zones/{zone}' was not found"
                )
            return _value({"name": zone}, flags.get("format", "json"))
        if group == ["projects", "describe"]:
            return PROJECT_NUMBER
        if pos[:3] == ["iam", "service-accounts", "add-iam-policy-binding"]:
            self._bind(pos[3], flags["member"], flags["role"], flags.get("condition"))
            return ""
        if pos[:3] == ["iam", "service-accounts", "create"]:
            email = f"{pos[3]}@{flags.get('project')}.iam.gserviceaccount.com"
            accounts = self.state.setdefault("service_accounts", [])
            if email in accounts:
                raise Refused(f"ERROR: (gcloud.iam.service-accounts.create) {email} already exists")
            accounts.append(email)
            return ""
        if pos[:3] == ["iam", "service-accounts", "describe"]:
            if pos[3] not in self.state.get("service_accounts", []):
                raise Refused(f"ERROR: (gcloud.iam.service-accounts.describe) NOT_FOUND: {pos[3]}")
            return _value({"email": pos[3]}, flags.get("format", "json"))
        raise Refused(f"ERROR: (gcloud) this FAKE gcloud does not know `{' '.join(argv)}`")


def pod_shutdown_seconds(pool: dict) -> int:
    """What GKE's graceful node shutdown gives a Spot pool's pods of a reclaim's notice: 15 s,
    or the pool's shutdown less what critical system pods keep (GKE's "Spot VMs")."""
    kubelet = pool["config"].get("kubeletConfig") or {}
    if "shutdownGracePeriodSeconds" not in kubelet:
        return SPOT_POD_SHUTDOWN_S
    return kubelet["shutdownGracePeriodSeconds"] - kubelet.get(
        "shutdownGracePeriodCriticalPodsSeconds", SPOT_CRITICAL_PODS_S
    )


def queued_pool_for(state: dict, selector: dict, count: int) -> dict | None:
    """The node pool GKE's queued provisioning makes a ProvisioningRequest's nodes in, or None:
    then the request never provisions. GKE's "Run a large-scale workload with flex-start with
    queued provisioning": "To use flex-start with queued provisioning, you have to add the
    --flex-start and --enable-queued-provisioning flags" when the pool is created; the pool's
    machine and topology are the pod set's node selector, and it holds the pod set's count."""
    for cluster in state.get("clusters", {}).values():
        for pool in cluster["nodePools"].values():
            tpu = _tpu_machine(pool["machineType"])
            queued = (pool.get("queuedProvisioning") or {}).get("enabled")
            if not (tpu and queued and pool["config"].get("flexStart")):
                continue
            if (
                selector.get(ACCELERATOR_LABEL) == ACCELERATORS[tpu[0]]
                and selector.get(TOPOLOGY_LABEL) == pool["placementPolicy"]["tpuTopology"]
                and pool["nodes"] >= count
            ):
                return pool
    return None


def pull_allowed(state: dict, image: str) -> bool:
    """Whether GKE's nodes (the Compute Engine default account) may pull `image` from Artifact
    Registry: roles/artifactregistry.reader (or more) on its repository. Without it the kubelet
    fails the pull (ErrImagePull: 403 Forbidden); kwok's nodes pull nothing, so the walk asks."""
    m = re.fullmatch(r"([a-z0-9-]+)-docker\.pkg\.dev/([^/]+)/([^/]+)/.+", image.split("@")[0])
    if not m:
        return False
    repo = f"projects/{m[2]}/locations/{m[1]}/repositories/{m[3]}"
    return any(
        b["resource"] == repo
        and b["member"] == f"serviceAccount:{COMPUTE_ACCOUNT}"
        and b["role"] in ("roles/artifactregistry.reader", "roles/artifactregistry.writer")
        for b in state.get("bindings", [])
    )


def _write_context(backing: Path, kubeconfig: Path, context: str) -> None:
    """What get-credentials does to $KUBECONFIG: a context named as GKE names it, made current;
    here it reaches the cluster that stands for GKE's (the test control plane)."""
    import yaml

    source = yaml.safe_load(backing.read_text())
    config = yaml.safe_load(kubeconfig.read_text()) if kubeconfig.is_file() else {}
    config = config or {"apiVersion": "v1", "kind": "Config"}
    for key, item in (("clusters", "cluster"), ("users", "user")):
        entries = [e for e in config.get(key) or [] if e["name"] != context]
        config[key] = [*entries, {"name": context, item: source[key][0][item]}]
    contexts = [c for c in config.get("contexts") or [] if c["name"] != context]
    config["contexts"] = [
        *contexts,
        {"name": context, "context": {"cluster": context, "user": context}},
    ]
    config["current-context"] = context
    kubeconfig.write_text(yaml.safe_dump(config))


def helm(state: dict, argv: list[str], charts: Path) -> list[str] | None:
    """Helm's calls on Artifact Registry's OCI charts, answered here: a push (the registry
    login and the repository must exist, as for an image), a pull (untarred), an install or a
    template from `oci://` (the stored chart, handed to the real helm). Returns the argv the
    real helm runs, or None when answered."""
    oci = next((a for a in argv[1:] if a.startswith("oci://")), None)
    if oci is None:
        return argv
    host, _, path = oci.removeprefix("oci://").partition("/")
    if host not in state.get("docker_auth", []):
        raise Refused(f"Error: unexpected status from HEAD request to {host}: 401 Unauthorized")
    if argv[0] == "push":
        project, _, repo = path.partition("/")
        region = host.removesuffix("-docker.pkg.dev")
        if f"projects/{project}/locations/{region}/repositories/{repo}" not in state.get(
            "repositories", {}
        ):
            raise Refused(f'Error: name unknown: Repository "{repo}" not found')
        name, _, version = Path(argv[1]).name.removesuffix(".tgz").rpartition("-")
        charts.mkdir(parents=True, exist_ok=True)
        stored = charts / f"{len(state.setdefault('charts', {}))}-{Path(argv[1]).name}"
        shutil.copy(argv[1], stored)
        state["charts"][f"{oci}/{name}:{version}"] = str(stored)
        print(f"Pushed: {host}/{path}/{name}:{version}")
        return None
    version = argv[argv.index("--version") + 1] if "--version" in argv else None
    stored = state.get("charts", {}).get(f"{oci}:{version}")
    if stored is None:
        raise Refused(f"Error: {oci.removeprefix('oci://')}:{version}: not found")
    if argv[0] == "pull":
        with tarfile.open(stored) as tgz:
            tgz.extractall(argv[argv.index("--destination") + 1], filter="data")
        return None
    rest = [a for i, a in enumerate(argv) if a != "--version" and argv[i - 1] != "--version"]
    return [stored if a == oci else a for a in rest]


ENDPOINT_OVERRIDE = "CLOUDSDK_API_ENDPOINT_OVERRIDES_CONTAINER"  # gcloud's property, by env


def main(tool: str, argv: list[str]) -> int:
    state_file = Path(os.environ["FAKE_GCLOUD_STATE"])
    state = json.loads(state_file.read_text()) if state_file.is_file() else {}
    # A call whose requests go nowhere (gke up's gcloud check) changes nothing: kept apart.
    calls = "loader_checks" if os.environ.get(ENDPOINT_OVERRIDE) else "calls"
    state.setdefault(calls, []).append([tool, *argv])
    code, real = 0, None
    try:
        if tool == "docker":  # no Docker engine here, as on a machine without one
            raise Refused("Cannot connect to the Docker daemon. Is the docker daemon running?")
        if tool == "helm":
            real = helm(state, argv, state_file.parent / "fake-registry-charts")
        elif out := Gcloud(state).run(argv):
            print(out)
    except Refused as e:
        print(e, file=sys.stderr)
        code = 1
    state_file.write_text(json.dumps(state, indent=1))
    if real is not None:
        sys.stdout.flush()
        os.execv(os.environ["FAKE_REAL_HELM"], [os.environ["FAKE_REAL_HELM"], *real])
    return code


def install(bin_dir: Path, state_file: Path, real_helm: Path | None = None) -> None:
    """Puts FAKE `gcloud` and `docker` executables in bin_dir, keeping state in state_file;
    with real_helm, a `helm` whose registry is the fake's and whose every other command is
    real_helm's."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    for tool in ("gcloud", "docker", *(["helm"] if real_helm else [])):
        script = bin_dir / tool
        script.write_text(
            f"#!/bin/sh\nFAKE_GCLOUD_STATE={state_file} FAKE_REAL_HELM={real_helm or ''} "
            f'exec {sys.executable} {Path(__file__).resolve()} {tool} "$@"\n'
        )
        script.chmod(0o755)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2:]))
