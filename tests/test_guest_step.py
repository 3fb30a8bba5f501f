"""labkit/guest/step.sh, the step language of a guest's job, run here by bash as the guests run
it, with the files labkit.guest puts beside it on the job disk (labkit.guest.job_contract_files:
lab.sh's own step record writer labs/lib/case.sh among them): the guest's out directory is a run
directory that labkit.record.read_steps reads as a host run's, its command lines read back as the
same words, a failed step is recorded, not fatal, and a bad case field stops the job as lab.sh
stops a run."""

from __future__ import annotations

import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from labkit import record, steps
from labkit.guest import job_contract_files
from labrun import guest_steps_here

BASH = shutil.which("bash") or "/bin/bash"
WORDS = ["printf", "%s|", "plain", "two words", "it's", 'a "quote"', "$HOME", "`x`", "", "a\\b", "*", "~", "-n"]
# The declared case types of the checks below, as a lab's lab.toml [case] gives them.
TYPES = {"tool": "str", "rep": "int", "mb": "float", "io": "str", "on": "bool"}


def _job(tmp_path: Path, body: str, types: dict[str, str] | None = TYPES) -> subprocess.CompletedProcess:
    """:func:`labrun.guest_steps_here` for a lab run that declares ``types`` (default :data:`TYPES`)."""
    return guest_steps_here(tmp_path, body, types)


def test_a_step_is_recorded_as_a_host_run_records_one(tmp_path):
    quoted = " ".join(shlex.quote(w) for w in WORDS)
    proc = _job(tmp_path, f"step one tool=dd rep=2 io=direct -- {quoted}; echo after")
    assert proc.returncode == 0, proc.stderr
    out = tmp_path / "out"
    assert (out / "raw" / "one.out").read_text() == "".join(f"{w}|" for w in WORDS[2:])
    assert (out / "raw" / "one.err").read_text() == ""
    cmd = (out / "raw" / "one.cmd").read_text()
    assert "\n" not in cmd and shlex.split(cmd) == WORDS     # a shell reads it back as the same words
    (step,) = record.read_steps(out, TYPES)
    assert {k: step[k] for k in ("name", "group", "status", "exit_code", "expect", "command", "case")} == {
        "name": "one", "group": "guest", "status": "ok", "exit_code": 0, "expect": "success", "command": cmd,
        "case": {"tool": "dd", "rep": 2, "io": "direct"}}
    lines = proc.stdout.splitlines()
    assert lines[0] == f"one: {cmd}" and lines[-1] == "after"
    assert lines[1] == f"one: ok ({step['seconds']:.3f}s)"


def test_plain_words_stay_unquoted_and_a_step_without_fields_has_no_case(tmp_path):
    proc = _job(tmp_path, "step two -- dd if=/dev/zero of=/dev/null bs=1M count=1 iflag=direct")
    assert proc.returncode == 0, proc.stderr
    raw = tmp_path / "out" / "raw"
    assert (raw / "two.cmd").read_text() == "dd if=/dev/zero of=/dev/null bs=1M count=1 iflag=direct"
    assert not (raw / "two.case").exists() and "case" not in record.read_steps(tmp_path / "out", TYPES)[0]


def test_a_failed_step_is_recorded_and_the_job_goes_on(tmp_path):
    proc = _job(tmp_path, "step bad -- sh -c 'echo first >&2; echo last words >&2; exit 3'; echo next")
    assert proc.returncode == 0, proc.stderr
    (step,) = record.read_steps(tmp_path / "out", TYPES)
    assert (step["status"], step["exit_code"], step["reason"]) == ("failed", 3, "exit 3: last words")
    assert "bad: exit 3: last words" in proc.stdout.splitlines() and proc.stdout.splitlines()[-1] == "next"


@pytest.mark.parametrize("word", ["a'b'c", "'", "''", "x'", "two\nlines"])
def test_any_word_reads_back(tmp_path, word):
    proc = _job(tmp_path, f"step q -- true {shlex.quote(word)}")
    assert proc.returncode == 0, proc.stderr
    got = subprocess.run([BASH, "-c", 'eval "set -- $(<"$1")"; printf "%s\\0" "$@"', "x",
                          str(tmp_path / "out" / "raw" / "q.cmd")], capture_output=True, text=True).stdout
    assert got.split("\0")[:-1] == ["true", word]


@pytest.mark.parametrize("field, why", [
    ("rep=x", "not of type int"), ("rep=1.5", "not of type int"), ("rep=", "not of type int"),
    ("mb=1.", "not of type float"), ("mb=.5", "not of type float"), ("mb=1e", "not of type float"),
    ("on=yes", "not of type bool"), ("speed=1", "speed is not a case key of labs/demo/lab.toml"),
    ("Rep=1", "not KEY=VALUE"), ("rep", "not KEY=VALUE"), ("=1", "not KEY=VALUE"),
])
def test_a_bad_case_field_stops_the_job_at_once_with_one_line(tmp_path, field, why):
    """As lab.sh refuses a bad --case on the host (with the same code, labs/lib/case.sh), the
    guest's step refuses a field that is not KEY=VALUE, whose key the lab does not declare, or
    whose value is not of the key's type: one line on stderr, the job stops with exit 2, and the
    step's command never runs."""
    proc = _job(tmp_path, f"step s tool=dd {shlex.quote(field)} -- touch ran; echo after")
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    assert proc.stderr.count("\n") == 1 and why in proc.stderr
    assert proc.stderr.startswith(f"step.sh: step s: --case '{field}': ")
    assert "after" not in proc.stdout and not (tmp_path / "ran").exists()
    assert not (tmp_path / "out" / "raw" / "s.cmd").exists()
    with pytest.raises(steps.CaseError):      # the host's reader refuses it too
        steps.parse(["tool=dd", field], TYPES)


