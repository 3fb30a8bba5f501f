"""Audit-clean measurement, fast tier: what a run decides about audit contexts
(labkit/run/auditctx.py) on recorded ``auditctl`` outputs, the journal before the rule, the undo,
the result's ``host.audit_context`` (schema and the model's invariants) and the page's note.
The real rule on a real run (and its --recover after SIGKILL) is in test_lab_contract.py."""

from __future__ import annotations

import copy
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from labkit import model
from labkit.run import auditctx
from labkit.site.macros import runs
import refhost

ROOT = Path(__file__).resolve().parent.parent
FIX = ROOT / "tests" / "fixtures"
STATUS_OFF = (FIX / "auditctl" / "status-off.txt").read_text()
STATUS_AUDITD = (FIX / "auditctl" / "status-auditd.txt").read_text()
RULES_TASK_NEVER = (FIX / "fstime" / "auditctl-rules-task-never.txt").read_text()


class Auditctl:
    """A stand-in for ``auditctl`` keeping a rule list: ``-s`` prints ``status``, ``-l`` the
    rules, ``-a``/``-d task,never -F F`` add and delete ``-a never,task -F F``. Records every call."""

    def __init__(self, rules: list[str] | None = None, status: str = STATUS_OFF, refuse: str | None = None):
        self.rules, self.status, self.refuse, self.calls = list(rules or []), status, refuse, []

    def __call__(self, *args: str) -> subprocess.CompletedProcess:
        self.calls.append(args)
        ok = lambda out="": subprocess.CompletedProcess(["auditctl", *args], 0, out, "")  # noqa: E731
        if args == ("-s",):
            return ok(self.status)
        if args == ("-l",):
            return ok("\n".join(self.rules) + "\n" if self.rules else "No rules\n")
        rule = " ".join(["-a never,task", *args[2:]])
        if args[0] == "-a":
            if self.refuse:
                return subprocess.CompletedProcess(["auditctl", *args], 255, "", self.refuse + "\n")
            self.rules.append(rule)
            return ok()
        if args[0] == "-d" and rule in self.rules:
            self.rules.remove(rule)
            return ok()
        return subprocess.CompletedProcess(["auditctl", *args], 255, "", "Error sending delete rule request (No such file or directory)\n")


def test_the_recorded_task_never_listing_is_what_is_looked_for():
    assert auditctx.rules(lambda *a: subprocess.CompletedProcess(a, 0, RULES_TASK_NEVER, "")) == [auditctx.PLAIN]
    assert auditctx.rules(lambda *a: subprocess.CompletedProcess(a, 0, "No rules\n", "")) == []
    assert auditctx.rules(lambda *a: None) is None


@pytest.mark.parametrize("ever, root, have, status, loaded, want", [
    (False, True, True, STATUS_OFF, [], ("never enabled", False)),
    (False, False, False, None, None, ("never enabled", False)),
    (True, True, True, STATUS_OFF, [], ("suppressed with task,never", True)),
    (None, True, True, STATUS_OFF, [], ("suppressed with task,never", True)),
    (True, True, True, STATUS_AUDITD, [], ("suppressed with task,never", True)),
    (True, True, True, STATUS_OFF, ["-a never,task"], ("suppressed with task,never", False)),
    (True, True, True, STATUS_OFF, ["-a never,task -F pid!=4242"], ("suppressed with task,never", True)),
    (True, False, True, None, None, ("present: not root", False)),
    (None, False, True, None, None, ("present: not root", False)),
    (True, True, False, None, None, ("present: auditctl not installed", False)),
    (True, True, True, None, [], ("present: auditctl cannot read the kernel's audit state", False)),
    (True, True, True, STATUS_OFF.replace("enabled 0", "enabled 2"), [],
     ("present: the audit configuration is locked (enabled 2)", False)),
    (True, True, True, STATUS_OFF, ["-w /etc/passwd -p wa -k identity"],
     ("present: 1 audit rule in use on this host: a task,never rule would hide the run's processes from them", False)),
])
def test_decide(ever, root, have, status, loaded, want):
    assert auditctx.decide(ever, root, have, status, loaded) == want


