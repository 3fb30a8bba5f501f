"""labkit/record.py: rederive, a committed result re-derived from its own raw outputs by the lab's
collector as it is now (``python -m labkit.record results/<host>/<lab>.json``). On a copy of a
committed result (the smallest), in tmp_path: the committed file is never rewritten here."""

from __future__ import annotations

import json
import runpy
import shutil
import sys
from pathlib import Path

import pytest

from labkit import model

ROOT = Path(__file__).resolve().parent.parent
COMMITTED = ROOT / "results" / "qemu-arm64-tcg" / "lat_tcp.json"


# runpy runs the module again as __main__, as `python -m` does; the imported copy is not used
@pytest.mark.filterwarnings("ignore:'labkit.record' found in sys.modules:RuntimeWarning")
def test_a_committed_result_rederives_to_itself(tmp_path, monkeypatch):
    copy = tmp_path / COMMITTED.name
    old = json.loads(COMMITTED.read_text())
    copy.write_text(json.dumps({**old, "measurements": [], "claims": []}))    # what it holds must come from the raw outputs
    shutil.copytree(COMMITTED.with_suffix(""), copy.with_suffix(""), symlinks=True)
    raw_before = sorted(str(p.relative_to(tmp_path)) for p in copy.with_suffix("").rglob("*"))
    # as a reader runs it, `python -m labkit.record FILE...`: the lab folder found from the result's lab
    monkeypatch.setattr(sys, "argv", ["labkit.record", str(copy)])
    runpy.run_module("labkit.record", run_name="__main__")
    new = model.load(copy)
    assert new["lab"] == old["lab"] == "lat_tcp"
    assert new["measurements"] == old["measurements"]
    from labkit.stats import claims
    assert [v["id"] for v in new["claims"]] == [c["id"] for c in claims.load(ROOT / "labs" / "lat_tcp" / "claims.toml")]
    assert new["host"] == old["host"] and new["tools"] == old["tools"]
    assert (new["run"]["start"], new["run"]["git_commit"]) == (old["run"]["start"], old["run"]["git_commit"])
    casts = [a for a in old["artifacts"] if a["kind"] == "cast"]     # added after recording: kept as they were
    assert casts and [a for a in new["artifacts"] if a["kind"] == "cast"] == casts
    assert sorted(str(p.relative_to(tmp_path)) for p in copy.with_suffix("").rglob("*")) == raw_before


def test_rederive_refuses_an_artifact_the_result_folder_lacks(tmp_path):
    """A collector that makes a file in its run directory (the copy rederive gives it) and keeps
    it as an artifact names a file the result's folder does not have: rederive refuses, naming
    it, and leaves the result file as it was."""
    from labkit import record
    copy = tmp_path / COMMITTED.name
    shutil.copy(COMMITTED, copy)
    shutil.copytree(COMMITTED.with_suffix(""), copy.with_suffix(""), symlinks=True)
    lab = tmp_path / "labs" / "lat_tcp"
    shutil.copytree(ROOT / "labs" / "lat_tcp", lab, ignore=shutil.ignore_patterns("tests", "__pycache__"))
    (lab / "record.py").write_text((lab / "record.py").read_text() + (
        "\n\n_collect = collect\n\n\ndef collect(run):\n    _collect(run)\n"
        "    (run.dir / 'made.log').write_text('made in the copy')\n    run.artifact('log', {}, 'made.log')\n"))
    before = copy.read_bytes()
    with pytest.raises(FileNotFoundError, match="the collector made artifacts its folder lacks: lat_tcp/made.log"):
        record.rederive(copy, lab)
    assert copy.read_bytes() == before
