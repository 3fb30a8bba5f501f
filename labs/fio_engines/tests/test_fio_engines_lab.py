"""The fio_engines lab run for real: quick mode end to end, bad usage, the --device
refusals (no device is ever opened for writing), and Ctrl-C / TERM mid-job leaving no
fio, perf or iostat process and no scratch directory behind."""

from __future__ import annotations

import json
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from labkit.stats import claims
from labkit import model
from labkit import record as record_mod
from labkit import original as original_mod
from labkit.parsers.perf import perf_stat_csv
from labrun import (ONE_REPETITION, check_quick_result, interrupt_at, is_root, left_out_repetition, processes_matching,
                    repetitions, run_lab)
import refhost

pytestmark = pytest.mark.lab     # real quick runs of the fio_engines lab

LAB = "fio_engines"
ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("fio_engines_out")
    t0 = time.time()
    proc = run_lab(LAB, "--quick", "--out", str(out), "--host", "test-quick", timeout=600)
    return proc, out, time.time() - t0


@pytest.fixture(scope="module")
def layout_run(tmp_path_factory, quick_run):
    """The layout group, which a quick run leaves out (lab.toml quick_leaves_out), on its own:
    ``--quick --only layout``, after the quick run, with one repetition of each step
    (``PCB_ONE_REPETITION=1``, as the fault matrix runs: the later ones are recorded as skipped,
    so the plan of repetitions is still in the result); the same tuple as :func:`quick_run`."""
    out = tmp_path_factory.mktemp("fio_engines_layout")
    t0 = time.time()
    proc = run_lab(LAB, "--quick", "--only", "layout", "--out", str(out), "--host", "test-quick", timeout=600,
                   env=ONE_REPETITION)
    return proc, out, time.time() - t0


def result_of(quick_run) -> dict:
    proc, out, _ = quick_run
    assert proc.returncode == 0, proc.stderr[-3000:]
    return model.load(out / f"{LAB}.json")


def test_quick_run_succeeds_and_validates(quick_run):
    proc, out, seconds = quick_run
    result = result_of(quick_run)
    check_quick_result(result, seconds)
    groups = {s["group"] for s in result["steps"] if s["status"] == "ok"}
    assert {"setup", "original", "engines", "strace"} <= groups and "layout" not in groups
    assert "layout" in result["run"]["left_out"]
    # no claim reads these groups: quick mode leaves them out and says so
    for name in ("buffered", "blocksize", "numjobs", "profile"):
        skip = next(s for s in result["steps"] if s["name"] == name)
        assert skip["status"] == "skipped" and "quick mode" in skip["reason"], skip


def test_every_measurement_comes_from_a_step_with_its_case(quick_run):
    """Each measurement's step carries its case as data (lab_run --case), and the measurement's
    case is that case less ``tool`` and ``rep``, plus the scratch filesystem (and, for some
    metrics, one key of the metric's own: phase, process, syscall, when)."""
    result = result_of(quick_run)
    steps = {s["name"]: s for s in result["steps"]}
    own = {"phase", "process", "syscall", "fs", "traced", "scheduler"}
    for m in result["measurements"]:
        step = steps[m["step"]]
        assert step.get("case"), step["name"]
        given = {k: v for k, v in step["case"].items() if k not in ("tool", "rep")}
        if step["case"]["tool"] == "sync":   # the sync's counts belong to the job before it
            assert m["case"]["phase"] in ("sync", "job+sync")
        for k, v in given.items():
            if k in m["case"]:
                assert m["case"][k] == v, (m["metric"], m["case"], step["case"])
        assert set(m["case"]) - set(given) <= own | {"when"}, (m["metric"], m["case"], step["case"])


def test_record_reads_cases_not_step_names(quick_run, tmp_path):
    """Every step renamed to an opaque name (its raw files alike): record.py gives the same
    measurements, so no measurement depends on how a step is named."""
    _, out, _ = quick_run
    run = tmp_path / LAB
    shutil.copytree(out / LAB, run)
    rows = [line.split("\t") for line in (run / "steps.tsv").read_text().splitlines() if line.strip()]
    new = {row[0]: f"s{i:04d}" for i, row in enumerate(rows)}
    by_length = sorted(new, key=len, reverse=True)
    for f in sorted((run / "raw").iterdir()):
        # raw/<step>.<ext>, and raw/<step>.<tool>.<ext> for what ran beside a job (perf, iostat)
        old = next((n for n in by_length if f.name.startswith(n + ".")), None)
        if old:
            f.rename(f.with_name(new[old] + f.name[len(old):]))
    (run / "steps.tsv").write_text("".join("\t".join([new[r[0]], *r[1:]]) + "\n" for r in rows))
    renamed = record_mod.assemble(LAB, ROOT / "labs" / LAB, run, start=time.time(), quick=True, tools=[], command="test")
    key = lambda m: (m["metric"], json.dumps(m["case"], sort_keys=True), tuple(m["samples"]))  # noqa: E731
    assert sorted(map(key, renamed["measurements"])) == sorted(map(key, result_of(quick_run)["measurements"]))


