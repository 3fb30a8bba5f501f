"""labkit/run/supervisor.py's Lab: the declaration lab.sh's ``lab_main`` passes in the environment
(PCB_LAB_NAME, PCB_LAB_TITLE, PCB_LAB_TOOLS, PCB_LAB_GROUPS: one ``group<TAB>description<TAB>[always]``
a line) and the groups a run selects. The fake lab (tests/test_lab_contract.py) runs the rest."""

from __future__ import annotations

from pathlib import Path

from labkit.run import supervisor

DECLARED = {"PCB_LAB_NAME": "demo", "PCB_LAB_TITLE": "A demo", "PCB_LAB_TOOLS": "fio perf",
            "PCB_LAB_GROUPS": "setup\tbuild the programs\talways\nwork\tthe measurements\t\nextra\tmore\t"}


def test_a_lab_without_declared_groups_has_none(monkeypatch):
    for key in DECLARED:
        monkeypatch.delenv(key, raising=False)
    lab = supervisor.Lab.from_env("labs/demo/run.sh", ["--quick"])
    assert (lab.script, lab.name, lab.title, lab.tools) == (Path("labs/demo/run.sh"), "", "", "")
    assert lab.groups == [] and lab.selected() == []
    assert lab.args == ["--quick"] and lab.argv == []
    assert (lab.quick, lab.recover, lab.out, lab.only, lab.host, lab.guest) == (False, False, None, None, None, None)


def test_the_declared_groups_and_what_only_selects(monkeypatch):
    for key, value in DECLARED.items():
        monkeypatch.setenv(key, value)
    args = ["--only", "extra"]
    lab = supervisor.Lab.from_env("run.sh", args)
    assert (lab.name, lab.title, lab.tools) == ("demo", "A demo", "fio perf")
    assert lab.groups == [("setup", "build the programs", True), ("work", "the measurements", False), ("extra", "more", False)]
    assert lab.args == args and lab.args is not args
    assert [g[0] for g in lab.selected()] == ["setup", "work", "extra"]           # no --only: every group
    lab.only = ["extra"]
    assert [g[0] for g in lab.selected()] == ["setup", "extra"]                   # always groups run too
    lab.only = []
    assert [g[0] for g in lab.selected()] == ["setup"]
    other = supervisor.Lab.from_env("run.sh", [])
    other.argv.append("--x")
    assert lab.argv == []                                                         # each lab its own list


def test_the_supervisor_refuses_group_lines_lab_sh_does_not_write(monkeypatch, capsys):
    """The other end of PCB_LAB_GROUPS: Lab.from_env reads three tab-separated fields per line
    and refuses any other shape with one line (exit 2) instead of guessing the missing fields."""
    monkeypatch.setenv("PCB_LAB_NAME", "demo")
    monkeypatch.setenv("PCB_LAB_GROUPS", "work\tthree steps\t\nsetup\tknobs\talways\n")
    lab = supervisor.Lab.from_env("labs/demo/run.sh", [])
    assert lab.groups == [("work", "three steps", False), ("setup", "knobs", True)]
    for bad in ("work\tthree steps\n", "work\tthree\tsteps\tmore\n", "work\tthree steps\tallways\n"):
        monkeypatch.setenv("PCB_LAB_GROUPS", bad)
        assert supervisor.main(["labs/demo/run.sh", "0"]) == 2
        err = capsys.readouterr().err.splitlines()
        assert len(err) == 1 and err[0].startswith("lab.sh: PCB_LAB_GROUPS line "), err
