"""PyTorch jobs under TorchTrainer: the entrypoint, the backend, torchrun's contract on every chip,
the slice's variables, and what a user's script calls (launcher.runtime.torch.job)."""
