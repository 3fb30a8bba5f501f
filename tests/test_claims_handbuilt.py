"""Claims on small hand-built results, beside tests/test_claims_rules.py: the evidence a reader
sees (exact text), several measurements pooled into one side, the exact boundaries of the
rules (MIN_SAMPLES, IQR_FROM, the tolerance of ``increasing``, ties of every relation), every
branch of a step claim, and malformed claims and exercises files. Samples are the real samples
of one committed measurement, scaled or repeated; no measured value is typed here."""

from __future__ import annotations

import statistics
from pathlib import Path

import pytest

from labkit import claims, model

ROOT = Path(__file__).resolve().parent.parent


def g4(x: float) -> str:
    """Numbers as the evidence prints them (4 significant digits)."""
    return f"{x:.4g}"


@pytest.fixture(scope="module")
def real() -> dict:
    """A committed measurement with at least 3 distinct positive samples."""
    for f in sorted((ROOT / "results").glob("*/*.json"), key=lambda p: p.stat().st_size):   # smallest first
        for m in model.load(f)["measurements"]:
            if m["n"] >= 3 and m["min"] > 0 and len(set(m["samples"])) == m["n"]:
                return m
    pytest.skip("no committed measurement with 3 distinct positive samples")


@pytest.fixture(scope="module")
def v(real) -> list[float]:
    """Three distinct real samples, ascending."""
    return sorted(real["samples"])[:3]


def result(unit: str, *ms: tuple[dict, list[float]], steps: list[dict] | None = None, emulation=None) -> dict:
    """A result with just what claims read: host, steps, measurements of metric "x"."""
    return {"host": {"label": "h", "emulation": emulation}, "steps": steps or [],
            "measurements": [model.measurement("x", unit, case, s) for case, s in ms]}


def claim(kind="compare", **kw) -> dict:
    c = {"id": "t", "statement": "t", "kind": kind}
    if kind in ("compare", "within"):
        c.update(metric="x", a={"side": "a"}, b={"side": "b"})
    c.update(kw)
    claims.check_spec(c, "test")
    return c


def ev(c: dict, r: dict) -> tuple[str, str]:
    out = claims.evaluate_one(c, r)
    assert out["id"] == c["id"]
    return out["verdict"], out["evidence"]


# ---- the evidence, exactly ----------------------------------------------------------------

def test_compare_evidence_names_both_sides_and_the_ratio(real, v):
    u = real["unit"]
    far = [x * 4 * v[2] / v[0] for x in v]
    r = result(u, ({"side": "a"}, v), ({"side": "b"}, far))
    verdict, text = ev(claim(relation="less", factor=2), r)
    assert verdict == "holds"
    a_med, b_med = statistics.median(v), statistics.median(far)
    assert text == (f"a·2 < b? a = side=a: median {g4(a_med)} {u} (min {g4(v[0])}, max {g4(v[2])}, n=3); "
                    f"b = side=b: median {g4(b_med)} {u} (min {g4(far[0])}, max {g4(far[2])}, n=3); "
                    f"ratio a/b = {g4(a_med / b_med)}; ranges apart")
    verdict, text = ev(claim(relation="greater"), r)
    assert verdict == "fails" and text.startswith("a > b? a = side=a") and text.endswith("; ranges apart")
    verdict, text = ev(claim(relation="not_less", factor=1.5), r)
    assert verdict == "fails" and text.startswith("a·1.5 ≥ b? ")


def test_overlap_evidence_names_the_sides_as_compared(real, v):
    r = result(real["unit"], ({"side": "a"}, v), ({"side": "b"}, [x * 1.01 for x in v]))
    verdict, text = ev(claim(relation="less"), r)
    assert verdict == "inconclusive" and text.endswith("; the ranges of a and b overlap: the difference is within noise")
    verdict, text = ev(claim(relation="less", factor=1.001), r)
    assert verdict == "inconclusive" and text.endswith("; the ranges of a·1.001 and b overlap: the difference is within noise")


