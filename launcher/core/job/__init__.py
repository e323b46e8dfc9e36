"""A training job from its words to its record, whatever the framework: the flags and the plan,
the events the workstation parses, the run's directory, checkpoints and their tiers, goodput,
hangs, the metrics' names, the outcome and the record."""
