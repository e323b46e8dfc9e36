"""What every JaxTrainer worker runs to generate: MaxText's own inference engine (MaxEngine:
prefill, insert into the decode state, then one token per `generate` step) on the checkpoint's
parameters, the model sharded over the whole slice as in training. Rank 0 hands the token ids
to the driver; text is the driver's business.
"""

from __future__ import annotations

import time

import numpy as np

from launcher.core.maxtext.deferred_imports import maxtext_imports
from launcher.runtime.borrowed.maxtext import make_result_tokens_a_pytree
from launcher.runtime.job.kv import publish_summary
from launcher.runtime.train.worker import argv_for_this_host, quiet_orbax


def generate_per_worker(config: dict) -> None:
    import jax
    import ray.train

    quiet_orbax()
    # Imported here: jax must not be imported before the backend set up jax.distributed.
    with maxtext_imports():
        from maxtext.configs import pyconfig
        from maxtext.inference.maxengine import maxengine

    if getattr(maxengine.engine_api, "_IS_STUB", False):
        make_result_tokens_a_pytree()
    started = time.monotonic()
    mt_config = pyconfig.initialize(argv_for_this_host(config["argv"]))
    engine = maxengine.MaxEngine(mt_config)
    rng = jax.random.PRNGKey(int(config["seed"]))
    rng, rng_params = jax.random.split(rng)
    params = engine.load_params(rng=rng_params)
    loaded = time.monotonic()

    prompt = list(config["prompt_ids"])
    padded = np.zeros(int(mt_config.max_prefill_predict_length), dtype=np.int32)
    padded[: len(prompt)] = prompt
    rng, rng_prefill, rng_state = jax.random.split(rng, 3)
    prefix, first = engine.prefill(
        params=params, padded_tokens=jax.numpy.asarray(padded), true_length=len(prompt),
        rng=rng_prefill, slot=0,
    )  # fmt: skip
    state = engine.insert(prefix, engine.init_decode_state(rng_state), slot=0)
    ids = [_token_in_slot_0(first)]
    prefilled = time.monotonic()
    for _ in range(int(config["max_tokens"]) - 1):
        rng, rng_step = jax.random.split(rng)
        state, result = engine.generate(params, state, rng=rng_step)
        ids.append(_token_in_slot_0(result))
    done = time.monotonic()
    if ray.train.get_context().get_world_rank() == 0:
        publish_summary(
            config["summary_key"],
            {
                "token_ids": ids,
                "load_seconds": round(loaded - started, 2),
                "prefill_seconds": round(prefilled - loaded, 2),
                "generate_seconds": round(done - prefilled, 2),
            },
        )


def _token_in_slot_0(result) -> int:
    """The token a prefill or generate step produced for the one request (slot 0). The engine
    keeps results replicated, so every host has them whole."""
    data = result.data
    if not data.is_fully_addressable:  # a multi-host array: this host's copy
        data = data.addressable_data(0)
    start, _ = result.tokens_idx
    return int(np.asarray(data)[0, start])