def test_the_rules_removal_is_journalled_before_the_rule_is_added(monkeypatch):
    monkeypatch.setattr(auditctx.os, "geteuid", lambda: 0)
    monkeypatch.setattr(auditctx.shutil, "which", lambda name: "/usr/sbin/" + name)
    ctl = Auditctl()
    events = []

    def defer(desc, *cmd):
        events.append(("defer", desc, cmd, list(ctl.rules)))
    got = auditctx.suppress({"audit_ever_enabled": True}, 4242, defer, events.append, run=ctl)
    assert got == "suppressed with task,never"
    assert ctl.rules == ["-a never,task -F pid!=4242"]
    kind, desc, cmd, rules_then = events[0]
    assert kind == "defer" and rules_then == [], "the undo must be journalled before the rule exists"
    assert "-a never,task -F pid!=4242" in desc and cmd[-3:] == ("labkit.run.auditctx", "remove", "4242")
    assert any("added '-a never,task -F pid!=4242'" in e for e in events[1:] if isinstance(e, str))


def test_a_host_rule_is_kept_and_nothing_is_journalled(monkeypatch):
    monkeypatch.setattr(auditctx.os, "geteuid", lambda: 0)
    monkeypatch.setattr(auditctx.shutil, "which", lambda name: "/usr/sbin/" + name)
    ctl = Auditctl(rules=[auditctx.PLAIN])
    deferred = []
    got = auditctx.suppress({"audit_ever_enabled": None}, 4242, lambda *a: deferred.append(a), run=ctl)
    assert got == "suppressed with task,never" and deferred == [] and ctl.rules == [auditctx.PLAIN]
    assert not [c for c in ctl.calls if c[0] in ("-a", "-d")]


@pytest.mark.parametrize("ever, want", [(True, ("present: left as it was (PCB_AUDIT_CONTEXT=leave)", False)),
                                        (None, ("present: left as it was (PCB_AUDIT_CONTEXT=leave)", False)),
                                        (False, ("never enabled", False))])
def test_leave_adds_no_rule(ever, want):
    """PCB_AUDIT_CONTEXT=leave (the fake lab's tests): no rule, on any boot but one that never
    enabled audit, which needs none."""
    assert auditctx.decide(ever, True, True, STATUS_OFF, [], leave=True) == want


def test_leave_touches_nothing_and_says_so(monkeypatch):
    monkeypatch.setattr(auditctx.os, "geteuid", lambda: 0)
    monkeypatch.setenv("PCB_AUDIT_CONTEXT", "leave")
    ctl, said = Auditctl(), []
    got = auditctx.suppress({"audit_ever_enabled": True}, 1, lambda *a: pytest.fail("journalled"), said.append, run=ctl)
    assert got == "present: left as it was (PCB_AUDIT_CONTEXT=leave)" and ctl.calls == []
    assert said == [f"audit: this run's processes carry audit contexts ({got})"]


def test_never_enabled_touches_nothing(monkeypatch):
    monkeypatch.setattr(auditctx.os, "geteuid", lambda: 0)
    ctl = Auditctl()
    assert auditctx.suppress({"audit_ever_enabled": False}, 1, lambda *a: pytest.fail("journalled"), run=ctl) == "never enabled"
    assert ctl.calls == []


def test_a_refused_rule_is_recorded_as_present(monkeypatch):
    monkeypatch.setattr(auditctx.os, "geteuid", lambda: 0)
    monkeypatch.setattr(auditctx.shutil, "which", lambda name: "/usr/sbin/" + name)
    ctl = Auditctl(refuse="Error sending add rule data request (Operation not permitted)")
    got = auditctx.suppress({"audit_ever_enabled": True}, 7, lambda *a: None, run=ctl)
    assert got == "present: auditctl -a task,never failed: Error sending add rule data request (Operation not permitted)"


