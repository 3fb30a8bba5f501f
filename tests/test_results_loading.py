"""Loading results: malformed files and boundaries of labkit/model.py and labkit/results.py.
Missing, empty, non-JSON and non-object files; summaries that disagree with their samples by
more than rounding (and not by less); duplicate cases; an atomic write that fails; host
folders (search order, a label in two places, a label that is not its folder's, hidden
folders, the reader's own results)."""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path

import pytest

from labkit import model, results

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(autouse=True)
def own_cache(tmp_path_factory, monkeypatch):
    """The build cache of this module's throwaway results stays out of the checkout's .cache/."""
    monkeypatch.setenv("PCB_BUILD_CACHE", str(tmp_path_factory.getbasetemp() / "build-cache"))


@pytest.fixture(scope="module")
def reference() -> dict:
    """The smallest committed result (validation time grows with its size)."""
    return model.load(min((ROOT / "results").glob("*/*.json"), key=lambda p: p.stat().st_size))


@pytest.fixture
def r(reference) -> dict:
    return copy.deepcopy(reference)


def a_measurement(r: dict) -> dict:
    return next(m for m in r["measurements"] if m["n"] >= 3 and m["max"] > m["min"] and m["median"] > 0)


@pytest.mark.parametrize("content,match", [
    (None, "no such result file"),
    ("", "not valid JSON"),
    ("{", "not valid JSON"),
    ("[]", r"\(top\)"),
    ('{"lab": "x"}', r"\(top\)"),
])
def test_malformed_file_is_refused(tmp_path, content, match):
    f = tmp_path / "lab.json"
    if content is not None:
        f.write_text(content)
    with pytest.raises(model.ResultError, match=match) as exc:
        model.load(f)
    assert str(f) in str(exc.value)


@pytest.mark.parametrize("key", ["median", "min", "max"])
def test_summary_within_rounding_passes_beyond_fails(r, key):
    m = a_measurement(r)
    m[key] = m[key] * (1 + 1e-12)
    model.validate(r)                                 # float noise of a re-computation is fine
    m[key] = m[key] * (1 + 1e-6)
    with pytest.raises(model.ResultError, match=rf"measurements/\d+: {key}="):
        model.validate(r)


def test_count_must_match_samples(r):
    m = a_measurement(r)
    m["n"] = m["n"] - 1
    with pytest.raises(model.ResultError, match=r"n=\d+ but samples give"):
        model.validate(r)


def test_same_metric_and_case_twice_is_refused(r):
    r["measurements"].append(copy.deepcopy(a_measurement(r)))
    with pytest.raises(model.ResultError, match="duplicate metric and case"):
        model.validate(r)
    # the same case with keys in another order is the same case
    dup = copy.deepcopy(a_measurement(r))
    r["measurements"].pop()
    dup["case"] = dict(reversed(list(dup["case"].items())))
    r["measurements"].append(dup)
    if len(dup["case"]) > 1:
        with pytest.raises(model.ResultError, match="duplicate"):
            model.validate(r)


def test_error_names_the_source_and_the_path(r):
    del r["run"]["start"]
    with pytest.raises(model.ResultError, match=r"^mine: run: 'start' is a required property"):
        model.validate(r, "mine")


def test_summarize_boundaries(reference):
    s = sorted(a_measurement(copy.deepcopy(reference))["samples"])
    with pytest.raises(model.ResultError, match="at least one sample"):
        model.summarize([])
    assert model.summarize(s[:1]) == {"median": s[0], "min": s[0], "max": s[0], "n": 1}
    two = model.summarize(s[:2])
    assert two["median"] == (s[0] + s[1]) / 2 and two["n"] == 2      # the mean of the two middle values
    odd = model.summarize(s[:3][::-1])
    assert odd == {"median": s[1], "min": s[0], "max": s[2], "n": 3}
    m = model.measurement("x", "us", {"k": 1}, s[:3], step="st")
    assert m["step"] == "st" and m["samples"] == [float(x) for x in s[:3]] and m["median"] == s[1]
    assert "step" not in model.measurement("x", "us", {}, s[:1])


