"""The fault matrix: every lab stopped at step boundaries by SIGINT, SIGTERM, SIGHUP (its output
through a pipe whose reader dies with it) or SIGKILL (then ``run.sh --recover``), and the host
compared with what it was before (tests/labrun.py's ``host_state``: mounts, loop devices,
namespaces and /run/netns, schedulers, read_ahead_kb, audit, tracefs, files in /dev/shm and
~/.debug), plus what the case itself owns: no process of the run left, the scratch parent,
$HOME and $TMPDIR (fresh, empty directories for the run) still empty, no journal, no
unfinished run directory in the out directory.

A case is (lab, group, k, signal): the lab runs ``--quick --only GROUP`` (or in full mode, below) and is signalled at
the k-th progress line after ``== GROUP:`` (every progress line is a boundary between two
actions; a group with fewer lines is signalled where the next begins). Three sizes:

- the sampled matrix (the default, and the suite's): each group of each lab two cases, k drawn
  from 1..8 with a fixed seed, the four signals in turn;
- ``--full``, every step x every signal, each step in its first repetition: the runs keep one
  repetition of each step (``PCB_ONE_REPETITION=1``, labs/lib/case.sh: a step whose case has
  rep > 1 is recorded as skipped, its line of kind ``repetition`` is no boundary). A repetition
  runs the same command with the same resources as the first, so every step is still tried,
  and a case reaches its step in a fifth of the time or less; the sampled matrix keeps every
  repetition. One undisturbed run of each group splits its progress
  lines into steps (a step's lines end with its verdict line, ``NAME: ok``, ``skipped``,
  ``failed``; the lines after the last verdict, the group's own cleanup, are one more step);
  step j is signalled by signal i at its line (j + i) mod (its lines), so every step meets every
  signal and, in a group with at least as many steps as a step has lines, every kind of line
  (the background helper started, the command started, its verdict, the helper stopped) meets
  every signal too. A case runs its group from the start to its step. With every repetition,
  the five labs had 4,564 cases at their code of 2026-11-30 (about a day and a half of a 2-CPU
  VM: lat_tcp's first 444 took 1.1 h, fstime's 648 3.5 h); one repetition per step leaves
  about half the cases, each several times shorter;
- ``--every-line``, every progress line x every signal, also one repetition per step (days).

Every size runs quick mode, so steps that only a full run has (quick mode skips them, with the
reason) are tried at their skip only. A whole group that quick mode leaves out (lat_tcp's
wakeup and strace) is counted once more in full mode, and where steps run there the full
matrix's cases of that group run in full mode (:meth:`State.steps`). A group that skips in both
(a tool the checkout lacks, a capability the host has not) is tried at its skip only: :func:`main`
names each such group (:func:`skipped_only`) before its first case.

``--state FILE`` makes a run resumable: every count and every case's outcome is appended to FILE
(JSON lines) as soon as it is known, with a hash of the code its lab runs (:func:`code_hash`),
after a line that says which host ran them (:func:`host_record`); a later run with the same FILE
skips what it already holds for the same code and reports the union. A change to labs/lib or
labkit starts the matrix over; a change to one lab's folder, that lab's cases only; a change
to what only pages or a command of its own read (``SITE_ONLY``, ``COMMAND_ONLY``, a lab's
``PAGE_ONLY`` files, a claim's wording: ``CLAIM_TEXT``), nothing. The full
matrix outlasts a working session and a machine, so its record is committed:
:data:`RECORD` (``tests/fault_matrix_record.jsonl``) is the state file of the full matrix, and
``--status`` says, without running anything, how much of it holds for the code as it is now.

    .venv/bin/python tests/fault_matrix.py [--labs a,b] [--full | --every-line] [--groups g,h] [--seed N] [--state FILE] [--json FILE] [--pause-file FILE]
    .venv/bin/python tests/fault_matrix.py --status [--state FILE] [--labs a,b]

Exit status 0 when every case tried was clean. Needs root for the labs' host changes (without
root most steps skip, and the matrix shows little).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import labrun  # noqa: E402
from labrun import ROOT, group_progress, host_state, lab_command, progress_boundary, run_lab, signal_at, state_diff, tagged_processes  # noqa: E402
from labkit import stale  # noqa: E402
from labkit.run import events  # noqa: E402
from labkit.run.supervisor import LOCK_HELD, lock_path, starttime  # noqa: E402

RECORD = ROOT / "tests" / "fault_matrix_record.jsonl"
ONE_REPETITION = labrun.ONE_REPETITION
"""The environment of every run of ``--full`` and ``--every-line`` (counts and cases): one
repetition per step (labs/lib/case.sh LAB_ONE_REPETITION)."""
DESIGN = b"every step in its first repetition x every signal"
"""Part of :func:`code_hash`: a record made under another definition of the full matrix is not
this one's."""
"""The committed state file (``--state``) of the full matrix: its counts and outcomes survive
the machine that ran them."""

SIGNALS = [signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGKILL]
EXPECTED_RC = {signal.SIGINT: 130, signal.SIGTERM: 143, signal.SIGHUP: 129}
# Groups left out of the sampled matrix (the suite's): the guest group boots QEMU guests for
# minutes, and the suite stops a guest run by signal in its own tests (tests/test_guest.py,
# tests/test_faults.py's guest test). The full matrix tries its every step like any other's.
SAMPLE_SKIP = {("nvme_swiotlb", "guest")}


