"""Tool versions in a result come from each tool's own version flag: run the real tools
installed here (a tool that is not installed is skipped, with the reason) and check that
each answer reads like a version, never a usage line or "unknown"."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from labkit.run import tools

ROOT = Path(__file__).resolve().parent.parent


def lab_tools() -> list[str]:
    """Every tool a lab names in its ``lab_define`` (labs/<lab>/run.sh), plus the tools
    with a version flag of their own in labkit.run.tools."""
    names = []
    for run in sorted((ROOT / "labs").glob("*/run.sh")):
        m = re.search(r'^lab_define\s+\S+\s+"[^"]*"((?:\s*\\\n)?[^\n]*)', run.read_text(), re.M)
        assert m, f"{run}: no lab_define"
        names += m.group(1).replace("\\", " ").split()
    return sorted(set(names) | set(tools.VERSION_ARGS))


@pytest.mark.parametrize("tool", lab_tools())
def test_version_of_installed_tool(tool, monkeypatch):
    monkeypatch.setenv("PATH", f"{ROOT / '.tools' / 'bin'}:{os.environ['PATH']}")  # as labs/lib/lab.sh sets it
    if not shutil.which(tool):
        pytest.skip(f"{tool} is not installed here" + (" (make setup installs inferno)" if tool.startswith("inferno-") else ""))
    v = tools.version(tool)
    assert tools.looks_like_version(v), f"{tool}: {v!r}"
    assert not v.startswith("unknown"), v


def test_committed_bogus_versions_are_not_versions():
    """The values older results recorded for mkfs.xfs (its usage line), mkfs.ext4 (an error),
    auditctl and auditd ("unknown") and iostat (its usage line) are recognised as no version."""
    bad = []
    for path in sorted((ROOT / "results").glob("*/*.json")):
        for tool, value in json.loads(path.read_text())["tools"].items():
            if tool in ("mkfs.xfs", "mkfs.ext4", "auditctl", "auditd", "iostat") and not re.search(r"version|mke2fs|package", value):
                bad.append(value)
    if not bad:
        pytest.skip("no committed result holds one of the old bogus versions any more")
    for value in bad:
        assert not tools.looks_like_version(value), value


@pytest.mark.parametrize("tool, wrong_flag", [("auditd", "-v"), ("mkfs.ext4", "--version"), ("iostat", "--version"),
                                              ("mkfs.xfs", "--version"), ("auditctl", "--version")])
def test_usage_and_errors_are_not_versions(tool, wrong_flag):
    """What these tools really print for a flag they do not know (a usage text, an error)
    holds no line that passes for a version."""
    if not shutil.which(tool):
        pytest.skip(f"{tool} is not installed here")
    proc = subprocess.run([tool, wrong_flag], capture_output=True, text=True, timeout=10, stdin=subprocess.DEVNULL)
    lines = [l.strip() for l in (proc.stdout + proc.stderr).splitlines() if l.strip()]
    assert lines, f"{tool} {wrong_flag} printed nothing"
    assert not any(tools.looks_like_version(l) for l in lines), lines


def test_unknown_is_not_a_version():
    assert not tools.looks_like_version("unknown") and not tools.looks_like_version("not installed")


def test_missing_tool():
    assert tools.version("no-such-tool-pcb") == "not installed"
