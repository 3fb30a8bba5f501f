"""The fields every lab's ``perf script`` names (labs/lib/lab.sh ``LAB_PERF_*``): on this host's
perf they print the same bytes as perf's defaults for the same recording, so the fixtures of
``tests/fixtures/perf/`` (captured without ``-F``, each with its command) stand for what the labs
now run. Three short recordings, one of each kind the labs make: ``perf record -g`` of a command,
``perf record -a -g``, ``perf record -a`` of scheduler tracepoints. Needs root and perf; the
build-id cache and perf's configuration stay in ``tmp_path``."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

pytestmark = [pytest.mark.lab,
              pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("perf"), reason="needs root and perf")]


def lab_fields() -> dict[str, str]:
    """``LAB_PERF_*`` name -> its field list, as labs/lib/lab.sh assigns them."""
    text = (ROOT / "labs" / "lib" / "lab.sh").read_text()
    return dict(re.findall(r"^(LAB_PERF_\w+)=(\S+)", text, re.M))


def test_lab_sh_names_the_three_kinds():
    assert set(lab_fields()) == {"LAB_PERF_STACKS", "LAB_PERF_STACKS_ALL", "LAB_PERF_TRACE"}


@pytest.mark.parametrize("name, record", [
    ("LAB_PERF_STACKS", ["-g", "-F", "997", "--", "dd", "if=/dev/zero", "of=/dev/null", "bs=1", "count=200000"]),
    ("LAB_PERF_STACKS_ALL", ["-a", "-g", "-F", "997", "--", "sleep", "0.2"]),
    ("LAB_PERF_TRACE", ["-a", "-e", "sched:sched_wakeup", "-e", "sched:sched_switch", "--", "sleep", "0.1"]),
])
def test_named_fields_print_what_the_defaults_print(tmp_path, name, record):
    env = {**os.environ, "PERF_CONFIG": str(tmp_path / "perfconfig")}
    (tmp_path / "perfconfig").write_text(f"[buildid]\n\tdir = {tmp_path / 'buildid'}\n")
    data = tmp_path / "perf.data"

    def perf(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(["perf", *args], capture_output=True, text=True, env=env, timeout=60)

    made = perf("record", "-q", "--no-buildid-cache", "-o", str(data), *record)
    assert made.returncode == 0, made.stderr[-1000:]
    default = perf("script", "-i", str(data))
    named = perf("script", "-F", lab_fields()[name], "-i", str(data))
    assert default.returncode == named.returncode == 0, named.stderr[-1000:]
    assert default.stdout.strip(), "the recording has no sample"
    assert named.stdout == default.stdout
    assert named.stderr.strip() == "", named.stderr[-1000:]
