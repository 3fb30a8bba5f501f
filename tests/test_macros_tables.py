"""Page macros that turn a result's fields into rows, with expected rows written out here:
the host's provenance (every field, its fallbacks), the run's mode and duration, skipped steps,
two hosts side by side, a recording's player options and the excerpt marks of long outputs.
The values come from a host dict built in the test or from a committed result read in the
test; none is a measurement typed by hand."""

from __future__ import annotations

import html
import json
from pathlib import Path

import pytest

from labkit import macros, render
from test_macros_render import add_host, emulate, reference
from test_render_values import m

ROOT = Path(__file__).resolve().parent.parent


def host_dict() -> dict:
    """A probed host as labkit.probe records one, every optional field present."""
    return {"arch": "x86_64", "cpu_vendor": "AuthenticAMD", "cpu_model": "EPYC", "cpus": 2, "cores": 1, "sockets": 1,
            "smt": True, "threads_per_core": 2, "kernel": "6.18.0", "distro": "Debian 12", "virtualization": "kvm",
            "memory_bytes": 3 * 2**30 + 2**29, "scratch_fs": "ext4", "perf_event_paranoid": 2,
            "pmu": {"available": False, "reason": "<not supported>"}, "tracefs": {"available": True, "reason": "mounted"},
            "loop_devices": {"available": True, "reason": "ok"}, "netns": {"available": False, "reason": "no ip"},
            "root": True, "emulation": None, "audit_ever_enabled": True}


def test_host_rows_every_field():
    rows = macros._host_rows(host_dict())
    assert rows == [
        ["arch", "x86\\_64"], ["CPU", "AuthenticAMD EPYC"], ["CPUs / cores / sockets", "2 / 1 / 1"],
        ["SMT", "yes (2 threads per core)"], ["kernel", "6.18.0"], ["distro", "Debian 12"],
        ["virtualization", "kvm"], ["memory", "3.5 GiB"], ["scratch filesystem", "ext4"],
        ["perf_event_paranoid", "2"], ["PMU counters", "no (&lt;not supported&gt;)"], ["tracefs", "yes (mounted)"],
        ["loop devices", "yes (ok)"], ["network namespaces", "no (no ip)"], ["root", "yes"],
        ["audit enabled on this boot before the run", "yes"]]


def test_host_rows_fallbacks_and_emulation():
    h = host_dict()
    h.update(cpu_vendor=None, cpu_model=None, distro=None, virtualization=None, memory_bytes=None, scratch_fs=None,
             root=False, audit_ever_enabled=False,
             emulation={"emulator": "qemu-system-aarch64", "accelerator": "tcg", "machine": None, "guest_cpu": None,
                        "host_arch": "x86_64", "host_cpu": None})
    rows = dict(macros._host_rows(h))
    assert rows["CPU"] == "? ?" and rows["distro"] == "–"
    # inside a TCG guest the probe sees no hypervisor: the row must not read as bare metal
    assert rows["virtualization"] == "emulated CPU (QEMU TCG); seen from inside: –"
    assert rows["SMT"] == "yes (2 threads per core)"
    h.update(emulation=None, virtualization="none", smt=False, threads_per_core=1)
    assert dict(macros._host_rows(h))["virtualization"] == "none"
    assert dict(macros._host_rows(h))["SMT"] == "no (1 thread per core)"
    h.update(emulation={"emulator": "qemu-system-aarch64", "accelerator": "tcg", "machine": None, "guest_cpu": None,
                        "host_arch": "x86_64", "host_cpu": None})
    assert rows["memory"] == "–" and rows["scratch filesystem"] == "–" and rows["root"] == "no"
    assert rows["audit enabled on this boot before the run"] == "no"
    assert rows["emulation"] == "qemu-system-aarch64, accelerator tcg, machine ?, CPU ? on x86\\_64 (?)"
    h["audit_ever_enabled"] = None
    assert "audit enabled on this boot before the run" not in dict(macros._host_rows(h))


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
    out, shown = macros._excerpt(text, lines, None, 0, 0, tail)
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
        conf = {"cols": header["width"], "rows": header["height"], "idleTimeLimit": macros.CAST_IDLE_LIMIT,
                "poster": f"npt:{float(last):.1f}", "fit": "width", "terminalFontFamily": macros.CAST_FONTS}
        assert html.escape(json.dumps(conf), quote=True) in md
        assert f'data-pc-cast="results/{r["host"]["label"]}/{arts[0]["path"]}"' in md or \
            f'/{r["host"]["label"]}/{arts[0]["path"]}"' in md


