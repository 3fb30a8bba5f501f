"""Step cases are typed by the lab's declaration (lab.toml's [case], labkit/steps.py), not guessed:
each declared type round-trips from a ``--case KEY=VALUE`` field through a result file, and every
committed result agrees with its lab's declaration."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from labkit import manifest, model, record, steps
import refhost

ROOT = Path(__file__).resolve().parents[1]
RESULTS = sorted((ROOT / "results").glob("*/*.json"))

TYPES = {"kernel": "str", "rep": "int", "ratio": "float", "warm": "bool", "label": "str"}

COLLECT = '''
def collect(run):
    for s in run.steps:
        run.add("seconds", "s", s["case"], [s["seconds"]], s["name"])
'''


def _lab(tmp_path: Path, types: dict[str, str]) -> Path:
    lab = tmp_path / "labs" / "typed"
    lab.mkdir(parents=True)
    (lab / "lab.toml").write_text("[case]\n" + "".join(f'{k} = "{t}"\n' for k, t in types.items()))
    (lab / "record.py").write_text(COLLECT)
    return lab


def _run(tmp_path: Path, cases: dict[str, list[str]]) -> Path:
    """A run directory as lab.sh leaves it: one ok step per name, its --case fields in raw/NAME.case."""
    run = tmp_path / "run"
    (run / "raw").mkdir(parents=True)
    shutil.copy(refhost.RESULTS / "lat_tcp" / "host.json", run / "host.json")
    (run / "steps.tsv").write_text("".join(f"{n}\tmain\tok\t0\t0.5\tsuccess\t\n" for n in cases))
    for name, fields in cases.items():
        (run / "raw" / f"{name}.case").write_text("".join(f + "\n" for f in fields))
        (run / "raw" / f"{name}.cmd").write_text("true")
    return run


def test_every_declared_type_round_trips_through_a_result(tmp_path):
    lab = _lab(tmp_path, TYPES)
    run = _run(tmp_path, {
        "a": ["kernel=6.1", "rep=1", "ratio=0.5", "warm=true", "label=007"],
        "b": ["kernel=5.10", "rep=-2", "ratio=3", "warm=false", "label=1e3"],
        "c": ["kernel=6.10", "rep=10", "ratio=1.5e-3", "warm=true", "label="],
    })
    collected = record.Run("typed", run, True, lab)
    record.load_lab_collector(lab)(collected)
    base = model.load(refhost.RESULTS / "lat_tcp.json")
    path = tmp_path / "typed.json"
    model.write_atomic(path, {**base, "lab": "typed", "steps": collected.steps,
                              "measurements": collected.measurements, "artifacts": [], "claims": []})
    r = model.load(path)
    want = [
        {"kernel": "6.1", "rep": 1, "ratio": 0.5, "warm": True, "label": "007"},
        {"kernel": "5.10", "rep": -2, "ratio": 3.0, "warm": False, "label": "1e3"},
        {"kernel": "6.10", "rep": 10, "ratio": 1.5e-3, "warm": True, "label": ""},
    ]
    for got in ([s["case"] for s in r["steps"]], [m["case"] for m in r["measurements"]]):
        assert got == want
        assert [[type(v) for v in c.values()] for c in got] == [[str, int, float, bool, str]] * 3
    # the file on disk, not only the dict: JSON keeps "5.10" a string and 3.0 a number
    raw = json.loads(path.read_text())
    assert [s["case"]["kernel"] for s in raw["steps"]] == ["6.1", "5.10", "6.10"]


@pytest.mark.parametrize("field, message", [
    ("kernel", "'kernel' is not KEY=VALUE"),
    ("Kernel=6.1", "'Kernel=6.1' is not KEY=VALUE"),
    ("=6.1", "'=6.1' is not KEY=VALUE"),
    ("arch=arm64", "case key 'arch' is not declared"),
    ("rep=1.0", "case rep=1.0: not of type int"),
    ("rep=", "case rep=: not of type int"),
    ("ratio=fast", "case ratio=fast: not of type float"),
    ("warm=yes", "case warm=yes: not of type bool"),
    ("warm=True", "case warm=True: not of type bool"),
])
def test_a_bad_case_field_is_refused_when_recorded(tmp_path, field, message):
    run = _run(tmp_path, {"a": [field]})
    with pytest.raises(steps.CaseError, match=message.replace("(", r"\(")) as exc:
        record.Run("typed", run, True, _lab(tmp_path, TYPES))
    assert str(run / "raw" / "a.case") in str(exc.value)


def test_a_key_given_twice_is_refused():
    with pytest.raises(steps.CaseError, match="'rep' given twice"):
        steps.parse(["rep=1", "rep=2"], TYPES)


def test_steps_tsv_is_read_by_its_declared_columns(tmp_path):
    f = tmp_path / "steps.tsv"
    f.write_text("a\tg\tok\t0\t1.5\tsuccess\t\n\nb\tg\tskipped\t\t0\tsuccess\tneeds root\tx\nc\tg\tfailed\n")
    rows = steps.read_tsv(f)
    assert [r["name"] for r in rows] == ["a", "b", "c"]
    assert rows[1]["reason"] == "needs root" and rows[1]["status"] == "skipped"
    assert rows[2] == {**dict.fromkeys(steps.COLUMNS, ""), "name": "c", "group": "g", "status": "failed"}


def test_the_environment_words_are_what_lab_sh_reads():
    assert steps.env_words({"kernel": "str", "rep": "int"}) == "kernel=str rep=int"


def test_every_lab_declares_its_keys_with_a_known_type():
    for m in manifest.labs():
        assert m["case"], f"labs/{m['name']}/lab.toml declares no case keys"
        assert steps.declared(ROOT / "labs" / m["name"]) == m["case"]


@pytest.mark.parametrize("path", RESULTS, ids=[f"{p.parent.name}/{p.stem}" for p in RESULTS])
def test_committed_steps_are_typed_as_their_lab_declares(path):
    """Reading a committed run's raw/*.case with the lab's declaration gives the committed step
    cases (what the lab declares is what its results already hold)."""
    r = json.loads(path.read_text())
    types = steps.declared(ROOT / "labs" / r["lab"])
    again = record.read_steps(path.with_suffix(""), types)
    assert [s.get("case") for s in again] == [s.get("case") for s in r["steps"]]
    for s in r["steps"]:
        for k, v in (s.get("case") or {}).items():
            assert isinstance(v, {"str": str, "int": int, "float": float, "bool": bool}[types[k]]), (s["name"], k, v)


@pytest.mark.parametrize("path", RESULTS, ids=[f"{p.parent.name}/{p.stem}" for p in RESULTS])
def test_no_measurement_disagrees_with_its_step(path):
    """A measurement that names its step (schema: measurements[].step) keeps its step's case values:
    every key the two cases share has the step's value. Keys that say how a step ran (``rep``,
    ``tool``) are dropped where repetitions pool into one measurement, never renamed or re-valued."""
    r = json.loads(path.read_text())
    by_name = {s["name"]: s for s in r["steps"]}
    bad = []
    for m in r["measurements"]:
        step = by_name.get(m.get("step")) if m.get("step") else None
        if step is None:
            continue
        for k, v in (step.get("case") or {}).items():
            if k in m["case"] and m["case"][k] != v:
                bad.append((m["metric"], step["name"], k, v, m["case"][k]))
    assert not bad, f"{len(bad)} measurements disagree with their step's case, e.g. {bad[:3]}"


@pytest.mark.parametrize("path", RESULTS, ids=[f"{p.parent.name}/{p.stem}" for p in RESULTS])
def test_measurement_cases_keep_the_declared_types(path):
    """A measurement's case key that the lab declares holds a value of the declared type (nvme's guest
    knob ``setting`` is a str for every knob: "1024" and "-20" as much as "kyber")."""
    r = json.loads(path.read_text())
    types = steps.declared(ROOT / "labs" / r["lab"])
    py = {"str": str, "int": int, "float": float, "bool": bool}
    bad = {(k, repr(v)) for m in r["measurements"] for k, v in m["case"].items()
           if k in types and type(v) is not py[types[k]]}
    assert not bad, sorted(bad)[:5]
