"""The optane_kyber pages' readings of the committed results that no claim decides: each test
quotes a sentence of docs/cases/optane_kyber.md or labs/optane_kyber/evidence.md that says what
our data show (a direction, a count, a name in a profile, a property of the reference host) and
asserts it on the same committed result, so that a rerun which changes it fails here and the
sentence is rewritten. Sentences that read a claim's verdict are guarded on the pages themselves
(``prose_reads``). No lab run: the inputs are the committed results (results/ is never written)."""

from __future__ import annotations

import re
import statistics
from pathlib import Path

import readings
import refhost

ROOT = readings.ROOT
REFERENCE = refhost.result("optane_kyber")
ARTIFACTS = REFERENCE.with_suffix("")
RAW = ARTIFACTS / "raw"
GUEST = ROOT / "results" / readings.EMULATED_HOST / "optane_kyber"   # the emulated host's artifacts
REPORT_LINE = re.compile(r"^\s+([\d.]+)%\s+([\d.]+)%\s+\[[k.]\]\s+(\S+)")


reference, emulated, _ = readings.host_fixtures("optane_kyber")
samples = readings.samples


def stacks(name: str, folder: Path = ARTIFACTS) -> list[tuple[tuple[str, ...], int]]:
    """The folded stacks of a profile in ``folder``, the reference's by default
    (``flame-kyber.folded``: the graph's own file), as :func:`readings.folded` reads them."""
    return readings.folded(folder / name)


def frame_names(name: str, folder: Path = ARTIFACTS) -> set[str]:
    """Every function name in a folded profile, the kernel's ``_[k]`` mark dropped."""
    return {f for frames, _ in stacks(name, folder) for f in frames}


def children_report() -> dict[str, tuple[float, float]]:
    """The kyber profile's ``perf report --children`` as the evidence page shows it: symbol ->
    (Children %, Self %)."""
    rows = {}
    for line in (RAW / "flame.kyber.report.out").read_text().splitlines():
        m = REPORT_LINE.match(line)
        if m:
            rows[m.group(3)] = (float(m.group(1)), float(m.group(2)))
    assert rows
    return rows


def test_reference_host_is_a_2_vcpu_kvm_vm_without_counters(reference):
    """Chapter: "Our reference host is a VM (KVM, 2 vCPUs, no SMT, no hardware performance
    counters ...)"; evidence: "the last one it may use (`1` on the 2-vCPU reference host)"."""
    host = reference["host"]
    assert "kvm" in host["virtualization"]
    assert host["cpus"] == 2 and host["smt"] is False
    assert host["pmu"]["available"] is False


def test_the_ipc_step_is_skipped_for_want_of_counters(reference):
    """Chapter: "The lab's `ipc` step needs hardware counters, which this VM lacks: it is skipped
    with the reason" (and the verdicts table's "untested: no PMU on this VM")."""
    ipc = [s for s in reference["steps"] if s["group"] == "ipc"]
    assert ipc and all(s["status"] == "skipped" for s in ipc)
    assert all("not supported" in s["reason"] for s in ipc)


def test_perf_samples_with_cpu_clock_on_the_reference(reference):
    """Chapter: "On this VM perf samples with `cpu-clock`"; chapter, the heat map's header note:
    "The next header line names the event: `cpu-clock`, a timer, where (as on our VM) there is no
    PMU"; evidence: "On our reference VM, which has no PMU, `perf record` samples with
    `cpu-clock`"."""
    assert re.search(r"^# Samples: .* of event 'cpu-clock",
                     (RAW / "flame.kyber.report.out").read_text(), re.M)
    header = (ARTIFACTS / "heat-1s.perf-script").read_text().splitlines()
    cmdline = next(i for i, line in enumerate(header) if line.startswith("# cmdline"))
    assert re.match(r"# event : name = cpu-clock", header[cmdline + 1])
    assert reference["host"]["pmu"]["available"] is False


