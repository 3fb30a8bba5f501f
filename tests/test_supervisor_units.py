"""labkit/run/supervisor.py, method by method, without running a lab: which kernel file systems
a run journals an unmount for, and the one-line refusals a reader sees (an out directory that
cannot be made, a lock whose holder cannot be named). File layouts and fakes only."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from labkit.run import supervisor


def _sup(tmp_path) -> supervisor.Supervisor:
    script = tmp_path / "run.sh"
    script.write_text("")
    return supervisor.Supervisor(supervisor.Lab(script, "demo", "Demo", "", []))


class _Journal:
    def __init__(self):
        self.deferred = []

    def defer(self, what, *words):
        self.deferred.append((what, *words))


@pytest.mark.parametrize("isdir, ismount, journalled", [
    (True, False, True),    # a mount point a tool may mount on: its unmount is journalled
    (True, True, False),    # mounted before the run: left alone, never unmounted
    (False, False, False),  # no such directory
])
def test_a_kernel_fs_is_unmounted_after_the_run_only_if_it_was_not_mounted_before(
        tmp_path, monkeypatch, isdir, ismount, journalled):
    s = _sup(tmp_path)
    s.journal = _Journal()
    monkeypatch.setattr(supervisor.os, "geteuid", lambda: 0)
    monkeypatch.setattr(supervisor.os.path, "isdir", lambda p: isdir)
    monkeypatch.setattr(supervisor.os.path, "ismount", lambda p: ismount)
    s.guard_kernel_fs()
    want = [(f"unmount {m} if a tool mounted it", "lab__umount", m, "0")
            for m in ("/sys/kernel/tracing", "/sys/kernel/debug")] if journalled else []
    assert s.journal.deferred == want


def test_without_root_no_kernel_fs_is_journalled(tmp_path, monkeypatch):
    s = _sup(tmp_path)
    s.journal = _Journal()
    monkeypatch.setattr(supervisor.os, "geteuid", lambda: 1000)
    s.guard_kernel_fs()
    assert s.journal.deferred == []


@pytest.mark.parametrize("given", [True, False], ids=["--out given", "default out"])
def test_an_out_directory_that_cannot_be_made_is_named(tmp_path, given):
    """Named as the reader gave it, or as the default the run chose (local-results/<host>)."""
    blocker = tmp_path / "file"
    blocker.write_text("")
    s = _sup(tmp_path)
    s.lab.out = "file/out" if given else None
    s.out_dir = blocker / "out"
    with pytest.raises(supervisor.Usage) as exc:
        s.make_out()
    assert str(exc.value) == f"--out {'file/out' if given else blocker / 'out'}: cannot create it: Not a directory"


def test_a_held_lock_whose_holder_is_unknown_says_how_to_stop_it(tmp_path, monkeypatch):
    s = _sup(tmp_path)
    monkeypatch.setattr(s.lock, "take", lambda wait=0: False)
    monkeypatch.setattr(s.lock, "holder", lambda: "")
    monkeypatch.setattr(supervisor, "find_journals", lambda *a: [])
    with pytest.raises(supervisor.Usage) as exc:
        s.take_lock()
    assert str(exc.value) == ("another lab run is in progress on this host (pid unknown): two at once would "
                              "measure each other; wait for it to end, or stop it with: kill PID")


@pytest.mark.parametrize("environ, owner", [
    ({"SUDO_UID": "4242", "SUDO_GID": "4343"}, (4242, 4343)),
    ({"SUDO_UID": "4242"}, (4242, 4242)),          # no SUDO_GID: the user's number for the group too
    ({}, None),                                     # not under sudo: nothing changes
])
def test_a_result_is_given_back_to_the_user_who_ran_sudo(tmp_path, monkeypatch, environ, owner):
    out = tmp_path / "out"
    (out / "lab" / "raw").mkdir(parents=True)
    (out / "lab.json").write_text("{}")
    (out / "lab" / "link").symlink_to("/etc/hostname")
    calls = []
    monkeypatch.setattr(supervisor.os, "chown", lambda p, u, g, follow_symlinks=True: calls.append((Path(p), u, g, follow_symlinks)))
    supervisor.give_back(out, environ)
    if owner is None:
        assert calls == []
    else:
        assert sorted(p for p, *_ in calls) == sorted([out, *out.rglob("*")])
        assert {(u, g, f) for _, u, g, f in calls} == {(*owner, False)}


def test_a_line_is_written_to_stderr_and_the_log_unless_log_only(tmp_path, capfd, monkeypatch):
    """Output.emit: by default a line goes to the terminal (stderr) and the run's log; with
    log_only to the log alone (a quiet run); the log never gets colour or tags."""
    from labkit.run import events
    monkeypatch.delenv(events.ENV, raising=False)      # no kind tags on stderr
    out = supervisor.Output("demo")
    out.log = tmp_path / "demo.log"
    out.emit("the last words, without a newline")
    out.emit("only for the log", log_only=True)
    assert capfd.readouterr().err == "the last words, without a newline\n"
    assert out.log.read_text() == "the last words, without a newline\nonly for the log\n"


BOLD, RED, CYAN = "\033[1m", "\033[31m", "\033[36m"


@pytest.mark.parametrize("kind, colour", [("group", BOLD), ("failed", RED), ("stop", RED), ("cleanup-failed", RED),
                                          ("interrupt", RED), ("figure", CYAN), ("note", None), ("ok", None),
                                          ("text", None)])
def test_on_a_terminal_headers_are_bold_failures_red_figures_cyan(kind, colour, tmp_path, capfd, monkeypatch):
    """Output.emit on a terminal: a line's kind gives its colour (the rest plain); the log
    stays plain."""
    from labkit.run import events
    monkeypatch.delenv(events.ENV, raising=False)
    out = supervisor.Output("demo")
    out.color, out.log = True, tmp_path / "demo.log"
    out.emit("a line", kind=kind)
    assert capfd.readouterr().err == (f"{colour}a line\033[0m\n" if colour else "a line\n")
    assert out.log.read_text() == "a line\n"


def test_the_prefix_counts_seconds_since_the_start_to_a_tenth(monkeypatch):
    """Output.prefix: ``[lab  12.3s] ``, seconds since the run's start, truncated to a tenth."""
    out = supervisor.Output("demo")
    now_us = supervisor.time.time_ns() // 1000
    monkeypatch.setattr(supervisor.time, "time_ns", lambda: now_us * 1000)
    out.start_us = now_us - 12_345_678
    assert out.prefix() == "[demo  12.3s] "
    out.start_us = now_us - 59_999
    assert out.prefix() == "[demo   0.0s] "
    out.start_us = now_us + 5_000_000     # a clock that went back: never a negative time
    assert out.prefix() == "[demo   0.0s] "


