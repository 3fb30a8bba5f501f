"""The claims contract, for every lab: every claim names the original investigation's
conclusion it tests (``source``), says whether it is about time or speed (``timing``), and has a
role; conclusion claims cover the original's conclusions."""

from __future__ import annotations

from pathlib import Path

import pytest

from labkit.stats import claims

ROOT = Path(__file__).resolve().parent.parent
CLAIM_FILES = sorted((ROOT / "labs").glob("*/claims.toml"))


@pytest.mark.parametrize("path", CLAIM_FILES, ids=lambda p: p.parent.name)
def test_every_claim_has_a_source(path):
    missing = [c["id"] for c in claims.load(path) if not c.get("source")]
    assert not missing, f"{path}: claims without source (the original conclusion they test): {missing}"


@pytest.mark.parametrize("path", CLAIM_FILES, ids=lambda p: p.parent.name)
def test_every_claim_says_whether_it_is_about_speed(path):
    """``timing`` decides whether an emulated CPU's result may test a claim, so no committed claim
    leaves it to the default (true but for step claims): each says it."""
    import tomllib
    unsaid = [c["id"] for c in tomllib.loads(path.read_text())["claim"] if not isinstance(c.get("timing"), bool)]
    assert not unsaid, f"{path}: claims that do not say timing = true or false: {unsaid}"


def test_the_schema_refuses_a_claim_without_a_source(tmp_path):
    """claims.schema.json requires ``source``: a claims.toml whose claim lacks it does not load."""
    body = '[[claim]]\nid = "x"\nstatement = "s"\nrole = "ours"\nkind = "step"\nstep = "build"\n'
    (tmp_path / "ok.toml").write_text(body + 'source = "the original"\n')
    assert claims.load(tmp_path / "ok.toml")[0]["source"] == "the original"
    (tmp_path / "bad.toml").write_text(body)
    with pytest.raises(Exception, match="source"):
        claims.load(tmp_path / "bad.toml")



@pytest.mark.parametrize("path", CLAIM_FILES, ids=lambda p: p.parent.name)
def test_conclusions_and_roles(path):
    """Every claim has a role; a conclusion claim names a [[conclusion]] of the lab's
    original.toml; every conclusion there is tested by a conclusion claim or says why no host we
    have can test it; each lab has at least two conclusion claims."""
    from labkit import original
    spec = claims.load(path)
    orig = original.load(path.parent / "original.toml")
    ids = {c["id"]: c for c in orig["conclusion"]}
    tested = {c["conclusion"] for c in spec if c["role"] == "conclusion"}
    assert tested <= set(ids), f"conclusion ids not in original.toml: {sorted(tested - set(ids))}"
    untested = [i for i, c in ids.items() if i not in tested and not c.get("untestable")]
    assert not untested, f"conclusions with neither a claim nor a reason why none can test them: {untested}"
    assert not [i for i in tested if ids[i].get("untestable")], "a conclusion marked untestable has a claim"
    assert sum(c["role"] == "conclusion" for c in spec) >= 2, "fewer than two conclusion claims"
