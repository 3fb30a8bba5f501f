"""Whether audit had been enabled before a run: the host probe's answer
(labkit.run.probe.audit_ever_enabled) on real recorded outputs (tests/fixtures/auditctl and
tests/fixtures/fstime, each with its .cmd) and, where the machine allows, against a
measurement. The fstime lab's own reading of audit frames is labs/fstime/tests/test_fstime_audit.py."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from labkit.run import auditctx, probe

FIX = Path(__file__).resolve().parent / "fixtures"


def fixture(tool: str, name: str) -> str:
    path = FIX / tool / name
    assert (path.parent / (path.stem + ".cmd")).exists(), f"{path} has no .cmd file"
    return path.read_text()


def runner(**outputs):
    """A command runner for probe.audit_ever_enabled: ``auditctl -s`` → outputs["status"],
    ``auditctl -l`` → outputs["rules"], ``bpftrace`` → outputs["bpftrace"]; a missing entry
    is a missing program (None, as probe.run_command returns). Records the commands it was given."""
    calls = []

    def run(cmd, timeout=20):
        key = {("auditctl", "-s"): "status", ("auditctl", "-l"): "rules"}.get(tuple(cmd[:2]), cmd[0])
        calls.append(key)
        text = outputs.get(key)
        if text is None:
            return None
        return subprocess.CompletedProcess(cmd, 0, stdout=text, stderr="")
    run.calls = calls
    return run


OFF = fixture("auditctl", "status-off.txt")
AUDITD = fixture("auditctl", "status-auditd.txt")
NO_RULES = fixture("auditctl", "rules-none.txt")
TASK_NEVER = fixture("fstime", "auditctl-rules-task-never.txt")
CONTEXT_NONE = fixture("fstime", "bpftrace-audit-context-none.txt")
CONTEXT_SET = fixture("fstime", "bpftrace-audit-context-set.txt")


def test_audit_on_the_kernel_command_line_is_enough():
    run = runner()
    assert probe.audit_ever_enabled(run, cmdline="quiet audit=1 panic=1") is True
    assert probe.audit_ever_enabled(run, cmdline="audit=on") is True
    assert run.calls == []


def test_audit_enabled_now_means_enabled_before():
    assert probe.audit_ever_enabled(runner(status=AUDITD), cmdline="quiet") is True


def test_a_fresh_process_with_an_audit_context():
    assert probe.audit_ever_enabled(runner(status=OFF, bpftrace=CONTEXT_SET, rules=NO_RULES), cmdline="") is True


def test_a_fresh_process_without_one_and_no_task_rule():
    assert probe.audit_ever_enabled(runner(status=OFF, bpftrace=CONTEXT_NONE, rules=NO_RULES), cmdline="") is False


def test_unknown_rather_than_a_guess():
    # A task,never rule also leaves new processes without a context: cannot tell.
    assert probe.audit_ever_enabled(runner(status=OFF, bpftrace=CONTEXT_NONE, rules=TASK_NEVER), cmdline="") is None
    # No bpftrace (or no root, no BTF): cannot tell.
    assert probe.audit_ever_enabled(runner(status=OFF, rules=NO_RULES), cmdline="") is None
    # No auditctl to rule out a task rule: cannot tell.
    assert probe.audit_ever_enabled(runner(bpftrace=CONTEXT_NONE), cmdline="") is None
    # bpftrace ran but printed no answer (e.g. a kernel without the audit_context field).
    assert probe.audit_ever_enabled(runner(status=OFF, bpftrace="Attaching 1 probe...\n", rules=NO_RULES), cmdline="") is None


def _has_root_bpftrace_perf() -> bool:
    return os.geteuid() == 0 and all(shutil.which(t) for t in ("bpftrace", "perf", "auditctl"))


def task_never_rules() -> list[str]:
    """The ``-a never,task`` rules ``auditctl -l`` lists now (labkit.run.auditctx's ``rules``
    and ``is_task_never``, as a lab run reads them). A lab run holds one while it runs (and the
    fake lab of tests/test_lab_contract.py, on another xdist worker): a process forked
    meanwhile, anywhere on the machine, gets no audit context (kernel/auditsc.c ``audit_alloc``)."""
    return [rule for rule in auditctx.rules() or [] if auditctx.is_task_never(rule)]


def record_dd(data: Path, tries: int = 30) -> subprocess.CompletedProcess:
    """``perf record -g`` of ``dd bs=1`` into ``data``, at a moment when no ``-a never,task``
    rule was listed before the dd started nor after it ended (:func:`task_never_rules`);
    waits up to ``tries`` seconds for such a moment.

    Raises:
        pytest.skip.Exception: a rule stayed listed throughout (a lab run on this machine).
    """
    rules: list[str] = []
    for _ in range(tries):
        rules = task_never_rules()
        if not rules:
            rec = subprocess.run(["perf", "record", "-q", "--no-buildid-cache", "-g", "-F", "997", "-o", str(data),
                                  "--", "dd", "if=/dev/zero", "of=/dev/null", "bs=1", "count=400000"],
                                 capture_output=True, text=True, timeout=120)
            rules = task_never_rules()
            if not rules:
                return rec
        time.sleep(1)
    pytest.skip(f"an audit rule that keeps new processes out of audit stayed listed for {tries} s "
                f"(a lab run on this machine): {rules}")


@pytest.mark.skipif(not _has_root_bpftrace_perf(), reason="needs root, bpftrace, perf and auditctl")
def test_probe_agrees_with_a_measurement(tmp_path):
    """The probe's answer, checked against what it predicts: a process started now runs audit
    code on its system calls (perf record -g of dd bs=1 finds __audit_syscall_exit or
    audit_reset_context on its stacks) exactly when the probe says audit was enabled. The dd
    runs while no run holds a ``-a never,task`` rule, which would keep it out of audit
    whatever the probe says (:func:`record_dd`)."""
    answer = probe.audit_ever_enabled()
    if answer is None:
        pytest.skip("the probe cannot tell on this host")
    data = tmp_path / "perf.data"
    rec = record_dd(data)
    assert rec.returncode == 0, rec.stderr
    script = subprocess.run(["perf", "script", "-i", str(data)], capture_output=True, text=True, timeout=120)
    assert script.returncode == 0, script.stderr
    kernel_frames = sum(1 for line in script.stdout.splitlines() if "([kernel.kallsyms])" in line)
    assert kernel_frames > 100, "too few kernel frames to judge"
    audited = "__audit_syscall_exit" in script.stdout or "audit_reset_context" in script.stdout
    assert audited is answer