@dataclass
class Case:
    """One cell of the matrix."""

    lab: str
    group: str
    k: int
    sig: str
    full: bool = False    # the lab runs in full mode: a group quick mode leaves out (State.steps)

    @property
    def id(self) -> str:
        return f"{self.lab}-{self.group}{'-full' if self.full else ''}-{self.k}-{self.sig}"


@dataclass
class Outcome:
    """What one case did: ``clean`` when the host is as before and every check passed."""

    case: Case
    clean: bool
    rc: int | None = None
    boundary: str | None = None
    seconds: float = 0.0
    problems: list[str] = field(default_factory=list)
    disturbed: bool = False    # another lab run was active on the machine during the case, or its audit rule loaded


# Labs that are not under labs/: the lab contract's test double.
EXTRA_LABS = {"fakelab": ROOT / "tests" / "fakelab" / "run.sh"}


def script_of(lab: str) -> Path:
    """The lab's run.sh."""
    return EXTRA_LABS.get(lab, ROOT / "labs" / lab / "run.sh")


def groups(lab: str) -> list[str]:
    """The lab's groups in order (its ``lab_group`` lines)."""
    return re.findall(r"^lab_group\s+(\S+)", script_of(lab).read_text(), re.M)


def labs() -> list[str]:
    return sorted(p.parent.name for p in ROOT.glob("labs/*/run.sh"))


def sampled_cases(lab_names: list[str], seed: int = 15, per_group: int = 2) -> list[Case]:
    """``per_group`` cases per (lab, group): boundaries k from 1..8 drawn with ``seed``
    (distinct within a group), the four signals in turn (offset per lab, so that every lab
    gets every signal)."""
    rng = random.Random(seed)
    cases = []
    for li, lab in enumerate(lab_names):
        n = 0
        for g in (x for x in groups(lab) if (lab, x) not in SAMPLE_SKIP):
            for k in sorted(rng.sample(range(1, 9), per_group)):
                cases.append(Case(lab, g, k, SIGNALS[(n + li) % len(SIGNALS)].name))
                n += 1
    return cases


# Files under labkit/ that no lab run uses: the site's build (labkit/site: mkdocs hooks, Markdown marks,
# macros, evidence pages, lessons, lexer, theme) and what pages and a reader's commands show
# (labkit/view: tables, charts, commands without the run's paths). tests/test_faults.py checks that no
# module a lab imports imports them, but the reader's commands of READER_COMMANDS.
SITE_ONLY = ("labkit/site/", "labkit/view/")

# Functions of labkit's command line that only a reader runs (labkit show, hosts, compare, check),
# never a lab run: they may import SITE_ONLY modules. tests/test_faults.py checks that no script
# of a lab runs those commands.
READER_COMMANDS = {"labkit/cli.py": ("_cmd_show", "_cmd_hosts", "_cmd_compare", "_check_one")}

# Modules of labkit that only a reader's or an author's command runs, never a lab run: the
# scaffold of `labkit new-lab`, imported by labkit/cli.py inside that command's function only
# (tests/test_faults.py checks it).
COMMAND_ONLY = ("labkit/newlab.py",)

# Files of a lab's folder that only pages and a reader's commands read: the original's figures
# and the chapter's exercises (labkit.original, `labkit check`), like evidence.md (and, as a
# folder, cards/: the lab's exercises for the tool cards, labkit.cards).
# tests/test_faults.py checks that no lab-side code names them.
PAGE_ONLY = ("original.toml", "exercises.toml", "evidence.md")

# The fields of a claim in a lab's claims.toml that only pages show: its words and its source.
# A run evaluates its claims when it records (labkit.record), and a verdict carries neither
# (labkit/stats/claims.py), so the code hash reads claims.toml without them: a correction to a
# claim's wording leaves the lab's matrix as it was, a change to what a claim compares does not.
# tests/test_faults.py checks both.
CLAIM_TEXT = ("statement", "source")


def _claims_digest(data: bytes) -> bytes:
    """What of a claims.toml the code hash reads: its claims without ``CLAIM_TEXT``, as canonical
    JSON (sorted keys). A file that does not parse is read as it is."""
    import tomllib
    try:
        spec = tomllib.loads(data.decode())
    except (UnicodeDecodeError, tomllib.TOMLDecodeError):
        return data
    for claim in spec.get("claim", []):
        for key in CLAIM_TEXT:
            claim.pop(key, None)
    return json.dumps(spec, sort_keys=True).encode()


