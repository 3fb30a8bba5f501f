"""The sentences of the nvme_swiotlb chapter and evidence page that read the committed results in
words, each pinned to the result it reads: a rerun that changes what a sentence says fails here,
and the sentence is rewritten instead of contradicting the page's tables. Sentences that read a
claim's verdict carry ``prose_reads`` on the page instead (labkit/site/macros/claim_tables.py).

Each test quotes its sentence (chapter: docs/cases/nvme_swiotlb.md, by step; evidence page:
labs/nvme_swiotlb/evidence.md, by section anchor); the thresholds are the sentence's own words
("at least twice", "256 KiB less 4 KiB", "lose more than the board"), never a measured value.
The reference is :func:`refhost.result`, whose run booted the arm64 guests; the emulated arm64
host's result is read where the sentence is about its tab. The guests' raw outputs are read from
``results/<host>/nvme_swiotlb/raw/guest/<release>-<tree>/``: the device-tree window, the boot
log, the queue limits and the function_graph traces."""

from __future__ import annotations

import gzip
import json
import math
import re
import statistics
from pathlib import Path

import pytest

import readings
import refhost
from labkit import original as original_mod
from labkit.stats import claims

ROOT = readings.ROOT
LAB = ROOT / "labs" / "nvme_swiotlb"
RAW = refhost.result("nvme_swiotlb").with_suffix("") / "raw"
GUEST = RAW / "guest"
SPEC = {c["id"]: c for c in claims.load(LAB / "claims.toml")}
SYNC = {"5.10": "swiotlb_tbl_sync_single", "6.1": "swiotlb_sync_single_for_cpu"}
"""The function under which each kernel copies a bounced read back at completion."""
reference, emulated, result = readings.host_fixtures("nvme_swiotlb")
measurements, samples, median = readings.measurements, readings.samples, readings.median


# ---- the guests' raw outputs ----------------------------------------------------------------

def job_env() -> dict[str, str]:
    """The guest job's settings (raw/guest/job.env: MB, TRACE_MB, ...)."""
    return dict(line.split("=", 1) for line in (GUEST / "job.env").read_text().split())


def boots() -> list[Path]:
    """Every guest boot's folder (``<release>-<tree>[-<knob>]``)."""
    found = sorted(d for d in GUEST.iterdir() if (d / "guest.json").exists())
    assert found, f"{GUEST}: no guest boot"
    return found


def tree(boot: Path) -> str:
    """The boot's device tree and boot variant: ``plain``, ``dma-ranges-isolcpus``, ... (a
    configuration's later boots, ``<release>-<tree>.<boot>``, without their number)."""
    return boot.name.split("-", 1)[1].split(".")[0]


def limited(boot: Path) -> bool:
    """Whether the boot has the 1 GiB window (with or without a knob) or swiotlb=force: the
    boots whose drive's DMA goes through swiotlb."""
    t = tree(boot)
    return (t.startswith("dma-ranges") and not t.startswith("dma-ranges-wide")) or t == "plain-force"


def boot_of(case: dict) -> Path:
    """The first boot's folder of a guest measurement's case (its kernel release and tree): the
    boot whose job ran the traces and counts."""
    release = case["guest_kernel"].split()[0]
    found = [d for d in boots() if tree(d) == case["dt"] and "." not in d.name
             and json.loads((d / "guest.json").read_text())["kernel_release"] == release]
    assert len(found) == 1, (case, found)
    return found[0]


def queue(boot: Path) -> dict[str, int]:
    """The drive's numeric queue limits as the guest read them (queue.txt: ``name value`` lines)."""
    return {k: int(v) for k, v in (line.split(None, 1) for line in (boot / "queue.txt").read_text().splitlines()
                                   if line.strip()) if v.strip().isdigit()}


def window(boot: Path) -> tuple[int, int] | None:
    """(first, last) CPU address of the PCIe bridge's dma-ranges window as the guest's kernel
    exported it (dt-dma-ranges.hex, seven 32-bit big-endian cells), None without a window."""
    cells = hex_cells(boot)
    if cells is None:
        return None
    cpu, size = cells[3] << 32 | cells[4], cells[5] << 32 | cells[6]
    return cpu, cpu + size - 1


def hex_cells(boot: Path) -> list[int] | None:
    """The 32-bit big-endian cells of dt-dma-ranges.hex (``hexdump -C``), None without one."""
    f = boot / "dt-dma-ranges.hex"
    if not f.exists():
        return None
    data = bytes(int(b, 16) for line in f.read_text().splitlines() for b in line.split("|")[0].split()[1:])
    assert len(data) % 4 == 0, data
    return [int.from_bytes(data[i:i + 4], "big") for i in range(0, len(data), 4)]


