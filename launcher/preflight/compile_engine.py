"""The compile engine: MaxText's ahead-of-time compile of one training step for a TPU topology
(libtpu compiles for a TPU it does not have), read into a MemoryReport, cached by a hash of
everything that decides it."""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict
from importlib import metadata
from pathlib import Path
from typing import Any

from launcher.core.child_process import ends_with_this_process
from launcher.core.errors import UsageError
from launcher.core.job.checkpoint_tiers import CHECKPOINT_ONLY_KEYS
from launcher.core.maxtext.args import MaxTextArgs, config_files
from launcher.core.tpu.slices import TpuSlices
from launcher.preflight.aot_probe import OUT_ENV
from launcher.preflight.hlo_traffic import step_traffic
from launcher.preflight.memory_report import GIB, MemoryReport

CACHE_DIR = (
    Path(os.environ.get("LAUNCHER_CACHE_DIR", Path.home() / ".cache" / "tpu-launcher"))
    / "preflight"
)
_STAT = re.compile(r"(\w+_size_in_bytes)=(\d+)")
_OOM = re.compile(r"(Ran out of memory in memory space hbm|RESOURCE_EXHAUSTED)[^\n]*", re.I)
# XLA's TPU out-of-memory message, newer and older wording.
_USED = re.compile(r"required for HLO temporaries \(([\d.]+)([MGT])\)|Used ([\d.]+)([MGT]) of")


class CompileError(UsageError):
    """MaxText could not build or compile the job (not: it does not fit). `cause` is the line
    of the compile's output that says why, for a one-line mention (the advice's table)."""

    cause: str = ""

    @classmethod
    def from_output(cls, label: str, output: str) -> CompileError:
        lines = output.strip().splitlines() or ["no output"]
        tail = "\n".join(lines[-15:])
        error = cls(
            "maxtext arguments",
            f"the ahead-of-time compile for {label} failed:\n{tail}",
            "fix the MaxText arguments it names, then run preflight again",
        )
        error.cause = next((ln.strip() for ln in reversed(lines) if "Error" in ln), lines[-1])
        return error


def cache_key(args: MaxTextArgs, target: TpuSlices, libtpu_flags: str = "") -> str:
    """Everything that decides the answer: MaxText and JAX versions, the config files, the
    arguments, the target slice, the compiler's flags."""
    material = {
        "versions": [metadata.version(p) for p in ("maxtext", "jax", "libtpu")],
        "configs": [f.read_text() for f in config_files(args.config)],
        "overrides": sorted(args.overrides.items()),
        "target": [target.shape.compile_topology, target.num_slices],
        "libtpu_flags": libtpu_flags,
        "report": 4,  # bump when MemoryReport or how hlo_traffic counts changes
    }
    if target.num_slices > 1:
        material["dcn"] = 2  # several slices: their DCN traffic is counted since version 2
    return hashlib.sha256(json.dumps(material, sort_keys=True).encode()).hexdigest()[:24]