def test_the_loop_device_does_not_poll_and_the_kernel_ignores_hipri(reference):
    """Chapter: "A loop device does not poll, and this kernel would not poll a synchronous read
    anyway"; evidence: "it cannot poll at all (`io_poll` 0)" and "records `io_poll` next to every
    latency". 9650b453a3d4 ("block: ignore RWF_HIPRI hint for sync dio") went into Linux 5.19."""
    assert (RAW / "device.io_poll.out").read_text().strip() == "0"
    sched = [m for m in reference["measurements"] if m["case"]["experiment"] == "sched"]
    assert sched and all(m["case"]["io_poll"] == 0 for m in sched)
    release = tuple(int(x) for x in re.match(r"(\d+)\.(\d+)", reference["host"]["kernel"]).groups())
    assert release >= (5, 19), reference["host"]["kernel"]


def test_threads_are_held_on_the_last_cpu(reference):
    """Evidence: "The lab holds both threads on one CPU, the last one it may use (`1` on the
    2-vCPU reference host): fio with `taskset -c`, and the workers ... `2` is CPU 1 alone"."""
    assert reference["host"]["cpus"] == 2
    workers = (RAW / "sched.workers.cmd").read_text().replace("\\", "")
    assert "echo 2 > /sys/devices/virtual/workqueue/cpumask" in workers, workers
    fio = [s["command"] for s in reference["steps"] if s["group"] == "sched" and " fio " in f" {s['command'] or ''}"]
    assert fio and all(c.startswith("taskset -c 1 fio ") for c in fio)


def test_fio_sleeps_and_nothing_polls_with_either_scheduler(reference, emulated):
    """Chapter: "On the x86_64 reference, fio sleeps waiting for its reads with either scheduler
    (the `io wait` rows; in the emulated arm64 guest under 1 % of fio's samples are there), and
    nothing polls on either host" (and the verdicts table's "untested: nothing polls here", on
    every host). Shares are in per cent."""
    for scheduler in ("none", "kyber"):
        assert all(s > 0 for s in samples(reference, "share", experiment="flame", scheduler=scheduler, under="io wait"))
        assert all(s < 1 for s in samples(emulated, "share", experiment="flame", scheduler=scheduler, under="io wait"))
        for result in (reference, emulated):
            assert all(s == 0 for s in samples(result, "share", experiment="flame", scheduler=scheduler, under="polling"))


def test_kyber_frames_only_with_kyber_and_under_5_percent(reference, emulated):
    """Chapter: "On the reference, kyber's functions appear only in the kyber profile, with under
    5 % of its samples ... In the emulated guest one of the five kyber profiles caught no `kyber_`
    frame"."""
    assert all(s == 0 for s in samples(reference, "share", experiment="flame", scheduler="none", under="kyber"))
    kyber = samples(reference, "share", experiment="flame", scheduler="kyber", under="kyber")
    assert all(s > 0 for s in kyber)
    assert statistics.median(kyber) < 5
    guest = samples(emulated, "share", experiment="flame", scheduler="kyber", under="kyber")
    assert len(guest) == 5 and sum(s == 0 for s in guest) == 1, guest