def test_a_signal_before_any_child_is_remembered(tmp_path):
    """A stop signal that lands before the supervisor started any child (while it probes the
    host): remembered as the run's stop, and nothing to forward it to; the first signal wins."""
    import signal
    sup = _sup(tmp_path)
    sup.on_signal(signal.SIGTERM, None)
    sup.on_signal(signal.SIGINT, None)
    assert sup.stop_sig == signal.SIGTERM


def _exit_code(call) -> int:
    """The exit status of ``call``, a Supervisor method that ends in sys.exit; it sets the stop
    signals to be ignored while it undoes: they are put back here."""
    import signal
    saved = {s: signal.getsignal(s) for s in supervisor.STOP_SIGNALS}
    try:
        with pytest.raises(SystemExit) as exc:
            call()
    finally:
        for s, h in saved.items():
            signal.signal(s, h)
    return exc.value.code


def _driven(tmp_path, monkeypatch, relay, **lab_fields) -> supervisor.Supervisor:
    """A supervisor of the fake lab (tests/fakelab) driven in-process: its lock, out and scratch
    directories in ``tmp_path``, its ``relay`` (every child it would start) the given stub."""
    fake = Path(__file__).resolve().parent / "fakelab" / "run.sh"
    for d in ("locks", "scratch"):
        (tmp_path / d).mkdir()
    monkeypatch.setenv("PCB_LOCK_DIR", str(tmp_path / "locks"))
    monkeypatch.setenv("PCB_AUDIT_CONTEXT", "leave")     # never a task,never rule from a unit test
    sup = supervisor.Supervisor(supervisor.Lab(fake, "fakelab", "Fake", "", [("work", "steps", False)],
                                               out=str(tmp_path / "out"), **lab_fields))
    sup.scratch_parent = tmp_path / "scratch"
    monkeypatch.setattr(sup, "relay", relay)
    return sup