def test_remove_deletes_only_its_own_rule_and_is_harmless_twice():
    ctl = Auditctl(rules=["-a never,task -F pid!=1", "-a never,task -F pid!=2", auditctx.PLAIN])
    assert auditctx.remove(2, run=ctl)
    assert ctl.rules == ["-a never,task -F pid!=1", auditctx.PLAIN]
    calls = len(ctl.calls)
    assert auditctx.remove(2, run=ctl)
    assert [c for c in ctl.calls[calls:] if c[0] == "-d"] == [], "an absent rule is not deleted again"


def test_the_undo_command_bad_usage_is_one_line_exit_2():
    for argv in ([], ["remove"], ["remove", "x"], ["add", "1"]):
        p = subprocess.run([sys.executable, "-m", "labkit.run.auditctx", *argv], capture_output=True, text=True,
                           cwd=ROOT, timeout=60)
        assert p.returncode == 2 and len(p.stderr.splitlines()) == 1, (argv, p.stderr)


# ---- the result ------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def committed() -> dict:
    """A committed reference result; the tests pop or set audit_context to stand for results
    recorded before it existed and for new ones."""
    path = refhost.result("fstime")
    return json.loads(path.read_text())


def test_committed_results_without_it_stay_valid_but_a_new_one_needs_it(committed):
    r = copy.deepcopy(committed)
    r["host"].pop("audit_context", None)
    model.validate(r, "committed")
    with pytest.raises(model.ResultError, match="audit_context"):
        model.validate(r, "new", new=True)
    r["host"]["audit_context"] = "suppressed with task,never"
    model.validate(r, "new", new=True)


@pytest.mark.parametrize("value, ok", [
    ("never enabled", True), ("suppressed with task,never", True), ("present: not root", True),
    ("present: ", False), ("present", False), ("off", False), ("", False),
])
def test_the_schema_takes_the_three_forms(committed, value, ok):
    r = copy.deepcopy(committed)
    r["host"].update(audit_context=value, audit_ever_enabled=None)
    if ok:
        model.validate(r, "r", new=True)
    else:
        with pytest.raises(model.ResultError, match="audit_context"):
            model.validate(r, "r", new=True)


def test_never_enabled_contradicting_the_probe_is_refused(committed):
    r = copy.deepcopy(committed)
    r["host"].update(audit_context="never enabled", audit_ever_enabled=True)
    with pytest.raises(model.ResultError, match="never enabled"):
        model.validate(r, "r")


# ---- the page ---------------------------------------------------------------------------------

@pytest.mark.parametrize("host, note", [
    ({"audit_context": "never enabled", "audit_ever_enabled": False}, ""),
    ({"audit_context": "suppressed with task,never", "audit_ever_enabled": True}, ""),
    ({"audit_context": "present: not root", "audit_ever_enabled": None}, "present (not root)"),
    ({"audit_ever_enabled": True}, "present (audit had been enabled on this boot and the run did not suppress the contexts)"),
    ({"audit_ever_enabled": False}, ""),
    ({"audit_ever_enabled": None}, ""),
])
def test_audit_note(host, note):
    assert runs.audit_note(host) == note


def test_the_provenance_row_says_how_the_run_stood(committed):
    h = copy.deepcopy(committed["host"])
    h.update(audit_context="suppressed with task,never", audit_ever_enabled=True)
    assert dict(runs.host_rows(h))["audit contexts of the run's processes"] == "suppressed with task,never"
    h.update(audit_context="present: not root")
    assert dict(runs.host_rows(h))["audit contexts of the run's processes"] == "present: not root"