def test_within_evidence_with_scales(real, v):
    u = real["unit"]
    r = result(u, ({"side": "a"}, [v[0]] * 3), ({"side": "b"}, [v[0] * 2] * 3))
    verdict, text = ev(claim("within", factor=1.5, scale_a=2), r)
    assert verdict == "holds"
    assert text == (f"a = side=a: median {g4(v[0])} {u} (min {g4(v[0])}, max {g4(v[0])}, n=3); "
                    f"b = side=b: median {g4(v[0] * 2)} {u} (min {g4(v[0] * 2)}, max {g4(v[0] * 2)}, n=3) "
                    f"(a×2 = {g4(v[0] * 2)}, b×1 = {g4(v[0] * 2)}); ratio 1 vs allowed 1.5; "
                    "every pair of samples agrees within 1.5")
    verdict, text = ev(claim("within", factor=1.5), r)
    assert verdict == "fails" and text.endswith("; ratio 2 vs allowed 1.5; ranges apart")
    verdict, text = ev(claim("within", factor=1.5, scale_b=0.5), r)
    assert verdict == "holds" and "(a×1 = " in text and f"b×0.5 = {g4(v[0])})" in text


def test_within_some_pairs_apart_is_inconclusive(real, v):
    # medians equal, but the spread of the samples is wider than the factor allows
    spread = v[2] / v[0]
    r = result(real["unit"], ({"side": "a"}, v), ({"side": "b"}, v))
    verdict, text = ev(claim("within", factor=(1 + spread) / 2 if spread > 1 else 1), r)
    assert verdict == "inconclusive" and text.endswith("some pairs of samples differ by more than the factor")


def test_several_measurements_pool_into_one_side(real, v):
    u = real["unit"]
    far = [x * 4 * v[2] / v[0] for x in v]
    r = result(u, ({"side": "a", "rep": 1}, v), ({"side": "a", "rep": 2}, v[::-1]), ({"side": "b"}, far))
    verdict, text = ev(claim(relation="less"), r)
    assert verdict == "holds"
    assert f"side=a: median {g4(statistics.median(v + v))} {u} (min {g4(v[0])}, max {g4(v[2])}, n=6, " \
           "2 measurements pooled)" in text
    one = claim(relation="less", a={"side": "a", "rep": 2})
    assert "pooled" not in ev(one, r)[1].split("; b =")[0]


def test_missing_sides_are_named(real, v):
    r = result(real["unit"], ({"side": "a"}, v))
    assert ev(claim(relation="less"), r) == ("untested", "no x measurement for side=b")
    assert ev(claim(relation="less", a={"side": "z"}), r) == ("untested", "no x measurement for side=z; no x measurement for side=b")
    assert ev(claim(relation="less", a={}), r)[0] == "untested"   # an empty selector selects every x: "all"
    both = result(real["unit"], ({"side": "a"}, v), ({"side": "b"}, v))
    assert "a = all: median" in ev(claim(relation="less", a={}), both)[1]


def test_mixed_units_in_a_side_are_refused(real, v):
    r = result(real["unit"], ({"side": "a", "k": 1}, v), ({"side": "b"}, v))
    r["measurements"].append(model.measurement("x", real["unit"] + "/s", {"side": "a", "k": 2}, v))
    with pytest.raises(claims.ClaimError, match="mixes units"):
        claims.evaluate_one(claim(relation="less"), r)


# ---- boundaries -------------------------------------------------------------------------------

def test_three_samples_decide_two_do_not(real, v):
    far = [x * 4 * v[2] / v[0] for x in v]
    three = result(real["unit"], ({"side": "a"}, v), ({"side": "b"}, far))
    two = result(real["unit"], ({"side": "a"}, v[:2]), ({"side": "b"}, far))
    assert ev(claim(relation="less"), three)[0] == "holds"
    verdict, text = ev(claim(relation="less"), two)
    assert verdict == "inconclusive" and text.endswith("; fewer than 3 samples (a has n=2)")
    assert claims.MIN_SAMPLES == 3


