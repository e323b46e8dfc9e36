"""MaxText's JaxTrainer on every host: the entrypoint, the per-host worker, the hang watchdog,
the memory tier, the preemption save, the CPU backend, the examples recorded, the log lines read."""