def test_the_cases_the_claims_read_run_as_often_as_in_full_runs_interleaved(quick_run, layout_run):
    """Quick mode runs each case a claim reads as often as a full run (8 passes of the original
    and layout groups, 5 of the engines group), one pass of every case after another (rep 1 of
    every case before rep 2 of any). The layout group, which a quick run leaves out, runs on its
    own with one repetition a step (:func:`layout_run`): each case a layout claim reads has its
    first repetition run and repetitions 2 to 8 recorded as skipped for that reason."""
    result = result_of(quick_run)
    layout = result_of(layout_run)
    steps = {s["name"]: s for s in layout["steps"]}
    spec = claims.load(ROOT / "labs" / LAB / "claims.toml")
    for c in spec:
        if c.get("group") == "layout":
            ms = [m for side in ("a", "b", "where") if side in c for m in claims.select(layout, c["metric"], c[side])]
            assert ms, c["id"]
            for m in ms:
                reps = repetitions(layout, steps[m["step"]])
                assert sorted(reps) == list(range(1, 9)), (c["id"], sorted(reps))
                assert reps[1]["status"] == "ok" and m["n"] == 1, (c["id"], m["n"])
                assert all(left_out_repetition(reps[r]) for r in range(2, 9)), c["id"]
            continue
        for side in [k for k in ("a", "b", "where") if k in c]:
            for m in claims.select(result, c["metric"], c[side]):
                want = 5 if m["case"].get("experiment") == "engines" else 8
                assert m["n"] == want, (c["id"], m["case"], m["n"])
    order = [s for s in result["steps"] if s["status"] == "ok" and (s.get("case") or {}).get("tool") == "fio"
             and s["case"]["experiment"] == "original"]
    reps = [s["case"]["rep"] for s in order]
    assert reps == sorted(reps) and reps[0] == 1 and reps[-1] == 8


def test_queue_limits_batched_and_flushed_jobs_are_recorded(quick_run):
    """The setup step reads the target disk's scheduler and queue limits (when the scratch
    directory has a disk); the original group runs libaio at iodepth 32 with batched submission
    beside fio's default, and buffered against direct writes with end_fsync=1, each as often as
    the original's other jobs."""
    result = result_of(quick_run)
    step = next(s for s in result["steps"] if s["name"] == "target.queue")
    if step["status"] == "ok":
        for metric in ("max_sectors_kb", "max_segments", "nr_requests"):
            (m,) = [m for m in result["measurements"] if m["metric"] == metric]
            assert m["case"]["scheduler"] and m["case"]["disk"] and m["samples"][0] > 0, m
    for batch in (1, 32):
        (m,) = claims.select(result, "bios_per_request", {"experiment": "original", "engine": "libaio", "iodepth": 32,
                                                          "batch": batch})
        assert m["n"] == 8
    for io in ("buffered", "direct"):
        (m,) = claims.select(result, "iops", {"experiment": "original flush", "io": io, "end_fsync": 1})
        assert m["n"] == 8


def test_every_job_writes_only_in_the_scratch_dir(quick_run):
    _, out, _ = quick_run
    result = result_of(quick_run)
    target = (out / LAB / "target.txt").read_text()
    scratch = re.search(r"^target=(.*)/data\.dat$", target, re.M).group(1)
    assert Path(scratch).name.split(".")[0].endswith("fio_engines"), scratch  # lab.sh's fresh scratch dir
    for step in result["steps"]:
        for path in re.findall(r"FIO_FILE=(\S+)", step["command"] or ""):
            assert path.startswith(scratch + "/"), step["command"]
    assert not Path(scratch).exists(), "scratch directory left behind"