def test_the_names_to_search_are_in_the_graphs_that_hold_them():
    """Chapter, step 5: "Search for `kyber_`: those boxes exist only with kyber. Then search for
    `blk_mq_sched_dispatch_requests` (and `blk_mq_issue_direct` in the plain `none` graph): with
    no scheduler the task's plug hands each request straight to the driver; with one, it inserts
    the request into the scheduler (`blk_mq_dispatch_list`)" (the differential graph is drawn
    from kyber's profile: `blk_mq_issue_direct` has no box in it). Evidence: "The `perf report`
    below shows it on the kyber profile: `blk_mq_dispatch_list`, `blk_mq_run_hw_queue` and
    `blk_mq_sched_dispatch_requests`; the flame graphs also hold `kblockd_mod_delayed_work_on`
    ..., below the report's 5 % limit. With `none` the plug flush issues straight to the driver
    (`blk_mq_issue_direct`)"."""
    none, kyber = frame_names("flame-none.folded"), frame_names("flame-kyber.folded")
    diff_svg = (ARTIFACTS / "flame-diff.svg").read_text()
    assert any(f.startswith("kyber_") for f in kyber) and not any(f.startswith("kyber_") for f in none)
    assert "kyber_" in diff_svg
    for name in ("blk_mq_sched_dispatch_requests", "blk_mq_dispatch_list", "blk_mq_run_hw_queue"):
        assert name in kyber and name not in none and name in diff_svg, name
    assert "blk_mq_issue_direct" in none and "blk_mq_issue_direct" not in kyber
    assert "blk_mq_issue_direct" not in diff_svg
    report = children_report()
    for name in ("blk_mq_dispatch_list", "blk_mq_run_hw_queue", "blk_mq_sched_dispatch_requests"):
        assert name in report, name
    assert "kblockd_mod_delayed_work_on" in kyber and "kblockd_mod_delayed_work_on" not in report
    assert re.search(r"--percent-limit 5\b", (RAW / "flame.kyber.report.cmd").read_text())


def test_the_emulated_guest_throttled_997_hz_to_500(emulated):
    """Chapter, step 2: "a kernel whose `perf_event_max_sample_rate` is lower throttles it (the
    emulated guest's: 500 Hz)"; evidence, frame pointers: "the emulated arm64 guest's perf record
    output: 500 Hz": perf's own warning in the guest's kyber record."""
    assert "throttling from 997 Hz to 500 Hz" in (GUEST / "raw" / "flame.kyber.record.err").read_text()


def test_the_emulated_guests_kernel_names_the_path_differently(emulated):
    """Chapter, step 5: "The emulated guest's kernel 6.1 names the path differently:
    `blk_mq_try_issue_directly` without a scheduler; with kyber, `blk_mq_sched_insert_request`,
    then a delayed run of the queue on the block layer's workqueue
    (`kblockd_mod_delayed_work_on`)": in every one of the guest's profiles, and none of 6.18's
    names there."""
    names = {p.name: frame_names(p.name, GUEST) for p in sorted(GUEST.glob("flame-*.folded")) if p.name != "flame-diff.folded"}
    kybers = [n for k, n in names.items() if k.startswith("flame-kyber")]
    nones = [n for k, n in names.items() if k.startswith("flame-none")]
    assert kybers and nones
    for n in kybers:
        assert {"blk_mq_sched_insert_request", "kblockd_mod_delayed_work_on"} <= n and "blk_mq_try_issue_directly" not in n
    for n in nones:
        assert "blk_mq_try_issue_directly" in n and "blk_mq_sched_insert_request" not in n
    for n in kybers + nones:
        assert not n & {"blk_mq_sched_dispatch_requests", "blk_mq_dispatch_list", "blk_mq_issue_direct"}


def test_the_children_column_follows_the_read_path():
    """Evidence: "Reading down the Children column follows the read path: `preadv64v2`, the
    system call, `blkdev_read_iter`, `__blkdev_direct_IO_simple`, then `submit_bio_wait`, which
    splits into *submitting* (`submit_bio_noacct_nocheck` and below ...) and *waiting*
    (`wait_for_completion_io_timeout`, `io_schedule_timeout` ...). Kyber's own functions
    (`kyber_*`) fall under the report's 5 % limit"."""
    report = children_report()
    children = {name: c for name, (c, _) in report.items()}
    path = ["blkdev_read_iter", "__blkdev_direct_IO_simple", "submit_bio_wait"]
    for caller in ("preadv64v2", "do_syscall_64"):
        assert children[caller] >= children[path[0]]
    for caller, callee in zip(path, path[1:]):
        assert children[caller] >= children[callee], (caller, callee)
    for branch in ("submit_bio_noacct_nocheck", "wait_for_completion_io_timeout"):
        assert children["submit_bio_wait"] >= children[branch], branch
    assert children["wait_for_completion_io_timeout"] >= children["io_schedule_timeout"]
    assert not any(name.startswith("kyber_") for name in report)


