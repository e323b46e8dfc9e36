"""Preflight: will this MaxText job fit and run on that slice? Answered on this CPU machine,
before anyone pays for a TPU-hour.

    python -m launcher.preflight --values values/v6e-16.yaml [--bucket gs://b/prefix] [--advise] \
        -- base.yml model_name=llama3-8b run_name=r per_device_batch_size=1 ...

It compiles the training step ahead of time for the target TPU topology with MaxText's own
`train_compile` (libtpu compiles for a TPU it does not have), reads XLA's memory analysis,
and sets it against the chip's HBM from the TPU table. Results are cached by a hash of
everything that decides them. With --bucket it also checks the bucket (see bucket_check); with
--advise it ranks candidate ICI splits by a roofline estimate (see sharding_advice).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from importlib import metadata
from pathlib import Path

import yaml

from launcher.aot_probe import OUT_ENV
from launcher.errors import UsageError, exit_with
from launcher.hlo_traffic import step_traffic
from launcher.maxtext_args import MaxTextArgs, config_files
from launcher.slices import Slices, from_flags
from launcher.tpu_table import slice_shape

GIB = 1024**3
CACHE_DIR = Path(os.environ.get("LAUNCHER_CACHE_DIR",
                                Path.home() / ".cache" / "tpu-launcher")) / "preflight"
_STAT = re.compile(r"(\w+_size_in_bytes)=(\d+)")
_OOM = re.compile(r"(Ran out of memory in memory space hbm|RESOURCE_EXHAUSTED)[^\n]*", re.I)
# XLA's TPU out-of-memory message, newer and older wording.
_USED = re.compile(r"required for HLO temporaries \(([\d.]+)([MGT])\)|Used ([\d.]+)([MGT]) of")


@dataclass
class MemoryReport:
    """Per-chip memory of one training step, as XLA's ahead-of-time compile reports it."""

    target: str
    hbm_gib: float
    arguments_gib: float  # parameters + optimizer state (+ the batch)
    outputs_gib: float
    aliased_gib: float  # outputs that reuse argument buffers (donated state)
    temporaries_gib: float  # activations, gradients, scratch
    compile_seconds: float
    fits: bool
    note: str = ""
    # For the sharding advice (hlo_traffic): per device, one step, loop bodies per iteration.
    flops: float = 0.0  # MaxText's analytic training FLOPs (XLA's count sees one layer)
    hbm_bytes: float = 0.0
    ici_bytes: float = 0.0

    @property
    def total_gib(self) -> float:
        return self.arguments_gib + self.outputs_gib + self.temporaries_gib - self.aliased_gib

    @property
    def margin_gib(self) -> float:
        return self.hbm_gib - self.total_gib

    def render(self) -> str:
        if self.note.startswith("XLA:"):  # the compiler stopped: it reports only the overflow
            return (f"preflight: one training step on {self.target} needs "
                    f"{self.temporaries_gib:.2f} GiB of temporaries alone per chip; a chip has "
                    f"{self.hbm_gib:g} GiB (XLA ahead-of-time compile, "
                    f"{self.compile_seconds:.0f}s)\n  verdict: DOES NOT FIT ({self.note})")
        rows = [
            ("parameters + optimizer state", self.arguments_gib),
            ("temporaries (activations, gradients)", self.temporaries_gib),
            ("outputs not aliased to inputs", self.outputs_gib - self.aliased_gib),
            ("total", self.total_gib),
            (f"HBM per chip ({self.target})", self.hbm_gib),
            ("margin", self.margin_gib),
        ]
        lines = [f"preflight: per-chip memory of one training step on {self.target} "
                 f"(XLA ahead-of-time compile, {self.compile_seconds:.0f}s):"]
        lines += [f"  {name:<40} {gib:8.2f} GiB" for name, gib in rows]
        lines.append(f"  verdict: {'fits' if self.fits else 'DOES NOT FIT'}"
                     + (f" ({self.note})" if self.note else ""))
        return "\n".join(lines)


