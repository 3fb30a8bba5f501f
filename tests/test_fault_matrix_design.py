"""The full fault matrix's design (tests/fault_matrix.py): how a group's progress lines are split
into steps, and which boundary of each step each signal gets. Pure functions, fast tier."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time

import fault_matrix as fm
from labrun import tagged_processes

SIGS = [s.name for s in fm.SIGNALS]


def lines_of(*kinds: str) -> list[str]:
    """Progress lines as labs/lib/lab.sh tags them (:mod:`labkit.run.events`), one per kind: 'bg',
    'cmd', 'ok', 'skip', 'xfail', 'fail', 'stop' (a helper stopped), 'other'."""
    from labkit.run import events
    tagged = {"bg": ("spawn:s.iostat", "s.iostat: starting in background: iostat -x 1 vda"),
              "cmd": ("step:s", "s: env A=1 fio --output-format=json x.fio"), "ok": ("ok:s", "s: ok (1.456s)"),
              "skip": ("skipped:s", "s: skipped: no perf (kernel lockdown)"),
              "xfail": ("expected-failure:s", "s: failed as expected (exit 1, 0.1s): no server"),
              "fail": ("failed:s", "s: FAILED (exit 1, 2.0s); last lines of raw/s.err:"),
              "stop": ("cleanup", "cleanup: stop s.iostat (pid 12363)"), "other": ("note", "mount: tmpfs on /x (size 1g)")}
    return [events.tag(tagged[k][0], f"[lab  {i}.0s] {tagged[k][1]}") for i, k in enumerate(kinds)]


def test_steps_end_at_their_verdict_and_the_group_cleanup_is_one_more_step():
    lines = lines_of("other", "bg", "cmd", "ok", "stop", "bg", "cmd", "skip", "stop", "other")
    assert fm.step_ends(lines) == [4, 8, 10]
    assert fm.step_ends(lines_of("cmd", "xfail", "cmd", "fail")) == [2, 4]
    assert fm.step_ends(lines_of("other", "other", "other")) == [3]
    assert fm.step_ends([]) == [1]


def test_a_verdict_is_its_kind_not_its_words():
    # a step whose command mentions "ok (" is not a verdict, nor a cleanup line, nor an untagged line
    from labkit.run import events
    assert fm.step_ends([events.tag("step:s", "[lab  1.0s] s: echo 'ok (' x"),
                         events.tag("cleanup", "[lab  1.1s] cleanup: stop s (pid 3)")]) == [2]
    assert fm.step_ends([events.tag("cleanup-failed", "[lab  1.0s] cleanup FAILED: umount /x (exit 32)")]) == [1]
    assert fm.step_ends(["[lab  1.0s] s: ok (1.0s)", events.tag("ok:s", "[lab  1.1s] s: anything")]) == [2]


def test_every_step_meets_every_signal_and_rotates_through_its_boundaries():
    ends = [4, 8, 12, 16, 17]                 # four steps of four lines, then one cleanup line
    cases = fm.step_cases("lab", "g", ends)
    assert len(cases) == 5 * 4
    by_step = [cases[i:i + 4] for i in range(0, len(cases), 4)]
    for j, step in enumerate(by_step):
        assert [c.sig for c in step] == SIGS
        first = ends[j - 1] + 1 if j else 1
        assert all(first <= c.k <= ends[j] for c in step), (j, [c.k for c in step])
    # within the four-line steps, every position meets every signal exactly once
    pos = {(c.k - 1) % 4 for c in cases[:16] if c.sig == "SIGHUP"}
    assert pos == {0, 1, 2, 3}
    assert [c.k for c in by_step[0]] == [1, 2, 3, 4] and [c.k for c in by_step[1]] == [6, 7, 8, 5]
    assert {c.k for c in by_step[4]} == {17}
    assert len({c.id for c in cases}) == len(cases)          # no case twice


def test_cases_run_breadth_first_over_groups():
    cases = fm.step_cases("a", "g1", [2, 4]) + fm.step_cases("a", "g2", [1]) + fm.step_cases("b", "g1", [3])
    order = fm.breadth_first(cases)
    assert sorted(c.id for c in order) == sorted(c.id for c in cases)
    assert [(c.lab, c.group) for c in order[:3]] == [("a", "g1"), ("a", "g2"), ("b", "g1")]
    for key in {(c.lab, c.group) for c in cases}:     # each group's own order kept
        assert [c for c in order if (c.lab, c.group) == key] == [c for c in cases if (c.lab, c.group) == key]
    assert [(c.lab, c.group) for c in order[-4:]] == [("a", "g1")] * 4
    assert fm.breadth_first([]) == []


def test_groups_narrows_the_full_matrix_to_named_groups(tmp_path, capsys):
    """``--groups`` keeps only the named groups' cases (the NVMe guest group alone is a run of its
    own), and an unknown group or a ``--groups`` without a full matrix is an argparse error naming it, exit 2."""
    st = fm.State(None, "x")
    st.ends[("fstime", "copy")] = [3, 5]
    st.ends[("fstime", "audit")] = [2]
    cases = fm.full_cases(["fstime"], tmp_path, st, only_groups={"copy", "audit"})
    assert {c.group for c in cases} == {"copy", "audit"}
    assert len(cases) == (2 + 1) * len(fm.SIGNALS)
    for argv in (["--labs", "fstime", "--full", "--groups", "nope"], ["--labs", "fstime", "--groups", "copy"]):
        try:
            fm.main(argv)
        except SystemExit as e:
            assert e.code == 2
        else:
            raise AssertionError(f"{argv} was accepted")
        err = capsys.readouterr().err.strip().splitlines()
        assert ": error: --groups: " in err[-1], err


def test_a_ring_buffer_first_allocated_is_no_change_but_another_size_is():
    """tracefs's buffer_size_kb on a freshly booted host reads "7 (expanded: 1408)"; the first use
    of tracing allocates the 1408 KB default, which reads 1410 (whole ring-buffer pages). The
    pair is from this project's CI run of 2026-11-24, where the check reported it as a change.
    Any other size is still a change."""
    from labrun import ring_buffer_allocated, state_diff
    assert ring_buffer_allocated("7 (expanded: 1408)", "1410")
    assert ring_buffer_allocated("7 (expanded: 1408)", "1408")
    for before, after in (("7 (expanded: 1408)", "16384"), ("7 (expanded: 1408)", "7"), ("1410", "1408"),
                          ("7 (expanded: 1408)", "1400"), ("7 (expanded: 1408)", None), (None, "1410")):
        assert not ring_buffer_allocated(before, after), (before, after)
    tr = {"current_tracer": "nop", "buffer_size_kb": "7 (expanded: 1408)"}
    assert state_diff({"tracefs": tr}, {"tracefs": dict(tr, buffer_size_kb="1410")}) == []
    assert state_diff({"tracefs": tr}, {"tracefs": dict(tr, buffer_size_kb="16384")}) == [
        "tracefs[buffer_size_kb]: '7 (expanded: 1408)' -> '16384'"]
    assert state_diff({"tracefs": tr}, {"tracefs": dict(tr, current_tracer="blk", buffer_size_kb="1410")}) == [
        "tracefs[current_tracer]: 'nop' -> 'blk'"]


def test_the_supervisor_strips_a_tag_and_keeps_it_for_a_harness(tmp_path, capfd, monkeypatch):
    """Output.emit: the log gets the text; stderr gets the text, tagged only with the harness's
    variable set; a line without a tag is of kind text; the supervisor's own lines carry theirs."""
    from labkit.run import events, supervisor
    line = events.tag("ok:s", "[lab  1.0s] s: ok (1.0s)")
    for tags in ("0", "1"):
        monkeypatch.setenv(events.ENV, tags)
        out = supervisor.Output("lab")
        out.log = tmp_path / f"log{tags}"
        out.emit(line)
        out.emit("plain")
        out.say("recording result", "record")
        err = capfd.readouterr().err.splitlines()
        assert out.log.read_text().splitlines()[:2] == ["[lab  1.0s] s: ok (1.0s)", "plain"]
        if tags == "1":
            assert [events.split(e)[:2] for e in err] == [("ok", "s"), ("text", ""), ("record", "")]
        else:
            assert err[:2] == ["[lab  1.0s] s: ok (1.0s)", "plain"] and "\x1f" not in "".join(err)


