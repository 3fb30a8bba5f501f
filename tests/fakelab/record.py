"""fakelab: no measurements (the lab contract's test double records its steps only)."""


def collect(run) -> None:
    """Nothing to measure: the steps (run.steps) are the result."""
