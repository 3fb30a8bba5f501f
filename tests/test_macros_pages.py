"""Page macros with exact expected Markdown: flame graphs (the lazy <object>, its size, links
relative to the page), the hosts table and the compare page's pairs of hosts, checks in words,
annotated outputs (context lines, errors, a file a host did not keep), skip notes and the
emulated-CPU badge. The results are the committed ones (the ``tree`` fixture) or copies of them
changed in the test; no measured value is typed here."""

from __future__ import annotations

import itertools
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from labkit import model, results
from labkit.site import macros
from labkit.view import render
from test_macros_render import add_host, emulate, link_tree, reference, remove_linked, replace_linked

ROOT = Path(__file__).resolve().parent.parent


def page(url: str, src: str) -> SimpleNamespace:
    """What mkdocs-macros gives a macro as its page: the URL and the Markdown source path."""
    return SimpleNamespace(url=url, file=SimpleNamespace(src_uri=src))


def lat_tcp_hosts() -> list[str]:
    return sorted(p.parent.name for p in (ROOT / "results").glob("*/lat_tcp.json"))


def test_flamegraph_object_size_and_links(tree, monkeypatch):
    monkeypatch.setattr(macros.build, "macro_env", None)
    md = macros.flamegraph("lat_tcp", pin="same-cpu")
    drawn = 0
    for label in lat_tcp_hosts():
        r = json.loads((ROOT / "results" / label / "lat_tcp.json").read_text())
        a = next((x for x in r["artifacts"] if x["kind"] == "flamegraph" and x["case"].get("pin") == "same-cpu"), None)
        if a is None:  # a host whose run skipped the flame graph shows the skip, not a figure
            reason = next(s["reason"] for s in r["steps"] if s["group"] == "perf" and s["status"] == "skipped")
            assert render.esc(reason) in md or reason in md, (label, reason)
            continue
        drawn += 1
        w, h = macros.figures.svg_size(ROOT / "results" / label / a["path"])
        target = f"results/{label}/{a['path']}"
        title = a["title"]
        assert (f'<span class="pc-flamegraph-wrap"><object class="pc-flamegraph" type="image/svg+xml" '
                f'data-pc-src="{target}" width="{w:g}" height="{h:g}" style="aspect-ratio:{w:g}/{h:g};--pc-w:{w:g}px" '
                f'aria-label="{title}"></object></span>\n\n    '
                f'{render.esc(title)}. [Open it on its own page]({target}) (click a frame to zoom, Ctrl-F to '
                f'search; where the column is too narrow for its text, the figure scrolls sideways).') in md
    assert drawn >= 1
    # inside a build: the object's URL is relative to the page's URL, the link to its source
    monkeypatch.setattr(macros.build, "macro_env", SimpleNamespace(page=page("cases/lat_tcp/", "cases/lat_tcp.md")))
    md = macros.flamegraph("lat_tcp", pin="same-cpu")
    assert re.search(r'data-pc-src="\.\./\.\./results/[^"]+\.svg"', md)
    assert re.search(r"\[Open it on its own page\]\(\.\./results/[^)]+\.svg\)", md)
    with pytest.raises(macros.MacroError, match="flamegraph artifacts match {} on .*; be more specific"):
        macros.flamegraph("lat_tcp")
    with pytest.raises(macros.MacroError, match="no host has a flamegraph artifact of lab 'lat_tcp' matching"):
        macros.flamegraph("lat_tcp", pin="nowhere")


def test_svg_size_reads_the_root_and_refuses_an_svg_without_its_size(tmp_path):
    """svg_size: the root element's width and height in px, also from a file with bytes that are
    not UTF-8 (read with errors="replace"); an SVG whose root has no width and height is refused,
    naming the file."""
    svg = tmp_path / "f.svg"
    svg.write_bytes(b'<?xml version="1.0" standalone="no"?><svg version="1.1" width="1200" height="342" '
                    b'xmlns="http://www.w3.org/2000/svg"><title>frame \xff\xfe</title></svg>\n')
    assert macros.figures.svg_size(svg) == (1200.0, 342.0)
    svg.write_text('<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 10 10"></svg>\n')
    with pytest.raises(macros.MacroError, match=rf"^{re.escape(str(svg))}: no width/height on the SVG root; "
                                                r"not an inferno flame graph\?$"):
        macros.figures.svg_size(svg)


