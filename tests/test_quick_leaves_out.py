"""Quick runs leave out the groups a lab's manifest names (``quick_leaves_out`` in
labs/<lab>/lab.toml): every name there is a group the lab declares, every claim that reads
such a group says so (``group``), as the lab's committed reference shows, and the claims engine
turns exactly those claims into "not applicable" on a quick run that left the group out,
while a result made before the leave-out (no ``run.left_out``) keeps its verdicts."""

from __future__ import annotations

import copy
import re
from pathlib import Path

import pytest

from labkit import manifest, model
from labkit.stats import claims
import refhost

ROOT = Path(__file__).resolve().parent.parent
LABS = sorted(p.parent.name for p in ROOT.glob("labs/*/run.sh"))


def declared_groups(lab: str) -> list[str]:
    """The groups run.sh declares (``lab_group NAME ...`` lines), in order."""
    text = (ROOT / "labs" / lab / "run.sh").read_text()
    return re.findall(r"^\s*lab_group\s+([a-z0-9_]+)\s", text, re.M)


def data_groups(claim: dict, result: dict) -> set[str]:
    """The groups of the steps behind ``claim``'s data in ``result``: the steps of the
    measurements its sides select, or its step (a ``step`` claim)."""
    group = {s["name"]: s["group"] for s in result["steps"]}
    if claim["kind"] == "step":
        _, step = claims._claim_step(claim, result)
        return {step["group"]} if step else set()
    sides = [claim["a"], claim["b"]] if "a" in claim else [claim["where"]]
    return {group[m["step"]] for w in sides for m in claims.select(result, claim["metric"], w) if m.get("step") in group}


def check_gate(name: str, claim: dict, groups: set[str], gone: set[str]) -> None:
    """A claim (or an exercise's check) whose data come from ``groups`` in the reference gates on
    the left-out group it reads: with ``group`` set, that group is one of its data's groups and the
    only one a quick run leaves out (a check may compare a left-out group with one a quick run
    keeps, as fstime's dd against its copy); without it, none of its groups is left out.

    Raises:
        AssertionError: naming the claim and the groups."""
    if claim.get("group"):
        assert claim["group"] in groups and groups & gone <= {claim["group"]}, \
            f"{name}: says group {claim['group']}, its data come from {sorted(groups)}"
    else:
        assert not groups & gone, f"{name}: reads {sorted(groups & gone)}, which a quick run leaves out: add group = ..."


@pytest.mark.parametrize("lab", LABS)
def test_left_out_groups_are_declared_and_explained(lab):
    gone = manifest.load(ROOT / "labs" / lab).get("quick_leaves_out", {})
    groups = declared_groups(lab)
    assert set(gone) <= set(groups), f"labs/{lab}/lab.toml quick_leaves_out names no group of run.sh: {set(gone) - set(groups)}"
    assert len(gone) < len(groups), "a quick run must run something"
    for g, why in gone.items():
        assert why.strip() and "\n" not in why, g


@pytest.mark.parametrize("lab", LABS)
def test_claims_name_the_left_out_group_they_read(lab):
    """Against the lab's reference (a full run): a claim whose data come from a left-out group
    declares that group, and a declared group is the one its data come from."""
    gone = set(manifest.load(ROOT / "labs" / lab).get("quick_leaves_out", {}))
    ref = model.load(refhost.result(lab))
    assert not ref["run"]["quick"]
    for c in claims.load(ROOT / "labs" / lab / "claims.toml"):
        groups = data_groups(c, ref)
        check_gate(c["id"], c, groups, gone)
        # a claim that names its group reads that group alone (only an exercise's check may mix)
        assert not c.get("group") or groups == {c["group"]}, f"{c['id']}: says group {c['group']}, its data come from {sorted(groups)}"
        assert c.get("group") or groups or c["kind"] == "step" or c.get("requires"), f"{c['id']}: no data in the reference"


def _quick(result: dict, left_out: dict | None) -> dict:
    r = copy.deepcopy(result)
    r["run"]["quick"] = True
    if left_out is not None:
        r["run"]["left_out"] = left_out
    return r


@pytest.mark.parametrize("lab", [lab for lab in LABS if manifest.load(ROOT / "labs" / lab).get("quick_leaves_out")])
def test_engine_marks_exactly_the_left_out_claims(lab):
    """The reference's own data, relabelled as a quick run that left the groups out: the claims
    of those groups become "not applicable" with the group and the reason, every other verdict
    is the reference's; without ``left_out`` (a quick run made before) nothing changes."""
    gone = manifest.load(ROOT / "labs" / lab)["quick_leaves_out"]
    spec = claims.load(ROOT / "labs" / lab / "claims.toml")
    ref = model.load(refhost.result(lab))
    before = {v["id"]: v for v in claims.evaluate(spec, _quick(ref, None))}
    after = {v["id"]: v for v in claims.evaluate(spec, _quick(ref, gone))}
    model.validate(_quick(ref, gone) | {"claims": list(after.values())}, "derived quick result")
    for c in spec:
        v = after[c["id"]]
        if c.get("group") in gone:
            assert v["verdict"] == "not applicable", (c["id"], v)
            assert f"leaves out group {c['group']} ({gone[c['group']]})" in v["reason"]
        else:
            assert v == before[c["id"]], c["id"]


def test_a_full_run_ignores_left_out():
    """``left_out`` means something only on a quick run: on a full run's result the claims of
    those groups are evaluated as ever."""
    lab = "lat_tcp"
    spec = claims.load(ROOT / "labs" / lab / "claims.toml")
    ref = model.load(refhost.result(lab))
    full = copy.deepcopy(ref)
    full["run"]["left_out"] = {"sockperf": "a reason"}
    assert [v["verdict"] for v in claims.evaluate(spec, full)] == [v["verdict"] for v in claims.evaluate(spec, ref)]


def test_the_group_check_sees_a_claim_that_drops_its_group():
    """The check above can fail: a sockperf claim without its ``group`` reads a group that a
    quick run leaves out, which the check reports."""
    lab = "lat_tcp"
    ref = model.load(refhost.result(lab))
    c = next(c for c in claims.load(ROOT / "labs" / lab / "claims.toml") if c.get("group") == "sockperf")
    assert data_groups(c, ref) == {"sockperf"}
    bare = {k: v for k, v in c.items() if k != "group"}
    assert data_groups(bare, ref) & set(manifest.load(ROOT / "labs" / lab)["quick_leaves_out"])


@pytest.mark.parametrize("lab", LABS)
def test_exercises_name_the_left_out_group_they_read(lab):
    """The same for the checks of the lab's exercises (exercises.toml, cards/*.exercises.toml),
    which `labkit check` evaluates on a reader's quick run as claims."""
    import tomllib
    gone = set(manifest.load(ROOT / "labs" / lab).get("quick_leaves_out", {}))
    ref = model.load(refhost.result(lab))
    files = [ROOT / "labs" / lab / "exercises.toml", *sorted((ROOT / "labs" / lab / "cards").glob("*.exercises.toml"))]
    seen = 0
    for f in files:
        for ex in tomllib.loads(f.read_text()).get("exercise", []) if f.exists() else []:
            c = claims.exercise_claim(ex)
            groups = data_groups(c, ref)
            seen += 1
            check_gate(f"{f.name} {ex['id']}", c, groups, gone)
    assert seen
