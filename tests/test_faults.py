"""The fault matrix (tests/fault_matrix.py) in the suite: every lab, every group of steps, stopped
at a step boundary by SIGINT, SIGTERM or SIGHUP (output through a pipe whose reader dies too) or
by SIGKILL followed by ``run.sh --recover``; the host must be exactly as before (mounts, loop
devices, namespaces and /run/netns, schedulers, read_ahead_kb, audit, tracefs, /dev/shm,
~/.debug), no process of the run left, nothing in the run's fresh $HOME and $TMPDIR.

The sampled matrix: one case per (lab, group), its boundary drawn with a fixed seed, the four
signals in turn (``PCB_FAULT_SEED`` changes the seed). One per group, where ``make bench`` runs
two: two per group (92 cases at about 6 s each) kept the full tier past its 30 minutes, and the
full matrix is where every step meets every signal. A lab whose full matrix the committed record
holds complete and clean for its code as it is now is left out of the sample (:func:`covered_labs`).
``tests/fault_matrix.py --full`` tries every
step with every signal (hours), ``--every-line`` every boundary (a day). And a lab run inside a
guest (``--guest``), stopped while the guest runs: its runner and QEMU must go with it.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

import fault_matrix as fm
from labrun import ROOT, is_root, lab_command, run_lab, signal_at, tagged_processes
import refhost

pytestmark = [pytest.mark.lab, pytest.mark.skipif(not is_root(), reason="the labs' host changes need root")]

SEED = int(os.environ.get("PCB_FAULT_SEED", "15"))
SAMPLE = fm.sampled_cases(fm.labs(), SEED, per_group=1)


def covered_labs(record=fm.RECORD) -> set[str]:
    """Labs whose full matrix ``record`` holds complete and clean for their code as it is now
    (:meth:`fault_matrix.State.status`): every step of every group already met every signal
    on this code, so the suite's sample of them would add nothing. ``PCB_FAULT_SAMPLE_ALL=1``
    samples every lab anyway."""
    if os.environ.get("PCB_FAULT_SAMPLE_ALL") == "1":
        return set()
    state = fm.State(record, {lab: fm.code_hash(lab) for lab in fm.labs()})
    return {lab for lab in fm.labs() if (st := state.status(lab))["complete"] and not st["not_clean"]}


CASES = [c for c in SAMPLE if c.lab not in covered_labs()]   # the labs whose code changed since their full matrix


@pytest.mark.timeout(300)
@pytest.mark.parametrize("case", CASES or [None], ids=lambda c: c.id if c else "every-lab-covered")
def test_signal_at_a_step_boundary_leaves_the_host_as_it_was(case, tmp_path):
    if case is None:   # an empty parameter set fails at collection (pyproject.toml)
        pytest.skip("the committed record's full matrix covers every lab's code as it is now")
    o = fm.run_judged(case, tmp_path)
    assert o.clean, f"{case.id} (signal at: {o.boundary}, exit {o.rc}):\n" + "\n".join(o.problems)


def test_every_lab_and_signal_is_in_the_sample():
    assert {c.lab for c in SAMPLE} == set(fm.labs())
    for lab in fm.labs():
        assert {c.sig for c in SAMPLE if c.lab == lab} == {"SIGINT", "SIGTERM", "SIGHUP", "SIGKILL"}, lab
        assert {c.group for c in SAMPLE if c.lab == lab} == {g for g in fm.groups(lab) if (lab, g) not in fm.SAMPLE_SKIP}


def test_only_a_complete_and_clean_full_matrix_leaves_a_lab_out_of_the_sample(tmp_path, monkeypatch):
    """A lab is left out only when the record holds every case of its full matrix for its code
    as it is now, all clean: one case missing, one not clean, or another code keeps it in."""
    lab = "lat_tcp"
    code = fm.code_hash(lab)
    ends = {g: [2, 4] for g in fm.groups(lab)}
    lines = [{"kind": "steps", "lab": lab, "group": g, "ends": e, "code": code} for g, e in ends.items()]
    cases = [c for g, e in ends.items() for c in fm.step_cases(lab, g, e)]

    def record(outcomes, code_of_cases=code):
        path = tmp_path / "record.jsonl"
        rows = lines + [{"kind": "case", "code": code_of_cases,
                         "outcome": {"case": vars(c), "clean": ok, "seconds": 1.0}} for c, ok in outcomes]
        path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
        return path

    assert lab in covered_labs(record([(c, True) for c in cases]))
    assert lab not in covered_labs(record([(c, True) for c in cases[1:]]))
    assert lab not in covered_labs(record([(c, c is not cases[0]) for c in cases]))
    assert lab not in covered_labs(record([(c, True) for c in cases], code_of_cases="other"))
    monkeypatch.setenv("PCB_FAULT_SAMPLE_ALL", "1")
    assert covered_labs(record([(c, True) for c in cases])) == set()


def test_state_resumes_only_for_the_same_code(tmp_path, monkeypatch):
    """A resumable record gives back the counts and outcomes of the same code hash (a line cut
    short by a kill ignored), and nothing of another: a lab change starts the matrix over."""
    f = tmp_path / "state.jsonl"
    st = fm.State(f, "aaaa")
    # Each group: two steps of two lines, then one line of the group's cleanup.
    from labkit.run import events   # the lines as the matrix reads them: each tagged with its kind
    lines = [events.tag("spawn:a.bg", "[fstime  1.0s] a.bg: starting in background: x"),
             events.tag("ok:a", "[fstime  1.1s] a: ok (1.0s)"), events.tag("step:b", "[fstime  1.2s] b: cmd"),
             events.tag("skipped:b", "[fstime  2.2s] b: skipped: no tool"),
             events.tag("cleanup", "[fstime  2.3s] cleanup: stop a.bg (pid 1)")]
    monkeypatch.setattr(fm, "group_lines", lambda lab, group, base: lines)
    n_groups = len(fm.groups("fstime"))
    cases = fm.full_cases(["fstime"], tmp_path, st)
    assert len(cases) == 3 * 4 * n_groups
    lines_cases = fm.full_cases(["fstime"], tmp_path, st, every_line=True)
    assert len(lines_cases) == 5 * 4 * n_groups and {c.id for c in cases} <= {c.id for c in lines_cases}
    st.done(fm.Outcome(cases[0], clean=True, rc=130, seconds=1.5))
    st.done(fm.Outcome(cases[1], clean=False, rc=0, problems=["mount left: /x"]))
    with f.open("a") as out:
        out.write('{"code": "aaaa", "kind": "ca')
    monkeypatch.setattr(fm, "group_lines", lambda lab, group, base: pytest.fail("counted again"))
    again = fm.State(f, "aaaa")
    assert fm.full_cases(["fstime"], tmp_path, again) == cases
    assert fm.full_cases(["fstime"], tmp_path, again, every_line=True) == lines_cases
    assert again.outcomes[cases[0].id] == fm.Outcome(cases[0], clean=True, rc=130, seconds=1.5)
    assert again.outcomes[cases[1].id].problems == ["mount left: /x"] and len(again.outcomes) == 2
    other = fm.State(f, "bbbb")
    assert other.counts == {} and other.ends == {} and other.outcomes == {}
    assert len(fm.code_hash()) == 16 and fm.code_hash() == fm.code_hash()


def test_a_change_to_one_lab_starts_only_its_cases_over(tmp_path, monkeypatch):
    """Per-lab code hashes: a lab's hash follows its own folder and the shared code (labs/lib,
    labkit), not another lab's folder, the labs' prose or their tests; the record keeps the
    outcomes of the labs whose hash is unchanged."""
    files = {"labs/lib/lab.sh": b"lib", "labs/a/run.sh": b"a", "labs/b/run.sh": b"b",
             "labs/a/evidence.md": b"prose", "labs/a/tests/test_a.py": b"test", "labkit/x.py": b"x"}

    def tree(root):
        for name, data in files.items():
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            (root / name).write_bytes(data)
        subprocess.run(["git", "init", "-q", str(root)], check=True)
        subprocess.run(["git", "-C", str(root), "add", "-A"], check=True)

    tree(tmp_path)
    monkeypatch.setattr(fm, "ROOT", tmp_path)
    before = {lab: fm.code_hash(lab) for lab in ("a", "b")}
    assert before["a"] != before["b"]
    (tmp_path / "labs/b/run.sh").write_bytes(b"b changed")
    (tmp_path / "labs/a/evidence.md").write_bytes(b"prose changed")
    (tmp_path / "labs/a/tests/test_a.py").write_bytes(b"test changed")
    assert fm.code_hash("a") == before["a"] and fm.code_hash("b") != before["b"]
    (tmp_path / "labs/lib/lab.sh").write_bytes(b"lib changed")
    assert fm.code_hash("a") != before["a"]

    f = tmp_path / "state.jsonl"
    st = fm.State(f, {"a": "ha", "b": "hb"})
    st.done(fm.Outcome(fm.Case("a", "g", 1, "SIGINT"), clean=True, rc=130))
    st.done(fm.Outcome(fm.Case("b", "g", 1, "SIGINT"), clean=True, rc=130))
    again = fm.State(f, {"a": "ha", "b": "hb2"})
    assert set(again.outcomes) == {"a-g-1-SIGINT"}


GUEST_TOOLS = ["qemu-system-aarch64", "mmdebstrap", "dtc", "mke2fs", "cpio"]


def _after_guest_start(line: str) -> bool:
    """The lab runs inside the booted guest (the runner relays the guest's "== lat_tcp" line)."""
    return "guest: == lat_tcp" in line


@pytest.mark.guest
@pytest.mark.timeout(900)
@pytest.mark.skipif(any(not shutil.which(t) for t in GUEST_TOOLS), reason="QEMU and the guest tools are not installed")
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGKILL], ids=lambda s: s.name)
def test_a_lab_in_a_guest_stops_with_its_guest(sig, tmp_path):
    """labs/lat_tcp/run.sh --guest arm64, signalled while the lab runs inside the booted guest:
    the runner and QEMU go (the run's tag; QEMU also dies with its parent), the scratch
    directory with the guest's disks is removed; after SIGKILL, --recover does it."""
    env = fm.case_env(tmp_path)
    args = ["--guest", "arm64", "--quick", "--host", "fault-guest", "--out", str(tmp_path / "out"),
            "--scratch", str(tmp_path / "scratch")]
    got = signal_at(lab_command("lat_tcp", *args), _after_guest_start, sig, env=env, wait=180)
    if sig == signal.SIGKILL:
        rec = run_lab("lat_tcp", "--recover", "--out", str(tmp_path / "out"), "--scratch", str(tmp_path / "scratch"),
                      env=env)
        assert rec.returncode == 0, rec.stderr
    else:
        assert got.rc == 130, "".join(got.lines)[-2000:]
    problems = fm.leftovers("lat_tcp", tmp_path, f"lat_tcp.{got.pid}.")
    assert not problems, problems
    qemu = [p for p in tagged_processes() if "qemu-system" in p and str(tmp_path) in p]
    assert not qemu, qemu
    assert not any(Path(tmp_path / "scratch").iterdir())


