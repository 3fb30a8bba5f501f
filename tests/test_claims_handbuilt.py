"""Claims on small hand-built results, beside tests/test_claims_rules.py: several measurements
pooled into one side, missing sides, mixed units, every branch of a step claim, roles, and
malformed claims and exercises files. Samples are the real samples of one committed measurement,
scaled or repeated; no measured value is typed here."""

from __future__ import annotations

import statistics
from pathlib import Path

import pytest

from labkit.stats import claims
from labkit import model

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
    c = {"id": "t", "statement": "t", "source": "t", "kind": kind, "role": "ours"}
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


def test_mean_only_when_asked(real, v):
    """Skewed samples: the median of a is far below b and the mean far above it. The default
    (medians) never says that a is above b: its log-scale interval straddles 1 with four
    samples 1000 times the rest (cautious, not wrong). Asked for means, Fieller's interval of
    the ratio of means lies wholly above 1: a "less" claim fails."""
    u = real["unit"]
    low, high = v[0], v[0] * 1000
    skewed = [low] * 16 + [high] * 4              # p25 = p75 = low; mean 200.8 × low
    b = [v[0] * 5] * 20
    r = result(u, ({"side": "a"}, skewed), ({"side": "b"}, b))
    assert ev(claim(relation="less"), r)[0] == "inconclusive"
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


def test_step_claim_picks_its_step_by_case():
    """A step claim's ``where`` picks the one step whose case holds it, typed ("5.10" the string
    is not 5.1); no such step leaves it untested, two make the claim wrong (it must add keys)."""
    c = claim("step", where={"dt": "wide", "kernel": "5.10"})
    wide = step("guest.a.wide.dt", case={"dt": "wide", "kernel": "5.10"})
    other = step("guest.a.plain.dt", status="failed", reason="r", case={"dt": "plain", "kernel": "5.10"})
    assert ev(c, result("u", steps=[other, wide])) == ("holds", "step guest.a.wide.dt succeeded (exit 0)")
    assert ev(c, result("u", steps=[other, dict(wide, case={"dt": "wide", "kernel": 5.1})])) == \
        ("untested", "no step with case dt=wide, kernel=5.10 ran")
    with pytest.raises(ValueError, match=r"^claim t: case .* picks 2 steps"):
        claims.evaluate_one(c, result("u", steps=[wide, dict(wide, name="again")]))
    assert refused(claims.check_spec, {**c, "step": "x"}, "f").startswith("f: claim t: $: ")
    assert refused(claims.check_spec, {k: v for k, v in c.items() if k != "where"}, "f").startswith("f: claim t: $: ")


def test_find_step_takes_a_name_or_a_case():
    """labkit.model.find_step, which pages and step claims share: by name, by case (typed), None
    when absent; two matches, or a name and a case at once, or neither, are errors."""
    from labkit import model
    wide = step("guest.a.wide.dt", case={"dt": "wide", "kernel": "5.10"})
    r = result("u", steps=[step("setup.df"), wide])
    assert model.find_step(r, name="setup.df")["name"] == "setup.df" and model.find_step(r, name="x") is None
    assert model.find_step(r, where={"kernel": "5.10"}) is wide and model.find_step(r, where={"kernel": 5.1}) is None
    with pytest.raises(ValueError, match=r"picks 2 steps \(guest.a.wide.dt, again"):
        model.find_step(result("u", steps=[wide, dict(wide, name="again")]), where={"dt": "wide"})
    for bad in ({}, {"name": "setup.df", "where": {"dt": "wide"}}):
        with pytest.raises(ValueError, match="not both"):
            model.find_step(r, **bad)


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


def test_a_claim_about_hardware_the_host_lacks_is_not_applicable(v):
    """``requires`` is read from the host provenance: a claim about SMT siblings is not
    applicable on a host without SMT (or whose SMT is unknown), and is evaluated where the
    host has it."""
    c = claim(relation="less", requires={"smt": True})
    r = result("u", ({"side": "a"}, v), ({"side": "b"}, [x * 10 for x in v]))
    r["host"]["smt"] = False
    verdict, evidence = ev(c, r)
    assert (verdict, evidence) == ("not applicable", "needs a host with smt = true; this host has smt = false")
    assert claims.evaluate_one(c, r)["reason"] == evidence
    r["host"]["smt"] = None
    assert ev(c, r) == ("not applicable", "needs a host with smt = true; this host has smt = null")
    r["host"]["smt"] = True
    assert ev(c, r)[0] == "holds"
    with pytest.raises(claims.ClaimError, match="requires"):
        claim(relation="less", requires={"gpu": True})


