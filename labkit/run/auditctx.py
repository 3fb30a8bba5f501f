"""Audit-clean measurement: a lab run's processes take the plain system-call path on any boot.

Once kernel audit has been enabled on a boot (``audit_ever_enabled``, :func:`labkit.run.probe.
audit_ever_enabled`), ``audit_alloc()`` (kernel/auditsc.c) gives every new task an audit
context and sets its ``SYSCALL_AUDIT`` work, so each of its system calls pays audit's entry
and exit work until the next boot, whether audit is still enabled or not. A rule on the task
filter list whose action is ``never`` makes ``audit_alloc()`` give the tasks it matches no
context and clear that work (Fedora's default ``audit.rules`` shipped ``-a task,never``).

The supervisor (:mod:`labkit.run.supervisor`) calls :func:`suppress` after the probe and before
the lab's first step. As root with ``auditctl``, when the probe did not find audit never
enabled, it journals the rule's removal and then adds::

    -a never,task -F pid!=<the supervisor's PID>

The task filter runs in ``audit_alloc()``, which ``copy_process()`` (kernel/fork.c) calls before
the new task has a PID of its own, so the PID a task rule sees is the *forking parent's*
(checked on the reference machine: a ``dd`` loop forked by the PID a ``pid!=`` rule names keeps
its context). The rule therefore gives no context to every task forked by any process but the
supervisor: the lab's body (the supervisor's own child) keeps one, every command the body
starts and everything below it has none. Tasks other programs on the host start during the run
are covered too, which is why a host whose audit is in use gets no rule. The field also
names the run whose rule it is, so that two runs never remove each other's rule and the undo
(:func:`remove`, ``python -m labkit.run.auditctx remove PID``; also what ``--recover`` replays after
a SIGKILL) deletes exactly this one. ``auditctl`` refuses a key (``-k``) on a task rule. A
plain ``-a never,task`` that the host already has is left in place and not removed. The
result's ``host.audit_context`` records the outcome (:data:`NEVER`, :data:`SUPPRESSED` or
``present: <reason>``). A host whose audit rules are in use keeps them working: a task,never
rule would hide every process started during the run from them, so the run does not add it.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from .journal import proc_stat

NEVER = "never enabled"
SUPPRESSED = "suppressed with task,never"
PLAIN = "-a never,task"


def present(reason: str) -> str:
    """``host.audit_context`` of a run whose processes carry audit contexts (or may)."""
    return f"present: {reason}"


def rule_for(pid: int) -> str:
    """The rule a run with supervisor PID ``pid`` adds, as ``auditctl -l`` lists it."""
    return f"{PLAIN} -F pid!={pid}"


def _auditctl(*args: str) -> subprocess.CompletedProcess | None:
    try:
        return subprocess.run(["auditctl", *args], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return None


def rules(run=_auditctl) -> list[str] | None:
    """The loaded rules, one ``auditctl -l`` line each ([] for "No rules"); None when
    ``auditctl -l`` fails."""
    p = run("-l")
    if p is None or p.returncode != 0:
        return None
    return [ln.strip() for ln in p.stdout.splitlines() if ln.strip() and not ln.startswith("No rules")]


def is_task_never(rule: str) -> bool:
    """Whether an ``auditctl -l`` line is a never rule of the task list (any fields)."""
    return rule == PLAIN or rule.startswith(PLAIN + " ")


LEAVE = "left as it was (PCB_AUDIT_CONTEXT=leave)"


def decide(ever_enabled: bool | None, root: bool, have_auditctl: bool, status: str | None,
           loaded: list[str] | None, leave: bool = False) -> tuple[str, bool]:
    """What a run does about audit contexts: (``host.audit_context``, whether to add the rule).

    Args:
        ever_enabled: the probe's ``audit_ever_enabled`` (None: unknown).
        root, have_auditctl: whether the run is root and ``auditctl`` is on the PATH.
        status: ``auditctl -s``'s output (None: it failed).
        loaded: :func:`rules` (None: ``auditctl -l`` failed).
        leave: ``PCB_AUDIT_CONTEXT=leave`` was set (the fake lab's tests, which must not change
            the audit state of a lab run beside them): no rule.
    """
    if ever_enabled is False:
        return NEVER, False
    if leave:
        return present(LEAVE), False
    if not root:
        return present("not root"), False
    if not have_auditctl:
        return present("auditctl not installed"), False
    if status is None or loaded is None:
        return present("auditctl cannot read the kernel's audit state"), False
    if loaded and any(r == PLAIN for r in loaded):
        return SUPPRESSED, False
    if re.search(r"^enabled 2\b", status, re.M):
        return present("the audit configuration is locked (enabled 2)"), False
    others = [r for r in loaded if not is_task_never(r)]
    if others:
        return present(f"{len(others)} audit rule{'s' if len(others) != 1 else ''} in use on this host: "
                       f"a task,never rule would hide the run's processes from them"), False
    return SUPPRESSED, True


def add(pid: int, run=_auditctl) -> str | None:
    """Add :func:`rule_for` ``pid``; None when done, else auditctl's last error line."""
    p = run("-a", "task,never", "-F", f"pid!={pid}")
    if p is not None and p.returncode == 0:
        return None
    return ((p.stderr or p.stdout).strip().splitlines() or ["failed"])[-1] if p is not None else "auditctl did not run"


