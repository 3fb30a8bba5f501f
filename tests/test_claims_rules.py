"""The verdict rules of labkit/claims.py on small results built from a real one: ties at a
threshold, overlapping ranges, too few samples, skewed samples (median vs mean), emulated
CPUs, tampered summaries. Samples are the real samples of one committed measurement,
scaled or repeated; no measured value is typed here."""

from __future__ import annotations

import copy
import math
import statistics
from pathlib import Path

import pytest

from labkit import claims, model

ROOT = Path(__file__).resolve().parent.parent
TCG = {"emulator": "qemu-system-aarch64", "accelerator": "tcg", "machine": "virt", "guest_cpu": "cortex-a72",
       "host_arch": "x86_64", "host_cpu": None, "host_label": None}


@pytest.fixture(scope="module")
def reference() -> dict:
    return model.load(sorted((ROOT / "results").glob("*/*.json"))[0])


@pytest.fixture(scope="module")
def real(reference) -> dict:
    """A real measurement with at least 3 distinct positive samples."""
    for m in reference["measurements"]:
        if m["n"] >= 3 and m["min"] > 0 and m["max"] > m["min"] and len(set(m["samples"])) == m["n"]:
            return m
    pytest.skip("no measurement with 3 distinct positive samples in the reference result")


def build(reference: dict, unit: str, emulation=None, **sides: list[float]) -> dict:
    """The reference result with its measurements replaced by metric "x", one per side
    (case {"side": name}), and host.emulation set as given."""
    r = copy.deepcopy(reference)
    r["host"]["emulation"] = emulation
    r["measurements"] = [model.measurement("x", unit, {"side": k}, v) for k, v in sides.items()]
    model.validate(r, "built")
    return r


def claim(kind="compare", **kw) -> dict:
    c = {"id": "t", "statement": "t", "kind": kind, "metric": "x"}
    if kind != "increasing":
        c.update(a={"side": "a"}, b={"side": "b"})
    c.update(kw)
    claims.check_spec(c, "test")
    return c


def verdict(c, r) -> str:
    return claims.evaluate_one(c, r)["verdict"]


# ---- exactly on a threshold (samples constant, values exactly 2x apart) ----

def test_ratio_exactly_on_the_threshold(reference, real):
    m = real["median"]
    r = build(reference, real["unit"], a=[m] * 3, b=[m * 2] * 3)  # ×2 is exact in binary floating point
    assert verdict(claim(relation="less", factor=2), r) == "fails"         # a·2 == b is not a·2 < b
    assert verdict(claim(relation="not_less", factor=2), r) == "holds"     # a·2 ≥ b
    assert verdict(claim(relation="greater", factor=2, a={"side": "b"}, b={"side": "a"}), r) == "fails"  # b > a·2? equal
    assert verdict(claim("within", factor=2), r) == "holds"                # ratio exactly 2 is within 2
    assert verdict(claim(relation="less"), r) == "holds"                   # without the factor: clearly less


# ---- noise ----

def test_overlapping_ranges_are_inconclusive(reference, real):
    p = real["samples"]
    spread = max(p) / min(p)
    r = build(reference, real["unit"], a=p, b=[x * math.sqrt(spread) for x in p])  # medians apart, ranges overlap
    v = claims.evaluate_one(claim(relation="less"), r)
    assert v["verdict"] == "inconclusive" and "overlap" in v["evidence"]
    assert verdict(claim(relation="greater"), r) == "inconclusive"  # the opposite claim cannot fail either
    apart = build(reference, real["unit"], a=p, b=[x * spread * 1.1 for x in p])
    assert verdict(claim(relation="less"), apart) == "holds"
    assert verdict(claim(relation="greater"), apart) == "fails"


def test_many_samples_use_the_interquartile_range(reference):
    """Per-I/O distributions: extremes overlap, the middle halves do not. A real distribution
    (the largest measurement of the reference) against itself scaled beyond its p75/p25."""
    big = max((m for f in sorted((ROOT / "results").glob("*/*.json")) for m in model.load(f)["measurements"]),
              key=lambda m: m["n"])
    p = big["samples"]
    assert len(p) >= claims.IQR_FROM
    q1, _, q3 = statistics.quantiles(p, n=4, method="inclusive")
    k = (q3 / q1) * 1.05 if q1 > 0 else pytest.skip("distribution with p25 = 0")
    r = build(reference, big["unit"], a=p, b=[x * k for x in p])
    assert min(p) * k <= max(p)  # the extremes still overlap
    assert verdict(claim(relation="less"), r) == "holds"
    assert verdict(claim(relation="greater"), r) == "fails"
    close = build(reference, big["unit"], a=p, b=[x * math.sqrt(q3 / q1) for x in p])  # middle halves overlap
    assert verdict(claim(relation="less"), close) == "inconclusive"
    small = build(reference, big["unit"], a=p[:claims.IQR_FROM - 1], b=[x * k for x in p[:claims.IQR_FROM - 1]])
    assert claims.Side("s", p[:claims.IQR_FROM - 1], "u", 1).spread == "min–max"
    assert verdict(claim(relation="less"), small) in ("holds", "inconclusive")


def test_fewer_than_three_samples_is_inconclusive(reference, real):
    p = real["samples"]
    far = [x * 10 * max(p) / min(p) for x in p]
    two = build(reference, real["unit"], a=p[:2], b=far)
    v = claims.evaluate_one(claim(relation="less"), two)
    assert v["verdict"] == "inconclusive" and "fewer than 3 samples" in v["evidence"] and "a has n=2" in v["evidence"]
    assert verdict(claim("within", factor=1.5), build(reference, real["unit"], a=p[:2], b=p[:2])) == "inconclusive"
    three = build(reference, real["unit"], a=p[:3], b=far)
    assert verdict(claim(relation="less"), three) == "holds"


