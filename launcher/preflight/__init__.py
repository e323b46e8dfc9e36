"""Preflight, on a workstation: the compile engine and memory report below, sharding advice, HLO
traffic and the bucket check beside them, the `tpu-launcher preflight` command on top."""
