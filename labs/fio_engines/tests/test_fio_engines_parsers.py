"""Parsers of the fio_engines lab on real outputs captured on the development VM
(tests/fixtures/<tool>/, each with the .cmd that produced it): fio's JSON report,
iostat -x -o JSON, perf stat CSV of the block tracepoints, strace -c -f of fio."""

from __future__ import annotations

import importlib.util
import json
import statistics
from pathlib import Path

import pytest

from labkit.parsers.fio import disk_util, fio_job, fio_jobs, fio_json
from labkit.parsers.iostat import device_means, iostat_json
from labkit.parsers.jsonline import ParseError
from labkit.parsers.perf import perf_stat_csv
from labkit.parsers.strace import strace_summary

ROOT = Path(__file__).resolve().parents[3]
FIX = ROOT / "tests" / "fixtures"


def fixture(tool: str, name: str) -> str:
    path = FIX / tool / name
    assert path.with_suffix(".cmd").exists(), f"{path}: fixture without the command that made it"
    return path.read_text()


def cmd_env(tool: str, name: str) -> dict[str, str]:
    """The VAR=VALUE assignments of a fixture's ``env ...`` command line."""
    words = (FIX / tool / name).with_suffix(".cmd").read_text().split()
    return dict(w.split("=", 1) for w in words if "=" in w and w.split("=", 1)[0].isupper())