ZONE = re.compile(r"^\[\s*0\.0+\]\s+(DMA|DMA32|Normal)\s+(?:\[mem (0x[0-9a-f]+)-(0x[0-9a-f]+)\]|empty)", re.M)
POOL = re.compile(r"software IO TLB: mapped \[mem (0x[0-9a-f]+)-(0x[0-9a-f]+)\]")


def zones(boot: Path) -> dict[str, tuple[int, int] | None]:
    """The memory zones the guest's kernel printed at boot: name -> (first, last) or None (empty)."""
    return {z: (int(a, 16), int(b, 16)) if a else None for z, a, b in ZONE.findall((boot / "dmesg.txt").read_text())}


def pool(boot: Path) -> tuple[int, int] | None:
    """The bounce pool the guest's kernel set up at boot (its ``software IO TLB: mapped`` line)."""
    m = POOL.search((boot / "dmesg.txt").read_text())
    return (int(m[1], 16), int(m[2], 16)) if m else None


# ---- function_graph traces ------------------------------------------------------------------

FG_LINE = re.compile(r"^\s*(\d+)\)[^|]*\|\s*(.*?)\s*$")


IRQ_NESTING = {"irq_enter_rcu", "do_interrupt_handler", "irq_exit_rcu"}
"""What function_graph shows under a function an interrupt landed in (arm64, 5.10 and 6.1)."""


class Call:
    """One function call of a function_graph trace, with its caller and callees."""

    def __init__(self, name: str, parent: "Call | None", leaf: bool):
        self.name, self.parent, self.leaf, self.children = name, parent, leaf, []

    @property
    def parents(self) -> tuple[str, ...]:
        """The callers' names, outermost first."""
        out, p = [], self.parent
        while p:
            out.append(p.name)
            p = p.parent
        return tuple(reversed(out))


def graph(text: str) -> list[Call]:
    """Every call of a function_graph trace, in trace order (one call stack per CPU; an
    interrupt's handlers nest under the function they interrupted; module tags dropped)."""
    stacks: dict[str, list[Call]] = {}
    calls = []
    for line in text.splitlines():
        m = FG_LINE.match(line)
        if not m:
            continue
        cpu, body = m.groups()
        stack = stacks.setdefault(cpu, [])
        if body.startswith("}"):
            if stack:
                stack.pop()
            continue
        opens = body.endswith("{")
        if not (opens or body.endswith(";")):
            continue
        name = re.sub(r"\s*\[[^\]]*\]", "", body[:-1].strip()).strip().removesuffix("()").strip()
        call = Call(name, stack[-1] if stack else None, not opens)
        if stack:
            stack[-1].children.append(call)
        calls.append(call)
        if opens:
            stack.append(call)
    return calls


def excerpt(result: dict, kernel: str, dt: str) -> list[Call]:
    """The calls of the function_graph excerpt a page shows (artifact_text, what=function_graph)."""
    art = [a for a in result["artifacts"] if a["kind"] == "log" and a["case"].get("what") == "function_graph"
           and a["case"].get("kernel") == kernel and a["case"].get("dt") == dt]
    assert len(art) == 1, (kernel, dt, art)
    return graph((RAW.parent.parent / art[0]["path"]).read_text())


def traces(kernel: str, dt: str) -> list[tuple[str, list[Call]]]:
    """(name, calls) of every whole function_graph trace of one kernel and tree (fgraph.*.trace.gz)."""
    release = {"5.10": "bullseye", "6.1": "bookworm"}[kernel]
    files = sorted((GUEST / f"{release}-{dt}").glob("fgraph.*.trace.gz"))
    assert files, (kernel, dt)
    return [(f.name, graph(gzip.decompress(f.read_bytes()).decode(errors="replace"))) for f in files]


def spread(xs: list[float]) -> float:
    return max(xs) / min(xs)


# ---- the chapter ----------------------------------------------------------------------------

def test_window_drops_buffered_reads_too(reference):
    """Chapter, step 1: "the buffered medians drop too, but no claim tests them": on both
    kernels the buffered read's median with the dma-ranges window is below the plain tree's."""
    for kernel in ("5.10", "6.1"):
        window_ = median(reference, "bandwidth", experiment="guest", kernel=kernel, dt="dma-ranges", io="buffered")
        plain = median(reference, "bandwidth", experiment="guest", kernel=kernel, dt="plain", io="buffered")
        assert window_ < plain, (kernel, window_, plain)


def test_widened_tree_bounces_nothing(reference):
    """Chapter, step 1: "the widened tree, which bounces nothing": every count of swiotlb_bounced
    during a read with the widened window, direct or buffered, on both kernels, is zero."""
    found = measurements(reference, "swiotlb_bounced", experiment="guest", dt="dma-ranges-wide")
    assert {m["case"]["kernel"] for m in found} == {"5.10", "6.1"}, [m["case"] for m in found]
    assert [(m["case"], s) for m in found for s in m["samples"] if s != 0] == []


