"""The sentences of the fstime chapter and evidence page that read the committed results in
words, each pinned to the result it reads: a rerun that changes what a sentence says fails here,
and the sentence is rewritten instead of contradicting the page's tables. Sentences that read a
claim's verdict carry ``prose_reads`` on the page instead (labkit/site/macros/claim_tables.py).

Each test quotes its sentence; the thresholds are the sentence's own words ("4× higher", "would
not grow", "one more read() per pass"), never a measured value. The reference is
:func:`refhost.result`; the emulated arm64 host's result is read where the sentence is about its
tab too."""

from __future__ import annotations

import re
from pathlib import Path

from labkit import model
import readings

ROOT = readings.ROOT
XFS_TARGETS = {"xfs-on-tmpfs", "xfs-on-disk"}
reference, emulated, result = readings.host_fixtures("fstime")
measurements, samples, median = readings.measurements, readings.samples, readings.median


def folder(result: dict) -> Path:
    """``results/<host>/fstime/``: the result's raw outputs and artifacts."""
    return ROOT / "results" / result["host"]["label"] / "fstime"


def stacks(result: dict, target: str) -> dict[tuple[str, ...], float]:
    """The folded stacks of the copy on ``target``: frames (without inferno's ``_[k]`` mark) ->
    samples."""
    art = next(a for a in result["artifacts"] if a["kind"] == "folded" and a["case"].get("target") == target)
    out: dict[tuple[str, ...], float] = {}
    for key, n in readings.folded(ROOT / "results" / result["host"]["label"] / art["path"]):
        out[key] = out.get(key, 0) + n
    return out


def under(folded: dict, parent: str, frame: str) -> float:
    """Samples of the stacks on which ``frame`` runs below (is called, directly or not, by) ``parent``."""
    return sum(n for s, n in folded.items() if parent in s and frame in s[s.index(parent) + 1:])


def has(folded: dict, prefix: str) -> bool:
    return any(f.startswith(prefix) for s in folded for f in s)


def test_the_shown_copy_reads_faster_than_it_writes(result):
    """Chapter, steps 1 and 2, below the lab's run on the xfs image on the disk (1 KiB buffers,
    repetition 1): "Reading a cached page scores higher than writing it": of the three COUNT
    lines (write, read, copy) that step prints, the read's is above the write's."""
    name = model.find_step(result, where=dict(experiment="copy", target="xfs-on-disk", bufsize=1024, rep=1))["name"]
    counts = [int(m) for m in re.findall(r"^COUNT\|(\d+)\|", (folder(result) / "raw" / f"{name}.err").read_text(), re.M)]
    assert len(counts) == 3, counts
    write, read, _copy = counts
    assert read > write, counts


def test_read_scores_above_write_on_every_filesystem(result):
    """Evidence page, phases: "Reading a cached page costs less than writing it, so on every
    filesystem *read* should score above *write*", the table below it (1 KiB buffers): the
    median read score of every target is above its median write score."""
    targets = {m["case"]["target"] for m in measurements(result, "score", experiment="copy", tool="fstime", bufsize=1024)}
    assert targets
    for t in sorted(targets):
        case = dict(experiment="copy", tool="fstime", bufsize=1024, target=t)
        assert median(result, "score", phase="read", **case) > median(result, "score", phase="write", **case), t


def test_fstime_spends_its_time_in_the_kernel(result):
    """Chapter, step 3, below the cpushare line: "Its time is in the kernel": in every
    repetition, fstime's system share of one CPU is larger than its user share."""
    case = dict(experiment="cpu", who="fstime")
    system, user = samples(result, "cpu_share", mode="system", **case), samples(result, "cpu_share", mode="user", **case)
    assert len(system) == len(user) >= 3
    assert all(s > u for s, u in zip(system, user)), (system, user)