def slices_from_values(path: str) -> Slices:
    """The slice a chart values file describes (ray.worker.tpu), held to the TPU table."""
    values = yaml.safe_load(Path(path).read_text()) or {}
    tpu = values.get("ray", {}).get("worker", {}).get("tpu")
    if not tpu or tpu.get("enabled") is False:
        raise UsageError("values", f"{path} describes no TPU worker group (ray.worker.tpu)",
                         "pass a TPU values file (values/v6e-16.yaml) or --accelerator_type")
    shape = slice_shape(tpu["generation"], str(tpu["topology"]), int(tpu["chipsPerHost"]))
    return Slices(shape, int(tpu.get("slices", 1)))


def cache_key(args: MaxTextArgs, target: Slices) -> str:
    """Everything that decides the answer: MaxText and JAX versions, the config files, the
    arguments, the target slice."""
    assert target.shape is not None
    material = {
        "versions": [metadata.version(p) for p in ("maxtext", "jax", "libtpu")],
        "configs": [f.read_text() for f in config_files(args.config)],
        "overrides": sorted(args.overrides.items()),
        "target": [target.shape.compile_topology, target.num_slices],
        "report": 3,  # bump when MemoryReport or how hlo_traffic counts changes
    }
    return hashlib.sha256(json.dumps(material, sort_keys=True).encode()).hexdigest()[:24]


def compile_report(args: MaxTextArgs, target: Slices, use_cache: bool = True) -> MemoryReport:
    assert target.shape is not None
    key = cache_key(args, target)
    cached = CACHE_DIR / f"{key}.json"
    if use_cache and cached.is_file():
        report = MemoryReport(**json.loads(cached.read_text()))
        report.note = (report.note + "; " if report.note else "") + f"cached: {cached}"
        return report
    hbm = target.shape.generation.hbm_gib
    label = f"{target.num_slices} x {target.shape.pod_type}" if target.num_slices > 1 else (
        target.shape.pod_type)
    with tempfile.TemporaryDirectory(prefix="preflight-") as out:
        overrides = {**args.overrides, "base_output_directory": out,
                     "compile_topology": target.shape.compile_topology,
                     "compile_topology_num_slices": str(target.num_slices)}
        argv = [sys.executable, "-m", "launcher.aot_probe",
                str(args.config), *(f"{k}={v}" for k, v in overrides.items())]
        started = time.monotonic()
        # No TPU is used, only its compiler: let two preflights (or a preflight beside a job on
        # a TPU VM) load libtpu at once instead of failing on its lockfile.
        env = {**os.environ, "JAX_PLATFORMS": "cpu", OUT_ENV: out,
               "ALLOW_MULTIPLE_LIBTPU_LOAD": "1"}
        proc = subprocess.run(argv, capture_output=True, text=True, env=env)
        seconds = time.monotonic() - started
        traffic = _traffic(Path(out), target.devices_per_slice * target.num_slices)
    output = proc.stdout + proc.stderr
    stats = {k: int(v) for k, v in _STAT.findall(output.split("Memory analysis:")[-1])}
    if proc.returncode == 0 and "argument_size_in_bytes" in stats:
        report = MemoryReport(
            target=label, hbm_gib=hbm,
            arguments_gib=stats["argument_size_in_bytes"] / GIB,
            outputs_gib=stats.get("output_size_in_bytes", 0) / GIB,
            aliased_gib=stats.get("alias_size_in_bytes", 0) / GIB,
            temporaries_gib=stats.get("temp_size_in_bytes", 0) / GIB,
            compile_seconds=seconds, fits=False, **traffic)
        report.fits = report.total_gib <= hbm
    elif (oom := _OOM.search(output)) is not None:
        # XLA refuses to compile a program that cannot fit: that is the answer, not an error.
        used = _USED.search(output)
        need = 0.0
        if used:
            amount, unit = (used[1], used[2]) if used[1] else (used[3], used[4])
            need = float(amount) * {"M": 1 / 1024, "G": 1, "T": 1024}[unit]
        report = MemoryReport(target=label, hbm_gib=hbm, arguments_gib=0, outputs_gib=0,
                              aliased_gib=0, temporaries_gib=need, compile_seconds=seconds,
                              fits=False, note=f"XLA: {oom[0].split('. ')[0]}")
    else:
        tail = "\n".join(output.strip().splitlines()[-15:])
        raise UsageError("maxtext arguments", f"the ahead-of-time compile for {label} failed:\n"
                         f"{tail}", "fix the MaxText arguments it names, then run preflight again")
    CACHE_DIR.mkdir(parents=True, exist_ok=True)
    cached.write_text(json.dumps(asdict(report)))
    return report


