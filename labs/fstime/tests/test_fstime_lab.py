"""The fstime lab run for real: quick mode end to end, bad usage, and Ctrl-C or TERM in the
middle of a step (a mounted image, an audited run, a perf recording) leaving nothing behind:
no mount, no loop device, no audit rule, no auditd, no changed audit flag, no process."""

from __future__ import annotations

import json
import re
import statistics
import signal
import subprocess
import time
from pathlib import Path

import pytest

from labkit.stats import claims as claims_mod
from labkit import model
from labkit.parsers.auditctl import audit_config, audit_rules, audit_status
from labrun import (ONE_REPETITION, check_quick_result, interrupt_at, is_root, left_out_repetition, loop_devices_backed_by,
                    mounts_under, processes_matching, run_lab)

pytestmark = pytest.mark.lab     # a real quick run of the fstime lab

ROOT = Path(__file__).resolve().parents[3]
TARGETS = ["disk", "tmpfs", "ext4-on-tmpfs", "xfs-on-tmpfs", "xfs-on-disk"]


def audit_state() -> tuple[dict, list[str]] | None:
    """(configuration part of ``auditctl -s``, ``auditctl -l`` rules), or None without auditctl."""
    try:
        s = subprocess.run(["auditctl", "-s"], capture_output=True, text=True, timeout=10)
        r = subprocess.run(["auditctl", "-l"], capture_output=True, text=True, timeout=10)
    except FileNotFoundError:
        return None
    if s.returncode != 0 or r.returncode != 0:
        return None
    return audit_config(audit_status(s.stdout)), audit_rules(r.stdout)


def auditd_pids() -> list[str]:
    out = subprocess.run(["pgrep", "-x", "auditd"], capture_output=True, text=True).stdout
    return out.split()


def quick_run(tmp_path_factory, *args: str, env: dict | None = None) -> tuple:
    """One real quick run with ``args`` (host label test-quick, a folder of its own); returns
    (process, host folder, wall seconds, audit state before, auditd PIDs before)."""
    out = tmp_path_factory.mktemp("hosts") / "test-quick"
    before, daemons = audit_state(), auditd_pids()
    t0 = time.monotonic()
    proc = run_lab("fstime", "--quick", *args, "--out", str(out), "--host", "test-quick", timeout=300, env=env)
    return proc, out, time.monotonic() - t0, before, daemons


@pytest.fixture(scope="module")
def quick(tmp_path_factory):
    """One real quick run (:func:`quick_run`)."""
    return quick_run(tmp_path_factory)


@pytest.fixture(scope="module")
def audit_run(tmp_path_factory, quick):
    """The audit group, which a quick run leaves out (lab.toml quick_leaves_out), run on its own
    after the quick run: ``--quick --only audit``, with one repetition of each step
    (``PCB_ONE_REPETITION=1``, as the fault matrix runs: every audit state is set up, measured
    and undone once; the tests here check that, not the verdicts); the same tuple as
    :func:`quick`."""
    return quick_run(tmp_path_factory, "--only", "audit", env=ONE_REPETITION)


@pytest.fixture(scope="module")
def extras(tmp_path_factory, quick):
    """The groups a quick run leaves out because no claim reads them (strace -c's table, dd), run
    on their own after the quick run: ``--quick --only strace,dd``; the same tuple as
    :func:`quick`."""
    return quick_run(tmp_path_factory, "--only", "strace,dd")


@pytest.fixture(params=["quick", "extras"])
def each_run(request):
    """The quick run, then the run of the groups it leaves out but audit (:func:`extras`)."""
    return request.getfixturevalue(request.param)


def result(quick) -> dict:
    return model.load(quick[1] / "fstime.json")


def test_quick_run_leaves_out_what_no_claim_reads(quick):
    """The audit group (the longest) and two groups no claim reads, strace and dd, are left
    out, as lab.toml says, and none of their steps ran; the flame graphs are drawn."""
    r = result(quick)
    gone = {"audit", "strace", "dd"}
    assert set(r["run"]["left_out"]) == gone
    assert not [s["name"] for s in r["steps"] if s["group"] in gone]
    assert any(s["group"] == "perf" for s in r["steps"])


def test_extras_run_alone(extras):
    proc, _, seconds, _, _ = extras
    assert proc.returncode == 0, proc.stderr[-3000:]
    r = result(extras)
    check_quick_result(r, seconds)
    assert not r["run"].get("left_out")
    assert {s["group"] for s in r["steps"]} >= {"strace", "dd"}
    assert any(s["group"] == "dd" and s["status"] == "ok" for s in r["steps"])


