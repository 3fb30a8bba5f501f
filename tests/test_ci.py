"""CI: the workflow lints clean (actionlint), and the runner script's output merges into the
site as one more host (real results from this machine's run, next to the committed ones)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import ROOT, build_site
from labkit import model
import refhost

ACTIONLINT = shutil.which("actionlint") or str(ROOT / ".tools" / "bin" / "actionlint")


@pytest.mark.skipif(not Path(ACTIONLINT).exists(), reason="actionlint not installed (make setup installs it with go)")
def test_workflows_lint_clean():
    files = sorted((ROOT / ".github" / "workflows").glob("*.yml"))
    assert files
    proc = subprocess.run([ACTIONLINT, *map(str, files)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_actions_are_pinned_by_sha():
    import re
    for wf in (ROOT / ".github" / "workflows").glob("*.yml"):
        for ref in re.findall(r"uses:\s*(\S+)", wf.read_text()):
            assert re.fullmatch(r"[\w.-]+/[\w.-]+@[0-9a-f]{40}", ref), f"{wf.name}: {ref} is not pinned by commit SHA"


@pytest.mark.lab
def test_ci_labs_output_is_a_host_with_a_cast(lat_tcp_quick):
    proc, host_dir, _ = lat_tcp_quick
    r = model.load(host_dir / "lat_tcp.json")
    casts = [a for a in r["artifacts"] if a["kind"] == "cast"]
    assert len(casts) == 1
    lines = (host_dir / casts[0]["path"]).read_text().splitlines()
    assert '"version": 2' in lines[0] and len(lines) > 10
    assert any("recording result" in l for l in lines), "the cast is of the same run that wrote the result"
    summary = (host_dir / "ci-labs.tsv").read_text().split("\t")
    assert summary[0] == "lat_tcp" and summary[1] == "0"


@pytest.mark.lab
@pytest.mark.slow
def test_merged_site_shows_both_hosts(lat_tcp_quick, tmp_path):
    _, host_dir, _ = lat_tcp_quick
    site = tmp_path / "site"
    proc = build_site(site, env={"PERF_CASEBOOK_RESULTS": str(host_dir.parent)})
    assert proc.returncode == 0, proc.stderr[-3000:]
    hosts = (site / "hosts" / "index.html").read_text()
    compare = (site / "compare" / "index.html").read_text()
    ref_label = refhost.HOST    # before the merged host in search order: the pair is "merged vs reference"
    for label in (ref_label, host_dir.name):
        assert label in hosts
    assert f"{host_dir.name} vs {ref_label}" in compare
    assert "within noise" in compare or "yes</td>" in compare
    assert (site / "results" / host_dir.name / "lat_tcp" / "run.cast").exists()