def test_step_ends_are_read_from_kinds():
    """fault_matrix.step_ends counts a step's end by its kind alone: a line whose wording looks
    like a verdict but is untagged is no boundary; a tagged skip is."""
    from labkit.run import events
    lines = [events.tag("step:a", "[x 0.1s] a: cmd"), events.tag("ok:a", "[x 0.2s] a: ok (0.1s)"),
             "[x 0.3s] b: ok (0.1s)", events.tag("skipped:c", "[x 0.4s] c: skipped: why"),
             events.tag("cleanup", "[x 0.5s] cleanup: something")]
    assert fm.step_ends(lines) == [2, 4, 5]
    assert fm.step_ends([]) == [1]
    assert fm.step_ends(["[x 0.1s] a: ok (0.1s)"]) == [1]


def test_the_pace_line_gives_the_time_left_at_this_pace():
    assert fm.pace(50, 150, 300) == "fault matrix: 50 cases in 5 min this run; 150 to go, at this pace at least 15 min"
    assert fm.pace(100, 1380, 900) == "fault matrix: 100 cases in 15 min this run; 1380 to go, at this pace at least 3 h 27 min"
    assert fm.pace(3, 1, 20) == "fault matrix: 3 cases in 20 s this run; 1 to go, at this pace at least 7 s"