def test_full_run_claims_are_not_applicable_on_a_quick_run(v):
    """``full_run`` is read from the result's run: not applicable on a quick run, with the
    reason; evaluated on a full run, and on a result that does not say."""
    c = claim(relation="less", full_run=True)
    r = result("u", ({"side": "a"}, v), ({"side": "b"}, [x * 10 for x in v]))
    r["run"] = {"quick": True}
    assert ev(c, r) == ("not applicable", "needs a full run (a quick run's jobs are too short for what it reads)")
    r["run"] = {"quick": False}
    assert ev(c, r)[0] == "holds"
    del r["run"]
    assert ev(c, r)[0] == "holds"
    r["run"] = {"quick": True}
    assert ev(claim(relation="less"), r)[0] == "holds"
    with pytest.raises(claims.ClaimError, match="full_run"):
        claim(relation="less", full_run="yes")


# ---- malformed claims and exercises: the one line a reader gets, exactly -----------------------

BASE = {"id": "c", "statement": "s", "source": "s", "kind": "compare", "metric": "x", "a": {}, "b": {}, "relation": "less", "role": "ours"}
BLANK = r"does not match '\\S' (A string with at least one character that is not white space)"


def refused(fn, *args, **kw) -> str:
    with pytest.raises(claims.ClaimError) as exc:
        fn(*args, **kw)
    return str(exc.value)


@pytest.mark.parametrize("change,message", [
    ({"kind": None}, "f.toml: claim c: $: 'kind' is a required property"),
    ({"kind": "bigger"}, "f.toml: claim c: $.kind: 'bigger' is not one of ['step', 'compare', 'within', 'increasing']"),
    ({"relation": None}, "f.toml: claim c: $: 'relation' is a required property"),
    ({"id": None}, "f.toml: claim ?: $: 'id' is a required property"),
    ({"colour": "red"}, "f.toml: claim c: $: Unevaluated properties are not allowed ('colour' was unexpected)"),
    ({"relation": "smaller"}, "f.toml: claim c: $.relation: 'smaller' is not one of ['less', 'greater', 'not_less']"),
    ({"statistic": "mode"}, "f.toml: claim c: $.statistic: 'mode' is not one of ['median', 'mean']"),
    ({"timing": "yes"}, "f.toml: claim c: $.timing: 'yes' is not of type 'boolean'"),
    ({"a": "fast"}, "f.toml: claim c: $.a: 'fast' is not of type 'object'"),
    ({"b": ["x"]}, "f.toml: claim c: $.b: ['x'] is not of type 'object'"),
    ({"factor": 0}, "f.toml: claim c: $.factor: 0 is less than or equal to the minimum of 0"),
    ({"factor": -1.5}, "f.toml: claim c: $.factor: -1.5 is less than or equal to the minimum of 0"),
    ({"factor": True}, "f.toml: claim c: $.factor: True is not of type 'number'"),
    ({"factor": "2"}, "f.toml: claim c: $.factor: '2' is not of type 'number'"),
    ({"statement": "  "}, f"f.toml: claim c: $.statement: '  ' {BLANK}"),
    ({"source": ""}, f"f.toml: claim c: $.source: '' {BLANK}"),
    ({"metric": ""}, f"f.toml: claim c: $.metric: '' {BLANK}"),
    ({"role": None}, "f.toml: claim c: $: 'role' is a required property"),
    ({"role": "finding"}, "f.toml: claim c: $.role: 'finding' is not one of ['conclusion', 'instrument', 'ours']"),
    ({"role": "conclusion"}, "f.toml: claim c: $: 'conclusion' is a required property"),
    ({"conclusion": "x"}, "f.toml: claim c: $.role: 'conclusion' was expected"),
    ({"emulated_ok": ""}, f"f.toml: claim c: $.emulated_ok: '' {BLANK}"),
    ({"paired": 1}, "f.toml: claim c: $.paired: 1 is not of type 'boolean'"),
])
def test_malformed_claim_is_refused(change, message):
    c = {**BASE, **{k: v for k, v in change.items() if v is not None}}
    for k, val in change.items():
        if val is None:
            c.pop(k)
    assert refused(claims.check_spec, c, "f.toml") == message