def remove(pid: int, run=_auditctl) -> bool:
    """Delete :func:`rule_for` ``pid`` when it is loaded (harmless when it is not). True when
    it is not loaded afterwards."""
    loaded = rules(run)
    if loaded is not None and rule_for(pid) not in loaded:
        return True
    if run("-d", "task,never", "-F", f"pid!={pid}") is None:
        return False
    after = rules(run)
    return after is not None and rule_for(pid) not in after


_RUN_RULE = re.compile(r"^-a never,task -F pid!=(\d+)$")


def supervisor_alive(pid: int, proc: Path = Path("/proc")) -> bool:
    """Whether PID ``pid`` is a live lab-run supervisor: a process that is not a zombie and whose
    command line names ``labkit`` (a reused PID of some other program is not)."""
    fields = proc_stat(pid, proc)
    try:
        cmdline = (proc / str(pid) / "cmdline").read_bytes()
    except OSError:
        return False
    return bool(fields) and fields[0] not in ("Z", "X") and b"labkit" in cmdline


def orphans(loaded: list[str] | None, alive=supervisor_alive) -> list[int]:
    """The supervisor PIDs of the runs' rules (:func:`rule_for`) in ``loaded`` (:func:`rules`)
    whose supervisor is gone: a run killed before its undo whose journal is gone too (deleted
    with its out directory). Such a rule keeps an audit context off every process the host
    starts, so no audited measurement is possible until it is removed. Sorted; [] when
    ``loaded`` is None."""
    pids = (int(m.group(1)) for r in loaded or [] if (m := _RUN_RULE.match(r)))
    return sorted(pid for pid in pids if not alive(pid))


def suppress(host: dict, pid: int, defer, say=lambda _m: None, run=_auditctl) -> str:
    """For a run whose supervisor has PID ``pid`` and whose probed host is ``host``: decide
    (:func:`decide`; ``PCB_AUDIT_CONTEXT=leave`` in the environment: no rule, no auditctl call), and when the rule is to be added, register its removal with ``defer(desc,
    *cmd)`` (the journal) first, then add it. Returns ``host.audit_context``."""
    root = os.geteuid() == 0
    have = shutil.which("auditctl") is not None
    leave = os.environ.get("PCB_AUDIT_CONTEXT") == "leave"
    status = loaded = None
    if root and have and not leave and host.get("audit_ever_enabled") is not False:
        s = run("-s")
        status = s.stdout if s is not None and s.returncode == 0 else None
        loaded = rules(run)
    context, add_it = decide(host.get("audit_ever_enabled"), root, have, status, loaded, leave)
    if not add_it:
        if context == SUPPRESSED:
            say(f"audit: the host's own '{PLAIN}' rule keeps audit contexts off this run's processes")
        elif context != NEVER:
            say(f"audit: this run's processes carry audit contexts ({context})")
        return context
    defer(f"delete the audit rule '{rule_for(pid)}'", sys.executable, "-m", "labkit.run.auditctx", "remove", str(pid))
    err = add(pid, run)
    if err is not None:
        say(f"audit: could not add '{rule_for(pid)}': {err}")
        return present(f"auditctl -a task,never failed: {err}")
    say(f"audit: added '{rule_for(pid)}': the run's processes get no audit context (removed at the end)")
    return SUPPRESSED


def main(argv: list[str] | None = None) -> int:
    """``python -m labkit.run.auditctx remove PID``: the undo of a run's rule. Exit 0 when the rule
    is not loaded afterwards, 1 when it still is, 2 bad usage."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if len(argv) != 2 or argv[0] != "remove" or not argv[1].isdigit():
        print("usage: python -m labkit.run.auditctx remove PID", file=sys.stderr)
        return 2
    if remove(int(argv[1])):
        return 0
    print(f"auditctx: '{rule_for(int(argv[1]))}' is still loaded", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
