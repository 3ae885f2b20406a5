"""This machine and its engine's upkeep: `invoke doctor`, GPUs, `invoke clean`, base images."""
