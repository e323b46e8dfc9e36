"""The local Ray cluster: simulated slices on this machine (`tpu-launcher local up|down|status|
slice-down|slice-up|preempt|idle-chips`)."""
