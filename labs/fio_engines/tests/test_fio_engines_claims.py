"""The fio_engines chapter's data files: every claim names the original conclusion it tests and
can fail (and can hold); the original's tables, with the arithmetic their notes rely on; the
exercises; record.py's reading of pidstat on a real pidstat output; the page's switch for the
original group. No lab run: the inputs are the committed reference result (with samples
borrowed from its own real measurements where a claim needs a job the reference predates) and
real tool outputs in tests/fixtures/."""

from __future__ import annotations

import copy
import importlib.util
import re
from pathlib import Path

import pytest

from labkit.stats import claims
from labkit import model
from derived import validate_derived
from labkit import original as original_mod
from test_claims_failable import derive
import refhost

ROOT = Path(__file__).resolve().parents[3]
LAB = ROOT / "labs" / "fio_engines"
REFERENCE = refhost.result("fio_engines")
SPEC = claims.load(LAB / "claims.toml")
ORIG = original_mod.load(LAB / "original.toml")
EXERCISES = claims.load_exercises(LAB / "exercises.toml")
KIB, MIB = 1024, 2**20

# A metric the reference predates → a metric of the reference whose real samples stand in for it
# (only their spread matters to derive(): it rescales them past the claim's threshold).
STAND_IN = {"cpu_pct": "sys_cpu", "rss": "sys_cpu", "strace_usecs": "clat_p50", "slat_mean": "clat_p50",
            "job_cpu": "sys_cpu", "bios_per_request": "requests_per_io"}


