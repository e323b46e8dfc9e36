"""The house by audience: what runs in the container (runtime, behind its own door, `python -m
launcher.runtime`) never imports what runs on a workstation (client, preflight, the `tpu-launcher`
command in launcher.cli), nor the other way round; what both share (core) imports neither; and no
module of the launcher is in an import circle. Imports inside functions count too: they run all
the same."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from harness.paths import REPO

pytestmark = pytest.mark.unit
PACKAGE = REPO / "launcher"


def _module_name(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(p): p for p in PACKAGE.rglob("*.py")}


def _imports(path: Path) -> set[str]:
    """The launcher modules `path` imports (a `from package import name` that names a module
    counts as that module)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("launcher")}
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("launcher"):
            for alias in node.names:
                sub = f"{node.module}.{alias.name}"
                found.add(sub if sub in MODULES else node.module)
    return found


GRAPH = {name: _imports(path) & set(MODULES) for name, path in MODULES.items()}


def _reaches(start: str) -> set[str]:
    seen, todo = set(), [start]
    while todo:
        for nxt in GRAPH[todo.pop()] - seen:
            seen.add(nxt)
            todo.append(nxt)
    return seen


@pytest.mark.parametrize(
    ("package", "forbidden"),
    [
        ("launcher.runtime", ("launcher.client", "launcher.preflight", "launcher.cli")),
        ("launcher.cli", ("launcher.runtime",)),
        ("launcher.client", ("launcher.runtime",)),
        ("launcher.preflight", ("launcher.runtime",)),
        (
            "launcher.core",
            ("launcher.runtime", "launcher.client", "launcher.preflight", "launcher.cli"),
        ),
    ],
)
def test_a_package_never_reaches_the_other_audience(package, forbidden):
    for name in (m for m in MODULES if m == package or m.startswith(package + ".")):
        crossing = sorted(m for m in _reaches(name) if m.startswith(forbidden))
        assert not crossing, f"{name} imports (directly or through others) {crossing}"


def test_no_module_is_in_an_import_circle():
    circles = sorted(name for name in MODULES if name in _reaches(name))
    assert not circles, f"modules in an import circle: {circles}"


def test_the_graph_sees_imports_at_all():
    """Guards the two tests above against a walker that finds nothing."""
    assert "launcher.core.job.plan" in GRAPH["launcher.runtime.train.entrypoint"]
    assert "launcher.preflight.command" in GRAPH["launcher.client.jobs.submit"]
    assert "launcher.client.jobs.commands" in GRAPH["launcher.cli"]


def test_preflight_is_handed_its_target_and_never_reaches_the_client():
    """The client resolves the slice (a values file, a release) and hands it down; preflight
    reaching back up for it would make two places decide the target."""
    for name in (m for m in MODULES if m.startswith("launcher.preflight")):
        crossing = sorted(m for m in _reaches(name) if m.startswith("launcher.client"))
        assert not crossing, f"{name} imports (directly or through others) {crossing}"


# Where a job's words arrive: the workstation's job commands, and a RayJob release's rendered
# args. Everything below them takes the parsed Job (launcher.core.job.plan.Job).
JOB_EDGES = {"launcher.client.jobs.commands", "launcher.client.jobs.rayjob_check"}
# The in-cluster entrypoint reads its flags through absl's app.run, its own edge, and hands
# plan_job the options it built: it calls no parse at all.


def _calls(path: Path, name: str) -> int:
    return sum(
        isinstance(node, ast.Call)
        and (getattr(node.func, "id", None) == name or getattr(node.func, "attr", None) == name)
        for node in ast.walk(ast.parse(path.read_text()))
    )


def test_a_job_is_parsed_only_where_its_words_arrive():
    callers = {name for name, path in MODULES.items() if _calls(path, "parse_job_args")}
    assert callers == JOB_EDGES, (
        f"parse_job_args is called in {sorted(callers - JOB_EDGES)}: take the Job the edge "
        f"parsed instead (launcher.core.job.plan.Job)"
        if callers - JOB_EDGES
        else f"the edges {sorted(JOB_EDGES - callers)} no longer parse: update JOB_EDGES"
    )