def test_finish_writes_its_message_as_one_line_then_exits_with_the_code(tmp_path, capfd):
    """finish(code, message): the message, one line on stderr, then (nothing journalled to undo)
    exit ``code``. It ignores the stop signals while it undoes: restored here afterwards."""
    sup = _sup(tmp_path)
    assert _exit_code(lambda: sup.finish(2, message="run.sh: --scratch /x: cannot create a directory in it: No space")) == 2
    assert capfd.readouterr().err == "run.sh: --scratch /x: cannot create a directory in it: No space\n"


def _wait_zombie(pid: int) -> None:
    import time
    for _ in range(200):
        f = supervisor.journals.proc_stat(pid)
        if f and f[0] == "Z":
            return
        time.sleep(0.01)
    raise AssertionError(f"{pid} did not become a zombie")


def test_reap_orphans_reaps_zombie_children_but_those_skipped():
    """reap_orphans: this process's zombie children are reaped at once, but those in ``skip``
    (a subprocess.Popen's, whose status it reads itself)."""
    reaped, kept = (os.posix_spawn("/bin/true", ["true"], os.environ) for _ in range(2))
    _wait_zombie(reaped)
    _wait_zombie(kept)
    supervisor.reap_orphans(skip=(kept,))
    assert not Path(f"/proc/{reaped}").exists()
    assert supervisor.journals.proc_stat(kept)[0] == "Z"
    os.waitpid(kept, 0)


# ---- --guest: what the supervisor hands labkit.guest -------------------------------------------

def _guest_lab(tmp_path, **kw) -> supervisor.Lab:
    lab = _sup(tmp_path).lab
    lab.guest, lab.host = "arm64", "qemu-arm64-tcg"
    for k, v in kw.items():
        setattr(lab, k, v)
    return lab


@pytest.mark.parametrize("stdout, raises, want", [
    ("kvm\n", None, "kvm"), ("tcg\n", None, "tcg"), ("", None, "tcg"),
    (None, OSError("no python"), "tcg"), (None, supervisor.subprocess.TimeoutExpired("x", 120), "tcg")])
def test_the_guest_accelerator_is_asked_of_labkit_guest_and_tcg_otherwise(stdout, raises, want):
    calls = []

    def run(argv, **kw):
        calls.append((argv, kw))
        if raises:
            raise raises
        return supervisor.subprocess.CompletedProcess(argv, 0, stdout, "")

    assert supervisor.guest_accel("arm64", run=run) == want
    assert calls[0][0] == [supervisor.PY, "-m", "labkit.guest", "accel", "--arch", "arm64"]
    assert calls[0][1]["timeout"] == 120


@pytest.mark.parametrize("commit, dirty, exported", [
    ("3e9992e9" * 5, False, "PCB_GIT_COMMIT=3e9992e93e9992e93e9992e93e9992e93e9992e9 PCB_GIT_DIRTY=0"),
    ("3e9992e9" * 5, True, "PCB_GIT_DIRTY=1"),
    (None, None, "export PCB_GIT_COMMIT='' PCB_GIT_DIRTY=1"),   # unknown: never claimed clean
])
def test_the_guest_job_carries_the_commit_and_never_claims_a_clean_checkout_it_did_not_check(
        tmp_path, commit, dirty, exported):
    text = supervisor.guest_job_text(_guest_lab(tmp_path), commit, dirty)
    assert exported in text
    assert "--labs demo --host qemu-arm64-tcg --out /out/results --full" in text


def test_the_guest_job_of_a_quick_run_of_some_groups(tmp_path):
    text = supervisor.guest_job_text(_guest_lab(tmp_path, quick=True, only=["setup", "guest"]), "a" * 40, False)
    assert text.splitlines()[-1] == "bash .github/ci-labs.sh --labs demo --host qemu-arm64-tcg --out /out/results --only setup,guest"


