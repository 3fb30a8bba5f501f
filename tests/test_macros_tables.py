"""Page macros that turn a result's fields into rows, with expected rows written out here:
the host's provenance (every field, its fallbacks), the run's mode and duration, skipped steps,
two hosts side by side, a recording's player options, the excerpt marks of long outputs, our
ratio beside the original's, and a claim's verdict as a sentence and as a table cell (both read
the verdict's effect and its interval). The values come from a host dict or samples built in the
test, or from a committed result read in the test; none is a measurement typed by hand."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

import pytest
from markupsafe import escape

from labkit import stale
from labkit.site import macros
from labkit.stats import claims as claims_mod
from labkit.view import render
from test_macros_render import TCG, add_host, emulate, reference, replace_linked
from test_render_values import m

ROOT = Path(__file__).resolve().parent.parent


def host_dict() -> dict:
    """A probed host as labkit.run.probe records one, every optional field present."""
    return {"arch": "x86_64", "cpu_vendor": "AuthenticAMD", "cpu_model": "EPYC", "cpus": 2, "cores": 1, "sockets": 1,
            "smt": True, "threads_per_core": 2, "kernel": "6.18.0", "distro": "Debian 12", "virtualization": "kvm",
            "memory_bytes": 3 * 2**30 + 2**29, "scratch_fs": "ext4", "perf_event_paranoid": 2,
            "pmu": {"available": False, "reason": "<not supported>"}, "tracefs": {"available": True, "reason": "mounted"},
            "loop_devices": {"available": True, "reason": "ok"}, "netns": {"available": False, "reason": "no ip"},
            "root": True, "emulation": None, "audit_ever_enabled": True}


def test_host_rows_every_field():
    rows = macros.runs.host_rows(host_dict())
    assert rows == [
        ["arch", "x86\\_64"], ["CPU", "AuthenticAMD EPYC"], ["CPUs / cores / sockets", "2 / 1 / 1"],
        ["SMT", "yes (2 threads per core)"], ["kernel", "6.18.0"], ["distro", "Debian 12"],
        ["virtualization", "kvm"], ["memory", "3.5 GiB"], ["scratch filesystem", "ext4"],
        ["perf_event_paranoid", "2"], ["PMU counters", "no (&lt;not supported&gt;)"], ["tracefs", "yes (mounted)"],
        ["loop devices", "yes (ok)"], ["network namespaces", "no (no ip)"], ["root", "yes"],
        ["audit enabled on this boot before the run", "yes"],
        ["audit contexts of the run's processes",
         "present (audit had been enabled on this boot and the run did not suppress the contexts)"]]


def test_host_rows_fallbacks_and_emulation():
    h = host_dict()
    h.update(cpu_vendor=None, cpu_model=None, distro=None, virtualization=None, memory_bytes=None, scratch_fs=None,
             root=False, audit_ever_enabled=False,
             emulation={"emulator": "qemu-system-aarch64", "accelerator": "tcg", "machine": None, "guest_cpu": None,
                        "host_arch": "x86_64", "host_cpu": None})
    rows = dict(macros.runs.host_rows(h))
    assert rows["CPU"] == "? ?" and rows["distro"] == "–"
    # inside a TCG guest the probe sees no hypervisor: the row must not read as bare metal
    assert rows["virtualization"] == "emulated CPU (QEMU TCG); seen from inside: –"
    assert rows["SMT"] == "yes (2 threads per core)"
    h.update(emulation=None, virtualization="none", smt=False, threads_per_core=1)
    assert dict(macros.runs.host_rows(h))["virtualization"] == "none"
    assert dict(macros.runs.host_rows(h))["SMT"] == "no (1 thread per core)"
    h.update(emulation={"emulator": "qemu-system-aarch64", "accelerator": "tcg", "machine": None, "guest_cpu": None,
                        "host_arch": "x86_64", "host_cpu": None})
    assert rows["memory"] == "–" and rows["scratch filesystem"] == "–" and rows["root"] == "no"
    assert rows["audit enabled on this boot before the run"] == "no"
    assert rows["emulation"] == "qemu-system-aarch64, accelerator tcg, machine ?, CPU ? on x86\\_64 (?)"
    h["audit_ever_enabled"] = None
    assert "audit enabled on this boot before the run" not in dict(macros.runs.host_rows(h))


def test_provenance_names_mode_duration_and_commit(tree):
    md = macros.provenance("lat_tcp")
    for path in sorted((ROOT / "results").glob("*/lat_tcp.json")):
        r = json.loads(path.read_text())
        run = r["run"]
        assert f"| mode | {'quick' if run['quick'] else 'full'} |" in md
        assert f"| duration | {run['duration_s']:.0f} s |" in md
        assert f"| git commit | {(run['git_commit'] or '–')[:12]}" in md
        assert "| command | `" in md
        tpc = r["host"]["threads_per_core"]
        assert f"| SMT | {'yes' if r['host']['smt'] else 'no'} ({tpc} thread{'s' if tpc != 1 else ''} per core) |" in md


def test_skips_count_and_list_the_steps_that_did_not_run(tree):
    def skip_two(r):
        for s in r["steps"][:2]:
            s["status"], s["reason"] = "skipped", "no <tool> here"
        r["steps"][1]["reason"] = None  # a skip without a reason: an empty cell
        r["steps"][2]["status"], r["steps"][2]["reason"] = "failed", "exit 3"
    r = add_host(tree, "lat_tcp", "zz-skips", skip_two)
    md = macros.skips("lat_tcp")
    ok = sum(1 for s in r["steps"] if s["status"] == "ok")
    assert f"{ok} of {len(r['steps'])} steps ran as designed." in md
    assert "| step | status | reason |" in md
    for s in r["steps"][:3]:
        assert f"| {render.code_span(s['name'])} | {s['status']} | {render.esc(s['reason'] or '')} |" in md

    def all_ok(r):
        for s in r["steps"]:
            s["status"], s["reason"] = "ok", None
    add_host(tree, "lat_tcp", "zz-clean", all_ok)
    assert "Every step ran." in macros.skips("lat_tcp")


def test_compare_table_puts_a_first_and_b_second(tree):
    add_host(tree, "lat_tcp", "zz-other", emulate)
    ref = json.loads(reference("lat_tcp").read_text())
    md = macros.compare_table("lat_tcp", ref["host"]["label"], "zz-other")
    head = md.splitlines()[0]
    a = render.host_label(ref["host"])
    assert head.startswith(f"| metric | case | {a} | ") and render.emulation_badge({"arch": "aarch64", "emulation": {
        "accelerator": "tcg", "host_arch": "x86_64"}}).split()[0] in head.split("|")[4]
    emulated = json.loads((tree / "results" / "zz-other" / "lat_tcp.json").read_text())
    head = macros.compare_table("lat_tcp", "zz-other", ref["host"]["label"]).splitlines()[0]
    assert head.startswith(f"| metric | case | {render.host_label(emulated['host'])} | {a} |")
    with pytest.raises(macros.MacroError, match="both zz-other and .* need a fstime result"):
        macros.compare_table("fstime", "zz-other", ref["host"]["label"])  # zz-other has lat_tcp only


@pytest.mark.parametrize("n,lines,tail,expect_marks,note", [
    (10, "2-3", None, ["[... 1 line not shown ...]", "[... 7 more lines ...]"], "lines 2–3 of 10 lines"),
    (10, "1,3", None, ["[... 1 line not shown ...]", "[... 7 more lines ...]"], "lines 1, 3 of 10 lines"),
    (10, "1-9", None, ["[... 1 more line ...]"], "lines 1–9 of 10 lines"),
    (10, "5", None, ["[... 4 lines not shown ...]", "[... 5 more lines ...]"], "line 5 of 10 lines"),
    (4, None, 2, ["[... 2 lines not shown ...]"], "lines 3–4 of 4 lines"),
    (3, None, None, [], "all 3 lines"),
    (1, None, None, [], "its one line"),
    (2, None, None, [], "both lines"),
    (0, None, None, [], "no output"),
])
def test_excerpt_marks_what_it_leaves_out(n, lines, tail, expect_marks, note):
    text = [f"l{i + 1}" for i in range(n)]
    out, shown = macros.excerpts.excerpt(text, lines, None, 0, 0, tail)
    assert [x for x in out if x.startswith("[...")] == expect_marks
    assert shown == note


def test_cast_player_options_from_the_recording(tree):
    md = macros.cast("lat_tcp")
    for path in sorted((ROOT / "results").glob("*/lat_tcp.json")):
        r = json.loads(path.read_text())
        arts = [a for a in r["artifacts"] if a["kind"] == "cast"]
        if not arts:
            continue
        lines = (path.parent / arts[0]["path"]).read_text().splitlines()
        header, last = json.loads(lines[0]), json.loads(lines[-1])[0]
        conf = {"cols": header["width"], "rows": header["height"], "idleTimeLimit": macros.figures.CAST_IDLE_LIMIT,
                "poster": f"npt:{float(last):.1f}", "fit": "width", "terminalFontFamily": macros.figures.CAST_FONTS}
        assert escape(json.dumps(conf)) in md   # the player's options, escaped by the template
        assert f'data-pc-cast="results/{r["host"]["label"]}/{arts[0]["path"]}"' in md or \
            f'/{r["host"]["label"]}/{arts[0]["path"]}"' in md


def test_cast_plays_at_80_by_24_without_a_size_and_refuses_another_version(tree):
    """A recording whose header gives no terminal size plays at 80 × 24 (asciinema's default); a
    recording of another asciicast version is refused, naming the file (the player reads v2)."""
    r = add_host(tree, "lat_tcp", "zz-cast", lambda r: None)
    path = tree / "results" / "zz-cast" / next(a["path"] for a in r["artifacts"] if a["kind"] == "cast")
    lines = path.read_text().splitlines()
    header = json.loads(lines[0])
    assert (header["width"], header["height"]) != (80, 24)
    del header["width"], header["height"]
    replace_linked(path, "\n".join([json.dumps(header), *lines[1:]]) + "\n")
    md = macros.cast("lat_tcp")
    assert md.count(str(escape('"cols": 80, "rows": 24'))) == 1, md
    path.write_text("\n".join([json.dumps(dict(header, version=1)), *lines[1:]]) + "\n")
    with pytest.raises(macros.MacroError, match=rf"^cast: {re.escape(str(path))} is asciicast version 1, expected 2$"):
        macros.cast("lat_tcp")


def test_a_heat_map_is_said_to_be_a_static_image(tree):
    """A heat map (inferno's, no script) is captioned as a static image; a flame graph says how to
    zoom and search."""
    md = macros.flamegraph("optane_kyber", kind="heatmap", experiment="heat")
    assert "(a static image; where the column is too narrow for its text, the figure scrolls sideways)" in md, md
    assert "click a frame to zoom" not in md


@pytest.mark.parametrize("own,other,label", [
    ({"pin": "same-cpu", "msize": 1}, {"pin": "other-core", "msize": 1}, "same-cpu"),
    ({"kernel": "5.10"}, {"kernel": "6.1"}, "kernel=5.10"),          # a number-like value keeps its key
    ({"kernel": "5.10", "dt": "plain"}, {"kernel": "6.1", "dt": "dma-ranges"}, "kernel=5.10, dt=plain"),
    ({"bs": 4096}, {"bs": 1024}, "bs=4 KiB"),                      # a size in bytes has its unit
    ({"on": True}, {"on": False}, "on=yes"),
])
def test_side_label(own, other, label):
    assert macros.claim_tables.side_label(own, other) == label


@pytest.mark.parametrize("x,u,shown", [
    (14.2857, "us", "14.29 µs"), (1.5, "ratio", "1.500"), (0.25, "fraction", "0.2500"),
    (512 * 2**20, "bytes", "512 MiB"), (3.0, "", "3"), (2048.0, "B", "2 KiB"),
])
def test_claim_side_value(x, u, shown):
    assert macros.claim_tables.value_text(x, u) == shown


def test_skip_note_says_why_a_host_has_no_data():
    steps = [{"name": "a.x", "group": "a", "status": "ok", "reason": None},
             {"name": "b.y", "group": "b", "status": "skipped", "reason": "no <perf>"}]
    r = dict(json.loads(reference("lat_tcp").read_text()), steps=steps)
    assert "`b.y` skipped: no &lt;perf&gt;" in macros.build.skip_note(r, "b")
    assert "The `c` steps did not run in this run" in macros.build.skip_note(r, "c")
    # a quick run that left the group out says so, with the lab's reason and how to run it
    quick = dict(r, run=dict(r["run"], quick=True, left_out={"c": "the <longest> group"}))
    note = macros.build.skip_note(quick, "c")
    assert "A quick run leaves out the `c` group (the &lt;longest&gt; group): run without `--quick`, " \
           "or `--quick --only c`." in note and "did not run" not in note
    assert "did not run" in macros.build.skip_note(quick, "d")
    assert macros.build.skip_note(r, "a") == macros.build.Note(render.admonition(
        "warning", "Not measured on this host", "No measurement of this kind in this run."))
    assert "`b.y` skipped" in macros.build.skip_note(r, None)
    # several steps that did not run: a list item each
    two = steps + [{"name": "b.z", "group": "b", "status": "failed", "reason": None}]
    assert macros.build.skip_note(dict(r, steps=two), "b") == \
        '!!! warning "Not measured on this host"\n\n    - `b.y` skipped: no &lt;perf&gt;\n    - `b.z` failed (the result records no reason; the run\'s log may say)\n'


def test_artifact_text_shows_the_matching_log(tree):
    ref = json.loads(reference("nvme_swiotlb").read_text())
    case = {"experiment": "guest", "kernel": "6.1", "dt": "plain", "what": "function_graph"}
    art = next(a for a in ref["artifacts"] if a["kind"] == "log" and a.get("case") == case)
    md = macros.artifact_text("nvme_swiotlb", **case)  # kind defaults to "log", lang to "text"
    assert "```text\n" in md
    first = (reference("nvme_swiotlb").parent / art["path"]).read_text().splitlines()[0]
    assert html.escape(first, quote=False).split()[0] in md or first.split()[0] in md
    with pytest.raises(macros.MacroError, match="no host has a log artifact"):
        macros.artifact_text("nvme_swiotlb", experiment="guest", kernel="9.9")
    with pytest.raises(macros.MacroError, match="artifacts match"):
        macros.artifact_text("nvme_swiotlb", experiment="guest")


def test_step_output_both_streams_in_order(tree):
    ref = json.loads(reference("lat_tcp").read_text())
    raw = reference("lat_tcp").parent / "lat_tcp" / "raw"
    step = next(s["name"] for s in ref["steps"] if s["status"] == "ok"
                and (raw / f"{s['name']}.out").is_file() and (raw / f"{s['name']}.err").is_file()
                and (raw / f"{s['name']}.out").read_text().strip() and (raw / f"{s['name']}.err").read_text().strip())
    out_last = (raw / f"{step}.out").read_text().strip().splitlines()[-1]
    err_first = (raw / f"{step}.err").read_text().strip().splitlines()[0]
    md = macros.step_output("lat_tcp", step, stream="both", lines="1-100000")
    assert md.index(out_last.split()[0]) < md.rindex(err_first.split()[0])


def test_cast_refuses_a_recording_that_is_not_asciicast_2(tree):
    r = add_host(tree, "lat_tcp", "zz-cast", lambda r: None)
    cast_art = next(a for a in r["artifacts"] if a["kind"] == "cast")
    path = tree / "results" / "zz-cast" / cast_art["path"]
    replace_linked(path, json.dumps({"version": 1, "width": 80, "height": 24}) + "\n")
    with pytest.raises(macros.MacroError, match="asciicast version 1, expected 2"):
        macros.cast("lat_tcp")
    path.write_text(json.dumps({"version": 2, "width": 100, "height": 30}) + "\n")  # a header alone: poster at 0
    md = macros.cast("lat_tcp")
    assert escape('"cols": 100, "rows": 30') in md and "npt:0.0" in md


def _m(case: dict, samples: tuple, emulation: dict | None = None) -> dict:
    s = [float(x) for x in samples]
    out = {"metric": "rtt", "unit": "us", "case": case, "samples": s, "median": sorted(s)[len(s) // 2],
           "min": min(s), "max": max(s), "n": len(s)}
    if emulation:
        out["emulation"] = emulation
    return out


HERE = {"metric": "rtt", "a": {"pin": "a"}, "b": {"pin": "b"}}


def _here_result(a: tuple, b: tuple, host: dict | None = None, emulation_b: dict | None = None) -> dict:
    return {"host": host or {"emulation": None}, "measurements": [_m({"pin": "a"}, a), _m({"pin": "b"}, b, emulation_b)]}


@pytest.mark.parametrize("a,b,straddles_1", [
    ((10, 11, 12), (5, 5.5, 6), False),        # a clear effect: the whole interval above 1
    ((10, 11, 12), (9, 10.5, 11), True),       # ranges that overlap: the interval takes in 1
])
def test_here_ratio_shows_the_estimate_and_its_interval(a, b, straddles_1):
    """Our ratio in "Original vs here": a ÷ b of the sides' medians with its bootstrap interval,
    "estimate (low–high)", the interval the claims decide on (claims.ratio_interval)."""
    r = _here_result(a, b)
    sa, _ = claims_mod.side(r, "rtt", HERE["a"])
    sb, _ = claims_mod.side(r, "rtt", HERE["b"])
    e = claims_mod.ratio_interval(sa, sb)
    assert e["estimate"] == pytest.approx(sorted(a)[1] / sorted(b)[1])
    assert e["low"] < e["estimate"] < e["high"] and (e["low"] < 1 < e["high"]) == straddles_1
    num = macros.numbers.number
    assert macros.original.here_ratio(r, HERE) == f"{num(e['estimate'])} ({num(e['low'])}–{num(e['high'])})"


@pytest.mark.parametrize("a,b,shown", [
    ((10, 11, 12), (5,), "2.20 (too few samples: n = 3 and 1)"),
    ((10, 11, 12), (0, 0, 0), "– (pin=b: median is 0)"),
    # b has a 0: Fieller's interval of the ratio of means, open above (b's mean may be 0)
    ((10, 11, 12), (0, 1, 1), "16.5 (5.61–∞)"),
    # b's mean may be 0 or below (Fieller gives no interval): the ratio of medians, no interval
    # (b's median is not 1, so a product of the medians would show)
    ((10, 11, 12), (-1, 2, 3), "5.50"),
])
def test_here_ratio_says_when_there_is_no_interval(a, b, shown):
    r = _here_result(a, b)
    assert macros.original.here_ratio(r, HERE) == shown
    assert macros.original.here_ratio(r, dict(HERE, b={"pin": "c"})) == "– (no rtt measurement for pin=c)"


def test_here_ratio_reads_the_statistic_and_names_every_missing_side():
    """A ratio of means where the original's row says so (the medians otherwise), and with both
    sides missing, both reasons, one after the other."""
    r = _here_result((10, 11, 30), (5, 5.5, 6))
    means, medians = macros.original.here_ratio(r, dict(HERE, statistic="mean")), macros.original.here_ratio(r, HERE)
    assert means.startswith(macros.numbers.number(17 / 5.5) + " (") and medians.startswith(macros.numbers.number(2.0) + " (")
    both = dict(HERE, a={"pin": "x"}, b={"pin": "y"})
    assert macros.original.here_ratio(r, both) == "– (no rtt measurement for pin=x; no rtt measurement for pin=y)"


def test_an_original_tables_text_is_shown_as_published():
    """The original's title and cells keep their quotes (escaped for HTML only where markup
    would break: <, >, &)."""
    orig = macros.original.load_original("lat_tcp")
    t = dict(orig["table"][0], title='dd "direct" vs \'buffered\' <4k>', columns=['"a"', "b"], rows=[["'1'", "2 & 3"]])
    md = macros.original.original_table_md(orig, t)
    assert 'dd "direct" vs \'buffered\' &lt;4k&gt;' in md and '"a"' in md and "'1'" in md and "2 &amp; 3" in md


@pytest.mark.parametrize("a,b", [((10, 11, 12), (5, 5.5, 6)), ((10, 11, 12), (5,)), ((10, 11, 12), (0, 1, 1))])
def test_here_ratio_badges_an_emulated_cpu(a, b):
    """The host's CPU emulated, or one side measured in a TCG guest on a hardware host: the same
    cell with the emulation badge after it; a side with no data or a zero median has no ratio to mark."""
    plain = macros.original.here_ratio(_here_result(a, b), HERE)
    assert macros.build.EMULATED_BADGE not in plain
    badged = f"{plain} {macros.build.EMULATED_BADGE}"
    assert macros.original.here_ratio(_here_result(a, b, host={"emulation": dict(TCG)}), HERE) == badged
    assert macros.original.here_ratio(_here_result(a, b, emulation_b=dict(TCG)), HERE) == badged
    kvm = dict(TCG, accelerator="kvm")    # a KVM guest runs on the host's CPU: no badge
    assert macros.original.here_ratio(_here_result(a, b, host={"emulation": kvm}, emulation_b=kvm), HERE) == plain


def test_claims_summary_counts_verdicts_in_their_order(tree):
    import re
    md = macros.claims("lat_tcp")
    summaries = re.findall(r"(\d+) claims: ([^.\n]*)\.", md)
    assert summaries
    from labkit.stats import claims as claims_mod
    for total, body in summaries:
        parts = [p.split(" ", 1) for p in body.split(", ")]
        names = [name for _, name in parts]
        assert names == [v for v in claims_mod.VERDICTS if v in names]
        assert sum(int(n) for n, _ in parts) == int(total)


SENTENCE_RESULT = {"lab": "x", "run": {"command": ""}, "steps": [], "host": {"emulation": None}, "measurements": [
    m("rtt", "us", {"pin": "same-cpu", "r": 1}, [10.0, 11.0, 15.0]), m("rtt", "us", {"pin": "same-cpu", "r": 2}, [11.0, 13.0]),
    m("rtt", "us", {"pin": "other-cpu"}, [30.0, 40.0, 50.0]), m("rtt", "us", {"pin": "zero"}, [0.0, 0.0, 0.0]),
    m("rtt", "us", {"pin": "half"}, [0.5, 0.5, 0.5]), m("rtt", "us", {"pin": "drift"}, [10.0, 11.0, 12.0, 20.0, 21.0, 22.0]),
    m("iops", "IOPS", {"qd": 4}, [280.0, 300.0, 320.0]), m("iops", "IOPS", {"qd": 32}, [380.0, 400.0, 420.0]),
    m("iops", "IOPS", {"qd": 1}, [90.0, 100.0, 110.0]), m("iops", "IOPS", {"qd": "all"}, [900.0, 900.0, 900.0]),
    m("iops1", "IOPS", {"qd": 2}, [100.0]), m("iops1", "IOPS", {"qd": 8}, [300.0])]}
COMPARE = {"id": "c", "role": "ours", "statement": "s", "source": "s", "kind": "compare", "metric": "rtt",
           "a": {"pin": "same-cpu"}, "b": {"pin": "other-cpu"}, "relation": "less"}
TREND = {"id": "t", "role": "ours", "statement": "s", "source": "s", "kind": "increasing", "metric": "iops", "over": "qd", "where": {}}
SAME, OTHER = {"pin": "same-cpu"}, {"pin": "other-cpu"}


def verdict_of(claim: dict, result: dict = SENTENCE_RESULT) -> dict:
    claims_mod.check_spec(claim, "test")   # the claims are ones a claims.toml could hold
    return claims_mod.evaluate_one(claim, result)


@pytest.mark.parametrize("claim,verdict,head,needs,n", [
    # both sides' pooled medians (11 of 10, 11, 11, 13, 15), each named by what tells it from the other
    (COMPARE, "holds", "11 µs same-cpu vs 40 µs other-cpu: ratio same-cpu ÷ other-cpu", "&lt; 1", "5 / 3"),
    (dict(COMPARE, relation="greater"), "fails", "11 µs same-cpu vs 40 µs other-cpu: ratio same-cpu ÷ other-cpu",
     "&gt; 1", "5 / 3"),
    (dict(COMPARE, relation="not_less"), "fails", "11 µs same-cpu vs 40 µs other-cpu: ratio same-cpu ÷ other-cpu",
     "≥ 1", "5 / 3"),
    # the threshold at the estimate itself: the interval straddles it, and the reason follows
    (dict(COMPARE, factor=40 / 11), "inconclusive", "11 µs same-cpu vs 40 µs other-cpu: ratio same-cpu ÷ other-cpu",
     f"&lt; {11 / 40:.4g}", "5 / 3"),
    (dict(COMPARE, statistic="mean"), "holds", "12 µs same-cpu vs 40 µs other-cpu (means): ratio same-cpu ÷ other-cpu",
     "&lt; 1", "5 / 3"),
    (dict(COMPARE, kind="within", factor=10, relation=None), "holds",
     "11 µs same-cpu vs 40 µs other-cpu: ratio same-cpu ÷ other-cpu", "between 0.1 and 10", "5 / 3"),
    # the sides in the claim's order, a first
    (dict(COMPARE, a=OTHER, b=SAME), "fails", "40 µs other-cpu vs 11 µs same-cpu: ratio other-cpu ÷ same-cpu",
     "&lt; 1", "3 / 5"),
    # a value between 0 and 1 keeps its digits; paired sides: the ratio per repetition
    (dict(COMPARE, a=OTHER, b={"pin": "half"}, paired=True), "fails",
     "40 µs other-cpu vs 0.5000 µs half: per-repetition ratio other-cpu ÷ half", "&lt; 1", "3 / 3"),
    # a selector with nothing of its own is named "a"
    (dict(COMPARE, b={"pin": "same-cpu", "r": 1}), "inconclusive", "11 µs a vs 11 µs r=1: ratio a ÷ r=1", "&lt; 1", "5 / 3"),
    # b is 0 in every sample and a above 0 in every one: the ratio is infinite, so a < b fails
    (dict(COMPARE, b={"pin": "zero"}), "fails", "11 µs same-cpu vs 0 µs zero: ratio same-cpu ÷ zero", "&lt; 1",
     "5 / 3"),
])
def test_claim_sentence_of_a_comparison(claim, verdict, head, needs, n):
    """"A vs B: ratio a ÷ b = <estimate> (<interval>), needs <threshold>; n = <a> / <b>", from the
    verdict's effect; an undecided verdict ends with its reason."""
    claim = {k: v for k, v in claim.items() if v is not None}
    v = verdict_of(claim)
    assert v["verdict"] == verdict
    want = f"{head} = {macros.claim_tables.interval_text(v['effect'])}, needs {needs}; n = {n}"
    if verdict not in ("holds", "fails"):
        want += f"; {render.esc(v['reason'])}"
    assert macros.claim_tables.claim_sentence(claim, v, SENTENCE_RESULT) == want


@pytest.mark.parametrize("claim,verdict,needs", [
    # the first and last numeric points of `over` (qd = "all" is no point), and last ÷ first
    (TREND, "holds", "&gt; 1"),
    (dict(TREND, factor=5), "fails", "&gt; 5"),          # the whole interval at or below 5
    (dict(TREND, factor=4), "inconclusive", "&gt; 4"),   # the threshold at the estimate
])
def test_claim_sentence_of_a_trend(claim, verdict, needs):
    v = verdict_of(claim)
    assert v["verdict"] == verdict
    want = (f"iops from 100 IOPS at qd = 1 to 400 IOPS at qd = 32: last ÷ first = {macros.claim_tables.interval_text(v['effect'])}, "
            f"needs {needs}")
    if verdict == "inconclusive":
        want += f"; {render.esc(v['reason'])}"
    assert macros.claim_tables.claim_sentence(claim, v, SENTENCE_RESULT) == want


def test_claim_sentence_reads_the_verdict_not_its_evidence():
    """The sentence follows the verdict's effect and fields; its evidence string is never parsed,
    and a decided verdict carries no reason."""
    v = verdict_of(COMPARE)
    shown = macros.claim_tables.claim_sentence(COMPARE, v, SENTENCE_RESULT)
    assert macros.claim_tables.claim_sentence(COMPARE, dict(v, evidence="<something else>; x"), SENTENCE_RESULT) == shown
    assert macros.claim_tables.claim_sentence(COMPARE, dict(v, reason="not shown"), SENTENCE_RESULT) == shown
    doubled = dict(v, effect=dict(v["effect"], estimate=2 * v["effect"]["estimate"]))
    assert macros.numbers.times(2 * v["effect"]["estimate"]) in macros.claim_tables.claim_sentence(COMPARE, doubled, SENTENCE_RESULT)
    assert macros.claim_tables.claim_sentence(COMPARE, dict(v, verdict="inconclusive", reason="why <b>"), SENTENCE_RESULT) == \
        shown + "; why &lt;b&gt;"


@pytest.mark.parametrize("claim,verdict", [
    (dict(COMPARE, b={"pin": "none"}), "untested"),                 # a side without data
    (dict(COMPARE, paired=True), "inconclusive"),                   # a paired design that lost a repetition
    (dict(TREND, metric="iops1"), "inconclusive"),             # points of one sample
    (dict(TREND, where={"qd": "none"}), "untested"),
])
def test_claim_sentence_without_an_effect_is_its_reason(claim, verdict):
    v = verdict_of(claim)
    assert v["verdict"] == verdict and "effect" not in v
    assert macros.claim_tables.claim_sentence(claim, v, SENTENCE_RESULT) == render.esc(v["reason"])


def test_claim_sentence_of_a_step_or_a_hand_made_verdict_is_escaped():
    step = {"id": "s", "kind": "step", "step": "x"}
    assert macros.claim_tables.claim_sentence(step, {"verdict": "untested", "evidence": "e", "reason": "skipped: <no root>"},
                                  SENTENCE_RESULT) == "skipped: &lt;no root&gt;"
    assert macros.claim_tables.claim_sentence(step, {"verdict": "fails", "evidence": "step x: exit 1 <b>"}, SENTENCE_RESULT) == \
        "step x: exit 1 &lt;b&gt;"


def test_claim_sentence_shows_flags_and_the_emulation_badge():
    drifting = dict(COMPARE, a={"pin": "drift"})
    v = verdict_of(drifting)
    assert v["verdict"] == "holds" and len(v["flags"]) == 2 and "drift" in v["flags"][0] and "two modes" in v["flags"][1]
    shown = macros.claim_tables.claim_sentence(drifting, v, SENTENCE_RESULT)
    plain = macros.claim_tables.claim_sentence(drifting, dict(v, flags=[]), SENTENCE_RESULT)
    assert shown == plain + "".join(f" ⚠ {render.esc(f)}" for f in v["flags"])
    # on an emulated CPU: a timing claim is not applicable, unless it says why emulation keeps it
    emulated = dict(SENTENCE_RESULT, host={"emulation": dict(TCG)})
    v = verdict_of(COMPARE, emulated)
    assert v["verdict"] == "not applicable"
    assert macros.claim_tables.claim_sentence(COMPARE, v, emulated) == render.esc(claims_mod.EMULATED_EVIDENCE)
    ok = dict(COMPARE, emulated_ok="one machine, one mechanism")
    v = verdict_of(ok, emulated)
    assert v["verdict"] == "holds" and v["emulated"]
    assert macros.claim_tables.claim_sentence(ok, v, emulated) == \
        macros.claim_tables.claim_sentence(ok, verdict_of(ok), SENTENCE_RESULT) + " " + macros.build.EMULATED_BADGE


def _effect(a: tuple, b: tuple) -> dict:
    """The effect of a ÷ b as a verdict stores it (no interval: None, not NaN)."""
    r = {"host": {"emulation": None}, "measurements": [_m({"pin": "a"}, a), _m({"pin": "b"}, b)]}
    claim = {"id": "e", "kind": "compare", "metric": "rtt", "a": {"pin": "a"}, "b": {"pin": "b"}, "relation": "greater"}
    return claims_mod.evaluate_one(claim, r)["effect"]


def test_interval_text():
    e = _effect((10, 11, 12), (5, 5.5, 6))
    got = re.fullmatch(r"2\.00× \(95 % interval ([\d.]+)–([\d.]+)×\)", macros.claim_tables.interval_text(e))
    assert got, macros.claim_tables.interval_text(e)
    assert float(got.group(1)) == pytest.approx(e["low"], rel=5e-3) and float(got.group(2)) == pytest.approx(e["high"], rel=5e-3)
    assert macros.claim_tables.interval_text(_effect((10, 10, 10), (5, 5, 5))) == "2.00× (no spread in the samples)"
    # a side of zeros against a spread side: the interval is [0, 0] but the samples spread
    zeros = _effect((0, 0, 0), (5, 6, 7))
    assert zeros["low"] == zeros["high"] == 0 and "no spread" not in macros.claim_tables.interval_text(zeros)
    near_0 = _effect((10, 11, 12), (0, 1, 1))   # b's mean may be 0 (Fieller): no upper bound
    assert near_0["high"] is None and macros.claim_tables.interval_text(near_0) == f"16.5× (95 % interval {near_0['low']:#.3g}–∞)"
    zero = _effect((10, 11, 12), (0, 0, 0))
    assert zero["estimate"] is None and macros.claim_tables.interval_text(zero) == zero["method"] == \
        "exact: b is 0 in every sample and a above 0 in every one, so the ratio is infinite"


@pytest.mark.parametrize("claim,verdict,tail", [
    (COMPARE, "holds", "effect"),
    (dict(COMPARE, relation="greater"), "fails", "effect"),
    (dict(COMPARE, factor=40 / 11), "inconclusive", "effect"),    # the interval shows why: no reason repeated
    (dict(COMPARE, b={"pin": "zero"}), "fails", "effect"),   # an infinite ratio: the method stands for it
    (dict(COMPARE, b={"pin": "none"}), "untested", "reason"),
    (dict(COMPARE, paired=True), "inconclusive", "reason"),
    (dict(TREND, metric="iops1"), "inconclusive", "reason"),
])
def test_verdict_cell(claim, verdict, tail):
    """A verdict in the conclusions table: its mark, then the effect with its interval and what
    the claim needs, or the reason it is not decided."""
    v = verdict_of(claim)
    assert v["verdict"] == verdict
    mark = render.VERDICT_MARK[verdict]
    if tail == "effect":
        names = "last ÷ first" if claim["kind"] == "increasing" else \
            f"{macros.claim_tables.side_label(claim['a'], claim['b'])} ÷ {macros.claim_tables.side_label(claim['b'], claim['a'])}"
        want = f"{mark}: {names} = {macros.claim_tables.interval_text(v['effect'])}, needs {render.esc(v['effect']['needs'])}"
    else:
        want = f"{mark}; {render.esc(v['reason'])}"
    assert macros.claim_tables.verdict_cell(claim, v) == want


def test_verdict_cell_shows_a_reason_only_where_the_interval_does_not_say_it():
    """A decided verdict never carries a reason; an undecided one with an effect shows its
    reason unless the reason is the interval's own ("the 95% interval ..."), which the cell
    already shows."""
    v = verdict_of(COMPARE)
    assert v["verdict"] == "holds"
    for verdict in ("holds", "fails"):
        assert "a reason" not in macros.claim_tables.verdict_cell(COMPARE, dict(v, verdict=verdict, reason="a reason"))
    undecided = dict(v, verdict="inconclusive", reason="too few repetitions for a calibrated interval")
    assert macros.claim_tables.verdict_cell(COMPARE, undecided).endswith(
        "; too few repetitions for a calibrated interval")
    own = dict(undecided, reason="the 95% interval straddles the threshold")
    assert "straddles" not in macros.claim_tables.verdict_cell(COMPARE, own)


def test_verdict_cell_shows_flags_and_the_emulation_badge():
    drifting = dict(COMPARE, a={"pin": "drift"})
    v = verdict_of(drifting)
    plain = macros.claim_tables.verdict_cell(drifting, dict(v, flags=[]))
    assert plain.startswith(render.VERDICT_MARK["holds"] + ": ")
    assert macros.claim_tables.verdict_cell(drifting, v) == plain + " ⚠ " + render.esc("; ".join(v["flags"]))
    emulated = dict(SENTENCE_RESULT, host={"emulation": dict(TCG)})
    assert macros.claim_tables.verdict_cell(COMPARE, verdict_of(COMPARE, emulated)) == \
        f"{render.VERDICT_MARK['not applicable']}; {render.esc(claims_mod.EMULATED_EVIDENCE)}"
    ok = dict(COMPARE, emulated_ok="one machine, one mechanism")
    assert macros.claim_tables.verdict_cell(ok, verdict_of(ok, emulated)) == \
        macros.claim_tables.verdict_cell(ok, verdict_of(ok)) + " " + macros.build.EMULATED_BADGE


def test_provenance_marks_a_stale_result_with_a_warning(tree, monkeypatch):
    monkeypatch.setattr(stale, "staleness", lambda r, root: ("stale", "labs/lat_tcp changed since"))
    md = macros.provenance("lat_tcp")
    n = len(list((ROOT / "results").glob("*/lat_tcp.json")))
    # in each host's tab (indented 4), before its table
    assert md.count('    !!! warning "Stale result"\n\n        labs/lat_tcp changed since\n') == n
    assert md.count("| freshness | stale: labs/lat_tcp changed since |") == n
    monkeypatch.setattr(stale, "staleness", lambda r, root: ("fresh", "no change since"))
    assert "Stale result" not in macros.provenance("lat_tcp")


def test_cast_title_carries_a_badge_only_when_emulated(tree):
    md = macros.cast("lat_tcp")
    for host, r in macros.build.for_lab("lat_tcp"):
        if not [a for a in r["artifacts"] if a["kind"] == "cast"]:
            continue
        badge = render.emulation_badge(r["host"])
        head = f"**{host.title}** {badge}\n\n<figure" if badge else f"**{host.title}**\n\n<figure"
        assert head in md, host.label


def test_artifact_text_goes_on_past_a_host_without_it_and_shows_the_title(tree):
    """A host without the artifact (sorted first) gets the skip note, and the hosts after it still
    show theirs, each with the artifact's title under its block."""
    case = {"experiment": "guest", "kernel": "6.1", "dt": "plain", "what": "function_graph"}
    add_host(tree, "nvme_swiotlb", "aaa-bare", lambda r: r.update(artifacts=[]))
    pairs = macros.build.for_lab("nvme_swiotlb")
    assert pairs[0][0].label == "aaa-bare"
    md = macros.artifact_text("nvme_swiotlb", **case)
    with_it = [(h, macros.build.artifacts(r, "log", case)[0]) for h, r in pairs if macros.build.artifacts(r, "log", case)]
    assert with_it and md.count("```text\n") == len(with_it)
    for h, art in with_it:
        assert art.get("title") and f"\n\n    {render.esc(art['title'])}." in md.split(f'"{h.title}"', 1)[1]


def test_artifact_text_without_a_title_has_no_caption(tree):
    """An artifact that carries no title is shown as its block alone, with no caption line."""
    case = {"experiment": "guest", "kernel": "6.1", "dt": "plain", "what": "function_graph"}
    add_host(tree, "nvme_swiotlb", "aaa-untitled", lambda r: [a.pop("title", None) for a in r["artifacts"]])
    md = macros.artifact_text("nvme_swiotlb", **case)
    tab = md.split('"aaa-untitled"', 1)[1].split("\n===", 1)[0].rstrip()
    assert tab.endswith("```"), tab[-300:]


@pytest.mark.parametrize("shown,source,caption", [
    ("lines 2–3 of 10 lines", "standard output", "lines 2–3 of 10 lines of standard output"),
    ("no output", "standard output", "no standard output"),
    ("no output", "standard error", "no standard error"),
    ("no output", "output (stdout, then stderr)", "no output on stdout or stderr"),
    ("no output", "the file", "an empty file"),
    ("both lines", "the file", "both lines of the file"),
])
def test_an_empty_output_is_said_plainly(shown, source, caption):
    assert macros.excerpts.shown_of(shown, source) == caption


@pytest.mark.parametrize("x,shown", [(3.6364, "3.64×"), (22.0, "22.0×"), (99.94, "99.9×"), (99.96, "100×"),
                                     (158.2, "158×"), (1670.4, "1,670×"), (1.0028, "1.00×"), (1.0, "1.00×"),
                                     (0.5, "0.500×"), (0.0, "0×")])
def test_a_ratio_is_never_in_scientific_notation(x, shown):
    assert macros.numbers.times(x) == shown


def test_a_size_in_a_claim_sentence_has_its_unit():
    r = dict(SENTENCE_RESULT, measurements=[m("bw", "MB/s", {"bs": 4096}, [9.0, 10.0, 11.0]),
                                            m("bw", "MB/s", {"bs": 4194304}, [27.0, 30.0, 33.0])])
    trend = {"id": "t", "role": "ours", "statement": "s", "source": "s", "kind": "increasing", "metric": "bw", "over": "bs", "where": {}}
    v = verdict_of(trend, r)
    assert v["verdict"] == "holds" and macros.claim_tables.interval_text(v["effect"]).startswith("3.00× (95 % interval ")
    assert macros.claim_tables.claim_sentence(trend, v, r) == \
        f"bw from 10 MB/s at bs = 4 KiB to 30 MB/s at bs = 4 MiB: last ÷ first = {macros.claim_tables.interval_text(v['effect'])}, needs &gt; 1"
    assert macros.claim_tables.side_label({"bs": 4096, "x": 1}, {"bs": 1024, "x": 2}) == "bs=4 KiB, x=1"


def test_a_timing_made_in_an_emulated_guest_is_badged_on_a_hardware_host():
    """Measurements made inside a TCG guest carry the emulation badge in a hardware host's tab
    (the nvme lab's arm64 guests on the x86_64 host); a hardware measurement does not, and an
    emulated host's own tab badge is not repeated."""
    hw = {"host": {"label": "x", "arch": "x86_64"}}
    guest = dict(m("bw", "MB/s", {"dt": "plain"}, [1.0, 2.0, 3.0]), emulation=dict(TCG, guest_cpu="cortex-a72"))
    plain = m("bw", "MB/s", {"dt": "plain"}, [1.0, 2.0, 3.0])
    badge = macros.build.guest_badge(hw, [plain, guest])
    assert badge.startswith('<span class="pc-emulated">measured in an emulated cortex-a72 guest (QEMU TCG on ')
    assert "timings are not hardware" in badge and badge.endswith("\n\n")
    assert macros.build.guest_badge(hw, [plain]) == ""
    # a guest whose CPU model the result does not know (guest_cpu null in the schema)
    unnamed = dict(guest, emulation=dict(TCG, guest_cpu=None, host_arch="x86_64"))
    assert macros.build.guest_badge(hw, [unnamed]) == ('<span class="pc-emulated">measured in an emulated CPU guest '
                                                       '(QEMU TCG on x86_64): timings are not hardware</span>\n\n')
    assert macros.build.guest_badge({"host": {"label": "q", "arch": "aarch64", "emulation": dict(TCG)}}, [guest]) == ""
    # a measurement's emulation needs only its accelerator (labkit/schema.json)
    bare = dict(guest, emulation={"accelerator": "tcg"})
    assert macros.build.guest_badge(hw, [bare]) == ('<span class="pc-emulated">measured in an emulated CPU guest '
                                                    '(QEMU TCG on this host): timings are not hardware</span>\n\n')


def test_stacked_table_keeps_each_cell_on_one_line():
    """stacked_table: every cell (header label included) on one line (a newline inside the HTML
    block would end it for Markdown), each body cell led by its column's label."""
    out = macros.tables.stacked_table(["What", "Theirs\nkernel 3.10"], [["copy\nrate", "a\nb"]])
    assert "copy rate" in out and "a b" in out and "Theirs kernel 3.10" in out
    assert "copy\nrate" not in out and "a\nb" not in out
    assert out.endswith("</div>\n"), out[-40:]   # the HTML block ends, then a line break
