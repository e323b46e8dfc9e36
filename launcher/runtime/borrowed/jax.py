"""What the runtime reads of JAX's private surface: read from jax 0.12.0.1 (the image's lock pins
it, through MaxText)."""

from __future__ import annotations

from typing import Any

from launcher.runtime.borrowed import Borrowed

DISTRIBUTED = "jax._src.distributed", "global_state"

JAX = Borrowed(
    "jax",
    "0.12.0.1",
    {
        # A preemption notice (launcher.runtime.train.preemption) is said to MaxText through
        # JAX's preemption service, once jax.distributed has made it.
        DISTRIBUTED: "its preemption_sync_manager: the preemption service is up",
    },
)


def preemption_service_ready() -> bool:
    state: Any = JAX.take(*DISTRIBUTED)
    return state.preemption_sync_manager is not None
