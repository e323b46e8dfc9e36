"""A capacity fallback, on the host's side: the items a values block names, in order; which one a
host got, read from its node's labels as GKE sets them (over HTTP from a server that answers as
the API server's GET /api/v1/nodes/NAME does, with the pod's token); and what a notice on it
means: on Spot a preemption, on on-demand or a reservation a failure (the save on it kept).

GKE's node labels, written here as facts: "Use Spot VMs" (cloud.google.com/gke-spot=true),
"Consuming reserved zonal resources" (cloud.google.com/reservation-name, -affinity; a shared
one's owner in cloud.google.com/reservation-project), "About flex-start provisioning mode"
(cloud.google.com/gke-flex-start=true) and queued provisioning (cloud.google.com/gke-queued)."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from harness.paths import REPO
from launcher.core.errors import UsageError
from launcher.core.job.goodput import Attempt, StepPoint
from launcher.core.tpu.capacity import (
    CAPACITY_ENV,
    capacity_items,
    capacity_of_node,
    items_of_pod,
)
from launcher.core.tpu.preemption import FAILED, PREEMPTED, restarts
from launcher.runtime.cluster.node_capacity import NODE_ENV, capacity_here
from launcher.runtime.train.preemption import Notice

pytestmark = pytest.mark.unit

ACCELERATOR = {"cloud.google.com/gke-tpu-accelerator": "tpu-v6e-slice"}
NODES = {
    "spot-0": {**ACCELERATOR, "cloud.google.com/gke-spot": "true"},
    "od-0": dict(ACCELERATOR),
    "res-0": {
        **ACCELERATOR,
        "cloud.google.com/reservation-name": "res-a",
        "cloud.google.com/reservation-affinity": "specific",
    },
    "shared-0": {
        **ACCELERATOR,
        "cloud.google.com/reservation-name": "res-b",
        "cloud.google.com/reservation-affinity": "specific",
        "cloud.google.com/reservation-project": "owner-proj",
    },
    "flex-0": {**ACCELERATOR, "cloud.google.com/gke-flex-start": "true"},
    "queued-0": {**ACCELERATOR, "cloud.google.com/gke-queued": "true"},
}


@pytest.mark.parametrize(
    ("node", "word", "preemptible"),
    [
        ("spot-0", "spot", True),
        ("od-0", "on-demand", False),
        ("res-0", "reservation:res-a", False),
        ("shared-0", "reservation:projects/owner-proj/reservations/res-b", False),
        ("flex-0", "flex-start", True),
        ("queued-0", "flex-start", True),
    ],
)
def test_a_nodes_labels_say_its_capacity(node, word, preemptible):
    item = capacity_of_node(NODES[node])
    assert (item.word, item.preemptible) == (word, preemptible)


def test_a_values_block_names_its_items_in_order():
    block = {"capacity": ["reservation:res-a", "on-demand", "spot"]}
    items = capacity_items(block, "ray.worker.tpu", "v6e", flex_start=True)
    assert [i.word for i in items] == ["reservation:res-a", "on-demand", "spot"]
    # A bare `reservation` takes the block's; one word is today's single capacity.
    bare = {"capacity": ["reservation", "spot"], "reservation": "res-b"}
    assert [i.word for i in capacity_items(bare, "p", "v6e", True)] == ["reservation:res-b", "spot"]
    assert [i.word for i in capacity_items({"capacity": "spot"}, "p", "v6e", True)] == ["spot"]


@pytest.mark.parametrize(
    ("capacity", "said"),
    [
        (["spot", "spot"], "names one item twice"),
        (["reservation", "spot"], "names no reservation"),
        (["on-demand", "cheap"], "unknown capacity 'cheap'"),
    ],
)
def test_a_wrong_list_is_refused_with_its_fix(capacity, said):
    with pytest.raises(UsageError, match=said):
        capacity_items({"capacity": capacity}, "ray.worker.tpu", "v6e", flex_start=True)


def test_a_rendered_pod_carries_its_items_to_gke_plan():
    env = [{"name": CAPACITY_ENV, "value": "reservation:res-a,on-demand,flex-start"}]
    pod = {"containers": [{"env": env}], "nodeSelector": dict(ACCELERATOR)}
    # Kueue walks this list (no class selected): flex-start is its queued provisioning.
    items = items_of_pod(pod)
    assert [i.capacity.node_labels for i in items][2] == {"cloud.google.com/gke-queued": "true"}
    assert items_of_pod({"containers": [{"env": []}]}) == []


class _ApiServer(BaseHTTPRequestHandler):
    """Answers GET /api/v1/nodes/NAME as the API server does, for the right token only."""

    token = "the-pods-token"

    def do_GET(self) -> None:
        name = self.path.rsplit("/", 1)[-1]
        ok = self.headers.get("Authorization") == f"Bearer {self.token}"
        if not ok or not self.path.startswith("/api/v1/nodes/") or name not in NODES:
            self.send_response(403 if not ok else 404)
            self.end_headers()
            return
        body = json.dumps({"kind": "Node", "metadata": {"name": name, "labels": NODES[name]}})
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(body.encode())

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def api_server(tmp_path, monkeypatch):
    """A stand-in for the API server on 127.0.0.1 (plain HTTP: the pod's TLS is the platform's),
    and the pod's service account directory with its token."""
    server = HTTPServer(("127.0.0.1", 0), _ApiServer)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    (tmp_path / "token").write_text(_ApiServer.token)
    monkeypatch.setattr(
        "launcher.runtime.cluster.kube_api._server",
        lambda host, port: f"http://{host}:{port}",
    )
    yield server.server_address[1], tmp_path
    server.shutdown()