def code_hash(lab: str | None = None) -> str:
    """sha256 (first 16 hex digits) of the files git tracks under labs/ and labkit/ (but
    ``SITE_ONLY``, ``COMMAND_ONLY``, a lab's ``PAGE_ONLY`` files, and the labs' own tests and
    tool-card exercises, ``labs/<lab>/tests/`` and ``labs/<lab>/cards/``; a lab's claims.toml read without its ``CLAIM_TEXT``),
    as they are in the work tree: the code a case exercises. Whole-line ``#`` comments and blank
    lines of shell and Python files are left out, as the staleness rule leaves them
    (:func:`labkit.stale.code_lines`): a comment cannot change what a case does. With ``lab``,
    only that lab's folder of the labs' own folders (labs/lib and labkit are every lab's): a
    change to one lab starts only its cases over. Outcomes recorded under another hash are
    stale."""
    own = {p.parent.name for p in ROOT.glob("labs/*/run.sh")}
    paths = ["labs", "labkit"] + ([str(EXTRA_LABS[lab].parent.relative_to(ROOT))] if lab in EXTRA_LABS else [])
    names = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z", *paths], capture_output=True,
                           check=True).stdout.split(b"\0")
    h = hashlib.sha256(DESIGN + b"\0")
    for name in sorted(n for n in names if n):
        text = name.decode()
        parts = text.split("/")
        if text.startswith(SITE_ONLY) or text in COMMAND_ONLY or parts[0] == "labs" and (
                parts[2:3] in (["tests"], ["cards"]) or len(parts) == 3 and parts[2] in PAGE_ONLY):
            continue
        if lab is not None and parts[0] == "labs" and len(parts) > 2 and parts[1] in own and parts[1] != lab:
            continue
        f = ROOT / text
        h.update(name + b"\0" + hashed_bytes(text, f.read_bytes() if f.is_file() else b"") + b"\0")
    return h.hexdigest()[:16]


def hashed_bytes(path: str, data: bytes) -> bytes:
    """What :func:`code_hash` reads of the file at ``path`` (relative to the repository) whose
    bytes are ``data``: a lab's claims.toml without its text (:func:`_claims_digest`), a shell or
    Python file without its whole-line comments and blank lines, any other file whole."""
    parts = path.split("/")
    if parts[0] == "labs" and parts[2:] == ["claims.toml"]:
        return _claims_digest(data)
    if path.endswith(stale.COMMENTED):
        return "\n".join(stale.code_lines(data.decode(errors="replace"))).encode()
    return data


def _lab_of(record: dict) -> str | None:
    """The lab a record of :class:`State` is about: its case's for a case, else its own."""
    return record["outcome"]["case"]["lab"] if record.get("kind") == "case" else record.get("lab")


def host_record() -> dict:
    """What a state file says about the host before the cases a run adds: {"kind": "run",
    "started": ISO 8601 UTC, "kernel": uname release, "machine": uname machine, "cpus": int,
    "boot_id": /proc/sys/kernel/random/boot_id (cases of one boot share it), "commit": the
    checkout's HEAD (None outside git)}."""
    u = os.uname()
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        boot = None
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True)
    return {"kind": "run", "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "kernel": u.release,
            "machine": u.machine, "cpus": os.cpu_count(), "boot_id": boot,
            "commit": head.stdout.strip() if head.returncode == 0 else None}