def test_strace_w_is_inflated_by_ptrace(reference):
    """Chapter, step 2: "full runs add strace -c -w (wall-clock time), inflated by ptrace's
    stops": on every guest tree, strace -c -w's time per read() call is above the mean time of
    a read() from the raw_syscalls tracepoints (no ptrace) of the same kernel and tree."""
    found = measurements(reference, "time_per_call", experiment="guest", syscall="read")
    assert found
    for m in found:
        c = m["case"]
        traced = statistics.mean(samples(reference, "read_time", experiment="guest", kernel=c["kernel"], dt=c["dt"], io="direct"))
        assert min(m["samples"]) > traced, (c, m["samples"], traced)


def test_each_read_takes_longer_with_the_window_on_61(reference):
    """Chapter, step 3: "With the window each read() takes much longer (min–max): the lost time
    is inside the system call", under the table of both kernels. The claim guest-510-time-in-read decides
    it for 5.10 (prose_reads on the page); on 6.1 the median read() with the window is at least
    1.25 times the plain tree's, the bound that claim sets for "longer"."""
    window_ = median(reference, "read_time", experiment="guest", kernel="6.1", dt="dma-ranges", io="direct")
    plain = median(reference, "read_time", experiment="guest", kernel="6.1", dt="plain", io="direct")
    assert window_ >= SPEC["guest-510-time-in-read"]["factor"] * plain, (window_, plain)


def test_guests_lose_more_than_the_board_on_direct_reads(reference):
    """Chapter, step 5: "Our guests (step 1) lose more on direct reads with 5.10, the original's
    kernel: the whole interval of the window's ratio lies below the board's 0.48 ×; with 6.1 it
    reaches the board's"; evidence page, #why-more-loss, the same of "Our 5.10 guests" and "Our
    6.1 guests' interval": for every direct-read ratio of original.toml (both kernels, and 5.10
    against the control drive), our ratio of medians (dma-ranges ÷ plain) is below the
    original's 5.10 ÷ 4.19; the 95 % interval of the 5.10 claim on the same boots lies below it
    whole, the 6.1 claim's reaches it."""
    orig = original_mod.load(LAB / "original.toml")
    ratios = [q for q in orig["ratio"] if q["id"].startswith("direct-read")]
    assert ratios
    for q in ratios:
        theirs = original_mod.original_ratio(orig, q)[0]
        a, why_a = claims.side(reference, q["here"]["metric"], q["here"]["a"])
        b, why_b = claims.side(reference, q["here"]["metric"], q["here"]["b"])
        assert a and b, (q["id"], why_a, why_b)
        assert a.value / b.value < theirs, (q["id"], a.value / b.value, theirs)
    board = original_mod.original_ratio(orig, next(q for q in ratios if q["id"] == "direct-read-510"))[0]
    e510 = claims.evaluate_one(SPEC["guest-510-window-costs-direct-reads"], reference)["effect"]
    e61 = claims.evaluate_one(SPEC["guest-61-window-costs-direct-reads"], reference)["effect"]
    assert e510["high"] < board, (e510, board)
    assert e61["low"] < board <= e61["high"], (e61, board)


def test_window_caps_requests_at_swiotlbs_mapping_less_one_page():
    """Evidence page, #requests, the notes on the window's queue limits ("swiotlb's largest
    mapping, less the driver's alignment", "Fewer pieces per request, to match") and
    #why-more-loss ("Our guests' 5.10 also takes one page off"): every boot that bounces (window or swiotlb=force) has
    max_hw_sectors_kb = 256 − 4 and fewer max_segments than the same kernel's plain tree."""
    capped = [b for b in boots() if limited(b)]
    assert {b.name.split("-", 1)[0] for b in capped} == {"bullseye", "bookworm"}, capped
    for b in capped:
        q, plain = queue(b), queue(GUEST / f"{b.name.split('-', 1)[0]}-plain")
        assert q["max_hw_sectors_kb"] == 256 - 4, (b.name, q)
        assert q["max_segments"] < plain["max_segments"], (b.name, q, plain)