def _attempt(start: float, steps: range, saves: list[tuple[int, float]]) -> Attempt:
    return Attempt(
        started_at=start,
        steps=[StepPoint(s, 1.0, start + 10 + n, 1.0, 100.0) for n, s in enumerate(steps)],
        checkpoints=saves,
    )


@pytest.mark.parametrize(
    ("node", "cause"), [("spot-0", PREEMPTED), ("od-0", FAILED), ("res-0", FAILED)]
)
def test_a_notice_on_the_capacity_a_host_got_is_a_preemption_only_where_gke_reclaims(
    api_server, node, cause
):
    port, account = api_server
    env = {
        CAPACITY_ENV: "reservation:res-a,on-demand,spot",
        NODE_ENV: node,
        "KUBERNETES_SERVICE_HOST": "127.0.0.1",
        "KUBERNETES_SERVICE_PORT": str(port),
    }
    item = capacity_here(env, account)
    assert item is not None
    # As the worker records it (launcher.runtime.job.host): the notice and the host's capacity.
    notice = Notice(140.0, 160.0, "ray drain", item.word, item.preemptible).to_json()
    first = _attempt(100.0, range(27), [(20, 130.0), (27, 142.0)])
    second = _attempt(200.0, range(28, 40), [])
    (r,) = restarts([first, second], [notice], drains=[150.0])
    assert (r.cause, r.saved_step, r.resumed_at) == (cause, 27, 28)
    if cause == FAILED:
        assert f"a notice on {item.word} capacity" in r.describe()
        assert "step 27 saved on it" in r.describe()


def test_a_host_that_cannot_read_its_node_says_so_and_counts_a_notice_as_a_preemption(
    api_server, caplog
):
    port, account = api_server
    (account / "token").write_text("another-token")  # no RBAC for it: 403
    env = {
        CAPACITY_ENV: "on-demand,spot",
        NODE_ENV: "spot-0",
        "KUBERNETES_SERVICE_HOST": "127.0.0.1",
        "KUBERNETES_SERVICE_PORT": str(port),
    }
    assert capacity_here(env, account) is None
    assert "which of the capacities on-demand,spot this host got is unknown" in caplog.text
    # One item needs no reading; no item (the local cluster) says nothing.
    assert capacity_here({CAPACITY_ENV: "spot"}, account).word == "spot"
    assert capacity_here({}, account) is None


def test_preflight_says_what_a_notice_gives_the_save_on_each_item():
    from launcher.core.values_file import load_values, release_facts
    from launcher.preflight.save_estimate import SaveEstimate

    chart = REPO / "charts" / "tpu-stack" / "values.yaml"
    values = load_values(chart, REPO / "values" / "v6e-16.yaml")
    values["ray"]["worker"]["tpu"].update(
        capacity=["reservation", "on-demand", "spot"], reservation="res-a"
    )
    words = release_facts(values, "tpu").capacities
    assert words == ("reservation:res-a", "on-demand", "spot")
    # 20 GiB per host at 1 GiB/s: 20 s twice over and the hook's 5 s: 50 s, more than Spot's
    # default 15 s, less than the 105 s of an extended pool.
    save = SaveEstimate(20.0, 80.0, 60, "values/v6e-16.yaml", words).render()
    assert "per capacity, in the fallback's order:" in save
    lines = {ln.split()[0]: ln for ln in save.splitlines()[-3:]}
    assert "counted as a failure" in lines["reservation:res-a"]
    assert "counted as a failure" in lines["on-demand"]
    assert "where the pool's shutdown is 120s" in lines["spot"]
    # A save longer than any Spot reclaim allows.
    assert "TOO SHORT" in SaveEstimate(60.0, 240.0, 130, "v", words).render().splitlines()[-1]