@pytest.mark.parametrize("url,target,rel", [
    ("cases/lat_tcp/", "results/h/x.svg", "../../results/h/x.svg"),
    ("cases/lat_tcp.html", "results/h/x.svg", "../results/h/x.svg"),
    ("", "results/h/x.svg", "results/h/x.svg"),
])
def test_rel_urls(url, target, rel):
    assert macros.build.rel(page(url, "x.md"), target) == rel
    assert macros.build.rel(None, target) == target
    assert macros.build.rel_src(page(url, "cases/lat_tcp.md"), target) == "../" + target
    assert macros.build.rel_src(page(url, "index.md"), target) == target


@pytest.mark.parametrize("url,folder", [("cases/lat_tcp/", "cases/lat_tcp/"), ("cases/lat_tcp.html", "cases/"),
                                        ("evidence/fio_engines/", "evidence/fio_engines/"), ("404.html", ""), ("", "")])
def test_page_dir(url, folder):
    """The site folder a page's figure files go to: the page's own folder with directory URLs,
    the folder holding it otherwise, the site root for a page at the root."""
    assert macros.build.page_dir(page(url, "x.md")) == folder
    assert macros.build.page_dir(None) == ""


def test_macros_read_the_committed_results_outside_a_build():
    """A script that imports the macros (no build, no test fixture) reads every committed host:
    the host cache starts empty."""
    want = sorted({p.parent.name for p in (ROOT / "results").glob("*/*.json")})
    proc = subprocess.run([sys.executable, "-c", "from labkit.site.macros import build\n"
                           "print(' '.join(sorted({h.label for h in build.all_hosts()})))"],
                          cwd=ROOT, capture_output=True, text=True, timeout=60,
                          env={k: v for k, v in os.environ.items() if k != "PERF_CASEBOOK_RESULTS"} | {"PERF_CASEBOOK_LOCAL": "0"})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == want


def test_hosts_table_rows(tree):
    add_host(tree, "lat_tcp", "bare-vm", lambda r: r["host"].update(virtualization=None))
    md = macros.hosts_table()
    lines = md.splitlines()
    assert lines[0] == "| host | arch | CPU | kernel | virtualization | labs (mode, date) |"
    row = next(x for x in lines if x.startswith("| bare-vm |"))
    r = json.loads(reference("lat_tcp").read_text())
    mode = "quick" if r["run"]["quick"] else "full"
    assert row.endswith(f"| – | lat\\_tcp ({mode}, {r['run']['start'][:10]}) |") or \
        row.endswith(f"| – | lat_tcp ({mode}, {r['run']['start'][:10]}) |"), row
    assert len([x for x in lines[2:] if x.startswith("|")]) == len(list((ROOT / "results").iterdir())) + 1


def test_hosts_table_names_each_kernel_with_its_labs(tree):
    """A host whose results were measured on two kernels shows each kernel with the labs measured
    on it; a host on one kernel shows it alone."""
    add_host(tree, "lat_tcp", "twokernels", lambda r: r["host"].update(kernel="9.9.9-a"))
    src = reference("fstime")
    r = json.loads(src.read_text())
    r["host"].update(label="twokernels", kernel="9.9.9-b")
    link_tree(src.parent / "fstime", tree / "results" / "twokernels" / "fstime")
    model.write_atomic(tree / "results" / "twokernels" / "fstime.json", r)
    macros.build.hosts_cache = None
    row = next(x for x in macros.hosts_table().splitlines() if x.startswith("| twokernels |"))
    assert "| 9.9.9-b (fstime); 9.9.9-a (lat\\_tcp) |" in row or "| 9.9.9-b (fstime); 9.9.9-a (lat_tcp) |" in row, row
    assert macros.runs.kernels_text({"a": {"host": {"kernel": "k1"}}, "b": {"host": {"kernel": "k1"}}}) == "k1"


