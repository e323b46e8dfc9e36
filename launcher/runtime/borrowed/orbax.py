"""What the runtime patches in Orbax's checkpointing, private modules and classes all: read from
orbax-checkpoint 0.12.8 (the image's lock pins it, through MaxText)."""

from __future__ import annotations

from launcher.runtime.borrowed import Borrowed

MULTISLICE = "orbax.checkpoint._src.multihost.multislice"
EMERGENCY = "orbax.checkpoint.experimental.emergency.checkpoint_manager"

BROADCAST = MULTISLICE, "broadcast_one_replica_to_all"
FROM_LOCAL = EMERGENCY, "_MultisliceCheckpointManager._restore_from_local"
FROM_PERSISTENT = EMERGENCY, "_MultisliceCheckpointManager._restore_from_persistent"

ORBAX = Borrowed(
    "orbax-checkpoint",
    "0.12.8",
    {
        # The memory tier (launcher.runtime.train.memory_tier): a restored copy's broadcast
        # between slices carries typed PRNG keys as their data, which it cannot take as keys.
        BROADCAST: "wrapped: PRNG keys sent as their data",
        # Which copy the multi-slice manager restores from, said as it restores.
        FROM_LOCAL: "wrapped: a slice's memory restores",
        FROM_PERSISTENT: "wrapped: the bucket restores",
    },
    frozenset({BROADCAST, FROM_LOCAL, FROM_PERSISTENT}),
)
