"""The cluster's own door: the module every pod and job on the cluster runs (the image's
Python), named once here. `tpu-launcher` is the workstation's command and never runs these; the
chart's copy of the name (tpu-stack.runtimeModule) is held to this one by a test."""

from __future__ import annotations

RUNTIME_MODULE = "launcher.runtime"
JOB_ENTRYPOINT = ["python", "-m", RUNTIME_MODULE]
RUNTIME_PROG = " ".join(JOB_ENTRYPOINT)  # how its commands name themselves in errors
# Its commands (launcher.runtime.commands defines each; a test holds the two equal): the
# workstation's `tpu-launcher` refuses these words with where they run instead.
CLUSTER_COMMANDS = frozenset({
    "train", "train-torch", "decode", "convert", "hf-import", "prepare-data",
    "preemption-notice", "idle-release", "cluster-check", "serving-check",
})  # fmt: skip