def test_within_needs_every_pair_to_agree(reference, real):
    p = real["samples"]
    spread = max(p) / min(p)
    same = build(reference, real["unit"], a=p, b=p)
    assert verdict(claim("within", factor=spread * 1.01), same) == "holds"      # the worst pair within the factor
    assert verdict(claim("within", factor=math.sqrt(spread)), same) == "inconclusive"  # medians agree, noise wider
    apart = build(reference, real["unit"], a=p, b=[x * spread * 2 for x in p])
    assert verdict(claim("within", factor=spread), apart) == "fails"
    scaled = build(reference, real["unit"], a=p, b=[x * 4 for x in p])
    assert verdict(claim("within", factor=spread * 1.01, scale_a=4), scaled) == "holds"


def test_skewed_samples_median_and_mean_differ(reference, real):
    """One slow outlier moves the mean, not the median: the verdict follows the statistic asked for.
    21 samples (a real measurement's samples repeated), so the noise range is the interquartile
    range, which one outlier does not widen."""
    p = real["samples"]
    base = (p * 21)[:21]
    spread = max(p) / min(p)
    k = 3.0
    a = [x * k for x in base[:-1]] + [max(base) * k * 1000]   # one outlier
    b = list(base)
    r = build(reference, real["unit"], a=a, b=b)
    f = 1.5 * k * spread                           # beyond the medians' ratio, below the means'
    assert statistics.median(a) / statistics.median(b) < f < statistics.mean(a) / statistics.mean(b)
    assert verdict(claim(relation="greater", factor=f), r) == "fails"
    v = claims.evaluate_one(claim(relation="greater", factor=f, statistic="mean"), r)
    assert v["verdict"] == "holds" and "mean" in v["evidence"]


def test_missing_side_is_untested(reference, real):
    r = build(reference, real["unit"], a=real["samples"])
    v = claims.evaluate_one(claim(relation="less"), r)
    assert v["verdict"] == "untested" and "no x measurement for side=b" in v["evidence"]


# ---- increasing ----

def _series(p: list[float], steps: list[float]) -> dict:
    return {f"p{i}": [x * k for x in p] for i, k in enumerate(steps)}


def test_increasing_rules(reference, real):
    p = real["samples"]
    s = max(p) / min(p)
    over = claim("increasing", where={}, over="size")

    def res(ks, samples=p):
        r = copy.deepcopy(reference)
        r["host"]["emulation"] = None
        r["measurements"] = [model.measurement("x", real["unit"], {"size": 2 ** i}, [x * k for x in samples])
                             for i, k in enumerate(ks)]
        return r

    g = 1.1 * s
    assert verdict(over, res([1, g, g * g])) == "holds"
    assert verdict(over, res([g * g, g, 1])) == "fails"                       # reversed
    assert verdict(over, res([1, math.sqrt(s)])) == "inconclusive"            # growth within noise
    assert verdict(over, res([1, g * g, 1 / g, g * g * g])) == "fails"        # a drop beyond noise
    assert verdict(dict(over, tolerance=0.0), res([1, g * g, g * g * 0.99, g ** 3])) == "inconclusive"  # a drop within noise
    assert verdict(over, res([1, g], samples=p[:2])) == "inconclusive"        # n = 2 per point
    assert verdict(dict(over, factor=g * g * 1.1), res([1, g, g * g])) == "fails"  # grows, but less than the factor


# ---- emulated CPUs ----

def test_timing_claim_on_an_emulated_cpu_is_not_applicable(reference, real):
    p = real["samples"]
    r = build(reference, real["unit"], emulation=TCG, a=p, b=[x * 10 * max(p) / min(p) for x in p])
    v = claims.evaluate_one(claim(relation="less"), r)
    assert v == {"id": "t", "verdict": "not applicable", "evidence": "emulated CPU: timings are not hardware"}
    assert verdict(claim(relation="less", timing=True), r) == "not applicable"
    assert verdict(claim(relation="less", timing=False), r) == "holds"        # counts and behaviour are evaluated
    kvm = build(reference, real["unit"], emulation=dict(TCG, accelerator="kvm"), a=p, b=[x * 10 * max(p) / min(p) for x in p])
    assert verdict(claim(relation="less"), kvm) == "holds"


def test_step_claim_on_an_emulated_cpu_is_evaluated(reference):
    r = copy.deepcopy(reference)
    r["host"]["emulation"] = TCG
    step = next(s for s in r["steps"] if s["status"] == "ok")
    c = {"id": "s", "statement": "s", "kind": "step", "step": step["name"]}
    assert verdict(c, r) == "holds"
    assert verdict(dict(c, timing=True), r) == "not applicable"


# ---- the model catches tampering with the summaries the rules read ----

@pytest.mark.parametrize("key", ["min", "max", "median", "n"])
def test_tampered_summary_is_caught(reference, key):
    bad = copy.deepcopy(reference)
    m = next(m for m in bad["measurements"] if m["n"] >= 3 and m["max"] > m["min"])
    m[key] = m[key] + (1 if key == "n" else (m["max"] - m["min"]))
    with pytest.raises(model.ResultError, match=key):
        model.validate(bad)