class State:
    """The resumable record of a matrix run: JSON lines in ``path``, each {"code": hash, "kind":
    "count", "lab", "group", "n"}, {"code": hash, "kind": "steps", "lab", "group", "ends": [k..]}
    (:func:`step_ends`; with ``"skipped": [text..]`` when :func:`skipped_only` found no step
    run), {"code": hash, "kind": "case", "outcome": Outcome as a dict}, or {"kind": "run", ...}
    (:func:`host_record`, read into ``runs``).
    ``code``: one hash for every lab, or {lab: :func:`code_hash` of that lab}. Lines of another
    code hash than their lab's are ignored (and kept in the file)."""

    def __init__(self, path: Path | None, code: str | dict[str, str]):
        self.path, self.code = path, code
        self.counts: dict[tuple[str, str], int] = {}
        self.ends: dict[tuple[str, str], list[int]] = {}
        self.skipped: dict[tuple[str, str], list[str]] = {}    # :func:`skipped_only` of a counted group
        self.full: set[tuple[str, str]] = set()    # groups whose steps were found in a full run
        self.outcomes: dict[str, Outcome] = {}
        self.runs: list[dict] = []
        if path and path.exists():
            for line in path.read_text().splitlines():
                try:
                    d = json.loads(line)
                except json.JSONDecodeError:
                    continue                      # a line cut short by a kill
                if d.get("kind") == "run":
                    self.runs.append(d)
                    continue
                if d.get("code") != self.code_of(_lab_of(d)):
                    continue
                if d.get("kind") == "count":
                    self.counts[(d["lab"], d["group"])] = d["n"]
                elif d.get("kind") == "steps":
                    self.ends[(d["lab"], d["group"])] = d["ends"]
                    if d.get("skipped"):
                        self.skipped[(d["lab"], d["group"])] = d["skipped"]
                    if d.get("full"):
                        self.full.add((d["lab"], d["group"]))
                elif d.get("kind") == "case":
                    o = d["outcome"]
                    out = Outcome(Case(**o.pop("case")), **o)
                    self.outcomes[out.case.id] = out

    def code_of(self, lab: str | None) -> str | None:
        """The code hash outcomes of ``lab`` are recorded under."""
        return self.code if isinstance(self.code, str) else self.code.get(lab or "")

    def _append(self, line: dict) -> None:
        if self.path:
            with self.path.open("a") as f:
                f.write(json.dumps(line) + "\n")

    def add(self, record: dict) -> None:
        """Append one record (a count or a case), with its lab's code hash, and flush it to disk."""
        self._append(dict(record, code=self.code_of(_lab_of(record))))

    def begin(self) -> None:
        """Append :func:`host_record` (to a file that records anything: nothing without ``path``)."""
        if self.path:
            self.runs.append(host_record())
            self._append(self.runs[-1])

    def status(self, lab: str) -> dict:
        """How much of ``lab``'s full matrix this record holds for the code as it is now: {"lab",
        "code", "groups": its groups, "counted": groups whose steps are recorded, "cases": the
        full matrix's cases of the counted groups (:func:`step_cases`), "done", "clean",
        "not_clean": [case ids], "seconds": the done cases' time, "no_step_ran": [groups],
        "complete": every group counted and every case of them done}."""
        gs = groups(lab)
        planned = [c for g in gs if (lab, g) in self.ends
                   for c in step_cases(lab, g, self.ends[(lab, g)], full=(lab, g) in self.full)]
        got = [self.outcomes[c.id] for c in planned if c.id in self.outcomes]
        counted = sum((lab, g) in self.ends for g in gs)
        return {"lab": lab, "code": self.code_of(lab), "groups": len(gs), "counted": counted,
                "complete": counted == len(gs) and len(got) == len(planned), "cases": len(planned), "done": len(got),
                "clean": sum(o.clean for o in got), "not_clean": [o.case.id for o in got if not o.clean],
                "seconds": round(sum(o.seconds for o in got)),
                "no_step_ran": [g for g in gs if (lab, g) in self.skipped]}

    def count(self, lab: str, group: str, base: Path) -> int:
        """The group's boundaries: recorded, or the last of its recorded step ends (the same
        undisturbed run's line count), or counted now and recorded."""
        if (lab, group) not in self.counts and (lab, group) in self.ends:
            return self.ends[(lab, group)][-1]
        if (lab, group) not in self.counts:
            self.counts[(lab, group)] = count_boundaries(lab, group, base)
            self.add({"kind": "count", "lab": lab, "group": group, "n": self.counts[(lab, group)]})
        return self.counts[(lab, group)]

    def steps(self, lab: str, group: str, base: Path) -> list[int]:
        """The group's :func:`step_ends`: recorded, or found now in one undisturbed run and
        recorded. A group whose quick run ran no step (:func:`skipped_only`) is run once more in
        full mode; where steps run there, its cases run in full mode too (``"full": true`` in
        the record, :attr:`Case.full`), so that a group only full runs have is tried at every
        step, not at its skip only."""
        if (lab, group) not in self.ends:
            lines = group_lines(lab, group, base)
            record = {"kind": "steps", "lab": lab, "group": group}
            skips = skipped_only(lines)
            if skips:
                full = group_lines(lab, group, base, quick=False)
                if not skipped_only(full) and any(events.split(x)[0] in events.STEP_ENDS for x in full):
                    lines, skips, record["full"] = full, [], True
                    self.full.add((lab, group))
            self.ends[(lab, group)] = record["ends"] = step_ends(lines)
            if skips:
                self.skipped[(lab, group)] = record["skipped"] = skips
            self.add(record)
        return self.ends[(lab, group)]

    def done(self, o: Outcome) -> None:
        """Record a finished case."""
        self.outcomes[o.case.id] = o
        self.add({"kind": "case", "outcome": asdict(o)})


def group_args(group: str, work: Path, quick: bool = True) -> list[str]:
    """A matrix run's options: GROUP only, ``--quick`` unless ``quick`` is False, host
    ``fault-matrix``, out and scratch directories under ``work``."""
    return [*(["--quick"] if quick else []), "--only", group, "--host", "fault-matrix",
            "--out", str(work / "out"), "--scratch", str(work / "scratch")]


def group_lines(lab: str, group: str, base: Path, quick: bool = True) -> list[str]:
    """The progress lines of GROUP (:func:`labrun.group_progress`: those
    :func:`labrun.progress_boundary` counts, in order) in one undisturbed run of
    :func:`group_args`."""
    work = Path(tempfile.mkdtemp(prefix=f"count-{lab}-{group}-", dir=base))
    env = dict(case_env(work), **{events.ENV: "1"})   # the lines carry their kinds
    proc = run_lab(script_of(lab), *group_args(group, work, quick), timeout=None, env=env)
    return group_progress(proc.stderr.splitlines(), group)


def count_boundaries(lab: str, group: str, base: Path) -> int:
    """Progress lines of GROUP in one undisturbed ``--quick --only GROUP`` run (at least 1)."""
    return max(len(group_lines(lab, group, base)), 1)




def step_ends(lines: list[str]) -> list[int]:
    """The 1-based boundary k of each step's last line: its verdict line, and the group's last
    line (the lines after the last verdict, the group's own cleanup, are one more step).
    A group without a verdict line is one step. Returns [1] for no lines at all."""
    ends = [k for k, line in enumerate(lines, 1) if events.split(line)[0] in events.STEP_ENDS]
    if not lines:
        return [1]
    if not ends or ends[-1] != len(lines):
        ends.append(len(lines))
    return ends


def skipped_only(lines: list[str]) -> list[str]:
    """The texts of a group's step verdicts when every one of them is ``skipped`` (the run ran
    no step of the group: a tool missing, a capability the host lacks, or a group quick mode
    leaves out), else ``[]`` (a step ran, or the group has no verdict line). The matrix's cases
    of such a group try its skip only; :func:`main` says so before the first case, with these
    texts, so that a checkout without a tool the labs look for (inferno under ``.tools/``,
    installed by ``make setup``) cannot pass for one whose every step was tried."""
    verdicts = [v for v in map(events.split, lines) if v[0] in events.STEP_ENDS]
    return [text for _, _, text in verdicts] if verdicts and all(kind == "skipped" for kind, _, _ in verdicts) else []