def test_the_interrupt_enabling_functions_hold_the_most_self_samples():
    """Evidence: "Why `finish_task_switch` and `_raw_spin_unlock_irq` look so hot": they are the
    two largest Self shares of the kyber profile, the entries of its fractal report."""
    report = children_report()
    top = sorted(report, key=lambda name: report[name][1], reverse=True)[:2]
    assert [name.split(".")[0] for name in top] == ["finish_task_switch", "_raw_spin_unlock_irq"]
    fractal = (RAW / "flame.kyber.fractal.out").read_text()
    entries = re.findall(r"^\s+[\d.]+%\s+\[[k.]\]\s+(\S+)", fractal, re.M)
    assert [name.split(".")[0] for name in entries] == ["finish_task_switch", "_raw_spin_unlock_irq"]


def test_fio_stacks_go_straight_to_preadv_and_end_in_a_cut_tower(reference):
    """Evidence: "on the x86-64 reference, fio's stacks go straight from the process to
    `preadv64v2`, and fio's own functions ... never as the callers of `preadv64v2`. Worse, a walk
    that follows a stale `rbp` reads garbage ...: the thin tower of `[unknown]` frames at the left
    of each graph, cut at 48 frames by `perf script --max-stack 48` (deeper than any real stack
    here)"; chapter: "Debian's x86-64 fio has no frame pointers: its stacks end in a thin tower
    of `[unknown]` frames". Thin: fewer samples than the read path's `preadv64v2` beside it. A
    tower's walk starts at the sampled function, which can be `preadv64v2` itself: it is then the
    tower's leaf, under the garbage, never a frame inside it."""
    assert reference["host"]["arch"] == "x86_64"
    for name in ("flame-none.folded", "flame-kyber.folded"):
        profile = stacks(name)
        cut = [(frames, w) for frames, w in profile if len(frames) - 1 == 48]
        assert cut and max(len(frames) - 1 for frames, _ in profile) == 48, name
        assert all(frames[1:].count("[unknown]") > 24 for frames, _ in cut), name
        assert all(frames.index("preadv64v2") == 48 for frames, _ in cut if "preadv64v2" in frames), name
        read = [(frames, w) for frames, w in profile if "preadv64v2" in frames and len(frames) - 1 < 48]
        assert read and all(frames[1] == "preadv64v2" for frames, _ in read), name
        assert sum(w for _, w in cut) < sum(w for _, w in read), name


def test_kyber_never_throttles_or_adjusts_far_from_its_target(reference):
    """Evidence: "Kyber's default read latency target is 2 ms: a device that completes in
    microseconds never comes near it, so kyber has no reason to throttle or adjust"."""
    for source in ("kyber:kyber_throttled", "kyber:kyber_adjust"):
        assert all(s == 0 for s in samples(reference, "count", experiment="trace", scheduler="kyber", source=source))
    assert max(samples(reference, "clat", experiment="sched", scheduler="kyber", stat="p99.9")) < 2000


def test_two_jobs_keep_the_higher_share_under_perf_record(reference):
    """Chapter: "On the reference host the two-job share is the *higher* one: the cost does not
    grow with load" (the record (defaults) ratios, two jobs ÷ one job in each repetition, and the
    medians the chapter's table of those ratios shows)."""
    two = samples(reference, "iops_ratio", experiment="overhead", numjobs=2, profiler="record (defaults)")
    one = samples(reference, "iops_ratio", experiment="overhead", numjobs=1, profiler="record (defaults)")
    assert len(two) == len(one)
    assert statistics.median(a / b for a, b in zip(two, one)) > 1
    assert statistics.median(two) > statistics.median(one)
