"""The verdict rules of labkit/stats/claims.py (a ratio and its bootstrap interval against the claim's
threshold) on small results built from a real one. Samples are the real samples of one committed
measurement, scaled, shifted or repeated; no measured value is typed here."""

from __future__ import annotations

import copy
import math

import pytest

from labkit import model
from labkit.stats import claims
import refhost

TCG = {"emulator": "qemu-system-aarch64", "accelerator": "tcg", "machine": "virt", "guest_cpu": "cortex-a72",
       "host_arch": "x86_64", "host_cpu": None, "host_label": None}


@pytest.fixture(scope="module")
def reference() -> dict:
    return model.load(sorted(refhost.RESULTS.glob("*.json"))[0])


@pytest.fixture(scope="module")
def real(reference) -> list[float]:
    """Five or more distinct positive real samples of one measurement, in run order (repeated
    from the first three distinct ones when the measurement has fewer)."""
    for m in reference["measurements"]:
        if m["n"] >= 3 and m["min"] > 0 and len(set(m["samples"])) == m["n"]:
            xs = list(m["samples"])
            while len(xs) < 5:
                xs = xs + xs
            return xs
    pytest.skip("no measurement with 3 distinct positive samples in the reference result")


def build(reference: dict, emulation=None, **sides: list[float]) -> dict:
    """The reference result with its measurements replaced by metric "x", one per side
    (case {"side": name}), and host.emulation set as given."""
    r = copy.deepcopy(reference)
    r["host"]["emulation"] = emulation
    r["measurements"] = [model.measurement("x", "u", {"side": k}, v) for k, v in sides.items()]
    model.validate(r, "built")
    return r


def claim(kind="compare", **kw) -> dict:
    c = {"id": "t", "statement": "t", "source": "s", "kind": kind, "metric": "x", "role": "ours"}
    if kind != "increasing":
        c.update(a={"side": "a"}, b={"side": "b"})
    c.update(kw)
    claims.check_spec(c, "test")
    return c


def verdict(c, r) -> str:
    return claims.evaluate_one(c, r)["verdict"]


def spread_of(xs: list[float]) -> float:
    """How far apart the samples are, as a ratio max/min (> 1 for distinct samples)."""
    return max(xs) / min(xs)


# ---- a clear effect decides, whatever its direction ----

def test_a_clear_effect_holds_and_its_reverse_fails(reference, real):
    k = spread_of(real) ** 2 * 3          # the sides' ranges far apart
    r = build(reference, a=[x * k for x in real], b=real)
    assert verdict(claim(relation="greater", factor=2), r) == "holds"
    assert verdict(claim(relation="less", factor=2), r) == "fails"
    assert verdict(claim(relation="not_less"), r) == "holds"
    out = claims.evaluate_one(claim(relation="greater", factor=2), r)
    e = out["effect"]
    assert e["low"] <= e["estimate"] <= e["high"] and e["low"] > 2
    assert (e["n_a"], e["n_b"], e["level"], e["factor"], e["needs"]) == (len(real), len(real), 0.95, 2.0, "> 2")
    assert e["method"] == "Welch t interval on log ratios" and out["role"] == "ours" and "reason" not in out


def test_one_disturbed_repetition_does_not_hide_a_large_effect(reference, real):
    """A 21x effect with one disturbed repetition of a: the min-max rule called any overlap
    inconclusive. With five repetitions a side, a repetition that lost two thirds of its value
    no longer hides the effect; with ten, not even one that fell all the way to b's level. (With
    five, that one still can: 3 of 5 bootstrap draws land on it 5.8 % of the time, more than the
    2.5 % an interval's tail allows.)"""
    k = spread_of(real) ** 2 * 21
    a = [x * k for x in real[:5]]
    a[2] = a[2] / 3
    assert verdict(claim(relation="greater", factor=5), build(reference, a=a, b=real[:5])) == "holds"
    ten_b = (real * 2)[:10]
    ten_a = [x * k for x in ten_b]
    ten_a[4] = ten_b[4]
    assert verdict(claim(relation="greater", factor=5), build(reference, a=ten_a, b=ten_b)) == "holds"
    five_a = [x * k for x in real[:5]]
    five_a[2] = real[2]
    assert verdict(claim(relation="greater", factor=5), build(reference, a=five_a, b=real[:5])) == "inconclusive"


def test_equal_sides_straddle_and_stay_inconclusive(reference, real):
    r = build(reference, a=real, b=list(reversed(real)))
    out = claims.evaluate_one(claim(relation="greater"), r)
    assert out["verdict"] == "inconclusive"
    assert out["reason"].startswith("the 95% interval ") and "straddles the threshold (> 1)" in out["reason"]
    assert verdict(claim("within", factor=spread_of(real) * 2), r) == "holds"