def compile_report(
    args: MaxTextArgs, target: TpuSlices, use_cache: bool = True, libtpu_flags: str = ""
) -> MemoryReport:
    """`libtpu_flags` (LIBTPU_INIT_ARGS) change what XLA does, e.g. how collectives overlap."""
    args = MaxTextArgs(
        args.config, {k: v for k, v in args.overrides.items() if k not in CHECKPOINT_ONLY_KEYS}
    )
    key = cache_key(args, target, libtpu_flags)
    cached = CACHE_DIR / f"{key}.json"
    if use_cache and cached.is_file():
        report = MemoryReport(**json.loads(cached.read_text()))
        report.note = (report.note + "; " if report.note else "") + f"cached: {cached}"
        return report
    gen = target.shape.generation
    hbm = gen.per_device(gen.hbm_gib)  # XLA's figures are per device, and so is the fit
    label = (
        f"{target.num_slices} x {target.shape.name}" if target.num_slices > 1 else target.shape.name
    )
    with tempfile.TemporaryDirectory(prefix="preflight-") as out:
        overrides = {
            **args.overrides,
            "base_output_directory": out,
            "compile_topology": target.shape.compile_topology,
            "compile_topology_num_slices": str(target.num_slices),
        }
        # A killed preflight (a test's time limit, kill -9) leaves no compile running.
        argv = ends_with_this_process(
            [
                sys.executable,
                "-m",
                "launcher.preflight.aot_probe",
                str(args.config),
                *(f"{k}={v}" for k, v in overrides.items()),
            ]
        )
        started = time.monotonic()
        # No TPU is used, only its compiler: let two preflights (or a preflight beside a job on
        # a TPU VM) load libtpu at once instead of failing on its lockfile.
        env = {
            **os.environ,
            "JAX_PLATFORMS": "cpu",
            OUT_ENV: out,
            "ALLOW_MULTIPLE_LIBTPU_LOAD": "1",
            "LIBTPU_INIT_ARGS": libtpu_flags,
        }
        proc = subprocess.run(argv, capture_output=True, text=True, env=env)
        seconds = time.monotonic() - started
        traffic = _traffic(Path(out), target)
    output = proc.stdout + proc.stderr
    stats = {k: int(v) for k, v in _STAT.findall(output.split("Memory analysis:")[-1])}
    if proc.returncode == 0 and "argument_size_in_bytes" in stats:
        report = MemoryReport(
            target=label,
            hbm_gib=hbm,
            devices_per_chip=gen.devices_per_chip,
            arguments_gib=stats["argument_size_in_bytes"] / GIB,
            outputs_gib=stats.get("output_size_in_bytes", 0) / GIB,
            aliased_gib=stats.get("alias_size_in_bytes", 0) / GIB,
            temporaries_gib=stats.get("temp_size_in_bytes", 0) / GIB,
            compile_seconds=seconds,
            fits=False,
            **traffic,
        )
        report.fits = report.total_gib <= hbm
    elif (oom := _OOM.search(output)) is not None:
        # XLA refuses to compile a program that cannot fit: that is the answer, not an error.
        used = _USED.search(output)
        need = 0.0
        if used:
            amount, unit = (used[1], used[2]) if used[1] else (used[3], used[4])
            need = float(amount) * {"M": 1 / 1024, "G": 1, "T": 1024}[unit]
        report = MemoryReport(
            target=label,
            hbm_gib=hbm,
            devices_per_chip=gen.devices_per_chip,
            arguments_gib=0,
            outputs_gib=0,
            aliased_gib=0,
            temporaries_gib=need,
            compile_seconds=seconds,
            fits=False,
            note=f"XLA: {oom[0].split('. ')[0]}",
        )
    else:
        raise CompileError.from_output(label, output)
    CACHE_DIR.mkdir(parents=True, exist_ok=True)
    cached.write_text(json.dumps(asdict(report)))
    return report


def _traffic(out: Path, target: TpuSlices) -> dict[str, Any]:
    """The probe's extras (optimized HLO, analytic FLOPs) as MemoryReport fields."""
    hlo, analytic = out / "optimized.hlo", out / "analytic.json"
    if not hlo.is_file():
        return {}
    per_slice = target.devices_per_slice
    devices = per_slice * target.num_slices
    traffic = step_traffic(hlo.read_text(), devices, per_slice if target.num_slices > 1 else None)
    tflops = json.loads(analytic.read_text()) if analytic.is_file() else {}
    return {
        "flops": tflops.get("tflops", 0.0) * 1e12,
        "remat_flops": tflops.get("remat_tflops", 0.0) * 1e12,
        "hbm_bytes": traffic.hbm_bytes,
        "ici_bytes": traffic.bytes_per_device,
        "dcn_bytes": traffic.dcn_bytes,
        "model_dims": tflops.get("model_dims"),
    }
