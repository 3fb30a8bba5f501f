"""labkit/guest/step.sh, the step writer of a guest's job, run here by the host's POSIX sh (dash
on Debian, as in the guests): the files it writes are the ones lab.sh's lab_run writes and the
labs' collectors read (labkit.record.read_case), its command line reads back as the same words,
and a failed step is recorded, not fatal."""

from __future__ import annotations

import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from labkit import record
from labkit.guest import STEP_WRITER

SH = shutil.which("dash") or "/bin/sh"
WORDS = ["printf", "%s|", "plain", "two words", "it's", 'a "quote"', "$HOME", "`x`", "", "a\\b", "*", "~", "-n"]


def _job(tmp_path: Path, body: str) -> subprocess.CompletedProcess:
    return subprocess.run([SH, "-c", f'set -u; OUT="$1"; . "$2"; {body}', "job", str(tmp_path), str(STEP_WRITER)],
                          capture_output=True, text=True, timeout=30)


def test_a_step_keeps_its_command_outputs_status_and_case(tmp_path):
    quoted = " ".join(shlex.quote(w) for w in WORDS)
    proc = _job(tmp_path, f"step one tool=dd rep=2 io=direct -- {quoted}; echo after")
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "one.out").read_text() == "".join(f"{w}|" for w in WORDS[2:])
    assert (tmp_path / "one.err").read_text() == "" and (tmp_path / "one.rc").read_text() == "0\n"
    cmd = (tmp_path / "one.cmd").read_text()
    assert cmd.endswith("\n") and cmd.count("\n") == 1
    assert shlex.split(cmd) == WORDS                      # a shell reads it back as the same words
    assert record.read_case(tmp_path / "one.case", {"tool": "str", "rep": "int", "io": "str"}) == \
        {"tool": "dd", "rep": 2, "io": "direct"}
    lines = proc.stdout.splitlines()
    assert lines[0] == f"one: {cmd.strip()}" and lines[-1] == "after"
    assert lines[1].startswith("one: ok (") and lines[1].endswith(" s)")


def test_plain_words_stay_unquoted_and_a_step_without_fields_has_no_case(tmp_path):
    proc = _job(tmp_path, "step two -- dd if=/dev/zero of=/dev/null bs=1M count=1 iflag=direct")
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "two.cmd").read_text() == "dd if=/dev/zero of=/dev/null bs=1M count=1 iflag=direct\n"
    assert not (tmp_path / "two.case").exists()


def test_a_failed_step_is_recorded_and_the_job_goes_on(tmp_path):
    proc = _job(tmp_path, "step bad -- sh -c 'echo first >&2; echo last words >&2; exit 3'; echo next")
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "bad.rc").read_text() == "3\n"
    assert "bad: exit 3: last words" in proc.stdout.splitlines() and proc.stdout.splitlines()[-1] == "next"


@pytest.mark.parametrize("word", ["a'b'c", "'", "''", "x'"])
def test_single_quotes_anywhere_read_back(tmp_path, word):
    proc = _job(tmp_path, f"step q -- true {shlex.quote(word)}")
    assert proc.returncode == 0, proc.stderr
    assert shlex.split((tmp_path / "q.cmd").read_text()) == ["true", word]