def test_hosts_table_marks_a_stale_result(tree, monkeypatch):
    from labkit import stale
    monkeypatch.setattr(stale, "staleness", lambda r, root: ("stale", "x") if r["lab"] == "fstime" else ("fresh", "y"))
    macros.build.hosts_cache = None
    md = macros.hosts_table()
    assert re.search(r"fstime \((quick|full), \d{4}-\d\d-\d\d, stale\)", md), md
    assert not re.search(r"lat\\?_tcp \([^)]*stale", md), md


def test_compare_hosts_every_pair_once(tree, monkeypatch):
    """One tab per pair of hosts with a lab in common, no other pair (the committed hosts need
    not share a lab: one lab's reference can come from another host than the rest)."""
    labs = {p.name: {f.stem for f in p.glob("*.json")} for p in (ROOT / "results").iterdir() if p.is_dir()}
    sharing = [(a, b) for a, b in itertools.combinations(sorted(labs), 2) if labs[a] & labs[b]]
    def pairs(md: str) -> list[str]:
        return re.findall(r'^(?:===!? "|<p class="pc-caption">)(.+? vs [^"<]+)', md, re.M)
    assert len(pairs(macros.compare_hosts())) == len(sharing) > 0
    add_host(tree, "lat_tcp", "third", lambda r: None)
    got = pairs(macros.compare_hosts())
    with_lat_tcp = [h for h in labs if "lat_tcp" in labs[h]]
    assert len(got) == len(set(got)) == len(sharing) + len(with_lat_tcp)
    assert len([p for p in got if "third" in p.split(" vs ")]) == len(with_lat_tcp)
    monkeypatch.setattr(macros.build, "all_hosts", lambda: results.load_hosts(tree)[:1])
    assert macros.compare_hosts() == ('!!! info "One host so far"\n\n    Comparisons need results from at least two '
                                      'hosts with a lab in common. Run `make labs` to add this machine.\n')


@pytest.mark.parametrize("check,words", [
    ({"kind": "compare", "relation": "less", "metric": "rtt", "a": {"pin": "same"}, "b": {"pin": "other"}, "factor": 1.5},
     "1.5 times the median rtt with pin=same is below the one with pin=other"),
    ({"kind": "compare", "relation": "greater", "metric": "rtt", "a": {"pin": "same"}, "b": {}, "factor": 2},
     "the median rtt with pin=same is above 2 times the one over all cases"),
    ({"kind": "compare", "relation": "not_less", "metric": "rtt", "a": {"x": 1, "y": "z"}, "b": {"x": 2}},
     "the median rtt with x=1, y=z is at least the one with x=2"),
    ({"kind": "within", "metric": "iops", "a": {"s": "none"}, "b": {"s": "kyber"}, "factor": 1.1, "statistic": "mean"},
     "the mean iops with s=none and the one with s=kyber agree within a factor of 1.1"),
    ({"kind": "increasing", "metric": "iops", "where": {"rw": "read"}, "over": "qd"}, "the median iops with rw=read grows with qd"),
    ({"kind": "step", "step": "noserver.client"}, "step noserver.client does what it was designed to do"),
    ({"kind": "step", "where": {"experiment": "noserver", "rep": 1}}, "step experiment=noserver, rep=1 does what it was designed to do"),
])
def test_describe_check(check, words):
    assert macros.practice.describe_check(check) == words


def _ok_step_with_output(r: dict) -> tuple[str, list[str]]:
    """A step of ``r`` that ran and printed at least 6 lines on stdout, lines 3 to 5 not empty and
    line 4 unlike any other (a pattern picks it alone), and those lines."""
    for s in r["steps"]:
        f = reference("lat_tcp").parent / "lat_tcp" / "raw" / f"{s['name']}.out"
        lines = f.read_text().splitlines() if s["status"] == "ok" and f.exists() else []
        if len(lines) >= 6 and all(x.strip() for x in lines[2:5]) and \
                sum(lines[3].strip()[:20] in x for x in lines) == 1 and lines[2] != lines[4]:
            return s["name"], lines
    pytest.skip("no lat_tcp step with 6 lines of output")