def test_the_provenance_warns_where_contexts_were_present(tree):
    """Each host's provenance carries the warning exactly where its result says the measured
    processes carried audit contexts (today's references suppressed them: none does), and the
    rule that decides it warns for "present: ..." and an old audited boot, not for a run that
    suppressed the contexts or a boot that never enabled audit."""
    from labkit.site import macros
    md = macros.provenance("lat_tcp")
    blocks = re.split(r'^===!? "', md, flags=re.M)[1:]
    assert blocks, md[:500]
    warned = {b.split('"', 1)[0]: "Measured with audit contexts" in b for b in blocks}
    hosts = {p.parent.name: json.loads(p.read_text())["host"] for p in sorted((ROOT / "results").glob("*/lat_tcp.json"))}
    assert warned == {k: bool(runs.audit_note(h)) for k, h in hosts.items()}, warned
    x86 = hosts[refhost.HOST]
    assert runs.audit_note({**x86, "audit_context": "present: not root"})
    assert runs.audit_note({**x86, "audit_context": None, "audit_ever_enabled": True})
    assert not runs.audit_note({**x86, "audit_context": "suppressed with task,never"})
    assert not runs.audit_note({**x86, "audit_context": None, "audit_ever_enabled": False})


def _proc(tmp_path: Path, pid: int, state: str, cmdline: bytes) -> None:
    d = tmp_path / str(pid)
    d.mkdir()
    (d / "stat").write_text(f"{pid} (py (x)) {state} 1 {pid} {pid} 0 -1\n")
    (d / "cmdline").write_bytes(cmdline)


def test_a_run_rule_is_an_orphan_only_when_its_supervisor_is_gone(tmp_path):
    """orphans(): the runs' rules whose PID is no live labkit process (gone, a zombie, or reused
    by another program); other task,never rules and a live supervisor's rule are left alone."""
    _proc(tmp_path, 10, "S", b"/venv/bin/python\0-m\0labkit.run.supervisor\0fstime\0")
    _proc(tmp_path, 11, "Z", b"")
    _proc(tmp_path, 12, "S", b"/usr/bin/sleep\x00100\x00")
    _proc(tmp_path, 13, "R", b"python3\0-m\0labkit\0")
    alive = lambda pid: auditctx.supervisor_alive(pid, proc=tmp_path)  # noqa: E731
    assert [alive(p) for p in (10, 11, 12, 13, 14)] == [True, False, False, True, False]
    loaded = [auditctx.rule_for(p) for p in (10, 11, 12, 13, 14)] + [
        auditctx.PLAIN, "-a never,task -F pid!=15 -F uid=0", "-a always,exit -F arch=b64 -S openat"]
    assert auditctx.orphans(loaded, alive=alive) == [11, 12, 14]
    assert auditctx.orphans(None, alive=alive) == [] and auditctx.orphans([], alive=alive) == []


def test_recover_removes_an_orphan_rule_and_keeps_a_live_ones(monkeypatch, capsys):
    """labkit recover (as root with auditctl) deletes exactly the rules of gone supervisors and
    says so; with none, it says there was nothing to recover."""
    from labkit import cli
    ctl = Auditctl(rules=[auditctx.rule_for(7), auditctx.rule_for(8), auditctx.PLAIN])
    monkeypatch.setattr(auditctx.rules, "__defaults__", (ctl,))
    monkeypatch.setattr(auditctx.remove, "__defaults__", (ctl,))
    monkeypatch.setattr(auditctx.orphans, "__defaults__", (lambda pid: pid == 8,))
    monkeypatch.setattr("os.geteuid", lambda: 0)
    monkeypatch.setattr("shutil.which", lambda name: "/sbin/auditctl")
    assert cli.recover_audit_rules() == (0, 1)
    assert ctl.rules == [auditctx.rule_for(8), auditctx.PLAIN]
    assert "'-a never,task -F pid!=7' of a run that is gone (pid 7): removed" in capsys.readouterr().err
    assert cli.recover_audit_rules() == (0, 0) and capsys.readouterr().err == ""
    ctl.rules.append(auditctx.rule_for(9))
    monkeypatch.setattr(auditctx, "remove", lambda pid: False)
    assert cli.recover_audit_rules() == (1, 1)
    assert "could not be removed" in capsys.readouterr().err