def step_cases(lab: str, group: str, ends: list[int], full: bool = False) -> list[Case]:
    """Every step x every signal: step j (0-based; its boundaries are ends[j-1]+1 .. ends[j]) is
    signalled by SIGNALS[i] at its ((j + i) mod len)-th boundary. With steps of equal length L
    and at least L steps, every position in a step meets every signal (a Latin square, the
    pairwise design of combinatorial testing). ``full``: the cases run the lab in full mode."""
    cases, start = [], 1
    for j, end in enumerate(ends):
        seg = list(range(start, end + 1))
        cases += [Case(lab, group, seg[(j + i) % len(seg)], s.name, full) for i, s in enumerate(SIGNALS)]
        start = end + 1
    return cases


def full_cases(lab_names: list[str], base: Path, state: State | None = None, every_line: bool = False,
               only_groups: set[str] | None = None) -> list[Case]:
    """Every step of every group (of ``only_groups`` when given) with every signal
    (:func:`step_cases`), or with ``every_line`` every boundary with every signal; the counts
    from ``state`` when it has them."""
    state = state or State(None, "")
    cases = []
    for lab in lab_names:
        for g in (x for x in groups(lab) if only_groups is None or x in only_groups):
            if every_line:
                n = state.count(lab, g, base)
                cases += [Case(lab, g, k, s.name) for k in range(1, n + 1) for s in SIGNALS]
            else:
                ends = state.steps(lab, g, base)
                cases += step_cases(lab, g, ends, full=(lab, g) in state.full)
    return cases


def breadth_first(cases: list[Case]) -> list[Case]:
    """The cases in rounds, one case of each (lab, group) per round, each group's own order
    kept: a run stopped early (the full matrix takes hours) has tried every group of every lab
    a little rather than some groups entirely, so a leak in any of them shows early."""
    per: dict[tuple[str, str], list[Case]] = {}
    for c in cases:
        per.setdefault((c.lab, c.group), []).append(c)
    rounds = max((len(v) for v in per.values()), default=0)
    return [v[i] for i in range(rounds) for v in per.values() if i < len(v)]


def wait_for_lock(lock_dir: Path | None = None, timeout: int = 3600) -> None:
    """Wait until no lab run holds the lock a case's run will take (another run on a shared
    machine): the case must not be refused for that. flock on labkit/run/supervisor.py's
    lock_path (the host's, one for every lab; ``lock_dir``'s when the case's environment names
    one with PCB_LOCK_DIR)."""
    subprocess.run(["flock", "-w", str(timeout), str(lock_path(lock_dir)), "true"], check=False)


def run_alive(tag: str) -> bool:
    """Whether the run of ``tag`` (``<lab>.<pid>.<start>``: its supervisor's PID and start time,
    labkit/run/supervisor.py) is still going: that supervisor is alive. A process carrying the
    tag of a run whose supervisor is gone is a stray (a test that failed, a run killed by hand),
    which no waiting will end."""
    try:
        _, pid, start = tag.rsplit(".", 2)
        return starttime(int(pid)) == start
    except (ValueError, OSError):
        return False


def other_runs(ours: str | None = None) -> list[str]:
    """Processes of lab runs that are still going, other than the one whose tag starts with
    ``ours`` (every lab run tags its processes): on a shared machine they change the host state
    this matrix compares. Strays of ended runs are left out (:func:`run_alive`)."""
    return [p for p in tagged_processes() if not (ours and p.split()[1].startswith(ours)) and run_alive(p.split()[1])]


_RUN_RULE = re.compile(r"^-a never,task -F pid!=(\d+)$", re.M)   # labkit.run.auditctx.rule_for


def run_rule_pids(state: dict) -> set[int]:
    """Supervisor PIDs named by lab runs' ``task,never`` audit rules in a :func:`host_state`
    snapshot (its ``audit`` entry: enabled, pid, ``auditctl -l``)."""
    audit = state.get("audit")
    return {int(p) for p in _RUN_RULE.findall(audit[2] or "")} if audit else set()


def foreign_audit_rule(before: dict, after: dict, ours: int) -> bool:
    """Whether another lab run's ``task,never`` rule was loaded when the host was read for a
    case whose supervisor is ``ours``: any such rule before the case began, or one after it
    ended that names another supervisor. A run that never shows a tagged process to
    :func:`other_runs` in time (a test suite's short fake-lab run) still shows its rule, and
    the state diff would blame the rule's coming or going on the case. A rule that names
    ``ours`` after the case is the case's own leak, not a disturbance."""
    return bool(run_rule_pids(before)) or bool(run_rule_pids(after) - {ours})


def wait_quiet(timeout: int = 3600) -> None:
    """Wait until no other lab run is active (at most ``timeout`` s)."""
    end = time.time() + timeout
    while other_runs() and time.time() < end:
        time.sleep(5)


def case_env(work: Path) -> dict:
    """A fresh, empty $HOME and $TMPDIR for the run (anything written there is a leak);
    the real user's caches and configuration (labkit.guest's images, matplotlib's font cache)."""
    home = Path.home()
    for d in ("home", "tmp", "scratch"):
        (work / d).mkdir(parents=True, exist_ok=True)
    return {"HOME": str(work / "home"), "TMPDIR": str(work / "tmp"),
            "XDG_CACHE_HOME": os.environ.get("XDG_CACHE_HOME", str(home / ".cache")),
            "XDG_CONFIG_HOME": os.environ.get("XDG_CONFIG_HOME", str(home / ".config"))}


