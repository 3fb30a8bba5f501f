"""Claims: a chapter's testable statements, kept as data in ``labs/<lab>/claims.toml``.

Each ``[[claim]]`` has ``id``, ``statement`` (ours, checked on every host), ``source`` (the
original investigation's conclusion this claim tests, quoted or paraphrased faithfully, with
its machine and kernel), ``role``, an optional ``timing`` (bool, see below) and a ``kind``.

``role``
    ``"conclusion"``: tests one conclusion of the original, named by ``conclusion = "<id>"``
    (a ``[[conclusion]]`` of ``labs/<lab>/original.toml``); ``"instrument"``: checks a tool or
    the setup before a conclusion relies on it; ``"ours"``: the guide's own extension.

Kinds:

``step``
    ``step = "NAME"``, or ``where = {...}`` (the one step whose typed case holds those
    key/values): holds if that step did what it was designed to do (for a step run with
    ``--expect-fail``: it failed). ``stdout_empty = true`` also requires that
    it printed nothing on standard output. Skipped → untested.
``compare``
    ``metric``, selectors ``a`` and ``b`` (case subsets), ``relation`` and ``factor``
    (default 1): ``less``: a·factor < b; ``greater``: a > b·factor; ``not_less``:
    a·factor ≥ b (a is not below b by more than the tolerance ``factor``). ``paired = true``:
    repetition i of a goes with repetition i of b (the design interleaves them), and the
    effect is the median of the per-repetition ratios a_i / b_i.
``within``
    a·scale_a and b·scale_b agree within ``factor``: 1/factor ≤ ratio ≤ factor (``paired``
    as for compare).
``increasing``
    ``metric``, selector ``where``, numeric case key ``over``: the last point exceeds
    the first by ``factor`` (default 1) and no point drops by more than ``tolerance``
    (fraction of the highest earlier point, default 0.1).

Optional on compare, within and increasing: ``statistic = "median"`` (the default) or
``"mean"`` (only where the original compared means, and the statement says so).
``emulated_ok = "<reason>"`` on a timing claim: evaluated on an emulated CPU too (a ratio within
one emulated machine whose mechanism emulation preserves); shown with the emulation mark.
``requires = {smt = true}``: the hardware the claim is about, as the result's host provenance
records it (``host.smt``); on a host without it the claim is not applicable, with the reason.
``full_run = true``: what the claim reads is measured as it should be only by a full run (an
exercise reading iostat's one-second reports of jobs that last seconds); on a quick run's result
it is not applicable, with the reason. ``group = "<group>"``: the group of the lab's steps that
measures what the claim reads; where a quick run left that group out (``run.left_out``, from
the lab's ``quick_leaves_out`` in lab.toml) the claim is not applicable on that result, with the
group and why it was left out.
``labkit/claims.schema.json`` describes every key and is checked on load: no other key is
allowed, a typo fails loud (:class:`ClaimError`).

**Sides.** A selector picks every measurement of ``metric`` whose case contains all its
key/values; the side is the pool of all their samples, in the order the measurements list them.

**The effect and its interval.** A comparison is decided on the ratio of the two sides'
statistics (a ÷ b; for ``increasing``, last ÷ first, and each point ÷ the highest earlier
point for drops) and its 95 % confidence interval, computed so that it is 95 % at the n it
decides on, 3 samples a side included:

- every sample > 0 (times, rates, sizes): a t interval on the log scale
  (:func:`log_t_interval`): Welch's for independent sides, the one-sample t interval of the
  per-pair log ratios for ``paired`` sides. Its coverage is exact for lognormal noise at any n
  and stays at or under its nominal 5 % of false decisions with an occasional disturbed
  repetition (:mod:`labkit.stats.calibration` simulates both through this code;
  ``labkit calibrate`` prints the table, DESIGN.md carries it). The bootstrap used before is
  not: percentile and BCa intervals are too narrow at small n (Hesterberg, "What teachers
  should know about the bootstrap", The American Statistician 69, 2015: a narrowness bias of
  about sqrt((n−1)/n), BCa erratic at small n), and a median of three ratios has only a
  handful of distinct resampled values; simulated at n = 3, a 95 % bootstrap interval excluded
  a true ratio of 1 in 6–10 % of unpaired and 23 % of paired draws. A rank interval cannot
  reach 95 % at all at 3 against 3 (the smallest two-sided Mann-Whitney p is 0.1).
- a claim on means (``statistic = "mean"``), or a side with a sample ≤ 0 (counts that are
  often 0): Fieller's interval for the ratio of means (:func:`fieller_interval`), which decides exactly as a t test of a − factor·b; it is
  open above (``high`` infinite) when b's mean is not surely away from 0, and both ends are
  infinite when b is 0 in every sample and a surely is not.
- both sides without spread, or one side 0 in every sample and the other above 0 in every
  sample: the ratio is exact (a zero-width interval at the values, 0, or infinity).
- ``interval = "sign"`` on a paired median claim (a quantity bounded below and skewed, such as
  events per request, where the log-t interval's symmetric model does not fit): the
  distribution-free interval of the median of the per-pair ratios (:func:`sign_interval`, the
  k-th smallest to the k-th largest ratio), at least 95 % for any distribution at n ≥ 6 and no
  interval (inconclusive) below that.

The estimate shown is the claim's own statistic (ratio of medians, or means); the interval is
widened to contain it where it would not, which can only make a decision more cautious.
Nothing is random: a page rebuilt from the same result gives the same interval.

This follows Kalibera & Jones, "Rigorous benchmarking in reasonable time" (ISMM 2013: report an
effect size, a ratio of means or medians, with a confidence interval, from repeated runs) and
Georges, Buytaert & Eeckhout, "Statistically rigorous Java performance evaluation" (OOPSLA 2007:
decide on confidence intervals, not on single runs or overlapping min–max ranges). criterion
(Rust) reports bootstrap intervals of a change, with about 100 samples; Google Benchmark's
compare.py uses a Mann-Whitney U test, which needs more than 3 repetitions a side.

**Verdicts** (``holds``, ``fails``, ``inconclusive``, ``untested``, ``not applicable``),
tried in this order:

1. ``not applicable``: the claim is about time or speed (``timing``, default true for
   compare, within and increasing, false for step), the measuring machine has an emulated CPU
   (the result's host, or a measurement made in a TCG guest: its ``emulation``), and the claim
   does not declare ``emulated_ok``; or the host lacks what ``requires`` names (a claim about
   SMT siblings on a host without SMT).
2. ``untested``: a side has no measurement, fewer than two ``over`` points, the step was
   skipped or did not run (``reason`` says which). A claim never pretends to hold.
3. ``inconclusive``: a side (for ``increasing``: any point) has fewer than 3 samples
   (:data:`MIN_SAMPLES`); or the interval straddles the claim's threshold.
4. ``holds`` when the whole interval is on the claim's side of the threshold (greater:
   low > factor; less: high < 1/factor; not_less: low ≥ 1/factor; within: 1/factor ≤ low and
   high ≤ factor), ``fails`` when the whole interval is on the other side. Two sides without
   spread have a zero-width interval: the values decide. ``increasing`` holds when last ÷ first
   is past ``factor`` and no point drops, fails when last ÷ first is wholly at or below it or
   a drop's interval lies wholly below 1 − tolerance.

Every verdict carries ``role`` and, when a ratio was computed, ``effect = {statistic,
estimate, low, high, level, factor, needs, n_a, n_b, method}``; every verdict but holds/fails
carries ``reason``; ``flags`` lists sides whose samples drift (first third against last third)
or split into two modes (:func:`side_flags`): shown beside the verdict, never pooled silently.
Exercises (``labs/<lab>/exercises.toml``) use the same evaluator: :func:`load_exercises`,
:func:`exercise_claim`.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import json
import math
import statistics
from collections import OrderedDict
from fractions import Fraction
from pathlib import Path

import numpy as np

from .. import model, tomlschema
from ..model import Effect, Measurement, Result, Verdict

VERDICTS = ("holds", "fails", "inconclusive", "untested", "not applicable")
MIN_SAMPLES = 3
LEVEL = 0.95          # confidence level of every interval
EMULATED_EVIDENCE = "emulated CPU: timings are not hardware"
SCHEMAS = Path(__file__).resolve().parents[1]     # labkit/, where every *.schema.json is (labkit.tomlschema)
SCHEMA = SCHEMAS / "claims.schema.json"
EXERCISES_SCHEMA = SCHEMAS / "exercises.schema.json"


class ClaimError(ValueError):
    """A claims.toml (or exercises.toml) entry is malformed."""


def check_spec(c: dict, where: str, *, named: bool = True) -> None:
    """Check one claim body (a dict as read from TOML) against ``labkit/claims.schema.json``:
    a claim (``$defs/claim``), or with ``named=False`` an exercise's check (``$defs/check``),
    which has no ``id``/``statement``.

    Raises:
        ClaimError: ``<where>: claim <id>: <JSON path in c>: <message>`` (without ``claim <id>``
        when ``named=False``): a missing or unknown key, a bad kind, role, relation, statistic,
        selector, factor or timing (:func:`labkit.tomlschema.check`).
    """
    name = f"{where}: claim {c.get('id', '?')}" if named else where
    tomlschema.check(c, SCHEMA, ClaimError, name, pointer="/$defs/claim" if named else "/$defs/check")


def _unique_ids(entries: list[dict], path: Path | str, section: str) -> None:
    seen = set()
    for e in entries:
        if e["id"] in seen:
            raise ClaimError(f"{path}: duplicate {section} id {e['id']}")
        seen.add(e["id"])


def load(path: Path | str) -> list[dict]:
    """Read ``claims.toml``, check it against ``labkit/claims.schema.json``, return the list of
    claim dicts (as written; empty for an empty file).

    Raises:
        ClaimError: one line naming the file: no file, bad TOML, a schema violation with its
        JSON path (an unknown kind, relation or key, a missing key, ...), duplicate ids.
    """
    claims = tomlschema.load(path, SCHEMA, ClaimError, missing="no claims file").get("claim", [])
    _unique_ids(claims, path, "claim")
    return claims


def load_exercises(path: Path | str) -> list[dict]:
    """Read ``labs/<lab>/exercises.toml`` (or a tool card's ``<lab>.exercises.toml``), check it
    against ``labkit/exercises.schema.json``: ``[[exercise]]`` entries with ``id``, ``title``,
    ``change`` (one knob and the command to run), ``predict`` (the direction to predict) and
    ``check`` (a claim body without id/statement, evaluated like a claim).

    Raises:
        ClaimError: one line naming the file: no file, bad TOML, a schema violation with its
        JSON path (a missing or unknown key, a bad check, no exercise at all), a duplicate id.
    """
    exercises = tomlschema.load(path, EXERCISES_SCHEMA, ClaimError, missing="no exercises file")["exercise"]
    _unique_ids(exercises, path, "exercise")
    return exercises


def exercise_claim(exercise: dict) -> dict:
    """The claim an exercise's check amounts to: ``{"id": exercise id, "statement":
    exercise's prediction, **check}``, for :func:`evaluate_one`."""
    return {"id": exercise["id"], "statement": exercise["predict"], **exercise["check"]}


def is_timing(claim: dict) -> bool:
    """True if ``claim`` is about time or speed: its ``timing``, default true except for steps."""
    return bool(claim.get("timing", claim["kind"] != "step"))


def _tcg(emu: dict | None) -> bool:
    return bool(emu and emu.get("accelerator") == "tcg")


def emulated(result: Result, measurements: list[Measurement] | None = None) -> bool:
    """True if the measuring machine has an emulated CPU: the result's host
    (``host.emulation.accelerator == "tcg"``), or any of ``measurements`` made inside a TCG guest
    (its own ``emulation``), whatever the host that booted the guest."""
    return _tcg(result["host"].get("emulation")) or any(_tcg(m.get("emulation")) for m in measurements or [])


select = model.select   # the one selector of measurements (labkit/model.py)


def _fmt(x: float) -> str:
    return f"{x:.4g}"


def _describe(where: dict) -> str:
    return model.case_text(where) or "all"


class Side:
    """One side of a claim: the pooled samples of the measurements a selector matched.

    Attributes: ``label`` (describes the selector), ``samples`` (floats, in the unit ``unit``,
    in the order the measurements list them), ``count`` (measurements pooled), ``statistic``,
    ``value`` (median or mean), ``min``/``max``, ``n``, ``emulated`` (a measurement was made in
    a TCG guest).
    """

    def __init__(self, label: str, samples: list[float], unit: str, count: int, statistic: str = "median",
                 emulated: bool = False):
        self.label, self.samples, self.unit, self.count, self.statistic = label, samples, unit, count, statistic
        self.value = statistics.mean(samples) if statistic == "mean" else statistics.median(samples)
        self.n = len(samples)
        self.min, self.max = min(samples), max(samples)
        self.emulated = emulated

    def scaled(self, k: float) -> "Side":
        """The same side with every sample multiplied by ``k``."""
        return Side(self.label, [x * k for x in self.samples], self.unit, self.count, self.statistic, self.emulated)

    def describe(self) -> str:
        """E.g. ``engine=psync: median 1.9e+04 IOPS (min 1.7e+04, max 2e+04, n=3)``."""
        pooled = f", {self.count} measurements pooled" if self.count > 1 else ""
        return (f"{self.label}: {self.statistic} {_fmt(self.value)} {self.unit} "
                f"(min {_fmt(self.min)}, max {_fmt(self.max)}, n={self.n}{pooled})")


def side(result: Result, metric: str, where: dict, statistic: str = "median") -> tuple[Side | None, str]:
    """(Side, "") for the measurements of ``metric`` matching ``where``, or (None, reason).

    Raises:
        ClaimError: the matched measurements mix units.
    """
    ms = select(result, metric, where)
    if not ms:
        return None, f"no {metric} measurement for {_describe(where)}"
    units = sorted({m["unit"] for m in ms})
    if len(units) > 1:
        raise ClaimError(f"{metric} where {_describe(where)} mixes units {units}: make the selector narrower")
    return Side(_describe(where), [float(x) for m in ms for x in m["samples"]], units[0], len(ms), statistic,
                any(_tcg(m.get("emulation")) for m in ms)), ""


def _stat(name: str):
    return np.mean if name == "mean" else np.median


def t975(df):
    """The 0.975 quantile of Student's t with ``df`` degrees of freedom (array or scalar;
    :func:`scipy.special.stdtrit`)."""
    from scipy import special
    return special.stdtrit(df, 1 - (1 - LEVEL) / 2)


def log_t_interval(a, b, paired: bool, statistic: str = "median"):
    """The :data:`LEVEL` interval of the ratio a ÷ b of two sides of positive samples, on the log
    scale (the method of every ratio whose samples are all > 0).

    ``a``, ``b``: arrays of shape ``(..., n_a)`` and ``(..., n_b)`` (equal when ``paired``): the
    leading axes are independent draws, so the calibration (:mod:`labkit.stats.calibration`) runs the
    very code that decides a verdict. Unpaired: Welch's t interval (Welch 1947,
    Welch–Satterthwaite degrees of freedom) for mean(log a) − mean(log b); paired: the
    one-sample t interval of the per-pair log ratios log(a_i ÷ b_i) with n − 1 degrees of
    freedom. Exponentiated, this is an interval of the ratio of geometric means, which under
    multiplicative (lognormal) noise is the ratio of the medians; its coverage is exact for
    lognormal samples at every n ≥ 2 (paired) and close to nominal for Welch
    (DESIGN.md, "Calibration", has the simulated rates at the n the labs use).

    Returns ``(estimate, low, high)`` arrays of shape ``(...)``: the estimate is the claim's own
    statistic (the ratio of medians or means; paired: the median or mean of the per-pair ratios),
    and the interval is widened where needed to contain it, so that the figure a page shows
    always lies inside the interval beside it (this only makes a decision more cautious).
    """
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    f = _stat(statistic)
    la, lb = np.log(a), np.log(b)
    with np.errstate(all="ignore"):
        if paired:
            d = la - lb
            n = d.shape[-1]
            centre, se, df = d.mean(-1), d.std(-1, ddof=1) / np.sqrt(n), n - 1
            est = f(a / b, axis=-1)
        else:
            na, nb = la.shape[-1], lb.shape[-1]
            va, vb = la.var(-1, ddof=1) / na, lb.var(-1, ddof=1) / nb
            centre, se = la.mean(-1) - lb.mean(-1), np.sqrt(va + vb)
            df = (va + vb) ** 2 / (va ** 2 / (na - 1) + vb ** 2 / (nb - 1))
            df = np.where(np.isfinite(df), df, min(na, nb) - 1)
            est = f(a, axis=-1) / f(b, axis=-1)
        half = t975(df) * se
        lo, hi = np.exp(centre - half), np.exp(centre + half)
    return est, np.minimum(lo, est), np.maximum(hi, est)


def fieller_interval(a, b, paired: bool) -> tuple[float, float]:
    """Fieller's :data:`LEVEL` interval for the ratio of two means (Fieller, "Some problems in
    interval estimation", J. R. Statist. Soc. B 16, 1954): the set of ρ for which the t test of
    mean(a) − ρ·mean(b) = 0 does not reject (paired: the one-sample t test of a_i − ρ·b_i;
    unpaired: Welch's test, whose degrees of freedom depend on ρ, so each end is solved again
    at its own degrees of freedom until it settles). It decides exactly as that test of
    a − factor·b does at each threshold. Used where a side has a sample ≤ 0 (counts that are
    often 0), where logs do not exist.

    ``a``, ``b``: 1-D sequences. Returns ``(low, high)``, each possibly infinite: ``high`` is
    ``inf`` when mean(b) is not surely away from 0 (the set is unbounded above); both are ``inf``
    when b is 0 in every sample and a surely is not (the ratio is infinite). Where every sample
    is ≥ 0 the set is cut to ratios ≥ 0 (``(0, inf)`` when it says nothing); otherwise a set
    that is the whole line gives ``(nan, nan)``: no interval.
    """
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    ma, mb = a.mean(), b.mean()
    if paired:
        cov = np.cov(a, b, ddof=1) / len(a)
        vaa, vbb, vab = cov[0, 0], cov[1, 1], cov[0, 1]
    else:
        vaa, vbb, vab = a.var(ddof=1) / len(a), b.var(ddof=1) / len(b), 0.0

    def df_at(rho: float) -> float:
        if paired:
            return len(a) - 1
        va, vb = vaa, rho * rho * vbb
        if va + vb == 0:
            return max(len(a), len(b)) - 1
        return (va + vb) ** 2 / (va ** 2 / (len(a) - 1) + vb ** 2 / (len(b) - 1))

    def ends(df: float) -> tuple[float, float]:
        t2 = float(t975(df)) ** 2
        return fieller_hull(mb * mb - t2 * vbb, -2 * (ma * mb - t2 * vab), ma * ma - t2 * vaa,
                             bool((a >= 0).all() and (b >= 0).all()))

    rho0 = ma / mb if mb != 0 else 1.0
    lo, hi = ends(df_at(rho0))
    if not paired:
        for _ in range(20):
            lo2 = ends(df_at(lo))[0] if np.isfinite(lo) else lo
            hi2 = ends(df_at(hi))[1] if np.isfinite(hi) else hi
            if (lo2, hi2) == (lo, hi) or not (np.isfinite(lo2) or np.isfinite(hi2)):
                lo, hi = lo2, hi2
                break
            lo, hi = lo2, hi2
    return lo, hi


def fieller_hull(qa: float, qb: float, qc: float, nonneg: bool) -> tuple[float, float]:
    """(low, high) of the set {ρ: qa·ρ² + qb·ρ + qc ≤ 0}, cut to ρ ≥ 0 when ``nonneg``
    (:func:`fieller_interval` says what the ends mean)."""
    inf = float("inf")
    if qa == 0 and qb == 0:
        parts = [(-inf, inf)] if qc <= 0 else []
    elif qa == 0:
        r = -qc / qb
        parts = [(-inf, r)] if qb > 0 else [(r, inf)]
    else:
        disc = qb * qb - 4 * qa * qc
        if disc < 0:
            parts = [] if qa > 0 else [(-inf, inf)]
        else:
            r1, r2 = sorted(((-qb - np.sqrt(disc)) / (2 * qa), (-qb + np.sqrt(disc)) / (2 * qa)))
            parts = [(r1, r2)] if qa > 0 else [(-inf, r1), (r2, inf)]
    if nonneg:
        parts = [(max(lo, 0.0), hi) for lo, hi in parts if hi >= 0]
    if not parts:
        return inf, inf
    lo, hi = min(p[0] for p in parts), max(p[1] for p in parts)
    if lo == -inf:
        return float("nan"), float("nan")
    return float(lo), float(hi)


SIGN_MIN_N = 6   # the fewest pairs with a sign interval at LEVEL (:func:`sign_rank` is 0 below)


@functools.lru_cache(maxsize=256)
def sign_rank(n: int) -> int:
    """The rank k of the sign interval at ``n`` pairs: the largest k ≥ 1 with
    2 · P(Binomial(n, ½) ≤ k − 1) ≤ 1 − :data:`LEVEL`, or 0 when none exists (n < 6 at 95 %).

    Exact, in integers: P(Binomial(n, ½) ≤ j) = Σ_{i ≤ j} C(n, i) / 2ⁿ, and :data:`LEVEL` as the
    fraction it is written as, so no rounding can move a rank across the boundary (scipy's
    ``binom.cdf`` is within an ulp of it; importing scipy.stats for it cost a site build 3 s)."""
    alpha = 1 - Fraction(str(LEVEL))
    k, below = 0, 0                       # below: Σ_{i < k+1} C(n, i), the count at k
    while k + 1 <= n // 2:
        below += math.comb(n, k)
        if 2 * below > alpha * 2 ** n:
            break
        k += 1
    return k


def sign_interval(ratios) -> tuple[float, float]:
    """The distribution-free :data:`LEVEL` interval of the median of per-pair ratios: the k-th
    smallest and the k-th largest ratio, k = :func:`sign_rank` (the interval that inverts the
    sign test; Conover, *Practical Nonparametric Statistics*, 3rd ed., Wiley 1999, §3.2, the
    confidence interval for a quantile). Its coverage is at least :data:`LEVEL` whatever the
    distribution of the ratios, skewed, bounded below or discrete (counts), at every n ≥ 6; below
    6 pairs no such interval reaches 95 %.

    ``ratios``: array of shape ``(..., n)`` (the leading axes are draws, as in
    :func:`log_t_interval`). Returns ``(low, high)`` arrays of the leading shape (floats for a 1-D
    input), NaN where n < 6.
    """
    r = np.sort(np.asarray(ratios, dtype=float), axis=-1)
    n = r.shape[-1]
    k = sign_rank(n)
    if k == 0:
        nan = np.full(r.shape[:-1], np.nan)
        return (float(nan), float(nan)) if r.ndim == 1 else (nan, nan)
    lo, hi = r[..., k - 1], r[..., n - k]
    return (float(lo), float(hi)) if r.ndim == 1 else (lo, hi)


def _ratio(x: float, y: float) -> float:
    """x ÷ y, infinite for a positive x over 0, NaN for anything else over 0."""
    return float(x / y) if y != 0 else (float("inf") if x > 0 else float("nan"))


@functools.lru_cache(maxsize=4096)
def interval_of(a: tuple, b: tuple, statistic: str, paired: bool, interval: str = "t") -> tuple[float, float, float, str]:
    """(estimate, low, high, method) of a ÷ b (module docstring, "The effect and its interval"):
    three floats (``low``/``high`` NaN when no interval exists, infinite when it is open above)
    and the method's description. ``a`` and ``b`` are the two sides' samples as tuples of floats
    (equal lengths when ``paired``; tuples, because the result is cached: ``lru_cache``, cleared
    with ``interval_of.cache_clear()``); ``statistic`` "median" or "mean"; ``interval`` "t" (the
    default rules) or "sign" (paired medians only): :func:`sign_interval`. :func:`ratio_interval`
    is the entry point for two :class:`Side` objects.

    Raises:
        ClaimError: ``interval="sign"`` with a pair that is 0 ÷ 0 (no ratio).
    """
    f = _stat(statistic)
    xa, xb = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if interval == "sign":
        with np.errstate(all="ignore"):
            ratios = xa / xb
        if np.isnan(ratios).any():
            raise ClaimError(f"pair {int(np.flatnonzero(np.isnan(ratios))[0]) + 1} is 0 ÷ 0: it has no ratio")
        est, n, k = float(np.median(ratios)), len(ratios), sign_rank(len(ratios))
        lo, hi = sign_interval(ratios)
        if np.isnan(lo):
            return est, lo, hi, f"too few pairs for a sign interval: {n} (it needs at least {SIGN_MIN_N})"
        return est, min(lo, est), max(hi, est), f"sign interval of the median of paired ratios (ranks {k} and {n + 1 - k})"
    if paired:
        with np.errstate(all="ignore"):
            ratios = xa / xb
        est = float(f(ratios))
        constant = np.ptp(ratios) == 0 if np.isfinite(ratios).all() else np.ptp(xa) == 0 and np.ptp(xb) == 0
    else:
        est = _ratio(f(xa), f(xb))
        constant = np.ptp(xa) == 0 and np.ptp(xb) == 0
    if constant:
        return est, est, est, "no spread: every sample of a side is equal, so the values decide"
    if statistic != "mean" and (xa > 0).all() and (xb > 0).all():
        e, lo, hi = log_t_interval(xa, xb, paired, statistic)
        how = ("paired t interval on log ratios" if paired else
               "Welch t interval on log ratios")
        return float(e), float(lo), float(hi), how
    if not xa.any() and (xb > 0).all():
        return 0.0, 0.0, 0.0, "exact: a is 0 in every sample and b above 0 in every one, so the ratio is 0"
    if not xb.any() and (xa > 0).all():
        inf = float("inf")
        return inf, inf, inf, "exact: b is 0 in every sample and a above 0 in every one, so the ratio is infinite"
    lo, hi = fieller_interval(xa, xb, paired)
    mest = _ratio(float(xa.mean()), float(xb.mean()))
    how = ("Fieller interval, ratio of means" if statistic == "mean" else
           "Fieller interval, ratio of means (a side has samples ≤ 0)")
    if np.isnan(lo):
        return mest, lo, hi, "no interval: neither side's mean is surely away from 0 (Fieller)"
    if lo == float("inf"):
        return mest, lo, hi, "ratio infinite: b is 0 in every sample and a surely is not (Fieller)"
    return mest, min(lo, mest), max(hi, mest), how


def span_text(e: dict, fmt=None, fmt_high=None) -> str:
    """"low–high" of an effect's interval (``e`` from :func:`ratio_interval` or a result's
    ``effect``), each end through ``fmt`` (default 4 significant digits; the high end through
    ``fmt_high`` when given); "low–∞" when the interval has no upper bound (``high`` infinite,
    or ``null`` in a result)."""
    fmt = fmt or _fmt
    hi = e["high"]
    return f"{fmt(e['low'])}–{'∞' if hi is None or hi == float('inf') else (fmt_high or fmt)(hi)}"


def ratio_interval(a: Side, b: Side, paired: bool = False, interval: str = "t") -> dict:
    """The effect a ÷ b of two sides with its :data:`LEVEL` interval (module docstring):
    ``{statistic, estimate, low, high, level, n_a, n_b, method}`` (``low``/``high`` NaN when no
    interval exists; ``high`` infinite when the interval is open above; both infinite when the
    ratio is). ``paired``: the estimate is the median (or mean) of the per-pair ratios a_i ÷ b_i.
    ``interval``: "t" (the default rules) or "sign" (:func:`sign_interval`; paired medians only).

    Raises:
        ClaimError: ``paired`` with sides of different sizes; "sign" unpaired or on means, or
        with a pair that is 0 ÷ 0.
    """
    if interval == "sign" and (not paired or a.statistic != "median"):
        raise ClaimError("a sign interval is for the median of paired ratios (paired = true, statistic median)")
    name = f"ratio of {a.statistic}s"
    if paired:
        if a.n != b.n:
            raise ClaimError(f"paired sides need as many samples each: {a.label} has {a.n}, {b.label} {b.n} "
                             "(a repetition is missing on one side)")
        name = f"{a.statistic} of paired ratios"
    est, lo, hi, method = interval_of(tuple(a.samples), tuple(b.samples), a.statistic, paired, interval)
    if method.startswith(("Fieller", "no interval", "ratio infinite")):
        name = "ratio of means"
    return {"statistic": name, "estimate": est, "low": lo, "high": hi, "level": LEVEL,
            "n_a": a.n, "n_b": b.n, "method": method}


def side_flags(label: str, s: Side) -> list[str]:
    """Warnings about one side's samples, in run order (empty when none applies; n ≥ 6 only):

    - drift: the first third's and the last third's ranges do not overlap and their medians
      differ by more than 5 % (the host changed during the run, or the case warms up);
    - two modes: sorted, the samples have one gap wider than half their whole range with at
      least two samples on each side (a bimodal side: its median depends on how many samples
      fell in each mode).
    """
    xs, out = s.samples, []
    if len(xs) < 6 or s.count > 1:
        return out
    k = len(xs) // 3
    first, last = xs[:k], xs[-k:]
    apart = max(first) < min(last) or max(last) < min(first)
    if apart and abs(statistics.median(first) - statistics.median(last)) > 0.05 * abs(statistics.median(xs)):
        out.append(f"{label}: drift (first third {_fmt(statistics.median(first))}, "
                   f"last third {_fmt(statistics.median(last))} {s.unit})")
    ys = sorted(xs)
    span = ys[-1] - ys[0]
    gaps = [(ys[i + 1] - ys[i], i) for i in range(1, len(ys) - 2)]
    if span > 0 and gaps:
        g, i = max(gaps)
        if g > span / 2:
            out.append(f"{label}: two modes ({i + 1} samples up to {_fmt(ys[i])}, "
                       f"{len(ys) - i - 1} from {_fmt(ys[i + 1])} {s.unit})")
    return out


def _verdict(claim: dict, verdict: str, evidence: str, *, reason: str | None = None, effect: Effect | None = None,
             flags: list[str] | None = None, emulated_machine: bool = False) -> Verdict:
    v = {"id": claim["id"], "verdict": verdict, "evidence": evidence}
    if "role" in claim:
        v["role"] = claim["role"]
    if verdict not in ("holds", "fails"):
        v["reason"] = reason or evidence
    if effect is not None:
        v["effect"] = {k: (None if isinstance(x, float) and not np.isfinite(x) else x) for k, x in effect.items()}
    if flags:
        v["flags"] = flags
    if emulated_machine:
        v["emulated"] = True
    return v


def _few(*sides: tuple[str, Side]) -> str | None:
    few = [f"{name} has n={s.n}" for name, s in sides if s.n < MIN_SAMPLES]
    return f"fewer than {MIN_SAMPLES} samples ({'; '.join(few)})" if few else None


def _ci_text(e: Effect) -> str:
    if e["low"] is None or not np.isfinite(e["low"]):
        return f"{e['statistic']} {_fmt(e['estimate'])} ({e['method']})"
    return f"{e['statistic']} {_fmt(e['estimate'])}, {round(e['level'] * 100)}% interval {span_text(e)}"


def _decide(lo: float, hi: float, ok_all, bad_all) -> str:
    if np.isnan(lo) or np.isnan(hi):
        return "inconclusive"
    if ok_all(lo, hi):
        return "holds"
    if bad_all(lo, hi):
        return "fails"
    return "inconclusive"


def evaluate_one(claim: dict, result: Result) -> Verdict:
    """Evaluate one claim on one result (rules in the module docstring).

    Returns ``{"id", "verdict", "evidence", "role"?, "reason"?, "effect"?, "flags"?,
    "emulated"?}``; verdict one of :data:`VERDICTS`.
    """
    lacking = _host_gate(claim, result) or _run_gate(claim, result)
    if lacking:
        return lacking
    kind = claim["kind"]
    if kind == "step":
        return _step(claim, result)
    if kind in ("compare", "within"):
        return _pair(claim, result)
    return _increasing(claim, result)


def _host_gate(claim: dict, result: Result) -> Verdict | None:
    """The not-applicable verdict when the result's host lacks what ``claim["requires"]``
    names (keys of the host provenance, :mod:`labkit.run.probe`), else None."""
    host = result.get("host") or {}
    lacking = [f"{k} = {json.dumps(host.get(k))}" for k, want in (claim.get("requires") or {}).items()
               if host.get(k) != want]
    if not lacking:
        return None
    need = ", ".join(f"{k} = {json.dumps(v)}" for k, v in claim["requires"].items())
    why = f"needs a host with {need}; this host has {', '.join(lacking)}"
    return _verdict(claim, "not applicable", why, reason=why)


def _run_gate(claim: dict, result: Result) -> Verdict | None:
    """The not-applicable verdict when ``result`` is a quick run's (``run.quick``) and either
    ``claim["full_run"]`` is true or the run left out ``claim["group"]`` (``run.left_out``,
    labs/<lab>/lab.toml ``quick_leaves_out``), else None."""
    run = result.get("run") or {}
    if not run.get("quick"):
        return None
    gone = (run.get("left_out") or {}).get(claim.get("group", ""))
    if gone:
        why = f"needs a full run: a quick run leaves out group {claim['group']} ({gone})"
        return _verdict(claim, "not applicable", why, reason=why)
    if not claim.get("full_run"):
        return None
    why = "needs a full run (a quick run's jobs are too short for what it reads)"
    return _verdict(claim, "not applicable", why, reason=why)


def _emulation_gate(claim: dict, result: Result, ms: list[Measurement]) -> tuple[bool, Verdict | None]:
    """(measured on an emulated CPU?, the not-applicable verdict or None)."""
    emu = emulated(result, ms)
    if emu and is_timing(claim) and not claim.get("emulated_ok"):
        return emu, _verdict(claim, "not applicable", EMULATED_EVIDENCE, reason=EMULATED_EVIDENCE)
    return emu, None


def _claim_step(claim: dict, result: Result) -> tuple[str, dict | None]:
    """(how the page names the claim's step, the step or None when it did not run: then its
    name, or its case as ``k=v, ...``): the step named ``step``, or the one step whose case holds
    every key/value of ``where`` (:func:`labkit.model.find_step`).

    Raises:
        ValueError: ``where`` picks more than one step (the claim must add case keys).
    """
    if "step" in claim:
        return claim["step"], model.find_step(result, name=claim["step"])
    try:
        step = model.find_step(result, where=claim["where"])
    except ValueError as exc:
        raise ValueError(f"claim {claim['id']}: {exc}") from None
    return (step["name"] if step else model.case_text(claim["where"])), step


def _step(claim: dict, result: Result) -> Verdict:
    emu, na = _emulation_gate(claim, result, [])
    if na:
        return na
    name, step = _claim_step(claim, result)
    if step is None:
        return _verdict(claim, "untested", f"step {name} did not run" if "step" in claim else f"no step with case {name} ran")
    if step["status"] == "skipped":
        return _verdict(claim, "untested", f"step {name} skipped: {step['reason']}")
    exp = "failed as designed" if step.get("expect") == "failure" else "succeeded"
    if claim.get("stdout_empty") and step["status"] == "ok":
        if step.get("stdout_bytes") is None:
            return _verdict(claim, "untested", f"step {name}: its standard output was not kept")
        if step["stdout_bytes"] != 0:
            return _verdict(claim, "fails", f"step {name} {exp} but printed {step['stdout_bytes']} bytes on stdout")
        exp += ", printed nothing on stdout"
    if step["status"] == "ok":
        return _verdict(claim, "holds", f"step {name} {exp} (exit {step.get('exit_code')})", emulated_machine=emu)
    return _verdict(claim, "fails", f"step {name}: {step['reason']}", emulated_machine=emu)


def _pair(claim: dict, result: Result) -> Verdict:
    stat = claim.get("statistic", "median")
    emu, na = _emulation_gate(claim, result, select(result, claim["metric"], claim["a"])
                              + select(result, claim["metric"], claim["b"]))
    if na:
        return na
    a, ea = side(result, claim["metric"], claim["a"], stat)
    b, eb = side(result, claim["metric"], claim["b"], stat)
    if a is None or b is None:
        return _verdict(claim, "untested", "; ".join(e for e in (ea, eb) if e))
    f = float(claim.get("factor", 1.0))
    flags = side_flags("a", a) + side_flags("b", b)
    if claim["kind"] == "within":
        a, b = a.scaled(float(claim.get("scale_a", 1.0))), b.scaled(float(claim.get("scale_b", 1.0)))
    sides = f"a = {a.describe()}; b = {b.describe()}"
    few = _few(("a", a), ("b", b))
    if few:
        return _verdict(claim, "inconclusive", f"{sides}; {few}", reason=few, flags=flags, emulated_machine=emu)
    try:
        effect = ratio_interval(a, b, paired=bool(claim.get("paired")), interval=claim.get("interval", "t"))
    except ClaimError as exc:   # a paired design that lost a repetition, or a zero to divide by
        return _verdict(claim, "inconclusive", f"{sides}; {exc}", reason=str(exc), flags=flags, emulated_machine=emu)
    lo, hi = effect["low"], effect["high"]
    if claim["kind"] == "compare":
        rel = claim["relation"]
        needs, ok_all, bad_all = {
            "greater": (f"> {f:g}", lambda lo, hi: lo > f, lambda lo, hi: hi <= f),
            "less": (f"< {_fmt(1 / f)}", lambda lo, hi: hi < 1 / f, lambda lo, hi: lo >= 1 / f),
            "not_less": (f"≥ {_fmt(1 / f)}", lambda lo, hi: lo >= 1 / f, lambda lo, hi: hi < 1 / f),
        }[rel]
    else:
        needs = f"between {_fmt(1 / f)} and {f:g}"
        ok_all = lambda lo, hi: lo >= 1 / f and hi <= f   # noqa: E731
        bad_all = lambda lo, hi: hi < 1 / f or lo > f     # noqa: E731
    effect = {**effect, "factor": f, "needs": needs}
    verdict = _decide(lo, hi, ok_all, bad_all)
    evidence = f"{_ci_text(effect)}, needs {needs}; {sides}"
    reason = None
    if verdict == "inconclusive":
        reason = (f"the {round(LEVEL * 100)}% interval {span_text(effect)} straddles the threshold ({needs})"
                  if np.isfinite(lo) else effect["method"])
    return _verdict(claim, verdict, evidence, reason=reason, effect=effect, flags=flags, emulated_machine=emu)


def _increasing(claim: dict, result: Result) -> Verdict:
    metric, over, stat = claim["metric"], claim["over"], claim.get("statistic", "median")
    ms = [m for m in select(result, metric, claim["where"])
          if isinstance(m["case"].get(over), (int, float)) and not isinstance(m["case"].get(over), bool)]
    emu, na = _emulation_gate(claim, result, ms)
    if na:
        return na
    groups: dict[float, list[dict]] = {}
    for m in ms:
        groups.setdefault(m["case"][over], []).append(m)
    if len(groups) < 2:
        return _verdict(claim, "untested", f"fewer than two {over} values for {metric} where {_describe(claim['where'])}")
    xs = sorted(groups)
    units = sorted({m["unit"] for m in ms})
    if len(units) > 1:
        raise ClaimError(f"{metric} where {_describe(claim['where'])} mixes units {units}")
    pts = [Side(f"{over}={x:g}", [float(s) for m in groups[x] for s in m["samples"]], units[0], len(groups[x]), stat)
           for x in xs]
    tol = float(claim.get("tolerance", 0.1))
    f = float(claim.get("factor", 1.0))
    first, last = pts[0], pts[-1]
    series = ", ".join(f"{x:g}→{_fmt(p.value)}" for x, p in zip(xs, pts))
    flags = [fl for p in pts for fl in side_flags(p.label, p)]
    few = _few(*((p.label, p) for p in pts))
    head = f"{metric} ({units[0]}, {stat} per point) by {over}: {series}"
    if few:
        return _verdict(claim, "inconclusive", f"{head}; {few}", reason=few, flags=flags, emulated_machine=emu)
    effect = {**ratio_interval(last, first), "factor": f, "needs": f"> {f:g}"}
    drops, robust, unsure = [], [], []
    for k, p in enumerate(pts[1:], start=1):
        top = max(pts[:k], key=lambda q: q.value)
        if p.value < top.value * (1 - tol):
            d = ratio_interval(p, top)
            drops.append(f"{p.label}: {_fmt(p.value)} below {top.label}'s {_fmt(top.value)}")
            (robust if np.isfinite(d["high"]) and d["high"] < 1 - tol else unsure).append(p.label)
    lo, hi = effect["low"], effect["high"]
    grows = np.isfinite(lo) and lo > f
    flat = np.isfinite(hi) and hi <= f
    evidence = f"{head}; last/first: {_ci_text(effect)}, needs > {f:g}"
    if drops:
        evidence += "; drops beyond tolerance: " + "; ".join(drops)
    if robust or flat:
        return _verdict(claim, "fails", evidence, effect=effect, flags=flags, emulated_machine=emu)
    if grows and not drops:
        return _verdict(claim, "holds", evidence, effect=effect, flags=flags, emulated_machine=emu)
    reason = (f"the drop at {', '.join(unsure)} is within noise" if unsure else
              f"the {round(LEVEL * 100)}% interval of last/first, {span_text(effect)}, straddles {f:g}"
              if np.isfinite(lo) else effect["method"])
    return _verdict(claim, "inconclusive", evidence, reason=reason, effect=effect, flags=flags, emulated_machine=emu)


_DIGESTS: "OrderedDict[int, tuple[dict, str]]" = OrderedDict()  # id(result) -> (the result, its digest)
_DIGESTS_KEPT = 64   # results remembered: a site build holds a dozen; a serve session rebuilds often


def _result_digest(result: Result) -> str:
    """sha256 of a result's canonical JSON, computed once per result object (the last
    :data:`_DIGESTS_KEPT` objects are remembered, each kept alive so that its id stays its own)."""
    hit = _DIGESTS.get(id(result))
    if hit is not None and hit[0] is result:
        _DIGESTS.move_to_end(id(result))
        return hit[1]
    digest = hashlib.sha256(json.dumps(result, sort_keys=True, default=str).encode()).hexdigest()
    _DIGESTS[id(result)] = (result, digest)
    while len(_DIGESTS) > _DIGESTS_KEPT:
        _DIGESTS.popitem(last=False)
    return digest


@functools.lru_cache(maxsize=1)
def _engine_digest() -> str:
    """sha256 of what decides a verdict besides the claim and the result: this module's source
    and SciPy's version (its t quantiles bound the interval)."""
    try:
        scipy_version = importlib.metadata.version("scipy")
    except importlib.metadata.PackageNotFoundError:
        scipy_version = "none"
    return hashlib.sha256(Path(__file__).read_bytes() + scipy_version.encode()).hexdigest()


def evaluate_cached(claim: dict, result: Result) -> Verdict:
    """:func:`evaluate_one`, remembered on disk (``.cache/verdicts``, :func:`labkit.model.cache_dir`)
    under the hash of the claim, the result and the engine (:func:`_engine_digest`), so that a
    site build does not evaluate the same claim again. Used by the pages; the lab's own record
    and ``labkit check`` evaluate afresh."""
    return model.remembered("verdicts", [json.dumps(claim, sort_keys=True, default=str), _result_digest(result),
                                          _engine_digest()], lambda: evaluate_one(claim, result))


def ratio_interval_cached(a: Side, b: Side) -> dict:
    """:func:`ratio_interval` (unpaired, the default rules) of ``a`` ÷ ``b``, remembered on disk
    (``.cache/ratios``, :func:`labkit.model.cache_dir`) under the hash of both sides' samples and
    statistics and of the engine (:func:`_engine_digest`), as :func:`evaluate_cached` remembers
    verdicts. Used by the pages ("Original vs here"): a warm build neither recomputes these
    intervals nor imports SciPy for them."""
    spec = json.dumps([a.samples, a.statistic, b.samples, b.statistic])
    return model.remembered("ratios", [spec, _engine_digest()], lambda: ratio_interval(a, b))


def evaluate(claims: list[dict], result: Result) -> list[Verdict]:
    """Evaluate every claim on ``result`` (a result dict); order kept."""
    return [evaluate_one(c, result) for c in claims]
