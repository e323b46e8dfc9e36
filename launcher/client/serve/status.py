"""`status --release R` of a serving release: where its vLLM server stands, read from the
objects Kubernetes and KubeRay keep (no call to the server itself): its pods (scheduled on the
slice's hosts, or Pending and why), the whole slice up, the model loading and compiling (pods
running, not ready; Ray Serve's application DEPLOYING), ready (the Service has endpoints: the
probes answer, or Ray Serve's application RUNNING and KubeRay's Ready condition)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from launcher.client.jobs.pending_reasons import unschedulable

COMPONENT = "app.kubernetes.io/component"
# The chart's components of a vLLM server: the pods that answer the API (and its Service), and
# the other hosts of a multi-host slice (templates/vllm/_pod.tpl).
SERVER, HOST = "vllm", "vllm-worker"
# Set-based selectors: every pod of the server, whatever the kind that made it.
PODS = f"{COMPONENT} in ({SERVER},{HOST})"


@dataclass
class ServingState:
    release: str
    kind: str  # Deployment, RayService or LeaderWorkerSet
    name: str
    pods: list[dict[str, Any]]
    # Ray Serve's applications (name -> (status, message)) and KubeRay's Ready condition.
    applications: dict[str, tuple[str, str]] = field(default_factory=dict)
    ready_condition: tuple[str, str] | None = None

    @property
    def waiting(self) -> list[dict[str, Any]]:
        return [p for p in self.pods if p.get("status", {}).get("phase") == "Pending"]

    @property
    def ready_pods(self) -> list[dict[str, Any]]:
        return [p for p in self.pods if _condition(p, "Ready") == "True"]

    @property
    def stage(self) -> str:
        """pending, starting (loading the model, compiling), ready, or failed."""
        if any(s in ("DEPLOY_FAILED", "UNHEALTHY") for s, _ in self.applications.values()):
            return "failed"
        if not self.pods or self.waiting:
            return "pending"
        if self.kind == "RayService":
            running = self.applications and all(
                s == "RUNNING" for s, _ in self.applications.values()
            )
            ready = self.ready_condition is not None and self.ready_condition[0] == "True"
            return "ready" if running and ready else "starting"
        servers = [p for p in self.pods if p["metadata"]["labels"].get(COMPONENT) == SERVER]
        return "ready" if servers and all(p in self.ready_pods for p in servers) else "starting"

    def as_json(self) -> dict[str, Any]:
        return {
            "release": self.release,
            "kind": self.kind,
            "name": self.name,
            "stage": self.stage,
            "pods": len(self.pods),
            "ready_pods": len(self.ready_pods),
            "pending_pods": len(self.waiting),
            "applications": {a: s for a, (s, _) in self.applications.items()},
        }

    def lines(self) -> list[str]:
        hosts = len(self.pods)
        lines = [
            f"{self.kind} {self.name}: {self.stage}; {len(self.ready_pods)} of {hosts} pods "
            f"ready, {len(self.waiting)} Pending"
        ]
        for pod in self.waiting[:3]:
            reason = unschedulable(pod) or "scheduled, its containers starting"
            lines.append(f"  {pod['metadata']['name']} Pending: {reason}")
        for app, (status, message) in sorted(self.applications.items()):
            said = f"  Ray Serve application {app}: {status}"
            lines.append(f"{said}: {message}" if message else said)
        lines.append("  " + NEXT[self.stage].replace("<release>", self.release))
        return lines


NEXT = {
    "pending": "waiting for the slice's nodes (kubectl describe pod: the scheduler's reason; "
    "tpu-launcher gke plan: the pools this release needs)",
    "starting": "loading the model and compiling for the TPU (minutes; kubectl logs of the "
    "server pod shows which)",
    "ready": "ask it: tpu-launcher generate --release <release> --prompt '...'",
    "failed": "see the application's message above and the server's log (kubectl logs)",
}


def _condition(obj: dict[str, Any], kind: str) -> str | None:
    for c in obj.get("status", {}).get("conditions") or []:
        if c.get("type") == kind:
            return str(c.get("status"))
    return None


def read(
    release: str, namespace: str, get_items: Callable[..., list[dict[str, Any]]]
) -> ServingState | None:
    """The release's vLLM server, or None when it runs none. `get_items` is helm_release's."""
    instance = f"app.kubernetes.io/instance={release}"
    servers = [
        item
        for kind in ("deployment", "rayservice", "leaderworkerset")
        for item in get_items(
            namespace, kind, "-l", f"{instance},{COMPONENT}={SERVER}", optional=True
        )
    ]
    if not servers:
        return None
    server = servers[0]
    pods = get_items(namespace, "pods", "-l", f"{instance},{PODS}")
    state = ServingState(release, server["kind"], server["metadata"]["name"], pods)
    if server["kind"] == "RayService":
        status = server.get("status", {})
        apps = status.get("activeServiceStatus", {}).get("applicationStatuses") or {}
        state.applications = {
            name: (str(app.get("status", "")), str(app.get("message", "")))
            for name, app in apps.items()
        }
        for c in status.get("conditions") or []:
            if c.get("type") == "Ready":
                state.ready_condition = (str(c.get("status")), str(c.get("message", "")))
    return state