def leftovers(lab: str, work: Path, tag_prefix: str) -> list[str]:
    """What the case's own directories and processes still hold."""
    problems = []
    for d in ("home", "tmp", "scratch"):
        left = sorted(str(p.relative_to(work)) for p in (work / d).rglob("*"))
        if left:
            problems.append(f"{d} not empty: {left[:8]}")
    out = work / "out"
    for name in (f".{lab}.journal", f".{lab}.partial"):
        if (out / name).exists():
            problems.append(f"out/{name} left behind")
    procs = tagged_processes(tag_prefix)
    if procs:
        problems.append(f"processes of the run still running: {procs[:5]}")
    return problems


def run_case(case: Case, base: Path, extra_env: dict | None = None, host: bool = True) -> Outcome:
    """Run one case in a fresh directory under ``base``; see the module docstring. With
    ``host=False`` the host's state is not compared (a lab that changes nothing of it, like
    tests/fakelab: the comparison would only see what other runs on the machine do meanwhile)."""
    work = Path(tempfile.mkdtemp(prefix=f"{case.id}-", dir=base))
    env = dict(case_env(work), **(extra_env or {}))
    target = script_of(case.lab)
    args = group_args(case.group, work, quick=not case.full)
    sig = signal.Signals["SIG" + case.sig] if not case.sig.startswith("SIG") else signal.Signals[case.sig]
    wait_for_lock(Path(env["PCB_LOCK_DIR"]) if env.get("PCB_LOCK_DIR") else None)
    if host:
        wait_quiet()
    before = host_state([work]) if host else {}
    # Another run active while the host was read (one that began after wait_quiet) puts its
    # changes into "before", and the diff blames their undoing on this case even when that run
    # has ended by the end of the case: the case counts as disturbed either way.
    busy_before = bool(other_runs()) if host else False
    out = Outcome(case, clean=False)
    try:
        got = signal_at(lab_command(target, *args), progress_boundary(case.group, case.k), sig, env=env)
    except AssertionError as exc:
        out.problems.append(str(exc)[:2000])
        # refused because another run took the host's lock between wait_for_lock and the start
        # (a test suite's fake lab, a reader's run): the case never ran, so run_judged tries again
        out.disturbed = LOCK_HELD in str(exc)
        return out
    out.rc, out.boundary, out.seconds = got.rc, got.boundary, got.seconds
    tag = f"{case.lab}.{got.pid}."
    if sig == signal.SIGKILL:
        # Nothing ran the undo: a normal run must refuse (exit 2, the --recover command), then
        # --recover must undo everything the killed run's journal holds.
        time.sleep(0.5)
        again = run_lab(target, *args, timeout=120, env=env)
        if again.returncode != 2 or "--recover" not in again.stderr or len(again.stderr.strip().splitlines()) != 1:
            out.problems.append(f"a run after the kill did not refuse with one line (exit {again.returncode}): "
                                f"{again.stderr[-500:]}")
        rec = run_lab(target, "--recover", "--out", str(work / "out"), "--scratch", str(work / "scratch"), env=env)
        if rec.returncode != 0:
            out.problems.append(f"--recover exited {rec.returncode}: {rec.stderr[-1500:]}")
    else:
        # The pipe's reader dies with the same signal: the supervisor may see the write error
        # (141) before the signal; either way it must have stopped and undone everything.
        log = work / "out" / f".{case.lab}.log"
        text = log.read_text() if log.exists() else None
        if got.rc not in (EXPECTED_RC[sig], 141):
            out.problems.append(f"exit {got.rc}, expected {EXPECTED_RC[sig]} (or 141, a write error first); log tail: "
                                f"{text[-1500:] if text is not None else '(no log)'}")
    time.sleep(0.2)
    out.problems += leftovers(case.lab, work, tag)
    if host:
        after = host_state([work])
        out.problems += state_diff(before, after)
        out.disturbed = busy_before or bool(other_runs(tag)) or foreign_audit_rule(before, after, got.pid)
    out.clean = not out.problems
    return out


def run_judged(case: Case, base: Path, retries: int = 3) -> Outcome:
    """:func:`run_case`, again (up to ``retries`` times) while a case that is not clean was
    disturbed by another lab run on the machine: only an undisturbed case is judged."""
    o = run_case(case, base)
    for _ in range(retries):
        if o.clean or not o.disturbed:
            break
        print(f"{'disturbed':<10}{case.id:<48} (another lab run was active): again", flush=True)
        o = run_case(case, base)
    return o


def summary(outcomes: list[Outcome]) -> dict:
    """Counts for reports: cases tried and clean, per lab and per signal."""
    per_lab: dict = {}
    for o in outcomes:
        d = per_lab.setdefault(o.case.lab, {"tried": 0, "clean": 0})
        d["tried"] += 1
        d["clean"] += o.clean
    return {"tried": len(outcomes), "clean": sum(o.clean for o in outcomes), "per_lab": per_lab,
            "signals": sorted({o.case.sig for o in outcomes})}