def test_audit_group_runs_alone(audit_run):
    proc, out, seconds, _, _ = audit_run
    assert proc.returncode == 0, proc.stderr[-3000:]
    r = result(audit_run)
    assert "audit" not in r["run"].get("left_out", {})
    verdicts = {v["id"]: v["verdict"] for v in r["claims"]}
    assert all(verdicts[c] != "not applicable" for c in ("audit-costs-copy", "one-rule-costs-more", "task-never-suppresses"))


def test_quick_run_succeeds_within_its_budget(quick):
    proc, out, seconds, _, _ = quick
    assert proc.returncode == 0, proc.stderr[-3000:]
    check_quick_result(result(quick), seconds)


def test_raw_outputs_and_commands_kept(each_run):
    _, out, _, _, _ = each_run
    for step in result(each_run)["steps"]:
        if step["status"] == "ok" and not step["name"].endswith(".script"):
            cmd = out / "fstime" / "raw" / f"{step['name']}.cmd"
            assert cmd.read_text().strip() == step["command"]


@pytest.mark.skipif(not is_root(), reason="tmpfs and the images need root")
def test_five_filesystems_set_up(quick):
    _, out, _, _, _ = quick
    rows = [line.split("\t") for line in (out / "fstime" / "targets.tsv").read_text().splitlines()]
    assert [r[0] for r in rows] == TARGETS
    fs = {r[0]: r[2] for r in rows}
    assert fs["tmpfs"] == "tmpfs"
    assert fs["ext4-on-tmpfs"] == "ext4"
    assert fs["xfs-on-tmpfs"] == fs["xfs-on-disk"] == "xfs"
    copies = {m["case"]["target"] for m in result(quick)["measurements"]
              if m["metric"] == "score" and m["case"]["experiment"] == "copy" and m["case"]["phase"] == "copy"}
    # quick mode copies on the three filesystems the claims compare, and says why not on the others
    assert copies == {"tmpfs", "xfs-on-tmpfs", "xfs-on-disk"}
    skipped = {s["case"]["target"] for s in result(quick)["steps"]
               if s["status"] == "skipped" and s.get("case", {}).get("experiment") == "copy"}
    assert skipped == set(TARGETS) - copies


def test_scores_are_what_fstime_printed(quick):
    """Each phase's sample is exactly the score fstime printed (nothing retyped or rounded)."""
    _, out, _, _, _ = quick
    r = result(quick)
    step = next(s for s in r["steps"] if s.get("case", {}).get("experiment") == "copy" and s["status"] == "ok")
    target = step["case"]["target"]
    printed = [json.loads(line) for line in (out / "fstime" / "raw" / f"{step['name']}.out").read_text().splitlines()]
    assert [p["phase"] for p in printed] == ["write", "read", "copy"]
    for p in printed:
        m = next(m for m in r["measurements"] if m["metric"] == "score" and m["case"]["experiment"] == "copy"
                 and m["case"]["target"] == target and m["case"]["phase"] == p["phase"])
        assert m["samples"][step["case"]["rep"] - 1] == p["score_kibps"]
        assert m["case"]["bufsize"] == p["bufsize"] == 1024 and m["case"]["max_blocks"] == 2000


def test_every_measured_step_carries_its_case(each_run):
    """record.py reads each step's case (lab_run --case): every step a measurement cites has one,
    and the measurement's case agrees with it on every key they share."""
    r = result(each_run)
    steps = {s["name"]: s for s in r["steps"]}
    cited = [m for m in r["measurements"] if m.get("step")]
    assert cited
    for m in cited:
        case = steps[m["step"]].get("case")
        assert case, m["step"]
        assert all(m["case"][k] == v for k, v in case.items() if k in m["case"]), (m["case"], case)


def test_dd_rate_recomputed_from_its_summary(extras):
    _, out, _, _, _ = extras
    r = result(extras)
    m = next(m for m in r["measurements"] if m["metric"] == "score" and m["case"]["tool"] == "dd")
    err = (out / "fstime" / "raw" / f"{m['step']}.err").read_text()
    summary = re.search(r"^(\d+) bytes .* copied, ([\d.]+) s,", err, re.M)
    assert summary, err
    assert m["samples"][0] == pytest.approx(int(summary.group(1)) / 1024 / float(summary.group(2)), rel=1e-9)


