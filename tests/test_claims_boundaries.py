"""Every decision rule of labkit/stats/claims.py at and around its boundary.

The interval is set by hand (``claims.interval_of`` replaced) so that each case puts it exactly
where the table says: wholly past the threshold, touching it from either side, straddling it,
wholly on the other side, zero-width at the threshold, open above. The sides' samples are
synthetic placeholders (their values do not matter once the interval is fixed); no measured
value is typed here."""

from __future__ import annotations

import math

import pytest

from labkit.stats import claims
from labkit import model

INF = math.inf
F = 2.0       # the factor of every case
G = 1 / F     # its reciprocal: the threshold of less, not_less and within's low end
D = 0.01      # a step off a threshold


def result(**sides) -> dict:
    return {"host": {"emulation": None}, "steps": [], "measurements": [
        model.measurement("x", "u", {"side": k}, v) for k, v in sides.items()]}


SIDES = result(a=[1.0, 2.0, 3.0], b=[1.0, 2.0, 4.0])


def run(monkeypatch, claim: dict, lo: float, hi: float, r: dict = SIDES) -> dict:
    est = lo if math.isfinite(lo) else 1.0
    monkeypatch.setattr(claims, "interval_of", lambda *a, **k: (est, lo, hi, "set by the test"))
    c = {"id": "t", "statement": "t", "source": "s", "metric": "x", "role": "ours", **claim}
    claims.check_spec(c, "test")
    return claims.evaluate_one(c, r)


def compare(relation: str) -> dict:
    return {"kind": "compare", "a": {"side": "a"}, "b": {"side": "b"}, "relation": relation, "factor": F}


# (relation, low, high, verdict)
CASES = [
    # greater: holds when low > F, fails when high <= F
    ("greater", F + D, F + 2 * D, "holds"),
    ("greater", F + D, INF, "holds"),            # open above, low past the threshold
    ("greater", F, F + D, "inconclusive"),       # touching from above: low == F is not past it
    ("greater", F - D, F + D, "inconclusive"),
    ("greater", F - D, INF, "inconclusive"),     # open above, low below
    ("greater", F - D, F, "fails"),              # touching from below: high == F
    ("greater", F, F, "fails"),                  # zero width at the threshold
    ("greater", F - 2 * D, F - D, "fails"),
    ("greater", INF, INF, "holds"),              # an infinite ratio
    # less: holds when high < 1/F, fails when low >= 1/F
    ("less", G - 2 * D, G - D, "holds"),
    ("less", 0.0, 0.0, "holds"),                 # an exact 0
    ("less", G - D, G, "inconclusive"),          # touching from below: high == 1/F is not under it
    ("less", G - D, G + D, "inconclusive"),
    ("less", G, G + D, "fails"),                 # touching from above: low == 1/F
    ("less", G, G, "fails"),
    ("less", G + D, INF, "fails"),
    ("less", G - D, INF, "inconclusive"),
    # not_less: holds when low >= 1/F, fails when high < 1/F
    ("not_less", G, G + D, "holds"),             # touching: low == 1/F is enough
    ("not_less", G, G, "holds"),
    ("not_less", G + D, INF, "holds"),
    ("not_less", G - D, G + D, "inconclusive"),
    ("not_less", G - D, G, "inconclusive"),      # high == 1/F is not under it
    ("not_less", G - 2 * D, G - D, "fails"),
]


@pytest.mark.parametrize("relation,lo,hi,want", CASES)
def test_compare_decides_at_its_boundary(monkeypatch, relation, lo, hi, want):
    v = run(monkeypatch, compare(relation), lo, hi)
    assert v["verdict"] == want, v["evidence"]
    assert ("reason" in v) == (want not in ("holds", "fails"))