_CASE_RUNNING = False     # a case is between its start and its record: a stop waits for its end
_STOP_ASKED: str | None = None   # the signal that asked for a stop while a case ran


def _interrupt(signum, frame):
    """A stop: at once outside a case (a count run is a lab run, which stops and undoes); while a
    case runs, after it (:func:`_stop_if_asked`). A SIGKILL case's lab is dead before its
    ``--recover`` ran: interrupted then, nothing would undo what it left."""
    global _STOP_ASKED
    name = signal.Signals(signum).name
    if _CASE_RUNNING:
        if _STOP_ASKED is None:
            print(f"\nfault matrix: {name}: stopping after the running case (it is a few seconds)", flush=True)
        _STOP_ASKED = name
        return
    raise KeyboardInterrupt(name)


def _stop_if_asked() -> None:
    """Raise the KeyboardInterrupt a signal asked for while the last case ran."""
    if _STOP_ASKED is not None:
        raise KeyboardInterrupt(_STOP_ASKED)


def _stoppable() -> None:
    """SIGINT and SIGTERM stop the matrix the way Ctrl-C does (the running case ends, its lab
    undone or recovered, then the record so far is kept), also when the matrix was started in the
    background by a shell, which starts it with SIGINT ignored."""
    signal.signal(signal.SIGINT, _interrupt)
    signal.signal(signal.SIGTERM, _interrupt)


def mounts_under(path: Path) -> list[str]:
    """Mount points at or below ``path`` (/proc/self/mountinfo, field 5, octal escapes undone)."""
    root, found = str(path.resolve()), []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        point = re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), line.split()[4])
        if point == root or point.startswith(root + "/"):
            found.append(point)
    return found


def remove_workdir(path: Path) -> None:
    """Delete the matrix's work directory, unless a case left a mount in it: deleting through a
    mount would remove the files a leftover loop device or mount still uses (and what a later
    ``labkit recover`` needs to find them), so the directory is kept and named instead."""
    left = mounts_under(path)
    if left:
        print(f"fault matrix: {path} kept: mounts left in it ({', '.join(left[:3])}); "
              f"undo with: .venv/bin/labkit recover --scratch <case>/scratch --out <case>/out", flush=True)
        return
    subprocess.run(["rm", "-rf", "--one-file-system", str(path)], check=False)


PACE_EVERY = 50   # cases between two pace lines


def _span(seconds: float) -> str:
    """``seconds`` as "1 h 05 min", "12 min" or "40 s"."""
    m = round(seconds / 60)
    return f"{m // 60} h {m % 60:02d} min" if m >= 60 else f"{m} min" if m else f"{seconds:.0f} s"


def pace(done: int, left: int, seconds: float) -> str:
    """The pace line of a long matrix: ``done`` cases in ``seconds`` (this run, not the resumed
    record), ``left`` to go, and the time they would take at this pace. Later boundaries of a
    group take longer to reach than early ones, and the cases go breadth first, so this
    underestimates."""
    return (f"fault matrix: {done} cases in {_span(seconds)} this run; {left} to go, at this pace "
            f"at least {_span(seconds / done * left)}")


def print_status(names: list[str], path: Path) -> int:
    """``--status``: one line per lab of :meth:`State.status` for the code as it is now, then the
    hosts the record's runs were on. 0 when every lab's full matrix is complete and clean, 1
    when some case is not clean, 3 when it is incomplete (2 is argparse's)."""
    state = State(path, {lab: code_hash(lab) for lab in names})
    print(f"fault matrix record {path} (full matrix: every step x every signal), for the code as it is now:")
    complete, clean = True, True
    for lab in names:
        st = state.status(lab)
        complete &= st["complete"]
        clean &= not st["not_clean"]
        cases = f"{st['cases']:,}" if st["counted"] == st["groups"] else f"{st['cases']:,}+ (groups counted {st['counted']}/{st['groups']})"
        print(f"  {lab:<14} code {st['code']}  {st['done']:,} of {cases} cases done, {st['clean']:,} clean"
              f", {_span(st['seconds'])}" + ("  COMPLETE" if st["complete"] else "")
              + (f"; NOT CLEAN: {', '.join(st['not_clean'])}" if st["not_clean"] else "")
              + (f"; no step ran in: {', '.join(st['no_step_ran'])}" if st["no_step_ran"] else ""))
    for r in state.runs:
        print(f"  run started {r.get('started')} on {r.get('machine')} kernel {r.get('kernel')}, {r.get('cpus')} CPUs, "
              f"boot {str(r.get('boot_id'))[:8]}, checkout {str(r.get('commit'))[:8]}")
    return 1 if not clean else 0 if complete else 3


def wait_while_paused(pause: Path | None, poll_s: float = 2.0) -> None:
    """Between two cases: wait while the file ``pause`` exists (``--pause-file``), saying so once
    when the pause begins and once when it ends."""
    if pause is None or not pause.exists():
        return
    print(f"fault matrix: paused while {pause} exists", flush=True)
    t = time.time()
    while pause.exists():
        time.sleep(poll_s)
    print(f"fault matrix: resumed after {time.time() - t:.0f} s", flush=True)


