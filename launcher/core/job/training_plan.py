"""What the driver, its summary and its cost read of a training job's plan, whatever the
framework: the one shape a MaxText job's plan (launcher.core.job.plan.JobPlan) and a PyTorch
job's (launcher.core.job.torch_plan.TorchPlan) both have, so nothing downstream asks which it is."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from launcher.core.job.frameworks import Framework
    from launcher.core.job.run_dir import RunDir
    from launcher.core.tpu.slices import Slices


class TrainingPlan(Protocol):
    @property
    def framework(self) -> Framework: ...

    @property
    def run_name(self) -> str: ...

    @property
    def run_dir(self) -> RunDir: ...

    @property
    def slices(self) -> Slices | None: ...

    def steps_asked(self, metrics: Mapping[str, Any]) -> int | None:
        """The run's length: MaxText's steps=, or the length a script reported in its
        `metrics` (None: not said)."""
        ...

    def tokens_per_step(self, num_devices: int) -> int:
        """The global batch in tokens, where the plan knows it (0: it does not)."""
        ...
