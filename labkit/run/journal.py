"""Journals of lab runs: what a run changed on the host and has not undone yet.

Every lab run has a journal ``<out>/.<lab>.journal`` (tab-separated lines, appended): the
supervisor (labkit.run.supervisor) writes its ``run`` line and its own undo actions, and the
lab's shell (``lab_defer`` and ``lab_unwind`` in labs/lib/lab.sh) appends ``do``/``done``/``fail``:

    run   LAB PID STARTTIME TAG OUT SCRATCH-PARENT SCRIPT   first line, before any change
    do    ID DESCRIPTION COMMAND                    an undo action, written before its change
    done  ID                                        the action ran
    fail  ID MESSAGE                                the action failed (it stays pending)

and a copy of it, line for line, as ``.pcb-journal`` in its scratch directory
(``<scratch parent>/pcb-<lab>.XXXXXX/``): ``--recover --scratch`` finds a killed run through it
when the out directory is gone. A run that ends in any way but SIGKILL undoes everything and
removes its journal; a journal left behind is a killed run's, and
``labs/<lab>/run.sh --recover --out OUT`` undoes it (``labkit recover`` finds them all).
The undo actions are shell commands of the lab, run by a bash of the lab's own script.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path


class JournalError(ValueError):
    """A file that is not a lab journal (no ``run`` line, bad fields)."""


@dataclass
class Journal:
    """A run's journal: ``pending`` holds (id, description) of undo actions not done yet, in
    registration order (they are undone newest first)."""

    path: Path
    lab: str
    pid: int
    start: str
    tag: str
    out: Path
    scratch_parent: Path | None = None
    script: Path | None = None
    pending: list[tuple[int, str]] = field(default_factory=list)
    failed: dict[int, str] = field(default_factory=dict)


def read(path: str | Path) -> Journal:
    """Parse a journal file.

    Raises:
        JournalError: no ``run`` line first, or a malformed line.
        OSError: the file cannot be read.
    """
    path = Path(path)
    lines = path.read_text(errors="replace").splitlines()
    if not lines or not lines[0].startswith("run\t"):
        raise JournalError(f"{path}: not a lab journal (no run line first)")
    head = lines[0].split("\t")
    if len(head) < 6 or not head[2].isdigit():
        raise JournalError(f"{path}: malformed run line: {lines[0]!r}")
    j = Journal(path, head[1], int(head[2]), head[3], head[4], Path(head[5]),
                Path(head[6]) if len(head) > 6 and head[6] else None,
                Path(head[7]) if len(head) > 7 and head[7] else None)
    todo: dict[int, str] = {}
    for n, line in enumerate(lines[1:], start=2):
        f = line.split("\t")
        try:
            if f[0] == "do" and len(f) >= 4:
                todo[int(f[1])] = f[2]
            elif f[0] == "done" and len(f) >= 2:
                todo.pop(int(f[1]), None)
            elif f[0] == "fail" and len(f) >= 3:
                j.failed[int(f[1])] = f[2]
            elif line.strip():
                raise JournalError(f"{path}:{n}: unknown line {line!r}")
        except ValueError as exc:
            if isinstance(exc, JournalError):
                raise
            raise JournalError(f"{path}:{n}: bad action id in {line!r}") from exc
    j.pending = sorted(todo.items())
    return j


def commands(path: str | Path) -> dict[int, str]:
    """``{id: command}`` of every ``do`` line of the journal ``path`` (shell words)."""
    out: dict[int, str] = {}
    for line in Path(path).read_text(errors="replace").splitlines():
        f = line.split("\t")
        if f[0] == "do" and len(f) >= 4 and f[1].isdigit():
            out[int(f[1])] = "\t".join(f[3:])
    return out


def primary(copy: str | Path) -> Path | None:
    """The journal to undo for a scratch directory's ``.pcb-journal``: the run's journal in its
    out directory when it is still there, else the copy itself; None when ``copy`` is not a
    journal copy."""
    copy = Path(copy)
    try:
        text = copy.read_text(errors="replace")
    except OSError:
        return None
    if text.startswith("run\t"):
        head = text.split("\n", 1)[0].split("\t")
        if len(head) > 5:
            main = Path(head[5]) / f".{head[1]}.journal"
            if main.is_file() and main.read_text(errors="replace").split("\n", 1)[0] == text.split("\n", 1)[0]:
                return main.resolve()
        return copy.resolve()
    return None


def copies(path: str | Path) -> list[Path]:
    """The other files holding the journal ``path``: its copy in the scratch directory when
    ``path`` is the out directory's, the out directory's when ``path`` is the copy. A file is a
    copy of the same run when its first line (the run's ``run`` record) is the same."""
    path = Path(path)
    try:
        j = read(path)
        head = path.read_text(errors="replace").split("\n", 1)[0]
    except (JournalError, OSError):
        return []
    candidates = [j.out / f".{j.lab}.journal"]
    if j.scratch_parent is not None:
        candidates += sorted(j.scratch_parent.glob(f"pcb-{j.lab}*/.pcb-journal"))
    out = []
    for c in candidates:
        try:
            same = c.resolve() != path.resolve() and c.read_text(errors="replace").split("\n", 1)[0] == head
        except OSError:
            continue
        if same:
            out.append(c)
    return out


def proc_stat(pid: int | str, proc: Path = Path("/proc")) -> list[str] | None:
    """The fields of /proc/PID/stat after the command name (proc(5) fields 3 onwards), or None
    when the process is gone: [0] the state (R, S, Z, ...), [1] the parent's PID, [2] the process
    group, [19] the start time (clock ticks after boot, proc(5) field 22). ``proc``: another
    /proc (a test's files)."""
    try:
        return (proc / str(pid) / "stat").read_text().rsplit(") ", 1)[1].split()
    except (OSError, IndexError):
        return None


def running(j: Journal) -> bool:
    """Whether the run that wrote ``j`` is still running (same PID, same start time, and not a
    zombie: a killed run's shell keeps its PID until its parent reaps it)."""
    fields = proc_stat(j.pid)
    return bool(fields) and fields[19] == j.start and fields[0] not in ("Z", "X")


def find(out_dirs: list[Path], scratch_parents: list[Path], lab: str | None = None) -> list[Path]:
    """Journal files: ``.<lab>.journal`` in each out directory (a host folder) or in its host
    folders (a folder of host folders), and for each ``pcb-*/.pcb-journal`` under the scratch
    parents its :func:`primary`; only ``lab``'s when given. Sorted, without duplicates."""
    found: set[Path] = set()
    name = f".{lab}.journal" if lab else ".*.journal"
    for d in out_dirs:
        d = Path(d)
        for pattern in (name, f"*/{name}"):
            found.update(p.resolve() for p in d.glob(pattern) if p.is_file())
    scratch = (f"pcb-{lab}.*/.pcb-journal", f"pcb-{lab}-guest.*/.pcb-journal") if lab else ("pcb-*/.pcb-journal",)
    for parent in scratch_parents:
        for pattern in scratch:
            for copy in Path(parent).glob(pattern):
                target = primary(copy)
                if target is not None:
                    found.add(target)
    return sorted(found)
