"""The workflow's lab job run on this machine (.github/run-lab-job.py): its steps are the
workflow's, in the workflow's order, and in quick mode they produce a valid result; and the
workflow's own rules: root only through an environment-keeping sudo, main never cancelled,
caches for pip, .deb archives, guest images and built tools."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from labkit import model
from labrun import is_root

ROOT = Path(__file__).resolve().parent.parent
WORKFLOW = ROOT / ".github" / "workflows" / "labs.yml"
RUNNER = ROOT / ".github" / "run-lab-job.py"


def job_steps(job="labs") -> list[dict]:
    return yaml.safe_load(WORKFLOW.read_text())["jobs"][job]["steps"]


def test_local_runner_lists_the_workflow_steps_in_order():
    proc = subprocess.run([sys.executable, str(RUNNER), "--list"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    listed = re.findall(r"^\[\d+\] (?:not run here \(GitHub's action\): (\S+)  .*|.*?: (bash .*))$", proc.stderr, re.M)
    expect = [(s["uses"].split("@")[0], "") if "uses" in s else ("", s["run"].strip()) for s in job_steps()]
    assert listed == expect


def test_every_run_step_is_a_step_of_lab_job_sh():
    script = (ROOT / ".github" / "lab-job.sh").read_text()
    known = set(re.search(r"^  \*\) echo \"usage: \$0 ([^\"]+)\"", script, re.M).group(1).split("|"))
    for job in ("labs", "test"):
        for s in job_steps(job):
            if "run" in s and s["run"].startswith("bash .github/lab-job.sh"):
                assert s["run"].split()[2] in known, s
    order = [s["run"].split()[2] for s in job_steps() if "run" in s]
    assert order == ["tools", "debs", "venv", "kernel", "auditd-stop", "run", "auditd-restore", "apt-save"]
    assert all(s.get("if") == "always()" for s in job_steps() if "run" in s and s["run"].split()[2] in
               ("auditd-restore", "apt-save"))


def test_unknown_workflow_expression_stops_the_runner():
    import importlib.util
    spec = importlib.util.spec_from_file_location("run_lab_job", RUNNER)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert mod.expand("a ${{ matrix.lab }} b", {"${{ matrix.lab }}": "x"}) == "a x b"
    with pytest.raises(mod.UnknownExpression, match=r"\$\{\{ secrets.X \}\}"):
        mod.expand("${{ secrets.X }}", {})


def test_workflow_rules():
    text = WORKFLOW.read_text()
    wf = yaml.safe_load(text)
    assert wf["concurrency"]["cancel-in-progress"] == "${{ github.ref != 'refs/heads/main' }}"
    for job in ("labs", "test"):
        caches = [s for s in wf["jobs"][job]["steps"] if s.get("uses", "").startswith("actions/cache@")]
        assert caches, job
        paths = caches[0]["with"]["path"]
        for p in ("~/.cache/pip", "~/.cache/pcb-apt", "~/.cache/perf-casebook", ".tools"):
            assert p in paths, (job, p)
    # root only through an environment-keeping sudo (our tools live in .tools/bin and the
    # runner's PATH, which sudo's secure_path would drop)
    for line in re.findall(r"^\s*run: (.*)$", text, re.M):
        if "sudo" in line:
            assert 'sudo env "PATH=$PATH"' in line, line
    script = (ROOT / ".github" / "lab-job.sh").read_text()
    assert 'sudo env "PATH=$PATH"' in script and "modprobe kyber-iosched" in script
    assert "systemctl stop auditd" in script and "systemctl start auditd" in script


def test_ci_runs_the_readme_full_suite_command():
    assert "exec make test-all" in (ROOT / ".ci" / "run").read_text()
    readme = (ROOT / "README.md").read_text()
    assert "$ make test-all" in readme and "$ make test " in readme
    makefile = (ROOT / "Makefile").read_text()
    # make test: the fast tier, on every CPU; make test-all: that tier, then the rest in two
    # parts, the second (labs, in guests too, and timing) one test at a time: together, every
    # test once. A guest booted without a lab measures nothing and holds no lab lock.
    fast = re.search(r"^FAST := (.+)$", makefile, re.M)[1]
    assert re.search(r"^XDIST := -n auto --dist loadfile$", makefile, re.M)
    assert re.search(r"^test:.*\n\t\$\(PY\) -m pytest -m \"\$\(FAST\)\" \$\(XDIST\)", makefile, re.M)
    assert re.search(r"^test: venv$", makefile, re.M)   # the fast tier needs only the venv
    body = re.search(r"^test-all: setup test\n((?:\t.*\n)+)", makefile, re.M)[1].splitlines()
    parts = [(re.search(r'-m "([^"]+)"', line)[1].replace("$(FAST)", fast), line) for line in body]
    assert len(parts) == 2 and "-n auto" in parts[0][1] and " -n " not in parts[1][1], body
    from itertools import product
    from _pytest.mark.expression import Expression
    marks = ("lab", "guest", "slow", "browser", "timing")
    for present in product((False, True), repeat=len(marks)):
        on = {m for m, p in zip(marks, present) if p}
        chosen = [e for e in (fast, *(p for p, _ in parts)) if Expression.compile(e).evaluate(lambda m, **_: m in on)]
        assert len(chosen) == 1, (on, chosen)
        if on & {"lab", "timing"}:
            assert chosen[0] == parts[1][0], on    # never beside another test
        elif "guest" in on:
            assert chosen[0] == parts[0][0], on    # beside the site's tests, on every CPU


@pytest.mark.lab
@pytest.mark.skipif(not is_root(), reason="the lab job runs as root (apt, the lab's host changes)")
def test_the_lab_job_runs_here_in_quick_mode(lat_tcp_quick):
    """Every step of the workflow's lab job, in order, for lat_tcp in quick mode (the session's
    lat_tcp run is that job's, as root: conftest.py's lat_tcp_quick)."""
    proc, host_dir, _ = lat_tcp_quick
    assert proc.returncode == 0, proc.stderr[-4000:]
    ran = re.findall(r"^\[\d+\] exit (\d+)", proc.stderr, re.M)
    assert ran == ["0"] * 8, proc.stderr[-3000:]
    r = model.load(host_dir / "lat_tcp.json")
    assert r["run"]["quick"] is True and r["host"]["label"] == "test-quick"
    assert any(a["kind"] == "cast" for a in r["artifacts"])
