"""The claims engine's intervals against an independent implementation: SciPy's t tests
(``scipy.stats.ttest_1samp`` and ``ttest_ind(equal_var=False)``, whose ``confidence_interval``
is the textbook one-sample and Welch interval) on the log scale, and Fieller's interval at its
ends, where the t test of a − ρ·b must sit exactly at the 5 % level. Then the rules that choose
a method, and the edges of Fieller's quadratic. Samples are drawn from a seeded generator or
written as small shapes: no measured value is typed here."""

from __future__ import annotations

import math

import numpy as np
import pytest

from labkit import model
from labkit.stats import claims


def _stats():
    """scipy.stats, imported by the first test that uses it: a second of import that the xdist
    worker which only collects this file does not pay."""
    from scipy import stats
    return stats


def _draw(seed: int, n_a: int, n_b: int, shift: float = 0.1) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return np.exp(rng.normal(shift, 0.2, n_a)), np.exp(rng.normal(0.0, 0.05, n_b))


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("n", [3, 5, 10])
def test_paired_interval_is_the_one_sample_t_interval_of_log_ratios(seed, n):
    a, b = _draw(seed, n, n)
    ci = _stats().ttest_1samp(np.log(a / b), 0.0).confidence_interval(claims.LEVEL)
    est, lo, hi = claims.log_t_interval(a, b, paired=True, statistic="mean")
    want_lo, want_hi = math.exp(ci.low), math.exp(ci.high)
    # the interval is only ever widened to contain the estimate
    assert lo == pytest.approx(min(want_lo, est), rel=1e-9) and hi == pytest.approx(max(want_hi, est), rel=1e-9)
    assert want_lo < est < want_hi or lo == est or hi == est


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("n_a, n_b", [(3, 3), (5, 10), (10, 4), (20, 20)])
def test_unpaired_interval_is_welchs_on_logs(seed, n_a, n_b):
    """Unequal sizes both ways and unequal spreads: the Welch–Satterthwaite degrees of freedom
    weigh each side's variance by its own n − 1."""
    a, b = _draw(seed, n_a, n_b)
    ci = _stats().ttest_ind(np.log(a), np.log(b), equal_var=False).confidence_interval(claims.LEVEL)
    est, lo, hi = claims.log_t_interval(a, b, paired=False)
    assert lo == pytest.approx(min(math.exp(ci.low), est), rel=1e-9)
    assert hi == pytest.approx(max(math.exp(ci.high), est), rel=1e-9)


def _welch_p(x: np.ndarray, y: np.ndarray) -> float:
    return float(_stats().ttest_ind(x, y, equal_var=False).pvalue)


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("paired", [True, False])
def test_fieller_ends_are_where_the_t_test_of_a_minus_rho_b_reaches_five_percent(seed, paired):
    """Fieller's set is {ρ: the t test of a − ρ·b does not reject}: at each end the test's p is
    exactly 1 − LEVEL, inside it is above, just outside below (samples with zeros, as counts)."""
    rng = np.random.default_rng(100 + seed)
    n = 8
    a = rng.poisson(30, n).astype(float)
    b = rng.poisson(12, n).astype(float)
    a[0], b[1] = 0.0, 0.0
    lo, hi = claims.fieller_interval(a, b, paired)
    assert 0 < lo < hi < math.inf

    def p(rho: float) -> float:
        return float(_stats().ttest_1samp(a - rho * b, 0.0).pvalue) if paired else _welch_p(a, rho * b)
    alpha = 1 - claims.LEVEL
    assert p(lo) == pytest.approx(alpha, abs=1e-6) and p(hi) == pytest.approx(alpha, abs=1e-6)
    assert p((lo + hi) / 2) > alpha
    assert p(lo * 0.97) < alpha and p(hi * 1.03) < alpha


@pytest.mark.parametrize("coeffs, nonneg, want", [
    ((0.0, 0.0, -1.0), False, (math.nan, math.nan)),    # every ρ: no interval
    ((0.0, 0.0, 0.5), False, (math.inf, math.inf)),     # no ρ at all
    ((0.0, 0.0, 0.0), True, (0.0, math.inf)),           # every ρ ≥ 0
    ((0.0, 2.0, -1.0), True, (0.0, 0.5)),               # linear, ρ ≤ 0.5, cut at 0
    ((0.0, -2.0, 1.0), False, (0.5, math.inf)),         # linear, ρ ≥ 0.5
    ((1.0, 0.0, -0.125), False, (-math.sqrt(0.125), math.sqrt(0.125))),   # two roots close together
    ((1.0, 0.0, 0.125), False, (math.inf, math.inf)),   # no real root, opening up: empty
    ((-1.0, 0.0, 0.125), False, (math.nan, math.nan)),  # no real root, opening down: the whole line
    ((1.0, -3.0, 2.0), False, (1.0, 2.0)),              # (ρ − 1)(ρ − 2) ≤ 0
    ((-1.0, 3.0, -2.0), True, (0.0, math.inf)),         # outside (1, 2), cut to ρ ≥ 0: the hull
])
def test_fieller_hull_covers_each_shape_of_the_quadratic(coeffs, nonneg, want):
    got = claims.fieller_hull(*coeffs, nonneg)
    for g, w in zip(got, want):
        assert (math.isnan(g) and math.isnan(w)) or g == pytest.approx(w), (got, want)


