"""MaxText as the launcher reads it without importing it: its argv, its keys' value types, its
configs (a copy of the pinned MaxText's), the model a job builds, imports, deferred imports."""
