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


# The declared case types of the checks below, as a lab's lab.toml [case] gives them.
TYPES = {"tool": "str", "rep": "int", "mb": "float", "io": "str", "on": "bool"}


def _typed_job(tmp_path: Path, body: str):
    (tmp_path / "types").write_text("".join(f"{k}={t}\n" for k, t in TYPES.items()))
    return subprocess.run([SH, "-c", f'set -u; OUT="$1"; PCB_CASE_TYPES="$3"; . "$2"; {body}', "job", str(tmp_path),
                           str(STEP_WRITER), str(tmp_path / "types")], capture_output=True, text=True, timeout=30)


@pytest.mark.parametrize("field, why", [
    ("rep=x", "not of type int"), ("rep=1.5", "not of type int"), ("rep=", "not of type int"),
    ("mb=1.", "not of type float"), ("mb=.5", "not of type float"), ("mb=1e", "not of type float"),
    ("on=yes", "not of type bool"), ("speed=1", "speed is not a case key"), ("Rep=1", "not KEY=VALUE"),
    ("rep", "not KEY=VALUE"), ("=1", "not KEY=VALUE"),
])
def test_a_bad_case_field_stops_the_job_at_once_with_one_line(tmp_path, field, why):
    """As lab.sh refuses a bad --case on the host, the guest's step refuses a field that is not
    KEY=VALUE, whose key the lab does not declare, or whose value is not of the key's type: one
    line on stderr, the job stops with exit 2, and the step's command never runs."""
    proc = _typed_job(tmp_path, f"step s tool=dd {shlex.quote(field)} -- touch ran; echo after")
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    assert proc.stderr.count("\n") == 1 and why in proc.stderr and f"step s: case '{field}'" in proc.stderr
    assert "after" not in proc.stdout and not (tmp_path / "ran").exists() and not (tmp_path / "s.cmd").exists()
    from labkit import steps      # the host refuses it too
    with pytest.raises(steps.CaseError):
        steps.parse(["tool=dd", field], TYPES)


def test_a_key_given_twice_stops_the_job(tmp_path):
    proc = _typed_job(tmp_path, "step s rep=1 rep=2 -- true")
    assert proc.returncode == 2 and "rep given twice" in proc.stderr


@pytest.mark.parametrize("field", ["rep=3", "rep=-2", "mb=1.5", "mb=-0.25", "mb=2e-3", "mb=1.5E+6", "mb=7",
                                   "on=true", "on=false", "tool=dd if", "io=", "tool=rep=1"])
def test_the_guest_accepts_what_the_host_accepts(tmp_path, field):
    """A field the guest's check lets through is one labkit.steps types as the lab declares it."""
    from labkit import steps
    proc = _typed_job(tmp_path, f"step s {shlex.quote(field)} -- true")
    assert proc.returncode == 0, proc.stderr
    key, value = field.split("=", 1)
    assert isinstance(steps.value(key, value, TYPES), {"str": str, "int": int, "float": float, "bool": bool}[TYPES[key]])


def test_without_declared_types_a_field_is_checked_for_form_only(tmp_path):
    proc = _job(tmp_path, "step s anything=1.5.6 -- true")
    assert proc.returncode == 0, proc.stderr
    proc = _job(tmp_path, "step s notafield -- true; echo after")
    assert proc.returncode == 2 and "not KEY=VALUE" in proc.stderr and "after" not in proc.stdout


def test_the_job_disk_carries_the_lab_runs_declared_types():
    """labkit.guest writes /job/.pcb/case-types from the lab run's PCB_LAB_CASE (the supervisor's
    labkit.steps.env_words of lab.toml [case]); outside a lab run it writes none."""
    from labkit import steps
    from labkit.guest import case_types_file
    types = steps.declared(Path(__file__).resolve().parents[1] / "labs" / "nvme_swiotlb")
    text = case_types_file({"PCB_LAB_CASE": steps.env_words(types)}).decode()
    assert text.splitlines() == [f"{k}={t}" for k, t in types.items()] and text.endswith("\n")
    assert case_types_file({}) == b""


def test_every_guest_step_key_is_declared_by_its_lab():
    """Each KEY of a ``step NAME KEY=VALUE... --`` call in a lab's guest job is a case key of the
    lab's lab.toml [case], so the job's steps pass the guest's check."""
    import re
    from labkit import steps
    root = Path(__file__).resolve().parents[1]
    jobs = [p for p in (root / "labs").glob("*/*.sh") if re.search(r"^\s*step ", p.read_text(), re.M)]
    assert jobs
    for job in jobs:
        types = steps.declared(job.parent)
        calls = [line.split() for line in job.read_text().splitlines() if re.match(r"\s*step\s", line)]
        assert calls
        for words in calls:
            assert "--" in words, words
            for word in words[2:words.index("--")]:
                key = word.strip('"').split("=", 1)[0]
                assert "=" in word and key in types, (job.name, " ".join(words), key)
