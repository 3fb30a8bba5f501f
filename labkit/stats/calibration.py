"""Calibration of the claims engine's intervals: how often a verdict decides wrongly.

Simulated results with two sides of the same true median (a true ratio of 1) go through the
very function that bounds every ratio of positive samples (:func:`labkit.stats.claims.log_t_interval`,
vectorised over draws: the leading axis of its arrays). A *false decision* is an interval that
excludes the true ratio: a claim whose threshold sits at the truth would then hold or fail
wrongly. At the nominal level (:data:`labkit.stats.claims.LEVEL`, 95 %) that must happen in at most
5 % of draws, at every n the labs decide on.

Two noise models, both multiplicative as benchmark noise is (a run is slower or faster by a
factor, not by a fixed amount):

- ``lognormal``: every sample is ``exp(N(0, sigma))`` times the true value;
- ``disturbed``: the same, and each repetition independently, with probability
  :data:`DISTURB_P`, is slowed by :data:`DISTURB_FACTOR` (another process woke, a cache was cold):
  the model of the trust issue, "one repetition in five disturbed (x1.4)".

The power beside each false-decision rate is the share of draws in which a ``compare greater``
claim with ``factor = 1.1`` holds when a is truly 1.3 times b: how often a real 30 % effect is
shown past a 10 % threshold at that n.

The sign interval (:func:`labkit.stats.claims.sign_interval`, ``interval = "sign"``) makes no
noise model of its own; it is simulated on per-pair ratios of two shapes the log-t model does
not fit (:func:`sign_cell`): ``bounded``, a hard lower bound with a long tail (1 plus an
exponential: events per request, never below one), and ``counts``, whole multiples with ties
(a geometric number of pieces per request). A false decision there is an interval that
excludes the true median.

``labkit calibrate`` prints the tables (:func:`main`); DESIGN.md ("Calibration") carries it and
``tests/test_calibration.py`` fails when a false-decision rate exceeds :data:`LIMIT`.
"""

from __future__ import annotations

import numpy as np

from . import claims

DISTURB_P = 0.2          # share of repetitions disturbed in the ``disturbed`` model
DISTURB_FACTOR = 1.4     # how much a disturbed repetition is slowed
SIGMA = 0.05             # log-scale standard deviation of the noise (about 5 % run to run)
POWER_EFFECT = 1.3       # the true ratio of the power column
POWER_FACTOR = 1.1       # the claim's factor in the power column
LIMIT = 0.06             # the test's bound on a false-decision rate (nominal 0.05, plus draw noise)
DRAWS = 8000             # draws per cell (the sampling error of a 5 % rate is then 0.24 %)
SEED = 2026

# (n_a, n_b, paired): every design the labs decide on (quick and full runs, hosts and guests)
CELLS = tuple([(n, n, False) for n in (3, 4, 5, 6, 7, 8, 10, 16, 20)]
              + [(5, 10, False), (7, 10, False)]
              + [(n, n, True) for n in (3, 4, 5, 6, 7, 8, 10, 16, 20)])
NOISES = ("lognormal", "disturbed")
SIGN_NS = (6, 7, 8, 9, 10, 12, 16, 20)        # pairs: from the smallest n at which a sign interval exists
SIGN_NOISES = ("bounded", "counts")
GEOMETRIC_P = 0.3        # ``counts``: pieces per request ~ Geometric(0.3) on 1, 2, ...; its median is 2


def draw_sides(rng: np.random.Generator, draws: int, n_a: int, n_b: int, noise: str, ratio: float = 1.0,
               sigma: float = SIGMA) -> tuple[np.ndarray, np.ndarray]:
    """Two simulated sides, arrays of shape ``(draws, n_a)`` and ``(draws, n_b)`` of positive
    samples around 1 (b) and ``ratio`` (a), with the noise model ``noise`` (module docstring).

    Raises:
        ValueError: an unknown noise model.
    """
    if noise not in NOISES:
        raise ValueError(f"unknown noise model {noise!r} (one of {', '.join(NOISES)})")
    a = ratio * np.exp(rng.normal(0.0, sigma, (draws, n_a)))
    b = np.exp(rng.normal(0.0, sigma, (draws, n_b)))
    if noise == "disturbed":
        a = a * np.where(rng.random(a.shape) < DISTURB_P, DISTURB_FACTOR, 1.0)
        b = b * np.where(rng.random(b.shape) < DISTURB_P, DISTURB_FACTOR, 1.0)
    return a, b


