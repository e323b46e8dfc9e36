"""What runs inside the container: the JaxTrainer entrypoint, the per-host worker, the CPU
backend, progress, and `helm test`'s check. Imports only launcher.core."""
