"""Running labs for real from tests: one quick run, interrupting a run mid-step, and
checking what a lab leaves behind (processes, namespaces, mounts, loop devices)."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import threading
import time
from dataclasses import dataclass

from labkit.run import events
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

ONE_REPETITION = {"PCB_ONE_REPETITION": "1"}
"""The environment of a run that keeps one repetition of each step (labs/lib/case.sh
LAB_ONE_REPETITION): the full fault matrix's, and the lab tests' of a group run alone."""
ONE_REPETITION_WHY = "not run: a repetition after the first (PCB_ONE_REPETITION=1"
"""How the reason of a step left out by such a run begins (labs/lib/case.sh LAB_ONE_REPETITION_WHY)."""


def left_out_repetition(step: dict) -> bool:
    """True when ``step`` (a result's step) is a later repetition that a run with
    :data:`ONE_REPETITION` recorded as skipped rather than ran."""
    return step["status"] == "skipped" and (step.get("reason") or "").startswith(ONE_REPETITION_WHY)


def repetitions(result: dict, step: dict) -> dict[int, dict]:
    """rep -> step, for every step of ``result`` whose case is ``step``'s but for ``rep``."""
    same = {k: v for k, v in step["case"].items() if k != "rep"}
    return {s["case"]["rep"]: s for s in result["steps"]
            if {k: v for k, v in (s.get("case") or {}).items() if k != "rep"} == same}


def run_lab(lab: str | Path, *args: str, timeout: float | None = 300, env: dict | None = None) -> subprocess.CompletedProcess:
    """Run ``labs/<lab>/run.sh ARGS`` (or a run.sh path: :func:`lab_command`) to completion, with
    ``env`` added to the environment and no stdin; returns the finished process (text output).

    A run stopped from here (the caller's Ctrl-C, the timeout) gets SIGTERM and up to 120 s to
    undo its host changes before SIGKILL: a bare SIGKILL, as subprocess.run sends, would leave
    its processes and host changes to a --recover that nobody runs.

    Raises:
        subprocess.TimeoutExpired: after ``timeout`` s (None: no limit).
    """
    proc = subprocess.Popen(lab_command(lab, *args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=dict(os.environ, **(env or {})), stdin=subprocess.DEVNULL)
    try:
        out, err = proc.communicate(timeout=timeout)
    except BaseException:
        proc.terminate()
        try:
            proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        raise
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def interrupt_at(lab: str, marker: str, *args: str, sig: int = signal.SIGINT, after: float = 0.3,
                 timeout: float = 120) -> tuple[int, str, str]:
    """Start a lab (default signal dispositions, its own process group), wait until its
    progress output contains ``marker``, wait ``after`` s, send ``sig`` to the lab's process
    group, and wait for it to exit.

    Returns (exit status, stderr text, scratch directory the lab announced).

    Raises:
        AssertionError: the marker never appeared (the step did not start).
    """
    proc = subprocess.Popen(lab_command(lab, *args), stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL, process_group=0)
    lines: list[str] = []
    seen = threading.Event()

    def reader():
        for line in proc.stderr:
            lines.append(line)
            if marker in line:
                seen.set()

    t = threading.Thread(target=reader, daemon=True)
    t.start()
    if not seen.wait(timeout):
        proc.kill()
        raise AssertionError(f"{lab}: marker {marker!r} never appeared; output:\n{''.join(lines)[-3000:]}")
    time.sleep(after)
    os.killpg(proc.pid, sig)
    try:
        rc = proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    t.join(timeout=5)
    text = "".join(lines)
    scratch = ""
    for line in lines:
        if "scratch /" in line:
            scratch = line.rsplit("scratch ", 1)[1].strip()
    return rc, text, scratch


def _has_env(proc: Path, env: str | None) -> bool:
    """Whether process ``proc`` (a /proc/PID folder) has the environment entry ``env``
    (``KEY=VALUE``; True when ``env`` is None). A test passes an entry only its own run carries (its
    ``FAKELAB_DIR``, its ``PCB_LAB_SCRATCH``), so that another test's stray process is not its own."""
    if env is None:
        return True
    try:
        return env.encode() in (proc / "environ").read_bytes().split(b"\0")
    except OSError:
        return False


def processes_matching(text: str, env: str | None = None) -> list[str]:
    """Command lines of running processes that contain ``text`` (from /proc); with ``env``, of
    those alone whose environment has that entry (:func:`_has_env`)."""
    found = []
    for p in Path("/proc").iterdir():
        if not p.name.isdigit():
            continue
        try:
            cmd = (p / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if text in cmd and str(os.getpid()) != p.name and _has_env(p, env):
            found.append(f"{p.name}: {cmd}")
    return found


def netns_list() -> list[str]:
    """Names of network namespaces (``ip netns list``)."""
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    return [line.split()[0] for line in out.splitlines() if line.strip()]


def links() -> list[str]:
    """Network interface names in the current namespace."""
    out = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    return [line.split(":")[1].strip().split("@")[0] for line in out.splitlines() if ":" in line]


def mounts_under(prefix: str) -> list[str]:
    """Mount points whose path starts with ``prefix`` (from /proc/self/mounts)."""
    return [l.split()[1] for l in Path("/proc/self/mounts").read_text().splitlines() if l.split()[1].startswith(prefix)]


def loop_devices_backed_by(prefix: str) -> list[str]:
    """Loop devices whose backing file path starts with ``prefix`` (``losetup -l -J``)."""
    out = subprocess.run(["losetup", "-l", "-J"], capture_output=True, text=True).stdout
    if not out.strip():
        return []
    return [d["name"] for d in json.loads(out)["loopdevices"] if (d.get("back-file") or "").startswith(prefix)]


def is_root() -> bool:
    return os.geteuid() == 0


def guest_steps_here(work: Path, body: str, types: dict[str, str] | None, lab: str = "demo",
                     one_repetition: bool = False) -> subprocess.CompletedProcess:
    """Run ``body`` under bash here as a guest job runs it, after ``. /job/.pcb/step.sh``: the job
    disk's step-language files (labkit.guest.job_contract_files) for a lab run of ``lab`` that
    declares ``types`` (None: a job booted outside a lab run; ``one_repetition``: a run with
    ``PCB_ONE_REPETITION=1``) go into ``work/job/.pcb``, and the job's out directory is
    ``work/out``. Returns the finished process (text output)."""
    from labkit import steps
    from labkit.guest import job_contract_files
    job, out = work / "job", work / "out"
    (job / ".pcb").mkdir(parents=True)
    out.mkdir()
    env = {"PCB_LAB_CASE": steps.env_words(types), "PCB_LAB_NAME": lab} if types is not None else {}
    if one_repetition:
        env["PCB_ONE_REPETITION"] = "1"
    for name, data in job_contract_files(env).items():
        (job / ".pcb" / name).write_bytes(data)
    return subprocess.run([shutil.which("bash") or "/bin/bash", "-c", f'set -u; . "$PCB_JOB/.pcb/step.sh"; {body}'],
                          capture_output=True, text=True, timeout=30, cwd=work,
                          env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "HOME": str(work),
                               "PCB_JOB": str(job), "PCB_OUT": str(out)})


def check_quick_result(result: dict, seconds: float, label: str = "test-quick") -> None:
    """The lab contract every quick run must meet: quick, labelled, within the lab's quick budget
    (``quick_budget_s`` of its manifest, labs/<lab>/lab.toml), and every step either ran as
    designed (with its command kept) or says why it was skipped.

    Raises:
        AssertionError: naming the first step or figure that breaks the contract.
    """
    from labkit import manifest
    budget = manifest.load(ROOT / "labs" / result["lab"])["quick_budget_s"]
    assert result["run"]["quick"] is True and result["host"]["label"] == label
    assert seconds < budget, f"quick mode took {seconds:.0f} s (budget: {budget} s, labs/{result['lab']}/lab.toml)"
    for step in result["steps"]:
        assert step["status"] in ("ok", "skipped"), step
        if step["status"] == "skipped":
            assert step["reason"], step
        else:
            assert step["command"], step
    check_left_out(result)


def check_left_out(result: dict) -> None:
    """A quick run's left-out groups (``run.left_out``) are the groups its manifest leaves out
    (``quick_leaves_out``), with the manifest's reasons, and none (a run with ``--only``, which
    runs exactly what it names); none of their steps ran, and each claim that reads a listed
    group is not applicable, saying which group and why.

    Raises:
        AssertionError: naming the group or claim that breaks it.
    """
    from labkit import manifest
    leaves = manifest.load(ROOT / "labs" / result["lab"]).get("quick_leaves_out", {})
    gone = result["run"].get("left_out", {})
    ran = {s["group"] for s in result["steps"]}
    assert gone == ({} if " --only" in result["run"]["command"] else leaves), (gone, result["run"]["command"])
    assert not ran & set(gone), sorted(ran & set(gone))
    verdicts = {v["id"]: v for v in result["claims"]}
    for c in claims_of(result["lab"]):
        if c.get("group") in gone:
            v = verdicts[c["id"]]
            assert v["verdict"] == "not applicable" and f"leaves out group {c['group']}" in v["reason"], v


def claims_of(lab: str) -> list[dict]:
    """labs/<lab>/claims.toml, loaded and checked (:func:`labkit.stats.claims.load`)."""
    from labkit.stats import claims
    return claims.load(ROOT / "labs" / lab / "claims.toml")


# ---- the fault matrix's machinery: a lab whose output goes through a pipe, a signal to its
# process group at a step boundary, and the host's state before and after --------------------

# Signals a lab started by the suite must be able to catch: the suite itself may have been
# started with some of them ignored (nohup, `&` in a script), and ignored signals are inherited.
DEFAULT_SIGNALS = "INT,TERM,HUP,PIPE,QUIT"


def lab_command(lab_or_script: str | Path, *args: str) -> list[str]:
    """The argv that runs a lab (a name under labs/, or a run.sh path) with default signal
    dispositions (coreutils ``env --default-signal``)."""
    script = Path(lab_or_script) if str(lab_or_script).endswith(".sh") else ROOT / "labs" / str(lab_or_script) / "run.sh"
    return ["env", f"--default-signal={DEFAULT_SIGNALS}", "bash", str(script), *args]


@dataclass
class Interrupted:
    """What happened to a lab signalled at a step boundary (:func:`signal_at`)."""

    rc: int | None            # the lab's exit status (negative: killed by that signal)
    lines: list[str]          # what the pipe's reader saw before it died
    boundary: str | None      # the progress line at which the signal was sent (None: never)
    pid: int                  # the lab shell's PID (its run tag is "<lab>.<pid>.<start>")
    seconds: float            # from start to exit


class GroupScope:
    """Which of a lab's progress lines belong to GROUP, fed one line at a time, by the kinds the
    lines are tagged with (:mod:`labkit.run.events`; the supervisor keeps the tags when
    ``PCB_PROGRESS_TAGS=1``): the lines after the ``group:GROUP`` event up to the next ``group``
    event or the supervisor's ``record``. :meth:`feed` returns "line" for a line of the group,
    "end" for the first line after it, and None for a line before it or of a kind that marks no
    boundary (:data:`labkit.run.events.NOT_BOUNDARIES`: a repetition a one-repetition run leaves
    out, where the lab does nothing). No wording is read."""

    def __init__(self, group: str):
        self.group, self.inside = group, False

    def feed(self, line: str) -> str | None:
        kind, arg, _ = events.split(line)
        if kind == "group":
            if self.inside:
                return "end"            # the next group begins
            self.inside = arg == self.group
            return None
        if not self.inside or kind in events.NOT_BOUNDARIES:
            return None
        return "end" if kind == "record" else "line"


def group_progress(lines, group: str) -> list[str]:
    """The progress lines of GROUP among ``lines`` (:class:`GroupScope`), in order."""
    scope, out = GroupScope(group), []
    for line in lines:
        got = scope.feed(line)
        if got == "end":
            break
        if got == "line":
            out.append(line)
    return out


def progress_boundary(group: str, k: int):
    """A boundary chooser for :func:`signal_at`: the k-th progress line of GROUP
    (:class:`GroupScope`; every line is a boundary between two actions of the lab), or the
    first line after the group if it has fewer than k."""
    scope, n = GroupScope(group), [0]

    def at(line: str) -> bool:
        got = scope.feed(line)
        if got == "end":
            return True                 # the group's end is the boundary
        if got == "line":
            n[0] += 1
            return n[0] >= k
        return False
    return at


def signal_at(cmd: list[str], at, sig: int, *, env: dict | None = None, timeout: float = 300,
              wait: float = 120) -> Interrupted:
    """Run ``cmd`` (see :func:`lab_command`) with stdout and stderr through a pipe read by
    ``cat`` in the lab's process group, as ``run.sh 2>&1 | tee`` would be; when ``at(line)`` is
    true for a line cat passes on, send ``sig`` to the whole process group (the lab and cat:
    the reader dies with the same signal). Then wait for the lab to exit. The lab runs with
    ``PCB_PROGRESS_TAGS=1``: each line ``at`` sees carries its kind (:mod:`labkit.run.events`).

    Raises:
        AssertionError: the lab ended before the boundary, or did not exit within ``wait`` s.
    """
    r, w = os.pipe()
    t0 = time.time()
    lab = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=w, stderr=w, process_group=0,
                           env=dict(os.environ, **(env or {}), **{events.ENV: "1"}))
    reader = subprocess.Popen(["env", f"--default-signal={DEFAULT_SIGNALS}", "cat"], stdin=r,
                              stdout=subprocess.PIPE, process_group=lab.pid)
    os.close(r)
    os.close(w)
    lines: list[str] = []
    boundary = None
    deadline = time.time() + timeout
    try:
        for raw in reader.stdout:
            line = raw.decode(errors="replace")
            lines.append(line)
            if boundary is None and at(line):
                boundary = events.split(line)[2].strip()
                os.killpg(lab.pid, sig)
            if time.time() > deadline:
                break
        reader.wait(timeout=30)
        rc = lab.wait(timeout=wait)
    except subprocess.TimeoutExpired:
        os.killpg(lab.pid, signal.SIGKILL)
        raise AssertionError(f"{cmd}: no exit {wait} s after SIG{signal.Signals(sig).name}; output:\n"
                             + "".join(lines)[-3000:])
    except BaseException:
        # The harness itself stops (Ctrl-C on the matrix): stop the lab and let it undo before
        # the caller removes its directories; a lab whose journal is deleted under it cannot undo.
        if lab.poll() is None:
            os.killpg(lab.pid, signal.SIGTERM)
            try:
                lab.wait(timeout=wait)
            except subprocess.TimeoutExpired:
                os.killpg(lab.pid, signal.SIGKILL)
        raise
    finally:
        reader.stdout.close()
    if boundary is None:
        raise AssertionError(f"{cmd}: ended (exit {rc}) before the boundary; output:\n" + "".join(lines)[-3000:])
    return Interrupted(rc, lines, boundary, lab.pid, time.time() - t0)


def _read(path: str | Path) -> str:
    try:
        return Path(path).read_text().strip()
    except OSError as exc:
        return f"<{exc.strerror}>"


def _mountinfo() -> list[tuple[str, str, str]]:
    out = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        f = line.split()
        sep = f.index("-")
        out.append((f[4], f[sep + 1], f[sep + 2]))
    return out


TRACEFS_FILES = ["current_tracer", "tracing_on", "set_event", "set_ftrace_pid", "set_event_pid",
                 "buffer_size_kb", "trace_clock", "options/bin", "options/context-info"]


def host_state(ours: list[str | Path], others: tuple[str, ...] = ("/tmp/pcb-", "/tmp/pytest-of-")) -> dict:
    """What a lab may change on the host, as comparable data: mounts, loop devices, network
    namespaces and /run/netns, every block device's scheduler and read_ahead_kb, audit status
    and rules, tracefs (top-level settings, instances, per-device blk trace switches), and
    entries of /run/netns, /dev/shm and ~/.debug. (A run's own processes are checked by its
    tag: :func:`tagged_processes`; other runs on a shared machine start and stop theirs.)

    Paths under ``others`` (other runs' and other test sessions' scratch directories on this
    shared machine) are left out unless they are under one of ``ours`` (this case's own
    directories).
    """
    ours = [str(p) for p in ours]

    def mine_or_host(path: str) -> bool:
        if any(path.startswith(o) for o in ours):
            return True
        return not any(path.startswith(o) for o in others)

    state: dict = {}
    state["mounts"] = sorted(m for m in _mountinfo() if mine_or_host(m[0]))
    loops = {}
    out = subprocess.run(["losetup", "-l", "-n", "-O", "NAME,BACK-FILE"], capture_output=True, text=True).stdout
    for line in out.splitlines():
        name, _, back = line.partition(" ")
        loops[name.strip()] = back.strip()
    state["loops"] = sorted((n, b) for n, b in loops.items() if mine_or_host(b))
    state["netns"] = sorted(netns_list())
    state["run_netns"] = (Path("/run/netns").is_dir(), any(m[0] == "/run/netns" for m in _mountinfo()),
                          sorted(p.name for p in Path("/run/netns").glob("*")) if Path("/run/netns").is_dir() else [])
    state["links"] = sorted(links())
    blocks = {}
    for q in sorted(Path("/sys/block").glob("*/queue")):
        dev = q.parent.name
        if dev.startswith("loop") and f"/dev/{dev}" in loops and not mine_or_host(loops[f"/dev/{dev}"]):
            continue          # another run's loop device
        blocks[dev] = (_read(q / "scheduler"), _read(q / "read_ahead_kb"), _read(q.parent / "trace" / "enable"))
    state["block"] = blocks
    # The CPUs unbound workqueues may run on (optane_kyber confines the loop device's workers).
    wq = Path("/sys/devices/virtual/workqueue")
    state["workqueue_cpumask"] = (_read(wq / "cpumask"), _read(wq / "cpumask_requested"))
    if shutil.which("auditctl") and is_root():
        s = subprocess.run(["auditctl", "-s"], capture_output=True, text=True).stdout
        st = dict(line.split(" ", 1) for line in s.splitlines() if " " in line)
        state["audit"] = (st.get("enabled"), st.get("pid"),
                          subprocess.run(["auditctl", "-l"], capture_output=True, text=True).stdout.strip())
    tr = Path("/sys/kernel/tracing")
    if is_root() and (tr / "tracing_on").exists():
        state["tracefs"] = {f: _read(tr / f) for f in TRACEFS_FILES}
        state["tracefs_instances"] = sorted(p.name for p in (tr / "instances").iterdir())
    # Python's multiprocessing semaphores (sem.mp-*) in /dev/shm belong to other programs on the machine.
    state["files"] = {d: sorted(str(p.relative_to(d)) for p in Path(d).rglob("*") if not p.name.startswith("sem.mp-"))
                      if Path(d).is_dir() else None for d in ("/dev/shm", str(Path.home() / ".debug"))}
    return state


def tagged_processes(prefix: str = "", env: str | None = None) -> list[str]:
    """Processes that carry a lab run's tag (``PCB_LAB_RUN=<lab>.<pid>.<start>``) starting
    with ``prefix``: "pid tag command"; with ``env``, of those alone whose environment also has
    that entry (:func:`_has_env`: for a test that does not know its run's pid)."""
    env_has, found = env, []
    for p in Path("/proc").iterdir():
        if not p.name.isdigit():
            continue
        try:
            environ = (p / "environ").read_bytes().split(b"\0")
            cmd = (p / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if env_has is not None and env_has.encode() not in environ:
            continue
        for e in environ:
            if e.startswith(b"PCB_LAB_RUN=" + prefix.encode()):
                found.append(f"{p.name} {e.decode(errors='replace')[12:]} {cmd}")
    return found


_UNALLOCATED = re.compile(r"^\d+ \(expanded: (\d+)\)$")


def ring_buffer_allocated(before: str | None, after: str | None) -> bool:
    """Whether tracefs's ``buffer_size_kb`` went from the kernel's not-yet-allocated ring buffer
    (``"7 (expanded: 1408)"``, what a freshly booted host shows) to that same default size, now
    allocated: tracing's first use allocates it and no interface takes that back
    (kernel/trace/trace.c: ``tracing_entries_read`` prints "(expanded: ...)" until
    ``tracing_update_buffers`` has run). The size then reads rounded up to whole ring-buffer pages
    (a page holds a page minus its header of data, kernel/trace/ring_buffer.c ``BUF_PAGE_SIZE``):
    1408 KB reads 1410 with 4 KiB pages. Any other size (a lab that set it and did not put it
    back) is a change."""
    m = _UNALLOCATED.match(before or "")
    if not m or not (after or "").isdigit():
        return False
    default, now, page_kb = int(m.group(1)), int(after), os.sysconf("SC_PAGE_SIZE") // 1024
    return default <= now < default + page_kb


def state_diff(before: dict, after: dict) -> list[str]:
    """Human-readable differences between two :func:`host_state` snapshots (empty: equal)."""
    diffs = []
    for key in sorted(set(before) | set(after)):
        a, b = before.get(key), after.get(key)
        if a == b:
            continue
        if isinstance(a, dict) and isinstance(b, dict):
            # Block devices: those in both snapshots (another run's loop device comes and goes;
            # ours are compared while free, and "loops" lists any still attached to our files).
            keys = sorted(set(a) & set(b)) if key == "block" else sorted(set(a) | set(b))
            for k in keys:
                if a.get(k) != b.get(k) and not (key == "tracefs" and k == "buffer_size_kb"
                                                 and ring_buffer_allocated(a.get(k), b.get(k))):
                    diffs.append(f"{key}[{k}]: {a.get(k)!r} -> {b.get(k)!r}")
        else:
            diffs.append(f"{key}: {a!r} -> {b!r}")
    return diffs
