"""``labkit run``: the supervisor of a lab run (the lab contract, DESIGN.md).

Every ``labs/<lab>/run.sh`` sources ``labs/lib/lab.sh``, declares itself (``lab_define``,
``lab_group``) and calls ``lab_main``, which execs this module with the declaration in the
environment (``PCB_LAB_NAME``, ``PCB_LAB_TITLE``, ``PCB_LAB_TOOLS``, ``PCB_LAB_GROUPS``: one
``NAME<TAB>DESCRIPTION<TAB>always?`` line per group). The process keeps run.sh's PID. It owns:

- the command line (``--help``; bad usage is one line on stderr and exit 2, nothing started);
- the lock: one lab run per host (flock on ``/run/lock/perf-casebook.lock``, held by this
  process only);
- the journal ``<out>/.<lab>.journal`` and its copy ``<scratch>/.pcb-journal`` (so that
  ``--recover --scratch`` finds it when the out directory is gone), see :mod:`labkit.run.journal`;
- the run's processes: the lab's bash ("the body": ``PCB_LAB_ROLE=body``, the groups' steps)
  and the helpers (probe, record, guest runner) run as children whose stderr is relayed line by
  line to this process's stderr and to ``<out>/.<lab>.log``; every one carries
  ``PCB_LAB_RUN=<tag>`` in its environment, and the body dies with this process
  (``PR_SET_PDEATHSIG``);
- signals: SIGINT, SIGTERM, SIGHUP, SIGQUIT and a write error on stderr (a closed terminal, a
  pipe whose reader is gone, a full disk) stop the run: its processes are stopped and every
  undo action the journal holds runs, newest first; the exit status is 128+N (141 for a write
  error);
- the undo: actions are shell words naming functions of lab.sh or of the lab's run.sh, run one
  at a time by a bash of the lab in ``PCB_LAB_ROLE=undo`` (:class:`Undoer`);
- ``--recover`` after SIGKILL, and ``--guest ARCH`` (the whole lab inside a QEMU guest,
  :mod:`labkit.guest`).

Exit status: 0 done, 1 a step failed (or the run stopped: disk full, internal error), 2 bad
usage or refused to start, 3 a host change could not be undone, 4 the lab's shell failed (its
message above; everything undone), 128+N stopped by signal N.
"""

from __future__ import annotations

import argparse
import ctypes
import errno
import fcntl
import json
import os
import re
import secrets
import select
import shlex
import shutil
import signal
import subprocess
import sys
import time
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from . import events
from . import journal as journals
from .. import steps as step_records

ROOT = Path(__file__).resolve().parents[2]   # the checkout (this file is labkit/run/supervisor.py)
PY = sys.executable
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)
LOCK_HELD = "another lab run is in progress on this host"
"""The start of the one-line refusal while another run holds the host's lock (a harness that
starts runs, tests/fault_matrix.py, tells a refused run from a failed one by it)."""
EXIT_FOR = {signal.SIGINT: 130, signal.SIGTERM: 143, signal.SIGHUP: 129, signal.SIGQUIT: 131}
# The body's own exit statuses: 0 every step did what it should, 1 a step failed (the result is
# still recorded), 100 it stopped and said why (disk full, a journal it cannot write, an
# internal error), 101 the lab's code called the step language wrongly and said so in one line
# (labs/lib/case.sh: an unknown option, a malformed or undeclared --case; the run exits 2).
# Anything else is bash failing by itself.
BODY_OK, BODY_FAILED, BODY_STOPPED, BODY_USAGE = 0, 1, 100, 101


class Declaration(Exception):
    """The lab's declaration in the environment is not what lab.sh writes (lab.sh ``lab_group``)."""


class Usage(Exception):
    """Bad usage: one line, exit 2 (``refuse``: without the "see --help" hint)."""

    def __init__(self, message: str, refuse: bool = False):
        super().__init__(message)
        self.refuse = refuse


@dataclass
class Lab:
    """A lab's declaration (from lab.sh's ``lab_main``) and its command line."""

    script: Path
    name: str
    title: str
    tools: str
    groups: list[tuple[str, str, bool]]          # (name, description, always)
    args: list[str] = field(default_factory=list)     # the options lab_main got
    argv: list[str] = field(default_factory=list)     # run.sh's own arguments (for the body)
    quick: bool = False
    recover: bool = False
    out: str | None = None
    scratch_parent: str | None = None
    only: list[str] | None = None
    only_text: str = ""                                # --only as given
    host: str | None = None
    guest: str | None = None

    @classmethod
    def from_env(cls, script: str, args: list[str]) -> "Lab":
        """The declaration lab.sh exported: ``PCB_LAB_GROUPS`` holds one
        ``NAME<TAB>DESCRIPTION<TAB>WORD`` line per group (``lab_group``'s three arguments; WORD
        empty or ``always``). Raises :class:`Declaration` on a line of another shape."""
        groups = []
        for line in os.environ.get("PCB_LAB_GROUPS", "").splitlines():
            fields = line.split("\t")
            if len(fields) != 3 or not re.fullmatch(r"[a-z0-9_]+", fields[0]) or fields[2] not in ("", "always"):
                raise Declaration(f"PCB_LAB_GROUPS line {line!r}: not NAME<TAB>DESCRIPTION<TAB>[always]")
            groups.append((fields[0], fields[1], fields[2] == "always"))
        return cls(Path(script), os.environ.get("PCB_LAB_NAME", ""), os.environ.get("PCB_LAB_TITLE", ""),
                   os.environ.get("PCB_LAB_TOOLS", ""), groups, list(args))

    def quick_leaves_out(self) -> dict[str, str]:
        """lab.toml's ``quick_leaves_out``: group → why a quick run leaves it out (``{}`` when the
        manifest has none or cannot be read; :mod:`labkit.manifest` checks the file itself).

        Raises:
            Declaration: a group named there that the lab does not declare.
        """
        try:
            m = tomllib.loads((self.script.parent / "lab.toml").read_text())
        except (OSError, ValueError):
            return {}
        out = m.get("quick_leaves_out") or {}
        names = {g for g, _, _ in self.groups}
        unknown = sorted(set(out) - names)
        if unknown:
            raise Declaration(f"lab.toml quick_leaves_out: {', '.join(unknown)} is not a group of this lab")
        return {g: str(why) for g, why in out.items()}

    def left_out(self) -> dict[str, str]:
        """The groups this run leaves out because it is a quick run (group → why): all of
        :meth:`quick_leaves_out`. Empty for a full run, and with ``--only``, which runs exactly
        the groups it names (a left-out one included) and no other."""
        if not self.quick or self.only is not None:
            return {}
        return self.quick_leaves_out()

    def selected(self) -> list[tuple[str, str, bool]]:
        """The groups to run, in order: every group without ``--only``, else those named and the
        ``always`` ones; a quick run less :meth:`left_out`."""
        gone = self.left_out()
        return [g for g in self.groups if (self.only is None or g[2] or g[0] in self.only) and g[0] not in gone]