def test_a_16x_larger_buffer_scores_between_1x_and_16x(reference):
    """Evidence page, what a larger buffer changes: "all fixed, each larger buffer would score 4×
    higher; all per byte, the bars would not grow. From 256 to 4096 bytes, the x86_64 tab (a full
    run) shows a mix of the two": on every filesystem the median copy score at 4096 bytes (16×
    the buffer) is above the one at 256 bytes and below 16 times it."""
    assert reference["run"]["quick"] is False
    case = dict(experiment="copy", tool="fstime", phase="copy")
    targets = {m["case"]["target"] for m in measurements(reference, "score", **case)}
    assert len(targets) == 5, targets
    for t in sorted(targets):
        small, large = median(reference, "score", bufsize=256, target=t, **case), median(reference, "score", bufsize=4096, target=t, **case)
        assert small < large < 16 * small, (t, small, large)


def test_the_runs_buffer_sizes_filesystems_and_repetitions(reference, emulated):
    """Chapter, step 4: "a quick run, such as our arm64 host's, has only 1024 bytes, on tmpfs and
    the xfs images"; evidence page, what a larger buffer changes: the x86_64 tab is "a full run"
    of the three sizes; evidence page, method: "five of each case, ten of the cases a timing claim compares (1 KiB buffers on tmpfs
    and on the two xfs images, and every audit state)", and "--quick: 1024/2000 on tmpfs and the
    xfs images, 10 repetitions"."""
    copy = dict(experiment="copy", tool="fstime")
    quick = measurements(emulated, "score", **copy)
    assert emulated["run"]["quick"] is True
    assert {m["case"]["bufsize"] for m in quick} == {1024}
    assert {m["case"]["target"] for m in quick} == {"tmpfs"} | XFS_TARGETS
    assert all(len(m["samples"]) == 10 for m in quick)

    full = measurements(reference, "score", **copy)
    assert reference["run"]["quick"] is False
    assert {m["case"]["bufsize"] for m in full} == {256, 1024, 4096}
    for m in full:
        compared = m["case"]["bufsize"] == 1024 and m["case"]["target"] in {"tmpfs"} | XFS_TARGETS
        assert len(m["samples"]) == (10 if compared else 5), m["case"]
    audit = measurements(reference, "score", experiment="audit")
    assert {m["case"]["audit"] for m in audit} == {"off", "norules", "nomatch", "every"}
    assert all(len(m["samples"]) == 10 for m in audit)


def test_strace_counts_a_read_and_a_write_per_buffer_and_one_read_and_an_lseek_pair_per_pass(result):
    """Chapter, step 5, in the strace fold: "It counts the system calls of a copy: a `read()` and
    a `write()` per buffer, and per pass over the file one more `read()` (it returns 0 at the end
    of the file) and an `lseek()` pair". strace attaches and detaches in the middle of the loop, so each
    count may be one off at either end: the extra reads (reads − writes) are the lseek pairs
    within one, and the lseek pairs are the passes (writes ÷ buffers per file) within one."""
    def calls(name):                                  # strace -c prints no row for a call never made
        found = measurements(result, "syscalls", experiment="strace", syscall=name)
        assert len(found) <= 1, found
        return found[0]["samples"][0] if found else 0.0
    reads, writes, lseeks = calls("read"), calls("write"), calls("lseek")
    m = re.search(r"-m (\d+)", (folder(result) / "raw" / "strace.fstime.cmd").read_text())
    per_pass = int(m.group(1))                        # -b 1024: -m KiB is the buffers per pass
    assert writes > 0 and reads >= writes, (reads, writes)
    assert abs((reads - writes) - lseeks / 2) <= 1, (reads, writes, lseeks)
    assert abs(lseeks / 2 - writes / per_pass) <= 1, (lseeks, writes, per_pass)