@pytest.mark.parametrize("own,other,label", [
    ({"pin": "same-cpu", "msize": 1}, {"pin": "other-core", "msize": 1}, "same-cpu"),
    ({"kernel": "5.10"}, {"kernel": "6.1"}, "kernel=5.10"),          # a number-like value keeps its key
    ({"kernel": "5.10", "dt": "plain"}, {"kernel": "6.1", "dt": "dma-ranges"}, "kernel=5.10, dt=plain"),
    ({"bs": 4096}, {"bs": 1024}, "bs=4 KiB"),                      # a size in bytes has its unit
    ({"on": True}, {"on": False}, "on=yes"),
])
def test_side_label(own, other, label):
    assert macros._side_label(own, other) == label


@pytest.mark.parametrize("x,u,shown", [
    (14.2857, "us", "14.29 µs"), (1.5, "ratio", "1.500"), (0.25, "fraction", "0.2500"),
    (512 * 2**20, "bytes", "512 MiB"), (3.0, "", "3"), (2048.0, "B", "2 KiB"),
])
def test_claim_side_value(x, u, shown):
    assert macros._value(x, u) == shown


def test_skip_note_says_why_a_host_has_no_data():
    steps = [{"name": "a.x", "group": "a", "status": "ok", "reason": None},
             {"name": "b.y", "group": "b", "status": "skipped", "reason": "no <perf>"}]
    r = dict(json.loads(reference("lat_tcp").read_text()), steps=steps)
    assert "`b.y` skipped: no &lt;perf&gt;" in macros._skip_note(r, "b")
    assert "The `c` steps did not run in this run" in macros._skip_note(r, "c")
    assert "No measurement of this kind in this run." in macros._skip_note(r, "a")
    assert "`b.y` skipped" in macros._skip_note(r, None)
    # several steps that did not run: a list item each
    two = steps + [{"name": "b.z", "group": "b", "status": "failed", "reason": None}]
    assert macros._skip_note(dict(r, steps=two), "b") == \
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
    path.unlink()
    path.write_text(json.dumps({"version": 1, "width": 80, "height": 24}) + "\n")
    with pytest.raises(macros.MacroError, match="asciicast version 1, expected 2"):
        macros.cast("lat_tcp")
    path.write_text(json.dumps({"version": 2, "width": 100, "height": 30}) + "\n")  # a header alone: poster at 0
    md = macros.cast("lat_tcp")
    assert html.escape('"cols": 100, "rows": 30', quote=True) in md and "npt:0.0" in md