def test_annotated_output_context_and_errors(tree):
    r = json.loads(reference("lat_tcp").read_text())
    step, out = _ok_step_with_output(r)
    pattern = re.escape(out[3].strip()[:20])

    def shown(**kw) -> list[bool]:
        """Which of lines 3, 4, 5 the first host's excerpt shows."""
        md = macros.annotated_output("lat_tcp", step, stream="out", match=pattern, **kw)
        first = md.split('"\n\n', 1)[1].split("\n===", 1)[0]
        return [f"    {x}" in first.splitlines() for x in out[2:5]]
    assert shown(before=1, after=0) == [True, True, False]
    assert shown(before=0, after=1) == [False, True, True]
    assert shown(context=1) == [True, True, True]
    assert shown(context=1, after=0) == [True, True, False]
    assert shown() == [False, True, False]
    with pytest.raises(macros.MacroError, match=r"^annotated_output: notes= is a list of \[pattern, text\] pairs$"):
        macros.annotated_output("lat_tcp", step, notes=[["a"]])
    with pytest.raises(macros.MacroError, match=r"^annotated_output: stream='x': one of out, err, both$"):
        macros.annotated_output("lat_tcp", step, stream="x")
    with pytest.raises(macros.MacroError, match=r"^annotated_output: match='\(' is not a regular expression: "):
        macros.annotated_output("lat_tcp", step, match="(")
    with pytest.raises(macros.MacroError, match=r"^step_output: match='\(' is not a regular expression: "):
        macros.step_output("lat_tcp", step, match="(")
    # a pattern the compiler only warns about (a nested set a later Python will read otherwise)
    with pytest.raises(macros.MacroError, match=r"^step_output: match='%  \[\[\]' is not a regular expression: Possible nested set"):
        macros.step_output("lat_tcp", step, match="%  [[]")
    with pytest.raises(macros.MacroError, match=r"^annotated_output: note pattern '\[\[x\]': Possible nested set"):
        macros.annotated_output("lat_tcp", step, notes=[["[[x]", "a note"]])


def test_annotated_output_of_a_file_one_host_did_not_keep(tree):
    r = json.loads(reference("lat_tcp").read_text())
    step, _ = _ok_step_with_output(r)
    file = f"raw/{step}.out"
    add_host(tree, "lat_tcp", "lost-file", lambda r: None)
    remove_linked(tree / "results" / "lost-file" / "lat_tcp" / "raw" / f"{step}.out")
    md = macros.annotated_output("lat_tcp", file=file, tail=2)
    assert ('!!! warning "Not kept on this host"\n\n        This run of `lat_tcp` kept no '
            f'`{file}`.') in md
    assert f"the file `{file}` of this run; " in md and " of the file." in md


def test_skip_note_is_a_warning_and_the_badge_leads_the_tab(tree):
    r = json.loads(reference("lat_tcp").read_text())
    assert macros.build.skip_note(dict(r, steps=[]), None).startswith('!!! warning "Not measured on this host"\n\n    ')
    add_host(tree, "lat_tcp", "emu", emulate)
    host = next(h for h in macros.build.all_hosts() if h.label == "emu")
    title, body = macros.build.tab(host, host.results["lat_tcp"], "BODY")
    assert title == host.title and body == render.emulation_badge(host.results["lat_tcp"]["host"]) + "\n\nBODY"
    plain = next(h for h in macros.build.all_hosts() if "lat_tcp" in h.results and not h.results["lat_tcp"]["host"].get("emulation"))
    assert macros.build.tab(plain, plain.results["lat_tcp"], "BODY") == (plain.title, "BODY")


