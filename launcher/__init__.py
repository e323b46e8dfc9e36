"""Launch MaxText through Ray Train's JaxTrainer on Cloud TPU slices, or on a local CPU slice."""
