"""The sentences of the fio chapter and evidence page that read the committed results in words,
each pinned to the result it reads: a rerun that changes what a sentence says fails here, and the
sentence is rewritten instead of contradicting the page's tables. Sentences that read a claim's
verdict carry ``prose_reads`` on the page instead (labkit/site/macros/claim_tables.py).

Each test quotes its sentence; the thresholds are the sentence's own words ("below 1", "at 1",
"one request"), never a measured value."""

from __future__ import annotations

import statistics

import pytest

from labkit.stats import claims
import readings
import refhost

LAB = readings.ROOT / "labs" / "fio_engines"
ONE = (0.8, 1.25)
""""About one" request per I/O: the band of the lab's own instrument claim
``one-request-per-direct-write``."""
reference, emulated, _ = readings.host_fixtures("fio_engines")
samples = readings.samples


BASE = dict(experiment="original", engine="libaio", iodepth=1, io="direct", end_fsync=0, rw="write")


def test_libaio_is_the_slower_engine_at_iodepth_1(reference):
    """Chapter, step 1: "on the reference `libaio` is the slower engine": libaio ÷ psync IOPS,
    the claim's effect, lies below 1 with its whole interval."""
    c = next(c for c in claims.load(LAB / "claims.toml") if c["id"] == "libaio-beats-psync-at-iodepth-1")
    e = claims.evaluate_one(c, reference)["effect"]
    assert e["high"] < 1, e


def test_aqu_sz_median_is_below_1_for_both_engines_at_iodepth_1(reference):
    """Chapter, step 1: "`aqu-sz`'s median is below 1 for both engines"."""
    for engine in ("libaio", "psync"):
        assert statistics.median(samples(reference, "aqu_sz", **dict(BASE, engine=engine, bs=4096))) < 1, engine


def test_unbatched_queue_has_several_in_flight_and_no_merge(reference):
    """Chapter, step 3: "on the reference `aqu-sz` shows several in flight, yet bios/request
    stays at 1" for iodepth 32 with `batch` 1."""
    case = dict(BASE, iodepth=32, bs=4096, batch=1)
    assert statistics.median(samples(reference, "aqu_sz", **case)) >= 2
    assert all(x == pytest.approx(1, abs=0.01) for x in samples(reference, "bios_per_request", **case))


def test_a_4m_write_sent_whole_was_among_the_fastest_and_the_others_split(reference):
    """Chapter, step 5 ("on the reference, it went out as one request in some runs and as
    several in others"), and evidence page, block size: the 4 MiB job's requests per write spread over the
    runs; "where a run sent each write out whole, as one request, it was among the fastest [IOPS
    at or above the runs' median]; in the other runs each write was split into several"."""
    case = dict(BASE, bs=4194304)
    rpi, iops = samples(reference, "requests_per_io", **case), samples(reference, "iops", **case)
    whole = [i for i, x in enumerate(rpi) if x < 1.1]
    assert whole and len(whole) < len(rpi), rpi
    assert all(iops[i] >= statistics.median(iops) for i in whole), (rpi, iops)
    assert all(x >= 1.5 for i, x in enumerate(rpi) if i not in whole), rpi


def test_the_block_size_groups_direct_4m_requests_are_a_fraction_of_4m(reference):
    """Evidence page, block size: "This group's direct 4 MiB requests (full runs only) are a
    fraction of 4 MiB too" (more than one request per I/O in every run, reads and writes)."""
    for rw in ("read", "write"):
        assert all(x > 1.5 for x in samples(reference, "requests_per_io", experiment="blocksize", rw=rw,
                                           io="direct", bs=4194304)), rw


def test_emulated_host_split_every_4m_write_below_max_sectors_kb(emulated):
    """Evidence page, block size: "On the emulated arm64 host every run split its 4 MiB
    writes into a few requests each, of a mean size below its `max_sectors_kb`"."""
    case = dict(BASE, bs=4194304)
    rpi = samples(emulated, "requests_per_io", **case)
    limit_kb = samples(emulated, "max_sectors_kb", experiment="queue")[0]
    assert all(2 <= x <= 8 for x in rpi), rpi
    assert all(4096 / x < limit_kb for x in rpi), (rpi, limit_kb)


@pytest.mark.parametrize("bs", [1024, 4096, 4194304])
def test_wait4_carries_the_jobs_whole_system_time(reference, bs):
    """Chapter, step 6, and evidence page, strace: "On the reference, `wait4` carries the job's
    whole system time": in every traced run, strace's `wait4` seconds are the job's system time
    (fio's sys_cpu share times its run time) to within 5 %, at 1 KiB, 4 KiB and 4 MiB alike."""
    case = dict(experiment="original strace", bs=bs)
    wait4 = samples(reference, "strace_seconds", syscall="wait4", **case)
    job = samples(reference, "job_system_seconds", **case)
    assert len(wait4) == len(job) >= 3
    assert all(abs(w / j - 1) <= 0.05 for w, j in zip(wait4, job)), (wait4, job)


def test_cold_buffered_reads_are_one_request_per_io_as_direct(reference):
    """Evidence page, buffered vs direct: a cold buffered random read "becomes a device read …
    the counts show about one request per I/O, as for direct"."""
    for mode in ("buffered cold", "direct"):
        rpi = statistics.median(samples(reference, "requests_per_io", experiment="buffered", rw="randread", mode=mode))
        assert ONE[0] <= rpi <= ONE[1], (mode, rpi)