def test_every_layout_job_gets_a_new_file(layout_run):
    """Each layout job runs on a file made new for it (the written file too): one file kept for
    a whole run would carry one placement on the disk into every repetition."""
    from test_fio_engines_claims import layout_file_problems
    result = result_of(layout_run)
    assert "layout" not in result["run"].get("left_out", {})
    assert layout_file_problems(result) == []


def test_measurements_are_fios_own_numbers(quick_run):
    """The IOPS in the result are exactly the iops of fio's JSON report, and the counts are perf's."""
    _, out, _ = quick_run
    result = result_of(quick_run)
    raw = out / LAB / "raw"
    checked = 0
    for m in result["measurements"]:
        if m["metric"] != "iops" or m["case"].get("experiment") not in ("engines", "numjobs"):
            continue
        step = m["step"]
        text = (raw / f"{step}.out").read_text()
        start = 0 if text.startswith("{") else text.index("\n{") + 1  # after fio's notes
        report = json.loads(text[start:])
        rw = "read" if "read" in m["case"]["rw"] else "write"
        assert m["samples"][0] == report["jobs"][0][rw]["iops"]
        checked += 1
    assert checked >= 2
    rq = next(m for m in result["measurements"] if m["metric"] == "rq_complete"
              and m["case"].get("experiment") == "engines" and m["case"].get("phase") == "job")
    perf = perf_stat_csv((raw / f"{rq['step']}.perf").read_text())
    assert rq["samples"][0] == perf["block:block_rq_complete"]["value"]


def test_psync_iodepth_note_is_fios(quick_run):
    """fio itself says that psync caps the queue depth at 1 (the note before its JSON)."""
    _, out, _ = quick_run
    text = (out / LAB / "raw" / "engines.psync.randread.qd32.r1.out").read_text()
    assert "capped at 1" in text.split("{", 1)[0]


def test_direct_4k_random_reads_are_one_request_each(quick_run):
    result = result_of(quick_run)
    ms = [m for m in result["measurements"] if m["metric"] == "requests_per_io"
          and m["case"].get("experiment") == "engines" and m["case"]["rw"] == "randread"]
    if not ms:
        pytest.skip("perf could not count block tracepoints on this host")
    for m in ms:
        assert 0.9 < m["median"] < 1.2, m


def test_every_claim_has_a_verdict_with_evidence(quick_run):
    result = result_of(quick_run)
    spec = claims.load(ROOT / "labs" / LAB / "claims.toml")
    assert {c["id"] for c in result["claims"]} == {c["id"] for c in spec}
    assert all(c["evidence"] for c in result["claims"])
    # quick mode runs the cases the claims read as often as a full run: no verdict for want of samples
    for c in result["claims"]:
        assert "fewer than 3 samples" not in c["evidence"], c


def _selectors():
    """(what, metric, selector) of every claim, exercise check and original-vs-here ratio."""
    lab = ROOT / "labs" / LAB
    checks = [(c["id"], c) for c in claims.load(lab / "claims.toml")]
    checks += [(e["id"], e["check"]) for e in claims.load_exercises(lab / "exercises.toml")]
    checks += [(q["id"], q["here"]) for q in original_mod.load(lab / "original.toml")["ratio"]]
    for what, c in checks:
        for side in ("a", "b", "where"):
            if side in c:
                yield what, c["metric"], c[side]


# Full-run claims newer than the committed reference, by the day their selectors were checked
# on a real full run of their group: each must match the reference once it is re-recorded
# (then the entry goes; the test below fails while it stays).
AWAITING_REFERENCE: dict[str, str] = {}


