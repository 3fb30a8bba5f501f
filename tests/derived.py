"""Checks for results that tests derive from a committed reference result."""

from __future__ import annotations

from labkit import model


def validate_derived(result: dict, claim: dict, source: str = "derived") -> None:
    """Validate ``result``, derived from a reference result for ``claim``, as the result model
    does, but only what the derivation changed: the measurements of the claim's ``metric`` and
    the steps that made them, or for a step claim its ``step`` (the rest is the reference
    result, validated when loaded). Schema validation of a whole result takes 0.1-0.3 s
    (fio_engines': 1,718 measurements, 576 steps, most of the time in the steps): a few hundred
    derived cases otherwise cost a minute of the fast tier. A claim with neither: the whole result.

    Raises:
        model.ResultError: as ``model.validate``.
    """
    metric, step = claim.get("metric"), claim.get("step")
    if metric is not None:
        kept = [m for m in result["measurements"] if m["metric"] == metric]
        made = {m.get("step") for m in kept}
        result = {**result, "measurements": kept, "steps": [s for s in result["steps"] if s["name"] in made]}
    elif step is not None:
        result = {**result, "measurements": [], "steps": [s for s in result["steps"] if s["name"] == step]}
    model.validate(result, source)