# ---- the command line --------------------------------------------------------------------

def usage_text(lab: Lab) -> str:
    """The ``--help`` text: options, then the lab's groups in order (``*``: always run)."""
    d = lab.script.parent.name
    text = f"""usage: {d}/run.sh [--quick] [--out DIR] [--scratch DIR] [--only GROUP,..] [--host LABEL] [--guest ARCH] [--help]
       {d}/run.sh --recover [--out DIR] [--scratch DIR]

{lab.title}

  --quick         short run: fewer cases (groups marked "full runs" are left out, and
                  cases no claim reads are skipped, with the reason), each step a claim
                  reads repeated as often as in a full run{_budgets(lab)}
  --out DIR       host results directory (default: local-results/<host label>);
                  writes DIR/{lab.name}.json and DIR/{lab.name}/ (raw outputs, artifacts)
  --scratch DIR   parent of the scratch directory (default: ${{TMPDIR:-/tmp}}); the lab
                  writes only in a fresh directory under it and removes it on exit
  --only G1,G2    run only these groups of steps (groups marked * always run)
  --host LABEL    host label in the result (default: <hostname>-<arch>)
  --guest ARCH    run the whole lab inside a QEMU guest of ARCH (arm64, x86_64) that
                  labkit.guest boots (Debian kernel and userspace, cached); the result's host
                  is the guest (default label qemu-ARCH-tcg or qemu-ARCH-kvm)
  --recover       undo what a killed run of this lab left behind (mounts, loop devices,
                  knobs, tracefs, namespaces, processes), from its journal DIR/.{lab.name}.journal
                  (with --out DIR; also found through --scratch DIR); `labkit recover`
                  does it for every lab
  --help          this text

groups, in order:
"""
    try:
        gone = lab.quick_leaves_out()
    except Declaration:
        gone = {}
    for g, desc, always in lab.groups:
        text += f"  {g:<10} {desc}{' *' if always else ''}{' (full runs; --quick --only ' + g + ')' if g in gone else ''}\n"
    return text + """
Steps that need something this host lacks (root, perf, a tool, ...) are recorded as
skipped with the reason. Every host change is undone on exit, error, Ctrl-C, SIGTERM,
SIGHUP and a closed output; after a kill -9, run this script with --recover.
Exit status: 0 done, 1 a step failed, 2 bad usage or refused to start, 3 a host change
could not be undone, 4 the shell failed (everything undone), 128+N stopped by signal N.
"""


def _budgets(lab: Lab) -> str:
    """The lab's wall-time budgets on 2 cores (lab.toml ``quick_budget_s``, ``full_budget_s``) as a
    line of the ``--help`` text, or nothing when its manifest does not say."""
    try:
        m = tomllib.loads((lab.script.parent / "lab.toml").read_text())
        return (f"\n                  budgets on 2 cores: quick {m['quick_budget_s']:g} s, "
                f"full {m['full_budget_s']:g} s (labs/{lab.name}/lab.toml)")
    except (OSError, ValueError, KeyError, TypeError):
        return ""


def _kernel_fs(path: str) -> bool:
    real = os.path.realpath(path) + "/"
    return real.startswith(("/proc/", "/sys/"))


# The options that take a value: (attribute of Lab, what the value is, for "needs ...").
_VALUED = {"--out": ("out", "a directory"), "--scratch": ("scratch_parent", "a directory"),
           "--only": ("only_text", "a list of groups"), "--host": ("host", "a label"),
           "--guest": ("guest", "an architecture (arm64 or x86_64)")}


class _Parser(argparse.ArgumentParser):
    """argparse with its errors as :class:`Usage` (one line, exit 2), never its own exit."""

    def error(self, message: str):
        m = re.match(r"unrecognized arguments: (\S+)", message)
        raise Usage(f"unknown option: {m.group(1)}" if m else message)


def _parser() -> _Parser:
    p = _Parser(prog="run.sh", add_help=False, allow_abbrev=False)
    for opt, (dest, _) in _VALUED.items():
        p.add_argument(opt, dest=dest)
    p.add_argument("--quick", action="store_true")
    p.add_argument("--recover", action="store_true")
    p.add_argument("-h", "--help", action="store_true")
    return p


def parse(lab: Lab) -> bool:
    """Fill ``lab``'s options from ``lab.args`` (argparse, then the checks argparse cannot make).
    Returns False after printing ``--help``.

    A value is the next argument whatever it looks like (``--host -x`` is a bad label, not a
    missing one): each ``--opt VALUE`` is handed to argparse as ``--opt=VALUE``.

    Raises:
        Usage: an option or value that cannot work (before anything is created).
    """
    names = [g for g, _, _ in lab.groups]
    a, joined = list(lab.args), []
    while a:
        opt = a.pop(0)
        if opt in _VALUED:
            if not a:
                raise Usage(f"{opt} needs {_VALUED[opt][1]}")
            opt = f"{opt}={a.pop(0)}"
        joined.append(opt)
    ns = _parser().parse_args(joined)
    if ns.help:
        sys.stdout.write(usage_text(lab))
        return False
    seen = {opt for opt, (dest, _) in _VALUED.items() if getattr(ns, dest) is not None}
    for opt in seen:
        setattr(lab, _VALUED[opt][0], getattr(ns, _VALUED[opt][0]))
    lab.quick = lab.quick or ns.quick
    lab.recover = lab.recover or ns.recover
    if "--only" in seen:
        only = [g for g in re.split(r"[, ]+", lab.only_text) if g]
        if not only:
            raise Usage(f"--only: empty list of groups (groups: {' '.join(names)})")
        for g in only:
            if g not in names:
                raise Usage(f"--only: unknown group {g} (groups: {' '.join(names)})")
        lab.only = only
    if "--host" in seen and not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}", lab.host or ""):
        raise Usage(f"--host: bad label '{lab.host}' (1 to 64 letters, digits, . _ -, not starting with . _ -)")
    if lab.guest is not None and lab.guest not in ("arm64", "x86_64"):
        raise Usage(f"--guest: unknown architecture {lab.guest} (arm64 or x86_64)")
    if "--out" in seen and not lab.out:
        raise Usage("--out: empty directory name")
    if lab.out:
        up = lab.out
        while not os.path.lexists(up) and "/" in up:
            up = up.rsplit("/", 1)[0] or "/"
        if not os.path.lexists(up):
            up = "."
        if os.path.exists(lab.out) and not os.path.isdir(lab.out):
            raise Usage(f"--out {lab.out}: not a directory")
        if not os.path.isdir(up):
            raise Usage(f"--out {lab.out}: {up} is not a directory")
        if _kernel_fs(lab.out):
            raise Usage(f"--out {lab.out}: a kernel filesystem, not a place for results")
    if "--scratch" in seen and not lab.scratch_parent:
        raise Usage("--scratch: empty directory name")
    if lab.scratch_parent:
        p = lab.scratch_parent
        if not os.path.exists(p):
            raise Usage(f"--scratch {p}: no such directory")
        if not os.path.isdir(p):
            raise Usage(f"--scratch {p}: not a directory")
        if _kernel_fs(p):
            raise Usage(f"--scratch {p}: a kernel filesystem, not a place for scratch files")
        if not os.access(p, os.W_OK | os.X_OK):
            raise Usage(f"--scratch {p}: not writable by this user")
    if lab.recover and (lab.guest or lab.only or lab.quick):
        raise Usage("--recover takes only --out, --scratch and --host")
    return True


