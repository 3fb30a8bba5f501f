"""The lab's terminal between steps: the time left per group (from the previous run) and the
figures a group measured (the lab's collector on the run so far)."""

from __future__ import annotations

import json
import shutil

import pytest

from conftest import ROOT
from labkit.run import progress
import refhost

REF = refhost.RESULTS


def test_group_seconds_add_up_to_the_runs_wall_time():
    r = json.loads((REF / "lat_tcp.json").read_text())
    secs = progress.group_seconds(REF / "lat_tcp.json", quick=r["run"]["quick"])
    assert set(secs) == {s["group"] for s in r["steps"]}
    assert sum(secs.values()) == pytest.approx(r["run"]["duration_s"], rel=1e-6)
    assert progress.group_seconds(REF / "lat_tcp.json", quick=not r["run"]["quick"]) == {}
    assert progress.group_seconds(REF / "no-such.json", quick=False) == {}


def test_group_figures_name_the_case_that_differs(tmp_path):
    run = tmp_path / "run"
    shutil.copytree(REF / "lat_tcp", run)
    lines = progress.group_figures("lat_tcp", ROOT / "labs" / "lat_tcp", run, "pinned", quick=False)
    assert lines and all("median" in line and ", n = " in line for line in lines), lines
    assert any("pin=same-cpu" in line for line in lines), lines


def test_group_figures_say_nothing_when_the_collector_cannot_run(tmp_path):
    (tmp_path / "run").mkdir()
    assert progress.group_figures("lat_tcp", ROOT / "labs" / "lat_tcp", tmp_path / "run", "pinned", quick=False) == []