def test_a_stray_of_an_ended_run_is_not_waited_for():
    """The matrix waits for other lab runs on a shared machine (their host changes would show in
    its comparison), but a process that carries the tag of a run whose supervisor is gone (a
    test that failed, a run killed by hand) ends no matter how long one waits: left out."""
    from labkit.run.supervisor import starttime
    me = os.getpid()
    assert fm.run_alive(f"lab.{me}.{starttime(me)}")
    assert not fm.run_alive(f"lab.{me}.1")                  # the PID came back for another process
    assert not fm.run_alive("fakelab.4194305.1")            # above any PID
    assert not fm.run_alive("no-tag") and not fm.run_alive("lab.x.y")
    stray = subprocess.Popen(["sleep", "60"], env=dict(os.environ, PCB_LAB_RUN="fakelab.4194305.1"))
    try:
        time.sleep(0.2)
        assert any(p.split()[1] == "fakelab.4194305.1" for p in tagged_processes())
        assert not [p for p in fm.other_runs() if p.split()[1] == "fakelab.4194305.1"]
    finally:
        stray.kill()
        stray.wait()


def test_a_case_refused_for_the_hosts_lock_is_tried_again(tmp_path, monkeypatch):
    """A case whose run was refused because another run took the host's lock after
    wait_for_lock (a test suite's fake lab) never ran: it is marked disturbed, and run_judged
    tries it again; any other early end is judged as it is."""
    refusal = ("ended (exit 2) before the boundary; output:\nrun.sh: another lab run is in progress on this host "
               "(fakelab, pid 7743): two at once would measure each other; wait for it to end, or stop it with: kill 7743")
    monkeypatch.setattr(fm, "wait_for_lock", lambda *a, **k: None)

    def refused(*a, **k):
        raise AssertionError(refusal)
    monkeypatch.setattr(fm, "signal_at", refused)
    case = fm.Case("fakelab", "g", 1, "SIGINT")
    out = fm.run_case(case, tmp_path, host=False)
    assert not out.clean and out.disturbed and "another lab run" in out.problems[0]

    def broken(*a, **k):
        raise AssertionError("ended (exit 1) before the boundary; output:\nrun.sh: FAILED")
    monkeypatch.setattr(fm, "signal_at", broken)
    out = fm.run_case(case, tmp_path, host=False)
    assert not out.clean and not out.disturbed

    tries = []
    monkeypatch.setattr(fm, "run_case", lambda c, base: tries.append(c) or fm.Outcome(
        c, clean=len(tries) > 1, disturbed=len(tries) == 1))
    assert fm.run_judged(case, tmp_path).clean and len(tries) == 2


