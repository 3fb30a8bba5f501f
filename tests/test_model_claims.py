"""The result model and claims on real results: every committed result validates; tampering
is caught; claim verdicts follow the data (flipping a comparison flips the verdict)."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from labkit.stats import claims
from labkit import model, results

import refhost

ROOT = Path(__file__).resolve().parent.parent


def committed_results() -> list[Path]:
    return sorted((ROOT / "results").glob("*/*.json"))


@pytest.mark.parametrize("path", committed_results(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_committed_result_validates(path):
    r = model.load(path)
    assert r["host"]["label"] == path.parent.name
    assert r["tools"] and all(" " not in tool for tool in r["tools"]), r["tools"]  # one key per tool
    for a in r["artifacts"]:
        assert (path.parent / a["path"]).is_file(), a


def _changed_since(commit: str | None, paths: list[str]) -> str | None:
    """The newest commit touching ``paths`` if the run's ``commit`` does not include it, else None."""
    from labkit.stale import git
    if git(ROOT, "diff", "--quiet", "HEAD", "--", *paths).returncode != 0:
        return "the working tree (uncommitted changes)"
    last = git(ROOT, "log", "-1", "--format=%H", "--", *paths).stdout.strip()
    if not commit or not last:
        return last or None
    included = git(ROOT, "merge-base", "--is-ancestor", last, commit).returncode == 0
    return None if included else last


