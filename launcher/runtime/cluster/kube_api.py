"""The Kubernetes API from inside a pod, with the pod's own service-account credentials: the one
client of the in-cluster commands, for the few reads and patches they make (helm test's pod
list, a host's own node, a release's slices released and asked for again). Tests give a server,
token and CA of their own."""

from __future__ import annotations

import json
import os
import ssl
import urllib.parse
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

IN_CLUSTER = Path("/var/run/secrets/kubernetes.io/serviceaccount")
TIMEOUT_S = 10


def _server(host: str, port: str) -> str:
    """The API server as a pod reaches it (Kubernetes sets these two in every pod's env)."""
    return f"https://{f'[{host}]' if ':' in host else host}:{port}"


@dataclass(frozen=True)
class KubeApi:
    server: str
    token: str
    ca_file: str | None  # None: the system's CAs
    namespace: str

    @classmethod
    def in_cluster(
        cls,
        namespace: str | None = None,
        env: Mapping[str, str] = os.environ,
        account: Path = IN_CLUSTER,
    ) -> KubeApi:
        """The pod's own: the API server from its env, its account's token, CA and namespace
        (OSError where the pod has none of them: not in a pod, no token mounted)."""
        host = env.get("KUBERNETES_SERVICE_HOST")
        if not host:
            raise OSError("no KUBERNETES_SERVICE_HOST in the env: not in a pod")
        ca, own_namespace = account / "ca.crt", account / "namespace"
        return cls(
            _server(host, env.get("KUBERNETES_SERVICE_PORT", "443")),
            (account / "token").read_text().strip(),
            str(ca) if ca.is_file() else None,
            namespace or (own_namespace.read_text().strip() if own_namespace.is_file() else ""),
        )

    def _call(self, method: str, path: str, body: Any = None, content_type: str = "") -> Any:
        headers = {"Authorization": f"Bearer {self.token}", "Accept": "application/json"}
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = content_type or "application/json"
        request = urllib.request.Request(
            self.server + path, data=data, headers=headers, method=method
        )
        context = ssl.create_default_context(cafile=self.ca_file)
        with urllib.request.urlopen(request, context=context, timeout=TIMEOUT_S) as resp:
            return json.load(resp)

    def pods(self, selector: str) -> list[dict]:
        query = urllib.parse.quote(selector)
        return self._call("GET", f"/api/v1/namespaces/{self.namespace}/pods?labelSelector={query}")[
            "items"
        ]

    def node(self, name: str) -> dict:
        return self._call("GET", f"/api/v1/nodes/{urllib.parse.quote(name)}")

    def raycluster(self, name: str) -> dict:
        return self._call("GET", self._raycluster_path(name))

    def patch_raycluster(self, name: str, ops: list[dict]) -> dict:
        """A JSON patch (RFC 6902): a `test` op first makes it apply only to what was read."""
        return self._call("PATCH", self._raycluster_path(name), ops, "application/json-patch+json")

    def _raycluster_path(self, name: str) -> str:
        return f"/apis/ray.io/v1/namespaces/{self.namespace}/rayclusters/{name}"