@pytest.mark.parametrize("quick, timeout", [(True, "3600"), (False, "14400")])
def test_the_guest_run_command(tmp_path, quick, timeout):
    argv = supervisor.guest_run_argv(_guest_lab(tmp_path, quick=quick), tmp_path / "job", tmp_path / "s", "epyc")
    assert argv[:4] == [supervisor.PY, "-m", "labkit.guest", "run"]
    opts = dict(zip(argv[4::2], argv[5::2]))
    assert opts == {"--arch": "arm64", "--profile": "lab", "--mem": "3072", "--cpus": "2",
                    "--job": str(tmp_path / "job"), "--out": str(tmp_path / "s" / "out"),
                    "--work": str(tmp_path / "s" / "work"), "--out-mib": "2048", "--scratch-mib": "8192",
                    "--host-label": "epyc", "--timeout": timeout}


# ---- the run's processes ------------------------------------------------------------------------

class _NoJournalFile:
    path = Path("/nonexistent/.demo.journal")
    copy = None


def test_a_run_that_never_began_stops_no_process(tmp_path, monkeypatch):
    """Before begin() a run has no tag: undoing its (empty) journal stops nothing."""
    stopped = []
    monkeypatch.setattr(supervisor, "stop_run", lambda tag, *a: stopped.append(tag) or True)
    s = _sup(tmp_path)
    s.journal = _NoJournalFile()
    assert s.undo_all() and stopped == []
    s.tag = "demo.1.2"
    assert s.undo_all() and stopped == ["demo.1.2"]


def test_relay_ends_soon_after_its_child_while_a_grandchild_holds_the_pipe(tmp_path):
    """The child exits at once and leaves a background process holding its stderr: relay()
    notices the exit within one 0.2-s wait and returns, not when the pipe closes (3 s)."""
    import time
    s = _sup(tmp_path)
    pidfile = tmp_path / "grandchild.pid"
    t0 = time.monotonic()
    rc = s.relay(["sh", "-c", f"echo first >&2; sleep 3 & echo $! > {pidfile}; exit 7"], dict(os.environ))
    took = time.monotonic() - t0
    try:
        os.kill(int(pidfile.read_text()), 15)
    except (OSError, ValueError):
        pass
    assert rc == 7 and took < 0.9, took


def test_relay_reaps_orphans_about_once_a_second_while_its_child_runs(tmp_path, monkeypatch):
    """The supervisor is its run's subreaper: while the child runs, relay() reaps the orphans that
    came back to it once a second, not on each 0.2-s pass, and not once the child has ended."""
    import time
    calls = []
    monkeypatch.setattr(supervisor, "reap_orphans", lambda skip=(): calls.append(time.monotonic()))
    s = _sup(tmp_path)
    t0 = time.monotonic()
    assert s.relay(["sleep", "1.4"], dict(os.environ)) == 0
    # one reap after the first second (two on a host so loaded that sleep took 2.2 s)
    assert 1 <= len(calls) <= 2 and calls[0] - t0 >= 1.0, [round(c - t0, 2) for c in calls]


# ---- the lock -----------------------------------------------------------------------------------

def test_the_lock_is_the_hosts(tmp_path, monkeypatch):
    """/run/lock/perf-casebook.lock by default, PCB_LOCK_DIR's when set, the temporary
    directory's when the lock directory cannot take a file; two Locks on it (two labs, or two
    checkouts) exclude each other; the holder's lab is read from its environment."""
    monkeypatch.delenv("PCB_LOCK_DIR", raising=False)
    monkeypatch.setattr(supervisor, "LOCK_DIR", tmp_path / "run-lock")
    (tmp_path / "run-lock").mkdir()
    assert supervisor.lock_path() == tmp_path / "run-lock" / "perf-casebook.lock"
    monkeypatch.setenv("PCB_LOCK_DIR", str(tmp_path / "mine"))
    (tmp_path / "mine").mkdir()
    assert supervisor.lock_path() == tmp_path / "mine" / "perf-casebook.lock"
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    import tempfile
    monkeypatch.setattr(tempfile, "tempdir", None)
    assert supervisor.lock_path(tmp_path / "absent") == tmp_path / "tmp" / "perf-casebook.lock"
    a, b = supervisor.Lock(supervisor.lock_path()), supervisor.Lock(supervisor.lock_path())
    assert a.take() and not b.take()
    assert (supervisor.lock_path().stat().st_mode & 0o777) == 0o644
    os.close(a.fd)
    assert b.take(wait=1)
    os.close(b.fd)
    (tmp_path / "proc" / "42").mkdir(parents=True)
    (tmp_path / "proc" / "42" / "environ").write_bytes(b"HOME=/root\0PCB_LAB_NAME=fstime\0PCB_LAB_TITLE=x y\0")
    assert supervisor.holder_lab("42", proc=tmp_path / "proc") == "fstime"
    assert supervisor.holder_lab("43", proc=tmp_path / "proc") == ""