def test_write_atomic_round_trips_and_leaves_nothing_on_failure(tmp_path, reference):
    f = tmp_path / "sub" / "lab.json"
    model.write_atomic(f, reference)
    assert json.loads(f.read_text()) == reference and f.read_text().endswith("}\n")
    assert oct(f.stat().st_mode & 0o777) == "0o644"
    before = f.read_text()
    with pytest.raises(TypeError):
        model.write_atomic(f, {"x": object()})
    assert f.read_text() == before
    assert sorted(p.name for p in f.parent.iterdir()) == ["lab.json"], "a temporary file is left"


def host_folder(base: Path, label: str, reference: dict, lab: str | None = None) -> Path:
    d = base / label
    d.mkdir(parents=True)
    r = copy.deepcopy(reference)
    r["host"]["label"] = label
    if lab:
        r["lab"] = lab
    model.write_atomic(d / f"{r['lab']}.json", r)
    return d


def test_host_folders_in_search_order(tmp_path, reference, monkeypatch):
    monkeypatch.delenv("PERF_CASEBOOK_LOCAL", raising=False)
    extra = tmp_path / "ci"
    monkeypatch.setenv("PERF_CASEBOOK_RESULTS", f"{extra}::{tmp_path / 'absent'}")
    host_folder(tmp_path / "results", "b-host", reference)
    host_folder(tmp_path / "results", "a-host", reference)
    host_folder(extra, "ci-host", reference)
    host_folder(tmp_path / "local-results", "mine", reference)
    host_folder(tmp_path / "results", ".hidden", reference)  # a dot folder is never a host, results or not
    (tmp_path / "results" / "a-empty").mkdir()  # sorts first: an empty folder is passed over, not the end
    hosts = results.load_hosts(tmp_path)
    assert [(h.label, h.local) for h in hosts] == [("a-host", False), ("b-host", False), ("ci-host", False), ("mine", True)]
    assert hosts[-1].title == "mine (your machine)" and hosts[0].title == "a-host"
    assert results.host("mine (your machine)", hosts).label == "mine"
    # a page's tabs: the reader's own machine first, then the others in search order
    lab = reference["lab"]
    assert [h.label for h, _ in results.for_lab(lab, hosts)] == ["mine", "a-host", "b-host", "ci-host"]
    monkeypatch.setenv("PERF_CASEBOOK_LOCAL", "0")
    assert [h.label for h in results.load_hosts(tmp_path)] == ["a-host", "b-host", "ci-host"]


def test_a_label_in_two_places_is_refused(tmp_path, reference, monkeypatch):
    monkeypatch.setenv("PERF_CASEBOOK_RESULTS", str(tmp_path / "ci"))
    host_folder(tmp_path / "results", "same", reference)
    host_folder(tmp_path / "ci", "same", reference)
    with pytest.raises(model.ResultError, match="^host label 'same' is in both .* rename one \\(--host LABEL\\)$"):
        results.load_hosts(tmp_path)


def test_a_result_in_the_wrong_folder_is_refused(tmp_path, reference, monkeypatch):
    monkeypatch.setenv("PERF_CASEBOOK_RESULTS", "")
    d = host_folder(tmp_path / "results", "right", reference)
    os.rename(d, tmp_path / "results" / "wrong")
    with pytest.raises(model.ResultError, match="host label 'right' differs from its folder 'wrong'$"):
        results.load_hosts(tmp_path)


def test_an_invalid_result_fails_loud(tmp_path, reference, monkeypatch):
    """Every time: a validation is remembered only when it passed (tests/test_build_speed.py),
    so a second build, and a build after the file held a valid result, fail too."""
    monkeypatch.setenv("PERF_CASEBOOK_RESULTS", "")
    d = host_folder(tmp_path / "results", "h", reference)
    (d / "broken.json").write_text("{}")
    for _ in range(2):
        with pytest.raises(model.ResultError, match="broken.json"):
            results.load_hosts(tmp_path)
    (d / "broken.json").unlink()
    assert [h.label for h in results.load_hosts(tmp_path)] == ["h"]
    r = copy.deepcopy(reference)
    r["host"]["label"] = "h"
    r["measurements"][0]["n"] += 1
    model.write_atomic(d / f"{r['lab']}.json", r)
    with pytest.raises(model.ResultError, match=r"measurements/0: n="):
        results.load_hosts(tmp_path)


