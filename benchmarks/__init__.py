"""The benchmarks: scripts that print figures side by side and their ratios to targets
(docs/benchmarks.md). Run each as `.venv/bin/python benchmarks/<name>.py`."""