# ---- exactly on a threshold: samples without spread, values exactly 2x apart ----

def test_ratio_exactly_on_the_threshold(reference, real):
    x = real[0]
    r = build(reference, a=[x] * 3, b=[x * 2] * 3)
    assert verdict(claim(relation="less", factor=2), r) == "fails"     # a·2 == b is not "less"
    assert verdict(claim(relation="not_less", factor=2), r) == "holds"  # a·2 ≥ b
    assert verdict(claim(relation="less", factor=1.999), r) == "holds"
    assert verdict(claim("within", factor=2), r) == "holds"             # exactly 2 is within 2
    assert verdict(claim("within", factor=1.999), r) == "fails"
    e = claims.evaluate_one(claim(relation="less", factor=2), r)["effect"]
    assert e["low"] == e["high"] == e["estimate"] == 0.5 and e["method"].startswith("no spread")


# ---- a side of counts that are mostly 0: the ratio has no upper bound ----

def test_a_denominator_of_mostly_zeros_gives_an_interval_open_above(reference, real):
    """Per-slice sample counts outside a burst are mostly 0 (optane_kyber's heat map): no log
    exists, so the ratio of means gets Fieller's interval, which is open above while b's mean is
    not surely away from 0. Its low end decides a greater claim (holds when far past the factor,
    inconclusive when below it), and a result and every page show the upper end as none, "∞"."""
    from labkit.run import verdict_text as cli
    from labkit.site.macros import claim_tables
    b = [real[0] / 40, 0.0, 0.0, real[1] / 100, real[1] / 100]
    far = build(reference, a=[x * 1000 for x in real[:5]], b=b)
    out = claims.evaluate_one(claim(relation="greater", factor=4), far)
    e = out["effect"]
    assert out["verdict"] == "holds" and e["high"] is None and e["low"] > 4, out
    assert e["method"].startswith("Fieller") and e["statistic"] == "ratio of means"
    model.validate({**far, "claims": [out]}, "with the verdict")
    assert "–∞" in cli.verdict_line(out) and "–∞)" in claim_tables.interval_text(e)
    near = build(reference, a=[x / 1000 for x in b[:1]] + [real[0] / 400] * 4, b=b)
    low = claims.evaluate_one(claim(relation="greater", factor=4), near)
    assert low["verdict"] == "inconclusive" and "–∞ straddles" in low["reason"], low


# ---- too few samples ----

def test_fewer_than_three_samples_is_inconclusive(reference, real):
    k = spread_of(real) * 10
    r = build(reference, a=real[:2], b=[x * k for x in real[:3]])
    out = claims.evaluate_one(claim(relation="less"), r)
    assert out["verdict"] == "inconclusive" and out["reason"] == "fewer than 3 samples (a has n=2)"
    assert "effect" not in out
    r = build(reference, a=real[:3], b=[x * k for x in real[:3]])
    assert verdict(claim(relation="less"), r) == "holds"


def test_missing_side_is_untested(reference, real):
    r = build(reference, a=real)
    out = claims.evaluate_one(claim(relation="less"), r)
    assert out["verdict"] == "untested" and out["reason"] == "no x measurement for side=b"


# ---- within ----

def test_within_holds_fails_or_straddles(reference, real):
    r = build(reference, a=real, b=[x * 1.05 for x in real])
    assert verdict(claim("within", factor=spread_of(real) * 1.5), r) == "holds"
    far = build(reference, a=real, b=[x * spread_of(real) * 4 for x in real])
    assert verdict(claim("within", factor=2), far) == "fails"
    assert verdict(claim("within", factor=spread_of(real) * 4, scale_b=1 / (spread_of(real) * 4)), far) == "holds"


# ---- paired designs ----

def test_paired_ratio_uses_each_repetition_pair(reference, real):
    """b drifts along the run as much as a does: unpaired, the drift widens the interval; paired,
    every a_i ÷ b_i is the same 1.5 and the claim holds."""
    drift = [x * (1 + i) for i, x in enumerate(real)]
    r = build(reference, a=[x * 1.5 for x in drift], b=drift)
    assert verdict(claim(relation="greater", factor=1.2, paired=True), r) == "holds"
    assert verdict(claim(relation="greater", factor=1.2), r) == "inconclusive"
    e = claims.evaluate_one(claim(relation="greater", factor=1.2, paired=True), r)["effect"]
    assert e["statistic"] == "median of paired ratios" and math.isclose(e["estimate"], 1.5)
    uneven = build(reference, a=real, b=real[:-1])
    with pytest.raises(claims.ClaimError, match="paired sides need as many samples each"):
        claims.ratio_interval(claims.side(uneven, "x", {"side": "a"})[0], claims.side(uneven, "x", {"side": "b"})[0],
                              paired=True)
    lost = claims.evaluate_one(claim(relation="greater", paired=True), uneven)   # a repetition failed on one side
    assert lost["verdict"] == "inconclusive" and "a repetition is missing on one side" in lost["reason"]


