"""Drives the real things the tests and the benchmarks both use: the local Ray cluster and its
jobs (as an operator would), helm and the test control plane, the checkout's paths and pins, and
the GKE tutorial's job as facts. Neither the tests nor the benchmarks own it."""