def test_the_lab_declarations_types_resolve():
    """Lab's annotations are types (read by dataclasses, documentation and type checkers)."""
    import typing
    hints = typing.get_type_hints(supervisor.Lab)
    assert hints["out"] == (str | None) and hints["guest"] == (str | None) and hints["quick"] is bool


def test_a_stop_signal_is_kept_once_and_ends_the_running_child(tmp_path):
    """on_signal: the first stop signal is the run's reason to stop and its running child gets
    SIGTERM; a later one changes nothing, and none counts while the undo runs."""
    import signal
    import subprocess
    s = _sup(tmp_path)
    s.child = subprocess.Popen(["sleep", "30"])
    try:
        s.on_signal(signal.SIGINT, None)
        assert s.stop_sig == signal.SIGINT
        assert s.child.wait(timeout=10) == -signal.SIGTERM
        s.on_signal(signal.SIGHUP, None)
        assert s.stop_sig == signal.SIGINT
    finally:
        if s.child.poll() is None:
            s.child.kill()
            s.child.wait()
    undoing = _sup(tmp_path)
    undoing.undoing = True
    undoing.on_signal(signal.SIGTERM, None)
    assert undoing.stop_sig is None


def test_an_undo_that_fails_without_the_journal_says_to_undo_by_hand(tmp_path, monkeypatch, capfd):
    """The journal gone, its copy replayed and an action failing: nothing can retry it, and the
    run says so."""
    s = _sup(tmp_path)
    copy = tmp_path / "copy.journal"
    copy.write_text("")

    class Gone:
        path = tmp_path / "gone.journal"

    Gone.copy = copy
    s.journal = Gone()
    monkeypatch.setattr(supervisor, "replay", lambda *a: False)
    assert s.undo_all() is False
    err = capfd.readouterr().err
    assert "some host changes could not be undone (above), and without the journal --recover cannot retry " \
           "them: undo them by hand" in err, err


def test_only_an_unavailable_capability_becomes_a_variable():
    """PCB_CAP_<NAME> for each capability the probe found unavailable (its reason, or
    "unavailable"); none for one available, unprobed, or not an object."""
    host = {"pmu": {"available": False, "reason": "no PMU in this VM"}, "tracefs": {"available": True},
            "loop_devices": {"available": False}, "netns": None}
    assert supervisor.capability_env(host) == {"PCB_CAP_PMU": "no PMU in this VM", "PCB_CAP_LOOP": "unavailable"}
    assert supervisor.capability_env({}) == {}


def _checkout(folder: Path) -> Path:
    """A folder laid out as a checkout: labs/lib/lab.sh and one lab's run.sh."""
    (folder / "labs" / "lib").mkdir(parents=True)
    (folder / "labs" / "lib" / "lab.sh").write_text("")
    (folder / "labs" / "demo").mkdir()
    (folder / "labs" / "demo" / "run.sh").write_text("")
    return folder


def test_a_lab_runs_only_with_its_own_checkouts_labkit(tmp_path):
    """The checkout of a run.sh is the nearest folder above it with labs/lib/lab.sh; a labkit
    imported from another checkout is refused, with both named."""
    mine, other = _checkout(tmp_path / "mine"), _checkout(tmp_path / "other")
    script = mine / "labs" / "demo" / "run.sh"
    assert supervisor.lab_checkout(script) == mine.resolve()
    assert supervisor.lab_checkout(tmp_path / "elsewhere" / "run.sh") is None
    assert supervisor.foreign_labkit(script, root=mine) is None
    assert supervisor.foreign_labkit(tmp_path / "elsewhere" / "run.sh", root=mine) is None
    why = supervisor.foreign_labkit(script, root=other)
    assert why.startswith(f"run.sh: labkit was imported from {other}, not from this lab's checkout {mine.resolve()}")
    assert "\n" not in why