def test_htop_line_and_cpu_shares(quick):
    _, out, _, _, _ = quick
    r = result(quick)
    line = (out / "fstime" / "raw" / "cpu.htop.1.out").read_text()
    assert re.fullmatch(r"over [\d.]+ s: CPU0 usr \d+% sys \d+%.* idle \d+%.* \|\| fstime \(pid \d+, state \w\): "
                        r"usr \d+% sys \d+% of one CPU\n", line), line
    samples = {(m["case"]["who"], m["case"]["mode"]): m["samples"] for m in r["measurements"] if m["metric"] == "cpu_share"}
    shares = {k: statistics.median(v) for k, v in samples.items()}
    cpus = {who for who, _ in shares if who.startswith("cpu")}
    for cpu in cpus:   # each repetition's shares of one CPU add up to one
        for i in range(len(samples[(cpu, "user")])):
            assert sum(samples[(cpu, mode)][i] for mode in ("user", "system", "iowait", "steal", "idle")) == pytest.approx(1.0)
    # fstime was inside its copy phase: it used CPU time in the window.
    assert shares[("fstime", "user")] + shares[("fstime", "system")] > 0.3
    # the device under the filesystem in the same windows: a rate per direction and repetition,
    # or the step skipped with its reason (a filesystem on no block device)
    io = {m["case"]["direction"]: m for m in r["measurements"] if m["metric"] == "device_io"}
    skipped = [s for s in r["steps"] if s["name"] == "cpu.io" and s["status"] == "skipped"]
    assert skipped or (set(io) == {"read", "write"} and all(len(m["samples"]) == len(samples[("fstime", "user")])
                                                         and min(m["samples"]) >= 0 for m in io.values())), (io, skipped)


@pytest.mark.skipif(not is_root(), reason="perf record -p of another process needs privileges")
def test_flame_graphs_and_diff(quick):
    _, out, _, _, _ = quick
    r = result(quick)
    kinds = {(a["kind"], a["case"].get("target") or a["case"].get("drawn_on")) for a in r["artifacts"]}
    assert {("flamegraph", "tmpfs"), ("flamegraph", "xfs-on-tmpfs"), ("diff_flamegraph", None),
            ("diff_flamegraph", "tmpfs")} <= kinds
    for a in r["artifacts"]:
        if a["kind"].endswith("flamegraph"):
            assert (out / a["path"]).read_text().lstrip().startswith("<?xml")
    xfs = (out / "fstime" / "flame-xfs-on-tmpfs.folded").read_text()
    assert "xfs_file_buffered_write" in xfs
    # drawn on tmpfs's stacks, the diff has tmpfs's own write path, with no xfs samples under it
    negated = (out / "fstime" / "flame-diff-negated.folded").read_text()
    shmem = [ln for ln in negated.splitlines() if "shmem_file_write_iter" in ln]
    assert shmem and all(ln.split()[-2] == "0" for ln in shmem), shmem[:3]
    assert "shmem_file_write_iter" in (out / "fstime" / "flame-tmpfs.folded").read_text()


def test_strace_counts_read_and_write(extras):
    r = result(extras)
    calls = {m["case"]["syscall"]: m["median"] for m in r["measurements"] if m["metric"] == "syscalls"}
    assert calls["read"] > 1000 and calls["write"] > 1000
    # The copy is one read and one write per buffer (plus a read at each end of the file).
    assert abs(calls["read"] - calls["write"]) < 0.01 * calls["read"] + 10


@pytest.mark.skipif(not is_root(), reason="audit needs root")
def test_audit_state_restored_and_rules_fired(audit_run):
    _, out, _, before, daemons = audit_run
    r = result(audit_run)
    audit_steps = {s["name"]: s for s in r["steps"] if s["group"] == "audit"}
    # the later repetitions are skipped by design (audit_run: one repetition a step); any other
    # skip means this host cannot run the audit states
    host_skips = [s for s in audit_steps.values() if s["status"] == "skipped" and not left_out_repetition(s)]
    if host_skips:
        pytest.skip("audit steps skipped here: " + "; ".join(s["reason"] for s in host_skips if s["reason"]))
    assert any(s["status"] == "ok" for s in audit_steps.values())
    raw = out / "fstime" / "raw"
    assert audit_config(audit_status((raw / "audit.after.status.out").read_text())) == \
        audit_config(audit_status((raw / "audit.before.status.out").read_text()))
    assert audit_rules((raw / "audit.after.rules.out").read_text()) == audit_rules((raw / "audit.before.rules.out").read_text())
    assert audit_state() == before, "the audit configuration differs from before the run"
    assert auditd_pids() == daemons, "an auditd started by the lab is still running"
    # auditd ran, registered with the kernel, and the every-syscall rule wrote records.
    during = audit_status((raw / "audit.auditd.status.out").read_text())
    assert during["enabled"] == 1 and during["pid"] != 0
    log = next(m for m in r["measurements"] if m["metric"] == "audit_log")
    assert log["median"] > 100_000, "auditing every system call of fstime wrote almost nothing"
    states = {m["case"]["audit"] for m in r["measurements"] if m["metric"] == "score" and m["case"]["experiment"] == "audit"}
    assert states == {"off", "norules", "nomatch", "every"}
    pairs = {m["case"]["audit"] for m in r["measurements"]
             if m["metric"] == "pair_time" and m["case"]["experiment"] in ("audit", "suppress")}
    assert pairs == {"off", "norules", "nomatch", "every", "contexts", "task-never"}
    # the audited states ran without the task,never rules, which are back afterwards
    assert audit_rules((raw / "audit.after.rules.out").read_text()) == audit_rules((raw / "audit.before.rules.out").read_text())
    if r["host"]["audit_context"] == "suppressed with task,never":
        assert "-a never,task" in (raw / "audit.before.rules.out").read_text()