@pytest.mark.parametrize("n,expect", [(claims.IQR_FROM - 1, "inconclusive"), (claims.IQR_FROM, "holds")])
def test_interquartile_range_from_exactly_iqr_from_samples(real, v, n, expect):
    """One outlier among n: with min–max (n < IQR_FROM) the sides overlap; with the
    interquartile range (n ≥ IQR_FROM) they do not."""
    low, mid, high = v[0], v[0] * 2, v[0] * 2 * 4 * v[2] / v[0]
    r = result(real["unit"], ({"side": "a"}, [low] * (n - 1) + [high]), ({"side": "b"}, [mid] * n))
    verdict, text = ev(claim(relation="less"), r)
    assert verdict == expect, text
    spread = "p25 " if n >= claims.IQR_FROM else "min–max"
    assert (f", p25 {g4(low)}, p75 {g4(low)}, n={n})" in text) == (n >= claims.IQR_FROM), spread


def test_sides_without_spread_never_overlap(real, v):
    x = claims.Side("x", [v[0]] * 3, "u", 1)
    y = claims.Side("y", [v[0]] * 3, "u", 1)
    z = claims.Side("z", v, "u", 1)
    assert not claims.overlap(x, y)
    assert claims.overlap(x, z) and claims.overlap(z, x)
    touching = claims.Side("t", [v[2], v[2] * 2, v[2] * 3], "u", 1)
    assert claims.overlap(z, touching)          # z's max is touching's min: touching counts


def test_increasing_tolerance_is_strict(real, v):
    """A point exactly (1 - tolerance) below an earlier one is not a drop; a little more is."""
    u, base = real["unit"], v[1]

    def series(*values):
        return result(u, *(({"q": i + 1}, [x] * 3) for i, x in enumerate(values)))
    c = claim("increasing", metric="x", where={}, over="q", tolerance=0.25)
    top = base * 8
    assert ev(c, series(base, base * (1 - 0.25), top))[0] == "holds"
    verdict, text = ev(c, series(base, base * (1 - 0.25) * 0.99, top))
    assert verdict == "fails" and "drops beyond tolerance: q=2: " in text and "the drop at q=2 is beyond noise" in text
    verdict, text = ev(claim("increasing", metric="x", where={}, over="q", factor=8), series(base, base * 2, top))
    assert verdict == "fails" and "(needs > 8)" in text and text.endswith("first and last ranges apart")
    assert ev(claim("increasing", metric="x", where={}, over="q", factor=7.9), series(base, base * 2, top))[0] == "holds"


def test_increasing_needs_two_numeric_points(real, v):
    u = real["unit"]
    one = result(u, ({"q": 1}, v))
    c = claim("increasing", metric="x", where={}, over="q")
    assert ev(c, one) == ("untested", "fewer than two q values for x where all")
    texty = result(u, ({"q": 1}, v), ({"q": "2"}, v), ({"q": True}, v))
    assert ev(c, texty)[0] == "untested"      # "2" and True are not numbers on an axis
    few = result(u, ({"q": 1}, v), ({"q": 2}, v[:2]))
    verdict, text = ev(c, few)
    assert verdict == "inconclusive" and text.endswith("fewer than 3 samples (q=2 has n=2)")


def test_increasing_within_noise(real, v):
    u = real["unit"]
    c = claim("increasing", metric="x", where={}, over="q")
    r = result(u, ({"q": 1}, v), ({"q": 2}, [x * 1.01 for x in v]))
    verdict, text = ev(c, r)
    assert verdict == "inconclusive" and text.endswith("the first and last ranges overlap: the growth is within noise")
    down = result(u, ({"q": 1}, v), ({"q": 2}, [x * 0.99 for x in v]))
    verdict, text = ev(c, down)
    assert verdict == "inconclusive" and text.endswith("the failure is within noise (ranges overlap)")


