"""Test tiers are explicit marks, and the guard in tests/conftest.py holds a test to them: a test
that starts a lab, a guest, a browser or a site build without its mark fails while it runs."""

from __future__ import annotations

import subprocess
import sys

import pytest

import conftest


@pytest.mark.parametrize("argv,tier", [
    (["bash", "/work/x/labs/fstime/run.sh", "--quick"], "lab"),
    (["bash", "labs/lat_tcp/run.sh", "--guest", "arm64"], "guest"),
    ("labs/fio_engines/run.sh --quick", "lab"),
    (["bash", ".github/ci-labs.sh", "--labs", "lat_tcp"], "lab"),
    (["/usr/bin/qemu-system-aarch64", "-M", "virt"], "guest"),
    (["/usr/bin/chromium", "--headless"], "browser"),
    (["/x/site-packages/playwright/driver/node", "run-driver"], "browser"),
    (["/w/.tools/node_modules/.bin/lighthouse", "http://127.0.0.1:8000/"], "timing"),
    ([sys.executable, "-m", "mkdocs", "build", "--strict"], "slow"),
    (["bash", "tests/fakelab/run.sh"], None),
    (["env", "--default-signal=INT", "bash", "labs/fstime/run.sh", "--help"], "lab"),
    (["timeout", "60", "bash", "/x/labs/lat_tcp/run.sh"], "lab"),
    (["/usr/bin/shellcheck", "-x", "/w/.github/ci-labs.sh", "/w/labs/fstime/run.sh"], None),
    (["git", "status"], None),
    ([sys.executable, "-m", "mkdocs", "--version"], None),
])
def test_what_a_command_needs(argv, tier):
    assert conftest.tier_of(argv) == tier


class _Item:
    """What the guard reads of a test item: its id and its marks."""

    def __init__(self, *marks: str):
        self.nodeid, self._marks = "tests/x.py::t", set(marks)

    def get_closest_marker(self, name):
        return name if name in self._marks else None


def test_an_unmarked_test_that_starts_a_lab_fails():
    with conftest._guard(_Item()):
        with pytest.raises(pytest.fail.Exception, match=r"not marked @pytest.mark.lab"):
            subprocess.run(["bash", "labs/no_such_lab/run.sh", "--help"], capture_output=True)
        with pytest.raises(pytest.fail.Exception, match=r"not marked @pytest.mark.guest"):
            subprocess.run(["qemu-system-aarch64", "--version"], capture_output=True)


def test_a_marked_test_may_and_other_commands_pass():
    assert not conftest._needs(_Item("lab"), "lab") and conftest._needs(_Item("slow"), "lab")
    assert not conftest._needs(_Item(), None)
    real = subprocess.Popen._execute_child
    with conftest._guard(_Item()):
        assert subprocess.run(["true"]).returncode == 0
    assert subprocess.Popen._execute_child is real      # the guard is undone