def test_a_group_whose_steps_all_skipped_is_named():
    """skipped_only: the verdict texts when every step of a group skipped (a checkout without a
    tool the lab looks for, such as inferno, runs none of the perf group's steps), else []."""
    assert fm.skipped_only(lines_of("skip")) == ["[lab  0.0s] s: skipped: no perf (kernel lockdown)"]
    assert fm.skipped_only(lines_of("other", "skip", "stop", "skip")) == [
        "[lab  1.0s] s: skipped: no perf (kernel lockdown)", "[lab  3.0s] s: skipped: no perf (kernel lockdown)"]
    for kinds in (("cmd", "ok", "skip"), ("skip", "cmd", "xfail"), ("cmd", "fail"), ("other", "stop"), ()):
        assert fm.skipped_only(lines_of(*kinds)) == [], kinds


def test_the_matrix_says_which_groups_ran_no_step(tmp_path, capsys, monkeypatch):
    """A group whose count run skipped every step is recorded with its skips, read back on resume,
    printed before the first case and in the summary, and written to --json: its cases tried only
    the skip. A matrix whose every case is recorded runs no lab."""
    lab = "lat_tcp"
    f, out = tmp_path / "state.jsonl", tmp_path / "m.json"
    st = fm.State(f, {lab: fm.code_hash(lab)})
    for g in fm.groups(lab):
        lines = lines_of("skip") if g == "perf" else lines_of("cmd", "ok")
        monkeypatch.setattr(fm, "group_lines", lambda *_a, lines=lines, **_k: lines)   # full mode skips too
        st.steps(lab, g, tmp_path)
    assert st.skipped == {(lab, "perf"): ["[lab  0.0s] s: skipped: no perf (kernel lockdown)"]}
    again = fm.State(f, {lab: fm.code_hash(lab)})
    assert again.skipped == st.skipped and again.ends == st.ends
    for c in fm.full_cases([lab], tmp_path, again):
        again.done(fm.Outcome(c, clean=True, rc=130))
    monkeypatch.setattr(fm, "run_judged", lambda *a, **k: (_ for _ in ()).throw(AssertionError("a case ran")))
    monkeypatch.setattr(fm, "_stoppable", lambda: None)     # the test process keeps its own signal handlers
    assert fm.main(["--labs", lab, "--full", "--state", str(f), "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    assert f"fault matrix: {lab} perf: no step ran in its count run, so its cases try the skip only: [lab  0.0s] s: skipped: no perf" in printed
    assert f"  no step ran in: {lab} perf (each tried at its skip only)" in printed
    import json
    assert json.loads(out.read_text())["no_step_ran"] == {f"{lab} perf": ["[lab  0.0s] s: skipped: no perf (kernel lockdown)"]}


def test_a_group_quick_mode_leaves_out_is_tried_in_full_mode(tmp_path, monkeypatch):
    """A group whose quick count run skipped every step but whose full run ran steps (lat_tcp's
    wakeup: full runs only) is recorded as full, read back so on resume, and its cases run the
    lab without --quick, under ids of their own; a group that skips in both keeps its skip."""
    lab = "lat_tcp"
    f = tmp_path / "state.jsonl"
    st = fm.State(f, {lab: fm.code_hash(lab)})
    asked = []

    def lines(_lab, g, _base, quick=True):
        asked.append((g, quick))
        if g == "wakeup":
            return lines_of("skip") if quick else lines_of("cmd", "ok", "cmd", "ok")
        return lines_of("skip") if g == "perf" else lines_of("cmd", "ok")
    monkeypatch.setattr(fm, "group_lines", lines)
    for g in ("wakeup", "perf", "free"):
        st.steps(lab, g, tmp_path)
    assert asked == [("wakeup", True), ("wakeup", False), ("perf", True), ("perf", False), ("free", True)]
    assert st.full == {(lab, "wakeup")} and set(st.skipped) == {(lab, "perf")}
    again = fm.State(f, {lab: fm.code_hash(lab)})
    assert again.full == st.full and again.ends == st.ends
    cases = fm.full_cases([lab], tmp_path, again, only_groups={"wakeup", "perf", "free"})
    assert {c.group for c in cases if c.full} == {"wakeup"}
    assert all(c.id.startswith(f"{lab}-wakeup-full-") for c in cases if c.full)
    seen = {}

    def fake_signal_at(argv, *_a, **_k):
        seen["argv"] = argv
        raise AssertionError("stop here")
    monkeypatch.setattr(fm, "signal_at", fake_signal_at)
    monkeypatch.setattr(fm, "wait_for_lock", lambda *a, **k: None)
    full_case = next(c for c in cases if c.full)
    fm.run_case(full_case, tmp_path, host=False)
    assert "--only" in seen["argv"] and "--quick" not in seen["argv"]
    fm.run_case(next(c for c in cases if not c.full), tmp_path, host=False)
    assert "--quick" in seen["argv"]


def test_a_run_active_while_the_host_is_read_disturbs_the_case(tmp_path, monkeypatch):
    """run_case: another lab run that began after wait_quiet puts its own audit rule into the
    "before" reading and has ended by the case's end, so the diff shows the rule gone. The case
    is disturbed (run_judged tries it again), not a leak of its own; with no run beside it,
    the same diff is a leak."""
    from labrun import Interrupted
    for others, disturbed in (([["other.1.2"], []], True), ([[], []], False)):
        readings = iter([{"audit": "-a never,task -F pid!=1"}, {"audit": "No rules"}])
        calls = iter(others)
        monkeypatch.setattr(fm, "wait_for_lock", lambda *a, **k: None)
        monkeypatch.setattr(fm, "wait_quiet", lambda *a, **k: None)
        monkeypatch.setattr(fm, "host_state", lambda *a, **k: next(readings))
        monkeypatch.setattr(fm, "other_runs", lambda *a, **k: next(calls))
        monkeypatch.setattr(fm, "leftovers", lambda *a, **k: [])
        monkeypatch.setattr(fm, "signal_at", lambda *a, **k: Interrupted(130, [], "x", 1, 0.1))
        o = fm.run_case(fm.Case("lat_tcp", "build", 1, "SIGINT"), tmp_path)
        assert not o.clean and o.problems and o.disturbed is disturbed, (others, o)


def _record(path, lab, ends_of, outcomes):
    """A state file: the steps of every group of ``lab`` (``ends_of(group)``), then one case line
    per (case, clean) of ``outcomes``, as State.add writes them."""
    state = fm.State(path, {lab: fm.code_hash(lab)})
    state.begin()
    for g in fm.groups(lab):
        state.ends[(lab, g)] = ends_of(g)
        state.add({"kind": "steps", "lab": lab, "group": g, "ends": ends_of(g)})
    for case, clean in outcomes:
        state.done(fm.Outcome(case, clean, rc=130, seconds=2.0, problems=[] if clean else ["left: a mount"]))
    return state


def test_status_says_complete_only_when_every_counted_case_of_every_group_is_done(tmp_path, capsys):
    lab, path = "fakelab", tmp_path / "state.jsonl"
    ends_of = lambda g: [2, 3]                                   # two steps per group: 8 cases
    every = [c for g in fm.groups(lab) for c in fm.step_cases(lab, g, ends_of(g))]
    _record(path, lab, ends_of, [(c, True) for c in every[:-1]])
    assert fm.print_status([lab], path) == 3                     # one case short
    out = capsys.readouterr().out
    assert f"{len(every) - 1} of {len(every)} cases done" in out and "COMPLETE" not in out
    assert f"kernel {os.uname().release}" in out                 # the run line says where
    fm.State(path, {lab: fm.code_hash(lab)}).done(fm.Outcome(every[-1], True))
    assert fm.print_status([lab], path) == 0
    assert "COMPLETE" in capsys.readouterr().out
    fm.State(path, {lab: fm.code_hash(lab)}).done(fm.Outcome(every[0], False, problems=["left: a mount"]))
    assert fm.print_status([lab], path) == 1                     # the newest outcome of a case counts
    assert f"NOT CLEAN: {every[0].id}" in capsys.readouterr().out


def test_status_of_another_code_is_nothing_done(tmp_path, capsys):
    lab, path = "fakelab", tmp_path / "state.jsonl"
    _record(path, lab, lambda g: [1], [(c, True) for g in fm.groups(lab) for c in fm.step_cases(lab, g, [1])])
    text = path.read_text().replace(fm.code_hash(lab), "0" * 16)
    path.write_text(text)
    st = fm.State(path, {lab: fm.code_hash(lab)}).status(lab)
    assert (st["counted"], st["done"], st["cases"]) == (0, 0, 0)
    assert fm.print_status([lab], path) == 3


def test_the_committed_record_reads_as_a_state_file():
    """tests/fault_matrix_record.jsonl: every line JSON of a kind State knows, every case line an
    Outcome, every run line with its host; a line cut short by a kill is the only exception
    State tolerates, and the committed file has none."""
    if not fm.RECORD.exists():
        return
    kinds = {"run", "count", "steps", "case"}
    for n, line in enumerate(fm.RECORD.read_text().splitlines(), 1):
        d = json.loads(line)
        assert d.get("kind") in kinds, f"line {n}: kind {d.get('kind')!r}"
        if d["kind"] == "case":
            o = dict(d["outcome"])
            fm.Outcome(fm.Case(**o.pop("case")), **o)
        if d["kind"] == "run":
            assert d["kernel"] and d["machine"] and d["boot_id"], f"line {n}: a run line without its host"
    for lab in fm.labs():
        fm.State(fm.RECORD, {lab: fm.code_hash(lab)}).status(lab)


def test_a_stop_while_a_group_is_counted_ends_like_a_stop_between_cases(tmp_path, monkeypatch, capsys):
    """Ctrl-C (or SIGTERM) during a count run: run_lab stops that run, and the matrix reports and
    exits 130 as it does between cases, not with a traceback."""
    monkeypatch.setattr(fm, "_stoppable", lambda: None)

    def counting(*args, **kw):
        raise KeyboardInterrupt("SIGTERM")
    monkeypatch.setattr(fm, "full_cases", counting)
    state = tmp_path / "state.jsonl"
    assert fm.main(["--labs", "fakelab", "--full", "--state", str(state)]) == 130
    out = capsys.readouterr().out
    assert "fault matrix: stopped by SIGTERM after 0 cases" in out and "run again to resume" in out
    assert [json.loads(line)["kind"] for line in state.read_text().splitlines()] == ["run"]


def test_another_runs_audit_rule_makes_a_case_disturbed():
    """A lab run's task,never rule (labkit.run.auditctx.rule_for) loaded before a case, or one
    naming another supervisor after it, marks the case disturbed; the case's own rule left
    behind does not (the state diff reports it as the case's leak)."""
    from labkit.run.auditctx import rule_for
    quiet = {"audit": ("0", "0", "No rules")}
    theirs = {"audit": ("0", "0", rule_for(9092))}
    ours = {"audit": ("0", "0", rule_for(4242))}
    both = {"audit": ("0", "0", rule_for(4242) + "\n" + rule_for(9092))}
    assert fm.run_rule_pids(both) == {4242, 9092} and fm.run_rule_pids({}) == set()
    assert not fm.foreign_audit_rule(quiet, quiet, 4242)
    assert fm.foreign_audit_rule(theirs, quiet, 4242)        # gone during the case
    assert fm.foreign_audit_rule(quiet, theirs, 4242)        # came during the case
    assert not fm.foreign_audit_rule(quiet, ours, 4242)      # the case's own leak
    assert fm.foreign_audit_rule(quiet, both, 4242)


def test_the_code_hash_reads_code_not_comments():
    """A whole-line comment or a blank line of a shell or Python file leaves a lab's matrix
    where it is; a changed command, a comment's text in any other file, and claims.toml's
    thresholds do not."""
    sh = b"#!/bin/bash\n# groups\nlab_run a.b -- true\n"
    assert fm.hashed_bytes("labs/x/run.sh", sh) == fm.hashed_bytes(
        "labs/x/run.sh", b"#!/bin/bash\n# the groups, said otherwise\n\n  # more\nlab_run a.b -- true\n")
    assert fm.hashed_bytes("labs/x/run.sh", sh) != fm.hashed_bytes("labs/x/run.sh", sh.replace(b"true", b"false"))
    py = b"x = 1  # one\n"
    assert fm.hashed_bytes("labkit/a.py", py) != fm.hashed_bytes("labkit/a.py", b"x = 1  # two\n")
    assert fm.hashed_bytes("labs/x/jobs.fio", b"# a\n[job]\n") != fm.hashed_bytes("labs/x/jobs.fio", b"# b\n[job]\n")



def test_the_full_matrix_runs_one_repetition_per_step_and_the_sampled_every_one(tmp_path, monkeypatch):
    """``--full`` (counts and cases) runs with PCB_ONE_REPETITION=1, which labs/lib/case.sh reads;
    the sampled matrix without it; and a record made under another definition of the full
    matrix (another :data:`fault_matrix.DESIGN`) is not this one's."""
    seen = []
    monkeypatch.setenv("PCB_ONE_REPETITION", "0")      # restored at the end: main sets it
    monkeypatch.delenv("PCB_ONE_REPETITION")
    monkeypatch.setattr(fm, "full_cases", lambda *a, **k: seen.append(os.environ.get("PCB_ONE_REPETITION")) or [])
    monkeypatch.setattr(fm, "sampled_cases", lambda *a, **k: seen.append(os.environ.get("PCB_ONE_REPETITION")) or [])
    assert fm.main(["--labs", "fakelab"]) == 0
    assert fm.main(["--labs", "fakelab", "--full"]) == 0
    assert os.environ.get("PCB_ONE_REPETITION") == "1"
    assert seen == [None, "1"] and fm.ONE_REPETITION == {"PCB_ONE_REPETITION": "1"}
    assert "PCB_ONE_REPETITION" in (fm.ROOT / "labs" / "lib" / "case.sh").read_text()
    before = fm.code_hash("fakelab")
    monkeypatch.setattr(fm, "DESIGN", b"every step in every repetition x every signal")
    assert fm.code_hash("fakelab") != before


def test_a_stop_during_a_case_waits_for_its_end_and_record(tmp_path, monkeypatch, capsys):
    """SIGTERM while a case runs (a SIGKILL case between the kill and its --recover, say) does not
    cut the case short: it is run to its end and recorded, then the matrix stops with 130."""
    monkeypatch.setattr(fm, "_stoppable", lambda: None)
    cases = [fm.Case("fakelab", "g", 1, "SIGKILL", True), fm.Case("fakelab", "g", 2, "SIGKILL", True)]
    monkeypatch.setattr(fm, "full_cases", lambda *a, **k: list(cases))
    ran = []

    def judged(case, base):
        fm._interrupt(signal.SIGTERM, None)   # the signal arrives mid-case: no exception here
        ran.append(case.id)
        return fm.Outcome(case, clean=True, rc=-9)
    monkeypatch.setattr(fm, "run_judged", judged)
    monkeypatch.setattr(fm, "_STOP_ASKED", None)
    state = tmp_path / "state.jsonl"
    assert fm.main(["--labs", "fakelab", "--full", "--state", str(state)]) == 130
    assert ran == [cases[0].id]
    kinds = [json.loads(line)["kind"] for line in state.read_text().splitlines()]
    assert kinds.count("run") == 1 and len(kinds) == 2          # the case that ran is in the record
    out = capsys.readouterr().out
    assert "stopping after the running case" in out and "stopped by SIGTERM after 1 cases" in out


def test_the_work_directory_is_kept_while_a_mount_is_left_in_it(tmp_path, capsys):
    """Deleting through a leftover mount would remove the files its loop device uses and what
    --recover needs: the directory stays and is named; without a mount it goes."""
    plain = tmp_path / "plain"
    (plain / "a").mkdir(parents=True)
    fm.remove_workdir(plain)
    assert not plain.exists()
    if os.geteuid() != 0:
        return   # the mount half needs root (CI and the matrix run as root)
    kept = tmp_path / "kept"
    (kept / "case" / "mnt").mkdir(parents=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "pcb-test", str(kept / "case" / "mnt")], check=True)
    try:
        (kept / "case" / "mnt" / "disk.img").write_bytes(b"x")
        assert fm.mounts_under(kept) == [str(kept / "case" / "mnt")]
        fm.remove_workdir(kept)
        assert (kept / "case" / "mnt" / "disk.img").exists()
        assert f"{kept} kept: mounts left in it" in capsys.readouterr().out
    finally:
        subprocess.run(["umount", str(kept / "case" / "mnt")], check=True)