def _with_raw(tree: Path, label: str, step: str, n_lines: int, change=None) -> None:
    """A host whose ``step`` printed ``n_lines`` numbered lines on stdout and nothing on stderr."""
    add_host(tree, "lat_tcp", label, change or (lambda r: None))
    raw = tree / "results" / label / "lat_tcp" / "raw"
    replace_linked(raw / f"{step}.out", "".join(f"line {i}\n" for i in range(1, n_lines + 1)))
    replace_linked(raw / f"{step}.err", "")


def test_step_output_whole_output_limit_and_exit_status(tree, monkeypatch):
    r = json.loads(reference("lat_tcp").read_text())
    step = next(s["name"] for s in r["steps"] if s["status"] == "ok")

    def only(*labels: str) -> None:
        hosts = [x for x in results.load_hosts(tree) if x.label in labels]
        monkeypatch.setattr(macros.build, "all_hosts", lambda: hosts)

    def expect_failure(r):
        next(s for s in r["steps"] if s["name"] == step).update(expect="failure", exit_code=1)
    _with_raw(tree, "only-40", step, macros.excerpts.EXCERPT_MAX_LINES, expect_failure)
    _with_raw(tree, "only-41", step, macros.excerpts.EXCERPT_MAX_LINES + 1)
    only("only-40")
    md = macros.step_output("lat_tcp", step, stream="out")           # exactly the limit: shown whole
    assert re.search(r"^\s*line 1$", md, re.M) and re.search(r"^\s*line 40$", md, re.M)
    assert "exit status 1 (expected to fail), " in md
    md = macros.step_output("lat_tcp", step, stream="out", match="^line 4[01]$")
    assert "line 40" in md
    only("only-41")
    with pytest.raises(macros.MacroError, match=rf"^step_output: {re.escape(step)} of lat_tcp on only-41 printed 41 "
                                                r"lines: choose an excerpt with lines='1-20', match='regex' "
                                                r"\(with context=\) or tail=N$"):
        macros.step_output("lat_tcp", step, stream="out")
    md = macros.step_output("lat_tcp", step, stream="out", tail=1)
    assert re.search(r"^\s*line 41$", md, re.M) and not re.search(r"^\s*line 40$", md, re.M)
    assert "exit status 0, " in md and "expected to fail" not in md
    # one host without a matching line says so; the other shows its match
    only("only-40", "only-41")
    md = macros.step_output("lat_tcp", step, stream="out", match="^line 41$")
    nothing = md.split('"only-40"', 1)[1].split("\n===", 1)[0]
    assert '!!! warning "Nothing to show on this host"' in nothing
    said = re.escape("match=&#x27;^line 41$&#x27; picks no line of this host&#x27;s 40-line output."), \
        re.escape("match='^line 41$' picks no line of this host's 40-line output.")
    assert any(re.search(rf"^\s+{x}$", nothing, re.M) for x in said), nothing   # the note's whole line
    assert "    line 41\n" in md.split('"only-41"', 1)[1]


def test_claims_table_marks_a_changed_verdict_and_folds_the_evidence(tree):
    from labkit.stats import claims as claims_mod
    spec = claims_mod.load(tree / "labs" / "lat_tcp" / "claims.toml")
    first = spec[0]["id"]

    def flip(r):
        c = next(c for c in r["claims"] if c["id"] == first)
        c["verdict"] = "untested" if c["verdict"] != "untested" else "holds"
    add_host(tree, "lat_tcp", "flipped", flip)
    md = macros.claims("lat_tcp")
    tab = md.split('"flipped"', 1)[1].split("\n===", 1)[0]
    assert re.search(r" \*\(recorded as (untested|holds) when the lab ran; the claim or the verdict rules changed "
                     r"since\)\*", tab)
    assert md.count("*(recorded as") == 1
    folds = re.findall(r'<details class="pc-evidence"><summary>evidence</summary>(.*?)</details>', tab)
    assert folds and all(f.strip() for f in folds)


def test_provenance_lists_every_tool_version(tree):
    md = macros.provenance("lat_tcp")
    for label in lat_tcp_hosts():
        r = json.loads((ROOT / "results" / label / "lat_tcp.json").read_text())
        for tool, version in r["tools"].items():
            assert f"| tool: {render.esc(tool)} | {render.esc(version)} |" in md, (label, tool)


