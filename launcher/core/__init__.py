"""What both sides share, the container and the workstation: the TPU table and slices, MaxText's
arguments, the job plan, checkpoints, errors. Imports nothing from the other packages."""