def _traffic(out: Path, devices: int) -> dict[str, float]:
    """The probe's extras (optimized HLO, analytic FLOPs) as MemoryReport fields."""
    hlo, analytic = out / "optimized.hlo", out / "analytic.json"
    if not hlo.is_file():
        return {}
    traffic = step_traffic(hlo.read_text(), devices)
    flops = json.loads(analytic.read_text()).get("tflops", 0.0) * 1e12 if analytic.is_file() else 0
    return {"flops": flops, "hbm_bytes": traffic.hbm_bytes, "ici_bytes": traffic.bytes_per_device}


def refuse_if_too_big(report: MemoryReport) -> None:
    if report.fits:
        return
    short = (f"needs at least {report.total_gib:.1f} GiB per chip" if report.total_gib
             else "does not fit")
    raise UsageError(
        "per_device_batch_size",
        f"the job {short} but a {report.target} chip has {report.hbm_gib:g} GiB of HBM",
        "lower per_device_batch_size (or max_target_length); recompute activations with "
        "remat_policy=full; shard parameters and optimizer state wider with more "
        "ici_fsdp_parallelism (and less ici_tensor/data); or choose a larger slice",
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m launcher.preflight",
                                     description=__doc__.splitlines()[0])
    target = parser.add_mutually_exclusive_group(required=True)
    target.add_argument("--values", help="a chart values file naming the slice")
    target.add_argument("--accelerator_type", help="TPU generation (with --topology)")
    target.add_argument("--release", help="a chart release whose RayCluster names the slice "
                        "(kubectl's current context; with --namespace)")
    parser.add_argument("--namespace", default="default")
    parser.add_argument("--topology")
    parser.add_argument("--num_slices", type=int, default=1)
    parser.add_argument("--chips_per_host", type=int)
    parser.add_argument("--bucket", help="gs://bucket/prefix to check (exists, writable, "
                        "latest checkpoint)")
    parser.add_argument("--no-cache", action="store_true")
    parser.add_argument("--advise", action="store_true",
                        help="also compile candidate ICI splits and rank them by a roofline "
                        "estimate (a few minutes per split, cold)")
    parser.add_argument("maxtext", nargs=argparse.REMAINDER)
    ns = parser.parse_args(argv)
    try:
        rest = ns.maxtext[1:] if ns.maxtext[:1] == ["--"] else ns.maxtext
        # The same ARGS as `make submit`: launcher flags (--x) are not MaxText's; skip them.
        args = MaxTextArgs.parse([a for a in rest if not a.startswith("--")])
        if ns.values:
            chosen = slices_from_values(ns.values)
        elif ns.release:
            from launcher.release import release_slices

            chosen = release_slices(ns.release, ns.namespace)
            if chosen is None:  # `make submit RELEASE=` on a CPU cluster goes on
                print(f"preflight: release {ns.release} has no TPU worker group: nothing to "
                      "compile for")
                return 0
        else:
            chosen = from_flags(ns.accelerator_type, ns.topology, ns.num_slices,
                                ns.chips_per_host, None, None)
        args.check_parallelism(chosen.devices_per_slice, chosen.num_slices, chosen.describe())
        if ns.bucket:
            from launcher.bucket_check import check_bucket

            print(check_bucket(ns.bucket, str(args.get("run_name") or "")).render())
        report = compile_report(args, chosen, use_cache=not ns.no_cache)
        print(report.render())
        if ns.advise:
            from launcher import sharding_advice

            candidates, best = sharding_advice.advise(args, chosen, use_cache=not ns.no_cache,
                                                      given=report)
            print(sharding_advice.render(candidates, best, chosen))
        refuse_if_too_big(report)
    except UsageError as e:
        exit_with(e, prog="preflight")
    return 0


if __name__ == "__main__":
    sys.exit(main())