@pytest.mark.parametrize("path", committed_results(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_committed_claims_are_reproducible(path):
    """Re-evaluating the lab's claims.toml on the stored result gives the stored verdicts. Only
    where the claims engine or claims.toml changed after the run may they differ (the pages
    re-evaluate an older result at build time; rerunning the lab refreshes its stored verdicts):
    then the test is skipped, naming the verdicts that moved."""
    r = model.load(path)
    spec = claims.load(ROOT / "labs" / r["lab"] / "claims.toml")
    again = [(c["id"], c["verdict"]) for c in claims.evaluate(spec, r)]
    stored = [(c["id"], c["verdict"]) for c in r["claims"]]
    if again != stored:
        changed = _changed_since(r["run"].get("git_commit"), ["labkit/stats/claims.py", f"labs/{r['lab']}/claims.toml"])
        if changed:
            moved = sorted(set(again) ^ set(stored))
            pytest.skip(f"claims engine or labs/{r['lab']}/claims.toml changed in {changed[:40]}, after the run, "
                        f"and moved {moved[:6]}: rerun the lab")
    assert again == stored


@pytest.fixture
def result():
    """The reference's fio result: real samples of a host whose CPU is not emulated (an emulated
    host's timing claims are not applicable, whatever the data)."""
    return model.load(refhost.result("fio_engines"))


def test_tampered_median_is_rejected(result):
    bad = copy.deepcopy(result)
    bad["measurements"][0]["median"] = bad["measurements"][0]["median"] * 2 + 1
    with pytest.raises(model.ResultError, match="median"):
        model.validate(bad)


def test_missing_host_field_is_rejected(result):
    bad = copy.deepcopy(result)
    del bad["host"]["kernel"]
    with pytest.raises(model.ResultError, match="kernel"):
        model.validate(bad)


def test_duplicate_case_is_rejected(result):
    bad = copy.deepcopy(result)
    bad["measurements"].append(copy.deepcopy(bad["measurements"][0]))
    with pytest.raises(model.ResultError, match="duplicate"):
        model.validate(bad)


def test_atomic_write_leaves_no_temp(tmp_path, result):
    target = tmp_path / "r.json"
    model.write_atomic(target, result)
    assert model.load(target) == result
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"]


def test_summarize_even_count_median():
    s = model.summarize([4, 1, 3, 2])
    assert s == {"median": 2.5, "min": 1.0, "max": 4.0, "n": 4}


def _compare_claim(result):
    """A compare claim built from two real measurements of the result (same metric, at
    least 3 samples each, ranges apart, so that the verdict is not inconclusive)."""
    ms = [m for m in result["measurements"] if m["n"] >= claims.MIN_SAMPLES]
    pair = next(((x, y) for i, x in enumerate(ms) for y in ms[i + 1:]
                 if x["metric"] == y["metric"] and (x["max"] < y["min"] or y["max"] < x["min"])), None)
    if pair is None:
        pytest.skip("no two measurements of one metric with ranges apart")
    lo, hi = sorted(pair, key=lambda m: m["median"])
    return {"id": "t", "statement": "t", "source": "s", "kind": "compare", "metric": lo["metric"], "a": lo["case"], "b": hi["case"],
            "relation": "less"}


def test_compare_verdict_follows_data(result):
    c = _compare_claim(result)
    assert claims.evaluate_one(c, result)["verdict"] == "holds"
    flipped = dict(c, a=c["b"], b=c["a"])
    assert claims.evaluate_one(flipped, result)["verdict"] == "fails"
    huge = dict(c, factor=1e9)
    assert claims.evaluate_one(huge, result)["verdict"] == "fails"


def test_missing_data_is_untested(result):
    c = dict(_compare_claim(result), a={"no_such_key": "x"})
    v = claims.evaluate_one(c, result)
    assert v["verdict"] == "untested" and "no " in v["evidence"]


def test_skipped_step_makes_step_claim_untested(result):
    r = copy.deepcopy(result)
    r["steps"][0].update(status="skipped", reason="needs root (run with sudo)")
    v = claims.evaluate_one({"id": "s", "statement": "s", "source": "s", "kind": "step", "role": "instrument", "step": r["steps"][0]["name"]}, r)
    why = f"step {r['steps'][0]['name']} skipped: needs root (run with sudo)"
    assert v == {"id": "s", "verdict": "untested", "evidence": why, "role": "instrument", "reason": why}


def test_bad_claims_file_is_rejected(tmp_path):
    f = tmp_path / "claims.toml"
    f.write_text('[[claim]]\nid = "x"\nstatement = "s"\nsource = "s"\nrole = "ours"\nkind = "guess"\n')
    with pytest.raises(claims.ClaimError, match=r"\$\.claim\[0\]\.kind: 'guess' is not one of"):
        claims.load(f)
    f.write_text('[[claim]]\nid = "x"\nstatement = "s"\nsource = "s"\nrole = "ours"\nkind = "compare"\nmetric = "m"\na = {}\nb = {}\nrelation = "bigger"\n')
    with pytest.raises(claims.ClaimError, match=r"\$\.claim\[0\]\.relation: 'bigger' is not one of"):
        claims.load(f)


@pytest.mark.parametrize("extra, match", [
    ('factr = 2.0', "'factr' was unexpected"),       # a typo fails loud, never a silent default
    ('statistic = "mode"', "statistic"),
    ('timing = "yes"', "timing"),
    ('factor = 0', "factor"),
    ('factor = -1.5', "factor"),
    ('source = ""', "source"),
])
def test_claim_keys_are_checked(tmp_path, extra, match):
    f = tmp_path / "claims.toml"
    source = "" if extra.startswith("source") else 'source = "s"\n'
    f.write_text('[[claim]]\nid = "x"\nstatement = "s"\nrole = "ours"\nkind = "compare"\nmetric = "m"\na = {}\nb = {}\n'
                 f'relation = "less"\n{source}{extra}\n')
    with pytest.raises(claims.ClaimError, match=match):
        claims.load(f)


def test_claim_with_every_optional_key_loads(tmp_path):
    f = tmp_path / "claims.toml"
    f.write_text('[[claim]]\nid = "x"\nstatement = "s"\nsource = "the original: 1.85x"\nkind = "compare"\n'
                 'metric = "m"\na = {}\nb = {}\nrelation = "less"\nfactor = 1.5\nstatistic = "mean"\ntiming = false\n'
                 'role = "conclusion"\nconclusion = "c"\npaired = true\nemulated_ok = "a ratio in one guest"\n'
                 '[[claim]]\nid = "y"\nstatement = "s"\nsource = "s"\nrole = "instrument"\nkind = "step"\nstep = "st"\n'
                 'stdout_empty = true\ntiming = false\n')
    got = claims.load(f)
    assert [c["id"] for c in got] == ["x", "y"]
    assert not claims.is_timing(got[0]) and not claims.is_timing(got[1])
    assert claims.is_timing({"kind": "within"}) and not claims.is_timing({"kind": "step"})


def test_duplicate_host_label_is_an_error(tmp_path, monkeypatch):
    src = committed_results()[0]
    extra = tmp_path / "extra" / src.parent.name
    extra.mkdir(parents=True)
    (extra / src.name).write_text(src.read_text())
    monkeypatch.setenv("PERF_CASEBOOK_RESULTS", str(tmp_path / "extra"))
    with pytest.raises(model.ResultError, match="both"):
        results.load_hosts(ROOT)


def _mutants(r: dict) -> list[tuple[str, dict]]:
    """Invalid copies of a real result (its first measurements and steps), one schema rule
    broken in each (a type, a required key, an unknown key)."""
    out = []
    for what, change in (
            ("n not an integer", lambda x: x["measurements"][0].__setitem__("n", "5")),
            ("no host", lambda x: x.pop("host")),
            ("samples not numbers", lambda x: x["measurements"][0].__setitem__("samples", ["a"])),
            ("a step without a status", lambda x: x["steps"][0].pop("status")),
            ("a key the schema does not know", lambda x: x.__setitem__("extra", 1)),
            ("lab a number", lambda x: x.__setitem__("lab", 5))):
        bad = copy.deepcopy(r)
        change(bad)
        out.append((what, bad))
    return out


@pytest.mark.parametrize("path", committed_results(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_the_fast_validator_passes_what_jsonschema_passes_and_no_more(path):
    """model.validate lets jsonschema-rs pass a result and python-jsonschema decide the rest:
    that is sound only while the two agree. On every committed result both pass; on copies
    with one rule broken, python-jsonschema rejects each and jsonschema-rs passes none."""
    fast = model.fast_validator()
    if fast is None:
        pytest.skip("jsonschema-rs is not installed (model.validate uses python-jsonschema alone)")
    r = json.loads(path.read_text())
    assert fast.is_valid(r) and not list(model.validator().iter_errors(r))
    r = {**r, "measurements": r["measurements"][:20], "steps": r["steps"][:20]}   # a valid result still
    assert fast.is_valid(r)
    for what, bad in _mutants(r):
        assert list(model.validator().iter_errors(bad)), what
        assert not fast.is_valid(bad), what
        with pytest.raises(model.ResultError):
            model.validate(bad, what)
    # Stricter is harmless: jsonschema-rs checks every format, python-jsonschema only those whose
    # packages are installed (not date-time here); what jsonschema-rs does not pass,
    # python-jsonschema decides, so validity stays python-jsonschema's.
    odd = copy.deepcopy(r)
    odd["run"]["start"] = "yesterday"
    assert not fast.is_valid(odd)
    if list(model.validator().iter_errors(odd)):
        with pytest.raises(model.ResultError):
            model.validate(odd, "odd")
    else:
        model.validate(odd, "odd")