def _imports(path: Path, root: Path) -> list[tuple[str, str | None]]:
    """Every module a Python file imports, by its dotted name (a relative import resolved against
    the file's package under ``root``; ``from a import b`` gives both ``a`` and ``a.b``), each with
    the name of the function the import statement is in (None at module level)."""
    import ast
    tree = ast.parse(path.read_text())
    parents = {c: n for n in ast.walk(tree) for c in ast.iter_child_nodes(n)}
    package = path.relative_to(root).parent.parts  # ("labkit", ...)
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            base = list(package[:len(package) - node.level + 1]) if node.level else []
            mod = ".".join(base + ([node.module] if node.module else []))
            names = [mod] + [f"{mod}.{a.name}" for a in node.names]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        else:
            continue
        up = parents.get(node)
        while up is not None and not isinstance(up, (ast.FunctionDef, ast.AsyncFunctionDef)):
            up = parents.get(up)
        out += [(name, up.name if up is not None else None) for name in names]
    return out


def test_site_only_code_is_outside_what_labs_run():
    from labrun import ROOT
    """The fault matrix's code hash leaves out ``SITE_ONLY`` (the site's build and what pages
    show), so a page change does not start the day-long matrix over. That holds only while no
    lab-side module imports them (any import, also inside a function, but in the functions of
    the reader's own commands, ``READER_COMMANDS``, which no lab script runs) and no lab names
    them (a lab's tests, labs/<lab>/tests/, are pytest's, not the lab's run)."""
    # modules and packages (a folder with an __init__.py), as dotted names under labkit
    site_modules = {p.removeprefix("labkit/").removesuffix(".py").removesuffix("/").replace("/", ".")
                    for p in fm.SITE_ONLY if p.endswith(".py") or (ROOT / p / "__init__.py").is_file()}
    for path in sorted((ROOT / "labkit").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel.startswith(fm.SITE_ONLY):
            continue
        for name, function in _imports(path, ROOT):
            inner = name.removeprefix("labkit.")
            if function in fm.READER_COMMANDS.get(rel, ()):
                continue
            assert not any(inner == m or inner.startswith(m + ".") for m in site_modules), (rel, name, function)
        assert "theme/" not in path.read_text(), rel
    reader_run = re.compile(r"labkit\W+(show|hosts|compare|check)\b")
    for path in sorted((ROOT / "labs").rglob("*")):
        if path.is_file() and path.suffix in {".sh", ".py", ""} and path.relative_to(ROOT / "labs").parts[1:2] != ("tests",):
            text = path.read_text(errors="replace")
            assert not any(m in text for m in ("mkdocs_hooks", "labkit.site", "labkit/site", "labkit.view", "labkit/view")), path
            assert not reader_run.search(text), (path, reader_run.search(text).group(0))


def test_command_only_modules_are_imported_only_by_their_command():
    """The code hash leaves out ``COMMAND_ONLY`` modules (the scaffold of ``labkit new-lab``).
    That holds while the only import of each anywhere in labkit and labs is inside the function
    of its own command in labkit/cli.py (a lab run starts ``labkit record``, never ``new-lab``),
    and no script of a lab names it."""
    from labrun import ROOT
    owner = {"labkit/newlab.py": "_cmd_new_lab"}
    assert set(owner) == set(fm.COMMAND_ONLY)
    for rel, command in owner.items():
        module = rel.removesuffix(".py").replace("/", ".")
        found = []
        for path in sorted((ROOT / "labkit").rglob("*.py")) + sorted((ROOT / "labs").rglob("*.py")):
            if path.relative_to(ROOT).as_posix() == rel or "tests" in path.relative_to(ROOT).parts:
                continue
            found += sorted({(path.relative_to(ROOT).as_posix(), function) for name, function in _imports(path, ROOT)
                             if name == module or name.startswith(module + ".")})
        assert found == [("labkit/cli.py", command)], (rel, found)
    for path in (ROOT / "labs").rglob("*.sh"):
        assert not any(m in path.read_text() for m in ("newlab", "new-lab")), path


def test_page_only_files_are_outside_what_labs_run(monkeypatch):
    """The code hash also leaves out a lab's ``PAGE_ONLY`` files (the original's figures, the
    exercises, the evidence page's prose) and its tool-card exercises (``cards/``), so a correction to a page does not start a lab's
    matrix over. That holds only while nothing a lab run executes names them: the lab's own
    scripts, labs/lib, and labkit's run side (supervisor, probe, journal, record, steps, guest,
    parsers, the manifest and the result model)."""
    from labrun import ROOT
    run_side = [p for p in (ROOT / "labs").rglob("*")
                if p.is_file() and p.suffix in {".sh", ".py", ".c", ""} and "tests" not in p.relative_to(ROOT / "labs").parts]
    for part in ("run", "guest", "parsers"):
        run_side += sorted((ROOT / "labkit" / part).rglob("*.py")) + sorted((ROOT / "labkit" / part).rglob("*.sh"))
    run_side += [ROOT / "labkit" / f for f in ("record.py", "steps.py", "manifest.py", "model.py", "results.py")]
    assert len(run_side) > 40
    for path in run_side:
        text = path.read_text(errors="replace")
        for name in (*fm.PAGE_ONLY, "/cards/", "labkit.cards", "import cards"):   # cards/: the tool cards' exercises
            assert name not in text, (path.relative_to(ROOT).as_posix(), name)
    # a page-only file's edit leaves the lab's hash as it was; any other file of the lab changes it
    lab = "lat_tcp"
    before = fm.code_hash(lab)
    real = Path.read_bytes
    for name in ("original.toml", "exercises.toml", "cards/gdb.exercises.toml", "run.sh"):  # claims.toml: below
        edited = ROOT / "labs" / lab / name
        assert edited.is_file(), edited
        # a line of code, not a comment: the hash leaves out whole-line comments of scripts
        monkeypatch.setattr(Path, "read_bytes", lambda p, e=edited: real(p) + (b"\nedit=1\n" if p == e else b""))
        assert (fm.code_hash(lab) == before) == (name != "run.sh"), name
    monkeypatch.setattr(Path, "read_bytes", real)
    assert fm.code_hash(lab) == before


def test_a_claims_wording_is_outside_the_code_hash(monkeypatch):
    """A lab's claims.toml counts in its code hash without its claims' ``CLAIM_TEXT`` (statement,
    source): a run evaluates the claims when it records, and no verdict carries those fields, so
    rewording a claim leaves the lab's matrix as it was; a change to what a claim compares (its
    factor, its sides, a new claim) starts it over."""
    from labrun import ROOT
    # what a run records of its claims (labkit.record: claims.evaluate) is the same without their words
    from labkit import model
    from labkit.stats import claims as claims_mod
    lab = "fstime"
    spec = ROOT / "labs" / lab / "claims.toml"
    claims = claims_mod.load(spec)
    result = model.load(refhost.result(lab))
    reworded = [{**c, **{key: "reworded" for key in fm.CLAIM_TEXT if key in c}} for c in claims]
    assert reworded != claims
    assert claims_mod.evaluate(reworded, result) == claims_mod.evaluate(claims, result)
    original = spec.read_text()
    before = fm.code_hash(lab)
    real = Path.read_bytes

    def edit(old: str, new: str) -> str:
        assert old in original, old
        monkeypatch.setattr(Path, "read_bytes", lambda p: original.replace(old, new, 1).encode() if p == spec else real(p))
        return fm.code_hash(lab)

    lines = original.splitlines()
    for key in fm.CLAIM_TEXT:
        line = next(line for line in lines if line.startswith(f"{key} = "))
        assert edit(line, f'{key} = "Reworded."') == before
    assert edit("\n[[claim]]", "\n# a comment\n[[claim]]") == before
    factor = next(line for line in lines if line.startswith("factor = "))
    assert edit(factor, "factor = 3.5") != before
    assert edit('relation = "greater"', 'relation = "less"') != before
    assert edit("[[claim]]", '[[claim]]\nid = "x"\nstatement = "y"\nsource = "s"\nrole = "ours"\nkind = "step"\nstep = "z"\n\n[[claim]]') != before
    monkeypatch.setattr(Path, "read_bytes", real)
    assert fm.code_hash(lab) == before


@pytest.mark.timeout(180)
def test_the_matrix_started_with_sigint_ignored_still_stops_on_sigint(tmp_path):
    """A shell starts a background job with SIGINT ignored; the matrix must stop on SIGINT all
    the same: the running case's lab stopped and undone, exit 130, the record kept to resume."""
    import sys
    import time
    state = tmp_path / "state.jsonl"
    (tmp_path / "host").mkdir()
    proc = subprocess.Popen([sys.executable, str(Path(fm.__file__)), "--labs", "fakelab", "--state", str(state)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
                            env=dict(os.environ, FAKELAB_DIR=str(tmp_path / "host")),
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    lines = []
    for line in proc.stdout:  # the first case done: the second is running
        lines.append(line)
        if line.startswith("clean"):
            break
    time.sleep(0.5)
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=120)
    text = "".join(lines) + out
    assert proc.returncode == 130, text
    assert "fault matrix: stopped by SIGINT after" in text and "Traceback" not in text, text
    assert '"kind": "case"' in state.read_text()
    mine = f"FAKELAB_DIR={tmp_path / 'host'}"     # this matrix's fake lab alone, not another test's stray
    assert not tagged_processes("fakelab.", env=mine), tagged_processes("fakelab.", env=mine)


def _mounted(path: str) -> bool:
    return subprocess.run(["mountpoint", "-q", path]).returncode == 0


TRACEFS = "/sys/kernel/tracing"


@pytest.fixture
def unmounted_tracefs():
    """/sys/kernel/tracing unmounted, as on a freshly booted host; the host's own mount, if it
    had one, put back afterwards."""
    had = _mounted(TRACEFS)
    if had and subprocess.run(["umount", TRACEFS]).returncode != 0:
        pytest.skip(f"{TRACEFS} is in use: cannot start from an unmounted tracefs")
    yield TRACEFS
    if had and not _mounted(TRACEFS):
        subprocess.run(["mount", "-t", "tracefs", "nodev", TRACEFS], check=True)


@pytest.mark.timeout(300)
@pytest.mark.skipif(not shutil.which("perf"), reason="perf is not installed")
def test_a_tracefs_mount_a_tool_makes_is_undone(tmp_path, unmounted_tracefs):
    """On a freshly booted host /sys/kernel/tracing is not mounted, and `perf stat -e
    block:block_rq_complete` (fio_engines' setup probes with it) mounts it by itself: the lab
    unmounts it again (labkit/run/supervisor.py guard_kernel_fs). Found by the suite's fault matrix
    in CI after a reboot."""
    tr = unmounted_tracefs
    run = run_lab("fio_engines", "--quick", "--only", "setup", "--host", "fault-test", "--out", str(tmp_path / "out"),
                  "--scratch", str(tmp_path), timeout=240)
    assert run.returncode == 0, run.stderr[-2000:]
    assert not _mounted(tr), f"{tr} left mounted by the lab run"
    assert f"cleanup: unmount {tr} if a tool mounted it" in run.stderr, run.stderr[-2000:]


@pytest.mark.timeout(300)
@pytest.mark.skipif(not shutil.which("perf"), reason="perf is not installed")
def test_a_step_that_needs_tracefs_mounts_it_and_the_lab_unmounts_it(tmp_path, unmounted_tracefs):
    """`lab_require NAME tracefs` on a host where nothing mounted tracefs yet mounts it for the
    run (labs/lib/lab.sh lab__mount_tracefs) instead of skipping the step: optane_kyber's trace
    group runs, and /sys/kernel/tracing is unmounted when the lab ends."""
    tr = unmounted_tracefs
    run = run_lab("optane_kyber", "--quick", "--only", "trace", "--host", "fault-test", "--out", str(tmp_path / "out"),
                  "--scratch", str(tmp_path), timeout=240)
    assert run.returncode == 0, run.stderr[-2000:]
    assert f"mounted tracefs at {tr}" in run.stderr, run.stderr[-2000:]
    assert "trace: skipped" not in run.stderr and re.search(r"trace\.kyber\.1: ok", run.stderr), run.stderr[-2000:]
    assert not _mounted(tr), f"{tr} left mounted by the lab run"


@pytest.mark.timeout(300)
def test_a_loop_device_gets_its_read_ahead_back(tmp_path):
    """The kernel sets a loop device's read_ahead_kb when a file is attached (from the backing
    file system) and leaves it after the detach; the lab puts back the free device's value
    (labs/lib/lab.sh lab_loop_attach). Found by the suite's fault matrix in CI after a reboot
    (read_ahead_kb of loop2 128 -> 2560). The device is marked with an odd value first."""
    dev = subprocess.run(["losetup", "--find"], capture_output=True, text=True).stdout.strip()
    if not dev:
        pytest.skip("no free loop device")
    ra = Path(f"/sys/block/{Path(dev).name}/queue/read_ahead_kb")
    old = ra.read_text().strip()
    ra.write_text("136\n")
    try:
        run = run_lab("nvme_swiotlb", "--quick", "--only", "build", "--host", "fault-test", "--out", str(tmp_path / "out"),
                      "--scratch", str(tmp_path), timeout=240)
        assert run.returncode == 0, run.stderr[-2000:]
        assert ra.read_text().strip() == "136", f"{ra}: 136 before the run"
        assert re.search(rf"losetup --show .*{dev} ", run.stderr), run.stderr[-2000:]  # the device marked
    finally:
        ra.write_text(old + "\n")


def test_a_pause_file_holds_the_next_case_until_it_is_gone(tmp_path, capsys):
    """--pause-file: the matrix starts no case while the file exists (a quiet machine for a
    measurement beside a matrix that runs for days), and goes on once it is removed."""
    import threading
    pause = tmp_path / "pause"
    fm.wait_while_paused(pause)                      # no file: no wait, nothing said
    assert capsys.readouterr().out == ""
    pause.write_text("")
    threading.Timer(0.3, pause.unlink).start()
    t = time.time()
    fm.wait_while_paused(pause, poll_s=0.05)
    assert time.time() - t >= 0.25
    out = capsys.readouterr().out
    assert f"paused while {pause} exists" in out and "resumed after" in out


def test_a_loop_device_is_found_after_its_backing_file_is_gone(tmp_path):
    """A loop device whose backing file was deleted (a scratch directory removed under a killed
    run) is still detached by the lab's cleanup (labs/lib/lab.sh lab__loop_detach reads
    loop/backing_file, where the kernel names the file "FILE (deleted)"; losetup -j no longer finds
    it). Found by stopping the fault matrix between a SIGKILL and its --recover."""
    if os.geteuid() != 0:
        pytest.skip("loop devices need root")
    img = tmp_path / "gone.img"
    img.write_bytes(b"\0" * (1 << 20))
    attach = subprocess.run(["losetup", "--find", "--show", str(img)], capture_output=True, text=True)
    if attach.returncode != 0:
        pytest.skip(f"losetup: {attach.stderr.strip()}")
    dev = attach.stdout.strip()
    try:
        img.unlink()
        back = Path(f"/sys/block/{Path(dev).name}/loop/backing_file").read_text().strip()
        assert back == f"{img} (deleted)", back
        run = subprocess.run(["bash", "-c", f'source {ROOT}/labs/lib/lab.sh; lab__loop_detach "$1"', "detach", str(img)],
                             capture_output=True, text=True, timeout=60)
        assert run.returncode == 0, run.stderr
        assert not Path(f"/sys/block/{Path(dev).name}/loop/backing_file").exists(), f"{dev} still attached"
    finally:
        if Path(f"/sys/block/{Path(dev).name}/loop/backing_file").exists():
            subprocess.run(["losetup", "-d", dev])
