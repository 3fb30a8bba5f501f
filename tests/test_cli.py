"""labkit's command line on the committed results and a real second host."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys

import pytest

from labkit import model
from labkit.view.render import fmt


def labkit(*args, env=None):
    return subprocess.run([sys.executable, "-m", "labkit", *args], capture_output=True, text=True,
                          env=dict(os.environ, **(env or {})))


def test_show_prints_medians(root):
    r = model.load(next((root / "results").glob("*/lat_tcp.json")))
    proc = labkit("show", "lat_tcp")
    assert proc.returncode == 0, proc.stderr
    for m in r["measurements"][:5]:
        assert fmt(m["median"]) in proc.stdout
    assert "claims:" in proc.stdout


def test_show_unknown_lab_fails():
    proc = labkit("show", "no_such_lab")
    assert proc.returncode == 1 and "no result for lab" in proc.stderr


@pytest.mark.lab
def test_hosts_and_compare_with_second_host(lat_tcp_quick, root):
    _, host_dir, _ = lat_tcp_quick
    env = {"PERF_CASEBOOK_RESULTS": str(host_dir.parent)}
    hosts = labkit("hosts", env=env)
    assert hosts.returncode == 0 and "test-quick" in hosts.stdout
    ref = model.load(next((root / "results").glob("*/lat_tcp.json")))
    cmp = labkit("compare", ref["host"]["label"], "test-quick", env=env)
    assert cmp.returncode == 0, cmp.stderr
    assert f"ratio to {ref['host']['label']}" in cmp.stdout
    quick = model.load(host_dir / "lat_tcp.json")
    # a measurement both hosts made (same metric and case), the unpinned pair's if there is one
    common = [(m, a) for m in quick["measurements"] for a in ref["measurements"]
              if a["metric"] == m["metric"] and a["case"] == m["case"] and a["median"]]
    assert common, "the quick run and the reference share no measurement"
    m, a = next(((m, a) for m, a in common if m["case"].get("experiment") == "free"), common[0])
    assert f"{m['median'] / a['median']:.2f}" in cmp.stdout


def test_validate_rejects_a_bad_file(tmp_path):
    bad = tmp_path / "x.json"
    bad.write_text('{"lab": "x"}')
    proc = labkit("validate", str(bad))
    assert proc.returncode == 1 and "x.json" in proc.stderr


def test_bad_usage_exits_2():
    assert labkit("nosuchcommand").returncode == 2


def test_reevaluate_reports_and_writes_only_when_asked(root, tmp_path):
    """``labkit reevaluate`` leaves a result as it is and names the verdicts that differ; with
    ``--write`` it rewrites the stored ones. A stored verdict turned around by hand is found."""
    src = next((root / "results").glob("*/lat_tcp.json"))
    f = tmp_path / "lat_tcp.json"
    assert labkit("reevaluate", "--write", str(tmp_path / "none.json")).returncode == 1
    f.write_text(src.read_text())
    assert labkit("reevaluate", "--write", str(f)).returncode == 0
    decided = next(c for c in model.load(f)["claims"] if c["verdict"] in ("holds", "fails"))
    r = model.load(f)
    for c in r["claims"]:
        if c["id"] == decided["id"]:
            c["verdict"] = "fails" if decided["verdict"] == "holds" else "holds"
    model.write_atomic(f, r)
    before = f.read_bytes()
    report = labkit("reevaluate", str(f))
    assert report.returncode == 0 and f"1 verdicts differ from the stored ones: {decided['id']}" in report.stdout
    assert f.read_bytes() == before
    write = labkit("reevaluate", "--write", str(f))
    assert write.returncode == 0 and "(rewritten)" in write.stdout
    assert next(c for c in model.load(f)["claims"] if c["id"] == decided["id"])["verdict"] == decided["verdict"]


@pytest.mark.skipif(not shutil.which("inferno-flamegraph"), reason="inferno not installed (make setup)")
def test_diff_flame_negate_draws_on_the_before_stacks(tmp_path):
    """The differential graph is drawn on --after's stacks, so a stack only --before has shows
    in it only with --negate (drawn on --before's stacks), and one only --after has the other
    way round."""
    before, after = tmp_path / "before.folded", tmp_path / "after.folded"
    before.write_text("main;gone_in_after 40\nmain;in_both 60\n")
    after.write_text("main;in_both 70\nmain;new_in_after 30\n")
    for negate in (False, True):
        svg = tmp_path / f"diff-{negate}.svg"
        p = labkit("diff-flame", "--before", str(before), "--after", str(after), "--folded", str(tmp_path / "d.folded"),
                   "--svg", str(svg), "--title", "t", *(["--negate"] if negate else []))
        assert p.returncode == 0, p.stderr
        text = svg.read_text()
        assert ("gone_in_after" in text) == negate and ("new_in_after" in text) != negate, negate
        fill = {m[0]: tuple(map(int, m[1:])) for m in re.findall(
            r"<title>(\w+) \([^<]*</title><rect [^>]*fill=\"rgb\((\d+),(\d+),(\d+)\)", text)}
        red, blue = (lambda c: c[0] > c[2]), (lambda c: c[2] > c[0])
        assert red(fill["in_both"]), fill                        # red is more in --after, either way
        assert blue(fill["gone_in_after"]) if negate else red(fill["new_in_after"]), fill
