"""`python -m launcher ...` is `tpu-launcher ...` (the job entrypoint Ray runs on the head)."""

from launcher.cli import console_main

console_main()