def cell(n_a: int, n_b: int, paired: bool, noise: str, draws: int = DRAWS, seed: int = SEED) -> dict:
    """One row of the table: ``{n_a, n_b, paired, noise, draws, false, power}``, where ``false``
    is the share of equal-sides draws whose interval excludes 1 and ``power`` the share of
    draws with a true ratio :data:`POWER_EFFECT` whose interval lies wholly above
    :data:`POWER_FACTOR` (both fractions in 0..1)."""
    rng = np.random.default_rng([seed, n_a, n_b, int(paired), NOISES.index(noise)])
    a, b = draw_sides(rng, draws, n_a, n_b, noise)
    _, lo, hi = claims.log_t_interval(a, b, paired)
    false = float(np.mean((lo > 1.0) | (hi < 1.0)))
    a, b = draw_sides(rng, draws, n_a, n_b, noise, ratio=POWER_EFFECT)
    _, lo, _ = claims.log_t_interval(a, b, paired)
    return {"n_a": n_a, "n_b": n_b, "paired": paired, "noise": noise, "draws": draws,
            "false": false, "power": float(np.mean(lo > POWER_FACTOR))}


def sign_cell(n: int, noise: str, draws: int = DRAWS, seed: int = SEED) -> dict:
    """One row of the sign interval's table: ``{n, noise, draws, false}``, ``false`` the share
    of ``draws`` sets of ``n`` per-pair ratios whose sign interval excludes the true median
    (``bounded``: 1 + Exp(1), median 1 + ln 2; ``counts``: Geometric(:data:`GEOMETRIC_P`),
    median 2).

    Raises:
        ValueError: an unknown noise model.
    """
    rng = np.random.default_rng([seed, n, 100 + (SIGN_NOISES.index(noise) if noise in SIGN_NOISES else 99)])
    if noise == "bounded":
        ratios, median = 1.0 + rng.exponential(1.0, (draws, n)), 1.0 + np.log(2.0)
    elif noise == "counts":
        ratios = rng.geometric(GEOMETRIC_P, (draws, n)).astype(float)
        median = float(np.ceil(np.log(0.5) / np.log(1 - GEOMETRIC_P)))
    else:
        raise ValueError(f"unknown noise model {noise!r} (one of {', '.join(SIGN_NOISES)})")
    lo, hi = claims.sign_interval(ratios)
    return {"n": n, "noise": noise, "draws": draws, "false": float(np.mean((lo > median) | (hi < median)))}


def sign_table(draws: int = DRAWS, seed: int = SEED) -> list[dict]:
    """Every n of :data:`SIGN_NS` × :data:`SIGN_NOISES` (:func:`sign_cell`)."""
    return [sign_cell(n, noise, draws, seed) for n in SIGN_NS for noise in SIGN_NOISES]


def sign_markdown(rows: list[dict]) -> str:
    """The sign interval's table as Markdown: one line per n, false decisions per noise model."""
    out = ["| pairs | rank k | false, bounded | false, counts |", "|---|---|---|---|"]
    by = {}
    for r in rows:
        by.setdefault(r["n"], {})[r["noise"]] = r
    for n, cols in by.items():
        out.append(f"| {n} | {claims.sign_rank(n)} | {cols['bounded']['false']:.1%} | {cols['counts']['false']:.1%} |")
    return "\n".join(out)


def table(draws: int = DRAWS, seed: int = SEED) -> list[dict]:
    """Every cell of :data:`CELLS` × :data:`NOISES` (:func:`cell`), in that order."""
    return [cell(na, nb, p, noise, draws, seed) for na, nb, p in CELLS for noise in NOISES]


def markdown(rows: list[dict]) -> str:
    """The table as Markdown: one line per design, false decisions and power per noise model
    (percentages)."""
    out = ["| design | n a | n b | false, lognormal | false, disturbed | power, lognormal | power, disturbed |",
           "|---|---|---|---|---|---|---|"]
    by = {}
    for r in rows:
        by.setdefault((r["paired"], r["n_a"], r["n_b"]), {})[r["noise"]] = r
    for (paired, na, nb), cols in by.items():
        ln, di = cols["lognormal"], cols["disturbed"]
        out.append(f"| {'paired' if paired else 'unpaired'} | {na} | {nb} | {ln['false']:.1%} | {di['false']:.1%} "
                   f"| {ln['power']:.0%} | {di['power']:.0%} |")
    return "\n".join(out)


def main(draws: int = DRAWS) -> int:
    """``labkit calibrate``: print both tables for ``draws`` draws per cell; exit 1 when a
    false-decision rate exceeds :data:`LIMIT`."""
    rows = table(draws)
    print(f"claims engine calibration: {claims.LEVEL:.0%} intervals, {draws} draws per cell, "
          f"noise sigma {SIGMA} (log scale); disturbed: {DISTURB_P:.0%} of repetitions x{DISTURB_FACTOR}; "
          f"power: true ratio {POWER_EFFECT} against factor {POWER_FACTOR}")
    print(markdown(rows))
    signs = sign_table(draws)
    print(f"\nsign interval of the median of paired ratios ({draws} draws per cell):")
    print(sign_markdown(signs))
    worst = max(rows + signs, key=lambda r: r["false"])
    print(f"worst false-decision rate {worst['false']:.1%} (limit {LIMIT:.0%})")
    return 1 if worst["false"] > LIMIT else 0