def record_module():
    spec = importlib.util.spec_from_file_location("fio_engines_record", LAB / "record.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def reference():
    return model.load(REFERENCE)


def _borrow(reference: dict, metric: str) -> tuple[list[float], str]:
    """Real samples (and unit) of ``metric``, or of its stand-in, from the reference: the first
    measurement with at least three positive samples."""
    name = metric if any(m["metric"] == metric for m in reference["measurements"]) else STAND_IN[metric]
    m = next(m for m in reference["measurements"] if m["metric"] == name and sum(s > 0 for s in m["samples"]) >= 3)
    return [s for s in m["samples"] if s > 0], m["unit"]


def _seeded(reference: dict, claim: dict) -> dict:
    """The reference, plus a measurement (borrowed samples) for each side of ``claim`` it lacks
    (the reference's own measurements are shared, not copied: :func:`derive` copies what it changes)."""
    r = {**reference, "measurements": list(reference["measurements"])}
    metric = claim["metric"]
    if claim["kind"] == "increasing":
        over, where = claim["over"], claim["where"]
        if len([m for m in claims.select(r, metric, where) if over in m["case"]]) < 2:
            xs = sorted({m["case"][over] for m in r["measurements"] if m["metric"] == metric and over in m["case"]})
            samples, unit = _borrow(r, metric)
            r["measurements"] += [model.measurement(metric, unit, {**where, over: x}, samples) for x in xs]
        return r
    for side in ("a", "b"):
        if not claims.select(r, metric, claim[side]):
            samples, unit = _borrow(r, metric)
            r["measurements"].append(model.measurement(metric, unit, claim[side], samples))
    return r


@pytest.mark.parametrize("claim", SPEC, ids=[c["id"] for c in SPEC])
@pytest.mark.parametrize("want", ["fails", "holds"])
def test_claim_can_fail_and_hold(claim, want, reference):
    r = derive(claim, _seeded(reference, claim), want)
    validate_derived(r, claim)
    v = claims.evaluate_one(claim, r)
    assert v["verdict"] == want, v


def test_the_claims_of_the_originals_effect_sizes_are_there():
    # every claim's source is the shared contract's (tests/test_claims_contract.py); the claims that carry the original's effect sizes are all there
    ids = {c["id"] for c in SPEC}
    assert {"libaio-beats-psync-at-iodepth-1", "buffered-writes-beat-direct",
            "bandwidth-grows-with-block-size", "fewer-requests-with-4m-blocks", "holes-read-faster"} <= ids


def test_the_elevator_is_tested_where_requests_can_merge():
    """The elevator conclusion is tested on sequential writes with more than one in flight (where
    requests can merge), and the deep-queue comparison is ours, not the original's conclusion.
    (Roles and conclusions of every lab: tests/test_claims_contract.py.)"""
    by_id = {c["id"]: c for c in SPEC}
    elevator = [c for c in SPEC if c.get("conclusion") == "elevator"]
    assert elevator and all(c["metric"] == "bios_per_request" and c["a"]["iodepth"] > 1 for c in elevator)
    assert by_id["libaio-deep-queue-beats-psync"]["role"] != "conclusion"


def test_statements_do_not_read_strace_c_as_time_in_the_call():
    """strace -c without -w counts system CPU time: a statement that uses its figures says so."""
    for c in SPEC:
        if c.get("metric") == "strace_usecs":
            assert "system CPU time" in c["statement"], c["id"]


def test_factors_come_from_the_original_tables():
    """The statement's "the original: A vs B" figures are the published cells, and the factor
    asked for is no larger than the original's own ratio (so the original passes its own claim)."""
    by_id = {c["id"]: c for c in SPEC}
    ratios = {q["id"]: original_mod.original_ratio(ORIG, q)[0] for q in ORIG["ratio"]}
    pairs = {"libaio-beats-psync-at-iodepth-1": "libaio-vs-psync-iops",
             "libaio-gains-from-iodepth-2": "libaio-iodepth",
             "buffered-writes-beat-direct": "buffered-vs-direct-iops",
             "buffered-completes-more-requests": "rq-buffered-vs-direct",
             "fewer-requests-with-4m-blocks": "rq-4k-vs-4m",
             "shmdt-slower-with-4m-blocks": "strace-shmdt",
             "sleeps-shorter-with-4m-blocks": "strace-sleep"}
    for cid, rid in pairs.items():
        c = by_id[cid]
        assert c["factor"] <= ratios[rid], (cid, c["factor"], ratios[rid])
        q = next(q for q in ORIG["ratio"] if q["id"] == rid)
        _, ta, tb = original_mod.original_ratio(ORIG, q)
        for cell in (ta, tb):  # the published figure (strace cells: usecs/call before the slash)
            assert cell.split("/")[0] in c["statement"], (cid, cell)
    # psync's "no change": the original's ratio is exactly 1 (fio caps a synchronous engine at iodepth 1)
    assert ratios["psync-iodepth"] == 1.0


# ---- the original's tables and the arithmetic their notes state ------------------------------

def _num(table: str, row: str, col: str) -> float:
    t = original_mod.table(ORIG, table)
    return original_mod.cell_number(original_mod.cell(t, [row, col], table))


@pytest.mark.parametrize("table, col, bs", [
    ("engines", "libaio", 4 * KIB), ("engines", "psync", 4 * KIB),
    ("iodepth", "libaio, iodepth 1", 4 * KIB), ("iodepth", "psync, iodepth 1", 4 * KIB),
    ("iodepth", "psync, iodepth 2", 4 * KIB),
    ("buffered", "non-buffered", 4 * KIB), ("buffered", "buffered", 4 * KIB),
    ("blocksize", "1k", KIB), ("blocksize", "4k", 4 * KIB), ("blocksize", "4M", 4 * MIB),
])
def test_published_iops_times_block_size_is_the_published_bandwidth(table, col, bs):
    """Why the notes call the IOPS row thousands and the jobs 4 KiB writes."""
    iops = _num(table, "IOPS (thousands)", col) * 1000
    assert iops * bs / MIB == pytest.approx(_num(table, "wMiB/s", col), rel=0.01)


def test_the_one_published_bandwidth_that_does_not_add_up():
    iops = _num("iodepth", "IOPS (thousands)", "libaio, iodepth 2") * 1000
    published = _num("iodepth", "wMiB/s", "libaio, iodepth 2")
    assert round(iops * 4 * KIB / MIB) != round(published)
    assert "not 180" in original_mod.table(ORIG, "iodepth")["note"]


def test_count_notes_arithmetic():
    count_ratio = _num("rq-engines", "libaio", "block_rq_complete (times)") / _num("rq-engines", "psync", "block_rq_complete (times)")
    iops_ratio = _num("engines", "IOPS (thousands)", "libaio") / _num("engines", "IOPS (thousands)", "psync")
    assert count_ratio / iops_ratio == pytest.approx(2, rel=0.05)  # "twice the IOPS ratio"
    seconds = _num("rq-engines", "libaio", "block_rq_complete (times)") / (_num("engines", "IOPS (thousands)", "libaio") * 1000)
    assert round(seconds * 1000) == 41  # "1424 completions are 41 ms of I/O"


def test_strace_note_arithmetic():
    t = original_mod.table(ORIG, "strace")
    cells = {c: original_mod.cell(t, ["nanosleep", c], "strace") for c in ("1k", "4M")}
    usecs, calls = (float(x) for x in cells["1k"].split("/"))
    assert round(usecs * calls / 1e6) == 23
    usecs, calls = (float(x) for x in cells["4M"].split("/"))
    assert round(usecs * calls / 1e6, 2) == 0.84


def test_original_machine_and_kernel_are_said_to_be_unknown():
    assert ORIG["machine"] and all(m["kernel"] == "not given" for m in ORIG["machine"])
    assert "/" not in ORIG["source"]["seed"]


# ---- exercises ----------------------------------------------------------------------------

def test_exercises_are_two_to_four_and_each_can_go_either_way(reference):
    assert 2 <= len(EXERCISES) <= 4
    for ex in EXERCISES:
        c = claims.exercise_claim(ex)
        for want in ("fails", "holds"):
            r = derive(c, _seeded(reference, c), want)
            validate_derived(r, c)
            assert claims.evaluate_one(c, r)["verdict"] == want, (ex["id"], want)


# ---- record.py: pidstat ---------------------------------------------------------------------

FIX = ROOT / "tests" / "fixtures" / "pidstat"


def test_pidstat_fixture_has_its_command():
    assert (FIX / "original-psync-qd1.cmd").exists()


def test_pidstat_lines_keep_whole_command_lines():
    rec = record_module()
    rows = rec.pidstat_lines((FIX / "original-psync-qd1.txt").read_text())
    assert rows and all(r["command"].split()[0] in ("fio", "perf") for r in rows)
    assert any(r["command"].startswith("perf stat") for r in rows)  # -C matched perf stat too
    assert all("--aux-path=" in r["command"] for r in rows if r["command"].startswith("fio"))


def test_fio_process_means_use_fios_lines_after_each_first():
    rec = record_module()
    rows = rec.pidstat_lines((FIX / "original-psync-qd1.txt").read_text())
    means = rec.fio_process_means(rows)
    fio = [r for r in rows if r["command"].startswith("fio")]
    total = {}
    for r in fio:
        total[r["pid"]] = total.get(r["pid"], 0) + r["cpu"]
    top = max(total, key=total.get)
    later = [r for r in fio if r["pid"] == top][1:]
    assert means["intervals"] == len(later) >= 1
    assert means["busiest_cpu"] == pytest.approx(sum(r["cpu"] for r in later) / len(later))
    assert means["all_cpu"] >= means["busiest_cpu"]
    # perf's line is never counted: the same rows without it give the same means
    assert rec.fio_process_means(fio) == means


def test_fio_process_means_none_without_a_full_interval():
    rec = record_module()
    rows = rec.pidstat_lines((FIX / "original-psync-qd1.txt").read_text())
    first = min(r["time"] for r in rows)
    assert rec.fio_process_means([r for r in rows if r["time"] == first]) is None


def test_pidstat_line_before_header_is_an_error():
    rec = record_module()
    text = (FIX / "original-psync-qd1.txt").read_text().splitlines()
    data = next(line for line in text if re.match(r"^\d", line))
    with pytest.raises(ValueError):
        rec.pidstat_lines(data)


# ---- the page ---------------------------------------------------------------------------------

def test_page_switch_matches_the_reference(reference):
    """The page shows the original group's tables exactly when the reference result has them:
    a rerun that adds the group must also turn the switch on."""
    page = (ROOT / "docs" / "cases" / "fio_engines.md").read_text()
    m = re.search(r"\{% set original_group_in_results = (true|false) %\}", page)
    assert m, "the page lost its original_group_in_results switch"
    has = any(m_["case"].get("experiment") == "original" for m_ in reference["measurements"])
    assert (m.group(1) == "true") == has


# ---- the recast claims on hand-built results ------------------------------------------------
# Sides built from the reference's own samples (scaled, reversed), never typed.

def _claim(cid: str) -> dict:
    return next(c for c in SPEC if c["id"] == cid)


def _two_sides(reference: dict, claim: dict, a: list[float], b: list[float]) -> dict:
    r = copy.deepcopy(reference)
    unit = claims.select(reference, claim["metric"], claim["b"])[0]["unit"]
    r["measurements"] = [model.measurement(claim["metric"], unit, claim["a"], a),
                         model.measurement(claim["metric"], unit, claim["b"], b)]
    return r


def test_sparse_metadata_is_read_at_fsync_1(reference):
    """The sparse file's metadata shows as extra requests only when each write is followed by an
    fsync (the journal commits every allocation before it returns): the claim reads the lab's
    fsync=1 rows, which the committed run has, and holds where the sparse file costs more
    requests per write and fails where it costs the same."""
    c = _claim("sparse-writes-cost-more-requests")
    assert c["a"]["fsync"] == c["b"]["fsync"] == 1 and c["paired"] is True
    assert claims.select(reference, c["metric"], c["a"]) and claims.select(reference, c["metric"], c["b"])
    regular = claims.select(reference, c["metric"], c["b"])[0]["samples"]
    f = float(c["factor"])
    more = _two_sides(reference, c, [x * 1.1 * f for x in regular], list(regular))
    assert claims.evaluate_one(c, more)["verdict"] == "holds"
    same = _two_sides(reference, c, list(regular[::-1]), list(regular))
    assert claims.evaluate_one(c, same)["verdict"] == "fails"


def test_the_fsync_0_rows_cannot_show_the_metadata(reference):
    """Why the claim moved to fsync=1: on the reference, the same comparison without fsync is
    below the factor (jbd2 gathers a transaction's allocations into one commit)."""
    c = dict(_claim("sparse-writes-cost-more-requests"))
    c["a"], c["b"] = {**c["a"], "fsync": 0}, {**c["b"], "fsync": 0}
    assert claims.evaluate_one(c, reference)["verdict"] == "fails"


def test_buffered_claim_says_it_has_no_flush():
    """The buffered job runs without end_fsync: the claim says it measures the page cache's
    intake, the note's comparison, not a fair one."""
    text = _claim("buffered-writes-beat-direct")["statement"]
    assert "without a flush" in text and "end_fsync" in text


def _sides(claim: dict, a: list[float], b: list[float], unit: str) -> dict:
    """The reference with only ``claim``'s two sides, as measurements with these samples."""
    r = copy.deepcopy(model.load(REFERENCE))
    r["measurements"] = [model.measurement(claim["metric"], unit, claim["a"], a),
                         model.measurement(claim["metric"], unit, claim["b"], b)]
    return r


def _reference_samples(metric: str, where: dict) -> tuple[list[float], str]:
    m = claims.select(model.load(REFERENCE), metric, where)[0]
    return list(m["samples"]), m["unit"]


@pytest.mark.parametrize("cid", ["libaio-queue-merges-writes", "libaio-batching-merges-writes"])
def test_elevator_claims_read_batched_submission(cid):
    """The elevator is tested where 32 writes reach the kernel in one io_submit
    (iodepth_batch_submit = iodepth_batch_complete_min = 32, case batch=32); fio's default of one
    write per io_submit (batch=1) is the batching claim's other side. Each holds where the batched
    job issues more bios per request and fails where it issues as many (samples: the reference's
    own psync job, rescaled)."""
    c = _claim(cid)
    assert c["a"]["batch"] == c["a"]["iodepth"] == 32
    assert "iodepth_batch_submit=32" in c["statement"] and "iodepth_batch_complete_min" in c["statement"]
    if cid == "libaio-batching-merges-writes":
        assert c["b"] == {**c["a"], "batch": 1} and c["paired"] is True
        assert "iodepth_batch_submit=1" in c["statement"]
    else:
        assert all(k in c["statement"] for k in ("scheduler", "max_sectors_kb", "max_segments", "nr_requests", "aqu-sz"))
    base, unit = _reference_samples(c["metric"], _claim("libaio-queue-merges-writes")["b"])
    f = float(c["factor"])
    for want, k in (("holds", 1.1 * f), ("fails", 1.0)):
        r = _sides(c, [x * k for x in base[::-1]], base, unit)
        assert claims.evaluate_one(c, r)["verdict"] == want


def test_the_unbatched_job_alone_no_longer_decides_the_elevator():
    """No claim reads fio's default job at iodepth 32 on its own any more: without the batched
    job's measurements (the reference, less them) the recast claims are untested; the
    reference itself decides them."""
    ref = model.load(REFERENCE)
    bare = {**ref, "measurements": [m for m in ref["measurements"] if m["case"].get("batch") != 32]}
    for cid in ("libaio-queue-merges-writes", "libaio-batching-merges-writes"):
        assert claims.evaluate_one(_claim(cid), bare)["verdict"] == "untested"
        assert claims.evaluate_one(_claim(cid), ref)["verdict"] in ("holds", "fails")


def test_buffered_against_direct_with_the_flush():
    """The fair comparison: both jobs end with end_fsync=1 (fio's IOPS then include the flush),
    run back to back in their own experiment (no selector of the note's unflushed jobs pools
    them), and the statement gives the page cache's state at each job's start. It holds where
    the buffered job does the factor more IOPS and fails where the two do the same (samples:
    the reference's direct job, rescaled); the reference predates it (untested)."""
    c = _claim("buffered-writes-beat-direct-with-flush")
    assert c["role"] == "conclusion" and c["conclusion"] == "buffered-faster" and c["paired"] is True
    assert c["a"]["end_fsync"] == c["b"]["end_fsync"] == 1
    assert c["a"]["experiment"] == c["b"]["experiment"] != "original"
    assert {c["a"]["io"], c["b"]["io"]} == {"buffered", "direct"}
    assert "end_fsync=1" in c["statement"] and "invalidate=1" in c["statement"]
    base, unit = _reference_samples("iops", {k: v for k, v in c["b"].items() if k not in ("experiment", "end_fsync")}
                                    | {"experiment": "original"})
    f = float(c["factor"])
    # run by run: the buffered job the factor (and a margin) ahead of the direct job beside it, or level
    for want, k in (("holds", 1.1 * f), ("fails", 1.0)):
        assert claims.evaluate_one(c, _sides(c, [x * k for x in base], base, unit))["verdict"] == want
    ref = model.load(REFERENCE)
    bare = {**ref, "measurements": [m for m in ref["measurements"] if m["case"].get("end_fsync") != 1]}
    assert claims.evaluate_one(c, bare)["verdict"] == "untested"


def layout_file_problems(result: dict) -> list[str]:
    """What breaks the layout experiment's design in ``result``: every fio job of the layout
    experiment must run on a file made new for it, of its layout, by the step ``<job>.make`` just
    before it (the written file by ``prepare.fio``, the sparse one by ``truncate``, the
    fallocated one by ``fallocate``), never on the lab's target file, so that each repetition
    places its file anew on the disk below. Returns one line per fault (empty: the design holds)."""
    steps = result["steps"]
    names = {s["name"]: s for s in steps}
    maker = {"regular": "prepare.fio", "sparse": "truncate -s", "fallocated": "fallocate -l"}
    out = []
    for s in steps:
        case = s.get("case") or {}
        if case.get("experiment") != "layout" or case.get("tool") != "fio" or s["status"] != "ok":
            continue
        job_file = re.search(r"FIO_FILE=(\S+)", s["command"]).group(1)
        make = names.get(s["name"] + ".make")
        if make is None or make["status"] != "ok":
            out.append(f"{s['name']}: no file made for it")
        elif maker[case["layout"]] not in make["command"] or job_file not in make["command"]:
            out.append(f"{s['name']}: {make['name']} did not make {job_file} as a {case['layout']} file: {make['command']}")
        elif job_file.endswith("/data.dat"):
            out.append(f"{s['name']}: runs on the lab's target file")
    return out


def test_every_layout_job_gets_a_new_file_in_the_reference(reference):
    """The committed reference ran the layout experiment with a new file of its layout before
    every job, the written one included."""
    assert layout_file_problems(reference) == []


def test_a_layout_job_on_the_target_file_is_caught(reference):
    """The check fails on the design it replaced: the written file's jobs on the target, with
    no file made for them."""
    r = copy.deepcopy(reference)
    target = "/tmp/pcb-fio_engines.1/data.dat"
    kept = []
    for s in r["steps"]:
        if s["name"].startswith("layout.regular.") and s["name"].endswith(".make"):
            continue
        if (s.get("case") or {}).get("layout") == "regular" and (s.get("case") or {}).get("tool") == "fio":
            s["command"] = re.sub(r"FIO_FILE=\S+", f"FIO_FILE={target}", s["command"])
        kept.append(s)
    r["steps"] = kept
    problems = layout_file_problems(r)
    assert problems and all("regular" in p and "no file made" in p for p in problems), problems