def _side(xs: list[float], stat: str = "median") -> claims.Side:
    return claims.Side("s", [float(x) for x in xs], "u", 1, stat)


@pytest.mark.parametrize("a, b, paired, method, statistic", [
    ([1, 2, 3], [1, 1.1, 1.2], False, "Welch t interval on log ratios", "ratio of medians"),
    ([1, 2, 3], [1, 1.1, 1.2], True, "paired t interval on log ratios", "median of paired ratios"),
    ([0, 2, 3], [1, 1.1, 1.2], False, "Fieller interval, ratio of means (a side has samples ≤ 0)", "ratio of means"),
    ([0, 0, 0], [0.5, 0.6, 0.7], False, "exact: a is 0 in every sample and b above 0 in every one, so the ratio is 0", "ratio of medians"),
    ([0.5, 0.6, 0.7], [0, 0, 0], False, "exact: b is 0 in every sample and a above 0 in every one, so the ratio is infinite", "ratio of medians"),
    ([2, 2, 2], [1, 1, 1], False, "no spread: every sample of a side is equal, so the values decide", "ratio of medians"),
])
def test_the_method_follows_the_samples(a, b, paired, method, statistic):
    e = claims.ratio_interval(_side(a), _side(b), paired=paired)
    assert e["method"] == method and e["statistic"] == statistic, e
    assert e["level"] == claims.LEVEL and (e["n_a"], e["n_b"]) == (len(a), len(b))


def _result(a: list[float], b: list[float]) -> dict:
    return {"host": {"emulation": None}, "steps": [], "measurements": [
        model.measurement("x", "s", {"side": "a"}, [float(v) for v in a]),
        model.measurement("x", "s", {"side": "b"}, [float(v) for v in b])]}


@pytest.mark.parametrize("ratio, want", [(1.25, "holds"), (0.8, "holds"), (1.26, "fails"), (0.79, "fails")])
def test_within_includes_both_ends_of_its_band(ratio, want):
    """Sides without spread give a zero-width interval at their ratio: on either end of the band
    it holds (1/factor ≤ low and high ≤ factor), just past it fails."""
    c = {"id": "w", "statement": "s", "source": "s", "role": "ours", "kind": "within", "metric": "x", "a": {"side": "a"},
         "b": {"side": "b"}, "factor": 1.25}
    v = claims.evaluate_one(c, _result([10 * ratio] * 3, [10] * 3))
    assert v["verdict"] == want, v["evidence"]


def test_an_increasing_claim_lists_every_drop():
    c = {"id": "i", "statement": "s", "source": "s", "role": "ours", "kind": "increasing", "metric": "x", "where": {},
         "over": "n", "tolerance": 0.1}
    ms = [model.measurement("x", "s", {"n": n}, v) for n, v in
          ((1, [10.0, 10.1, 10.2]), (2, [5.0, 5.1, 5.2]), (3, [12.0, 12.1, 12.2]), (4, [6.0, 6.1, 6.2]))]
    v = claims.evaluate_one(c, {"host": {"emulation": None}, "steps": [], "measurements": ms})
    assert "; drops beyond tolerance: n=2: 5.1 below n=1's 10.1; n=4: 6.1 below n=3's 12.1" in v["evidence"], v["evidence"]
    assert v["verdict"] == "fails"


def test_two_sides_of_zeros_have_no_ratio():
    e = claims.ratio_interval(_side([0, 0, 0]), _side([0, 0, 0]))
    assert math.isnan(e["estimate"]) and e["method"].startswith("no spread"), e


def test_too_few_samples_say_which_side_and_show_both():
    c = {"id": "f", "statement": "s", "source": "s", "role": "ours", "kind": "compare", "metric": "x", "a": {"side": "a"},
         "b": {"side": "b"}, "relation": "greater"}
    v = claims.evaluate_one(c, _result([1.0, 2.0], [1.0, 1.1, 1.2]))
    assert v["verdict"] == "inconclusive" and v["reason"] == "fewer than 3 samples (a has n=2)"
    assert v["evidence"] == ("a = side=a: median 1.5 s (min 1, max 2, n=2); b = side=b: median 1.1 s "
                             "(min 1, max 1.2, n=3); fewer than 3 samples (a has n=2)")


def test_an_undecided_series_says_its_interval_straddles_the_factor():
    c = {"id": "i", "statement": "s", "source": "s", "role": "ours", "kind": "increasing", "metric": "x", "where": {},
         "over": "n", "factor": 1.0}
    ms = [model.measurement("x", "s", {"n": 1}, [10.0, 12.0, 8.0]), model.measurement("x", "s", {"n": 2}, [10.5, 12.5, 8.5])]
    v = claims.evaluate_one(c, {"host": {"emulation": None}, "steps": [], "measurements": ms})
    assert v["verdict"] == "inconclusive"
    assert v["reason"] == f"the 95% interval of last/first, {claims.span_text(v['effect'])}, straddles 1", v["reason"]
