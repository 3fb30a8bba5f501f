"""The lab contract (labs/lib/lab.sh), fast tier: no lab runs for real.

- the command line of every lab: bad usage and unusable --out, --scratch, --only, --host are
  ONE line on stderr naming the option and the reason, exit 2, and start nothing; --help lists
  every group;
- the undo, on tests/fakelab (a lab that changes a file standing for a knob, starts a
  background process and makes a directory): SIGINT, SIGTERM, SIGHUP at step boundaries with
  the output through a pipe whose reader dies too; SIGKILL then a refused run, then --recover;
  a write error on stderr; an undo action that fails (exit 3, the journal stays); the lock; a
  full scratch disk; labkit recover;
- every bash file is shellcheck clean; every perf record on the host writes no build-id cache.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import NamedTuple

import pytest

import fault_matrix as fm
from labkit.run import events
from labrun import DEFAULT_SIGNALS, GroupScope, is_root, lab_command, progress_boundary, run_lab, signal_at, tagged_processes

# Each fake-lab run here has its test's own lock directory (:func:`apart`) and is checked by its
# own tag, so none waits for another; the group keeps the file on one worker under the full
# suite's --dist loadgroup, as --dist loadfile does in the fast tier.
pytestmark = pytest.mark.xdist_group("fakelab")

ROOT = Path(__file__).resolve().parent.parent
LABS = sorted(p.parent.name for p in ROOT.glob("labs/*/run.sh"))
FAKE = ROOT / "tests" / "fakelab" / "run.sh"

# (arguments, option the one line must name, a word of the reason)
BAD = [
    (["--bogus"], "--bogus", "unknown option"),
    (["--only", "nosuchgroup"], "--only", "unknown group"),
    (["--only", ""], "--only", "empty"),
    (["--only", ","], "--only", "empty"),
    (["--host", "bad label"], "--host", "bad label"),
    (["--host", ""], "--host", "bad label"),
    (["--host", "-x"], "--host", "bad label"),
    (["--out"], "--out", "needs a directory"),
    (["--out", ""], "--out", "empty"),
    (["--out", "/proc/nope"], "--out /proc/nope", "kernel filesystem"),
    (["--out", "/dev/null"], "--out /dev/null", "not a directory"),
    (["--out", "/etc/hostname/x"], "--out /etc/hostname/x", "not a directory"),
    (["--scratch", "/nonexistent/x"], "--scratch /nonexistent/x", "no such directory"),
    (["--scratch", "/proc"], "--scratch /proc", "kernel filesystem"),
    (["--scratch", "/etc/hostname"], "--scratch /etc/hostname", "not a directory"),
    (["--scratch", ""], "--scratch", "empty"),
    (["--guest", "sparc"], "--guest", "unknown architecture"),
    (["--recover", "--quick"], "--recover", "takes only"),
]


def scratch_dirs(lab: str) -> set[str]:
    return {p.name for p in Path("/tmp").glob(f"pcb-{lab}.*")}


# lab.sh parses every lab's command line with the same code; what differs between labs is their
# groups (--only) and the guests they can boot (--guest). The fast tier gives one lab every bad
# usage and every other lab those that read its own declarations (and an unknown option); the
# full tier gives every lab every one.
LAB_OWN = {"--bogus", "--only nosuchgroup", "--guest sparc"}
BAD_BY_LAB = [pytest.param(lab, args, option, reason, id=f"{lab}-{' '.join(args)}",
                           marks=[] if lab == LABS[0] or " ".join(args) in LAB_OWN else [pytest.mark.slow])
              for lab in LABS for args, option, reason in BAD]


@pytest.mark.no_run
@pytest.mark.parametrize("lab,args,option,reason", BAD_BY_LAB)
def test_bad_usage_is_one_line_exit_2_and_starts_nothing(lab, args, option, reason, tmp_path):
    out = tmp_path / "out"
    before = scratch_dirs(lab)
    extra = [] if "--out" in args else ["--out", str(out)]
    proc = run_lab(lab, *args, *extra, timeout=60)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, f"one line expected:\n{proc.stderr}"
    assert lines[0].startswith("run.sh: ") and option in lines[0] and reason in lines[0], lines[0]
    assert "internal error" not in proc.stderr
    assert not out.exists(), "bad usage must not start a run"
    assert scratch_dirs(lab) == before


@pytest.mark.no_run
@pytest.mark.parametrize("lab", LABS)
def test_help_lists_every_group(lab):
    groups = re.findall(r"^lab_group\s+(\S+)", (ROOT / "labs" / lab / "run.sh").read_text(), re.M)
    assert groups, f"{lab} declares no groups"
    proc = run_lab(lab, "--help", timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "--quick" in proc.stdout and "--recover" in proc.stdout
    for g in groups:
        assert re.search(rf"^\s+{re.escape(g)}\s", proc.stdout, re.M), g


# lab_group's arguments, and the line it must refuse them with.
DECLARATIONS = [
    pytest.param(("Bad-Name", "a group"), "lab.sh: lab_group: group name 'Bad-Name'", id="name"),
    pytest.param(("tabs", "a\tdescription"), "lab.sh: lab_group: group tabs: its description", id="tab"),
    pytest.param(("lines", "two\nlines"), "lab.sh: lab_group: group lines: its description", id="newline"),
    pytest.param(("third", "a group", "allways"), "lab.sh: lab_group: group third: third word 'allways'", id="word"),
]


@pytest.mark.no_run
@pytest.mark.parametrize("args,line", DECLARATIONS)
def test_a_bad_group_declaration_is_refused_where_it_is_made(tmp_path, args, line):
    """lab_group's three arguments reach the supervisor as TSV lines (PCB_LAB_GROUPS): a name that
    cannot name a group_NAME function, a tab or a newline in the description, or a third word
    other than "always" stops run.sh at its declaration: one line, exit 2, nothing started."""
    script = tmp_path / "run.sh"
    script.write_text(f'source {ROOT}/labs/lib/lab.sh\nlab_define demo "a demo lab"\nlab_group "$@"\n'
                      f'lab_main --out {tmp_path / "out"}\n')
    proc = subprocess.run(["bash", str(script), *args], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.splitlines() == [proc.stderr.strip()] and proc.stderr.startswith(line), proc.stderr
    assert not (tmp_path / "out").exists()


# ---- the fake lab ---------------------------------------------------------------------------

@pytest.fixture
def host(tmp_path):
    """The fake lab's "host": a knob file reading "before"."""
    d = tmp_path / "host"
    d.mkdir()
    (d / "knob").write_text("before\n")
    return d