def record_module():
    spec = importlib.util.spec_from_file_location("fio_engines_record", ROOT / "labs" / "fio_engines" / "record.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


# ---- fio ------------------------------------------------------------------------------

def test_fio_notes_are_kept_apart_from_the_report():
    text = fixture("fio", "engines-psync-qd32-randread.json")
    parsed = fio_json(text)
    assert any("capped at 1" in n for n in parsed["notes"]), parsed["notes"]
    assert parsed["report"]["fio version"].startswith("fio-")
    with pytest.raises(json.JSONDecodeError):
        json.loads(text)  # the raw stdout is not JSON by itself: the note comes first


def test_fio_job_options_are_the_substituted_values():
    text = fixture("fio", "engines-psync-qd32-randread.json")
    env = cmd_env("fio", "engines-psync-qd32-randread.json")
    job = fio_job(text)
    assert job["options"]["ioengine"] == env["FIO_ENGINE"]
    assert job["options"]["iodepth"] == env["FIO_IODEPTH"]
    assert job["options"]["rw"] == env["FIO_RW"]
    assert job["options"]["filename"] == env["FIO_FILE"]
    assert "${" not in json.dumps(job["options"])


def test_fio_read_job_numbers_are_consistent():
    job = fio_job(fixture("fio", "engines-psync-qd32-randread.json"))
    r = job["read"]
    assert job["write"] is None and job["trim"] is None
    bs = 4096  # engines.fio: bs=4k
    assert r["io_bytes"] == r["total_ios"] * bs
    assert r["total_ios"] > 0 and r["iops"] > 0
    # fio's iops is I/Os over the direction's runtime; bw is bytes/s in KiB/s
    assert r["iops"] == pytest.approx(r["total_ios"] / (r["runtime_ms"] / 1000), rel=0.01)
    assert r["bw_kib"] == pytest.approx(r["bw_bytes"] / 1024, abs=1)
    pct = r["clat_ns"]["percentiles"]
    assert 50.0 in pct and 99.0 in pct
    values = [pct[p] for p in sorted(pct)]
    assert values == sorted(values), "percentiles must not decrease"
    assert r["clat_ns"]["min"] <= pct[50.0] <= r["clat_ns"]["max"]
    assert 0 <= job["usr_cpu"] <= 100 and 0 < job["sys_cpu"] <= 100


def test_fio_group_reporting_gives_one_summary():
    text = fixture("fio", "numjobs-2-randwrite.json")
    env = cmd_env("fio", "numjobs-2-randwrite.json")
    jobs = fio_jobs(text)
    assert len(jobs) == 1
    job = jobs[0]
    assert job["options"]["numjobs"] == env["FIO_NUMJOBS"] and job["read"] is None
    assert job["write"]["io_bytes"] == job["write"]["total_ios"] * 4096


def test_fio_buffered_job_and_disk_util():
    text = fixture("fio", "buffered-randread-invalidate0.json")
    job = fio_job(text)
    assert job["options"]["direct"] == "0" and job["options"]["invalidate"] == "0"
    disks = disk_util(text)
    assert disks and {"name", "read_ios", "write_ios", "util"} <= set(disks[0])


def test_fio_rejects_text_output_and_truncation():
    with pytest.raises(ParseError, match="no JSON document"):
        fio_json("randread: (g=0): rw=randread, bs=(R) 4096B-4096B\nRun status group 0 (all jobs):\n")
    text = fixture("fio", "engines-psync-qd32-randread.json")
    with pytest.raises(ParseError, match="not valid JSON"):
        fio_json(text[: len(text) // 2])


def test_fio_job_wants_exactly_one_job():
    text = fixture("fio", "numjobs-2-randwrite.json")
    parsed = fio_json(text)
    report = parsed["report"]
    two = dict(report, jobs=report["jobs"] * 2)
    with pytest.raises(ParseError, match="expected one fio job"):
        fio_job(json.dumps(two, indent=1))


# ---- iostat ---------------------------------------------------------------------------

def test_iostat_intervals_and_means():
    text = fixture("iostat", "x-json-3x1s-vda-during-fio.json")
    parsed = iostat_json(text)
    assert len(parsed["intervals"]) == 3  # iostat ... 1 3: three reports
    assert parsed["host"]["nodename"]
    for iv in parsed["intervals"]:
        d = iv["disks"]["vda"]
        assert {"r/s", "w/s", "r_await", "rareq-sz", "aqu-sz", "util"} <= set(d)
        assert 0 <= d["util"] <= 100
        assert iv["avg_cpu"] is not None and set(iv["avg_cpu"]) >= {"user", "system", "iowait", "idle"}
    # the job was a libaio random read: the device completed reads in every interval
    assert all(iv["disks"]["vda"]["r/s"] > 0 for iv in parsed["intervals"])
    means, n = device_means(parsed, "vda")
    assert n == 3
    assert means["r/s"] == pytest.approx(statistics.fmean(iv["disks"]["vda"]["r/s"] for iv in parsed["intervals"]))
    later, n2 = device_means(parsed, "vda", skip=1)
    assert n2 == 2
    assert later["util"] == pytest.approx(statistics.fmean(iv["disks"]["vda"]["util"] for iv in parsed["intervals"][1:]))


def test_iostat_sigterm_leaves_truncated_json():
    with pytest.raises(ParseError, match="SIGTERM"):
        iostat_json(fixture("iostat", "x-json-vda-sigterm.json"))


def test_iostat_sigint_before_first_report_has_no_intervals():
    parsed = iostat_json(fixture("iostat", "x-json-vda-sigint-early.json"))
    assert parsed["intervals"] == []
    assert device_means(parsed, "vda") == ({}, 0)


def test_iostat_unknown_device_is_an_error():
    parsed = iostat_json(fixture("iostat", "x-json-3x1s-vda-during-fio.json"))
    with pytest.raises(ParseError, match="no device 'sdz'"):
        device_means(parsed, "sdz")


# ---- perf stat and strace of fio ------------------------------------------------------

def test_perf_block_tracepoint_counts():
    events = perf_stat_csv(fixture("perf", "stat-block-tracepoints-fio.csv"))
    for ev in ("block:block_rq_issue", "block:block_rq_complete", "block:block_bio_queue"):
        assert events[ev]["counted"] and events[ev]["value"] > 0
    # every request fio's 4 KiB O_DIRECT reads issued on the filtered disk also completed
    assert events["block:block_rq_complete"]["value"] == pytest.approx(events["block:block_rq_issue"]["value"], rel=0.01)


def test_strace_of_libaio_fio():
    s = strace_summary(fixture("strace", "fio-libaio-qd32-f.txt"))
    calls = s["syscalls"]
    assert calls["io_submit"]["calls"] > 0 and calls["io_getevents"]["calls"] > 0
    assert "pread64" not in calls or calls["pread64"]["calls"] < calls["io_submit"]["calls"]
    assert {"shmat", "shmdt"} <= set(calls)
    assert s["total"]["calls"] >= sum(r["calls"] for r in calls.values()) * 0.99


# ---- the lab's own helpers ------------------------------------------------------------

@pytest.mark.parametrize("text,expected", [("4k", 4096), ("1k", 1024), ("64k", 65536), ("4m", 4 * 2**20),
                                           ("1g", 2**30), ("256m", 256 * 2**20), ("512", 512)])
def test_fio_size(text, expected):
    assert record_module().fio_size(text) == expected


def test_fio_size_rejects_garbage():
    with pytest.raises(ValueError):
        record_module().fio_size("4 kilobytes")


# ---- batched submission, end_fsync, the disk's queue ------------------------------------

def _options(name: str) -> dict:
    from labkit.parsers.fio import fio_job
    return fio_job(fixture("fio", name))["options"]


def test_batched_job_case_is_checked_against_fios_options():
    """fio reports iodepth_batch_submit by its alias iodepth_batch: the case's batch is checked
    against it and against iodepth_batch_complete_min, both set from FIO_BATCH."""
    rec, opts = record_module(), _options("original-libaio-qd32-batch32.json")
    env = cmd_env("fio", "original-libaio-qd32-batch32.json")
    batch, depth = int(env["FIO_BATCH"]), int(env["FIO_IODEPTH"])
    assert batch == depth > 1
    rec.check_fio_case("b", {"engine": "libaio", "iodepth": depth, "batch": batch, "end_fsync": 0}, opts)
    for wrong in ({"batch": 1}, {"end_fsync": 1}):
        with pytest.raises(ValueError):
            rec.check_fio_case("b", wrong, opts)
    # one without the batch options: fio's defaults, one write per io_submit
    rec.check_fio_case("e", {"batch": 1, "end_fsync": 0}, _options("engines-psync-qd32-randread.json"))


def test_end_fsync_job_case_and_its_runtime():
    """With end_fsync=1 the case says so, and fio's run time (which its IOPS divide by) is longer
    than the job's write time: it includes the flush."""
    from labkit.parsers.fio import fio_json
    rec, opts = record_module(), _options("original-libaio-qd1-buffered-end-fsync.json")
    rec.check_fio_case("f", {"io": "buffered", "end_fsync": 1, "batch": 1}, opts)
    with pytest.raises(ValueError):
        rec.check_fio_case("f", {"end_fsync": 0}, opts)
    job = fio_json(fixture("fio", "original-libaio-qd1-buffered-end-fsync.json"))["report"]["jobs"][0]
    runtime_ms = int(cmd_env("fio", "original-libaio-qd1-buffered-end-fsync.json")["FIO_RUNTIME"].removesuffix("ms"))
    assert job["write"]["runtime"] > runtime_ms


def test_queue_sysfs():
    """The setup step's grep -H of the disk's queue files: each limit as its integer, the
    scheduler as the bracketed name, the disk from the path."""
    text = fixture("sysfs", "queue-vda.txt")
    q = record_module().queue_sysfs(text)
    lines = {ln.split("/queue/")[1].split(":", 1)[0]: ln.split(":", 1)[1].strip() for ln in text.splitlines()}
    assert q["disk"] == text.split("/")[4]
    assert f"[{q['scheduler']}]" in lines["scheduler"].split()
    for k in ("max_sectors_kb", "max_segments", "nr_requests"):
        assert q[k] == int(lines[k])


def test_queue_sysfs_rejects_other_lines():
    with pytest.raises(ValueError):
        record_module().queue_sysfs("scheduler: mq-deadline\n")


def test_strace_c_w_counts_sleeping_and_c_does_not():
    """strace -c sums each call's system CPU time, -c -w its wall-clock time: in two runs of the
    same job back to back, fio's main loop sleeps (clock_nanosleep) about as often in each, but
    only the -w table's seconds hold the sleeping; and with -c, the system time of the job's
    reaped threads lands on wait4 (RUSAGE_BOTH), which -w shows as a short call."""
    c = strace_summary(fixture("strace", "fio-original-1k-c.txt"))["syscalls"]
    w = strace_summary(fixture("strace", "fio-original-1k-cw.txt"))["syscalls"]
    runtime = float(cmd_env("strace", "fio-original-1k-cw.txt")["FIO_RUNTIME"])
    assert w["clock_nanosleep"]["seconds"] > 10 * c["clock_nanosleep"]["seconds"]
    # -w: the sleeps fill most of the main process's run time, and none exceeds it
    assert 0.5 * runtime < w["clock_nanosleep"]["seconds"] <= 1.5 * runtime
    assert c["wait4"]["seconds"] > 10 * w["wait4"]["seconds"]