# ---- increasing ----

def test_increasing_rules(reference, real):
    k = spread_of(real) * 3
    grow = build(reference, p1=real, p2=[x * k for x in real], p3=[x * k * k for x in real])
    for m, q in zip(grow["measurements"], (1, 2, 3)):
        m["case"] = {"side": "p", "q": q}
    c = claim("increasing", where={"side": "p"}, over="q")
    out = claims.evaluate_one(c, grow)
    assert out["verdict"] == "holds" and out["effect"]["low"] > 1
    for m in grow["measurements"]:
        m["case"]["q"] = 4 - m["case"]["q"]      # the same points, in reverse: it falls
    assert verdict(c, grow) == "fails"
    drop = build(reference, p1=real, p2=[x * k * k for x in real], p3=[x * k for x in real])
    for m, q in zip(drop["measurements"], (1, 2, 3)):
        m["case"] = {"side": "p", "q": q}
    assert verdict(c, drop) == "fails"          # p3 lies wholly below p2: a drop beyond noise


# ---- flags ----

def test_drift_and_two_modes_are_flagged(reference, real):
    base = sorted(real)[:3] * 2                     # six samples
    up = [x * (spread_of(real) * 4) ** (i // 2) for i, x in enumerate(base)]
    flags = claims.side_flags("a", claims.Side("s", up, "u", 1))
    assert any(f.startswith("a: drift") for f in flags)
    modes = [real[0], real[0] * 1.01, real[0] * 1.02, real[0] * 10, real[0] * 10.1, real[0] * 10.2]
    modes = [modes[i] for i in (0, 3, 1, 4, 2, 5)]  # interleaved: no drift, two modes
    flags = claims.side_flags("b", claims.Side("s", modes, "u", 1))
    assert flags == [f"b: two modes (3 samples up to {real[0] * 1.02:.4g}, 3 from {real[0] * 10:.4g} u)"]
    assert claims.side_flags("c", claims.Side("s", real[:5], "u", 1)) == []     # under six samples


# ---- emulated CPUs: the measuring machine decides ----

def test_timing_claim_on_an_emulated_cpu_is_not_applicable(reference, real):
    k = spread_of(real) * 10
    r = build(reference, emulation=TCG, a=real, b=[x * k for x in real])
    assert verdict(claim(relation="less"), r) == "not applicable"
    assert verdict(claim(relation="less", timing=False), r) == "holds"
    ok = claims.evaluate_one(claim(relation="less", emulated_ok="a ratio within one guest"), r)
    assert ok["verdict"] == "holds" and ok["emulated"] is True


def test_a_guest_measurement_is_emulated_on_a_hardware_host(reference, real):
    k = spread_of(real) * 10
    r = build(reference, a=real, b=[x * k for x in real])
    assert verdict(claim(relation="less"), r) == "holds"
    r["measurements"][0]["emulation"] = {"accelerator": "tcg"}
    model.validate(r, "guest measurement")
    assert verdict(claim(relation="less"), r) == "not applicable"
    assert claims.evaluate_one(claim(relation="less", emulated_ok="ratio in one guest"), r)["emulated"] is True


# ---- determinism: a page rebuilt from the same result shows the same interval ----

def test_the_interval_is_reproducible(reference, real):
    r = build(reference, a=[x * 1.3 for x in real], b=list(reversed(real)))
    one = claims.evaluate_one(claim(relation="greater"), r)["effect"]
    claims.interval_of.cache_clear()
    two = claims.evaluate_one(claim(relation="greater"), r)["effect"]
    assert one == two


# ---- the model catches tampering with the summaries the rules read ----

@pytest.mark.parametrize("key", ["median", "min", "max", "n"])
def test_tampered_summary_is_caught(reference, real, key):
    r = build(reference, a=real, b=real)
    r["measurements"][0][key] = r["measurements"][0][key] + 1
    with pytest.raises(model.ResultError):
        model.validate(r, "tampered")