def test_the_reference_is_a_2_vcpu_vm_with_a_virtio_disk_no_pmu_and_no_smt(reference):
    """Chapter, steps 8 and 9 ("Our x86_64 host's "disk" is a VM's virtio disk"); evidence page,
    flame graphs ("Our x86_64 VM has no PMU: its samples come from the `cpu-clock` timer") and
    the reference host ("a virtual machine with 2 vCPUs and a virtio disk … no hardware PMU (perf
    samples with the `cpu-clock` timer) and no SMT")."""
    h = reference["host"]
    assert h["arch"] == "x86_64" and h["emulation"] is None and h["virtualization"].startswith("vm")
    assert h["cpus"] == 2 and h["smt"] is False
    assert h["pmu"]["available"] is False and "cpu-clock" in h["pmu"]["detail"]
    disk = next(line.split("\t") for line in (folder(reference) / "targets.tsv").read_text().splitlines()
                if line.startswith("disk\t"))
    assert re.fullmatch(r"/dev/vd[a-z]+", disk[3]), disk        # virtio-blk's names
    assert {m["case"]["device"] for m in measurements(reference, "device_io")} == {disk[3].removeprefix("/dev/")}


def test_xfs_and_tmpfs_take_their_own_write_paths_under_ksys_write(result):
    """Chapter, step 12: "Under `ksys_write`, xfs runs `xfs_file_buffered_write` and the iomap
    code where tmpfs runs `shmem_file_write_iter` (`generic_file_write_iter` in the arm64 tab:
    kernel 6.1, before tmpfs had a write function of its own"; evidence page, flame graphs: the
    same, with the iomap code "(`iomap_file_buffered_write`, `xfs_buffered_write_iomap_begin`,
    the inode lock `xfs_ilock` / `xfs_iunlock`)"."""
    tmpfs, xfs = stacks(result, "tmpfs"), stacks(result, "xfs-on-tmpfs")
    for f in ("xfs_file_buffered_write", "iomap_file_buffered_write", "xfs_buffered_write_iomap_begin",
              "xfs_ilock", "xfs_iunlock"):
        assert under(xfs, "ksys_write", f) > 0, f
    assert under(xfs, "ksys_write", "shmem_file_write_iter") == 0
    old = result["host"]["kernel"].startswith("6.1.")
    assert old == (result["host"]["label"] == "qemu-arm64-tcg"), result["host"]["kernel"]
    ours, other = ("generic_file_write_iter", "shmem_file_write_iter") if old else \
        ("shmem_file_write_iter", "generic_file_write_iter")
    assert under(tmpfs, "ksys_write", ours) > 0 and under(tmpfs, "ksys_write", other) == 0, ours


def test_only_the_tmpfs_profile_runs_shmem_functions(result):
    """Chapter, step 12: the differential flame graph is drawn on the xfs stacks, and "a stack
    only tmpfs runs (`shmem_*`) has no box here": the tmpfs profile has `shmem_` frames, the xfs
    image's has none."""
    assert has(stacks(result, "tmpfs"), "shmem_")
    assert not has(stacks(result, "xfs-on-tmpfs"), "shmem_")


def test_the_functions_the_original_named_are_not_on_our_stacks(result):
    """Evidence page, the functions the original named: "`ll_sc*` ... `block_write_begin_int`
    ... Neither is on the stacks of our profiles": no frame of the tmpfs or the xfs image's
    folded stacks names either."""
    for target in ("tmpfs", "xfs-on-tmpfs"):
        frames = {f for s in stacks(result, target) for f in s}
        assert frames, target
        assert not [f for f in frames if "ll_sc" in f or "block_write_begin" in f], target


def test_the_emulated_profile_misses_most_of_fstimes_system_time(emulated):
    """Evidence page, flame graphs: "In the emulated arm64 tab ... the kernel share is less than
    half of fstime's system share in step 3, and most samples land in libc's `read` and `write`
    or in the kernel's system-call dispatch (`el0_svc_common`)": each profile's kernel share is
    under half the median system share of step 3's repetitions, and over half of each profile's
    samples have one of those three as their innermost frame."""
    system = median(emulated, "cpu_share", experiment="cpu", who="fstime", mode="system")
    for target in ("tmpfs", "xfs-on-tmpfs"):
        share = samples(emulated, "kernel_sample_share", experiment="perf", target=target)[0]
        assert share < system / 2, (target, share, system)
        folded = stacks(emulated, target)
        total = sum(folded.values())
        leaves = sum(n for s, n in folded.items()
                     if s[-1] in ("read", "write") or s[-1].startswith("el0_svc_common"))
        assert leaves > total / 2, (target, leaves, total)