# ---- processes ---------------------------------------------------------------------------

def starttime(pid: int) -> str | None:
    """A process's start time (clock ticks after boot, proc(5) /proc/PID/stat field 22)."""
    f = journals.proc_stat(pid)
    return f[19] if f else None


def tagged(tag: str) -> list[int]:
    """PIDs of processes (not this one) whose environment holds ``PCB_LAB_RUN=<tag>``."""
    want = f"PCB_LAB_RUN={tag}".encode()
    me, pids = os.getpid(), []
    for d in os.listdir("/proc"):
        if not d.isdigit() or int(d) == me:
            continue
        try:
            env = Path(f"/proc/{d}/environ").read_bytes()
        except OSError:
            continue
        if want in env.split(b"\0"):
            pids.append(int(d))
    return pids


def _alive(pids: list[int]) -> list[int]:
    """Those of ``pids`` that exist and are not zombies."""
    out = []
    for p in pids:
        f = journals.proc_stat(p)
        if f and f[0] not in "ZX":
            out.append(p)
    return out


def reap_orphans(skip: tuple[int, ...] = ()) -> None:
    """Reap this process's zombie children but those in ``skip`` (the subprocess.Popen children,
    whose status their Popen reads). With PR_SET_CHILD_SUBREAPER (:func:`main`) the run's
    processes whose parent died (the body's, after a signal) are this process's children: reaped
    here at once, not whenever init gets to them."""
    me = os.getpid()
    for d in os.listdir("/proc"):
        if not d.isdigit() or int(d) in skip:
            continue
        f = journals.proc_stat(d)
        if f and f[0] == "Z" and int(f[1]) == me:
            try:
                os.waitpid(int(d), os.WNOHANG)
            except ChildProcessError:
                pass


def members(tag: str, groups: set[int]) -> list[int]:
    """Live processes carrying ``tag``, and live processes of the process groups such processes
    led or belonged to (``groups`` grows with them; never this process's own group). A step's
    group holds processes that were started with another environment, and a process keeps its
    group through an exec, during which its environment may read as empty."""
    pids = set(_alive(tagged(tag)))
    for p in pids:
        try:
            groups.add(os.getpgid(p))
        except OSError:
            pass
    groups.discard(os.getpgrp())
    if groups:
        for d in os.listdir("/proc"):
            if not d.isdigit() or int(d) == os.getpid():
                continue
            f = journals.proc_stat(d)
            if f and int(f[2]) in groups and f[0] not in "ZX":
                pids.add(int(d))
    return sorted(pids)


def kill_tagged(tag: str) -> tuple[bool, str]:
    """Stop every process of a run (:func:`members` of ``tag``): SIGTERM once to each, then
    SIGKILL to what is left after 2 s; done when three scans 50 ms apart find none (a process in
    the middle of an exec may be missed by one). Reaps those that were this process's children.
    Returns (ok, error)."""
    groups: set[int] = set()
    try:
        for sig in (signal.SIGTERM, signal.SIGKILL):
            sent: set[int] = set()
            empty = 0
            for _ in range(40):
                pids = members(tag, groups)
                empty = 0 if pids else empty + 1
                if empty >= 3:
                    return True, ""
                for p in set(pids) - sent:
                    try:
                        os.kill(p, sig)
                    except OSError:
                        pass
                    sent.add(p)
                reap_orphans()
                time.sleep(0.05)
        left = members(tag, groups)
        return not left, f"processes still running: {' '.join(map(str, left))}" if left else ""
    finally:
        reap_orphans()


def stop_run(tag: str, out: "Output", which: str) -> bool:
    """:func:`kill_tagged` as an undo action: "cleanup: stop every process of WHICH" when there
    is any, and the failure if some stayed. True when none is left."""
    if members(tag, set()):
        out.say(f"cleanup: stop every process of {which}", "cleanup")
    done, err = kill_tagged(tag)
    if not done:
        out.say(f"cleanup FAILED: stop every process of {which} ({err})", "cleanup-failed")
    return done


_libc = ctypes.CDLL(None, use_errno=True)
# prctl(2) options, from <linux/prctl.h>.
PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36


def _die_with_parent() -> None:
    """In a child before exec: SIGKILL when the supervisor dies (prctl PR_SET_PDEATHSIG)."""
    _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    for s in STOP_SIGNALS + (signal.SIGPIPE,):
        signal.signal(s, signal.SIG_DFL)


# ---- output, journal, lock ---------------------------------------------------------------

