"""`tpu-launcher submit --framework torch -- [job flags] train.py [its arguments]`: a PyTorch
job, checked here (its flags, its script, what ships), then submitted and followed as a MaxText
job is; on the cluster `python -m launcher.runtime train-torch` runs it
(launcher.runtime.torch.entrypoint)."""

from __future__ import annotations

import contextlib
import dataclasses
import shutil
import tempfile
from pathlib import Path

import launcher.examples
from launcher.client.jobs.files import ship_script
from launcher.client.jobs.submit import SubmitRequest, address_for, submit_entrypoint
from launcher.core.errors import UsageError
from launcher.core.job.frameworks import TORCH
from launcher.core.job.run_requests import TORCH_ENTRYPOINT
from launcher.core.job.torch_plan import TorchJobSpec
from launcher.core.job.torch_script import check_backends


def submit_torch(request: SubmitRequest, spec: TorchJobSpec) -> int:
    if request.values:
        raise UsageError(
            "--values",
            "preflight compiles a MaxText job for a values file's slice; a PyTorch job is not "
            "compiled ahead of time",
            "submit it to the release (--release NAME), whose slices it runs on",
        )
    shipment = ship_script(spec.script, request.working_dir)  # the script is there
    check_backends(Path(spec.script))  # a backend no slice gives: refused before it is sent
    for line in shipment.describe():
        print(line, flush=True)
    spec = dataclasses.replace(spec, script=shipment.job_args[0])
    with contextlib.ExitStack() as stack:
        return submit_entrypoint(
            request,
            spec.run_name,
            address_for(request, stack, TORCH),
            [*TORCH_ENTRYPOINT, *spec.words()],
            working_dir=shipment.directory,
        )


# The PyTorch demo: the example the launcher ships, on the local cluster; each run trains 40
# steps past the latest checkpoint, so a rerun resumes and goes on (as the MaxText demo does).
EXAMPLE = Path(launcher.examples.__file__).parent / "torch_tiny_llama.py"
DEMO_RUN = "demo-torch"
DEMO_ARGS = ("--more", "40", "--save-every", "10")


def demo(no_wait: bool, verbose: bool, script_args: list[str]) -> int:
    """`tpu-launcher demo --framework torch`: launcher/examples/torch_tiny_llama.py, shipped
    alone as the job's train.py."""
    with tempfile.TemporaryDirectory(prefix="tpu-launcher-demo-") as staging:
        script = Path(staging) / "train.py"
        shutil.copy(EXAMPLE, script)
        request = SubmitRequest(None, no_wait=no_wait, verbose=verbose, working_dir=staging)
        # Named as a user names a script: by its path from the current directory.
        spec = TorchJobSpec(str(script), (*DEMO_ARGS, *script_args), DEMO_RUN)
        return submit_torch(request, spec)