def test_mean_only_when_asked(real, v):
    """Skewed samples: the median and the mean are on opposite sides of b."""
    u = real["unit"]
    low, high = v[0], v[0] * 1000
    skewed = [low] * 16 + [high] * 4              # p25 = p75 = low; mean far above
    b = [v[0] * 100] * 20
    r = result(u, ({"side": "a"}, skewed), ({"side": "b"}, b))
    assert ev(claim(relation="less"), r)[0] == "holds"
    verdict, text = ev(claim(relation="less", statistic="mean"), r)
    assert verdict == "fails" and f"side=a: mean {g4(statistics.mean(skewed))} " in text


# ---- step claims --------------------------------------------------------------------------------

def step(name="s", status="ok", **kw) -> dict:
    return {"name": name, "group": "g", "status": status, "exit_code": kw.pop("exit_code", 0),
            "expect": kw.pop("expect", "success"), "reason": kw.pop("reason", ""), **kw}


@pytest.mark.parametrize("steps,extra,expect", [
    ([], {}, ("untested", "step s did not run")),
    ([step(status="skipped", reason="needs root")], {}, ("untested", "step s skipped: needs root")),
    ([step()], {}, ("holds", "step s succeeded (exit 0)")),
    ([step(expect="failure", exit_code=1)], {}, ("holds", "step s failed as designed (exit 1)")),
    ([step(status="failed", reason="exit 2: boom")], {}, ("fails", "step s: exit 2: boom")),
    ([step(stdout_bytes=0)], {"stdout_empty": True}, ("holds", "step s succeeded, printed nothing on stdout (exit 0)")),
    ([step(stdout_bytes=12)], {"stdout_empty": True}, ("fails", "step s succeeded but printed 12 bytes on stdout")),
    ([step()], {"stdout_empty": True}, ("untested", "step s: its standard output was not kept")),
    ([step(status="failed", reason="r", stdout_bytes=0)], {"stdout_empty": True}, ("fails", "step s: r")),
])
def test_step_claim_branches(steps, extra, expect):
    c = claim("step", step="s", **extra)
    assert ev(c, result("u", steps=steps)) == expect


def test_timing_and_emulation():
    tcg = {"accelerator": "tcg", "host_arch": "x86_64"}
    assert claims.emulated(result("u", emulation=tcg))
    assert not claims.emulated(result("u", emulation={"accelerator": "kvm", "host_arch": "x86_64"}))
    assert not claims.emulated(result("u"))
    assert claims.is_timing(claim(relation="less")) and not claims.is_timing(claim("step", step="s"))
    assert claims.is_timing(claim("step", step="s", timing=True))
    assert not claims.is_timing(claim(relation="less", timing=False))
    r = result("u", steps=[step()], emulation=tcg)
    assert ev(claim(relation="less"), r) == ("not applicable", claims.EMULATED_EVIDENCE)
    assert ev(claim(relation="less", timing=False), r)[0] == "untested"
    assert ev(claim("step", step="s"), r)[0] == "holds"
    assert [x["verdict"] for x in claims.evaluate([claim("step", step="s"), claim(relation="less")], r)] == \
        ["holds", "not applicable"]


# ---- malformed claims and exercises -------------------------------------------------------------

BASE = {"id": "c", "statement": "s", "kind": "compare", "metric": "x", "a": {}, "b": {}, "relation": "less"}


@pytest.mark.parametrize("change,match", [
    ({"kind": None}, "has no kind"),
    ({"kind": "bigger"}, "unknown kind 'bigger'"),
    ({"relation": None}, r"\(compare\) needs relation"),
    ({"metric": None}, "needs metric"),
    ({"colour": "red"}, r"unknown key\(s\) \['colour'\]"),
    ({"relation": "smaller"}, "relation 'smaller' not in"),
    ({"statistic": "mode"}, "statistic 'mode' not in"),
    ({"timing": "yes"}, "timing must be true or false"),
    ({"a": "fast"}, "a must be a table of case keys"),
    ({"factor": 0}, "factor must be a positive number"),
    ({"factor": -1.5}, "factor must be a positive number"),
    ({"factor": True}, "factor must be a positive number"),
    ({"factor": "2"}, "factor must be a positive number"),
    ({"statement": "  "}, "statement must be a non-empty string"),
    ({"metric": ""}, "metric must be a non-empty string"),
])
def test_malformed_claim_is_refused(change, match):
    c = {**BASE, **{k: v for k, v in change.items() if v is not None}}
    for k, val in change.items():
        if val is None:
            c.pop(k)
    with pytest.raises(claims.ClaimError, match=match):
        claims.check_spec(c, "f.toml")