def test_lookups(tmp_path, reference, monkeypatch):
    monkeypatch.setenv("PERF_CASEBOOK_RESULTS", "")
    monkeypatch.setenv("PERF_CASEBOOK_LOCAL", "0")
    host_folder(tmp_path / "results", "h1", reference)
    host_folder(tmp_path / "results", "h2", reference, lab="other_lab")
    hosts = results.load_hosts(tmp_path)
    assert [h.label for h, _ in results.for_lab(reference["lab"], hosts)] == ["h1"]
    with pytest.raises(results.NoResult, match="^no result for lab 'nope' in any host folder: run labs/nope/run.sh$"):
        results.for_lab("nope", hosts)
    with pytest.raises(results.NoResult, match=r"^no host 'h3' \(hosts: h1, h2\)$"):
        results.host("h3", hosts)
    with pytest.raises(results.NoResult, match=r"\(hosts: none\)"):
        results.host("h3", [])


def test_rounding_tolerance_is_relative_above_one_and_absolute_below(r):
    """|given − computed| may be up to 1e-9 × max(1, |computed|)."""
    m = a_measurement(r)
    scale = 0.5 / m["median"]                        # the same samples, scaled to a median of 0.5
    small = model.measurement(m["metric"], m["unit"], {**m["case"], "scaled": "small"}, [s * scale for s in m["samples"]])
    big = model.measurement(m["metric"], m["unit"], {**m["case"], "scaled": "big"}, [s * 4 / m["median"] for s in m["samples"]])
    r["measurements"] += [small, big]
    model.validate(r)
    small["median"] += 0.5e-9                        # absolute 0.5e-9 at 0.5: fine
    big["median"] += 2e-9                            # absolute 2e-9 at 4 is relative 0.5e-9: fine
    model.validate(r)
    small["median"] += 1e-9                          # absolute 1.5e-9 at 0.5: too much
    with pytest.raises(model.ResultError, match="median="):
        model.validate(r)
    small["median"] -= 1e-9
    big["median"] += 1.2e-9                          # relative 0.8e-9: fine
    model.validate(r)
    big["median"] += 1.2e-9                          # relative 1.1e-9: too much
    with pytest.raises(model.ResultError, match="median="):
        model.validate(r)


def test_the_first_error_by_path_is_named(r):
    del r["run"]["start"]
    del r["host"]["kernel"]
    with pytest.raises(model.ResultError) as exc:
        model.validate(r, "x")
    assert str(exc.value) == "x: host: 'kernel' is a required property"


def test_written_json_is_indented_in_key_order(tmp_path, reference):
    f = tmp_path / "lab.json"
    model.write_atomic(f, reference)
    assert f.read_text() == json.dumps(reference, indent=1) + "\n"


def test_a_measurement_keeps_its_own_case():
    case = {"k": 1}
    m = model.measurement("x", "us", case, [2, 1, 3])
    case["k"] = 2
    assert m["case"] == {"k": 1} and m["samples"] == [2.0, 1.0, 3.0] and m["median"] == 2.0