def test_compare_hosts_names_each_lab_and_its_rows(tree):
    """Each lab's comparison is a fold titled with its row count and its rows marked "yes",
    "within noise" and "too few samples", which add up to it."""
    md = macros.compare_hosts()
    heads = list(re.finditer(r'^\s*\?\?\? note "(\w+): (\d+) measurements in common, (\d+) beyond noise, (\d+) '
                             r'within noise, (\d+) with too few samples"', md, re.M))
    found = [m.groups() for m in heads]
    for m in heads:      # one fold per pair of hosts: a lab may have several, even of one size
        lab, n, beyond, within, few = m.groups()
        block = md[m.end():].split("??? note", 1)[0]
        rows = [x for x in block.splitlines() if x.strip().startswith("|")][2:]
        assert len(rows) == int(n) == int(beyond) + int(within) + int(few), lab
        for mark, count in (("yes", beyond), ("within noise", within), ("too few samples", few)):
            assert len([x for x in rows if x.rstrip().endswith(f"| {mark} |")]) == int(count), (lab, mark)
    assert {f[0] for f in found} >= {"lat_tcp"}
    assert any(int(f[2]) > 0 for f in found) and any(int(f[4]) > 0 for f in found)


def test_metrics_table_and_flamegraph_refusals_say_why(tree):
    with pytest.raises(macros.MacroError, match=r"^metrics_table: columns= names the case keys of a row$"):
        macros.metrics_table("lat_tcp", ["round_trip"], columns=[])
    with pytest.raises(macros.MacroError, match=r"^metrics_table: no host has \['nope'\] measurements in lab "
                                                r"'lat_tcp' where \{'experiment': 'pinned'\}$"):
        macros.metrics_table("lat_tcp", ["round_trip", "nope"], where={"experiment": "pinned"},
                             columns=["pin", "client_cpu", "server_cpu", "msize", "tool"])
    with pytest.raises(macros.MacroError, match=r"^flamegraph: 2 flamegraph artifacts match \{\} on [\w-]+; be more "
                                                r"specific$"):
        macros.flamegraph("lat_tcp")


def test_annotated_output_marks_a_step_expected_to_fail(tree, monkeypatch):
    r = json.loads(reference("lat_tcp").read_text())
    step = next(s["name"] for s in r["steps"] if s["status"] == "ok")

    def expect_failure(r):
        next(s for s in r["steps"] if s["name"] == step).update(expect="failure", exit_code=1)
    _with_raw(tree, "xfail-host", step, 3, expect_failure)
    _with_raw(tree, "ok-host", step, 3)
    hosts = [x for x in results.load_hosts(tree) if x.label in ("xfail-host", "ok-host")]
    monkeypatch.setattr(macros.build, "all_hosts", lambda: hosts)
    md = macros.annotated_output("lat_tcp", step, stream="out")
    assert md.split('"ok-host"', 1)[1].split("\n===", 1)[0].count("exit status 0, ") == 1
    assert "exit status 1 (expected to fail), " in md.split('"xfail-host"', 1)[1]
    assert md.count("expected to fail") == 1