def test_every_selector_matches_what_the_lab_records(quick_run, layout_run):
    """No claim, exercise or ratio selects a case the lab does not record (a typo, an invented key).
    A claim's cases are all in a quick run (those of the group a quick run leaves out in the
    quick run of that group alone), a full-run claim's (``full_run``) in the committed reference
    (a full run); an exercise's or a ratio's may be a full run's only."""
    result = result_of(quick_run)
    reference = model.load(refhost.result(LAB))
    spec = claims.load(ROOT / "labs" / LAB / "claims.toml")
    gone = result["run"]["left_out"]
    layout = result_of(layout_run)
    for c in spec:
        if c.get("group") in gone:
            assert all(claims.select(layout, c["metric"], c[side]) for side in ("a", "b", "where") if side in c), c["id"]
    claim_ids = {c["id"] for c in spec if not c.get("full_run") and c.get("group") not in gone}
    for c in spec:
        if c.get("full_run"):
            found = all(claims.select(reference, c["metric"], c[side]) for side in ("a", "b", "where") if side in c)
            assert found != (c["id"] in AWAITING_REFERENCE), (c["id"], "in the reference" if found else "not in the reference")
    skipped = {s["name"] for s in result["steps"] if s["status"] == "skipped"}
    # metrics of a tool the host lacks (the lab records that skip) are allowed to be missing
    by_tool = {"perf": {"rq_issue", "rq_complete", "bio_queue", "requests_per_io", "completions_per_gib",
                        "bios_per_request"},
               "pidstat": {"cpu_pct", "rss"}, "original.strace": {"strace_usecs", "strace_seconds"}}
    excused = set().union(*(ms for tool, ms in by_tool.items() if tool in skipped))
    missing = [(what, metric, sel) for what, metric, sel in _selectors()
               if what not in AWAITING_REFERENCE and metric not in excused and not claims.select(result, metric, sel)
               and (what in claim_ids or not claims.select(reference, metric, sel))]
    assert not missing, missing


def test_original_group_watches_only_this_runs_fio(quick_run):
    """pidstat -l -C matches this run's --aux-path: no other fio on the machine gets in."""
    _, out, _ = quick_run
    raw = out / LAB / "raw"
    result = result_of(quick_run)
    skipped = next((s for s in result["steps"] if s["name"] == "pidstat" and s["status"] == "skipped"), None)
    if skipped:
        # quick mode's 1-s jobs leave pidstat no whole interval: the lab says so instead
        assert "quick mode" in skipped["reason"] or "not installed" in skipped["reason"], skipped
        assert not list(raw.glob("original.*.pidstat.out"))
        pytest.skip(skipped["reason"])
    scratch = re.search(r"^target=(.*)/data\.dat$", (out / LAB / "target.txt").read_text(), re.M).group(1)
    files = sorted(raw.glob("original.*.pidstat.out"))
    assert files, "no pidstat output in the original group"
    for f in files:
        for line in f.read_text().splitlines():
            if re.match(r"^\d", line):
                assert f"--aux-path={scratch} " in line, line
    cpu = [m for m in result["measurements"] if m["metric"] == "cpu_pct" and m["case"]["experiment"] == "original"]
    assert {m["case"]["process"] for m in cpu} == {"busiest", "all"}


def test_buffered_original_job_counts_its_sync(quick_run):
    result = result_of(quick_run)
    sel = {"experiment": "original", "io": "buffered"}
    phase = {p: claims.select(result, "rq_complete", {**sel, "phase": p}) for p in ("job", "sync", "job+sync")}
    if not phase["job"]:
        pytest.skip("perf could not count block tracepoints on this host")
    assert phase["job+sync"][0]["samples"][0] == phase["job"][0]["samples"][0] + phase["sync"][0]["samples"][0]


def test_traced_jobs_are_kept_apart(quick_run):
    """strace slows fio: its jobs are their own experiment, never pooled with the untraced ones."""
    result = result_of(quick_run)
    traced = [m for m in result["measurements"] if m["case"].get("experiment") == "original strace"]
    assert {1024, 4194304} <= {m["case"]["bs"] for m in traced if m["metric"] == "strace_usecs"}
    tool = {s["name"]: (s.get("case") or {}).get("tool") for s in result["steps"]}
    assert {tool[m["step"]] for m in traced} == {"strace"}
    assert not [m for m in result["measurements"] if m["case"].get("experiment") == "original"
                and tool[m["step"]] == "strace"]
    # The 1 KiB job as a thread (fio --thread) is an experiment of its own too, beside each
    # traced 1 KiB job, with the job's own system time recorded for both.
    threads = [m for m in result["measurements"] if m["case"].get("experiment") == "strace threads"]
    assert {tool[m["step"]] for m in threads} == {"strace"} and {m["case"]["bs"] for m in threads} == {1024}
    cmd = {s["name"]: s["command"] for s in result["steps"]}
    assert all(" --thread " in cmd[m["step"]] for m in threads), {m["step"]: cmd[m["step"]] for m in threads}
    sys_time = {m["case"]["experiment"]: m["n"] for m in result["measurements"]
                if m["metric"] == "job_system_seconds" and m["case"]["bs"] == 1024}
    assert sys_time["strace threads"] == sys_time["original strace"] >= 1, sys_time


