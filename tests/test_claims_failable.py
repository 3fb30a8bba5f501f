"""Every claim can fail: for each claim of every labs/<lab>/claims.toml and each committed
reference result of that lab, derive from the real result one result where the claim must
fail and one where it must hold, and check the verdicts.

Derived samples are transformations of the real samples of the claim's own measurements
(scaled, reversed, their spread narrowed), never typed numbers. Kinds:

- compare / within: side a's (or b's) samples are rescaled so that the relation is violated
  (or met) with the two sample ranges apart, so the ratio's interval lies wholly on one side of
  the threshold and the verdict cannot be "inconclusive";
- increasing: the points get the real samples grown step by step, and the series reversed;
- step: the step's status is set to failed (and, for ``stdout_empty``, the step printed).
"""

from __future__ import annotations

import copy
import functools
import math
import statistics
from pathlib import Path

import pytest

from labkit.stats import claims
from labkit import model
from derived import validate_derived

ROOT = Path(__file__).resolve().parent.parent
MARGIN = 1.1  # how far past a threshold a derived result is put (a ratio, not a measured value)


def _cases():
    out = []
    for cf in sorted((ROOT / "labs").glob("*/claims.toml")):
        lab = cf.parent.name
        for rp in sorted((ROOT / "results").glob(f"*/{lab}.json")):
            for c in claims.load(cf):
                out.append(pytest.param(c, rp, id=f"{rp.parent.name}/{lab}/{c['id']}"))
    return out


@functools.lru_cache(maxsize=None)
def _load(path: Path) -> dict:
    return model.load(path)


def _base(path: Path | dict) -> dict:
    """The reference result (at ``path``, or given) measured on hardware by a full run: no
    emulated host, no guest measurement, not quick (the emulated-CPU and full-run rules are
    tested in test_claims_rules.py and test_claims_handbuilt.py)."""
    ref = _load(path) if isinstance(path, Path) else path
    # A derivation changes the host's fields and the top-level fields of measurements and steps
    # (samples, summary, status): those are copied, the rest (cases, artifacts) is shared with
    # the cached reference, which nothing changes. A deep copy of a 500 KB result per case took
    # a third of this file's time.
    r = {**ref, "host": copy.deepcopy(ref["host"]), "steps": [dict(s) for s in ref["steps"]],
         "measurements": [dict(m) for m in ref["measurements"]]}
    r["host"]["emulation"] = None
    r["run"] = {**ref["run"], "quick": False}
    for m in r["measurements"]:
        m.pop("emulation", None)
    return r


def _put(result: dict, metric: str, where: dict, samples: list[float], unit: str) -> None:
    """Give every measurement of ``metric`` matching ``where`` these samples (a new
    measurement with case ``where`` if none matches)."""
    ms = claims.select(result, metric, where)
    if not ms:
        result["measurements"].append(model.measurement(metric, unit, where, samples))
        return
    for m in ms:
        m["samples"] = list(samples)
        m.update(model.summarize(samples))


def _pool(result: dict, metric: str, selectors: list[dict], least: int = claims.MIN_SAMPLES) -> tuple[list[float], str]:
    """Positive samples of the claim's own measurements (at least ``least``: repeated if fewer)
    and their unit. A claim newer than the reference result, whose measurements it lacks, gets
    the samples of the result's first measurement with 3 positive samples (its structure,
    selectors, relation and factor, is what can fail)."""
    ms = [m for w in selectors for m in claims.select(result, metric, w)]
    pool = [s for m in ms for s in m["samples"] if s > 0]
    if not pool:
        ms = [m for m in result["measurements"] if sum(s > 0 for s in m["samples"]) >= claims.MIN_SAMPLES][:1]
        pool = [s for m in ms for s in m["samples"] if s > 0]
    if not pool:
        pytest.skip("the reference result has no measurement with 3 positive samples")
    while len(pool) < least:
        pool = pool + pool
    return pool, ms[0]["unit"]


def _narrow(pool: list[float], factor: float) -> list[float]:
    """The pool with its spread (max/min) narrowed to at most sqrt(factor), around its median."""
    m = statistics.median(pool)
    spread = max(pool) / min(pool)
    if spread <= math.sqrt(factor):
        return pool
    t = math.log(math.sqrt(factor)) / math.log(spread)
    return [m * (p / m) ** t for p in pool]