def test_messages_name_the_file_and_the_rule(tmp_path, r):
    """The exact one-line messages a reader gets."""
    f = tmp_path / "x.json"
    with pytest.raises(model.ResultError) as exc:
        model.load(f)
    assert str(exc.value) == f"{f}: no such result file"
    f.write_text("{")
    with pytest.raises(model.ResultError) as exc:
        model.load(f)
    assert str(exc.value).startswith(f"{f}: not valid JSON: Expecting property name")
    with pytest.raises(model.ResultError) as exc:
        model.validate([])
    assert str(exc.value) == "<result>: (top): [] is not of type 'object'"
    m = a_measurement(r)
    i = r["measurements"].index(m)
    given = m["max"] * 2
    m["max"] = given
    with pytest.raises(model.ResultError) as exc:
        model.validate(r, "s")
    assert str(exc.value) == f"s: measurements/{i}: max={given} but samples give {max(m['samples'])}"
    m["max"] = max(m["samples"])
    r["measurements"].append(copy.deepcopy(m))
    with pytest.raises(model.ResultError) as exc:
        model.validate(r, "s")
    case = json.dumps(m["case"], sort_keys=True)
    assert str(exc.value) == f"s: measurements/{len(r['measurements']) - 1}: duplicate metric and case ('{m['metric']}', '{case}')"
    with pytest.raises(model.ResultError) as exc:
        model.summarize([])
    assert str(exc.value) == "a measurement needs at least one sample"
    assert model.SCHEMA_VERSION == model.schema()["properties"]["schema_version"]["const"]


def test_a_nested_error_path_is_slash_separated(r):
    r["measurements"][0]["case"] = "not a table"
    with pytest.raises(model.ResultError) as exc:
        model.validate(r, "s")
    assert str(exc.value).startswith("s: measurements/0/case: 'not a table' is not of type 'object'")


def test_a_summary_exactly_at_the_tolerance_passes(r):
    m = a_measurement(r)
    scale = 0.5 / m["median"]
    small = model.measurement(m["metric"], m["unit"], {**m["case"], "scaled": 1}, [s * scale for s in m["samples"]])
    r["measurements"].append(small)
    small["median"] = 0.5 + 1e-9 * 0.999          # just inside the absolute tolerance below 1
    model.validate(r)


def test_search_path_defaults(tmp_path, monkeypatch):
    """Unset variables: the committed results, then the reader's own; a Host is not local unless
    said so."""
    monkeypatch.delenv("PERF_CASEBOOK_RESULTS", raising=False)
    monkeypatch.delenv("PERF_CASEBOOK_LOCAL", raising=False)
    assert results.search_path(tmp_path) == [(tmp_path / "results", False), (tmp_path / "local-results", True)]
    monkeypatch.setenv("PERF_CASEBOOK_RESULTS", "/a:/b")
    monkeypatch.setenv("PERF_CASEBOOK_LOCAL", "0")
    assert results.search_path(tmp_path) == [(tmp_path / "results", False), (Path("/a"), False), (Path("/b"), False)]
    h = results.Host("x", tmp_path)
    assert h.local is False and h.title == "x"


def test_a_change_and_its_revert_leave_a_result_fresh(tmp_path):
    """Staleness compares the lab's code, not the commits that touched it."""
    import subprocess
    from labkit import stale

    def git(*a):
        subprocess.run(["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@t", *a],
                       check=True, capture_output=True)
    (tmp_path / "labs" / "x").mkdir(parents=True)
    (tmp_path / "labs" / "x" / "run.sh").write_text("echo 1\n")
    git("init", "-q")
    git("add", ".")
    git("commit", "-qm", "lab")
    run = subprocess.run(["git", "-C", str(tmp_path), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    result = {"lab": "x", "run": {"git_commit": run, "git_dirty": False}}
    (tmp_path / "labs" / "x" / "run.sh").write_text("echo 2\n")
    git("commit", "-qam", "change")
    stale.last_change.cache_clear()
    assert stale.staleness(result, tmp_path)[0] == "stale"
    git("revert", "--no-edit", "HEAD")
    stale.last_change.cache_clear()
    stale.same_code.cache_clear()
    state, why = stale.staleness(result, tmp_path)
    assert state == "fresh" and "changed back" in why


def test_the_schema_is_read_once_per_process():
    """Every load validates against the same parsed schema: read from disk once."""
    assert model.schema() is model.schema()
    assert model.schema()["$schema"].endswith("2020-12/schema")