def test_strace_tables_are_parsed(quick_run):
    result = result_of(quick_run)
    calls = {(m["case"]["engine"], m["case"]["syscall"]): m["median"] for m in result["measurements"]
             if m["metric"] == "strace_calls"}
    if not calls:
        pytest.skip("strace not installed")
    assert calls[("psync", "pread64")] > 0
    assert calls[("libaio", "io_submit")] > 0 and ("psync", "io_submit") not in calls


# ---- usage and the --device safety rules --------------------------------------------------

# The options every lab shares are checked in test_lab_contract.py; these are fio_engines' own.
@pytest.mark.parametrize("args", [["--device"], ["--yes-destroy-data"]])
def test_bad_usage_exits_2(args):
    before = scratch_dirs()
    proc = run_lab(LAB, *args, timeout=30)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith("run.sh: "), proc.stderr
    assert scratch_dirs() == before


def test_help_mentions_device_options():
    proc = run_lab(LAB, "--help", timeout=30)
    assert proc.returncode == 0
    for word in ("--quick", "--device DEV", "--yes-destroy-data", "engines", "layout"):
        assert word in proc.stdout


def root_source() -> str:
    return subprocess.run(["findmnt", "-n", "-o", "SOURCE", "/"], capture_output=True, text=True).stdout.strip()


def scratch_dirs() -> set[str]:
    return {p.name for p in Path("/tmp").glob("*fio_engines.*")}


def assert_refused(proc, before: set[str], out: Path, words: str):
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, f"expected a one-line error, got: {proc.stderr}"
    assert words in lines[0], lines[0]
    assert scratch_dirs() == before, "a refused run must not start"
    assert not list(out.iterdir()), "a refused run must not write anything"


def test_device_refused_without_yes_destroy_data(tmp_path):
    dev = root_source()
    if not dev.startswith("/dev/"):
        pytest.skip(f"/ is not on a block device here ({dev})")
    before = scratch_dirs()
    proc = run_lab(LAB, "--quick", "--out", str(tmp_path), "--device", dev, timeout=30)
    assert_refused(proc, before, tmp_path, "without --yes-destroy-data")


def test_mounted_device_refused_even_with_yes_destroy_data(tmp_path):
    dev = root_source()
    if not dev.startswith("/dev/") or not Path(dev).is_block_device():
        pytest.skip(f"/ is not on a block device here ({dev})")
    if not is_root():
        pytest.skip("needs root: without it the device is refused earlier, as not writable")
    before = scratch_dirs()
    proc = run_lab(LAB, "--quick", "--out", str(tmp_path), f"--device={dev}", "--yes-destroy-data", timeout=30)
    assert_refused(proc, before, tmp_path, "is mounted at")


def test_non_block_device_refused(tmp_path):
    before = scratch_dirs()
    proc = run_lab(LAB, "--quick", "--out", str(tmp_path), "--device", "/etc/hostname", "--yes-destroy-data", timeout=30)
    assert_refused(proc, before, tmp_path, "not a block device")


# ---- interrupted mid-job ----------------------------------------------------------------

def alive_as(pid: int, name: str) -> bool:
    try:
        return name in Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
    except OSError:
        return False


@pytest.mark.parametrize("sig,rc", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_signal_mid_job_leaves_nothing(sig, rc, tmp_path):
    marker = "engines.psync.randread.qd32.r1: env"
    code, err, scratch = interrupt_at(LAB, marker, "--only", "engines", "--quick", "--out", str(tmp_path),
                                      sig=sig, after=0.4)
    assert code == rc, err[-2000:]
    assert f"interrupted by {signal.Signals(sig).name}" in err
    assert scratch and not Path(scratch).exists(), "scratch directory left behind"
    time.sleep(0.3)
    assert processes_matching(scratch) == [], "a process using the scratch dir survived"
    # fio of this run (its scratch directory in the environment), not of another test or run
    assert processes_matching("labs/fio_engines/engines.fio", env=f"PCB_LAB_SCRATCH={scratch}") == [], "fio survived"
    pids = [int(p) for p in re.findall(r"stop \S+\.iostat \(pid (\d+)\)", err)]
    assert pids, "the job's iostat was never stopped by the cleanup stack"
    assert not [p for p in pids if alive_as(p, "iostat")], "iostat survived"
    assert not (tmp_path / f"{LAB}.json").exists(), "an interrupted run must not write a result"
    assert not (tmp_path / f".{LAB}.partial").exists()