def test_a_run_started_in_another_checkouts_folder_runs_its_own_labkit(tmp_path):
    """`python -m` puts the current directory first: lab.sh's PYTHONSAFEPATH keeps a labkit in the
    folder a reader starts the run from (another checkout) from replacing the lab's own."""
    decoy = tmp_path / "labkit" / "run"
    decoy.mkdir(parents=True)
    (tmp_path / "labkit" / "__init__.py").write_text("")
    (decoy / "__init__.py").write_text("")
    (decoy / "supervisor.py").write_text("print('DECOY LABKIT')\n")
    proc = subprocess.run(["bash", str(supervisor.ROOT / "tests" / "fakelab" / "run.sh"), "--help"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and "DECOY" not in proc.stdout + proc.stderr, proc.stdout + proc.stderr
    assert "--quick" in proc.stdout


def test_the_supervisor_refuses_a_lab_of_another_checkout(tmp_path):
    """The refusal at the entry point: one line on stderr, exit status 2, nothing run."""
    other = _checkout(tmp_path / "other")
    proc = subprocess.run([sys.executable, "-m", "labkit.run.supervisor", str(other / "labs" / "demo" / "run.sh"), "0",
                           "--help"], cwd=supervisor.ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and proc.stdout == "", proc.stdout + proc.stderr
    assert proc.stderr.count("\n") == 1 and "not from this lab's checkout" in proc.stderr


def test_a_failed_probe_stops_the_run_with_exit_1_and_undoes(tmp_path, monkeypatch, capfd):
    """run(): when `labkit probe` fails (its relay stubbed here to exit 1), the run says so and
    stops with exit status 1, its journal replayed (the fake lab's script) and its scratch and
    unfinished run directory gone. Signal handlers are put back afterwards."""
    ran = []

    def relay(argv, env, **kw):
        ran.append(argv[1:4])
        return 1
    sup = _driven(tmp_path, monkeypatch, relay, host="fake")
    code = _exit_code(sup.run)
    err = capfd.readouterr().err
    assert code == 1, err
    assert ran == [["-m", "labkit", "probe"]], ran
    assert "labkit probe failed (exit 1)" in err
    assert list((tmp_path / "scratch").iterdir()) == []
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [".fakelab.log"], "journal or run directory left"


def test_a_guest_job_carries_the_guests_inferno_when_setup_built_it(tmp_path, monkeypatch, capfd):
    """guest(): the job handed to labkit.guest holds the checkout as git tracks it and, where
    ``make setup`` built inferno for the guest's architecture (``.tools/<arch>/``), that copy too
    (the guest draws its flame graphs with it). Driven in-process on a checkout of one file, the
    guest's relay stubbed to look at the job and fail: then exit 1, everything undone."""
    root = tmp_path / "checkout"
    (root / ".tools" / "arm64" / "bin").mkdir(parents=True)
    (root / ".tools" / "arm64" / "bin" / "inferno-flamegraph").write_text("#!/bin/sh\n")
    (root / ".tools" / "arm64" / ".crates.toml").write_text("[v1]\n")
    (root / "README.md").write_text("a checkout\n")
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    subprocess.run(["git", "-C", str(root), "add", "README.md"], check=True)
    monkeypatch.setattr(supervisor, "ROOT", root)
    monkeypatch.setattr(supervisor, "guest_accel", lambda arch: "tcg")
    seen = {}

    def relay(argv, env, **kw):
        job = Path(argv[argv.index("--job") + 1])
        seen["files"] = sorted(str(p.relative_to(job)) for p in job.rglob("*") if p.is_file())
        return 1
    sup = _driven(tmp_path, monkeypatch, relay, guest="arm64")
    assert _exit_code(sup.guest) == 1, capfd.readouterr().err
    assert seen["files"] == ["repo/.tools/.crates.toml", "repo/.tools/bin/inferno-flamegraph", "repo/README.md", "run"]
    assert list((tmp_path / "scratch").iterdir()) == []


def test_a_lock_released_is_taken_within_a_tenth_of_a_second_or_so(tmp_path):
    """Lock.take(wait=...) looks again every 0.1 s: a lock another process holds for 0.3 s more
    is taken well within a second (a --recover right after a kill waits no longer than needed)."""
    import time
    path = supervisor.lock_path(tmp_path)
    holder = subprocess.Popen(["flock", str(path), "sleep", "0.3"])
    try:
        t0 = time.monotonic()
        while True:                             # until the holder has taken it
            probe = supervisor.Lock(path)
            if not probe.take():
                os.close(probe.fd)
                break
            os.close(probe.fd)                  # closing the descriptor releases the flock
            assert time.monotonic() - t0 < 10, "flock never took the lock"
        lock = supervisor.Lock(path)
        t1 = time.monotonic()
        assert lock.take(wait=5)
        assert time.monotonic() - t1 < 1.0, time.monotonic() - t1
        os.close(lock.fd)
    finally:
        holder.wait()


@pytest.mark.parametrize("journal, waited", [(True, 10), (False, 0)], ids=["a killed run's journal", "no journal"])
def test_a_killed_runs_lock_is_waited_for_ten_seconds_then_refused(tmp_path, monkeypatch, journal, waited):
    """take_lock: while a journal says the lock's holder is a killed run, the lock is waited for up
    to 10 s (its last processes may take that long to exit on a loaded host), then the run is
    refused; with no such journal it is refused at once. The clock is a fake one: the waits are
    counted, not slept."""
    import time
    from types import SimpleNamespace
    clock = [1000.0]
    # the supervisor's own view of the time module: pytest's and xdist's keep the real clock
    fake = {**{n: getattr(time, n) for n in dir(time) if not n.startswith("_")},
            "monotonic": lambda: clock[0], "sleep": lambda s: clock.__setitem__(0, clock[0] + s)}
    monkeypatch.setattr(supervisor, "time", SimpleNamespace(**fake))
    path = supervisor.lock_path(tmp_path)
    held = supervisor.Lock(path)
    assert held.take()                          # another open file of the lock: flock refuses this one
    try:
        s = _sup(tmp_path)
        s.lock = supervisor.Lock(path)
        monkeypatch.setattr(supervisor, "find_journals", lambda *a: [tmp_path / ".lab.journal"] if journal else [])
        monkeypatch.setattr(supervisor, "live", lambda j: False)
        monkeypatch.setattr(s.lock, "holder", lambda: "4242")
        with pytest.raises(supervisor.Usage, match="pid 4242"):
            s.take_lock()
        assert waited <= clock[0] - 1000.0 < waited + 0.15, clock[0] - 1000.0
    finally:
        os.close(held.fd)


def _leaving_lab(tmp_path, leaves: str, quick: bool, only: list[str] | None = None) -> "supervisor.Lab":
    (tmp_path / "run.sh").write_text("")
    (tmp_path / "lab.toml").write_text(f"quick_budget_s = 1\nfull_budget_s = 2\n[quick_leaves_out]\n{leaves}")
    groups = [("build", "b", True), ("fast", "f", False), ("slow", "s", False)]
    return supervisor.Lab(tmp_path / "run.sh", "demo", "Demo", "", groups, quick=quick, only=only)


def test_a_quick_run_leaves_out_the_manifests_groups_unless_only_names_them(tmp_path):
    lab = _leaving_lab(tmp_path, 'slow = "takes long"\n', quick=True)
    assert [g for g, _, _ in lab.selected()] == ["build", "fast"] and lab.left_out() == {"slow": "takes long"}
    lab.only = ["slow"]
    assert [g for g, _, _ in lab.selected()] == ["build", "slow"] and lab.left_out() == {}
    lab.only = ["fast"]
    assert [g for g, _, _ in lab.selected()] == ["build", "fast"] and lab.left_out() == {}
    lab.only, lab.quick = None, False
    assert [g for g, _, _ in lab.selected()] == ["build", "fast", "slow"] and lab.left_out() == {}
    assert "slow       s (full runs; --quick --only slow)" in supervisor.usage_text(lab)


def test_a_left_out_group_the_lab_does_not_declare_is_refused(tmp_path):
    lab = _leaving_lab(tmp_path, 'slwo = "typo"\n', quick=True)
    with pytest.raises(supervisor.Declaration, match="slwo is not a group of this lab"):
        lab.selected()