def test_plain_and_widened_trees_map_with_a_leaf(reference):
    """Chapter, step 6: "With the plain tree dma_direct_map_sg() is a leaf: the buffer's
    addresses go to the drive as they are"; evidence page, #why-more-loss: "with the widened
    window, kernel 5.10: dma_direct_map_sg() is a leaf again, as with the plain tree": in the
    excerpts shown and in every whole trace of both trees on both kernels, each call of
    dma_direct_map_sg() calls nothing but an interrupt's entry and exit (function_graph nests
    an interrupt that lands during the call under it: irq_enter_rcu(), do_interrupt_handler(),
    irq_exit_rcu())."""
    for dt in ("plain", "dma-ranges-wide"):
        shown = [c for c in excerpt(reference, "5.10", dt) if c.name == "dma_direct_map_sg"]
        assert shown and all(c.leaf for c in shown), dt
        for kernel in ("5.10", "6.1"):
            for name, calls in traces(kernel, dt):
                for c in (c for c in calls if c.name == "dma_direct_map_sg"):
                    own = [x.name for x in c.children if x.name not in IRQ_NESTING]
                    assert not own, (kernel, dt, name, own)


def test_window_maps_through_swiotlb_and_copies_at_map_time(reference):
    """Chapter, step 6: "With the 1 GiB window the same call goes through swiotlb_map(), which
    takes a bounce slot (swiotlb_tbl_map_single()) and copies (swiotlb_bounce())" and "A copy
    *into* the slot, for a read, before the drive wrote anything"; evidence page,
    #why-more-loss: "the Debian 5.10 our guests boot ... calls swiotlb_bounce() under
    swiotlb_tbl_map_single() for a read, as 6.1 does in the trace above": the window's excerpt
    of each kernel has swiotlb_bounce() under dma_direct_map_sg() → swiotlb_map() →
    swiotlb_tbl_map_single()."""
    for kernel in ("5.10", "6.1"):
        chains = [c.parents[-3:] for c in excerpt(reference, kernel, "dma-ranges") if c.name == "swiotlb_bounce"]
        assert ("dma_direct_map_sg", "swiotlb_map", "swiotlb_tbl_map_single") in chains, (kernel, chains)


@pytest.mark.parametrize("kernel", ["5.10", "6.1"])
def test_bounce_copies_twice_per_piece_at_map_and_in_the_irq(kernel):
    """Chapter, step 6: "The copy out, into dd's buffer, comes at completion", and step 8:
    "their traces show the completion copy inside the NVMe interrupt handler, as the driver
    unmaps the request"; evidence page, #why-more-loss: "In our traces swiotlb_bounce() runs
    twice per mapped piece, on both kernels. Once when the request is mapped ...: under
    swiotlb_tbl_map_single(). And once when it completes ...: under swiotlb_tbl_sync_single()
    on 5.10 and swiotlb_sync_single_for_cpu() on 6.1, inside the NVMe interrupt handler on both
    (nvme_irq() → … → dma_direct_unmap_sg(), or dma_unmap_page_attrs() for a one-segment
    request)"; "a trace can hold fewer completion copies than mapped pieces, never more";
    "swiotlb_tbl_unmap_single(), called right after it, only frees the slots"; and
    "its swiotlb_tbl_unmap_single() is a leaf in the trace" (5.10). In every whole trace of the
    window: each swiotlb_bounce() is under one of the two, no more at completion than at map
    time, and as many in some trace; the completion copies run under nvme_irq(); the call after
    each completion sync is swiotlb_tbl_unmap_single(), under which nothing copies (on 5.10 it
    calls nothing)."""
    equal = 0
    for name, calls in traces(kernel, "dma-ranges"):
        bounces = [c for c in calls if c.name == "swiotlb_bounce"]
        mapped = [c for c in bounces if c.parents[-2:] == ("swiotlb_map", "swiotlb_tbl_map_single")]
        done = [c for c in bounces if c.parents[-1:] == (SYNC[kernel],)]
        assert mapped and len(mapped) + len(done) == len(bounces), (name, [c.parents[-3:] for c in bounces])
        assert len(done) <= len(mapped), (name, len(mapped), len(done))
        equal += len(done) == len(mapped)
        for c in done:
            assert any(p.startswith("nvme_irq") for p in c.parents), (name, c.parents)
            assert c.parents[-2] in ("dma_direct_unmap_sg", "dma_unmap_page_attrs"), (name, c.parents)
        for s in (c for c in calls if c.name == SYNC[kernel]):
            siblings = s.parent.children
            after = siblings[siblings.index(s) + 1:]
            assert after and after[0].name == "swiotlb_tbl_unmap_single", (name, [x.name for x in after[:1]])
        unmaps = [c for c in calls if c.name == "swiotlb_tbl_unmap_single"]
        assert all("swiotlb_tbl_unmap_single" not in c.parents for c in bounces), name
        if kernel == "5.10":
            assert unmaps and all(c.leaf for c in unmaps), name
    assert equal, kernel