def test_what_each_kind_accepts():
    ok = [
        {**BASE, "source": "the original", "timing": False, "factor": 1.5, "statistic": "mean"},
        {**BASE, "role": "conclusion", "conclusion": "c1", "paired": True, "emulated_ok": "one guest"},
        {"id": "w", "statement": "s", "source": "s", "kind": "within", "role": "instrument", "metric": "x", "a": {}, "b": {}, "factor": 2,
         "scale_a": 0.5, "scale_b": 3, "statistic": "median", "source": "o", "timing": True},
        {"id": "i", "statement": "s", "source": "s", "kind": "increasing", "role": "ours", "metric": "x", "where": {}, "over": "q", "factor": 1,
         "tolerance": 0, "statistic": "mean"},
        {"id": "s", "statement": "s", "source": "s", "kind": "step", "role": "instrument", "step": "x", "stdout_empty": True, "timing": False},
    ]
    for c in ok:
        claims.check_spec(c, "f")
    inc = ok[3]
    assert refused(claims.check_spec, {**inc, "tolerance": -0.1}, "f") == \
        "f: claim i: $.tolerance: -0.1 is less than the minimum of 0"
    assert refused(claims.check_spec, {**inc, "where": ["a"]}, "f") == "f: claim i: $.where: ['a'] is not of type 'object'"
    assert refused(claims.check_spec, {**inc, "over": 3}, "f") == "f: claim i: $.over: 3 is not of type 'string'"
    assert refused(claims.check_spec, {**ok[2], "scale_a": 0}, "f") == \
        "f: claim w: $.scale_a: 0 is less than or equal to the minimum of 0"
    assert refused(claims.check_spec, {**ok[2], "scale_b": -1}, "f") == \
        "f: claim w: $.scale_b: -1 is less than or equal to the minimum of 0"
    assert refused(claims.check_spec, {**ok[4], "step": ""}, "f") == f"f: claim s: $.step: '' {BLANK}"
    assert refused(claims.check_spec, {**ok[4], "metric": "x"}, "f") == \
        "f: claim s: $: Unevaluated properties are not allowed ('metric' was unexpected)"
    assert claims.VERDICTS == ("holds", "fails", "inconclusive", "untested", "not applicable")


def test_a_check_table_has_no_id():
    body = {k: v for k, v in BASE.items() if k not in ("id", "statement")}
    claims.check_spec(body, "ex: check", named=False)
    assert refused(claims.check_spec, {**body, "relation": "x"}, "ex: check", named=False) == \
        "ex: check: $.relation: 'x' is not one of ['less', 'greater', 'not_less']"
    assert refused(claims.check_spec, body, "f") == "f: claim ?: $: 'id' is a required property"


STEP = '[[claim]]\nid = "{id}"\nstatement = "s"\nsource = "s"\nkind = "step"\nstep = "x"\nrole = "instrument"\n'


def test_malformed_claims_file(tmp_path):
    f = tmp_path / "claims.toml"
    f.write_text("[[claim]\nid = 1")
    assert refused(claims.load, f).startswith(f"{f}: not valid TOML: ")
    f.write_text("[other]\nx = 1\n")
    assert refused(claims.load, f) == f"{f}: $: Additional properties are not allowed ('other' was unexpected)"
    f.write_text(STEP.format(id="a") + STEP.format(id="a"))
    assert refused(claims.load, f) == f"{f}: duplicate claim id a"
    f.write_text(STEP.format(id="a") + STEP.format(id="b"))
    assert [c["id"] for c in claims.load(f)] == ["a", "b"]
    f.write_text(STEP.format(id="a").replace('step = "x"', 'step = 1'))
    assert refused(claims.load, f) == f"{f}: $.claim[0].step: 1 is not of type 'string' (claim 'a')"
    f.write_text("")
    assert claims.load(f) == []


EX = ('[[exercise]]\nid = "e"\ntitle = "t"\nchange = "c"\npredict = "p"\n'
      'check = { kind = "step", step = "s" }\n')