def apart(host: Path) -> dict:
    """What keeps a fake-lab run apart from the host's lab runs: a lock directory of this
    test's own (beside the host directory: every run of one test shares it), and no task,never
    rule (PCB_AUDIT_CONTEXT=leave: a rule would reach a lab run beside the tests); the audit
    tests take that out (:func:`unknown_audit_env`)."""
    locks = host.parent / "locks"
    locks.mkdir(exist_ok=True)
    return {"PCB_LOCK_DIR": str(locks), "PCB_AUDIT_CONTEXT": "leave"}


def fake_env(work: Path, host: Path, **extra) -> dict:
    """The fake lab's environment: fault_matrix.case_env's, its host directory, :func:`apart`."""
    env = fm.case_env(work)
    env.update(FAKELAB_DIR=str(host), **apart(host), **{k: str(v) for k, v in extra.items()})
    return env


def fake(work: Path, host: Path, *args: str, env: dict | None = None, **kw) -> subprocess.CompletedProcess:
    """Run the fake lab to completion with --out WORK/out --scratch WORK/scratch."""
    e = {**os.environ, **fake_env(work, host), **(env or {})}
    kw.setdefault("capture_output", "stderr" not in kw)
    return subprocess.run(lab_command(FAKE, "--host", "fake", "--out", str(work / "out"), "--scratch",
                                      str(work / "scratch"), *args), text=True, env=e,
                          stdin=subprocess.DEVNULL, timeout=120, **kw)


def assert_host_as_before(work: Path, host: Path) -> None:
    assert (host / "knob").read_text() == "before\n"
    assert sorted(p.name for p in host.iterdir()) == ["knob"], "the instance directory is left"
    for d in ("scratch", "home", "tmp"):
        assert not any((work / d).iterdir()), f"{d} is not empty: {list((work / d).iterdir())}"
    assert not list((work / "out").glob(".*.journal")), "journal left behind"
    assert not list((work / "out").glob(".*.partial")), "unfinished run directory left behind"


class FullRun(NamedTuple):
    """One whole run of the fake lab, every group, with its lines' kinds kept."""
    proc: subprocess.CompletedProcess
    took: float          # wall time of the run, s
    work: Path           # its out/, scratch/, home/ and tmp/
    host: Path           # its "host" directory


@pytest.fixture(scope="module")
def full_run(tmp_path_factory) -> FullRun:
    """The fake lab run whole once for the tests that read a whole run (each run takes 5-8 s):
    ``PCB_PROGRESS_TAGS=1``, as the fault matrix runs a lab; the host is checked right after."""
    from labkit.run import events
    base = tmp_path_factory.mktemp("full")
    host = base / "host"
    host.mkdir()
    (host / "knob").write_text("before\n")
    t0 = time.time()
    proc = fake(base, host, env={events.ENV: "1"})
    return FullRun(proc, time.time() - t0, base, host)


def test_fake_lab_runs_and_undoes(full_run):
    proc, took, work, host = full_run
    assert proc.returncode == 0, proc.stderr
    assert_host_as_before(work, host)
    assert (work / "out" / "fakelab.json").is_file()
    assert "cleanup: restore" in proc.stderr and "cleanup: stop setup.server" in proc.stderr
    assert not (work / "out" / ".fakelab.log").exists(), "a run that ended well leaves no log"
    # --case values of every type the fake lab declares (tests/fakelab/lab.toml) come back typed
    result = json.loads((work / "out" / "fakelab.json").read_text())
    typed = next(s for s in result["steps"] if s["name"] == "typed.step")
    assert typed["case"] == {"rep": 2, "ratio": 0.5, "label": "5.10", "warm": True}
    # the claims of its claims.toml, evaluated when the run was recorded
    assert [(c["id"], c["verdict"]) for c in result["claims"]] == [("typed-step-runs", "holds")], result["claims"]
    # the run's duration is the wall time from its start to the record, within this test's
    assert 0 < result["run"]["duration_s"] <= took + 1, (result["run"]["duration_s"], took)