def test_without_fsync_every_layout_is_one_request_per_write(reference):
    """Chapter, step 7 ("Without `fsync` … no extra requests per write") and evidence page
    ("layouts complete about one block request per write (the `fsync = 0` rows)")."""
    for layout in ("regular", "sparse", "fallocated"):
        rpi = statistics.median(samples(reference, "requests_per_io", experiment="layout", rw="randwrite",
                                        layout=layout, fsync=0))
        assert ONE[0] <= rpi <= ONE[1], (layout, rpi)


def test_a_buffered_write_smaller_than_a_page_reads_the_page_first(reference):
    """Evidence page, block size: "One more buffered effect, which does show: a write smaller
    than a page, to a page that is not cached, makes the kernel read that page from the device
    first": buffered 1 KiB writes complete block requests (the page reads), at least ten times
    as many per write as buffered 4 KiB writes, which overwrite whole pages."""
    def rpi(bs):
        return statistics.median(samples(reference, "requests_per_io", experiment="blocksize", rw="write",
                                         io="buffered", bs=bs))
    assert rpi(1024) > 0.1 and rpi(1024) > 10 * rpi(4096), (rpi(1024), rpi(4096))


@pytest.mark.parametrize("rw", ["randread", "randwrite"])
def test_psync_is_flat_and_only_the_asynchronous_engines_queue(reference, rw):
    """Evidence page, engine × iodepth: "`psync` is flat" (its IOPS at iodepth 1 to 32 within
    the 1.25× band of the lab's "within" claims); `aqu-sz` "rises with iodepth for the
    asynchronous engines … and stays around or below 1 for `psync`" (at most 1.25)."""
    def med(metric, engine, qd):
        return statistics.median(samples(reference, metric, experiment="engines", rw=rw, engine=engine, iodepth=qd))
    depths = (1, 2, 4, 32)
    flat = [med("iops", "psync", qd) for qd in depths]
    assert max(flat) / min(flat) <= ONE[1], flat
    assert all(med("aqu_sz", "psync", qd) <= ONE[1] for qd in depths)
    for engine in ("libaio", "io_uring"):
        queue = [med("aqu_sz", engine, qd) for qd in depths]
        assert queue == sorted(queue) and queue[-1] > 2 * queue[0], (engine, queue)


def test_some_large_or_buffered_write_runs_have_fewer_bios_than_requests(reference):
    """Evidence page, the elevator: "some runs of large or buffered writes show that" (bios per
    request below 1, from splits and requeues), in the original group's 4 MiB direct job or its
    buffered one; the 4 KiB direct jobs at iodepth 1, which neither split nor merge, never do."""
    def below_1(**case):
        return any(x < 1 for x in samples(reference, "bios_per_request", **dict(BASE, **case)))
    assert below_1(bs=4194304) or below_1(bs=4096, io="buffered")
    assert not below_1(bs=4096, batch=1) and not below_1(bs=4096, engine="psync")


def test_with_fsync_the_written_file_pulls_ahead_and_pays_several_requests(reference):
    """Evidence page, file layout: "the written file pulls ahead when every write is followed by
    `fsync`, and … those jobs complete several block requests per I/O" (the written file's IOPS
    above both others' in their medians; at least two requests per write, every layout)."""
    def med(metric, layout):
        return statistics.median(samples(reference, metric, experiment="layout", rw="randwrite", layout=layout, fsync=1))
    assert all(med("iops", "regular") > med("iops", other) for other in ("sparse", "fallocated"))
    assert all(med("requests_per_io", layout) >= 2 for layout in ("regular", "sparse", "fallocated"))


def test_the_traced_job_is_slower_than_the_same_job_untraced(reference):
    """Evidence page, strace: "so the traced job is slower than the same job untraced" (the
    `strace` experiment's IOPS against the engine × iodepth medians: random reads, psync at
    iodepth 1, libaio at 32)."""
    for engine, qd in (("psync", 1), ("libaio", 32)):
        traced = max(samples(reference, "iops", experiment="strace", engine=engine))
        plain = statistics.median(samples(reference, "iops", experiment="engines", rw="randread", engine=engine, iodepth=qd))
        assert traced < plain, (engine, traced, plain)


def test_the_reference_is_a_2_vcpu_kvm_guest_on_ext4_on_a_virtio_disk(reference):
    """Chapter ("Our reference host is a VM (KVM, 2 vCPUs, no SMT, no hardware counters). Its
    disk, `vda`, is a virtio disk") and evidence page, the target ("On the reference host
    (`epyc-kvm-2vcpu`) that is ext4 on `vda`")."""
    h = reference["host"]
    assert h["label"] == refhost.host("fio_engines") == "epyc-kvm-2vcpu"
    assert h["virtualization"].startswith("vm: kvm") and h["emulation"] is None
    assert h["cpus"] == 2 and h["smt"] is False and h["pmu"]["available"] is False
    queue = [m["case"] for m in reference["measurements"] if m["metric"] == "max_sectors_kb"]
    assert queue and all(c["disk"] == "vda" and c["fs"] == "ext4" for c in queue), queue