@pytest.mark.parametrize("text,message", [
    (None, "{f}: no exercises file"),
    ("", "{f}: $: 'exercise' is a required property"),
    ("[meta]\n", "{f}: $: 'exercise' is a required property"),
    ("[meta]\n" + EX, "{f}: $: Additional properties are not allowed ('meta' was unexpected)"),
    ("exercise = []\n", "{f}: $.exercise: [] should be non-empty"),
    (EX.replace('title = "t"\n', ""), "{f}: $.exercise[0]: 'title' is a required property (exercise 'e')"),
    (EX.replace('id = "e"\n', ""), "{f}: $.exercise[0]: 'id' is a required property"),
    (EX + 'extra = 1\n', "{f}: $.exercise[0]: Additional properties are not allowed ('extra' was unexpected) (exercise 'e')"),
    (EX.replace('predict = "p"', 'predict = ""'), "{f}: $.exercise[0].predict: '' " + BLANK + " (exercise 'e')"),
    (EX.replace('title = "t"', 'title = 3'), "{f}: $.exercise[0].title: 3 is not of type 'string' (exercise 'e')"),
    (EX.replace('check = { kind = "step", step = "s" }', 'check = "x"'),
     "{f}: $.exercise[0].check: 'x' is not of type 'object' (exercise 'e')"),
    (EX.replace('kind = "step"', 'id = "z", kind = "step"'),
     "{f}: $.exercise[0].check: Unevaluated properties are not allowed ('id' was unexpected) (exercise 'e')"),
    (EX.replace('kind = "step"', 'statement = "z", kind = "step"'),
     "{f}: $.exercise[0].check: Unevaluated properties are not allowed ('statement' was unexpected) (exercise 'e')"),
    (EX.replace('step = "s"', 'stop = "s"'), "{f}: $.exercise[0].check: {{…}} is not valid under any of the given schemas ('step' is a required "
                                                  "property; 'where' is a required property) (exercise 'e')"),
    (EX + EX, "{f}: duplicate exercise id e"),
])
def test_malformed_exercises_file(tmp_path, text, message):
    f = tmp_path / "exercises.toml"
    if text is not None:
        f.write_text(text)
    assert refused(claims.load_exercises, f) == message.format(f=f)


def test_exercises_file_that_is_not_toml(tmp_path):
    f = tmp_path / "exercises.toml"
    f.write_text("x = [")
    assert refused(claims.load_exercises, f).startswith(f"{f}: not valid TOML: ")


def test_exercise_becomes_a_claim(tmp_path):
    f = tmp_path / "exercises.toml"
    f.write_text(EX + EX.replace('id = "e"', 'id = "e2"'))
    ex = claims.load_exercises(f)
    assert [e["id"] for e in ex] == ["e", "e2"]
    assert claims.exercise_claim(ex[0]) == {"id": "e", "statement": "p", "kind": "step", "step": "s"}


def test_a_side_describes_itself(v):
    s = claims.Side("lbl", v, "us", 1)
    assert s.statistic == "median" and (s.min, s.max, s.n) == (v[0], v[2], 3)
    assert s.describe() == f"lbl: median {g4(v[1])} us (min {g4(v[0])}, max {g4(v[2])}, n=3)"
    assert claims.Side("lbl", v, "us", 2, "mean").describe() == \
        f"lbl: mean {g4(statistics.mean(v))} us (min {g4(v[0])}, max {g4(v[2])}, n=3, 2 measurements pooled)"
    k = claims.Side("lbl", v, "us", 1).scaled(2)
    assert k.samples == [x * 2 for x in v] and k.label == "lbl" and k.unit == "us"


def test_mixed_units_message(real, v):
    r = result(real["unit"], ({"side": "a", "k": 1}, v), ({"side": "b"}, v))
    r["measurements"].append(model.measurement("x", "zz", {"side": "a", "k": 2}, v))
    assert refused(claims.evaluate_one, claim(relation="less"), r) == \
        f"x where side=a mixes units {sorted([real['unit'], 'zz'])}: make the selector narrower"
    inc = result(real["unit"], ({"q": 1}, v), ({"q": 2}, v))
    inc["measurements"].append(model.measurement("x", "zz", {"q": 3}, v))
    assert refused(claims.evaluate_one, claim("increasing", metric="x", where={}, over="q"), inc) == \
        f"x where all mixes units {sorted([real['unit'], 'zz'])}"

