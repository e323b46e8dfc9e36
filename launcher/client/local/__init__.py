"""The local Ray cluster: simulated slices on this machine (`up`, `down`, `slice-down|up`,
`preempt`, `local-status`)."""
