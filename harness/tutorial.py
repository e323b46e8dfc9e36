"""The GKE tutorial's job ("Train an LLM using JAX, Ray Train, and TPU Trillium on GKE": Llama 3
8B on one v6e-16), as facts: the MaxText arguments of its `ray job submit`."""

from __future__ import annotations

from launcher.preflight.remat_costs import ModelDims

# As the tutorial passes them, after its `MaxText/configs/base.yml base_output_directory=/data/`.
TUTORIAL_JOB_ARGS = [
    "dataset_type=synthetic",
    "per_device_batch_size=1",
    "max_target_length=4096",
    "model_name=llama3-8b",
    "steps=100",
    "ici_fsdp_parallelism=4",
    "ici_tensor_parallelism=4",
    "run_name=rayjob-8b-4096-tp4-4x4",
]
# The whole argv, config and output directory included.
TUTORIAL_ARGV = ["MaxText/configs/base.yml", "base_output_directory=/data/", *TUTORIAL_JOB_ARGS]

# Llama 3 8B (MaxText's configs/models/llama3-8b.yml) at the GKE tutorial's batch and length.
LLAMA3_8B = ModelDims(
    emb_dim=4096,
    mlp_dim=14336,
    num_query_heads=32,
    num_kv_heads=8,
    head_dim=128,
    num_decoder_layers=32,
    mlp_activations=2,
    max_target_length=4096,
    per_device_batch_size=1,
    remat_policy="full",
)
