"""What the runtime patches in MaxText, and the private functions it calls: read from MaxText
0.2.5 (pyproject.toml pins it). MaxText's train loop and set-up look its checkpointing
functions up as module globals at each call, which is what lets a start wrap them."""

from __future__ import annotations

from launcher.runtime.borrowed import Borrowed

_MARK = "_launcher_pytree"  # on ResultTokens: registered already, in this process

CHECKPOINTING = "maxtext.common.checkpointing"
GRAIN = "maxtext.common.grain_utility"
DATA_LOADER = "maxtext.common.data_loader"
ENGINE_API = "maxtext.inference.maxengine.maxengine", "engine_api.ResultTokens"

SAVE = CHECKPOINTING, "save_checkpoint"
LOAD = CHECKPOINTING, "load_state_if_possible"
LOAD_BATCH = DATA_LOADER, "DataLoader.load_next_batch_pre_sharding"

MAXTEXT = Borrowed(
    "maxtext",
    "0.2.5",
    {
        # The memory tier keeps each host's Grain iterator state beside its in-memory saves
        # (launcher.runtime.train.memory_tier).
        SAVE: "wrapped: the iterator state written after a save",
        LOAD: "wrapped: the iterator state set after a restore",
        (GRAIN, "_state_to_text"): "a Grain iterator's state as MaxText saves it",
        (GRAIN, "_set_state_from_text"): "and set back",
        # --record_examples (launcher.runtime.train.example_record).
        LOAD_BATCH: "wrapped: every train batch recorded",
        # generate (launcher.runtime.models.generate_worker): the engine's results.
        ENGINE_API: "registered as a pytree: the stand-in JetStream's is not",
    },
    frozenset({SAVE, LOAD, LOAD_BATCH}),
)


def make_result_tokens_a_pytree() -> None:
    """Without JetStream (archived; not installed) MaxText's engine returns its stand-in
    ResultTokens from jitted functions, which JAX refuses unless the class is a pytree."""
    import jax

    cls = MAXTEXT.take(*ENGINE_API)
    if getattr(cls, _MARK, False):  # a second run in the same worker process
        return
    statics = ("tokens_idx", "valid_idx", "length_idx", "samples_per_slot")
    jax.tree_util.register_pytree_node(
        cls,
        lambda r: ((r.data, r.log_prob), tuple(getattr(r, k) for k in statics)),
        lambda aux, kids: cls(
            data=kids[0], log_prob=kids[1], **dict(zip(statics, aux, strict=True))
        ),
    )
    setattr(cls, _MARK, True)