def test_btt_follows_every_128k_request_in_every_tree(reference):
    """Chapter, step 7: "full runs trace direct reads in 128 KiB requests, which no tree
    splits"; evidence page, #guest-d2c: "every request of a direct read in 128 KiB requests:
    below every tree's request limit, so none splits them and btt follows each one": for every
    traced tree, 128 KiB is below the drive's max_sectors_kb, and btt's D2C and Q2C each have
    one sample per request of the traced read (TRACE_MB MiB ÷ 128 KiB)."""
    traced = int(job_env()["TRACE_MB"])
    found = measurements(reference, "d2c", experiment="guest") + measurements(reference, "q2c", experiment="guest")
    assert len(found) >= 2 * 6, [m["case"] for m in found]
    for m in found:
        kib = m["case"]["request_kib"]
        assert kib < queue(boot_of(m["case"]))["max_sectors_kb"], m["case"]
        assert len(m["samples"]) == traced * 1024 // kib, (m["metric"], m["case"], len(m["samples"]))


def test_zone_dma_and_the_pool_follow_the_window(reference):
    """Chapter, step 9, the 5.10 window's boot log: "ZONE_DMA ends at ... here the window's
    end, the 1 GiB the bridge reaches", "The upper GiB, out of the bridge's reach", "The bounce
    pool, inside the window; among our boots only the window's and swiotlb=force's have one",
    "Without the window ZONE_DMA spans all of RAM, and without swiotlb=force there is no pool";
    evidence page, #requests: the pool "which our guests' kernels set up only with the 1 GiB
    window or swiotlb=force". Every boot's log: with the 1 GiB window ZONE_DMA ends where the
    window does, DMA32 holds the rest of RAM and the pool lies inside the window; otherwise
    ZONE_DMA reaches the end of RAM; a pool only where the boot bounces (window or
    swiotlb=force), as the swiotlb_pool rows say too."""
    ram_end = None
    for b in boots():
        z = zones(b)
        assert z.get("DMA"), (b.name, z)
        end = max(r[1] for r in z.values() if r)
        assert ram_end in (None, end), (b.name, end, ram_end)
        ram_end = end
        w, p = window(b), pool(b)
        if w and w[1] < ram_end:
            assert z["DMA"][1] == w[1] and z["DMA32"] == (w[1] + 1, ram_end), (b.name, z, w)
            assert p and w[0] <= p[0] and p[1] <= w[1] + 1, (b.name, p, w)
        else:
            assert z["DMA"][1] == ram_end, (b.name, z)
        assert (p is not None) == limited(b), (b.name, p)
    for m in measurements(reference, "swiotlb_pool", experiment="guest"):
        assert (min(m["samples"]) > 0) == (m["case"]["dt"] in ("dma-ranges", "plain-force")), m["case"]


def test_the_exported_windows_read_as_the_notes_say():
    """Chapter, step 9, the notes on the 5.10 window's seven cells: `02000000` flags, bus
    address 0x40000000, CPU address 0x40000000 ("where RAM starts"), size `00000000 40000000`,
    1 GiB; and "with --dt wide the last cell reads 80000000, 2 GiB": the cells each guest's
    kernel exported."""
    cells = hex_cells(GUEST / "bullseye-dma-ranges")
    assert cells == [0x02000000, 0, 0x40000000, 0, 0x40000000, 0, 0x40000000], [hex(c) for c in cells or []]
    assert zones(GUEST / "bullseye-dma-ranges")["DMA"][0] == 0x40000000
    wide = hex_cells(GUEST / "bullseye-dma-ranges-wide")
    assert wide and wide[:6] == cells[:6] and wide[6] == 0x80000000, [hex(c) for c in wide or []]


def test_debian_boots_with_thp_always_and_the_rounds_use_madvise(reference):
    """Chapter, step 10, the fold "Huge pages in the 5.10 window boot": "Debian's kernel comes
    up with huge pages already always, so the rounds' other reads run with madvise": in every
    knob boot, transparent_hugepage/enabled
    reads [always] before the rounds and [madvise] in them."""
    def selected(what: str) -> list[str]:
        arts = [a for a in reference["artifacts"] if a["case"].get("what") == what]
        assert arts, what
        return [re.search(r"\[(\w+)\]", (RAW.parent.parent / a["path"]).read_text())[1] for a in arts]
    assert set(selected("thp-before")) == {"always"}
    assert set(selected("thp-rounds")) == {"madvise"}