def test_without_scratch_or_tmpdir_the_scratch_is_under_tmp(tmp_path, host):
    """No --scratch and no TMPDIR: the run's scratch directory is made in /tmp (and removed)."""
    env = {k: v for k, v in os.environ.items() if k != "TMPDIR"}
    env.update({k: v for k, v in fake_env(tmp_path, host).items() if k != "TMPDIR"})
    proc = subprocess.run(lab_command(FAKE, "--only", "setup", "--host", "fake", "--out", str(tmp_path / "out")),
                          text=True, env=env, stdin=subprocess.DEVNULL, capture_output=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    scratch = re.search(r"run, scratch (\S+)", proc.stderr).group(1)
    assert Path(scratch).parent == Path(os.path.realpath("/tmp")) and Path(scratch).name.startswith("pcb-fakelab.")
    assert not Path(scratch).exists()
    assert_host_as_before(tmp_path, host)


# A lab author's typo in a call of the step language: (FAKELAB_OPTS or FAKELAB_REQUIRE, what the one line says).
# Three in the fast tier (a run each, 5 s), all six in the full tier.
TYPOS = [
    pytest.param({"FAKELAB_OPTS": "--cases rep=1"}, "lab_run: unknown option --cases", id="option"),
    pytest.param({"FAKELAB_OPTS": "--expect-failure"}, "lab_run: unknown option --expect-failure",
                 id="option-long", marks=pytest.mark.slow),
    pytest.param({"FAKELAB_OPTS": "--case rep"}, "step typed.step: --case 'rep': not KEY=VALUE", id="case-malformed"),
    pytest.param({"FAKELAB_OPTS": "--case rep=one"}, "step typed.step: --case 'rep=one': not of type int",
                 id="case-type", marks=pytest.mark.slow),
    pytest.param({"FAKELAB_OPTS": "--case arch=arm64"},
                 "--case 'arch=arm64': arch is not a case key of tests/fakelab/lab.toml", id="case-undeclared"),
    pytest.param({"FAKELAB_REQUIRE": "loops"}, "lab_require typed.require: unknown capability loops",
                 id="capability", marks=pytest.mark.slow),
]


@pytest.mark.parametrize("env,line", TYPOS)
def test_a_typo_in_a_step_call_stops_the_run_at_once_in_one_line(tmp_path, host, env, line):
    """An unknown option, a malformed or undeclared --case or an unknown capability stops the run
    when the step is called: exit 2, one line naming it, the step not run, nothing recorded, every
    host change undone."""
    proc = fake(tmp_path, host, "--only", "typed", env=env)
    assert proc.returncode == 2, proc.stderr
    said = [ln for ln in proc.stderr.splitlines() if ln.startswith("lab.sh: ")]
    assert len(said) == 1 and line in said[0], proc.stderr
    assert "typed.step: true" not in proc.stderr and "recording result" not in proc.stderr
    assert not (tmp_path / "out" / "fakelab.json").exists()
    assert_host_as_before(tmp_path, host)


@pytest.mark.parametrize("rep,one,runs", [(2, "1", False), (1, "1", True), (2, "0", True)],
                         ids=["later-repetition", "first-repetition", "every-repetition"])
def test_a_one_repetition_run_leaves_out_later_repetitions_only(tmp_path, host, rep, one, runs):
    """PCB_ONE_REPETITION=1 (the full fault matrix) leaves out a step whose case has rep > 1: not
    run, recorded as skipped with the reason, said under the progress kind ``repetition`` (which
    the matrix does not count as a boundary); its first repetition, and any step of a run without
    it, runs."""
    opts = f"--case rep={rep} --case ratio=0.5 --case label=5.10 --case warm=true"
    proc = fake(tmp_path, host, "--only", "typed", env={"FAKELAB_OPTS": opts, "PCB_ONE_REPETITION": one,
                                                        events.ENV: "1"})
    assert proc.returncode == 0, proc.stderr
    step = next(s for s in json.loads((tmp_path / "out" / "fakelab.json").read_text())["steps"]
                if s["name"] == "typed.step")
    kinds = [events.split(ln)[0] for ln in proc.stderr.splitlines()
             if events.split(ln)[1] == "typed.step"]
    if runs:
        assert step["status"] == "ok" and kinds == ["step", "ok"], (step, kinds)
    else:
        assert step["status"] == "skipped" and "one repetition per step" in step["reason"], step
        assert kinds == ["repetition"] and step["case"]["rep"] == 2, kinds
        scope = GroupScope("typed")
        counted = [ln for ln in proc.stderr.splitlines() if scope.feed(ln) == "line"]
        assert counted and not [ln for ln in counted if events.split(ln)[1] == "typed.step"], counted


def test_sigint_stops_a_run_started_with_it_ignored(tmp_path, host):
    """A lab started with SIGINT ignored (by a script that ran it with `&`) still stops on
    SIGINT and undoes everything: the supervisor sets its own handler (bash could not trap a
    signal ignored on entry)."""
    env = dict(os.environ, **fake_env(tmp_path, host, FAKELAB_SLEEP=20))
    cmd = lab_command(FAKE, "--only", "work", "--host", "fake", "--out", str(tmp_path / "out"),
                      "--scratch", str(tmp_path / "scratch"))
    ignoring = [*cmd[:2], "--ignore-signal=INT", *cmd[2:]]  # after labrun's --default-signal
    lab = subprocess.Popen(ignoring, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                           text=True, env=env, process_group=0)
    for line in lab.stderr:
        if "work.1: sleep" in line:
            break
    os.killpg(lab.pid, signal.SIGINT)
    assert lab.wait(timeout=60) == 130, lab.stderr.read()
    assert_host_as_before(tmp_path, host)


# The fast tier's fault matrix: the fake lab at boundaries of both groups, every signal.
# The fast tier has each boundary once and each signal once (a Latin square's diagonal: 4 of
# the 16 cases); the full tier has all 16.
FAKE_CASES = [pytest.param(fm.Case("fakelab", g, k, s), marks=[pytest.mark.slow] if (i + j) % 4 else [])
              for i, (g, k) in enumerate((("setup", 1), ("setup", 3), ("work", 2), ("work", 5)))
              for j, s in enumerate(("INT", "TERM", "HUP", "KILL"))]


# A signal while a helper's output is relayed (labkit record's claims, the guest's console): the
# pipe's reader dies, the relay's write fails, and bash once skipped the EXIT trap there.
FAKE_CASES += [pytest.param(fm.Case("fakelab", "chatty", 3, s), marks=[] if s == "INT" else [pytest.mark.slow])
               for s in ("INT", "TERM", "HUP")]


@pytest.mark.parametrize("case", FAKE_CASES, ids=lambda c: c.id if isinstance(c, fm.Case) else str(c))
def test_fake_lab_signal_at_a_boundary_leaves_the_host_as_it_was(case, tmp_path, host):
    o = fm.run_case(case, tmp_path, extra_env={"FAKELAB_DIR": str(host), "FAKELAB_SLEEP": "0.5", **apart(host)},
                    host=False)
    assert o.clean, "\n".join(o.problems)
    assert (host / "knob").read_text() == "before\n"
    assert sorted(p.name for p in host.iterdir()) == ["knob"]


def test_a_harness_stopped_mid_case_stops_its_lab_first(tmp_path, host):
    """The fault matrix itself interrupted (Ctrl-C while it waits for a boundary): signal_at
    stops the lab with SIGTERM and waits for its undo before the caller may remove the run's
    directories (found when a stopped matrix deleted a running lab's journal and left its
    pidstat behind)."""
    env = fake_env(tmp_path, host, FAKELAB_SLEEP=30)

    def interrupt(line: str) -> bool:
        if "work.1: sleep" in line:
            raise KeyboardInterrupt
        return False
    with pytest.raises(KeyboardInterrupt):
        signal_at(lab_command(FAKE, "--only", "work", "--host", "fake", "--out", str(tmp_path / "out"),
                              "--scratch", str(tmp_path / "scratch")), interrupt, signal.SIGINT, env=env)
    assert_host_as_before(tmp_path, host)
    # this run's processes alone (its FAKELAB_DIR): a stray of another test is not this one's failure
    assert tagged_processes("fakelab.", env=f"FAKELAB_DIR={host}") == []


def test_processes_of_a_run_carry_its_tag_and_die_with_it(tmp_path, host):
    env = dict(os.environ, **fake_env(tmp_path, host, FAKELAB_SLEEP=30))
    lab = subprocess.Popen(lab_command(FAKE, "--only", "work", "--host", "fake", "--out", str(tmp_path / "out"),
                                       "--scratch", str(tmp_path / "scratch")), stdin=subprocess.DEVNULL,
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env, process_group=0)
    for line in lab.stderr:
        if "work.1: sleep" in line:
            break
    time.sleep(0.3)
    seen = tagged_processes(f"fakelab.{lab.pid}.")
    os.killpg(lab.pid, signal.SIGINT)
    assert lab.wait(timeout=60) == 130
    assert any(p.endswith(" sleep 30 ") for p in seen) and any(p.endswith(" sleep 300 ") for p in seen), seen
    assert tagged_processes(f"fakelab.{lab.pid}.") == []
    assert_host_as_before(tmp_path, host)


def test_write_error_on_stderr_stops_and_undoes(tmp_path, host):
    """`run.sh 2>&1 | head -n 3`: the reader goes away without any signal to the lab."""
    env = dict(os.environ, **fake_env(tmp_path, host, FAKELAB_SLEEP=0.3))
    lab = subprocess.Popen(lab_command(FAKE, "--host", "fake", "--out", str(tmp_path / "out"), "--scratch",
                                       str(tmp_path / "scratch")), stdin=subprocess.DEVNULL,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env)
    for _ in range(3):
        lab.stdout.readline()
    lab.stdout.close()
    assert lab.wait(timeout=60) == 141
    assert_host_as_before(tmp_path, host)
    log = (tmp_path / "out" / ".fakelab.log").read_text()
    assert "write error" in log and "cleanup: restore" in log


def test_out_dir_removed_under_a_running_lab_stops_and_undoes_from_the_scratch_copy(tmp_path, host):
    """`rm -rf OUT` while the lab runs: its next journal write fails and it stops; the undo
    actions the journal held are in its copy in the scratch directory, and they run."""
    env = dict(os.environ, **fake_env(tmp_path, host, FAKELAB_SLEEP=0.5))
    lab = subprocess.Popen(lab_command(FAKE, "--host", "fake", "--out", str(tmp_path / "out"), "--scratch",
                                       str(tmp_path / "scratch")), stdin=subprocess.DEVNULL,
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
    for line in lab.stderr:
        if "work.1:" in line:
            break
    assert (host / "knob").read_text() != "before\n" and (host / "instance").is_dir()
    for _ in range(100):       # the step may still be creating its files in raw/
        shutil.rmtree(tmp_path / "out", ignore_errors=True)
        if not (tmp_path / "out").exists():
            break
        time.sleep(0.05)
    err = lab.stderr.read()
    assert lab.wait(timeout=60) == 1, err
    assert "cannot write the journal" in err and "is gone: undoing" in err, err
    assert "cleanup: restore" in err and "cleanup: stop setup.server" in err, err
    assert_host_as_before(tmp_path, host)


def test_full_stderr_stops_and_undoes(tmp_path, host):
    """stderr on a full disk (/dev/full): the first progress line fails, the lab undoes and exits 141."""
    with open("/dev/full", "w") as full:
        proc = fake(tmp_path, host, stderr=full, stdout=subprocess.DEVNULL)
    assert proc.returncode == 141
    assert_host_as_before(tmp_path, host)


def test_a_trap_bash_cannot_parse_still_undoes_everything_and_exits_4(tmp_path, host):
    """bash 5.2 may fail to parse a signal's trap when the signal arrives while it expands a
    $(...) (found by the full fault matrix: optane_kyber-sched-8-SIGHUP exited 2, undone but
    unexplained): the shell exits 2 and only the EXIT trap runs. The lab tells that from its own
    deliberate exit 2 (bad usage, a refusal), says so, undoes everything and exits 4. The fake
    lab's badtrap group sets a trap whose text never parses and raises its signal."""
    proc = fake(tmp_path, host, "--only", "badtrap", env={"FAKELAB_BADTRAP": "1"})
    assert proc.returncode == 4, proc.stderr[-2000:]
    assert "unexpected EOF while looking for matching" in proc.stderr   # bash's own message
    assert "stopped: the shell failed (bash exit 2" in proc.stderr
    assert proc.stderr.index("stopped: the shell failed") < proc.stderr.index("cleanup: restore")
    assert_host_as_before(tmp_path, host)
    log = (tmp_path / "out" / ".fakelab.log").read_text()
    assert "stopped: the shell failed" in log and "cleanup: restore" in log
    bad = fake(tmp_path, host, "--only", "nope")     # a deliberate exit 2 stays 2, one line
    assert bad.returncode == 2 and len(bad.stderr.splitlines()) == 1 and "shell failed" not in bad.stderr


def test_failed_undo_exits_3_keeps_the_journal_and_recover_retries(tmp_path, host):
    (host / "stuck").write_text("")          # the fake lab's "stuck" undo fails while this exists
    proc = fake(tmp_path, host, "--only", "stuck")
    assert proc.returncode == 3, proc.stderr
    assert "cleanup FAILED: " in proc.stderr and "--recover" in proc.stderr
    journal = tmp_path / "out" / ".fakelab.journal"
    assert journal.is_file()
    again = fake(tmp_path, host)
    assert again.returncode == 2 and len(again.stderr.splitlines()) == 1 and "--recover" in again.stderr
    (host / "stuck").unlink()
    rec = subprocess.run(lab_command(FAKE, "--recover", "--out", str(tmp_path / "out")), capture_output=True,
                         text=True, env=dict(os.environ, **fake_env(tmp_path, host)), timeout=60)
    assert rec.returncode == 0, rec.stderr
    assert not journal.exists()
    assert_host_as_before(tmp_path, host)


def test_one_run_at_a_time_names_the_running_pid(tmp_path, host):
    env = dict(os.environ, **fake_env(tmp_path / "a", host, FAKELAB_SLEEP=20))
    first = subprocess.Popen(lab_command(FAKE, "--only", "work", "--host", "fake", "--out", str(tmp_path / "a" / "out"),
                                         "--scratch", str(tmp_path / "a" / "scratch")), stdin=subprocess.DEVNULL,
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env, process_group=0)
    try:
        for line in first.stderr:
            if "work.1: sleep" in line:
                break
        second = fake(tmp_path / "b", host)
        assert second.returncode == 2
        assert second.stderr.count("\n") == 1 and f"pid {first.pid}" in second.stderr, second.stderr
        assert not (tmp_path / "b" / "out").exists() or not list((tmp_path / "b" / "out").glob(".*.journal"))
    finally:
        os.killpg(first.pid, signal.SIGTERM)
        assert first.wait(timeout=60) == 143
    assert (host / "knob").read_text() == "before\n"


def test_recover_leaves_the_journal_of_a_running_run_alone(tmp_path, host):
    """--recover finds a journal whose run is alive (its PID and start time: here a process of
    this test's, the lock free): it touches nothing and says so in one line, exit 2."""
    from labkit.run import journal as journals
    out = tmp_path / "out"
    out.mkdir()
    alive = subprocess.Popen(["sleep", "60"])
    try:
        start = journals.proc_stat(alive.pid)[19]
        journal = out / ".fakelab.journal"
        journal.write_text("\t".join(["run", "fakelab", str(alive.pid), start, f"fakelab.{alive.pid}.{start}",
                                      str(out), str(tmp_path / "scratch"), str(FAKE)]) + "\n")
        rec = subprocess.run(lab_command(FAKE, "--recover", "--out", str(out)), capture_output=True, text=True,
                             env=dict(os.environ, **fake_env(tmp_path, host)), timeout=60)
        assert alive.poll() is None, "recover stopped the running run's process"
    finally:
        alive.kill()
        alive.wait()
    assert rec.returncode == 2 and rec.stderr == (f"run.sh: a run of fakelab is in progress (pid {alive.pid}, "
                                                  f"journal {journal}): not touching it\n"), rec.stderr
    assert journal.is_file()


def test_labkit_recover_finds_a_killed_run_through_its_scratch(tmp_path, host):
    env = dict(os.environ, **fake_env(tmp_path, host, FAKELAB_SLEEP=20))
    got = signal_at(lab_command(FAKE, "--only", "work", "--host", "fake", "--out", str(tmp_path / "out"),
                                "--scratch", str(tmp_path / "scratch")),
                    progress_boundary("work", 1), signal.SIGKILL, env=env)
    assert got.rc == -signal.SIGKILL
    assert (host / "knob").read_text() == "changed\n"
    # Another --out: the run still refuses, through the killed run's scratch directory.
    other = fake(tmp_path / "other", host, "--scratch", str(tmp_path / "scratch"))
    assert other.returncode == 2 and "--recover --out" in other.stderr, other.stderr
    proc = subprocess.run([sys.executable, "-m", "labkit", "recover", "--scratch", str(tmp_path / "scratch")],
                          capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "1 pending" not in proc.stderr and "pending undo actions" in proc.stderr
    assert tagged_processes(f"fakelab.{got.pid}.") == []
    assert_host_as_before(tmp_path, host)
    again = subprocess.run([sys.executable, "-m", "labkit", "recover", "--scratch", str(tmp_path / "scratch")],
                           capture_output=True, text=True, env=env, timeout=60)
    assert again.returncode == 0 and "nothing to recover" in again.stderr


def _zombies(tag_prefix: str) -> list[int]:
    """Zombie children of the run's processes (a zombie's own environment cannot be read)."""
    parents = {int(p.split()[0]) for p in tagged_processes(tag_prefix)}
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            pid, rest = stat.read_text().split(" (", 1)
            fields = rest.rsplit(") ", 1)[1].split()
        except (OSError, IndexError, ValueError):
            continue
        if fields[0] == "Z" and int(fields[1]) in parents:
            out.append(int(pid))
    return out


def test_a_killed_lab_whose_child_is_a_zombie_recovers_at_once(tmp_path, host):
    """SIGKILL to a run while one of its processes has a zombie child, then --recover at once
    (no pause): the lock is free (only the supervisor held it), the zombie is not a running
    process, everything is undone, exit 0."""
    env = dict(os.environ, **fake_env(tmp_path, host, FAKELAB_SLEEP=20))
    args = ["--host", "fake", "--out", str(tmp_path / "out"), "--scratch", str(tmp_path / "scratch")]
    seen: list[int] = []

    def at(line: str) -> bool:
        if "zombie.wait: sleep" in line:
            time.sleep(0.3)
            seen.extend(_zombies("fakelab."))
            return True
        return False
    got = signal_at(lab_command(FAKE, "--only", "zombie", *args), at, signal.SIGKILL, env=env)
    assert got.rc == -signal.SIGKILL and (host / "knob").read_text() == "changed\n"
    assert seen, "the fake lab's zombie.parent has no zombie child"
    rec = subprocess.run(lab_command(FAKE, "--recover", *args[2:]), capture_output=True, text=True, env=env,
                         timeout=60)
    assert rec.returncode == 0, rec.stderr
    assert "in progress" not in rec.stderr
    assert tagged_processes(f"fakelab.{got.pid}.") == []
    assert_host_as_before(tmp_path, host)


def test_recover_through_the_scratch_when_the_out_dir_is_gone(tmp_path, host):
    """SIGKILL, then the out directory (with the journal) removed: the journal's copy in the
    scratch directory is enough for --recover --scratch, and for labkit recover."""
    env = dict(os.environ, **fake_env(tmp_path, host, FAKELAB_SLEEP=20))
    args = ["--host", "fake", "--out", str(tmp_path / "out"), "--scratch", str(tmp_path / "scratch")]
    got = signal_at(lab_command(FAKE, "--only", "work", *args), progress_boundary("work", 1), signal.SIGKILL, env=env)
    assert got.rc == -signal.SIGKILL and (host / "knob").read_text() == "changed\n"
    shutil.rmtree(tmp_path / "out")
    other = fake(tmp_path / "other", host, "--scratch", str(tmp_path / "scratch"))
    assert other.returncode == 2 and "--recover --out" in other.stderr, other.stderr
    rec = subprocess.run(lab_command(FAKE, "--recover", *args[2:]), capture_output=True, text=True, env=env,
                         timeout=60)
    assert rec.returncode == 0, rec.stderr
    assert "recovered" in rec.stderr, rec.stderr
    (tmp_path / "out").mkdir()
    assert_host_as_before(tmp_path, host)
    assert not list((tmp_path / "scratch").iterdir())


def test_recover_with_nothing_to_do(tmp_path, host):
    (tmp_path / "out").mkdir()
    proc = subprocess.run(lab_command(FAKE, "--recover", "--out", str(tmp_path / "out")), capture_output=True,
                          text=True, env=dict(os.environ, **fake_env(tmp_path, host)), timeout=60)
    assert proc.returncode == 0 and "nothing to recover" in proc.stderr


# ---- audit contexts (labkit/run/auditctx.py) ------------------------------------------------------

def audit_rules_now() -> list[str]:
    out = subprocess.run(["auditctl", "-l"], capture_output=True, text=True, timeout=20).stdout
    return [ln for ln in out.splitlines() if ln.strip() and not ln.startswith("No rules")]


def unknown_audit_env(tmp_path: Path) -> dict:
    """PATH led by a bpftrace that fails: the probe cannot tell whether audit was ever enabled on
    this boot (None), so a root run with auditctl adds its task,never rule whatever the boot has
    seen, without this test enabling audit (which no boot can take back)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "bpftrace").write_text("#!/bin/sh\necho 'bpftrace: a stand-in that fails (test)' >&2\nexit 1\n")
    (bin_dir / "bpftrace").chmod(0o755)
    return {"PATH": f"{bin_dir}:{os.environ['PATH']}", "PCB_AUDIT_CONTEXT": ""}


def test_a_result_records_how_the_run_stood_with_audit(tmp_path, host):
    """Every new result says how its run stood with audit (host.audit_context), in agreement
    with the probe and with what the run could do here."""
    proc = fake(tmp_path, host, "--only", "work", env={"PCB_AUDIT_CONTEXT": ""})
    assert proc.returncode == 0, proc.stderr
    h = json.loads((tmp_path / "out" / "fakelab.json").read_text())["host"]
    ctx = h["audit_context"]
    if h["audit_ever_enabled"] is False:
        assert ctx == "never enabled"
    elif not is_root():
        assert ctx == "present: not root"
    elif shutil.which("auditctl") is None:
        assert ctx == "present: auditctl not installed"
    else:
        assert ctx == "suppressed with task,never" or ctx.startswith("present: "), ctx
    assert_host_as_before(tmp_path, host)


def killed_after_its_rule(tmp_path: Path, host: Path) -> tuple[dict, list[str], object, str]:
    """Start the fake lab with the real audit rule (skipping where the host's own rules decide
    its audit context) and SIGKILL it at its first work step, once the rule is loaded.
    Returns (its environment, its arguments, signal_at's outcome, the rule)."""
    before = audit_rules_now()
    if "-a never,task" in before or any(not r.startswith("-a never,task") for r in before):
        pytest.skip(f"this host's own audit rules decide its audit context: {before}")
    env = {**os.environ, **fake_env(tmp_path, host, FAKELAB_SLEEP=20), **unknown_audit_env(tmp_path)}
    args = ["--host", "fake", "--out", str(tmp_path / "out"), "--scratch", str(tmp_path / "scratch")]
    got = signal_at(lab_command(FAKE, "--only", "work", *args), progress_boundary("work", 1), signal.SIGKILL, env=env)
    assert got.rc == -signal.SIGKILL
    return env, args, got, f"-a never,task -F pid!={got.pid}"


@pytest.mark.skipif(not is_root() or shutil.which("auditctl") is None, reason="audit rules need root and auditctl")
def test_a_killed_run_leaves_its_task_never_rule_and_recover_removes_it(tmp_path, host):
    """The run adds '-a never,task -F pid!=<its PID>' before its first step (journalled first);
    SIGKILL after that leaves the rule loaded, a new run is refused, and --recover deletes
    exactly that rule: the rules are as before. A normal end removes it too."""
    env, args, got, rule = killed_after_its_rule(tmp_path, host)
    assert any(f"audit: added '{rule}'" in ln for ln in got.lines), "".join(got.lines[-20:])
    assert rule in audit_rules_now()
    journal = (tmp_path / "out" / ".fakelab.journal").read_text()
    assert f"delete the audit rule '{rule}'" in journal and "labkit.run.auditctx remove" in journal
    refused = subprocess.run(lab_command(FAKE, *args), capture_output=True, text=True, env=env, timeout=60)
    assert refused.returncode == 2 and "--recover" in refused.stderr, refused.stderr
    rec = subprocess.run(lab_command(FAKE, "--recover", *args[2:]), capture_output=True, text=True, env=env, timeout=60)
    assert rec.returncode == 0, rec.stderr
    assert f"cleanup: delete the audit rule '{rule}'" in rec.stderr
    assert rule not in audit_rules_now()
    assert_host_as_before(tmp_path, host)
    # and a run that ends by itself removes its own
    done = subprocess.run(lab_command(FAKE, "--only", "work", *args), capture_output=True, text=True,
                          env=dict(env, FAKELAB_SLEEP="0.1"), timeout=120)
    assert done.returncode == 0, done.stderr
    assert json.loads((tmp_path / "out" / "fakelab.json").read_text())["host"]["audit_context"] == \
        "suppressed with task,never"
    added = re.search(r"audit: added '([^']+)'", done.stderr)
    assert added and added.group(1) not in audit_rules_now(), done.stderr


@pytest.mark.skipif(not is_root() or shutil.which("auditctl") is None, reason="audit rules need root and auditctl")
def test_labkit_recover_removes_the_rule_of_a_killed_run_whose_journal_is_gone(tmp_path, host):
    """SIGKILL, then the out and scratch directories removed (the journal and its copy with
    them): labkit recover still finds the run's task,never rule by its gone supervisor PID and
    deletes it (a live run's rule is left: tests/test_audit_context.py)."""
    env, _, got, rule = killed_after_its_rule(tmp_path, host)
    try:
        assert rule in audit_rules_now()
        for p in tagged_processes(f"fakelab.{got.pid}."):
            os.kill(int(p.split()[0]), signal.SIGKILL)
        shutil.rmtree(tmp_path / "out")
        shutil.rmtree(tmp_path / "scratch")
        rec = subprocess.run([sys.executable, "-m", "labkit", "recover", "--out", str(tmp_path),
                              "--scratch", str(tmp_path)], capture_output=True, text=True, env=env, timeout=60)
        assert rec.returncode == 0, rec.stderr
        assert f"the audit rule '{rule}' of a run that is gone (pid {got.pid}): removed" in rec.stderr, rec.stderr
        assert rule not in audit_rules_now()   # (a live run's rule, elsewhere on the host, may come and go)
    finally:
        subprocess.run(["auditctl", "-d", "task,never", "-F", f"pid!={got.pid}"], capture_output=True, timeout=20)


@pytest.mark.skipif(not is_root(), reason="mounting a small tmpfs needs root")
def test_full_scratch_disk_stops_with_one_line_and_undoes(tmp_path, host):
    small = tmp_path / "small"
    small.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(small)], check=True)
    try:
        proc = fake(tmp_path, host, "--scratch", str(small), "--only", "fill",
                    env={"FAKELAB_FILL_MIB": "8"})
        assert proc.returncode == 1, proc.stderr
        stops = [l for l in proc.stderr.splitlines() if "stopping" in l]
        assert len(stops) == 1 and "no space left" in stops[0], proc.stderr
        assert "fill.after" not in proc.stderr, "the lab went on after the disk was full"
        assert "FAILED" not in proc.stderr
        assert not any(small.iterdir())
        assert (host / "knob").read_text() == "before\n"
        assert not list((tmp_path / "out").glob(".*.journal"))
    finally:
        subprocess.run(["umount", str(small)], check=True)


# ---- static checks -----------------------------------------------------------------------------

def bash_files() -> list[Path]:
    """Every shell script git tracks (a .sh name, a sh/bash shebang, or .ci/run), plus tests/fakelab."""
    files = subprocess.run(["git", "-C", str(ROOT), "ls-files"], capture_output=True, text=True).stdout.split()
    out = []
    for f in files:
        p = ROOT / f
        if not p.is_file():
            continue
        head = p.read_bytes()[:64]
        if f.endswith(".sh") or head.startswith((b"#!/bin/sh", b"#!/usr/bin/env bash", b"#!/bin/bash",
                                                 b"#!/usr/bin/env sh", b"# shellcheck shell=")):
            out.append(p)
    if FAKE not in out:
        out.append(FAKE)
    return sorted(set(out))


SHELLCHECK = shutil.which("shellcheck")


@pytest.mark.slow     # a lint of every bash file (7 s): the full tier, so that `make test` stays under 3 minutes
@pytest.mark.skipif(not SHELLCHECK, reason="shellcheck not installed (make setup installs it as root)")
def test_every_shell_script_is_shellcheck_clean():
    files = bash_files()
    assert any(f.name == "lab.sh" for f in files) and len(files) >= 8
    # Scripts with no shebang are POSIX sh run by sh (a guest's job script). Sourced files are
    # followed from each script's own directory (lab.sh); SC1091: files that exist only at run time;
    # SC2016: a lab hands a command to `sh -c '... "$1" ...' NAME ARG` in single quotes on purpose
    # (its $1 expands in the inner shell, with the argument passed safely).
    plain = [f for f in files if not f.read_bytes().startswith(b"#!") and b"shellcheck shell=" not in f.read_bytes()[:300]]
    # One shellcheck per file, as many at once as there are CPUs (one process for all takes 9 s here).
    def check(f):
        shell = ["-s", "sh"] if f in plain else []
        return subprocess.run([SHELLCHECK, "-x", "-P", "SCRIPTDIR", "-e", "SC1091,SC2016", *shell, "-f", "gcc", str(f)],
                              capture_output=True, text=True, cwd=ROOT).stdout.splitlines()
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        problems = [line for lines in pool.map(check, files) for line in lines]
    assert not problems, "\n".join(problems)


def test_perf_record_never_fills_the_build_id_cache():
    """perf record copies every binary it sampled into ~/.debug unless --no-buildid-cache:
    every perf record that runs on the host (labs' run.sh, lab.sh, labkit) has it."""
    sources = [*ROOT.glob("labs/*/run.sh"), ROOT / "labs" / "lib" / "lab.sh", *ROOT.glob("labkit/**/*.py")]
    # As a command in bash (after "-- ", "! ", a line start) or as an argv in Python.
    pattern = re.compile(r'(?:(?:^|--\s|!\s|;\s|\(\s?)\s*perf\s+record\b|"perf",\s*"record")(?P<rest>[^\n]*)', re.M)
    bad, seen = [], 0
    for f in sources:
        text = f.read_text()
        for m in pattern.finditer(text):
            before = text[text.rfind("\n", 0, m.start()) + 1:m.start() + 1]
            if before.lstrip().startswith("#") or " #" in before:
                continue          # a comment
            if re.match(r'(?:\s+|,\s*")-h\b', m.group("rest")):
                continue          # perf record -h prints its usage and records nothing
            seen += 1
            if "--no-buildid-cache" not in m.group("rest"):
                line = text[:m.start()].count("\n") + 1
                bad.append(f"{f.relative_to(ROOT)}:{line}: {m.group(0).strip()}")
    assert seen >= 5, f"only {seen} perf record commands found: the pattern no longer matches them"
    assert not bad, "\n".join(bad)


def test_signal_dispositions_are_reset_for_labs():
    """The suite may run with SIGINT ignored (nohup, a background job): labs get defaults back."""
    cmd = lab_command("lat_tcp", "--help")
    assert cmd[:2] == ["env", f"--default-signal={DEFAULT_SIGNALS}"]
    proc = subprocess.run(["env", "--ignore-signal=INT,TERM,HUP", *cmd[:2], "grep", "^SigIgn", "/proc/self/status"],
                          capture_output=True, text=True)
    ignored = int(proc.stdout.split()[1], 16)
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        assert not ignored & (1 << (sig - 1)), f"{sig.name} still ignored"


def test_a_second_checkout_cannot_run_the_lab_while_one_runs(tmp_path, host):
    """The lock is the host's, not the checkout's: while a run of the fake lab is on, a run of
    the same lab from another copy of run.sh (another clone) is refused in one line naming the
    running one's PID, and starts once it has ended (stopped by SIGINT, as a reader would)."""
    other = tmp_path / "clone" / "tests" / "fakelab"
    shutil.copytree(FAKE.parent, other)
    (other / "run.sh").write_text(FAKE.read_text().replace('"$(dirname "$0")', f'"{FAKE.parent}'))
    env = dict(os.environ, **fake_env(tmp_path, host, FAKELAB_SLEEP=3))
    args = ["--only", "work", "--host", "fake", "--scratch", str(tmp_path / "scratch")]
    first = subprocess.Popen(lab_command(FAKE, *args, "--out", str(tmp_path / "out")), env=env,
                             stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
    try:
        for line in first.stderr:
            if "== [" in line:
                break
        second = subprocess.run(["bash", str(other / "run.sh"), *args, "--out", str(tmp_path / "out2")],
                                capture_output=True, text=True, env=env, timeout=60)
        assert second.returncode == 2, second.stderr
        assert second.stderr.strip() == (f"run.sh: another lab run is in progress on this host (fakelab, pid {first.pid}): "
                                         f"two at once would measure each other; wait for it to end, or stop it with: "
                                         f"kill {first.pid}"), second.stderr
    finally:
        first.send_signal(signal.SIGINT)
        first.stderr.read()
        assert first.wait(timeout=60) == 130
    after = subprocess.run(["bash", str(other / "run.sh"), *args, "--out", str(tmp_path / "out2")],
                           capture_output=True, text=True, env=dict(env, FAKELAB_SLEEP="0.1"), timeout=120)
    assert after.returncode == 0, after.stderr
    assert_host_as_before(tmp_path, host)


def test_a_run_right_after_a_kill_names_recover_not_a_run_in_progress(tmp_path, host):
    """A run started right after SIGKILL, while a process of the killed run still holds the lock
    (on a loaded host it can take seconds to exit), waits for it and refuses with the --recover
    command: the killed run is not "in progress"."""
    env = dict(os.environ, **fake_env(tmp_path, host, FAKELAB_SLEEP=20))
    args = ["--only", "work", "--host", "fake", "--out", str(tmp_path / "out"), "--scratch", str(tmp_path / "scratch")]
    got = signal_at(lab_command(FAKE, *args), progress_boundary("work", 1), signal.SIGKILL, env=env)
    assert got.rc == -signal.SIGKILL and (host / "knob").read_text() == "changed\n"
    holder = subprocess.Popen(["flock", str(tmp_path / "locks" / "perf-casebook.lock"), "sleep", "2"])   # the lock, held 2 s more
    time.sleep(0.3)
    try:
        again = subprocess.run(lab_command(FAKE, *args), capture_output=True, text=True, env=env, timeout=60)
    finally:
        holder.wait(timeout=30)
    assert again.returncode == 2 and len(again.stderr.strip().splitlines()) == 1, again.stderr
    assert "--recover --out" in again.stderr and "in progress" not in again.stderr, again.stderr
    rec = subprocess.run(lab_command(FAKE, "--recover", "--out", str(tmp_path / "out")), capture_output=True,
                         text=True, env=env, timeout=60)
    assert rec.returncode == 0, rec.stderr
    assert_host_as_before(tmp_path, host)


def test_recover_right_after_a_kill_waits_for_the_lock_and_ignores_a_zombie(tmp_path, host):
    """--recover right after SIGKILL: a process of the killed run that still holds the lock for a
    moment makes it wait, not refuse; a journal whose run is a zombie (killed, not yet reaped by
    its parent) is a killed run, not a running one."""
    env = dict(os.environ, **fake_env(tmp_path, host, FAKELAB_SLEEP=20))
    got = signal_at(lab_command(FAKE, "--only", "work", "--host", "fake", "--out", str(tmp_path / "out"),
                                "--scratch", str(tmp_path / "scratch")),
                    progress_boundary("work", 1), signal.SIGKILL, env=env)
    assert got.rc == -signal.SIGKILL and (host / "knob").read_text() == "changed\n"
    journal = next((tmp_path / "out").glob(".*.journal"))
    zombie = subprocess.Popen(["true"])          # exits at once; not waited for: a zombie
    deadline = time.time() + 10
    while Path(f"/proc/{zombie.pid}/stat").read_text().rsplit(") ", 1)[1][:1] != "Z":
        assert time.time() < deadline
        time.sleep(0.05)
    start = Path(f"/proc/{zombie.pid}/stat").read_text().rsplit(") ", 1)[1].split()[19]
    lines = journal.read_text().splitlines()
    run = next(i for i, line in enumerate(lines) if line.startswith("run\t"))
    fields = lines[run].split("\t")
    fields[2], fields[3] = str(zombie.pid), start
    lines[run] = "\t".join(fields)
    journal.write_text("\n".join(lines) + "\n")
    holder = subprocess.Popen(["flock", str(tmp_path / "locks" / "perf-casebook.lock"), "sleep", "2"])   # the lock, held 2 s more
    time.sleep(0.3)
    try:
        rec = subprocess.run(lab_command(FAKE, "--recover", "--out", str(tmp_path / "out")), capture_output=True,
                             text=True, env=env, timeout=60)
    finally:
        holder.wait(timeout=30)
        zombie.wait(timeout=5)
    assert rec.returncode == 0, rec.stderr
    assert not journal.exists()
    assert_host_as_before(tmp_path, host)


# ---- the fault matrix reads a real run by its lines' kinds (tests/fault_matrix.py) ------------
# Here rather than in tests/test_fault_matrix_design.py: these run the fake lab, as the tests
# above do (:func:`fake_env`).

def _tagged_run(tmp_path, *args: str, tags: bool = True) -> list[str]:
    """The lines of one run of the fake lab (tests/fakelab; whole, or as ``args`` select) with
    their kinds kept (``PCB_PROGRESS_TAGS=1``), as the matrix reads a lab's (``tags=False``: as a
    reader sees them)."""
    from labkit.run import events
    host = tmp_path / "host"
    host.mkdir()
    (host / "knob").write_text("before\n")
    env = dict(os.environ, **fake_env(tmp_path / "work", host), **{events.ENV: "1" if tags else "0"})
    proc = subprocess.run(lab_command(FAKE, "--host", "fake", "--out", str(tmp_path / "out"),
                                      "--scratch", str(tmp_path / "work" / "scratch"), *args),
                          text=True, env=env, stdin=subprocess.DEVNULL, capture_output=True, timeout=120)
    return proc.stderr.splitlines()


def test_the_count_and_the_signal_see_the_same_lines_of_a_group(full_run):
    """group_lines (the matrix's count of a group's boundaries) and progress_boundary (where a
    case is signalled) scope a group alike, on every group of a real run whose lines carry their
    kinds: the k-th line counted is the one the k-th boundary fires at, and one past the count
    fires at the group's end. The scope reads kinds, never wording."""
    import labrun
    from labkit.run import events
    lines = full_run.proc.stderr.splitlines()
    kinds = [events.split(line) for line in lines]
    groups = [arg for kind, arg, _ in kinds if kind == "group"]
    assert len(groups) >= 2, lines
    assert any(kind in events.STEP_ENDS for kind, _, _ in kinds) and any(kind == "record" for kind, _, _ in kinds)
    for group in groups:
        counted = labrun.group_progress(lines, group)
        assert counted and not any(events.split(line)[0] in ("group", "record") for line in counted), group
        last = next(i for i, (kind, arg, _) in enumerate(kinds) if kind == "group" and arg == group)
        for k in range(1, len(counted) + 2):
            at = labrun.progress_boundary(group, k)
            fired = next((i for i, line in enumerate(lines) if at(line)), None)
            if k <= len(counted):   # the k-th line of the group, right after the one before
                assert fired == last + 1 and lines[fired] == counted[k - 1], (group, k)
                last = fired
            else:                   # one past: the line right after the group, if the run goes on
                assert fired == (last + 1 if last + 1 < len(lines) else None), (group, k)
                assert fired is None or kinds[fired][0] in ("group", "record")


def test_a_reader_sees_no_tags(tmp_path):
    """Without PCB_PROGRESS_TAGS the terminal carries the text alone."""
    lines = _tagged_run(tmp_path, "--only", "work", tags=False)
    assert any("] == [1/" in line for line in lines) and not any("\x1f" in line for line in lines)


def test_perf_keeps_its_build_id_cache_in_the_scratch_directory(tmp_path, host):
    """A lab's perf record without --no-buildid-cache still writes nothing in the home
    directory (the fake lab's HOME is WORK/home): lab.sh points perf at a configuration in the
    scratch directory (PERF_CONFIG) whose build-id cache is there too, removed with it."""
    proc = fake(tmp_path, host, "--only", "perf")
    assert proc.returncode == 0, proc.stderr
    step = next(s for s in json.loads((tmp_path / "out" / "fakelab.json").read_text())["steps"] if s["group"] == "perf")
    if step["status"] == "skipped":
        pytest.skip(f"perf cannot record here: {step['reason']}")
    assert step["status"] == "ok", step
    assert not (tmp_path / "home" / ".debug").exists()
    assert_host_as_before(tmp_path, host)
