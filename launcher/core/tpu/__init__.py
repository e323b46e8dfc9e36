"""A slice as Cloud TPU names it and what follows from the one TPU table: shapes and hosts, the
machines, how the TPUs are obtained (capacity), prices, preemption notices, elastic and idle slices,
the chips' own metrics."""
