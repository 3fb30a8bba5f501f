"""The claims engine's intervals are 95 % at the n they decide on (labkit/stats/calibration.py).

Simulated sides with a true ratio of 1 go through :func:`labkit.stats.claims.log_t_interval`, the
function that bounds every ratio of positive samples; the share of intervals that exclude 1
must stay within :data:`labkit.stats.calibration.LIMIT` for every design the labs use, under
lognormal noise and with an occasional disturbed repetition. Simulated, not measured: no
measured value is typed here."""

from __future__ import annotations

import numpy as np
import pytest

from labkit.stats import calibration, claims
from labkit import model


@pytest.fixture(scope="module")
def rows() -> list[dict]:
    return calibration.table()


def test_the_table_covers_every_design_and_noise_model_with_enough_draws(rows):
    assert calibration.DRAWS >= 2000
    assert {(r["n_a"], r["n_b"], r["paired"], r["noise"]) for r in rows} == {
        (na, nb, p, noise) for na, nb, p in calibration.CELLS for noise in calibration.NOISES}
    assert {n for n, _, p in calibration.CELLS if p} >= {3, 5, 8, 10, 20}
    assert {n for n, _, p in calibration.CELLS if not p} >= {3, 5, 8, 10, 20}


@pytest.mark.parametrize("paired", [False, True], ids=["unpaired", "paired"])
@pytest.mark.parametrize("noise", calibration.NOISES)
def test_false_decisions_stay_at_the_nominal_rate(rows, paired, noise):
    bad = [(r["n_a"], r["n_b"], f"{r['false']:.2%}") for r in rows
           if r["paired"] == paired and r["noise"] == noise and r["false"] > calibration.LIMIT]
    assert not bad, f"false-decision rate above {calibration.LIMIT:.0%}: {bad}"


def test_a_real_effect_is_found_at_the_sizes_full_runs_use(rows):
    """Power at a 1.3x effect against a 1.1x factor: full runs (n >= 10) find it under
    lognormal noise nearly always; n = 3 paired is the weakest design (reported, not hidden)."""
    power = {(r["n_a"], r["paired"], r["noise"]): r["power"] for r in rows if r["n_a"] == r["n_b"]}
    assert all(power[(n, p, "lognormal")] > 0.9 for n in (10, 16, 20) for p in (False, True))
    assert power[(3, True, "lognormal")] < power[(10, True, "lognormal")]


def test_the_calibration_fails_for_an_interval_that_is_too_narrow(monkeypatch):
    """The test can fail: with the normal quantile 1.96 in place of Student's t (the narrowness
    of an uncalibrated small-n interval), n = 3 decides wrongly far more often than 6 %."""
    monkeypatch.setattr(claims, "t975", lambda df: np.full(np.shape(df), 1.959964))
    for paired in (False, True):
        assert calibration.cell(3, 3, paired, "lognormal", draws=2000)["false"] > 0.1


def test_unknown_noise_model_is_refused():
    with pytest.raises(ValueError, match=r"unknown noise model 'gaussian' \(one of lognormal, disturbed\)"):
        calibration.draw_sides(np.random.default_rng(0), 2, 3, 3, "gaussian")
    with pytest.raises(ValueError, match=r"unknown noise model 'gaussian' \(one of bounded, counts\)"):
        calibration.sign_cell(6, "gaussian", draws=10)


@pytest.mark.parametrize("paired", [False, True], ids=["unpaired", "paired"])
def test_a_verdict_decides_on_the_calibrated_interval(paired, monkeypatch):
    """Through the engine: evaluate_one on simulated results gives, draw for draw, the verdict
    that the vectorised interval of the calibration implies (holds when low > 1, fails when
    high <= 1, else inconclusive)."""
    monkeypatch.setenv("PCB_BUILD_CACHE", "off")
    rng = np.random.default_rng(7)
    a, b = calibration.draw_sides(rng, 150, 3, 3, "lognormal")
    _, lo, hi = claims.log_t_interval(a, b, paired)
    c = {"id": "t", "statement": "t", "source": "s", "kind": "compare", "metric": "x", "role": "ours", "a": {"side": "a"},
         "b": {"side": "b"}, "relation": "greater", "factor": 1.0, "paired": paired}
    host = {"emulation": None}
    seen = set()
    for i in range(a.shape[0]):
        r = {"host": host, "steps": [], "measurements": [
            model.measurement("x", "s", {"side": "a"}, list(a[i])),
            model.measurement("x", "s", {"side": "b"}, list(b[i]))]}
        v = claims.evaluate_one(c, r)
        want = "holds" if lo[i] > 1 else "fails" if hi[i] <= 1 else "inconclusive"
        assert v["verdict"] == want, (i, v["evidence"])
        assert v["effect"]["method"].startswith("paired t" if paired else "Welch t")
        seen.add(want)
    assert seen == {"holds", "fails", "inconclusive"}


def test_cli_prints_the_table(capsys):
    from labkit import cli
    assert cli.main(["calibrate", "--draws", "2000"]) in (0, 1)
    out = capsys.readouterr().out
    assert "| paired | 3 | 3 |" in out and "worst false-decision rate" in out


def test_design_md_carries_both_tables(rows):
    """DESIGN.md's "Calibration" shows the tables this code computes, not an older run's."""
    from conftest import ROOT
    design = (ROOT / "DESIGN.md").read_text()
    assert calibration.markdown(rows) in design
    assert calibration.sign_markdown(calibration.sign_table()) in design


@pytest.mark.parametrize("worst, code", [(calibration.LIMIT, 0), (calibration.LIMIT + 0.001, 1)])
def test_calibrate_exits_1_only_past_the_limit(monkeypatch, capsys, worst, code):
    """`labkit calibrate` fails a CI step exactly when a false-decision rate of either table is
    above the limit (at the limit it passes)."""
    row = {"n_a": 3, "n_b": 3, "paired": True, "draws": 10, "false": 0.0, "power": 1.0}
    monkeypatch.setattr(calibration, "table", lambda draws: [dict(row, noise=n) for n in calibration.NOISES])
    monkeypatch.setattr(calibration, "sign_table", lambda draws: [
        {"n": 6, "noise": "bounded", "draws": 10, "false": worst}, {"n": 6, "noise": "counts", "draws": 10, "false": 0.0}])
    assert calibration.main(10) == code
    assert f"worst false-decision rate {worst:.1%}" in capsys.readouterr().out
