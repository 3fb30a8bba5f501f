"""``labkit check LAB``: the chapter's exercises evaluated on the reader's own results.

The exercises file is tests/fixtures/check/exercises.toml (checks on lat_tcp's round trips and
its noserver step); the results are derived from the committed lat_tcp result (samples moved
between cases, a host made emulated), written to a temporary folder of host folders."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from labkit import cli, model, results
import refhost

ROOT = Path(__file__).resolve().parent.parent
EXERCISES = ROOT / "tests" / "fixtures" / "check" / "exercises.toml"
TCG = {"emulator": "qemu-system-aarch64", "accelerator": "tcg", "machine": "virt", "guest_cpu": "cortex-a72",
       "host_arch": "x86_64", "host_cpu": None, "host_label": None}


def committed() -> dict:
    return json.loads((refhost.RESULTS / "lat_tcp.json").read_text())


def write_host(base: Path, label: str, change=None) -> Path:
    r = committed()
    r["host"]["label"] = label
    if change:
        change(r)
    model.validate(r, "derived")
    model.write_atomic(base / label / "lat_tcp.json", r)
    return base / label / "lat_tcp.json"


def overlap_pins(r: dict) -> None:
    """Both placements get the same-CPU samples: the difference is within noise."""
    ms = [m for m in r["measurements"] if m["metric"] == "round_trip" and m["case"].get("experiment") == "pinned"]
    same = [s for m in ms if m["case"].get("pin") == "same-cpu" for s in m["samples"]]
    for m in ms:
        m["samples"] = list(same)
        m.update(model.summarize(same))


def emulate(r: dict) -> None:
    r["host"]["arch"] = "aarch64"
    r["host"]["emulation"] = dict(TCG)


def check(capsys, *args) -> tuple[int, str, str]:
    code = cli.main(["check", "lat_tcp", "--exercises", str(EXERCISES), *args])
    out, err = capsys.readouterr()
    return code, out, err


def section(out: str, label: str) -> str:
    return out.split(f"== {label}:")[1].split("\n== ")[0]


def test_verdicts_per_exercise_and_host(tmp_path, capsys):
    write_host(tmp_path, "mine")
    write_host(tmp_path, "noisy", overlap_pins)
    write_host(tmp_path, "arm64-tcg", emulate)
    code, out, err = check(capsys, "--results", str(tmp_path))
    assert code == 0, err
    mine = section(out, "mine")
    assert "  same-cpu-faster: as predicted\n" in mine
    assert "  other-core-faster: not as predicted\n" in mine
    assert "  smt-sibling: untested (no round_trip measurement for experiment=pinned, pin=smt-sibling)" in mine
    assert "  no-server: as predicted\n" in mine
    noisy = section(out, "noisy")
    assert "  same-cpu-faster: inconclusive\n" in noisy and "straddles" in noisy
    tcg = section(out, "arm64-tcg")
    assert "emulated aarch64 (QEMU TCG on x86_64): timings are not hardware" in tcg
    assert "  same-cpu-faster: not applicable (emulated CPU: timings are not hardware)" in tcg
    assert "  no-server: as predicted\n" in tcg  # behaviour, not timing: evaluated on an emulated CPU


def test_a_host_folder_works_too(tmp_path, capsys):
    path = write_host(tmp_path, "mine")
    code, out, _ = check(capsys, "--results", str(path.parent))
    assert code == 0 and out.startswith(f"== mine: {path}")


def test_default_is_local_results(tmp_path, capsys, monkeypatch):
    tree = tmp_path / "repo"
    tree.mkdir()
    (tree / "labs").symlink_to(ROOT / "labs")
    monkeypatch.setattr(results, "ROOT", tree)
    code, _, err = check(capsys)
    assert code == 1 and f"no result of lat_tcp in {tree / 'local-results'}" in err and "run.sh" in err
    write_host(tree / "local-results", "mine")
    code, out, _ = check(capsys)
    assert code == 0 and "  same-cpu-faster: as predicted" in out


def test_bad_exercises_file_fails(tmp_path, capsys):
    write_host(tmp_path, "mine")
    bad = tmp_path / "exercises.toml"
    bad.write_text(EXERCISES.read_text().replace('relation = "less"', 'relation = "smaller"', 1))
    code = cli.main(["check", "lat_tcp", "--results", str(tmp_path), "--exercises", str(bad)])
    assert code == 1 and "$.exercise[0].check.relation: 'smaller' is not one of" in capsys.readouterr().err


@pytest.mark.parametrize("args, match", [
    ([], "the following arguments are required: lab"),
    (["no_such_lab"], "no lab 'no_such_lab'"),
    (["lat_tcp", "--results", "/nonexistent/pcb"], "--results /nonexistent/pcb: no such folder"),
    (["lat_tcp", "--exercises", "/nonexistent/pcb.toml"], "no such file"),
    (["lat_tcp", "--bogus"], "unrecognized arguments"),
])
def test_bad_usage_is_one_line_and_exit_2(args, match):
    proc = subprocess.run([sys.executable, "-m", "labkit", "check", *args], capture_output=True, text=True,
                          env=dict(os.environ), cwd=ROOT)
    assert proc.returncode == 2, proc
    assert proc.stdout == "" and len(proc.stderr.strip().splitlines()) == 1 and match in proc.stderr, proc.stderr