def test_tool_exercises_link_their_chapter_from_the_card(tree, monkeypatch):
    from labkit import cards
    tool = max(cards.tools(), key=lambda t: len(cards.load(t)))     # a card of exercises in two labs
    per_lab = cards.load(tool)
    labs = [lab for lab, _ in per_lab]
    assert len(labs) >= 2, labs
    monkeypatch.setattr(macros.build, "macro_env", SimpleNamespace(page=page(f"tools/{tool}/", f"tools/{tool}.md")))
    md = macros.tool_exercises(tool)
    for lab in labs:
        assert f"**Lab:** [{lab}](../cases/{lab}.md). **Change.** " in md
    n = sum(len(exs) for _, exs in per_lab)
    assert md.count('??? question "Our prediction"\n') == n
    # numbered across the card's labs, each exercise a block of its own from the start of a line
    assert all(f'\n!!! example "Exercise {i}: ' in "\n" + md for i in range(1, n + 1)), md[:800]
    # and, folded in each, how its check came out on every host with a result of its lab
    for lab, exs in per_lab:
        assert md.count(f'??? success "Checked on the {lab} results of this site"\n') == len(exs)
    assert md.count("\n        - **") == sum(len(exs) * len(macros.build.for_lab(lab)) for lab, exs in per_lab)
    # a row: the host, the verdict's mark, then the check's evidence as the engine words it
    from labkit.stats import claims as claims_mod
    from labkit.view import commands
    lab, exs = per_lab[0]
    host, r = macros.build.for_lab(lab)[0]
    v = claims_mod.evaluate_cached(claims_mod.exercise_claim(exs[0]), r)
    assert (f"- **{render.host_label(r['host'], host.title)}**: {render.VERDICT_MARK[v['verdict']]}. "
            f"{render.esc(commands.display_text(v['evidence'], r))}\n") in md
    monkeypatch.setattr(macros.build, "macro_env", None)
    assert f"**Lab:** [{labs[0]}](cases/{labs[0]}.md)." in macros.tool_exercises(tool)


def test_lab_time_names_each_host_in_turn(tree):
    pairs = macros.build.for_lab("lat_tcp")
    parts = macros.lab_time("lat_tcp").split("; ")
    assert len(pairs) >= 2 and len(parts) == len(pairs)
    for part, (host, r) in zip(parts, pairs):
        assert part == (f"{macros.runs.duration_text(r['run']['duration_s'])} ({'quick' if r['run']['quick'] else 'full'} run, "
                        f"{render.host_label(r['host'], host.title)}{macros.runs.skipped_groups(r)})")


def test_lab_time_says_which_whole_groups_a_run_left_out():
    def result(*steps):
        return {"steps": [{"name": n, "group": g, "status": st} for n, g, st in steps]}
    assert macros.runs.skipped_groups(result(("a", "dd", "ok"), ("b", "dd", "skipped"))) == ""
    assert macros.runs.skipped_groups(result(("a", "dd", "ok"), ("g", "guest", "skipped"))) == ", without the guest group"
    assert macros.runs.skipped_groups(result(("a", "dd", "ok"), ("g", "guest", "skipped"), ("f", "fgraph", "skipped"),
                                         ("f2", "fgraph", "skipped"))) == ", without the guest and fgraph groups"
    assert macros.runs.skipped_groups(result(("g", "guest", "skipped"), ("g2", "guest", "failed"))) == ""


def test_diff_flamegraphs_are_interactive_too(tree, monkeypatch):
    monkeypatch.setattr(macros.build, "macro_env", None)
    md = macros.flamegraph("fstime", kind="diff_flamegraph", group="perf", drawn_on=None)
    assert md.count("(click a frame to zoom, Ctrl-F to search; where the column is too narrow for its text, the figure scrolls sideways)") >= 1
    assert "a static image" not in md


def test_cast_goes_on_past_a_host_without_a_recording(tree):
    """A host without a recording sorted first does not end the list; each recording is its own
    paragraph."""
    def no_cast(r):
        r["artifacts"] = [a for a in r["artifacts"] if a["kind"] != "cast"]
    add_host(tree, "lat_tcp", "aaa-no-cast", no_cast)
    add_host(tree, "lat_tcp", "zzz-cast", lambda r: None)
    pairs = macros.build.for_lab("lat_tcp")
    assert pairs[0][0].label == "aaa-no-cast"
    with_cast = [h for h, r in pairs if any(a["kind"] == "cast" for a in r["artifacts"])]
    md = macros.cast("lat_tcp")
    assert len(with_cast) >= 2 and md.count('<figure class="pc-cast-figure">') == len(with_cast)
    assert md.count("</figure>\n\n**") == len(with_cast) - 1 and "zzz-cast" in md