def test_every_claim_has_a_verdict_with_evidence(quick):
    r = result(quick)
    spec = claims_mod.load(ROOT / "labs" / "fstime" / "claims.toml")
    assert [c["id"] for c in r["claims"]] == [c["id"] for c in spec]
    assert all(c["evidence"] and c["verdict"] in claims_mod.VERDICTS for c in r["claims"])


def test_probe_and_stacks_agree_on_audit_before_the_run(quick):
    """host.audit_context (how the run kept its processes' audit contexts: never enabled,
    suppressed with task,never, or present) and the audit frames on the copy loop's stacks (the
    perf step, before the audit group) tell the same story: frames exactly where contexts were
    present."""
    r = result(quick)
    _, out, _, _, _ = quick
    ctx = r["host"].get("audit_context")
    step = next((s for s in r["steps"] if s["name"] == "perf.tmpfs.audit"), None)
    if ctx is None or step is None or step["status"] != "ok":
        pytest.skip(f"cannot compare here: audit context {ctx}, step {step and step['status']}")
    ever = r["host"].get("audit_ever_enabled")
    if ctx.startswith("present") and ever is None:
        pytest.skip(f"cannot compare here: audit context {ctx}, the probe could not tell if audit was ever enabled")
    present = ctx.startswith("present") and bool(ever)
    assert (step["stdout_bytes"] > 0) == present, (ctx, (out / "fstime" / "raw" / "perf.tmpfs.audit.out").read_text())


def assert_nothing_left(scratch: str, audit_before, daemons_before) -> None:
    assert scratch and not Path(scratch).exists(), "scratch directory left behind"
    assert mounts_under(scratch) == [], "a mount survived"
    assert loop_devices_backed_by(scratch) == [], "a loop device survived"
    time.sleep(0.3)
    assert processes_matching(scratch) == [], "a process of the lab survived"
    assert audit_state() == audit_before, "the audit configuration was not restored"
    assert auditd_pids() == daemons_before, "an auditd started by the lab survived"


@pytest.mark.skipif(not is_root(), reason="mounts and loop devices need root")
def test_sigint_during_mounted_image_step_leaves_nothing(tmp_path):
    audit_before, daemons = audit_state(), auditd_pids()
    rc, err, scratch = interrupt_at("fstime", "copy.xfs-on-tmpfs.b1024.1: ", "--only", "copy", "--quick",
                                    "--out", str(tmp_path), sig=signal.SIGINT, after=1.0)
    assert rc == 130, err[-2000:]
    assert "interrupted by SIGINT" in err and "cleanup: unmount" in err and "cleanup: detach loop" in err
    assert_nothing_left(scratch, audit_before, daemons)
    assert not (tmp_path / "fstime.json").exists() and not (tmp_path / ".fstime.partial").exists()


@pytest.mark.skipif(not is_root(), reason="audit needs root")
def test_sigint_during_audited_run_restores_audit(tmp_path):
    audit_before, daemons = audit_state(), auditd_pids()
    if audit_before is None:
        pytest.skip("auditctl not usable here")
    rc, err, scratch = interrupt_at("fstime", "audit.every.1: sh ", "--only", "audit", "--quick",
                                    "--out", str(tmp_path), sig=signal.SIGINT, after=1.5, timeout=180)
    assert rc == 130, err[-2000:]
    assert "cleanup: stop audit.auditd" in err and "cleanup: restore the audit enabled flag" in err
    assert_nothing_left(scratch, audit_before, daemons)


@pytest.mark.skipif(not is_root(), reason="perf -p and the tmpfs need root")
def test_sigterm_during_perf_record_leaves_nothing(tmp_path):
    audit_before, daemons = audit_state(), auditd_pids()
    rc, err, scratch = interrupt_at("fstime", "perf.tmpfs.record: perf record", "--only", "perf", "--quick",
                                    "--out", str(tmp_path), sig=signal.SIGTERM, after=0.3)
    assert rc == 143, err[-2000:]
    assert "cleanup: stop perf.tmpfs.fstime" in err
    assert_nothing_left(scratch, audit_before, daemons)