def derive(claim: dict, path: Path | dict, want: str) -> dict:
    """A result derived from the reference at ``path`` (or the reference itself, a validated
    result a test built from one) where ``claim`` must give ``want``
    (``holds`` or ``fails``), on a host that has what the claim ``requires`` (the
    not-applicable rule is tested in test_claims_handbuilt.py)."""
    r = _base(path)
    r["host"].update(claim.get("requires") or {})
    kind = claim["kind"]
    if kind == "step":
        if "step" in claim:
            step = next((s for s in r["steps"] if s["name"] == claim["step"]), None)
        else:
            step = next(iter(model.select_steps(r, claim["where"])), None)
        if step is None:  # a claim newer than the reference result: a real step, renamed
            step = dict(copy.deepcopy(r["steps"][0]), name=claim.get("step", "derived"),
                        case=dict(claim.get("where", {})))
            r["steps"].append(step)
        if want == "holds":
            step.update(status="ok", reason=None, exit_code=1 if step.get("expect") == "failure" else 0)
            if claim.get("stdout_empty"):
                step["stdout_bytes"] = 0
        else:
            step.update(status="failed", reason="derived: the step did not do what it was designed to do")
        return r
    metric = claim["metric"]
    if kind == "increasing":
        ms = [m for m in claims.select(r, metric, claim["where"]) if isinstance(m["case"].get(claim["over"]), (int, float))]
        xs = sorted({m["case"][claim["over"]] for m in ms})
        if len(xs) < 2:  # a claim newer than the reference: the values of its key anywhere in the result
            xs = sorted({m["case"][claim["over"]] for m in r["measurements"]
                         if isinstance(m["case"].get(claim["over"]), (int, float))})
        if len(xs) < 2:
            pytest.skip(f"the reference result has fewer than two values of {claim['over']}: rerun the lab")
        pool, unit = _pool(r, metric, [claim["where"]])
        # last ÷ first must clear the factor with the pool's own spread against it (the interval
        # of a ratio of medians reaches about spread past its estimate)
        g = MARGIN * (max(pool) / min(pool)) * max(float(claim.get("factor", 1.0)), 1.0)
        order = range(len(xs)) if want == "holds" else reversed(range(len(xs)))
        for x, i in zip(xs, order):
            _put(r, metric, {**claim["where"], claim["over"]: x}, [p * g ** (i / (len(xs) - 1)) for p in pool], unit)
        return r
    # a sign interval decides from SIGN_MIN_N pairs up
    least = claims.SIGN_MIN_N if claim.get("interval") == "sign" else claims.MIN_SAMPLES
    pool, unit = _pool(r, metric, [claim["a"], claim["b"]], least)
    s = max(pool) / min(pool)
    f = float(claim.get("factor", 1.0))
    # Puts one side above the other so far that, with the factor applied either way, their
    # ranges are apart (the noise test compares a·factor with b, or a with b·factor).
    up = MARGIN * s * max(f, 1 / f)
    if kind == "within":
        sa, sb = float(claim.get("scale_a", 1.0)), float(claim.get("scale_b", 1.0))
        if want == "holds":
            near = _narrow(pool, f)
            a, b = [p / sa for p in near], [p / sb for p in near]
        else:
            a, b = [p * up / sa for p in pool], [p / sb for p in pool]
    else:
        rel = claim["relation"]
        ka, kb = {("less", "holds"): (1, up), ("less", "fails"): (up, 1),
                  ("greater", "holds"): (up, 1), ("greater", "fails"): (1, up),
                  ("not_less", "holds"): (up, 1), ("not_less", "fails"): (1, up)}[(rel, want)]
        a, b = [p * ka for p in pool], [p * kb for p in pool]
    if claim.get("paired"):
        # a paired claim needs as many samples on each side: one measurement a side
        picked = [m for w in (claim["a"], claim["b"]) for m in claims.select(r, metric, w)]
        r["measurements"] = [m for m in r["measurements"] if not any(m is p for p in picked)]
    _put(r, metric, claim["a"], a, unit)
    _put(r, metric, claim["b"], b, unit)
    return r


@pytest.mark.parametrize("claim, path", _cases())
def test_claim_can_fail(claim, path):
    r = derive(claim, path, "fails")
    validate_derived(r, claim)
    v = claims.evaluate_one(claim, r)
    assert v["verdict"] == "fails", v


@pytest.mark.parametrize("claim, path", _cases())
def test_claim_can_hold(claim, path):
    r = derive(claim, path, "holds")
    validate_derived(r, claim)
    v = claims.evaluate_one(claim, r)
    assert v["verdict"] == "holds", v


@pytest.mark.parametrize("claim, path", [p for p in _cases() if p.values[0].get("stdout_empty")])
def test_stdout_empty_claim_fails_when_the_step_printed(claim, path):
    r = derive(claim, path, "holds")
    step = next(s for s in r["steps"] if s["name"] == claim["step"])
    # as if the step had printed on stdout what it printed on stderr (its real message)
    out = path.parent / r["lab"] / "raw" / f"{claim['step']}.err"
    step["stdout_bytes"] = max(1, out.stat().st_size if out.exists() else 1)
    assert claims.evaluate_one(claim, r)["verdict"] == "fails"


@pytest.mark.parametrize("claim, path", [p for p in _cases() if p.values[0]["kind"] == "increasing"])
def test_reversed_series_fails(claim, path):
    """Reversing the order of a holding series (first point's samples last...) makes it fail."""
    r = derive(claim, path, "holds")
    ms = [m for m in claims.select(r, claim["metric"], claim["where"]) if isinstance(m["case"].get(claim["over"]), (int, float))]
    xs = sorted({m["case"][claim["over"]] for m in ms})
    by_x = {x: next(m["samples"] for m in ms if m["case"][claim["over"]] == x) for x in xs}
    for x, y in zip(xs, reversed(xs)):
        for m in ms:
            if m["case"][claim["over"]] == x:
                m["samples"] = list(by_x[y])
                m.update(model.summarize(m["samples"]))
    assert claims.evaluate_one(claim, r)["verdict"] == "fails"
