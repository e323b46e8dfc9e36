"""The GKE road as `tpu-launcher` commands, each with its own options:

    tpu-launcher gke plan  --values F    print what `gke up` would run, as a bash script
    tpu-launcher gke up    --values F    make it: cluster, pools, registry, image, bucket, IAM
    tpu-launcher image     --values F    build and push the image the release pulls
    tpu-launcher install   --values F    helm upgrade --install with that image and bucket
    tpu-launcher gke down  --values F    delete what `gke up` made (the bucket stays)

Every one of them renders the chart with the same target values (`GkeTarget.helm_sets`), so the
image pushed is the image the pods pull and the bucket granted is the bucket they mount.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import secrets
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

from launcher.client.commands import run
from launcher.client.gke.gcloud_check import require_gcloud_knows, script_guard
from launcher.client.gke.image import chart_push_steps, describe_image, image_build_step
from launcher.client.gke.plan import down_plan, up_plan
from launcher.client.gke.release import ReleaseNeeds, needs, render, user_secrets
from launcher.client.gke.steps import Plan, execute, format_plan
from launcher.client.gke.target import GkeTarget, add_target_options
from launcher.client.kube_context import add_kube_context_option, helm_context, kubectl
from launcher.client.release.chart_meta import chart_meta
from launcher.client.release.chart_source import OCI, packaged_chart, pulled_chart
from launcher.client.release.image_tag import DOCKERFILE, image_sources, image_tag_of
from launcher.client.release.values_presets import add_values_option
from launcher.core.errors import UsageError
from launcher.core.job.frameworks import FRAMEWORKS, JAX, of_image_tag
from launcher.core.values_file import load_values


def _chart_option(ns: argparse.Namespace) -> None:
    """--chart, made a directory: the packaged chart unless one is named; one in a registry is
    pulled first (`ns.chart_ref` keeps what Helm installs from)."""
    if getattr(ns, "chart_ref", None):
        return  # done already
    ns.chart_ref = ns.chart or str(packaged_chart())
    if ns.chart_ref.startswith(OCI):
        ns.chart = str(pulled_chart(ns.chart_ref, ns.chart_version, ns.helm))
    else:
        ns.chart = ns.chart_ref


def _release_options(p: argparse.ArgumentParser) -> None:
    add_values_option(p, "the release")
    p.add_argument("--release", default="tpu", help="the Helm release name (default tpu)")
    p.add_argument("--namespace", default="default", help="the release's namespace")
    p.add_argument(
        "--chart",
        help="the tpu-stack chart: a directory, or its OCI repository as `image` pushed it "
        "(oci://REGION-docker.pkg.dev/PROJECT/tpu-stack/tpu-stack); default: the chart of this "
        "launcher's version, inside its package (in a clone, charts/tpu-stack)",
    )
    p.add_argument(
        "--chart-version",
        help="the version of an oci:// chart (default: this launcher's version)",
    )
    p.add_argument(
        "--set",
        action="append",
        default=[],
        help="more chart values, as for helm (repeat); the same for plan, up, image, install "
        "and down, so they agree on what the release is",
    )
    p.add_argument("--helm", default="helm", help="the helm binary (v3.22 or v4)")


def _target(ns: argparse.Namespace) -> GkeTarget:
    """The target; the launcher image tagged by the content of its sources (the clone or the
    installed package the chart is in: launcher.client.release.image_tag), unless the values pin
    ray.image.tag (a --set wins too)."""
    _chart_option(ns)
    target = GkeTarget.from_args(ns)
    chart = Path(ns.chart)
    readable = chart.is_dir() and all(Path(v).is_file() for v in ns.values)  # else render says
    values = load_values(chart / "values.yaml", *ns.values) if readable else {}
    pinned = values.get("ray", {}).get("image", {}).get("tag")
    pinned = pinned or next((v.partition("=")[2] for v in ns.set if v.startswith(TAG)), None)
    pinned = pinned or (chart_meta(chart).packaged_for if readable else None)
    framework = values.get("ray", {}).get("framework", JAX.name)
    framework = next((v.partition("=")[2] for v in ns.set if v.startswith(FRAMEWORK)), framework)
    sources = image_sources(chart) if readable else None
    if sources is not None and not pinned:
        # The framework's image (its suffix), which the chart refuses to pair with another.
        suffix = FRAMEWORKS[framework].tag_suffix if framework in FRAMEWORKS else ""
        target = dataclasses.replace(target, image_tag=sources.tag(chart) + suffix)
    elif sources is None and not pinned and readable:
        raise UsageError(
            "ray.image.tag",
            f"the chart at {chart} is not this launcher's own (the one in its package, or a "
            "clone's charts/tpu-stack) and was not packaged for an image, so the launcher "
            "image's tag cannot be known here",
            "leave out --chart (this launcher's chart, its image built from this install), or "
            "set ray.image.tag in a values file (or --set) to the tag `tpu-launcher image` "
            "printed when it pushed the image",
        )
    return target


TAG = "ray.image.tag="
FRAMEWORK = "ray.framework="


def _read_release(ns: argparse.Namespace) -> tuple[GkeTarget, ReleaseNeeds]:
    target = _target(ns)
    docs, bucket = render(
        Path(ns.chart), ns.values, ns.release, ns.namespace, target, ns.helm, ns.set
    )
    return target, needs(docs, ns.namespace, ns.release, bucket)


def _source(chart: str) -> Path | None:
    """The directory the image is built from: the clone the chart is in, or the installed
    package's files staged as a build context; None for another chart (its image is the one
    it was packaged for, pushed already)."""
    sources = image_sources(Path(chart))
    if sources is None:
        return None
    root = sources.context(sources.tag(Path(chart)))
    # Relative where it can be, so a printed plan runs from the same directory elsewhere.
    return Path(os.path.relpath(root)) if Path.cwd() in (root, *root.parents) else root


def _require_source(chart: str) -> Path:
    if (root := _source(chart)) is None:
        raise UsageError(
            "--chart",
            f"the chart at {chart} is not this launcher's own, so nothing here builds its image",
            "leave out --chart: this launcher's chart and its image's sources are in its package "
            "(or a clone's charts/tpu-stack)",
        )
    return root


def _up_plan(ns: argparse.Namespace, target: GkeTarget, need: ReleaseNeeds) -> Plan:
    return up_plan(need, target, ns.release, _source(ns.chart), Path(ns.chart), ns.helm)


def gke_plan(ns: argparse.Namespace) -> int:
    """The script, or the refusal gke up would give before its first step (the installed
    gcloud's; the script asks the gcloud that runs it again)."""
    target, need = _read_release(ns)
    plan = _up_plan(ns, target, need)
    require_gcloud_knows(plan)
    print(format_plan(plan, before=script_guard(plan)), end="")
    return 0


def gke_up(ns: argparse.Namespace) -> int:
    target, need = _read_release(ns)
    plan = _up_plan(ns, target, need)
    require_gcloud_knows(plan)
    code = execute(plan)
    if code == 0:
        argv = ["tpu-launcher", "install", *(w for v in ns.values for w in ("--values", v))]
        argv += ["--release", ns.release]
        argv += ["--namespace", ns.namespace] if ns.namespace != "default" else []
        argv += [w for v in ns.set for w in ("--set", v)]
        print(f"next: {shlex.join(argv)}")  # quoted: it is pasted into a shell
    return code


def gke_down(ns: argparse.Namespace) -> int:
    target, need = _read_release(ns)
    plan = down_plan(need, target, ns.release, ns.namespace, ns.helm)
    print("gke down deletes, in this order (what is gone already is skipped):")
    for step in plan.steps:
        print(f"  - {step.what}")
    for stays in plan.stays:
        print(f"  kept: {stays}")
    if not ns.yes:
        if not sys.stdin.isatty():
            raise UsageError(
                "--yes",
                "gke down deletes node pools, the image repository and the cluster, and no "
                "terminal is here to ask",
                "read the list above, then run it again with --yes",
            )
        if input("delete them? [y/N] ").strip().lower() not in ("y", "yes"):
            print("nothing deleted")
            return 1
    return execute(plan)


def _docker_works() -> bool:
    if shutil.which("docker") is None:
        return False
    return subprocess.run(["docker", "info"], capture_output=True).returncode == 0


def image(ns: argparse.Namespace) -> int:
    """Builds the launcher image the chart renders for this target and pushes it: with a local
    Docker engine if one answers (or --builder docker), else on Cloud Build."""
    target, need = _read_release(ns)
    if not need.launcher_image:
        raise UsageError(
            "--values",
            "this release runs no Ray pods: it pulls no launcher image",
            "nothing to build",
        )
    target.require_image_name()
    ref, source = need.launcher_image, _require_source(ns.chart)
    builder = ns.builder
    if builder == "auto":
        builder = "docker" if _docker_works() else "cloud-build"
    print(f"image: {ref} (what the release's Ray pods pull), built with {builder}", flush=True)
    if builder == "docker":
        dockerfile = str(source / DOCKERFILE)
        framework = f"FRAMEWORK={of_image_tag(image_tag_of(ref)).name}"
        run(
            "build the image",
            ["docker", "build", "-f", dockerfile, "--build-arg", framework, "-t", ref, str(source)],
            dry_run=ns.dry_run,
        )
        run("push the image", ["docker", "push", ref], dry_run=ns.dry_run)
    else:
        step = image_build_step(ref, target, source)
        run(step.what, step.argv, dry_run=ns.dry_run)
    for step in chart_push_steps(Path(ns.chart), ref, target, ns.helm):
        run(step.what, step.argv, dry_run=ns.dry_run)
    print(f"image tag: {image_tag_of(ref)}")
    return 0


def _create_if_missing(name: str, key: str, namespace: str, dry_run: bool) -> None:
    """A Secret the release's pods read and the user has not made yet (vLLM's API key), made
    with a random value after the install (its pods start once it exists). The value goes
    through a private file, never the command line."""
    in_namespace = kubectl("-n", namespace)
    argv = [*in_namespace, "get", "secret", name]
    found = run(f"find Secret {name}", argv, capture=True, check=False)
    if found.returncode == 0 and not dry_run:
        return
    with tempfile.TemporaryDirectory() as private:
        value = Path(private) / key
        value.write_text(secrets.token_hex(32))
        argv = [*in_namespace, "create", "secret", "generic", name, f"--from-file={key}={value}"]
        run(
            f"create Secret {name} with a new random {key} (only if missing)", argv, dry_run=dry_run
        )
    if not dry_run:
        print(
            f"created Secret {name} with a new {key}; read it with: "
            f"{shlex.join(in_namespace)} get secret {name} -o jsonpath='{{.data.{key}}}' "
            "| base64 -d"
        )


def install(ns: argparse.Namespace) -> int:
    """`helm upgrade --install` with the image `image`/`gke up` pushed and the target's bucket;
    a RayJob's job is checked first, as `submit` checks one, and a vLLM server's model against
    its slice."""
    from launcher.client.jobs.rayjob_check import check_rayjobs
    from launcher.client.serve.fit import check_release

    target = _target(ns)
    target.require_image_name()
    # What the release will be, from the same values and --set the install uses.
    chart = Path(ns.chart)
    docs, bucket = render(chart, ns.values, ns.release, ns.namespace, target, ns.helm, ns.set)
    check_rayjobs(docs)
    check_release(docs)  # a vLLM release: its model against its slice
    image = needs(docs, ns.namespace, ns.release, bucket).launcher_image
    pinned = load_values(chart / "values.yaml", *ns.values)["ray"]["image"].get("digest")
    pinned = pinned or any(v.startswith(DIGEST) for v in ns.set)
    digest = [] if pinned or not image else _digest_set(image, target, ns.dry_run)
    argv = [ns.helm, "upgrade", "--install", ns.release, ns.chart_ref, "--namespace", ns.namespace]
    argv += helm_context()  # the cluster cli.py pinned: named, never kubectl's current silently
    if ns.chart_ref.startswith(OCI):  # Helm pulls it again: the same version
        argv += ["--version", chart_meta(chart).version]
    argv.append("--create-namespace")
    for path in ns.values:
        argv += ["-f", path]
    for value in [*target.helm_sets(), *digest, *ns.set]:
        argv += ["--set", value]
    run("install the release", argv, dry_run=ns.dry_run)
    for name, key in user_secrets(docs):  # the Secrets the installed pods read
        _create_if_missing(name, key, ns.namespace, ns.dry_run)
    if ns.dry_run:
        return 0
    where = f"--release {shlex.quote(ns.release)}" + (
        f" --namespace {shlex.quote(ns.namespace)}" if ns.namespace != "default" else ""
    )
    if any(d.get("kind") == "RayJob" for d in docs):
        print(
            "next: the RayJob runs ray.job.args on a cluster of its own, deleted when it ends:\n"
            f"  tpu-launcher status {where}            # queued, starting, running, or done\n"
            f"  tpu-launcher logs {where} --follow     # its log, live"
        )
    elif any(d.get("kind") == "RayCluster" for d in docs):
        print(f"next: tpu-launcher submit {where} -- <job args>")
    else:  # a serving release: nothing to submit to
        print(
            "next: the server loads its model and compiles (minutes):\n"
            f"  tpu-launcher status {where}                      # starting, or serving\n"
            f"  tpu-launcher generate {where} --prompt 'Hello'   # ask it"
        )
    return 0


DIGEST = "ray.image.digest="


def _digest_set(image: str, target: GkeTarget, dry_run: bool) -> list[str]:
    """`ray.image.digest=<what the registry holds under the tag now>`: the release runs the
    bytes that were pushed, whatever the tag names later. Artifact Registry says the digest
    (image_summary.digest of `gcloud artifacts docker images describe`); an image elsewhere
    is pulled by its tag, and said so."""
    if not image.partition("/")[0].endswith("-docker.pkg.dev"):
        print(
            f"note: {image} is not on Artifact Registry: pulled by its tag (set ray.image.digest)"
        )
        return []
    argv = [*describe_image(image, target), "--format=value(image_summary.digest)"]
    found = run(f"read the digest of {image}", argv, dry_run=dry_run, capture=True).stdout
    return [DIGEST + (found.strip() or "<the digest gcloud prints>")]


def gke_queue(ns: argparse.Namespace) -> int:
    """Prints the Kueue objects the release's queue needs, as YAML for kubectl apply."""
    from launcher.client.gke.queue import QUEUE_LABEL, queue_objects

    _chart_option(ns)
    target = GkeTarget.from_args(ns)
    docs, bucket = render(
        Path(ns.chart), ns.values, ns.release, ns.namespace, target, ns.helm, ns.set
    )
    need = needs(docs, ns.namespace, ns.release, bucket)
    named = {d["metadata"].get("labels", {}).get(QUEUE_LABEL) for d in docs} - {None}
    queue = ns.queue or next(iter(named), None)
    if not queue:
        raise UsageError(
            "--queue",
            "the release names no Kueue queue",
            "pass --queue NAME, or set kueue.queueName in the values",
        )
    if not need.pools:
        raise UsageError(
            "--values", "the release asks for no TPU slice", "name one: ray.worker.tpu.type"
        )
    objects = queue_objects(need.pools, queue, ns.namespace, ns.quota_slices)
    print(yaml.safe_dump_all(objects, sort_keys=False), end="")
    return 0


def gke_compute_class(ns: argparse.Namespace) -> int:
    """Prints the ComputeClass a capacity fallback walks, as YAML for kubectl apply."""
    from launcher.client.gke.compute_class import compute_classes

    _chart_option(ns)
    target = GkeTarget.from_args(ns)
    docs, bucket = render(
        Path(ns.chart), ns.values, ns.release, ns.namespace, target, ns.helm, ns.set
    )
    objects = compute_classes(needs(docs, ns.namespace, ns.release, bucket).pools)
    if not objects:
        raise UsageError(
            "--values",
            "no slice group of the release falls back through a ComputeClass",
            'give a capacity list: --set-json \'ray.worker.tpu.capacity=["reservation:NAME",'
            '"on-demand","spot"]\' (without kueue.queueName, or with '
            "ray.worker.tpu.capacityFallback=computeclass)",
        )
    print(yaml.safe_dump_all(objects, sort_keys=False), end="")
    return 0


def add_parsers(sub: argparse._SubParsersAction) -> None:
    gke = sub.add_parser(
        "gke",
        help="plan, make or delete what a release needs on GKE (cluster, pools, image, bucket)",
        description=__doc__.splitlines()[0],
    )
    actions = gke.add_subparsers(dest="gke_command", required=True, metavar="ACTION")
    for name, func, what in (
        ("plan", gke_plan, "print the gcloud commands gke up runs, as a bash script"),
        ("up", gke_up, "run them: stops at the first failure; what exists is skipped"),
        ("down", gke_down, "delete what gke up made, bucket and checkpoints kept (asks first)"),
    ):
        p = actions.add_parser(name, help=what, description=what)
        _release_options(p)
        add_target_options(p)
        if name == "down":
            p.add_argument("--yes", action="store_true", help="do not ask")
        p.set_defaults(func=func)
    what = "print the Kueue objects a queue for the release's slices needs (kubectl apply -f -)"
    p = actions.add_parser("queue", help=what, description=what)
    _release_options(p)
    add_target_options(p, pools=False)
    p.add_argument("--queue", help="the LocalQueue's name (default: the values' kueue.queueName)")
    p.add_argument(
        "--quota-slices",
        type=int,
        help="slices of each shape the queue may run at once (default: the release's count)",
    )
    p.set_defaults(func=gke_queue)
    what = (
        "print the ComputeClass a capacity fallback walks, its priorities in the list's order "
        "(kubectl apply -f -)"
    )
    p = actions.add_parser("compute-class", help=what, description=what)
    _release_options(p)
    add_target_options(p, pools=False)
    p.set_defaults(func=gke_compute_class)

    p = sub.add_parser(
        "image",
        help="build and push the launcher image the chart's pods pull (Cloud Build or Docker)",
    )
    _release_options(p)
    add_target_options(p, pools=False)
    p.add_argument(
        "--builder",
        choices=["auto", "cloud-build", "docker"],
        default="auto",
        help="auto: a local Docker engine when one answers, else Cloud Build",
    )
    p.add_argument("--dry-run", action="store_true", help="print the commands only")
    p.set_defaults(func=image)

    p = sub.add_parser(
        "install", help="helm upgrade --install the release with the image gke up pushed"
    )
    _release_options(p)
    add_target_options(p, pools=False)
    add_kube_context_option(p)
    p.add_argument("--dry-run", action="store_true", help="print the command only")
    p.set_defaults(func=install)