def _m(case: dict, samples: tuple) -> dict:
    s = [float(x) for x in samples]
    return {"metric": "rtt", "unit": "us", "case": case, "samples": s, "median": sorted(s)[len(s) // 2],
            "min": min(s), "max": max(s), "n": len(s)}


@pytest.mark.parametrize("a,b,shown", [
    ((10, 11, 12), (5, 5.5, 6), "2"),
    ((10, 11, 12), (5,), "2.2 (too few samples: n=3 ÷ n=1)"),
    ((10, 11, 12), (9, 10.5, 11), "1.05 (within noise: the two ranges overlap)"),
    ((10, 11, 12), (0, 0, 0), "– (pin=b: median is 0)"),
])
def test_here_ratio(a, b, shown):
    """Our ratio in "Original vs here": a ÷ b of the sides' medians, with the reason when it
    cannot be trusted (samples per side pooled as the claims pool them)."""
    r = {"measurements": [_m({"pin": "a"}, a), _m({"pin": "b"}, b)]}
    here = {"metric": "rtt", "a": {"pin": "a"}, "b": {"pin": "b"}}
    assert macros._here_ratio(r, here) == shown
    assert macros._here_ratio(r, dict(here, b={"pin": "c"})) == "– (no rtt measurement for pin=c)"


def test_claims_summary_counts_verdicts_in_their_order(tree):
    import re
    md = macros.claims("lat_tcp")
    summaries = re.findall(r"(\d+) claims: ([^.\n]*)\.", md)
    assert summaries
    from labkit import claims as claims_mod
    for total, body in summaries:
        parts = [p.split(" ", 1) for p in body.split(", ")]
        names = [name for _, name in parts]
        assert names == [v for v in claims_mod.VERDICTS if v in names]
        assert sum(int(n) for n, _ in parts) == int(total)


SENTENCE_RESULT = {"lab": "x", "run": {"command": ""}, "steps": [], "measurements": [
    m("rtt", "us", {"pin": "same-cpu", "r": 1}, [10.0, 11.0, 15.0]), m("rtt", "us", {"pin": "same-cpu", "r": 2}, [11.0, 13.0]),
    m("rtt", "us", {"pin": "other-cpu"}, [30.0, 40.0, 50.0]), m("rtt", "us", {"pin": "zero"}, [0.0, 0.0, 0.0]),
    m("rtt", "us", {"pin": "half"}, [0.5, 0.5, 0.5]),
    m("iops", "IOPS", {"qd": 4}, [300.0]), m("iops", "IOPS", {"qd": 32}, [400.0]),
    m("iops", "IOPS", {"qd": 1}, [100.0]), m("iops", "IOPS", {"qd": "all"}, [900.0])]}
COMPARE = {"kind": "compare", "metric": "rtt", "a": {"pin": "same-cpu"}, "b": {"pin": "other-cpu"}}
TREND = {"kind": "increasing", "metric": "iops", "over": "qd", "where": {}}


@pytest.mark.parametrize("claim,verdict,evidence,sentence", [
    # both sides' pooled medians (11 of 10, 11, 11, 13, 15), their ratio, samples per side
    (COMPARE, "holds", "e (x; y); why <b>", "11 µs same-cpu vs 40 µs other-cpu: other-cpu is 3.64× same-cpu, n = 5 / 3"),
    # any other verdict ends with the evidence's last top-level clause, escaped
    (COMPARE, "fails", "e (x; y); why <b>", "11 µs same-cpu vs 40 µs other-cpu: other-cpu is 3.64× same-cpu, n = 5 / 3; why &lt;b&gt;"),
    (dict(COMPARE, statistic="mean"), "inconclusive", "e; ranges overlap",
     "12 µs same-cpu vs 40 µs other-cpu (means): other-cpu is 3.33× same-cpu, n = 5 / 3; ranges overlap"),
    (dict(COMPARE, kind="within"), "holds", "e", "11 µs same-cpu vs 40 µs other-cpu: other-cpu is 3.64× same-cpu, n = 5 / 3"),
    # no ratio against a zero; the sides' labels in the order a, b
    (dict(COMPARE, b={"pin": "zero"}), "holds", "e", "11 µs same-cpu vs 0 µs zero, n = 5 / 3"),
    # a ratio against a value between 0 and 1 (the smaller side need only be above zero)
    (dict(COMPARE, b={"pin": "half"}), "holds", "e", "11 µs same-cpu vs 0.5000 µs half: same-cpu is 22.0× half, n = 5 / 3"),
    (dict(COMPARE, a={"pin": "other-cpu"}, b={"pin": "same-cpu"}), "holds", "e",
     "40 µs other-cpu vs 11 µs same-cpu: other-cpu is 3.64× same-cpu, n = 3 / 5"),
    (dict(COMPARE, b={"pin": "same-cpu", "r": 1}), "holds", "e", "11 µs a vs 11 µs r=1: the two are equal, n = 5 / 3"),
    # a side without data, a skip: the evidence is the sentence
    (dict(COMPARE, b={"pin": "none"}), "fails", "no rtt for <pin=none>", "no rtt for &lt;pin=none&gt;"),
    (COMPARE, "untested", "skipped: <no root>", "skipped: &lt;no root&gt;"),
    (COMPARE, "not applicable", "emulated CPU", "emulated CPU"),
    # a trend: first and last numeric points of `over`, and their ratio
    (TREND, "holds", "e", "iops from 100 IOPS at qd = 1 to 400 IOPS at qd = 32, 4.00×"),
    (TREND, "fails", "e; not increasing", "iops from 100 IOPS at qd = 1 to 400 IOPS at qd = 32, 4.00×; not increasing"),
    (dict(TREND, where={"qd": "none"}), "fails", "no iops", "no iops"),
])
def test_claim_sentence(claim, verdict, evidence, sentence):
    assert macros._claim_sentence(claim, {"verdict": verdict, "evidence": evidence}, SENTENCE_RESULT) == sentence


@pytest.mark.parametrize("text,last", [
    ("a; b (c; d); e", "e"), ("no clause", "no clause"), ("x (a; b)", "x (a; b)"), ("a; b; c", "c"),
    ("(a; b); c (d; e)", "c (d; e)"), ("a;b", "a;b"),
])
def test_last_clause_skips_parentheses(text, last):
    assert macros._last_clause(text) == last


def test_provenance_marks_a_stale_result_with_a_warning(tree, monkeypatch):
    monkeypatch.setattr(macros.stale, "staleness", lambda r, root: ("stale", "labs/lat_tcp changed since"))
    md = macros.provenance("lat_tcp")
    n = len(list((ROOT / "results").glob("*/lat_tcp.json")))
    # in each host's tab (indented 4), before its table
    assert md.count('    !!! warning "Stale result"\n\n        labs/lat_tcp changed since\n') == n
    assert md.count("| freshness | stale: labs/lat_tcp changed since |") == n
    monkeypatch.setattr(macros.stale, "staleness", lambda r, root: ("fresh", "no change since"))
    assert "Stale result" not in macros.provenance("lat_tcp")


def test_cast_title_carries_a_badge_only_when_emulated(tree):
    md = macros.cast("lat_tcp")
    for host, r in macros._need_lab("lat_tcp"):
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
    pairs = macros._need_lab("nvme_swiotlb")
    assert pairs[0][0].label == "aaa-bare"
    md = macros.artifact_text("nvme_swiotlb", **case)
    with_it = [(h, macros._artifacts(r, "log", case)[0]) for h, r in pairs if macros._artifacts(r, "log", case)]
    assert with_it and md.count("```text\n") == len(with_it)
    for h, art in with_it:
        assert art.get("title") and f"\n\n    {render.esc(art['title'])}." in md.split(f'"{h.title}"', 1)[1]


@pytest.mark.parametrize("shown,source,caption", [
    ("lines 2–3 of 10 lines", "standard output", "lines 2–3 of 10 lines of standard output"),
    ("no output", "standard output", "no standard output"),
    ("no output", "standard error", "no standard error"),
    ("no output", "output (stdout, then stderr)", "no output on stdout or stderr"),
    ("no output", "the file", "an empty file"),
    ("both lines", "the file", "both lines of the file"),
])
def test_an_empty_output_is_said_plainly(shown, source, caption):
    assert macros.shown_of(shown, source) == caption


@pytest.mark.parametrize("x,shown", [(3.6364, "3.64×"), (22.0, "22.0×"), (99.94, "99.9×"), (99.96, "100×"),
                                     (1670.4, "1,670×"), (1.0028, "1.00×"), (1.0, "1.00×"), (0.5, "0.500×")])
def test_a_ratio_is_never_in_scientific_notation(x, shown):
    assert macros._times(x) == shown


def test_a_size_in_a_claim_sentence_has_its_unit():
    r = dict(SENTENCE_RESULT, measurements=[m("bw", "MB/s", {"bs": 4096}, [10.0]), m("bw", "MB/s", {"bs": 4194304}, [30.0])])
    trend = {"kind": "increasing", "metric": "bw", "over": "bs", "where": {}}
    assert macros._claim_sentence(trend, {"verdict": "holds", "evidence": "e"}, r) == \
        "bw from 10 MB/s at bs = 4 KiB to 30 MB/s at bs = 4 MiB, 3.00×"
    assert macros._side_label({"bs": 4096, "x": 1}, {"bs": 1024, "x": 2}) == "bs=4 KiB, x=1"