WITHIN = [
    # holds when 1/F <= low and high <= F; fails when high < 1/F or low > F
    (G, F, "holds"),                  # touching both ends
    (G + D, F - D, "holds"),
    (1.0, 1.0, "holds"),
    (G - D, F - D, "inconclusive"),   # straddles the low end
    (G + D, F + D, "inconclusive"),   # straddles the high end
    (G - D, F + D, "inconclusive"),   # wider than the band
    (G + D, INF, "inconclusive"),     # open above
    (G - 2 * D, G - D, "fails"),
    (G - D, G - D, "fails"),
    (F + D, F + 2 * D, "fails"),
    (F + D, INF, "fails"),
    (F, F + D, "inconclusive"),       # low == F is not past the band
    (G - D, G, "inconclusive"),       # high == 1/F is not under it
]


@pytest.mark.parametrize("lo,hi,want", WITHIN)
def test_within_decides_at_its_band(monkeypatch, lo, hi, want):
    c = {"kind": "within", "a": {"side": "a"}, "b": {"side": "b"}, "factor": F}
    v = run(monkeypatch, c, lo, hi)
    assert v["verdict"] == want, v["evidence"]


def test_no_interval_is_inconclusive_with_the_method_as_reason(monkeypatch):
    v = run(monkeypatch, compare("greater"), math.nan, math.nan)
    assert v["verdict"] == "inconclusive" and v["reason"] == "set by the test"


def test_the_effect_records_what_the_claim_needs(monkeypatch):
    v = run(monkeypatch, compare("less"), G - 2 * D, G - D)
    assert v["effect"]["needs"] == "< 0.5" and v["effect"]["factor"] == F
    v = run(monkeypatch, compare("greater"), F + D, INF)
    assert v["effect"]["high"] is None and v["effect"]["needs"] == "> 2"


def increasing(r: dict, monkeypatch, lo: float, hi: float, factor: float = F, tolerance: float = 0.1) -> str:
    """An ``increasing`` claim over the points of ``r``, with last ÷ first's interval set to
    (lo, hi); a drop's interval is the real one (sides without spread: the values)."""
    real = claims.interval_of

    def fake(a, b, statistic, paired, interval="t"):
        if a == tuple(r["measurements"][-1]["samples"]) and b == tuple(r["measurements"][0]["samples"]):
            return (lo if math.isfinite(lo) else 1.0), lo, hi, "set by the test"
        return real.__wrapped__(a, b, statistic, paired, interval)
    monkeypatch.setattr(claims, "interval_of", fake)
    c = {"id": "t", "statement": "t", "source": "s", "metric": "x", "role": "ours", "kind": "increasing", "where": {},
         "over": "k", "factor": factor, "tolerance": tolerance}
    claims.check_spec(c, "test")
    return claims.evaluate_one(c, r)["verdict"]


def points(*values: float) -> dict:
    """One point per value, k = 1, 2, ...: three equal samples each (no spread)."""
    return {"host": {"emulation": None}, "steps": [], "measurements": [
        model.measurement("x", "u", {"k": i + 1}, [v, v, v]) for i, v in enumerate(values)]}


@pytest.mark.parametrize("lo,hi,want", [
    (F + D, F + 2 * D, "holds"),
    (F + D, INF, "holds"),
    (F, F + D, "inconclusive"),       # low == factor is not past it
    (F - D, F + D, "inconclusive"),
    (F - D, F, "fails"),              # high == factor: flat
    (F - 2 * D, F - D, "fails"),
])
def test_increasing_decides_on_last_over_first(monkeypatch, lo, hi, want):
    assert increasing(points(1.0, 2.0, 3.0), monkeypatch, lo, hi) == want


def test_increasing_fails_on_a_drop_past_the_tolerance(monkeypatch):
    """A middle point 20 % under the point before it (tolerance 10 %), without spread: the drop
    is certain, so the claim fails even though last ÷ first is past the factor."""
    assert increasing(points(1.0, 2.0, 1.6, 3.0), monkeypatch, F + D, F + 2 * D) == "fails"


def test_increasing_tolerates_a_drop_within_the_tolerance(monkeypatch):
    assert increasing(points(1.0, 2.0, 1.9, 3.0), monkeypatch, F + D, F + 2 * D) == "holds"