def test_both_schedulers_read_slower_than_baseline(reference):
    """Chapter, step 10, the fold "What each knob's claim compares, and the seven verdicts":
    "Here both schedulers read slower than baseline (their effect, baseline ÷ scheduler, is
    above 1)"; evidence page, #guest-knobs, the table of each knob's reads: both
    scheduler claims' effects are above 1, and each scheduler's median (relative to the control
    drive) is below baseline's."""
    base = median(reference, "bandwidth_vs_control", experiment="guest", kernel="5.10", dt="dma-ranges", knob="baseline")
    for cid, setting in (("guest-510-mq-deadline-does-not-restore", "mq-deadline"),
                         ("guest-510-kyber-does-not-restore", "kyber")):
        effect = claims.evaluate_one(SPEC[cid], reference)["effect"]
        assert effect["estimate"] > 1, (cid, effect)
        sched = median(reference, "bandwidth_vs_control", experiment="guest", kernel="5.10", dt="dma-ranges",
                       knob="scheduler", setting=setting)
        assert sched < base, (setting, sched, base)


def test_isolcpus_cpu_takes_the_nvme_interrupts():
    """Chapter, step 10, the fold "What each knob's claim compares, and the seven verdicts":
    "The isolcpus=1 boot binds dd to the isolated CPU, which also takes its NVMe queue's
    interrupt (grep nvme /proc/interrupts)": the boot's command line isolates one
    CPU, dd runs bound to it, and between /proc/interrupts before and after the rounds the NVMe
    queues' interrupts grew on that CPU only."""
    boot = GUEST / "bullseye-dma-ranges-isolcpus"
    cpu = int(re.search(r"\bisolcpus=(\d+)\b", (boot / "cmdline.txt").read_text())[1])
    cmds = [f.read_text() for f in sorted((boot / "raw").glob("dd.*.direct.cmd"))]
    assert cmds and all(f"taskset -c {cpu} " in c for c in cmds), cmds[:1]

    def nvme(when: str) -> dict[str, list[int]]:
        text = (boot / "raw" / f"isolcpus.irq.{when}.out").read_text().splitlines()
        ncpu = len(text[0].split())
        return {l.split()[-1]: [int(x) for x in l.split()[1:1 + ncpu]] for l in text[1:] if "nvme" in l}
    before, after = nvme("before"), nvme("after")
    assert before.keys() == after.keys() and before
    grew = [sum(after[q][i] - before[q][i] for q in after) for i in range(len(next(iter(after.values()))))]
    assert grew[cpu] > 0 and sum(grew) == grew[cpu], grew


# ---- the evidence page ----------------------------------------------------------------------

def test_the_emulated_host_skipped_the_guest_group(emulated):
    """Evidence page, #guests, the warning: "qemu-arm64-tcg is itself an emulated arm64 machine
    whose quick run left the guest group out, so its tab has no guest rows": a quick run, the
    group in its left_out, no guest step and no guest measurement."""
    steps = [s for s in emulated["steps"] if s.get("group") == "guest"]
    assert emulated["run"].get("quick") and "guest" in (emulated["run"].get("left_out") or {}), emulated["run"]
    assert not steps, steps
    assert not [m for m in emulated["measurements"] if m["case"].get("experiment") == "guest"]


def test_the_control_ratio_cancels_the_drift(reference):
    """Evidence page, #control: "reads this close together see the same drift, so their ratio
    cancels the drift both see ...; it still varies from round to round (the ratio table
    below)": for every boot's rounds without a knob, the ratio's max ÷ min is smaller than
    either drive's MB/s max ÷ min, and not 1."""
    found = measurements(reference, "bandwidth_vs_control", experiment="guest", knob="none")
    assert len(found) >= 6
    for m in found:
        ratio = spread(m["samples"])
        for drive in ("nvme", "control"):
            mbs = samples(reference, "alternating_bandwidth", **m["case"], drive=drive)
            assert ratio < spread(mbs), (m["case"], drive, ratio, spread(mbs))
        assert ratio > 1, m["case"]


def test_bounced_pieces_change_from_run_to_run(reference):
    """Evidence page, #requests: "how many of its pages lie outside the window changes from run
    to run" and "How many pieces that is changes from run to run": in every boot that bounces,
    the direct reads' swiotlb_bounced counts are not all equal. (That each count is a whole
    multiple of dd's reads is test_nvme_swiotlb_record.py's.)"""
    found = [m for m in measurements(reference, "swiotlb_bounced", experiment="guest", io="direct")
             if m["case"]["dt"] in ("dma-ranges", "plain-force")]
    assert len(found) >= 3
    for m in found:
        assert len(set(m["samples"])) > 1, (m["case"], m["samples"])


