"""A release as the workstation reads it: the chart (its metadata and source), the image tag, the
values presets, and a live release read once."""