def test_increasing_with_a_noisy_drop_is_inconclusive(monkeypatch):
    r = {"host": {"emulation": None}, "steps": [], "measurements": [
        model.measurement("x", "u", {"k": 1}, [1.0, 1.0, 1.0]),
        model.measurement("x", "u", {"k": 2}, [2.0, 2.0, 2.0]),
        model.measurement("x", "u", {"k": 3}, [1.0, 1.6, 3.0]),
        model.measurement("x", "u", {"k": 4}, [3.0, 3.0, 3.0])]}
    assert increasing(r, monkeypatch, F + D, F + 2 * D) == "inconclusive"


STEP = {"kind": "step", "step": "s"}


def step_result(**step) -> dict:
    return {"host": {"emulation": None}, "measurements": [], "steps": [{"name": "s", **step}]}


@pytest.mark.parametrize("step,claim,want", [
    ({"status": "ok", "exit_code": 0}, {}, "holds"),
    ({"status": "failed", "reason": "exit 1", "exit_code": 1}, {}, "fails"),
    ({"status": "skipped", "reason": "no perf"}, {}, "untested"),
    ({"status": "ok", "exit_code": 0, "stdout_bytes": 0}, {"stdout_empty": True}, "holds"),
    ({"status": "ok", "exit_code": 0, "stdout_bytes": 1}, {"stdout_empty": True}, "fails"),
    ({"status": "ok", "exit_code": 0}, {"stdout_empty": True}, "untested"),
    ({"status": "failed", "reason": "x", "exit_code": 1, "stdout_bytes": 1}, {"stdout_empty": True}, "fails"),
])
def test_step_claims(step, claim, want):
    c = {"id": "t", "statement": "t", "source": "s", "role": "instrument", **STEP, **claim}
    assert claims.evaluate_one(c, step_result(**step))["verdict"] == want


def test_a_step_that_did_not_run_is_untested():
    c = {"id": "t", "statement": "t", "source": "s", "role": "instrument", "kind": "step", "step": "other"}
    assert claims.evaluate_one(c, step_result(status="ok", exit_code=0))["verdict"] == "untested"


@pytest.mark.parametrize("a,b,method,lo,hi", [
    ([0.0, 0.0, 0.0], [5.0, 6.0, 7.0], "exact", 0.0, 0.0),
    ([5.0, 6.0, 7.0], [0.0, 0.0, 0.0], "exact", INF, INF),
    ([3.0, 3.0, 3.0], [2.0, 2.0, 2.0], "no spread", 1.5, 1.5),
])
def test_exact_ratios(a, b, method, lo, hi):
    e = claims.ratio_interval(claims.side(result(a=a, b=b), "x", {"side": "a"})[0],
                              claims.side(result(a=a, b=b), "x", {"side": "b"})[0])
    assert e["method"].startswith(method) and (e["low"], e["high"]) == (lo, hi)


def test_fieller_is_open_above_when_b_may_be_zero():
    lo, hi = claims.fieller_interval([10.0, 11.0, 12.0], [0.0, 0.0, 3.0], paired=False)
    assert 0 < lo < 11 and hi == INF


def test_fieller_says_nothing_when_neither_mean_is_away_from_zero():
    """Counts (≥ 0): every ratio ≥ 0 is possible; with a negative sample: no interval."""
    assert claims.fieller_interval([0.0, 0.0, 1.0], [0.0, 1.0, 0.0], paired=False) == (0.0, INF)
    lo, hi = claims.fieller_interval([0.0, -1.0, 1.0], [0.0, 1.0, -1.0], paired=False)
    assert math.isnan(lo) and math.isnan(hi)


def test_fieller_agrees_with_the_t_test_of_the_contrast():
    """Fieller's set excludes ρ exactly when Welch's t test of mean(a) − ρ·mean(b) rejects."""
    from scipy import stats
    a, b = [10.0, 11.0, 13.0, 12.0], [0.0, 2.0, 1.0, 3.0, 2.0]
    lo, hi = claims.fieller_interval(a, b, paired=False)
    assert 0 < lo < hi < INF
    for rho in (lo * 0.99, lo * 1.01, hi * 0.99, hi * 1.01):
        p = stats.ttest_ind(a, [rho * x for x in b], equal_var=False).pvalue
        inside = lo <= rho <= hi
        assert (p >= 0.05) == inside, (rho, p, lo, hi)
