"""Checks for results that tests derive from a committed reference result."""

from __future__ import annotations

from labkit import model


def validate_metric(result: dict, metric: str | None, source: str = "derived") -> None:
    """Validate ``result`` as the result model does, but only the measurements of ``metric``
    (the ones a derivation changed: the rest is the reference result, validated when loaded).
    Schema validation of a whole 500 KB result takes 0.1 s: a few hundred derived cases
    otherwise cost half a minute of the fast tier. ``metric`` None: every measurement.

    Raises:
        model.ResultError: as ``model.validate``.
    """
    if metric is not None:
        result = {**result, "measurements": [m for m in result["measurements"] if m["metric"] == metric]}
    model.validate(result, source)
