"""The lat_tcp chapter's data files: every claim can fail (and can hold), each has a role and names
the original conclusion it tests, every conclusion is tested or says why it cannot be, the
original's tables give the ratios the page quotes, and record.py reads each step's case (never its
name). No lab run: the inputs are the committed reference result and its raw outputs, with samples
scaled from real ones where a claim needs a placement the host lacks, and run directories built
here from those raw outputs."""

from __future__ import annotations

import copy
import gzip
import importlib.util
import json
import math
import re
import shutil
import statistics
import tomllib
from pathlib import Path

import pytest

from labkit.stats import claims
from labkit import model
from labkit.record import Run
import refhost

ROOT = Path(__file__).resolve().parents[3]
LAB = ROOT / "labs" / "lat_tcp"
REFERENCE = refhost.result("lat_tcp").parent   # results/<host>/ of lat_tcp's reference
FIXTURES = ROOT / "tests" / "fixtures"
SPEC = claims.load(LAB / "claims.toml")
ORIGINAL = tomllib.loads((LAB / "original.toml").read_text())
EXERCISES = claims.load_exercises(LAB / "exercises.toml")


@pytest.fixture(scope="module")
def reference():
    return model.load(REFERENCE / "lat_tcp.json")


def _load_record():
    spec = importlib.util.spec_from_file_location("lat_tcp_record", LAB / "record.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def rerecorded(reference, tmp_path_factory):
    """The reference run's raw outputs turned into measurements by the current record.py
    (in a temporary copy: results/ is never written). Needs a reference recorded since steps
    carry their case (raw/<step>.case); an older one is stale for this lab's code."""
    if not any(s.get("case") for s in reference["steps"]):
        pytest.skip("the reference result predates step cases (raw/<step>.case): re-record it with labs/lat_tcp/run.sh")
    run_dir = tmp_path_factory.mktemp("lat_tcp") / "run"
    shutil.copytree(REFERENCE / "lat_tcp", run_dir)
    run = Run("lat_tcp", run_dir, quick=False)
    _load_record().collect(run)
    r = copy.deepcopy(reference)
    r["measurements"] = run.measurements
    r["artifacts"] = run.artifacts
    return r, run_dir


def _base_samples(reference) -> list[float]:
    """Real samples to build synthetic sides from: the reference's pinned same-CPU run."""
    m = next(m for m in reference["measurements"]
             if m["case"].get("experiment") == "pinned" and m["case"].get("pin") == "same-cpu")
    return m["samples"]


def _with(reference, *sides) -> dict:
    """A copy of ``reference`` whose measurements are only ``sides``: (case, samples) pairs."""
    r = copy.deepcopy(reference)
    r["measurements"] = [model.measurement("round_trip", "us", dict(case), samples) for case, samples in sides]
    return r


def _scaled(samples, k):
    return [x * k for x in samples]


def _narrow(samples: list[float], factor: float) -> list[float]:
    """``samples`` with their spread (max/min) narrowed to at most sqrt(factor), around their
    median (unchanged when already that narrow): any ratio of two such samples, hence any
    bootstrap ratio of two sides drawn from them, lies within 1/factor..factor."""
    m = statistics.median(samples)
    spread = max(samples) / min(samples)
    if spread <= math.sqrt(factor):
        return list(samples)
    t = math.log(math.sqrt(factor)) / math.log(spread)
    return [m * (x / m) ** t for x in samples]


def _case(selector: dict) -> dict:
    """A full case matching ``selector`` (claims match on a subset of case keys)."""
    return {"tool": "lat_tcp", "msize": 1, **selector}


def _sides(claim, reference, wrong: bool) -> dict:
    """A result on which ``claim`` clearly holds (wrong=False) or clearly fails (wrong=True):
    the two sides' sample ranges never overlap, so no noise rule can call it a draw."""
    s = _base_samples(reference)
    a, b = _case(claim["a"]), _case(claim["b"])
    f = float(claim.get("factor", 1.0))
    far = 3 * f  # well beyond the claimed factor
    if claim["kind"] == "within":  # max(a/b, b/a) ≤ f: the same samples agree, 3f apart do not
        # independent sides are resampled independently: narrowed so that the real samples'
        # own spread cannot carry the interval of a/b past f when both sides are the same
        s = _narrow(s, f)
        return _with(reference, (a, s), (b, _scaled(s, far if wrong else 1.0)))
    rel = claim["relation"]
    if rel == "less":  # a·f < b
        return _with(reference, (a, s), (b, _scaled(s, 1 / far if wrong else far)))
    if rel == "greater":  # a > b·f
        return _with(reference, (a, _scaled(s, 1 / far if wrong else far)), (b, s))
    if rel == "not_less":  # a ≥ b/f
        return _with(reference, (a, _scaled(s, 1 / far if wrong else far)), (b, s))
    raise AssertionError(rel)


@pytest.mark.parametrize("claim", [c for c in SPEC if c["kind"] != "step"], ids=lambda c: c["id"])
def test_claim_can_fail_and_can_hold(claim, reference):
    """On a host that has what the claim ``requires`` (SMT for the sibling claims)."""
    results = [_sides(claim, reference, wrong=w) for w in (False, True)]
    for r in results:
        r["host"].update(claim.get("requires") or {})
    holds, fails = (claims.evaluate_one(claim, r) for r in results)
    assert holds["verdict"] == "holds", holds
    assert fails["verdict"] == "fails", fails


@pytest.mark.parametrize("claim", [c for c in SPEC if c.get("requires")], ids=lambda c: c["id"])
def test_a_claim_about_smt_is_not_applicable_on_a_host_without_it(claim, reference):
    r = _sides(claim, reference, wrong=False)
    r["host"]["smt"] = False
    v = claims.evaluate_one(claim, r)
    assert (v["verdict"], v["reason"]) == ("not applicable", "needs a host with smt = true; this host has smt = false")


def test_no_server_claim_fails_when_the_client_prints_a_number(reference):
    claim = next(c for c in SPEC if c["id"] == "no-server-no-number")
    assert claims.evaluate_one(claim, reference)["verdict"] == "holds"
    printed = copy.deepcopy(reference)
    step = next(s for s in printed["steps"] if s["name"] == "noserver")
    step["stdout_bytes"] = len((REFERENCE / "lat_tcp" / "raw" / "free.out").read_bytes())
    assert claims.evaluate_one(claim, printed)["verdict"] == "fails"
    exited_zero = copy.deepcopy(reference)
    step = next(s for s in exited_zero["steps"] if s["name"] == "noserver")
    step.update(status="failed", exit_code=0, reason="expected to fail, exited 0")
    assert claims.evaluate_one(claim, exited_zero)["verdict"] == "fails"


@pytest.mark.parametrize("claim", SPEC, ids=lambda c: c["id"])
def test_claim_says_whether_it_is_about_speed(claim):
    assert claim["timing"] is (claim["kind"] != "step"), "round trips are time; the no-server step is behaviour"


CONCLUSIONS = {c["id"]: c for c in ORIGINAL["conclusion"]}


def test_the_no_server_trap_and_the_placement_order_are_tested():
    """Roles and the coverage of the original's conclusions are the shared contract's
    (tests/test_claims_contract.py); here, that these two are tested, not only described."""
    tested = {c["conclusion"] for c in SPEC if c["role"] == "conclusion"}
    assert {"no-server-measures", "placement-order"} <= tested


def test_conclusions_quote_the_originals_figures():
    """The punchline (SDP2 at 0.50 of the Xeon at the fair placement) is a conclusion, with the
    figures of the pinned tables; no conclusion or claim repeats the notes' SMT error."""
    tables = {t["id"]: t for t in ORIGINAL["table"]}
    fair = CONCLUSIONS["fair-placement"]
    assert "25.4529" in fair["text"] and "12.8296" in fair["text"] and "0.50" in fair["text"] and "0.72" in fair["text"]
    assert fair["untestable"]
    assert _cell(tables["pinned-sdp2"], "ratio to 2699", "other CPU #") == 0.50
    order = CONCLUSIONS["placement-order"]["text"]
    for cell in ("17.1367", "19.7576", "25.4529", "8.2153", "11.3579", "12.8296"):
        assert cell in order
    texts = [c["text"] for c in ORIGINAL["conclusion"]] + [c["statement"] for c in SPEC] + [c["source"] for c in SPEC]
    assert not any("but the execution units" in t for t in texts)


def test_claims_do_not_say_we_reproduce_benchmp():
    """Our timing is our own: no claim says it is lmbench's benchmp."""
    for c in SPEC:
        assert "benchmp" not in c["statement"] + c["source"], c["id"]


def test_claim_keys_exist_in_what_the_lab_records(rerecorded):
    """Every selector key of a claim or exercise is a case key the lab records (values such as
    pin = smt-sibling may be absent on a host, keys may not)."""
    r, _ = rerecorded
    keys = {k for m in r["measurements"] for k in m["case"]}
    metrics = {m["metric"] for m in r["measurements"]}
    checks = [c for c in SPEC if c["kind"] != "step"] + [dict(e["check"]) for e in EXERCISES]
    for c in checks:
        assert c["metric"] in metrics, c
        for sel in (c.get("a"), c.get("b"), c.get("where")):
            assert set(sel or {}) <= keys, (c, sel)


def test_record_keeps_the_round_trip_under_perf(rerecorded, reference):
    """Under perf record -g and in the untraced runs beside it, each sample is the median the
    client printed, in repetition order."""
    r, run_dir = rerecorded
    perf = [m for m in r["measurements"] if m["case"].get("experiment") == "perf"]
    assert {m["case"]["traced"] for m in perf} == {"perf record -g", "none"}
    assert {m["case"]["pin"] for m in perf} >= {"same-cpu"}
    for m in perf:
        steps = [s for s in reference["steps"] if s["status"] == "ok" and s.get("case")
                 and {k: v for k, v in s["case"].items() if k != "rep"} == m["case"]]
        printed = [next(json.loads(line) for line in (run_dir / "raw" / f"{s['name']}.out").read_text().splitlines()
                        if line.startswith("{"))["median"] for s in steps]
        assert m["samples"] == printed


def test_rerecording_changes_nothing_else(reference, rerecorded):
    """record.py gives back the reference's measurements and artifacts, all but the run's
    terminal recording: that one is added after recording, by `labkit attach-cast`."""
    r, _ = rerecorded
    assert r["measurements"] == reference["measurements"]
    assert not [a for a in r["artifacts"] if a["kind"] == "cast"], "record.py does not attach the cast"
    assert r["artifacts"] == [a for a in reference["artifacts"] if a["kind"] != "cast"]


# ---- record.py on a run directory built here: cases, not names ------------------------------

def _fake_run(tmp_path, steps) -> Path:
    """A run directory with ``steps``: (name, status, expect, case or None, {ext: text}) each.
    Names are deliberately meaningless: record.py must not read them."""
    run_dir = tmp_path / "run"
    (run_dir / "raw").mkdir(parents=True)
    shutil.copy(REFERENCE / "lat_tcp" / "host.json", run_dir / "host.json")
    lines = []
    for name, status, expect, case, files in steps:
        lines.append("\t".join([name, "g", status, "0", "1.0", expect, "" if status == "ok" else "why"]))
        (run_dir / "raw" / f"{name}.cmd").write_text("true")
        for ext, text in files.items():
            (run_dir / "raw" / f"{name}.{ext}").write_text(text)
        if case is not None:
            (run_dir / "raw" / f"{name}.case").write_text("".join(f"{k}={v}\n" for k, v in case.items()))
    (run_dir / "steps.tsv").write_text("\n".join(lines) + "\n")
    return run_dir


def _client_line(median: float, msize: int = 1) -> str:
    return json.dumps({"tool": "lat_tcp", "host": "127.0.0.1", "port": 1, "msize": msize, "nodelay": False,
                       "unchecked": False, "connected": True, "failed_calls": 0, "iterations": 10,
                       "target_s": 0.03, "unit": "us", "median": median, "min": median, "max": median,
                       "samples": [median]}) + "\n"


def test_record_reads_cases_not_names(tmp_path):
    """One sample per run (its printed median), in repetition order, grouped by case less rep;
    sockperf's half round trip doubled; strace -c counts per run; a failed-as-designed step and
    a skipped one ignored; the observed run gives the ps share, not a round trip."""
    pinned = {"experiment": "pinned", "tool": "lat_tcp", "msize": 1, "pin": "same-cpu", "server_cpu": 0, "client_cpu": 0}
    other = {**pinned, "pin": "other-core", "client_cpu": 1}
    sockperf_err = (REFERENCE / "lat_tcp" / "raw" / "sockperf.same.1.err").read_text()
    sockperf_out = (REFERENCE / "lat_tcp" / "raw" / "sockperf.same.1.out").read_text()
    summary = (REFERENCE / "lat_tcp" / "raw" / "strace.summary").read_text()
    where = (REFERENCE / "lat_tcp" / "raw" / "free.where.out").read_text()
    traced = {**other, "experiment": "strace", "traced": "strace -c"}
    run_dir = _fake_run(tmp_path, [
        ("zz", "ok", "failure", None, {"out": ""}),
        ("q7", "ok", "success", {**pinned, "rep": 1}, {"out": _client_line(10.0)}),
        ("a1", "ok", "success", {**other, "rep": 1}, {"out": _client_line(40.0)}),
        ("m3", "ok", "success", {**pinned, "rep": 2}, {"out": _client_line(12.0)}),
        ("b2", "ok", "success", {**other, "rep": 2}, {"out": _client_line(44.0)}),
        ("c0", "skipped", "success", {**pinned, "rep": 3}, {}),
        ("k1", "ok", "success", {**pinned, "rep": 3}, {"out": _client_line(11.0)}),
        ("s9", "ok", "success", {"experiment": "sockperf", "tool": "sockperf", "msize": 14, "pin": "same-cpu", "rep": 1},
         {"out": sockperf_out, "err": sockperf_err}),
        ("t4", "ok", "success", {**traced, "rep": 1}, {"out": _client_line(90.0), "summary": summary}),
        ("f5", "ok", "success", {"experiment": "free", "tool": "lat_tcp", "msize": 1, "pin": "free",
                                 "observed": "ps psr every 50 ms"}, {"out": _client_line(30.0)}),
        ("f5.where", "ok", "success", None, {"out": where}),
    ])
    run = Run("lat_tcp", run_dir, quick=True)
    _load_record().collect(run)
    got = {tuple(sorted(m["case"].items())): m for m in run.measurements}
    rt = lambda case: got[tuple(sorted(case.items()))]  # noqa: E731
    assert rt(pinned)["samples"] == [10.0, 12.0, 11.0] and rt(pinned)["step"] == "q7"
    assert rt(other)["samples"] == [40.0, 44.0]
    sp = next(m for m in run.measurements if m["case"].get("tool") == "sockperf")
    # sockperf's own one-line summary of the same run: half the round trip, in µs
    half = float(re.search(r"Summary: Latency is ([\d.]+) usec", sockperf_out + sockperf_err).group(1))
    assert sp["samples"] == [pytest.approx(2 * half)]
    assert rt(traced)["samples"] == [90.0]
    calls = {m["case"]["syscall"]: m["samples"] for m in run.measurements if m["metric"] == "strace_calls"}
    # strace -c's table: % time, seconds, usecs/call, calls, [errors,] syscall
    table = {line.split()[-1]: int(line.split()[3]) for line in summary.splitlines()
             if re.match(r"\s*\d+\.\d+\s+\d+\.\d+\s+\d+\s+\d+", line)}
    assert table["read"] > 0 and table["write"] > 0
    assert calls["read"] == [table["read"]] and calls["write"] == [table["write"]]
    share = [m for m in run.measurements if m["metric"] == "same_cpu_share"]
    assert len(share) == 1 and 0 <= share[0]["samples"][0] <= 1
    # pcpu of the client and of the server's connection child, in the last snapshot with both
    for block in reversed(where.strip().split("\n\n")):
        procs = [line.split(None, 4) for line in block.splitlines()]
        server = {p[0] for p in procs if " -s" in f" {p[4]}"}
        want = {"client": [float(p[3]) for p in procs if p[0] not in server and p[1] not in server],
                "server": [float(p[3]) for p in procs if p[1] in server]}
        if len(want["client"]) == len(want["server"]) == 1:
            break
    cpu = {m["case"]["process"]: m["samples"] for m in run.measurements if m["metric"] == "cpu_percent"}
    assert cpu == want and all(0 < v[0] for v in cpu.values())
    assert not [m for m in run.measurements if m["case"].get("experiment") == "free"
                and m["metric"] == "round_trip"], "the observed run is not a round-trip sample"


def _placement_run(tmp_path, recorded: list[float]) -> dict:
    """A result from a run directory with three repetitions of: pinned same-CPU (10 µs) and
    other-core (40 µs) runs, hand-built, and an unpinned run recorded under perf whose round
    trip is ``recorded[i]``, with the real perf script of a recorded unpinned pair
    (tests/fixtures/perf/lat_tcp-sched-free.script.gz) as its events."""
    events = gzip.decompress((FIXTURES / "perf" / "lat_tcp-sched-free.script.gz").read_bytes()).decode()
    pinned = {"experiment": "pinned", "tool": "lat_tcp", "msize": 1, "pin": "same-cpu", "server_cpu": 0, "client_cpu": 0}
    steps = []
    for i, rt in enumerate(recorded, start=1):
        steps += [
            (f"s{i}", "ok", "success", {**pinned, "rep": i}, {"out": _client_line(10.0)}),
            (f"o{i}", "ok", "success", {**pinned, "pin": "other-core", "client_cpu": 1, "rep": i},
             {"out": _client_line(40.0)}),
            (f"r{i}", "ok", "success", {"experiment": "placement", "tool": "lat_tcp", "msize": 1, "pin": "free",
                                        "traced": "perf record sched", "rep": i}, {"out": _client_line(rt)}),
            (f"e{i}", "ok", "success", {"experiment": "placement", "tool": "perf script", "rep": i}, {"out": events}),
        ]
    run = Run("lat_tcp", _fake_run(tmp_path, steps), quick=True)
    _load_record().collect(run)
    r = copy.deepcopy(model.load(REFERENCE / "lat_tcp.json"))
    r["measurements"] = run.measurements
    return r


def test_placement_from_scheduler_events(tmp_path):
    """same_cpu_share per repetition from the recorded events, and the round trip it predicts
    from the same repetition's pinned runs: 1 / (s/same + (1 - s)/other)."""
    r = _placement_run(tmp_path, [12.0, 11.0, 13.0])
    events = gzip.decompress((FIXTURES / "perf" / "lat_tcp-sched-free.script.gz").read_bytes()).decode()
    s = _load_record().pair_same_cpu_share(events)
    assert 0 < s <= 1
    (share,) = [m for m in r["measurements"] if m["metric"] == "same_cpu_share"]
    assert share["case"] == {"experiment": "placement", "observed": "sched events"} and share["samples"] == [s] * 3
    (pred,) = claims.select(r, "round_trip", {"experiment": "placement", "observed": "predicted"})
    assert pred["samples"] == [pytest.approx(1 / (s / 10.0 + (1 - s) / 40.0))] * 3
    assert claims.select(r, "round_trip", {"experiment": "placement", "traced": "perf record sched"})[0]["samples"] == [12.0, 11.0, 13.0]


def test_placement_claim_holds_when_the_round_trip_is_the_predicted_one(tmp_path):
    """The fixture's pair shared a CPU most of its run: a recorded round trip near the pinned
    same-CPU one agrees with that placement, one at the other-core round trip does not (what the
    ps share of 1.0 beside an other-core-like round trip looked like)."""
    claim = next(c for c in SPEC if c["id"] == "placement-explains-unpinned-round-trip")
    events = gzip.decompress((FIXTURES / "perf" / "lat_tcp-sched-free.script.gz").read_bytes()).decode()
    s = _load_record().pair_same_cpu_share(events)
    assert s > 0.9, "the fixture was kept for a pair that stayed together"
    predicted = 1 / (s / 10.0 + (1 - s) / 40.0)
    near = [predicted * k for k in (0.97, 1.02, 1.0)]
    r = _placement_run(tmp_path / "holds", near)
    assert claims.evaluate_one(claim, r)["verdict"] == "holds"
    r = _placement_run(tmp_path / "fails", [40.0 * k for k in (0.97, 1.02, 1.0)])
    v = claims.evaluate_one(claim, r)
    assert v["verdict"] == "fails", v


def test_placement_claim_is_untested_without_the_recording(reference):
    """Without the recording (the reference, less its placement measurements): no side, no
    verdict."""
    claim = next(c for c in SPEC if c["id"] == "placement-explains-unpinned-round-trip")
    bare = {**reference, "measurements": [m for m in reference["measurements"]
                                          if m["case"].get("experiment") != "placement"]}
    assert claims.evaluate_one(claim, bare)["verdict"] == "untested"


def test_record_refuses_a_size_the_case_does_not_say(tmp_path):
    run_dir = _fake_run(tmp_path, [
        ("x", "ok", "success", {"experiment": "msize", "tool": "lat_tcp", "msize": 1024, "rep": 1},
         {"out": _client_line(10.0, msize=1)}),
    ])
    with pytest.raises(ValueError, match="msize"):
        _load_record().collect(Run("lat_tcp", run_dir, quick=True))


def _cell(table: dict, row: str, column: str) -> float:
    line = next(x for x in table["rows"] if x[0] == row)
    return float(line[table["columns"].index(column)])


def test_original_tables_are_well_formed():
    machines = {m["id"] for m in ORIGINAL["machine"]}
    assert all(m.get("kernel") for m in ORIGINAL["machine"])
    assert "/" not in ORIGINAL["source"]["seed"]
    for t in ORIGINAL["table"]:
        assert set(t.get("machines", [t.get("machine")])) <= machines, t["id"]
        assert all(len(r) == len(t["columns"]) for r in t["rows"]), t["id"]


def test_original_ratios_match_the_claims_effect_sizes():
    """The effect sizes quoted in claim statements are the ratios of the original's own cells."""
    tables = {t["id"]: t for t in ORIGINAL["table"]}
    got = {}
    for ratio in ORIGINAL["ratio"]:
        o = ratio["original"]
        got[ratio["id"]] = _cell(tables[o["table"]], *o["a"]) / _cell(tables[o["table"]], *o["b"])
    by_id = {c["id"]: c for c in SPEC}
    assert f"{got['other-vs-same-cpu-sdp2']:.2f}×" in by_id["same-cpu-faster"]["statement"]
    assert f"{got['other-vs-same-cpu-hp380']:.2f}×" in by_id["same-cpu-faster"]["statement"]
    assert f"{got['sibling-vs-same-cpu-hp380']:.2f}×" in by_id["same-cpu-faster-than-sibling"]["statement"]
    hp = tables["pinned-hp380"]
    sib_other = _cell(hp, "lat_tcp (µs)", "other CPU #") / _cell(hp, "lat_tcp (µs)", "#48 (same core)")
    assert f"{sib_other:.2f}×" in by_id["sibling-faster-than-other-core"]["statement"]
    # Each claimed factor stays below the original's effect, so the claim asks for the same direction, not more.
    assert by_id["same-cpu-faster"]["factor"] < min(got["other-vs-same-cpu-sdp2"], got["other-vs-same-cpu-hp380"])
    assert by_id["same-cpu-faster-than-sibling"]["factor"] < got["sibling-vs-same-cpu-hp380"]
    assert by_id["sibling-faster-than-other-core"]["factor"] < sib_other


def test_published_ratios_are_cut_off_as_the_note_says():
    """The notes say the published ratios are truncated, not rounded; check that against the cells."""
    import math
    t = {x["id"]: x for x in ORIGINAL["table"]}["roundtrip"]
    hp = _cell(t, "hp380", "lat_tcp (µs)")
    for row in ("sdp1", "sdp2"):
        exact = hp / _cell(t, row, "lat_tcp (µs)")
        assert _cell(t, row, "ratio") == math.floor(exact * 100) / 100
    assert "cut off" in t["note"]


def test_exercises_are_well_formed(rerecorded):
    """2-4 exercises, each one command to run and a check the claims engine can evaluate."""
    r, _ = rerecorded
    assert 2 <= len(EXERCISES) <= 4
    for e in EXERCISES:
        assert "labs/lat_tcp/run.sh" in e["change"]
        assert claims.evaluate_one(claims.exercise_claim(e), r)["verdict"] in {"holds", "fails", "untested", "inconclusive"}


def test_wakeup_delays_come_from_the_delay_steps_json(tmp_path, capsys):
    """The wakeup group's ``wakeup.<pin>.delay`` steps print the JSON line of
    ``python -m labkit.parsers.perf_sched_timehist`` (here run on the lab's own kind of rows,
    tests/fixtures/perf/lat_tcp-sched-timehist.*.txt.gz): ``wakeup_delay`` per stat and
    ``wakeups``, under the step's case less ``tool``."""
    from labkit.parsers import perf_sched_timehist as th
    steps, want = [], {}
    for pin, rel, cpu in (("same", "same-cpu", 0), ("other", "other-core", 1)):
        rows = tmp_path / f"rows-{pin}.txt"
        rows.write_bytes(gzip.decompress((FIXTURES / "perf" / f"lat_tcp-sched-timehist.{pin}.txt.gz").read_bytes()))
        assert th.main(["--comm", "lat_tcp", str(rows)]) == 0
        line = capsys.readouterr().out
        case = {"experiment": "wakeup", "tool": "perf-sched-timehist", "pin": rel, "server_cpu": 0, "client_cpu": cpu}
        steps.append((f"w{cpu}", "ok", "success", case, {"out": line}))
        want[rel] = json.loads(line)
    run = Run("lat_tcp", _fake_run(tmp_path, steps), quick=False)
    _load_record().collect(run)
    got = {(m["metric"], m["case"]["pin"], m["case"].get("stat")): m for m in run.measurements}
    stats = ("mean", "p50", "p99", "max")
    assert set(got) == {(metric, rel, stat) for rel in want
                        for metric, stat in [*(("wakeup_delay", s) for s in stats), ("wakeups", None),
                                             ("preemptions", None)]}
    for rel, out in want.items():
        for stat in stats:
            assert got[("wakeup_delay", rel, stat)]["samples"] == [out[f"{stat}_us"]]
            assert got[("wakeup_delay", rel, stat)]["unit"] == "us"
        assert got[("wakeups", rel, None)]["samples"] == [out["wakeups"]]
        assert got[("preemptions", rel, None)]["samples"] == [out["preempted"]]
        assert got[("wakeups", rel, None)]["case"] == {"experiment": "wakeup", "pin": rel, "server_cpu": 0,
                                                       "client_cpu": 0 if rel == "same-cpu" else 1}