def test_the_charts_metadata_has_one_reader():
    """Chart.yaml's name, version and appVersion decide the image tag, the chart pulled and the
    client's version: one reader (launcher.client.release.chart_meta), so they cannot disagree."""
    readers = {n for n, p in MODULES.items() if '"Chart.yaml").read_text()' in p.read_text()}
    assert readers == {"launcher.client.release.chart_meta"}


def test_the_workstations_own_directory_is_named_once():
    """`.local/` and what lies in it are named in launcher.client.workspace alone: the state
    directory's override (LAUNCHER_STATE_DIR) then holds everywhere it is read."""
    spelled = {
        name
        for name, path in MODULES.items()
        if '".local' in path.read_text() or "LAUNCHER_STATE_DIR" in path.read_text()
    }
    assert spelled == {"launcher.client.workspace"}


def test_the_clusters_door_has_the_commands_the_workstation_refuses():
    """launcher.core.runtime_door lists the cluster's commands for `tpu-launcher`, which refuses
    them with the door's name (it cannot import the runtime to ask): the list is the door's."""
    import argparse

    from launcher.core.runtime_door import CLUSTER_COMMANDS
    from launcher.runtime.commands import parser

    (sub,) = (a for a in parser()._actions if isinstance(a, argparse._SubParsersAction))
    assert set(sub.choices) == CLUSTER_COMMANDS


def test_cloud_storage_is_reached_from_one_module():
    """launcher.core.gcs holds the storage client, the bucket's parse and gs:// URLs: what
    needs Cloud Storage imports them there, so the emulator's switch, the missing package's
    install line and the bucket's rule hold everywhere."""
    reaching = {
        name
        for name, path in MODULES.items()
        if "google.cloud import storage" in (text := path.read_text())
        or 'find_spec("google.cloud.storage")' in text
        or "storage.Client(" in text
    }
    assert reaching == {"launcher.core.gcs"}
    borrowed = {name for name in MODULES if "launcher.preflight.bucket_check" in GRAPH[name]}
    assert borrowed <= {"launcher.preflight.command"}, (
        f"{sorted(borrowed)} import from the bucket preflight: take what is Cloud Storage's "
        "from launcher.core.gcs"
    )


def test_the_pods_reach_the_api_server_through_one_client():
    """launcher.runtime.cluster.kube_api is the in-cluster commands' one Kubernetes client: the
    pod's account, its CA, the API server's address from the env and the timeout, held once."""
    reaching = {
        name
        for name, path in MODULES.items()
        if name.startswith("launcher.runtime")
        and any(
            word in path.read_text()
            for word in ("KUBERNETES_SERVICE_HOST", "kubernetes.io/serviceaccount", "/api/v1/")
        )
    }
    assert reaching == {"launcher.runtime.cluster.kube_api"}


# What sits at each package's floor, beside its rooms: what every room of it shares. A new
# module goes in the room its noun names (docs/development.md's table), not here.
FLOORS = {
    "launcher.core": {
        "child_process",
        "errors",
        "extras",
        "gcs",
        "package_version",
        "quantities",
        "ray_auth",
        "release_facts",
        "runtime_door",
        "serving_fit",
        "values_file",
    },
    "launcher.runtime": {"__main__", "commands", "periodic"},
    "launcher.client": {"cluster_options", "commands", "completion", "kube_context", "workspace"},
}


@pytest.mark.parametrize("package", sorted(FLOORS))
def test_each_package_keeps_its_modules_in_rooms(package):
    floor = {
        name.removeprefix(package + ".")
        for name in MODULES
        if name.startswith(package + ".") and name.count(".") == package.count(".") + 1
    }
    home = PACKAGE / package.split(".")[1]
    rooms = {name for name in floor if (home / name).is_dir()}
    flat = floor - rooms
    assert flat == FLOORS[package], (
        f"{package}'s floor holds {sorted(flat - FLOORS[package])}: move each into the room its "
        "noun names (docs/development.md's where-to-change-what table)"
        if flat - FLOORS[package]
        else f"{sorted(FLOORS[package] - flat)} left {package}'s floor: update FLOORS"
    )
    for room in rooms:
        doc = (home / room / "__init__.py").read_text()
        assert doc.startswith('"""'), f"{package}.{room}: its __init__ says what the room holds"