def test_requests_are_reads_times_pieces_per_read(reference):
    """Evidence page, #requests: "A 1 MiB read() becomes 1 MiB ÷ max_sectors_kb requests (at
    most max_hw_sectors_kb; equal here), rounded up ...; times the reads dd made, that is the
    request count in the table above", after "Why more requests with the window?": in every
    boot, max_sectors_kb equals max_hw_sectors_kb, each direct read's completed requests are
    ⌈1024 ÷ max_sectors_kb⌉ × the reads dd made, and the window's exceed the plain tree's."""
    reads = int(job_env()["MB"])
    found = measurements(reference, "rq_complete", experiment="guest", io="direct")
    assert len(found) >= 6
    per = {}
    for m in found:
        q = queue(boot_of(m["case"]))
        assert q["max_sectors_kb"] == q["max_hw_sectors_kb"], (m["case"], q)
        assert set(m["samples"]) == {math.ceil(1024 / q["max_sectors_kb"]) * reads}, (m["case"], m["samples"], q)
        per[m["case"]["kernel"], m["case"]["dt"]] = m["samples"][0]
    for kernel in ("5.10", "6.1"):
        assert per[kernel, "dma-ranges"] > per[kernel, "plain"], per


def test_the_windows_btt_has_no_i2d():
    """Evidence page, #guest-d2c: "with the none scheduler a request usually goes straight to
    the driver, with no I event, and this trace has none, so btt has no I2D to show": btt's
    first table for the 5.10 window has no I2D (nor G2I) row, and its D2C row is there."""
    text = (GUEST / "bullseye-dma-ranges" / "raw" / "btt.btt.out").read_text()
    table = text.split("==================== Device Overhead")[0]
    rows = {l.split()[0] for l in table.splitlines() if l.strip() and l.split()[0].isalnum()}
    assert "D2C" in rows and "I2D" not in rows and "G2I" not in rows, rows


def test_host_strace_same_calls_slower_direct_calls(reference):
    """Evidence page, #host-strace: "With bs=1M both kinds of read make one read per MiB, so the
    call counts match; the difference is in the time per call": on the host, strace -c counts
    as many read calls for the buffered as for the direct read, and the direct read's time per
    call is the higher."""
    assert samples(reference, "syscalls", experiment=None, io="buffered", syscall="read") \
        == samples(reference, "syscalls", experiment=None, io="direct", syscall="read")
    assert median(reference, "time_per_call", experiment=None, io="direct", syscall="read") \
        > median(reference, "time_per_call", experiment=None, io="buffered", syscall="read")


def test_reference_lacks_function_graph_and_blktrace_relay(reference):
    """Evidence page, #host-fgraph: "on the reference host (xeon-kvm-2vcpu) function_graph is
    not among the kernel's tracers (blk function nop)"; #host-btt: "On the reference host
    (xeon-kvm-2vcpu) opening them failed with Operation not permitted": the reference's fgraph
    step was skipped with that tracer list, and its blktrace step with that error."""
    assert reference["host"]["label"] == "xeon-kvm-2vcpu"
    steps = {s["name"]: s for s in reference["steps"]}
    fgraph, blk = steps["fgraph"], steps["btt.blktrace"]
    assert fgraph["status"] == "skipped" and blk["status"] == "skipped", (fgraph, blk)
    tracers = re.search(r"available_tracers \(([^)]*)\)", fgraph["reason"])[1].split()
    assert "function_graph" not in tracers and set(tracers) == {"blk", "function", "nop"}, tracers
    assert "Operation not permitted" in blk["reason"], blk["reason"]


EVENT = re.compile(r"^\s*(.+?)-(\d+)\s+\[\d+\]\s+\S+\s+[\d.]+:\s+(\w+):\s*(.*)$")


def test_each_direct_read_is_a_cycle_in_the_host_events(result):
    """Evidence page, #host-events: "Each direct read is a cycle: dd issues a request and sleeps
    (prev_state=D); the device completes it (often in interrupt context, so another task's name
    is on that line)", and "another task can preempt dd before it sleeps (prev_state=R+), and
    the read can then complete before dd runs again": in the lab's trace, between each of dd's
    block_rq_issue events and the next, dd is switched out sleeping (prev_state=D), or else
    preempted (R or R+) first; any switch before the sleep is a preemption; most
    block_rq_complete lines carry another task's name than dd's, on both hosts' tabs. (That dd is switched back in is in the trace
    only for the cycles whose events it holds, as the page says: the wakeup row's n.)"""
    trace = ROOT / "results" / result["host"]["label"] / "nvme_swiotlb" / "raw" / "events.trace.out"
    events = [m.groups() for m in map(EVENT.match, trace.read_text().splitlines()) if m]
    issued = slept = preempted = completes = others = 0
    pending = was_preempted = False
    for task, _pid, event, rest in events:
        if event == "block_rq_issue" and task == "dd":
            preempted += pending and was_preempted
            assert not pending or was_preempted, "a read with neither a sleep nor a preemption"
            issued, pending, was_preempted = issued + 1, True, False
        elif event == "sched_switch" and "prev_comm=dd " in rest and pending:
            if "prev_state=D " in rest:
                slept, pending = slept + 1, False
            else:
                assert re.search(r"prev_state=R\+? ", rest), rest
                was_preempted = True
        elif event == "block_rq_complete":
            completes, others = completes + 1, others + (task != "dd")
    preempted += pending and was_preempted
    assert issued and slept + preempted == issued and completes == issued, (issued, slept, preempted, completes)
    assert others > completes / 2, (others, completes)