def test_a_key_given_twice_stops_the_job(tmp_path):
    proc = _job(tmp_path, "step s rep=1 rep=2 -- true")
    assert proc.returncode == 2 and "rep given twice" in proc.stderr


def test_a_step_without_its_separator_stops_the_job(tmp_path):
    proc = _job(tmp_path, "step s rep=1 true; echo after")
    assert proc.returncode == 2 and "no -- before the command" in proc.stderr and "after" not in proc.stdout


@pytest.mark.parametrize("field", ["rep=3", "rep=-2", "mb=1.5", "mb=-0.25", "mb=2e-3", "mb=1.5E+6", "mb=7",
                                   "on=true", "on=false", "tool=dd if", "io=", "tool=rep=1"])
def test_the_guest_accepts_what_the_host_accepts(tmp_path, field):
    """A field the guest's check lets through is one labkit.steps types as the lab declares it."""
    proc = _job(tmp_path, f"step s {shlex.quote(field)} -- true")
    assert proc.returncode == 0, proc.stderr
    key, value = field.split("=", 1)
    assert isinstance(steps.value(key, value, TYPES), {"str": str, "int": int, "float": float, "bool": bool}[TYPES[key]])


def test_outside_a_lab_run_a_step_takes_no_case(tmp_path):
    """A job booted outside a lab run has no declared keys: as a lab without a [case] table, its
    steps run without fields, and a field stops the job."""
    proc = _job(tmp_path, "step s -- true; echo after", types=None)
    assert proc.returncode == 0 and proc.stdout.splitlines()[-1] == "after", proc.stderr
    proc = _job(tmp_path / "2", "step s anything=1 -- true; echo after", types=None)
    assert proc.returncode == 2 and "anything is not a case key" in proc.stderr and "after" not in proc.stdout


def test_the_job_disk_carries_the_step_record_writer_and_the_declared_types():
    """labkit.guest puts on the job disk lab.sh's own step record writer (labs/lib/case.sh), and
    the lab run's declared types (/job/.pcb/case-types from PCB_LAB_CASE, the supervisor's
    labkit.steps.env_words of lab.toml [case]) and name; outside a lab run, neither of these two."""
    from labkit.guest import case_types_file
    root = Path(__file__).resolve().parents[1]
    types = steps.declared(root / "labs" / "nvme_swiotlb")
    text = case_types_file({"PCB_LAB_CASE": steps.env_words(types)}).decode()
    assert text.splitlines() == [f"{k}={t}" for k, t in types.items()] and text.endswith("\n")
    files = job_contract_files({"PCB_LAB_CASE": steps.env_words(types), "PCB_LAB_NAME": "nvme_swiotlb"})
    assert files["case.sh"] == (root / "labs" / "lib" / "case.sh").read_bytes()
    assert files["lab"] == b"nvme_swiotlb" and files["case-types"] == text.encode()
    assert set(job_contract_files({})) == {"step.sh", "case.sh"}


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


@pytest.mark.parametrize("one", [False, True], ids=["every-repetition", "one-repetition"])
def test_a_one_repetition_run_leaves_out_later_repetitions_in_the_guest_too(tmp_path, one):
    """A guest booted by a run with PCB_ONE_REPETITION=1 (the full fault matrix) runs a step's
    first repetition only, as lab.sh's lab_run does on the host: rep > 1 is recorded as skipped
    with the reason and its command never starts; any other run runs every repetition."""
    body = "for i in 1 2 3; do step \"dd.$i\" tool=dd rep=$i -- sh -c \"echo $i > $PWD/ran.$i\"; done; step plain -- true"
    proc = guest_steps_here(tmp_path, body, TYPES, one_repetition=one)
    assert proc.returncode == 0, proc.stderr
    got = {s["name"]: s for s in record.read_steps(tmp_path / "out", TYPES)}
    ran = sorted(p.name for p in tmp_path.glob("ran.*"))
    if not one:
        assert ran == ["ran.1", "ran.2", "ran.3"] and all(s["status"] == "ok" for s in got.values())
        return
    assert ran == ["ran.1"]
    assert [got[n]["status"] for n in ("dd.1", "dd.2", "dd.3", "plain")] == ["ok", "skipped", "skipped", "ok"]
    assert "one repetition per step" in got["dd.2"]["reason"] and got["dd.3"]["case"]["rep"] == 3