def test_annotated_output_says_plainly_when_a_host_kept_an_empty_file(tree):
    """No empty code block (under prose and notes that describe lines) for a host whose kept
    file is empty, as the arm64 guest's `ps` watcher file of lat_tcp's free run is."""
    r = json.loads(reference("lat_tcp").read_text())
    step, _ = _ok_step_with_output(r)
    file = f"raw/{step}.out"
    add_host(tree, "lat_tcp", "empty-file", lambda r: None)
    dst = tree / "results" / "empty-file" / "lat_tcp" / "raw" / f"{step}.out"
    replace_linked(dst, "")
    md = macros.annotated_output("lat_tcp", file=file, tail=2)
    tab = md.split('"empty-file"')[1].split('===')[0]
    assert '!!! warning "Nothing to show on this host"' in tab and f"the file `{file}` of this run is empty." in tab
    assert "```" not in tab


def test_a_kept_file_that_is_not_utf8_shows_a_replacement_character(tree):
    """A tool's output is bytes: a kept file with a byte that is not UTF-8 (a truncated
    multi-byte character, a binary dump) is shown with U+FFFD in its place, not refused."""
    r = json.loads(reference("lat_tcp").read_text())
    step, _ = _ok_step_with_output(r)
    file = f"raw/{step}.out"
    add_host(tree, "lat_tcp", "bad-bytes", lambda r: None)
    dst = tree / "results" / "bad-bytes" / "lat_tcp" / "raw" / f"{step}.out"
    replace_linked(dst, b"first line\nhalf a character: \xe2\x82\nlast line\n")
    md = macros.annotated_output("lat_tcp", file=file, tail=3)
    tab = md.split('"bad-bytes"')[1].split('===')[0]
    assert "half a character: \ufffd" in tab and "last line" in tab, tab


def test_a_lab_file_is_read_once_per_build_and_each_caller_gets_its_own_copy(monkeypatch, tmp_path):
    from labkit.site.macros import build
    reads = []

    def load(path):
        reads.append(path)
        if "bad" in path.read_text():
            raise ValueError(f"{path}: bad")
        return {"claim": [{"id": "x"}]}
    monkeypatch.setattr(build, "ROOT", tmp_path)
    f = tmp_path / "labs" / "lab" / "claims.toml"
    f.parent.mkdir(parents=True)
    f.write_text("good")
    build.start_build(None)
    first = build.lab_file(load, "lab", "claims.toml")
    first["claim"].append("changed by a caller")
    assert build.lab_file(load, "lab", "claims.toml") == {"claim": [{"id": "x"}]}
    assert reads == [f]
    f.write_text("bad, and longer")   # an edit (another size) is read again; an error is not remembered
    for _ in range(2):
        with pytest.raises(ValueError, match="bad"):
            build.lab_file(load, "lab", "claims.toml")
    f.write_text("good again")
    build.lab_file(load, "lab", "claims.toml")
    build.start_build(None)   # a new build (a rebuild under mkdocs serve) reads again
    build.lab_file(load, "lab", "claims.toml")
    assert len(reads) == 5


def test_original_ratios_are_read_back_from_the_cache(tmp_path, monkeypatch):
    """The intervals of "Original vs here" are computed once, then read from .cache/ratios; a
    changed sample computes anew."""
    from labkit.stats import claims
    monkeypatch.setenv("PCB_BUILD_CACHE", str(tmp_path))
    calls = []
    real = claims.ratio_interval
    monkeypatch.setattr(claims, "ratio_interval", lambda a, b: calls.append(1) or real(a, b))
    a = claims.Side("a", [1.0, 1.1, 1.2, 1.05, 0.98], "s", 5)
    b = claims.Side("b", [2.0, 2.1, 2.2, 2.05, 1.98], "s", 5)
    e = claims.ratio_interval_cached(a, b)
    assert claims.ratio_interval_cached(a, b) == e == json.loads(json.dumps(real(a, b)))
    assert len(calls) == 1 and len(list((tmp_path / "ratios").glob("*.json"))) == 1
    claims.ratio_interval_cached(a.scaled(1.01), b)
    assert len(calls) == 2