def test_disk_ios_take_longer_so_the_model_predicts_less_loss(reference):
    """Evidence page, #bounce-model: "From the disk file each I/O takes longer, so the
    copy-time model predicts a smaller loss": at every block size the disk file's direct
    throughput is below tmpfs's, and the copy-time model's slowdown is below tmpfs's."""
    blocks = sorted({m["case"]["block"] for m in measurements(reference, "bounce_bandwidth", target="disk")})
    assert blocks
    for b in blocks:
        assert median(reference, "bounce_bandwidth", target="disk", block=b, mode="direct") \
            < median(reference, "bounce_bandwidth", target="tmpfs", block=b, mode="direct"), b
        assert median(reference, "bounce_slowdown", target="disk", block=b, source="copy-time model") \
            < median(reference, "bounce_slowdown", target="tmpfs", block=b, source="copy-time model"), b


def test_each_boot_gives_one_value_the_median_of_its_reads(reference):
    """Evidence page, #boots: "each configuration boots five times ... and each boot gives one
    value, the median of its three direct dd reads (`boot_bandwidth`) and the median of its five
    rounds against the control drive (`boot_vs_control`)": recomputed from every boot's raw
    outputs (dd's own summary lines, alternate.py's JSON lines), in run order, five a
    configuration."""
    from labkit.parsers.dd import dd_summary
    from labkit.parsers.jsonline import json_lines
    from labkit.record import read_steps
    from labkit import steps as step_records
    types = step_records.declared(LAB)
    want: dict[tuple, list[float]] = {}
    for s in sorted((s for s in reference["steps"] if s.get("case", {}).get("tool") == "labkit.guest" and s["status"] == "ok"),
                    key=lambda s: s["case"].get("rep", 0)):
        d = RAW.parent / s["case"]["out"]
        steps = [g for g in read_steps(d, types) if g["status"] == "ok" and "case" in g]
        dd = [dd_summary((d / "raw" / f"{g['name']}.err").read_text())["mb_per_s"] for g in steps
              if g["case"].get("tool") == "dd" and g["case"].get("io") == "direct"]
        ratios = [r["ratio"] for g in steps if g["case"].get("tool") == "alternate" and "setting" not in g["case"]
                  for r in json_lines((d / "raw" / f"{g['name']}.out").read_text(), "alternate")]
        assert len(dd) == 3 and len(ratios) == 5, (s["name"], len(dd), len(ratios))
        key = (s["case"]["dt"], s["case"].get("boot_args"))
        want.setdefault(("boot_bandwidth", s["case"]["release"]) + key, []).append(statistics.median(dd))
        want.setdefault(("boot_vs_control", s["case"]["release"]) + key, []).append(statistics.median(ratios))
    assert want and all(len(v) == 5 for v in want.values()), {k: len(v) for k, v in want.items()}
    kernel = {"bullseye": "5.10", "bookworm": "6.1"}
    for (metric, release, dt, boot_args), values in want.items():
        (m,) = [m for m in measurements(reference, metric, experiment="guest", kernel=kernel[release], dt=dt)
                if m["case"].get("boot_args") == boot_args]
        assert m["samples"] == pytest.approx(values), (metric, release, dt, boot_args)


def test_the_reference_guests_decide_the_root_cause_from_their_counts(reference):
    """The lab test's quick guest run boots each configuration once and checks the counts
    (test_nvme_swiotlb_lab.py); the verdicts, which need five boots a side, are the reference's:
    on it, for 5.10 and 6.1, the count claims hold (bounces on every request and swiotlb under
    read() only with the 1 GiB window, none with the widened tree, whose window covers all RAM)
    and so does each kernel's control claim (direct reads with the window slower than the
    control's)."""
    for cid in ("guest-510-reads-bounce-throughout", "guest-510-bounces-only-with-window", "guest-510-swiotlb-under-read",
                "guest-510-wide-window-covers-ram", "guest-510-wide-window-no-bounces", "guest-510-control-sees-the-window",
                "guest-61-control-sees-the-window", "guest-61-bounces-only-with-window", "guest-61-swiotlb-under-read",
                "guest-61-wide-window-no-bounces"):
        assert claims.evaluate_one(SPEC[cid], reference)["verdict"] == "holds", cid