def test_tolerance_zero_is_allowed_and_negative_is_not():
    c = {"id": "c", "statement": "s", "kind": "increasing", "metric": "x", "where": {}, "over": "q", "tolerance": 0}
    claims.check_spec(c, "f")
    with pytest.raises(claims.ClaimError, match="tolerance must be a positive number"):
        claims.check_spec({**c, "tolerance": -0.1}, "f")
    with pytest.raises(claims.ClaimError, match="where must be a table"):
        claims.check_spec({**c, "where": ["a"]}, "f")
    with pytest.raises(claims.ClaimError, match="over must be a non-empty string"):
        claims.check_spec({**c, "over": 3}, "f")


def test_a_check_table_has_no_id():
    body = {k: v for k, v in BASE.items() if k not in ("id", "statement")}
    claims.check_spec(body, "ex: check", named=False)
    with pytest.raises(claims.ClaimError, match="needs id"):
        claims.check_spec(body, "f")


@pytest.mark.parametrize("text,match", [
    ("[[claim]\nid = 1", "not valid TOML"),
    ('[other]\nx = 1\n', r"unknown top-level table\(s\) \['other'\]"),
    ('[[claim]]\nid = "a"\nstatement = "s"\nkind = "step"\nstep = "x"\n'
     '[[claim]]\nid = "a"\nstatement = "s"\nkind = "step"\nstep = "y"\n', "duplicate claim id a"),
])
def test_malformed_claims_file(tmp_path, text, match):
    f = tmp_path / "claims.toml"
    f.write_text(text)
    with pytest.raises(claims.ClaimError, match=match):
        claims.load(f)


def test_empty_claims_file_has_no_claims(tmp_path):
    f = tmp_path / "claims.toml"
    f.write_text("")
    assert claims.load(f) == []


EX = ('[[exercise]]\nid = "e"\ntitle = "t"\nchange = "c"\npredict = "p"\n'
      'check = { kind = "step", step = "s" }\n')


@pytest.mark.parametrize("text,match", [
    (None, "no exercises file"),
    ("x = [", "not valid TOML"),
    ("", r"no \[\[exercise\]\] entries"),
    ("[meta]\n", "unknown top-level"),
    (EX.replace('title = "t"\n', ""), "exercise e needs title"),
    (EX + 'extra = 1\n', r"unknown key\(s\) \['extra'\]"),
    (EX.replace('predict = "p"', 'predict = ""'), "predict must be a non-empty string"),
    (EX.replace('check = { kind = "step", step = "s" }', 'check = "x"'), "check must be a table"),
    (EX.replace('kind = "step"', 'id = "z", kind = "step"'), "check takes no id or statement"),
    (EX.replace('step = "s"', 'stop = "s"'), r"check \(step\) needs step"),
    (EX + EX, "duplicate exercise id e"),
])
def test_malformed_exercises_file(tmp_path, text, match):
    f = tmp_path / "exercises.toml"
    if text is not None:
        f.write_text(text)
    with pytest.raises(claims.ClaimError, match=match):
        claims.load_exercises(f)


def test_exercise_becomes_a_claim(tmp_path):
    f = tmp_path / "exercises.toml"
    f.write_text(EX)
    [ex] = claims.load_exercises(f)
    assert claims.exercise_claim(ex) == {"id": "e", "statement": "p", "kind": "step", "step": "s"}