class Output:
    """Progress lines ``[lab  12.3s] text`` to stderr and to the run's log, each of a kind
    (:mod:`labkit.run.events`). A write error on stderr is remembered (:attr:`broken`); the log keeps
    everything, untagged."""

    COLORS = {"group": "\033[1m", "failed": "\033[31m", "stop": "\033[31m", "cleanup-failed": "\033[31m",
              "interrupt": "\033[31m", "figure": "\033[36m"}

    def __init__(self, name: str):
        self.name, self.start_us, self.log, self.broken, self.quiet = name, time.time_ns() // 1000, None, False, False
        self.color = os.isatty(2) and not os.environ.get("NO_COLOR")     # https://no-color.org
        self.tags = os.environ.get(events.ENV) == "1"

    def prefix(self) -> str:
        """``"[lab  12.3s] "``: the lab's name and the seconds since the start, one decimal."""
        d = max(time.time_ns() // 1000 - self.start_us, 0)
        return f"[{self.name} {f'{d // 1000000}.{(d % 1000000) // 100000}s':>6}] "

    def emit(self, line: str, log_only: bool = False, kind: str | None = None) -> None:
        """Write ``line`` to the log and (unless ``log_only`` or a past write error) to stderr,
        coloured by its kind on a terminal: headers bold, failures red, figures cyan. A line
        tagged by the lab's body (:func:`labkit.run.events.split`) gives its own kind; ``kind`` is
        the supervisor's. With :data:`labkit.run.events.ENV` set, stderr keeps the tag."""
        tagged, arg, text = events.split(line)
        if kind is None:
            kind = tagged if tagged in events.KINDS else "text"
        elif ":" in kind:
            kind, _, arg = kind.partition(":")
        if self.log:
            try:
                with open(self.log, "a") as f:
                    f.write(text + "\n")
            except OSError:
                pass
        if log_only or self.broken:
            return
        out = text
        if self.color and kind in self.COLORS:
            out = f"{self.COLORS[kind]}{text}\033[0m"
        if self.tags:
            out = events.tag(f"{kind}:{arg}" if arg else kind, out)
        try:
            os.write(2, (out + "\n").encode(errors="replace"))
        except OSError:
            self.broken = True

    def say(self, text: str, kind: str = "note") -> None:
        """A progress line of the supervisor's own, of ``kind`` (to the log only in quiet mode)."""
        self.emit(self.prefix() + text, log_only=self.quiet, kind=kind)


def quote(*words: str) -> str:
    """Shell words for an undo action, as bash reads them back."""
    return " ".join(shlex.quote(str(w)) for w in words)


class Journal:
    """Appends lines to a run's journal and to its copy in the scratch directory."""

    def __init__(self, path: Path):
        self.path, self.copy, self.seq = path, None, 0

    def write(self, *fields: object) -> bool:
        """Append one line; True when the journal itself took it (the copy may be gone)."""
        line = "\t".join(str(f).replace("\t", " ").replace("\n", " ") for f in fields) + "\n"
        ok = False
        for p in (self.copy, self.path):
            if p is None:
                continue
            try:
                with open(p, "a") as f:
                    f.write(line)
                ok = ok or p == self.path
            except OSError:
                pass
        return ok

    def defer(self, desc: str, *cmd: str) -> bool:
        """Register the undo action ``cmd`` (shell words) described by ``desc``, before its change."""
        self.seq += 1
        return self.write("do", self.seq, desc, quote(*cmd))


LOCK_DIR = Path("/run/lock")


def lock_path(lock_dir: Path | None = None) -> Path:
    """The host's lock file of lab runs: ``/run/lock/perf-casebook.lock`` (the FHS's lock
    directory, one for the whole host, world-writable with the sticky bit on Debian), or the
    same name in the temporary directory where that is not a writable directory. One file per
    host, whatever lab, checkout or user runs: two runs at once would measure each other, and
    one run's task,never rule (:mod:`labkit.run.auditctx`) would take the audit contexts off the
    other's processes. ``PCB_LOCK_DIR`` in the environment names another directory (the fake
    lab's tests: each test its own, so that a test run beside a lab run is not refused)."""
    d = lock_dir or Path(os.environ.get("PCB_LOCK_DIR") or LOCK_DIR)
    if not (d.is_dir() and os.access(d, os.W_OK | os.X_OK)):
        import tempfile
        d = Path(tempfile.gettempdir())
    return d / "perf-casebook.lock"


def holder_lab(pid: str, proc: Path = Path("/proc")) -> str:
    """The lab whose supervisor is ``pid`` (its ``PCB_LAB_NAME``; lab_main puts it in the
    environment), or "" when that cannot be read (another user's process, gone)."""
    try:
        env = (proc / pid / "environ").read_bytes().split(b"\0")
    except OSError:
        return ""
    return next((e[len(b"PCB_LAB_NAME="):].decode(errors="replace") for e in env if e.startswith(b"PCB_LAB_NAME=")), "")


class Lock:
    """One lab run at a time on a host: flock(2) on :func:`lock_path`, held by the
    supervisor alone (the fd is close-on-exec: a killed run's stray processes never keep it)."""

    def __init__(self, path: Path):
        self.path, self.fd = path, None

    def take(self, wait: float = 0) -> bool:
        """Take the lock, waiting up to ``wait`` seconds; False when another process holds it.
        The file is made readable by all, so that another user's run can take it too."""
        if self.fd is None:
            self.fd = os.open(self.path, os.O_RDONLY | os.O_CREAT | os.O_CLOEXEC, 0o644)
            try:
                os.fchmod(self.fd, 0o644)
            except OSError:
                pass     # another user's file: readable already, or the open above had failed
        end = time.monotonic() + wait
        while True:
            try:
                fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return True
            except OSError as exc:
                if exc.errno not in (errno.EAGAIN, errno.EACCES) or time.monotonic() >= end:
                    return False
            time.sleep(0.1)

    def holder(self) -> str:
        """PID of the run that holds the lock (/proc/PID/fdinfo shows the flock), or ""."""
        ino = os.stat(self.path).st_ino
        best = ""
        for d in sorted(os.listdir("/proc")):
            if not d.isdigit() or int(d) == os.getpid():
                continue
            try:
                fds = os.listdir(f"/proc/{d}/fdinfo")
            except OSError:
                continue
            for fd in fds:
                try:
                    info = Path(f"/proc/{d}/fdinfo/{fd}").read_text()
                except OSError:
                    continue
                if re.search(rf"FLOCK .*:{ino} 0 EOF", info):
                    try:
                        cmd = Path(f"/proc/{d}/cmdline").read_bytes()
                    except OSError:
                        cmd = b""
                    if b"run.sh" in cmd:
                        return d
                    best = best or d
        return best


def find_journals(name: str, out: Path | None, scratch_parent: Path) -> list[Path]:
    """This lab's journals (:func:`labkit.run.journal.find` for one lab, one out directory and one
    scratch parent)."""
    return journals.find([out] if out is not None else [], [scratch_parent], lab=name)


# ---- the run -----------------------------------------------------------------------------

class Supervisor:
    """One invocation of a lab's run.sh: see the module docstring."""

    def __init__(self, lab: Lab):
        self.lab, self.out = lab, Output(lab.name)
        self.lock = Lock(lock_path())
        self.stop_sig: int | str | None = None
        self.undoing = False
        self.tag = ""
        self.journal: Journal | None = None
        self.out_dir = Path()
        self.scratch: Path | None = None
        self.scratch_parent = Path()
        self.child: subprocess.Popen | None = None

    # -- signals
    def on_signal(self, signum, _frame) -> None:
        """The handler of :data:`STOP_SIGNALS`: the first signal (outside the undo) becomes the
        run's ``stop_sig`` and reaches the running child (:meth:`relay`) as SIGTERM; later ones are
        ignored. ``signum``: the signal's number; the frame is unused."""
        if not self.undoing and self.stop_sig is None:
            self.stop_sig = signum
            if self.child is not None and self.child.poll() is None:
                try:
                    os.kill(self.child.pid, signal.SIGTERM)
                except OSError:
                    pass

    def _handle_signals(self) -> None:
        for s in STOP_SIGNALS:
            signal.signal(s, self.on_signal)

    # -- refusals
    def refuse(self, message: str) -> None:
        """Refuse to start: one line, exit 2 (raises :class:`Usage`)."""
        raise Usage(message, refuse=True)

    def script_for_humans(self) -> str:
        """The lab's run.sh, relative to the working directory when it is under it."""
        p = str(self.lab.script)
        cwd = os.getcwd() + "/"
        return p[len(cwd):] if p.startswith(cwd) else p

    def recover_cmd(self, out: Path) -> str:
        """The command that undoes a killed run whose journal is in ``out``."""
        return f"{'sudo ' if os.geteuid() == 0 else ''}{self.script_for_humans()} --recover --out {shlex.quote(str(out))}"

    def take_lock(self) -> None:
        """Take the lab's lock, or refuse naming the PID that holds it. When a journal says the
        holder's run was killed, wait up to 10 s for its last processes first (then the journal
        check names --recover)."""
        if self.lock.take():
            return
        j = next(iter(find_journals(self.lab.name, self.out_dir, self.scratch_parent)), None)
        if j is not None and not live(j) and self.lock.take(wait=10):
            return
        h = self.lock.holder()
        what = holder_lab(h) if h else ""
        self.refuse(f"{LOCK_HELD} ({what + ', ' if what else ''}pid {h or 'unknown'}): "
                    f"two at once would measure each other; wait for it to end, or stop it with: kill {h or 'PID'}")

    def default_out(self) -> None:
        """The host label (default: probe.default_label) and the out directory (default:
        local-results/<label>)."""
        from . import probe
        if not self.lab.host:
            self.lab.host = probe.default_label()
        self.out_dir = Path(self.lab.out) if self.lab.out else ROOT / "local-results" / self.lab.host

    def make_out(self) -> None:
        """Create the out directory and check it takes a file (raises :class:`Usage` if not)."""
        try:
            self.out_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise Usage(f"--out {self.lab.out or self.out_dir}: cannot create it: {exc.strerror}") from None
        self.out_dir = self.out_dir.resolve()
        try:
            with open(self.out_dir / f".{self.lab.name}.log", "a"):
                pass
        except OSError as exc:
            raise Usage(f"--out {self.out_dir}: cannot write in it: {exc.strerror}") from None

    # -- relaying a child's stderr
    def relay(self, argv: list[str], env: dict, stdout=subprocess.DEVNULL, stdin=subprocess.DEVNULL) -> int:
        """Run ``argv`` with its stderr relayed line by line; returns its exit status (negative:
        killed by that signal). A stop (signal, write error) ends it with SIGTERM."""
        r, w = os.pipe()
        try:
            self.child = subprocess.Popen(argv, env=env, stdout=stdout, stdin=stdin, stderr=w,
                                          preexec_fn=_die_with_parent, close_fds=True)
        finally:
            os.close(w)
        os.set_blocking(r, False)
        buf = b""
        reaped = time.monotonic()
        try:
            while True:
                if self.stop_sig is None and self.out.broken:
                    self.stop_sig = "PIPE"
                    os.kill(self.child.pid, signal.SIGTERM)
                done = self.child.poll() is not None
                ready, _, _ = select.select([r], [], [], 0 if done else 0.2)
                if not done and time.monotonic() - reaped > 1:
                    # A process of the run whose parent died came back here (subreaper): reap
                    # it now, or it stays a zombie that ps lists until the run ends.
                    reap_orphans(skip=(self.child.pid,))
                    reaped = time.monotonic()
                chunk = b""
                if ready:
                    try:
                        chunk = os.read(r, 65536)
                    except BlockingIOError:
                        chunk = b""
                buf += chunk
                *lines, buf = buf.split(b"\n")
                for line in lines:
                    self.out.emit(line.decode(errors="replace"), log_only=self.out.quiet)
                if done and not chunk:
                    break
            if buf:
                self.out.emit(buf.decode(errors="replace"))
            return self.child.returncode
        finally:
            os.close(r)
            self.child = None

    def child_env(self, **extra: str) -> dict:
        """The environment of the run's processes: the run's tag, TMPDIR in the scratch directory."""
        env = dict(os.environ, PCB_LAB_RUN=self.tag, **extra)
        if self.scratch is not None:
            env["TMPDIR"] = str(self.scratch / "tmp")
        return env

    # -- starting: lock, out, journal, scratch
    def begin(self, kind: str = "") -> None:
        """Start a run: lock, out directory, refuse a live or killed run's journal, the log, the
        signal handlers, the journal's first line, the scratch directory (its removal journalled
        first) with the journal's copy and tmp/. ``kind``: "guest" for a --guest run's scratch."""
        self.take_lock()
        self.make_out()
        j = next(iter(find_journals(self.lab.name, self.out_dir, self.scratch_parent)), None)
        if j is not None:
            if live(j):
                r = journals.read(j)
                self.refuse(f"a run of {self.lab.name} is in progress (pid {r.pid}, journal {j})")
            self.refuse(f"a killed run of {self.lab.name} left host changes behind (journal {j}): "
                        f"undo them first with: {self.recover_cmd(j.parent)}")
        pid = os.getpid()
        start = starttime(pid)
        self.tag = f"{self.lab.name}.{pid}.{start}"
        self.out.log = self.out_dir / f".{self.lab.name}.log"
        self.out.log.write_text("")
        self._handle_signals()
        self.journal = Journal(self.out_dir / f".{self.lab.name}.journal")
        try:
            with open(self.journal.path, "w") as f:
                f.write("\t".join(["run", self.lab.name, str(pid), str(start), self.tag, str(self.out_dir),
                                   str(self.scratch_parent), str(self.lab.script)]) + "\n")
        except OSError as exc:
            self.journal.path.unlink(missing_ok=True)
            raise Usage(f"--out {self.out_dir}: cannot write the journal there: {exc.strerror}") from None
        # Not "perf-*": perf treats binaries under /tmp/perf-* as JIT maps and resolves no symbols in them.
        name = f"pcb-{self.lab.name}{'-' + kind if kind else ''}.{secrets.token_hex(3)}"
        self.scratch = self.scratch_parent / name
        self.journal.defer(f"remove scratch directory {self.scratch}", "lab__remove_scratch", str(self.scratch))
        try:
            self.scratch.mkdir(mode=0o700)
        except OSError as exc:
            self.out.quiet = True
            self.finish(2, message=f"run.sh: --scratch {self.scratch_parent}: cannot create a directory in it: "
                                   f"{exc.strerror}")
        copy = self.scratch / ".pcb-journal"
        copy.write_bytes(self.journal.path.read_bytes())
        self.journal.copy = copy
        (self.scratch / "tmp").mkdir()

    def guard_kernel_fs(self) -> None:
        """Tools mount kernel file systems by themselves where they are not mounted (perf's
        tools/lib/api/fs/fs.c mounts tracefs on first use, as trace-cmd's libtracefs does). As
        root, each of /sys/kernel/tracing and /sys/kernel/debug that is not a mount point now
        gets its unmount journalled before any tool runs; undone last, after the lab's mounts."""
        if os.geteuid() != 0:
            return
        for m in ("/sys/kernel/tracing", "/sys/kernel/debug"):
            if os.path.isdir(m) and not os.path.ismount(m):
                self.journal.defer(f"unmount {m} if a tool mounted it", "lab__umount", m, "0")

    # -- the end: undo everything, exit
    def finish(self, code: int, message: str | None = None) -> None:
        """Stop the run's processes, undo everything the journal holds, exit ``code`` (3 when
        an undo action failed). ``message``: a line for stderr before the undo."""
        self.undoing = True
        for s in STOP_SIGNALS:
            signal.signal(s, signal.SIG_IGN)
        if message:
            try:
                os.write(2, (message + "\n").encode())
            except OSError:
                pass
        if not self.undo_all():
            code = 3
        reap_orphans()
        if code == 0 and self.out.log:
            self.out.log.unlink(missing_ok=True)
        sys.exit(code)

    def undo_all(self) -> bool:
        """Stop every process of the run, then undo what the journal (or, when the out directory
        is gone, its copy) still holds; remove the journal. False when something stayed."""
        j = self.journal
        if j is None:
            return True
        ok = True
        if self.tag:
            ok = stop_run(self.tag, self.out, "this run")
        path = j.path
        if not path.is_file():
            if j.copy is None or not j.copy.is_file():
                return ok
            self.out.say(f"the journal {path} is gone: undoing from its copy {j.copy}")
            path = j.copy
        ok = replay(path, self.lab.script, self.out, [j.path, j.copy]) and ok
        if not ok:
            if j.path.is_file():
                self.out.say(f"some host changes could not be undone (above); once their cause is fixed: "
                             f"{self.recover_cmd(self.out_dir)}")
            else:
                self.out.say("some host changes could not be undone (above), and without the journal --recover "
                             "cannot retry them: undo them by hand")
            return False
        j.path.unlink(missing_ok=True)
        return True

    def stopped_code(self) -> int:
        """Say why the run stops (a signal, a write error) and return its exit status, 128+N."""
        sig = self.stop_sig
        if sig == "PIPE":
            self.out.say("write error on standard output or error (reader gone, terminal closed?): stopping, "
                         "undoing host changes")
            return 141
        self.out.say(f"interrupted by {signal.Signals(sig).name}: undoing host changes", "interrupt")
        return EXIT_FOR.get(sig, 128 + int(sig))

    def check_stop(self) -> None:
        """At a point between two parts of the run: finish now if a signal or a write error came."""
        if self.stop_sig is None and self.out.broken:
            self.stop_sig = "PIPE"
        if self.stop_sig is not None:
            self.finish(self.stopped_code())

    # -- a run on this host
    def run(self) -> None:
        """A run on this host: begin, probe, the body, record, undo; exits (see the module)."""
        lab = self.lab
        try:
            case_types = step_records.declared(lab.script.parent)
        except (step_records.CaseError, ValueError) as exc:
            raise Usage(str(exc), refuse=True) from None
        self.default_out()
        self.begin()
        run_dir = self.out_dir / f".{lab.name}.partial"
        self.journal.defer("remove unfinished run directory", "rm", "-rf", "--", str(run_dir))
        shutil.rmtree(run_dir, ignore_errors=True)
        (run_dir / "raw").mkdir(parents=True)
        (run_dir / "steps.tsv").write_text("")
        self.out.say(f"{lab.title}: host {lab.host}, {'quick' if lab.quick else 'full'} run, scratch {self.scratch}", "run")
        self.guard_kernel_fs()
        self.check_stop()
        rc = self.relay([PY, "-m", "labkit", "probe", "--scratch", str(self.scratch), "--label", lab.host],
                        self.child_env(), stdout=open(run_dir / "host.json", "w"))
        self.check_stop()
        if rc != 0:
            self.out.say(f"labkit probe failed (exit {rc})")
            self.finish(1)
        from .probe import CAPABILITIES
        caps = {}
        try:
            caps = capability_env(json.loads((run_dir / "host.json").read_text()))
        except (OSError, ValueError):
            pass
        self.keep_audit_clean(run_dir / "host.json")
        self.check_stop()
        selected = lab.selected()
        left_out = lab.left_out()
        (run_dir / "left_out.json").write_text(json.dumps(left_out))
        for g, why in left_out.items():
            self.out.say(f"quick run: group {g} left out ({why}); a full run measures it, "
                         f"and --quick --only {g} runs it", "left-out")
        eta = self.eta()
        env = self.child_env(
            PCB_LAB_ROLE="body", PCB_LAB_QUICK=str(int(lab.quick)), PCB_LAB_OUT=str(self.out_dir),
            PCB_LAB_RUN_DIR=str(run_dir), PCB_LAB_SCRATCH=str(self.scratch), PCB_LAB_HOST=lab.host,
            PCB_LAB_JOURNAL=str(self.journal.path), PCB_LAB_JOURNAL_COPY=str(self.journal.copy),
            PCB_LAB_SEQ=str(self.journal.seq), PCB_LAB_START_US=str(self.out.start_us),
            PCB_LAB_SELECTED=" ".join(g for g, _, _ in selected), PCB_LAB_ETA=eta,
            PCB_LAB_CASE=step_records.env_words(case_types), PCB_LAB_CAPS=" ".join(CAPABILITIES.values()), **caps)
        rc = self.relay(["bash", str(lab.script), *lab.argv], env)
        self.check_stop()
        if rc < 0:
            self.stop_sig = -rc
            self.finish(self.stopped_code())
        if rc == BODY_STOPPED:
            self.finish(1)
        if rc == BODY_USAGE:
            self.finish(2)
        if rc not in (BODY_OK, BODY_FAILED):
            self.out.say(f"stopped: the shell failed (bash exit {rc}, its message above): undoing host changes", "stop")
            self.finish(4)
        self.out.say("recording result", "record")
        rec = self.relay([PY, "-m", "labkit", "record", "--lab", lab.name, "--lab-dir", str(lab.script.parent),
                          "--run-dir", str(run_dir), "--out", str(self.out_dir), "--start", self._start_text(),
                          "--quick", str(int(lab.quick)), "--tools", lab.tools, "--scratch", str(self.scratch),
                          "--checkout", str(ROOT), "--command",
                          f"labs/{lab.name}/run.sh{' ' if lab.args else ''}{' '.join(lab.args)}"], self.child_env())
        self.check_stop()
        if rec != 0:
            self.out.say(f"labkit record failed (exit {rec})")
            self.finish(1)
        give_back(self.out_dir)
        statuses = [row["status"] for row in step_records.read_tsv(self.out_dir / lab.name / "steps.tsv")]
        skipped, failed = statuses.count("skipped"), statuses.count("failed")
        self.out.say(f"result: {self.out_dir}/{lab.name}.json ({skipped} skipped, {failed} failed steps)", "result")
        self.out.say(f"reload the chapter to see it beside ours, or: {PY} -m labkit show {lab.name}", "result")
        self.finish(1 if rc == BODY_FAILED else 0)

    def keep_audit_clean(self, host_json: Path) -> None:
        """Before the lab's first step: keep audit contexts off the run's processes where the
        boot has had audit enabled (:func:`labkit.run.auditctx.suppress`: the task,never rule's
        removal journalled, then the rule added), and write the outcome into the probed host as
        ``audit_context``. A host file that cannot be read is left to ``labkit record``.
        ``PCB_AUDIT_CONTEXT=leave`` in the environment adds no rule (:func:`labkit.run.auditctx.decide`)."""
        from . import auditctx
        try:
            host = json.loads(host_json.read_text())
        except (OSError, ValueError):
            return
        host["audit_context"] = auditctx.suppress(host, os.getpid(), self.journal.defer, self.out.say)
        host_json.write_text(json.dumps(host, indent=2) + "\n")

    def _start_text(self) -> str:
        us = self.out.start_us
        return f"{us // 1000000}.{us % 1000000:06d}000"

    def eta(self) -> str:
        """``GROUP=SECONDS`` words: each group's time in the previous run of this mode here."""
        from . import progress
        try:
            per = progress.group_seconds(self.out_dir / f"{self.lab.name}.json", self.lab.quick)
        except Exception:   # noqa: BLE001 - an estimate only: a run never fails for it
            return ""
        return " ".join(f"{g}={s:.0f}" for g, s in per.items())

    # -- --recover
    def recover(self) -> None:
        """--recover: undo every killed run's journal of this lab (in --out or the default out
        directory, and copies under the scratch parent). Exits 0 done or nothing to do, 2 a run
        is still in progress, 3 an action failed (the journal stays)."""
        lab = self.lab
        if lab.out:
            self.out_dir = Path(lab.out)
        else:
            self.default_out()
        if self.out_dir.is_dir():
            self.out_dir = self.out_dir.resolve()
        self.lock.take(wait=10)
        found = find_journals(lab.name, self.out_dir if self.out_dir.is_dir() else None, self.scratch_parent)
        if not found:
            print(f"run.sh: nothing to recover for {lab.name} (no journal in {self.out_dir})", file=sys.stderr)
            sys.exit(0)
        self.undoing = True
        for s in STOP_SIGNALS:
            signal.signal(s, signal.SIG_IGN)
        rc = 0
        for path in found:
            j = journals.read(path)
            if journals.running(j):
                print(f"run.sh: a run of {lab.name} is in progress (pid {j.pid}, journal {path}): not touching it",
                      file=sys.stderr)
                rc = 2
                continue
            self.out.log = j.out / f".{lab.name}.log" if j.out.is_dir() else None
            self.out.say(f"recovering a killed run (pid {j.pid}) from {path}")
            ok = stop_run(j.tag, self.out, "the killed run") if j.tag else True
            copies = [path, *journals.copies(path)]
            if replay(path, j.script or lab.script, self.out, copies) and ok:
                for c in copies:
                    c.unlink(missing_ok=True)
                self.out.say(f"recovered: every change in {path} is undone")
            else:
                rc = 3
                self.out.say("some changes could not be undone (above): the journal stays; fix the cause and run "
                             "--recover again")
        sys.exit(rc)

    # -- --guest
    def guest(self) -> None:
        """--guest ARCH: the whole lab in a QEMU guest (labkit.guest) with a copy of the checkout
        as git tracks it; the result and its artifacts come back to the out directory."""
        from ..record import git_commit, measuring_code
        lab = self.lab
        self.take_lock()
        accel = guest_accel(lab.guest)
        lab.host = lab.host or f"qemu-{lab.guest}-{accel}"
        self.out_dir = Path(lab.out) if lab.out else ROOT / "local-results" / lab.host
        self.begin("guest")
        job = self.scratch / "job"
        (job / "repo").mkdir(parents=True)
        # The checkout as git tracks it (work-tree contents), without the committed results.
        subprocess.run(["bash", "-c", 'git ls-files -z -- . ":!:results" | tar --null -T - -cf - | tar -xf - -C "$1"',
                        "copy", str(job / "repo")], cwd=ROOT, check=True)
        tools = ROOT / ".tools" / lab.guest
        if (tools / "bin" / "inferno-flamegraph").is_file():
            (job / "repo" / ".tools").mkdir(exist_ok=True)
            subprocess.run(["cp", "-a", str(tools / "bin"), str(tools / ".crates.toml"), str(job / "repo" / ".tools/")],
                           check=False)
        commit, dirty = git_commit(ROOT, measuring_code(lab.name))
        (job / "run").write_text(guest_job_text(lab, commit, dirty))
        self.out.say(f"{lab.title}: inside an {lab.guest} guest ({accel}), host label {lab.host}, "
                     f"{'quick' if lab.quick else 'full'} run, scratch {self.scratch}")
        from . import probe
        rc = self.relay(guest_run_argv(lab, job, self.scratch, probe.default_label()), self.child_env())
        self.check_stop()
        got = self.scratch / "out" / "results" / lab.host
        if not (got / f"{lab.name}.json").is_file():
            failed = self.out_dir / f".{lab.name}.guest-failed"
            shutil.rmtree(failed, ignore_errors=True)
            failed.mkdir()
            subprocess.run(["cp", "-a", f"{self.scratch}/out/.", str(self.scratch / "work" / "console.log"),
                            f"{failed}/"], stderr=subprocess.DEVNULL, check=False)
            self.out.say(f"the guest produced no result (guest exit {rc}); what came back: {failed}/")
            self.finish(1)
        shutil.rmtree(self.out_dir / lab.name, ignore_errors=True)
        shutil.copytree(got / lab.name, self.out_dir / lab.name, symlinks=True)
        shutil.copy2(got / f"{lab.name}.json", self.out_dir / f"{lab.name}.json")
        if self.relay([PY, "-m", "labkit", "validate", str(self.out_dir / f"{lab.name}.json")], self.child_env()):
            self.finish(1)
        self.out.say(f"result: {self.out_dir}/{lab.name}.json (guest {lab.guest}, {accel})")
        self.finish(rc if rc >= 0 else 1)


def capability_env(host: dict) -> dict[str, str]:
    """The body's ``PCB_CAP_<NAME>`` variables from a probed host (``labkit probe``'s JSON):
    one per capability of :data:`labkit.run.probe.CAPABILITIES` that the probe found unavailable,
    its reason as the value ("unavailable" without one); lab.sh's ``lab_require`` skips a step
    whose capability has one. An available or unprobed capability has none."""
    from .probe import CAPABILITIES
    return {f"PCB_CAP_{name.upper()}": host[key].get("reason") or "unavailable"
            for key, name in CAPABILITIES.items()
            if isinstance(host.get(key), dict) and host[key].get("available") is False}


def guest_accel(arch: str, run=subprocess.run) -> str:
    """The accelerator a guest of ``arch`` gets here, as ``python -m labkit.guest accel --arch
    ARCH`` prints it ("kvm" or "tcg"); "tcg" when that prints nothing or cannot run (120 s)."""
    try:
        return run([PY, "-m", "labkit.guest", "accel", "--arch", arch], capture_output=True, text=True,
                   timeout=120).stdout.strip() or "tcg"
    except (OSError, subprocess.SubprocessError):
        return "tcg"


def guest_job_text(lab: Lab, commit: str | None, dirty: bool | None) -> str:
    """``/job/run`` of a --guest run of ``lab`` (:func:`labkit.guest.job.job_script`):
    ``commit``/``dirty`` as :func:`labkit.record.git_commit` gives them; an unknown commit is
    passed as "", and an unknown dirtiness (None) as dirty, so that the result never claims a
    clean checkout it could not check."""
    from ..guest import job as guest
    return guest.job_script(lab.name, lab.host, commit or "", dirty is not False, lab.quick,
                            ",".join(lab.only) if lab.only else "")


def guest_run_argv(lab: Lab, job: Path, scratch: Path, label: str) -> list[str]:
    """The ``python -m labkit.guest run`` command of a --guest run: the lab profile, 3 GiB and
    2 vCPUs, the job directory, out/ and work/ in the run's ``scratch``, a 2 GiB out disk and an
    8 GiB scratch disk, the host's own ``label`` (the guest records where it ran), and a
    timeout of 1 h for a quick run, 4 h for a full one."""
    return [PY, "-m", "labkit.guest", "run", "--arch", lab.guest, "--profile", "lab", "--mem", "3072",
            "--cpus", "2", "--job", str(job), "--out", str(scratch / "out"), "--work", str(scratch / "work"),
            "--out-mib", "2048", "--scratch-mib", "8192", "--host-label", label,
            "--timeout", "3600" if lab.quick else "14400"]


def give_back(folder: Path, environ: dict | None = None) -> None:
    """Under sudo, hand ``folder`` and everything in it to the user who ran sudo (``SUDO_UID``,
    and ``SUDO_GID`` or else the same number, as sudo(8) sets them), so that the reader can
    delete or re-record the result without root; symbolic links themselves, not their targets.
    Without ``SUDO_UID`` nothing changes; a file that cannot be given is left as it is."""
    env = os.environ if environ is None else environ
    if not env.get("SUDO_UID"):
        return
    uid = int(env["SUDO_UID"])
    gid = int(env.get("SUDO_GID") or uid)
    for p in [folder, *folder.rglob("*")]:
        try:
            os.chown(p, uid, gid, follow_symlinks=False)
        except OSError:
            pass


def live(path: Path) -> bool:
    """Whether the run that wrote the journal ``path`` is still running."""
    try:
        return journals.running(journals.read(path))
    except (journals.JournalError, OSError):
        return False


def replay(path: Path, script: Path, out: Output, write_to: list[Path | None]) -> bool:
    """Run every pending undo action of the journal ``path``, newest first, each by a bash of the
    lab (``PCB_LAB_ROLE=undo``: lab.sh and the lab's run.sh sourced, one action per line on its
    stdin, ``ID<TAB>STATUS<TAB>LAST ERROR LINE`` back). Each outcome is journalled (``done`` or
    ``fail``) in every file of ``write_to`` that still exists. True when every action ran."""
    j = journals.read(path)
    if not j.pending:
        return True
    cmds = journals.commands(path)
    env = {k: v for k, v in os.environ.items() if k != "PCB_LAB_RUN"}
    env["PCB_LAB_ROLE"] = "undo"
    bash = subprocess.Popen(["bash", str(script)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, env=env, text=True, start_new_session=True)
    ok = True

    def note(*fields: object) -> None:
        line = "\t".join(map(str, fields)) + "\n"
        for p in write_to:
            if p is not None and p.is_file():
                try:
                    with open(p, "a") as f:
                        f.write(line)
                except OSError:
                    pass
    try:
        for aid, desc in reversed(j.pending):
            out.say(f"cleanup: {desc}", "cleanup")
            bash.stdin.write(f"{aid}\t{cmds[aid]}\n")
            bash.stdin.flush()
            answer = bash.stdout.readline().rstrip("\n").split("\t")
            reap_orphans(skip=(bash.pid,))
            if len(answer) < 2:
                out.say(f"cleanup FAILED: {desc} (the undo shell ended)", "cleanup-failed")
                return False
            status, err = answer[1], answer[2] if len(answer) > 2 else ""
            if status == "0":
                note("done", aid)
            else:
                out.say(f"cleanup FAILED: {desc} (exit {status}{': ' + err if err else ''})", "cleanup-failed")
                note("fail", aid, f"exit {status}{': ' + err if err else ''}")
                ok = False
    finally:
        try:
            bash.stdin.close()
        except OSError:
            pass
        bash.wait()
    return ok


def lab_checkout(script: str | Path) -> Path | None:
    """The checkout a lab's run.sh belongs to: its nearest ancestor folder holding
    ``labs/lib/lab.sh`` (the contract every lab sources), or None."""
    for folder in Path(os.path.realpath(script)).parents:
        if (folder / "labs" / "lib" / "lab.sh").is_file():
            return folder
    return None


def foreign_labkit(script: str | Path, root: Path = ROOT) -> str | None:
    """Why this labkit must not run ``script``'s lab, or None: it was imported from another
    checkout than the lab's, so the result would name the lab's commit while another tree's
    labkit (supervisor, parsers, record) did the work."""
    checkout = lab_checkout(script)
    if checkout is None or checkout == root.resolve():
        return None
    return (f"run.sh: labkit was imported from {root}, not from this lab's checkout {checkout}: "
            f"run {checkout}/labs/.../run.sh with that checkout's Python (lab.sh sets PYTHONSAFEPATH)")


def main(argv: list[str] | None = None) -> int:
    """``python -m labkit.run.supervisor SCRIPT N ARGV... ARGS...`` (from lab.sh's lab_main): run.sh's own N
    arguments, then the options lab_main got; see the module docstring."""
    argv = list(sys.argv[1:] if argv is None else argv)
    script, n = argv[0], int(argv[1])
    foreign = foreign_labkit(script)
    if foreign:
        print(foreign, file=sys.stderr)
        return 2
    try:
        lab = Lab.from_env(os.path.realpath(script), argv[2 + n:])
        lab.quick_leaves_out()
    except Declaration as exc:
        print(f"lab.sh: {exc}", file=sys.stderr)
        return 2
    lab.argv = argv[2:2 + n]
    if not lab.name:
        print("lab.sh: lab_define was not called", file=sys.stderr)
        return 2
    _libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)     # orphans of the run come back here
    sup = Supervisor(lab)
    try:
        if not parse(lab):
            return 0
        if not lab.recover:
            try:
                import jsonschema  # noqa: F401 - labkit record validates the result with it
            except ImportError:
                print(f"run.sh: labkit's dependencies are not importable with {PY}: run 'make setup' first",
                      file=sys.stderr)
                return 1
        sup.scratch_parent = Path(os.path.realpath(lab.scratch_parent or os.environ.get("TMPDIR") or "/tmp"))
        if lab.recover:
            sup.recover()
        elif lab.guest:
            sup.guest()
        else:
            sup.run()
    except Usage as exc:
        hint = "" if exc.refuse else " (see run.sh --help)"
        try:
            os.write(2, f"run.sh: {exc}{hint}\n".encode())
        except OSError:
            pass
        if sup.journal is not None:
            sup.finish(2)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
