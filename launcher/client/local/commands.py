"""`tpu-launcher local ACTION`: the local cluster's commands, up, down, status, slice-down,
slice-up, preempt, idle-chips (a real Ray cluster on this machine whose simulated TPU hosts run
on CPU). `up` and `down` are also top-level words, the README's."""

from __future__ import annotations

import argparse

from launcher.client.workspace import LOCAL_BUCKET


def run_up(ns: argparse.Namespace) -> int:
    from launcher.client.local import cluster as local_cluster

    local_cluster.up(
        local_cluster.LocalClusterSpec(
            tpu=ns.tpu,
            accelerator=ns.accelerator,
            topology=ns.topology,
            num_slices=ns.num_slices,
            cpu_hosts=ns.cpu_hosts,
            cpu_devices_per_host=ns.cpu_devices_per_host,
            bucket_dir=ns.bucket_dir,
            object_store_mb=ns.object_store_mb,
            dry_run=ns.dry_run,
        )
    )
    if ns.prometheus and not ns.dry_run:
        from pathlib import Path

        from launcher.client.local import prometheus as local_prometheus

        local_prometheus.up(Path(ns.bucket_dir).resolve().parent / "prometheus")
    return 0


def run_down(ns: argparse.Namespace) -> int:
    from launcher.client.local import cluster as local_cluster
    from launcher.client.local import prometheus as local_prometheus

    local_cluster.down(ns.dry_run, force=ns.force)
    if not ns.dry_run and local_prometheus.down():
        print("Prometheus stopped")
    return 0


def run_local_status(ns: argparse.Namespace) -> int:
    from launcher.client.local import cluster as local_cluster

    return local_cluster.status()


def run_slice(ns: argparse.Namespace) -> int:
    from launcher.client.local import cluster as local_cluster

    if ns.local_command == "slice-down":
        local_cluster.slice_down(ns.slice)
    else:
        local_cluster.slice_up(ns.slice)
    return 0


def run_idle_chips(ns: argparse.Namespace) -> int:
    from launcher.client.local import cluster as local_cluster

    local_cluster.idle_chips(ns.host, not ns.off)
    return 0


def run_preempt(ns: argparse.Namespace) -> int:
    from launcher.client.local.preemption import Preemption, preempt

    preempt(Preemption(ns.slice, ns.host, ns.notice, ns.stay_down))
    return 0


UP_HELP = "start the local Ray cluster (a simulated TPU slice on CPU)"
DOWN_HELP = "stop the local Ray cluster this directory started"


def add_parsers(sub: argparse._SubParsersAction) -> None:
    local = sub.add_parser(
        "local",
        help="the local Ray cluster, a simulated TPU slice on CPU: up, down, status, and the "
        "faults GKE brings (slice-down, slice-up, preempt, idle-chips)",
    )
    actions = local.add_subparsers(dest="local_command", required=True, metavar="ACTION")
    _add_up(actions.add_parser("up", help=UP_HELP))
    _add_down(actions.add_parser("down", help=DOWN_HELP))
    _add_actions(actions)
    # The README's two words, kept at the top: `tpu-launcher up` is `tpu-launcher local up`.
    _add_up(sub.add_parser("up", help=f"{UP_HELP} (= local up)"))
    _add_down(sub.add_parser("down", help=f"{DOWN_HELP} (= local down)"))


def _add_up(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--tpu",
        help="the simulated slice, as Cloud TPU names it (default v5p-16: 2 hosts x 4 chips); "
        "each host's chips are CPU devices",
    )
    p.add_argument("--accelerator", help="long form: TPU generation (with --topology)")
    p.add_argument("--topology", help="long form: the slice's topology")
    p.add_argument("--num-slices", "--num_slices", type=int, default=1, help="simulated slices")
    p.add_argument(
        "--cpu-hosts", "--cpu_hosts", type=int, help="a CPU-only slice of this many hosts instead"
    )
    p.add_argument(
        "--cpu-devices-per-host",
        "--cpu_devices_per_host",
        type=int,
        default=2,
        metavar="N",
        help="with --cpu-hosts: CPU devices each host's JAX sees (default 2)",
    )
    p.add_argument(
        "--bucket-dir",
        default=LOCAL_BUCKET,
        help="directory that stands for the mounted checkpoint bucket",
    )
    p.add_argument(
        "--object-store-mb",
        type=int,
        default=256,
        help="each node's Ray object store, MB (default 256: the jobs pass little through it)",
    )
    p.add_argument(
        "--prometheus",
        action="store_true",
        help="also start Prometheus on 127.0.0.1:9090, scraping every node's metrics agent (the "
        "job's figures and Ray's own); its data next to the bucket directory; `down` stops it",
    )
    p.add_argument("--dry-run", "--dry_run", action="store_true", help="print the commands only")
    p.set_defaults(func=run_up)


def _add_down(p: argparse.ArgumentParser) -> None:
    p.add_argument("--dry-run", "--dry_run", action="store_true", help="print the command only")
    p.add_argument(
        "--force", action="store_true", help="stop it even if another directory started it"
    )
    p.set_defaults(func=run_down)


def _add_actions(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("status", help="exit 0 when the local Ray cluster answers")
    p.set_defaults(func=run_local_status)

    for name, what in (
        ("slice-down", "kill a simulated slice's hosts, as a preemption does"),
        ("slice-up", "start a simulated slice's hosts again"),
    ):
        p = sub.add_parser(name, help=what)
        p.add_argument("slice", type=int, help="the slice's index (0 .. slices - 1)")
        p.set_defaults(func=run_slice)

    p = sub.add_parser(
        "preempt",
        help="take a simulated slice or host back as GKE does: notice, deadline, kill, return",
        description="What GKE does to a reclaimed TPU host, on the local cluster: Ray's drain "
        "of its node (reason PREEMPTION, with a deadline: the notice the chart's preStop hook "
        "sends), its processes killed at the deadline, then the host started again. A job "
        "saves the step every host reaches after the notice and resumes there.",
    )
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--slice", type=int, help="every host of this slice (0 .. slices - 1)")
    which.add_argument("--host", type=int, help="one host, by its index in the cluster")
    p.add_argument(
        "--notice", type=float, default=30.0, metavar="S", help="seconds from notice to kill"
    )
    p.add_argument(
        "--stay-down", action="store_true", help="do not start the host(s) again after the kill"
    )
    p.set_defaults(func=run_preempt)

    p = sub.add_parser(
        "idle-chips",
        help="hold a simulated host's chips idle in its device plugin's figures, or --off",
        description="The local cluster's TPU device plugin stand-in reports the host's chips "
        "at a duty cycle of 0 from now on, as a host whose chips are no longer fed does; a "
        "job's driver names it as the straggler (`tpu-launcher status`). --off: its own "
        "figures again.",
    )
    p.add_argument("--host", type=int, required=True, help="the host, by its index in the cluster")
    p.add_argument("--off", action="store_true", help="report the host's own figures again")
    p.set_defaults(func=run_idle_chips)