def main(argv: list[str] | None = None) -> int:
    global _CASE_RUNNING
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--labs", help="comma-separated labs (default: all)")
    size = ap.add_mutually_exclusive_group()
    size.add_argument("--full", action="store_true", help="every step x every signal (hours to days: see above)")
    size.add_argument("--every-line", action="store_true", help="every progress line x every signal (days)")
    ap.add_argument("--groups", help="comma-separated groups of those labs (default: all), with --full or --every-line")
    ap.add_argument("--seed", type=int, default=15, help="seed of the sampled matrix's boundaries")
    ap.add_argument("--per-group", type=int, default=2, help="cases per group in the sampled matrix (default 2)")
    ap.add_argument("--json", help="write every outcome and the counts to this file")
    ap.add_argument("--state", help="resumable record (JSON lines): skip the cases it holds for this code")
    ap.add_argument("--pause-file", metavar="FILE",
                    help="while FILE exists, start no new case (a quiet machine for a measurement beside a long matrix)")
    ap.add_argument("--status", action="store_true",
                    help=f"run nothing: how much of the full matrix --state (default {RECORD.relative_to(ROOT)}) holds for this code")
    a = ap.parse_args(argv)
    names = a.labs.split(",") if a.labs else labs()
    unknown = sorted(set(names) - set(labs()) - set(EXTRA_LABS))
    if unknown:
        ap.error(f"--labs: no such lab: {', '.join(unknown)}")
    if a.status:
        return print_status(names, Path(a.state) if a.state else RECORD)
    _stoppable()
    only = set(a.groups.split(",")) if a.groups else None
    if only is not None:
        if not (a.full or a.every_line):
            ap.error("--groups: only with --full or --every-line")
        known = {g for lab in names for g in groups(lab)}
        if only - known:
            ap.error(f"--groups: no such group in {', '.join(names)}: {', '.join(sorted(only - known))}")
    if a.full or a.every_line:
        os.environ.update(ONE_REPETITION)   # every count run and case run inherits it
    t0 = time.time()
    state = State(Path(a.state) if a.state else None, {lab: code_hash(lab) for lab in names})
    state.begin()
    code = ", ".join(f"{lab} {h}" for lab, h in state.code.items())
    outcomes = []
    stopped, resumed, untried = None, [], {}
    tmp = tempfile.mkdtemp(prefix="fault-matrix.")   # removed at the end unless a mount is left in it
    try:   # a stop during a count run too: run_lab stops that run, which undoes
        cases = (full_cases(names, Path(tmp), state, every_line=a.every_line, only_groups=only)
                 if a.full or a.every_line else sampled_cases(names, a.seed, a.per_group))
        untried = {f"{lab} {g}": texts for (lab, g), texts in state.skipped.items()
                   if lab in names and (only is None or g in only)} if a.full or a.every_line else {}
        for key, texts in untried.items():
            print(f"fault matrix: {key}: no step ran in its count run, so its cases try the skip only: "
                  + " | ".join(texts), flush=True)
        resumed = [state.outcomes[c.id] for c in cases if c.id in state.outcomes]
        if resumed:
            print(f"fault matrix: {len(resumed)} of {len(cases)} cases already recorded in {a.state} "
                  f"for this code ({code}); {len(cases) - len(resumed)} to go", flush=True)
        outcomes += resumed
        cases = breadth_first([c for c in cases if c.id not in state.outcomes])
        total, started = len(outcomes) + len(cases), time.time()
        while cases:
            wait_while_paused(Path(a.pause_file) if a.pause_file else None)
            c = cases.pop(0)   # a lab run of another on the machine: run_case waits for its end
            _CASE_RUNNING = True
            try:
                o = run_judged(c, Path(tmp))
            finally:
                _CASE_RUNNING = False
            outcomes.append(o)
            state.done(o)
            print(f"{'clean' if o.clean else 'NOT CLEAN':<10}{c.id:<48} exit {o.rc!s:<5} {o.seconds:6.1f} s"
                  f"  [{len(outcomes)}/{total}]"
                  + ("" if o.clean else "\n    " + "\n    ".join(o.problems)), flush=True)
            if cases and (len(outcomes) - len(resumed)) % PACE_EVERY == 0:
                print(pace(len(outcomes) - len(resumed), len(cases), time.time() - started), flush=True)
            _stop_if_asked()
    except KeyboardInterrupt as exc:  # between cases, or in a count run (its lab undid)
        stopped = str(exc) or "SIGINT"
        print(f"\nfault matrix: stopped by {stopped} after {len(outcomes)} cases"
              + (f" (the record so far is in {a.state}: run again to resume)" if a.state else ""), flush=True)
    finally:
        remove_workdir(Path(tmp))
    s = summary(outcomes)
    print(f"\nfault matrix: {s['tried']} cases tried, {s['clean']} clean "
          f"({'every line' if a.every_line else 'full: every step' if a.full else f'sampled, seed {a.seed}'}; code {code}; {time.time() - t0:.0f} s"
          f"{f', {len(resumed)} of them from {a.state}' if resumed else ''})")
    for lab, d in s["per_lab"].items():
        print(f"  {lab:<16}{d['clean']}/{d['tried']} clean")
    if untried:
        print(f"  no step ran in: {', '.join(untried)} (each tried at its skip only)")
    if a.json:
        Path(a.json).write_text(json.dumps({"summary": s, "seconds": round(time.time() - t0), "no_step_ran": untried,
                                            "outcomes": [asdict(o) for o in outcomes]}, indent=1))
    if stopped:
        return 130
    return 0 if s["clean"] == s["tried"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
