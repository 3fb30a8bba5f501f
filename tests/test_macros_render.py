"""Page macros: the original investigation's tables, original vs here, exercises,
the claims table's verdicts and sources, escaping of result text, the emulated-CPU badge.

Macros run in-process on a throwaway tree (labs + results copied from the checkout, results
derived from the committed ones); their Markdown is rendered with the site's extensions."""

from __future__ import annotations

import copy
import html
import json
import re
from pathlib import Path

import markdown
import pytest
from markupsafe import escape

from labkit import model, original
from labkit.site import macros
from labkit.stats import claims as claims_mod
from labkit.view import render
import refhost

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = ROOT / "tests" / "fixtures" / "original" / "lat_tcp.toml"
# original.toml needs a [[conclusion]]; the fixture's tables are quoted from seed 004, and so is this
CONCLUSION = """
[[conclusion]]
id = "same-cpu-best"
text = "Client and server on the same CPU give the best result, on different CPUs the worst (test fixture)."
"""
BADGE = "emulated aarch64 (QEMU TCG on x86_64): timings are not hardware"
TCG = {"emulator": "qemu-system-aarch64", "accelerator": "tcg", "machine": "virt", "guest_cpu": "cortex-a72",
       "host_arch": "x86_64", "host_cpu": None, "host_label": None}


def html_of(md: str) -> str:
    """The Markdown as the site renders it (the extensions the macros rely on)."""
    return markdown.markdown(md, extensions=["tables", "admonition", "attr_list", "md_in_html", "pymdownx.details",
                                             "pymdownx.superfences", "pymdownx.tabbed"])


def fixture_text() -> str:
    """The fixture original.toml with a conclusion, as every original.toml has."""
    return FIXTURE.read_text() + CONCLUSION


def reference(lab: str) -> Path:
    return refhost.result(lab)


# `tree` (a checkout-like tree of labs/ and the committed results) is in conftest.py.


def link_tree(src: Path, dst: Path) -> None:
    """``dst`` made a symbolic link to the folder ``src``: a reference's kept outputs (up to
    4,100 files) shared through one link, not one per file. A test that changes
    such a file does it with :func:`replace_linked`, which gives the folders above it contents of
    their own first: writing through the link would change the committed file (the session's
    ``committed_results_stay_as_they_are`` guard in conftest.py fails the run if one does)."""
    dst.parent.mkdir(parents=True, exist_ok=True)
    dst.symlink_to(src, target_is_directory=True)


def _unshare(path: Path) -> None:
    """Every folder above ``path`` that is a link to a committed result folder made a real
    folder whose entries link to that folder's entries, top down: ``path`` itself is then a link
    of its own (or absent), and removing it leaves the committed files alone. Links elsewhere
    (a /tmp that is a link) are not touched."""
    results = (ROOT / "results").resolve()
    for folder in reversed(path.parents):
        if not folder.is_symlink():
            continue
        target = folder.resolve()
        if not (target.is_dir() and target.is_relative_to(results)):
            continue
        folder.unlink()
        folder.mkdir()
        for entry in target.iterdir():
            (folder / entry.name).symlink_to(entry)


def remove_linked(path: Path) -> None:
    """Take a file out of a :func:`link_tree` copy, the committed file staying (:func:`_unshare`)."""
    _unshare(path)
    path.unlink()


def replace_linked(path: Path, data: str | bytes) -> None:
    """Give a file of a :func:`link_tree` copy contents of its own: the folders above it are
    unshared (:func:`_unshare`) and the file's link removed first, so the committed file it
    pointed to stays as it is."""
    _unshare(path)
    path.unlink(missing_ok=True)
    if isinstance(data, bytes):
        path.write_bytes(data)
    else:
        path.write_text(data)


def add_host(root: Path, lab: str, label: str, change) -> dict:
    """A second host folder whose result of ``lab`` is the committed one, relabelled and
    changed by ``change(result)``; its raw outputs are the committed ones, linked
    (:func:`link_tree`)."""
    src = reference(lab)
    r = json.loads(src.read_text())
    r["host"]["label"] = label
    change(r)                   # validated when the macros load it (labkit.model.load)
    dst = root / "results" / label
    dst.mkdir(parents=True)
    link_tree(src.parent / lab, dst / lab)
    model.write_atomic(dst / f"{lab}.json", r)
    macros.build.hosts_cache = None
    return r


def scale_same_cpu(r: dict, factor: float) -> None:
    """lat_tcp's pinned round trips with every same-cpu sample multiplied by ``factor`` (its
    summary follows)."""
    for m in r["measurements"]:
        if m["metric"] == "round_trip" and m["case"].get("experiment") == "pinned" and m["case"].get("pin") == "same-cpu":
            m["samples"] = [x * factor for x in m["samples"]]
            m.update(model.summarize(m["samples"]))


def same_cpu_slower(r: dict) -> None:
    """The claim ``same-cpu-faster``'s two sides exchanged: every same-cpu sample made 8 times
    longer, so the claim fails whatever it did before."""
    scale_same_cpu(r, 8.0)


def same_cpu_quicker(r: dict) -> None:
    """Every same-cpu sample made 8 times shorter: ``same-cpu-faster`` holds whatever it did before."""
    scale_same_cpu(r, 1 / 8.0)


def emulate(r: dict) -> None:
    r["host"]["arch"] = "aarch64"
    r["host"]["emulation"] = dict(TCG)


# ---- escaping ----

def _pmu_reason() -> str:
    """A real reason with angle brackets: perf's "<not supported>" in a committed result."""
    for p in sorted((ROOT / "results").glob("*/*.json")):
        reason = json.loads(p.read_text())["host"]["pmu"]["reason"]
        if "<" in reason:
            return reason
    pytest.skip("no committed result has a reason with angle brackets")


def test_a_replaced_linked_file_leaves_the_committed_one_alone(tree):
    """add_host shares a reference's kept outputs through one folder link; replace_linked gives
    the new host a file of its own while the committed file and its neighbours stay as they are."""
    add_host(tree, "lat_tcp", "copy", lambda r: None)
    raw = reference("lat_tcp").parent / "lat_tcp" / "raw"
    first, second = sorted(p for p in raw.iterdir() if p.is_file())[:2]
    before = first.read_bytes()
    mine = tree / "results" / "copy" / "lat_tcp" / "raw" / first.name
    assert mine.read_bytes() == before
    replace_linked(mine, "mine\n")
    assert mine.read_text() == "mine\n" and first.read_bytes() == before
    assert (mine.parent / second.name).read_bytes() == second.read_bytes()
    assert not (tree / "results" / "copy" / "lat_tcp").is_symlink()


def test_skip_reason_with_angle_brackets_renders_as_text(tree):
    reason = _pmu_reason()

    def skip_one(r):
        r["steps"][0].update(status="skipped", reason=reason, exit_code=None)
    add_host(tree, "lat_tcp", "skipper", skip_one)
    out = html_of(macros.skips("lat_tcp"))
    assert reason.replace("<", "&lt;").replace(">", "&gt;") in out
    assert "<not supported>" not in out
    note = html_of(macros.build.skip_note(json.loads((tree / "results" / "skipper" / "lat_tcp.json").read_text()), None))
    assert "&lt;not supported&gt;" in note


def test_claim_evidence_and_provenance_are_escaped(tree):
    reason = _pmu_reason()
    claim = next(c for c in claims_mod.load(tree / "labs" / "lat_tcp" / "claims.toml") if c["kind"] == "step")

    def skip_step(r):
        next(s for s in r["steps"] if s["name"] == claim["step"]).update(status="skipped", reason=reason, exit_code=None)
    add_host(tree, "lat_tcp", "skipper", skip_step)
    out = html_of(macros.claims("lat_tcp"))
    assert f"step {claim['step']} skipped: " + reason.replace("<", "&lt;").replace(">", "&gt;") in out
    prov = html_of(macros.provenance("lat_tcp"))
    assert "&lt;not supported&gt;" in prov and "<not supported>" not in prov


def test_esc_and_code_span():
    assert render.esc("<b>x</b> a_b *c*") == "&lt;b&gt;x&lt;/b&gt; a\\_b \\*c\\*"
    assert html_of(render.esc("<not supported> [x](y) `z`")).count("&lt;not supported&gt;") == 1
    span = render.code_span("printf '%s``x'")
    assert html_of(span) == "<p><code>printf '%s``x'</code></p>"


# ---- the emulated-CPU badge ----

def test_emulated_host_is_badged_everywhere(tree):
    add_host(tree, "lat_tcp", "arm64-tcg", emulate)
    assert render.emulation(model.load(tree / "results" / "arm64-tcg" / "lat_tcp.json")["host"]) == BADGE
    outputs = {
        "results_table": macros.results_table("lat_tcp", "round_trip", where={"experiment": "pinned"}),
        "claims": macros.claims("lat_tcp"),
        "provenance": macros.provenance("lat_tcp"),
        "skips": macros.skips("lat_tcp"),
        "step_output": macros.step_output("lat_tcp", "noserver", tail=5),
        "hosts_table": macros.hosts_table(),
        "host_provenance": macros.host_provenance(),
        "compare_hosts": macros.compare_hosts(),
        "chart": macros.chart("lat_tcp", "round_trip", x="msize", where={"experiment": "msize"}),
    }
    for name, md in outputs.items():
        assert md.count(BADGE) >= 1, name
        assert BADGE in html_of(md), name
    # hardware hosts carry no badge
    ref = model.load(reference("lat_tcp"))
    assert render.emulation(ref["host"]) is None and render.emulation_badge(ref["host"]) == ""

    # the host table names the emulated machine and CPU from the result's emulation fields
    rows = dict(macros.runs.host_rows(model.load(tree / "results" / "arm64-tcg" / "lat_tcp.json")["host"]))
    assert rows["emulation"] == "qemu-system-aarch64, accelerator tcg, machine virt, CPU cortex-a72 on x86\\_64 (?)"


def test_a_host_with_an_emulated_cpu_never_comes_first(tree):
    """Host tabs list real CPUs first: the first tab's tables are the ones in the page at load
    (lazy_tabs), and a label that sorts first must not put an emulated host there."""
    add_host(tree, "lat_tcp", "aaa-tcg", emulate)
    labels = [h.label for h, _ in macros.build.for_lab("lat_tcp")]
    assert sorted(labels)[0] == "aaa-tcg"                      # first in the folders' order
    flags = [macros.build.emulated(h) for h, _ in macros.build.for_lab("lat_tcp")]
    assert flags == sorted(flags) and not flags[0] and flags[-1]
    assert macros.hosts_table().index("aaa-tcg") > macros.hosts_table().index(refhost.HOST)


def test_timing_claims_are_not_applicable_on_the_emulated_host(tree):
    r = add_host(tree, "lat_tcp", "arm64-tcg", emulate)
    out = macros.claims("lat_tcp")
    start = out.index('"arm64-tcg"')
    following = [i for i in (out.find('\n=== "', start), out.find('\n===! "', start)) if i != -1]
    tcg_tab = out[start:min(following)] if following else out[start:]   # that tab alone, not the hosts after it
    spec = claims_mod.load(tree / "labs" / "lat_tcp" / "claims.toml")
    verdicts = claims_mod.evaluate(spec, r)
    # every timing claim, but those that say why emulation keeps their ratio (emulated_ok)
    n_na = sum(claims_mod.is_timing(c) and not c.get("emulated_ok") for c in spec)
    assert tcg_tab.count(render.VERDICT_MARK["not applicable"]) == n_na
    assert n_na == sum(v["verdict"] == "not applicable" for v in verdicts)
    # those are evaluated, and every verdict measured on the emulated CPU carries the badge
    kept = [v for c, v in zip(spec, verdicts) if claims_mod.is_timing(c) and c.get("emulated_ok")]
    assert kept and all(v["verdict"] != "not applicable" and v.get("emulated") for v in kept)
    n_badged = sum(bool(v.get("emulated")) for v in verdicts)
    assert tcg_tab.count(macros.build.EMULATED_BADGE) == n_badged
    # the badge is an element of its own that says so, after the verdict's text
    assert len(re.findall(r' <span class="pc-emulated">emulated CPU</span>(?=<|\s|$)', tcg_tab)) == n_badged


# ---- the claims table ----

def test_each_verdict_has_its_own_mark_and_css_class():
    css = (ROOT / "docs" / "assets" / "casebook.css").read_text()
    classes = []
    for v in claims_mod.VERDICTS:
        mark = render.VERDICT_MARK[v]
        assert mark.endswith(v), mark
        cls = re.search(r"\{ \.(pc-[a-z-]+) \}", mark).group(1)
        assert f".{cls} " in css, cls
        classes.append(cls)
    assert len(set(classes)) == len(classes)


def test_claims_table_shows_source_and_live_verdicts(tree):
    out = macros.claims("lat_tcp")
    spec = claims_mod.load(tree / "labs" / "lat_tcp" / "claims.toml")
    r = model.load(reference("lat_tcp"))
    for c, v in zip(spec, claims_mod.evaluate(spec, r)):
        # each statement is led by its role
        word = {"conclusion": "Original's conclusion", "instrument": "Instrument check", "ours": "Ours"}[c["role"]]
        assert f'<span class="pc-role">{escape(word)}</span>: {escape(c["statement"])}' in out
        if c.get("source"):
            assert f'<span class="pc-source">Original: ' in out
        assert render.VERDICT_MARK[v["verdict"]] in out
        # the cell reads "<mark>: <the verdict as a sentence>", then the evidence folded or the cell's end
        cell = f'{render.VERDICT_MARK[v["verdict"]]}: {macros.claim_tables.claim_sentence(c, v, r)}'
        assert re.search(re.escape(cell) + r'(<details class="pc-evidence">| \|)', out), cell
    # a changed result changes the verdict on the page (the claims are evaluated at build time)
    c = next(c for c in spec if c["kind"] == "step")

    def fail_step(r):
        next(s for s in r["steps"] if s["name"] == c["step"]).update(status="failed", reason="exit 0: derived")
    add_host(tree, "lat_tcp", "failing", fail_step)
    tab = macros.claims("lat_tcp").split('"failing"')[1]
    assert render.VERDICT_MARK["fails"] in tab and "recorded as holds when the lab ran" in tab


# ---- the original investigation ----

def test_original_loader_and_ratio(tmp_path):
    f = tmp_path / "original.toml"
    f.write_text(fixture_text())
    orig = original.load(f)
    assert [(c["id"], c["text"]) for c in orig["conclusion"]] == \
        [("same-cpu-best", "Client and server on the same CPU give the best result, on different CPUs the worst (test fixture).")]
    t = original.table(orig, "pinned-hp380")
    assert original.caption(orig, t) == "Original: HP380, Xeon 2699v4, kernel 3.10.0-514.el7.x86_64 (4K)"
    value, ta, tb = original.original_ratio(orig, orig["ratio"][0])
    assert (ta, tb) == ("12.8296", "8.2153") and value == pytest.approx(float(ta) / float(tb))


@pytest.mark.parametrize("text, expect", [("12.8296", 12.8296), ("~13", 13), ("~10 (mean)", 10), ("106k", 106e3),
                                          ("1,608", 1608), ("0.50", 0.5), ("not given", None), ("–", None),
                                          ("354.0000/0.00", 354.0), ("4.15", 4.15)])
def test_cell_number(text, expect):
    assert original.cell_number(text) == expect


@pytest.mark.parametrize("edit, match", [
    (lambda s: s.replace('seed = "004', 'seed = "../shared/seeds/004'), "file name"),
    (lambda s: s.replace('note = ', 'notes = '), "$.table[0]: Additional properties are not allowed ('notes' was"),
    (lambda s: s.replace('machine = "hp380"', 'machine = "hp381"'), "hp381"),
    (lambda s: s.replace('"12.8296"]]', '"12.8296", "extra"]]'), "5 cells"),
    (lambda s: s.replace('a = ["lat_tcp (us)", "other CPU #"]', 'a = ["lat_tcp (us)", "other CPU"]'), "no column"),
    (lambda s: s.replace('a = ["lat_tcp (us)", "other CPU #"]', 'a = ["lat_tcp", "other CPU #"]'), "0 rows labelled"),
    (lambda s: s.replace('a = ["lat_tcp (us)", "other CPU #"]', 'a = ["lat_tcp (us)", "client on CPU #"]'), "no number"),
    (lambda s: s.replace('table = "pinned-hp380"', 'table = "pinned"'), "original table"),
    (lambda s: s.replace('kernel = "3.10', 'kernel_ = "3.10'), "$.machine[0]: Additional properties are not allowed ('kernel_'"),
    (lambda s: s + "\n[[table]]\nid = 'x'\n", "$.table[1]: 'title' is a required property (table 'x')"),
    (lambda s: s.replace("[[ratio]]", "[[ratio]\n"), "not valid TOML"),
    (lambda s: s.replace(CONCLUSION, ""), "$: 'conclusion' is a required property"),
    (lambda s: s + CONCLUSION, "duplicate conclusion id 'same-cpu-best'"),
    (lambda s: s.replace('text = "Client', 'txt = "Client'),
     "$.conclusion[0]: 'text' is a required property (conclusion 'same-cpu-best')"),
    (lambda s: s.replace('id = "same-cpu-best"', 'id = "same-cpu-best"\nmachine = "hp999"'),
     "conclusion same-cpu-best: machine 'hp999' is not a [[machine]] id"),
])
def test_bad_original_file_fails_loud(tmp_path, edit, match):
    f = tmp_path / "original.toml"
    f.write_text(fixture_text())
    original.load(f)     # the file is good before the edit: each case fails on the error it names
    f.write_text(edit(fixture_text()))
    with pytest.raises(original.OriginalError, match=re.escape(match)):
        original.load(f)


def test_original_macros(tree):
    (tree / "labs" / "lat_tcp" / "original.toml").write_text(fixture_text())
    md = macros.original_table("lat_tcp", "pinned-hp380")
    out = html_of(md)
    assert "Original: HP380, Xeon 2699v4, kernel 3.10.0-514.el7.x86_64 (4K)." in out
    for cell in ("8.2153", "11.3579", "12.8296", "#48(same core)"):
        assert f">{cell}<" in out
    assert 'class="pc-original-note"' in out and escape('Which CPU "other CPU" was is not given.') in out
    assert macros.original_tables("lat_tcp") == md
    assert md.startswith('<div class="pc-original" markdown>\n\n**') and md.endswith("\n\n</div>\n")
    with pytest.raises(original.OriginalError, match="no table 'nope'"):
        macros.original_table("lat_tcp", "nope")
    vs = macros.original_vs_here("lat_tcp")
    r = model.load(reference("lat_tcp"))
    here = original.load(tree / "labs" / "lat_tcp" / "original.toml")["ratio"][0]["here"]
    a, _ = claims_mod.side(r, here["metric"], here["a"])
    b, _ = claims_mod.side(r, here["metric"], here["b"])
    e = claims_mod.ratio_interval(a, b)   # our ratio of medians with its calibrated interval
    assert e["estimate"] == pytest.approx(a.value / b.value) and e["low"] <= e["estimate"] <= e["high"]
    num = macros.numbers.number
    assert f"</span> {num(e['estimate'])} ({num(e['low'])}–{num(e['high'])})</td>" in vs
    header = vs.split("<tbody")[0]
    assert header.index(">Quantity<") < header.index(">Original<") < header.index(">Reading<")
    ratios = tree / "labs" / "lat_tcp" / "original.toml"
    kept = ratios.read_text()
    ratios.write_text(re.sub(r"^\[\[ratio\]\]\n.*?(?=^\[\[(?!ratio\]\]))", "", kept, flags=re.M | re.S))
    try:
        with pytest.raises(macros.MacroError) as none:
            macros.original_vs_here("lat_tcp")
        assert str(none.value) == "original_vs_here: labs/lat_tcp/original.toml has no [[ratio]] entries"
    finally:
        ratios.write_text(kept)
    assert f"{float('12.8296') / float('8.2153'):.3g} (12.8296 ÷ 8.2153; HP380, Xeon 2699v4, kernel 3.10.0-514.el7.x86_64 (4K))" in vs
    add_host(tree, "lat_tcp", "arm64-tcg", emulate)
    head, body = macros.original_vs_here("lat_tcp").split("<tbody")
    assert BADGE in head     # each emulated host's header, and on a phone (a card per row) its every cell's label
    n_rows = len(original.load(tree / "labs" / "lat_tcp" / "original.toml")["ratio"])
    assert body.count(BADGE) == head.count(BADGE) * body.count("<tr ") == head.count(BADGE) * n_rows
    # and each emulated host's ratio is marked as measured on an emulated CPU
    n_emulated = sum(claims_mod.emulated(r) for _, r in macros.build.for_lab("lat_tcp"))
    assert n_emulated >= 1 and body.count(macros.build.EMULATED_BADGE) == n_emulated * n_rows


def test_original_vs_here_flags_noise_and_missing_data(tree):
    (tree / "labs" / "lat_tcp" / "original.toml").write_text(fixture_text())

    def same(r):  # both placements get the same-CPU samples: the interval takes in 1
        ms = [m for m in r["measurements"] if m["metric"] == "round_trip" and m["case"].get("experiment") == "pinned"]
        samples = next(m["samples"] for m in ms if m["case"].get("pin") == "same-cpu")
        for m in ms:
            m["samples"] = list(samples)
            m.update(model.summarize(samples))

    def drop(r):
        r["measurements"] = [m for m in r["measurements"] if m["case"].get("pin") != "other-core"]
    add_host(tree, "lat_tcp", "noisy", same)
    add_host(tree, "lat_tcp", "partial", drop)
    row = html_of(macros.original_vs_here("lat_tcp")).split('<tbody role="rowgroup">')[1]
    noisy = model.load(tree / "results" / "noisy" / "lat_tcp.json")
    here = original.load(tree / "labs" / "lat_tcp" / "original.toml")["ratio"][0]["here"]
    a, _ = claims_mod.side(noisy, here["metric"], here["a"])
    b, _ = claims_mod.side(noisy, here["metric"], here["b"])
    e = claims_mod.ratio_interval(a, b)
    assert e["estimate"] == 1 and e["low"] < 1 < e["high"]
    num = macros.numbers.number
    assert f'</span> {num(e["estimate"])} ({num(e["low"])}–{num(e["high"])})</td>' in row
    assert '</span> – (no round_trip measurement for experiment=pinned, pin=other-core)</td>' in row


# ---- the original's conclusions and their verdicts ----

def _stacked_rows(md: str) -> list[list[str]]:
    """The body cells of a stacked table, each without its phone label."""
    body = md.split('<tbody role="rowgroup" markdown="1">', 1)[1]
    rows = []
    for tr in re.findall(r'<tr role="row" markdown="1">(.*?)</tr>', body):
        cells = re.findall(r'<td role="cell" markdown="span">(.*?)</td>', tr)
        rows.append([re.sub(r'^<span class="pc-stack-label" aria-hidden="true">.*?</span> ', "", c, count=1)
                     for c in cells])
    return rows


def test_verdicts_table_has_a_row_per_conclusion_claim_and_a_column_per_host(tree):
    """verdicts: the original's conclusions in original.toml's order, a row for each claim that
    tests one (a repeated conclusion as ″), a verdict cell per host evaluated now; instrument
    checks and our own claims left out; the untestable conclusions listed with their reasons; a
    conclusion that names its machine followed by that machine's name and kernel."""
    add_host(tree, "lat_tcp", "bare", lambda r: r.update(measurements=[]))   # every comparison untested there
    orig_path = tree / "labs" / "lat_tcp" / "original.toml"
    orig_path.write_text(orig_path.read_text() + '\n[[conclusion]]\nid = "extra"\ntext = "A conclusion <no claim> tests."\n')
    md = macros.verdicts("lat_tcp")
    orig = original.load(orig_path)
    spec = claims_mod.load(tree / "labs" / "lat_tcp" / "claims.toml")
    pairs = macros.build.for_lab("lat_tcp")
    assert any(h.label == "bare" for h, _ in pairs) and len(pairs) >= 2
    header = re.findall(r'<th role="columnheader" markdown="span">(.*?)</th>', md)
    assert header == ["The original concluded", "Claim"] + [render.host_label(r["host"], h.title) for h, r in pairs]
    machines = {m["id"]: m for m in orig["machine"]}

    def concluded(con):
        m = machines.get(con.get("machine"))
        return html.escape(con["text"] + (f" ({m['name']}; kernel {m['kernel']})" if m else ""), quote=False)
    assert any("machine" in con for con in orig["conclusion"]) and any("machine" not in con for con in orig["conclusion"])
    want = []
    for con in orig["conclusion"]:
        tested = [c for c in spec if c["role"] == "conclusion" and c["conclusion"] == con["id"]]
        for k, c in enumerate(tested):
            want.append([concluded(con) if k == 0 else "″", html.escape(c["statement"], quote=False)]
                        + [macros.claim_tables.verdict_cell(c, claims_mod.evaluate_one(c, r)) for _, r in pairs])
    assert len(want) == sum(c["role"] == "conclusion" for c in spec) >= 2
    assert _stacked_rows(md) == [[x.replace("\n", " ") for x in row] for row in want]
    assert render.VERDICT_MARK["untested"] in md   # the bare host's column
    for c in spec:
        if c["role"] != "conclusion":
            assert html.escape(c["statement"], quote=False) not in md, c["id"]
    tail = md.split("Conclusions of the original that no host of ours can test:", 1)[1]
    untested = [con for con in orig["conclusion"] if not any(c.get("conclusion") == con["id"] for c in spec)]
    assert untested and all(con.get("untestable") for con in untested[:-1])
    assert tail.count("\n- ") == len(untested)
    for con in untested:
        why = con.get("untestable", "no claim yet")
        assert f"- {concluded(con)} *Not tested here: {html.escape(why, quote=False)}*" in tail
    assert "A conclusion &lt;no claim&gt; tests. *Not tested here: no claim yet*" in tail


def test_verdict_brief_gives_each_hosts_verdict_effect_and_interval(tree):
    """verdict_brief: one part per host in for_lab's order, each the verdict's mark and word,
    the effect and its interval where decided or inconclusive, and the host, badged where
    emulated; a host whose data go the other way shows the claim failing there."""
    spec = claims_mod.load(tree / "labs" / "lat_tcp" / "claims.toml")
    claim = next(c for c in spec if c["id"] == "same-cpu-faster")

    add_host(tree, "lat_tcp", "slowself", same_cpu_slower)
    add_host(tree, "lat_tcp", "bare", lambda r: r.update(measurements=[]))
    add_host(tree, "lat_tcp", "emul", emulate)
    md = macros.verdict_brief("lat_tcp", "same-cpu-faster")
    parts = md.split("<br>")
    pairs = macros.build.for_lab("lat_tcp")
    assert len(parts) == len(pairs) >= 4
    seen = set()
    for part, (h, r) in zip(parts, pairs):
        v = claims_mod.evaluate_one(claim, r)
        seen.add(v["verdict"])
        assert part.startswith(render.VERDICT_MARK[v["verdict"]]), (h.label, part)
        assert part.split(" on ")[-1].startswith(render.esc(h.title or r["host"]["label"])), part
        e = v.get("effect")
        if v["verdict"] in ("holds", "fails", "inconclusive"):
            assert f", {macros.claim_tables.brief_effect(e)} on " in part and "–" in part, part
        else:
            assert "×" not in part, part
        assert part.endswith('<span class="pc-emulated">emulated CPU</span>') == bool(render.emulation(r["host"])), part
    assert {"holds", "fails", "untested"} <= seen
    assert macros.verdict_brief("lat_tcp", "same-cpu-faster", sep="; ") == "; ".join(parts)
    with pytest.raises(macros.MacroError, match="has no claim 'no-such-claim'"):
        macros.verdict_brief("lat_tcp", "no-such-claim")


def test_prose_reads_passes_the_reference_verdict_and_fails_any_other(tree, monkeypatch):
    """prose_reads: "" where the reference host's verdict (the first committed host whose CPU is
    not emulated) is the one named; a MacroError naming the verdict found where it is another;
    a reader's own result that goes the other way changes nothing; ``host`` reads another
    committed host; a word that is not a verdict, or an unknown claim or host, fails."""
    spec = claims_mod.load(tree / "labs" / "lat_tcp" / "claims.toml")
    claim = next(c for c in spec if c["id"] == "same-cpu-faster")
    ref_h, ref_r = next((h, r) for h, r in macros.build.for_lab("lat_tcp") if not render.emulation(r["host"]))
    got = claims_mod.evaluate_one(claim, ref_r)["verdict"]
    assert macros.prose_reads("lat_tcp", "same-cpu-faster", got) == ""
    other = next(v for v in ("holds", "fails") if v != got)
    with pytest.raises(macros.MacroError, match=f"says same-cpu-faster {other} on {ref_h.label}, but it {got}"):
        macros.prose_reads("lat_tcp", "same-cpu-faster", other)

    monkeypatch.setenv("PERF_CASEBOOK_LOCAL", "1")
    add_host(tree, "lat_tcp", "slowself", same_cpu_slower if got == "holds" else same_cpu_quicker)
    (tree / "local-results").mkdir()
    (tree / "results" / "slowself").rename(tree / "local-results" / "slowself")
    macros.build.hosts_cache = None
    pairs = macros.build.for_lab("lat_tcp")
    assert pairs[0][0].local and claims_mod.evaluate_one(claim, pairs[0][1])["verdict"] != got
    assert macros.prose_reads("lat_tcp", "same-cpu-faster", got) == ""
    with pytest.raises(macros.MacroError, match="no committed result of lat_tcp on 'slowself'"):
        macros.prose_reads("lat_tcp", "same-cpu-faster", got, host="slowself")
    emul = next((h, r) for h, r in pairs if not h.local and render.emulation(r["host"]))
    there = claims_mod.evaluate_one(claim, emul[1])["verdict"]
    assert macros.prose_reads("lat_tcp", "same-cpu-faster", there, host=emul[0].label) == ""
    with pytest.raises(macros.MacroError, match="is not a verdict"):
        macros.prose_reads("lat_tcp", "same-cpu-faster", "holdz")
    with pytest.raises(macros.MacroError, match="has no claim 'no-such-claim'"):
        macros.prose_reads("lat_tcp", "no-such-claim", got)


def test_brief_effect_is_the_estimate_and_its_interval():
    e = {"estimate": 1.768, "low": 1.697, "high": 1.802, "level": 0.95}
    assert macros.claim_tables.brief_effect(e) == "1.77× (1.70–1.80)"
    assert macros.claim_tables.brief_effect(dict(e, high=None)) == "1.77× (1.70–∞)"
    assert macros.claim_tables.brief_effect(dict(e, low=None, high=None)) == "1.77×"
    assert macros.claim_tables.brief_effect({"estimate": None, "method": "no samples"}) == ""
    assert macros.claim_tables.brief_effect(None) == ""


def test_verdicts_refuses_a_claim_of_a_conclusion_original_toml_lacks(tree):
    path = tree / "labs" / "lat_tcp" / "claims.toml"
    name = next(c["conclusion"] for c in claims_mod.load(path) if c["role"] == "conclusion")
    path.write_text(path.read_text().replace(f'conclusion = "{name}"', 'conclusion = "no-such-conclusion"', 1))
    with pytest.raises(macros.MacroError, match="names conclusion 'no-such-conclusion'"):
        macros.verdicts("lat_tcp")


def test_cases_table_lists_every_lab_in_its_order(tree):
    from labkit import manifest
    lab = tree / "labs" / "lat_tcp" / "lab.toml"
    lab.write_text(re.sub(r'^title = ".*"$', 'title = "lat_tcp <round trips>"', lab.read_text(), count=1, flags=re.M))
    md = macros.cases_table()
    lines = md.splitlines()
    assert lines[0] == "| chapter | the problem | what you practise |"
    ms = manifest.labs(tree)
    assert len(ms) >= 2 and len(lines) == 2 + len(ms)
    for line, mf in zip(lines[2:], ms):
        title = html.escape(mf["title"], quote=False)
        assert line.startswith(f"| [{title}](cases/{mf['name']}.md) | {html.escape(mf['problem'], quote=False)} | ")
        assert line.endswith(f" | {mf['practise'].replace('|', chr(92) + '|')} |")   # practise is Markdown, kept
    assert "[lat_tcp &lt;round trips&gt;](cases/lat_tcp.md)" in md


# ---- exercises ----

def test_exercises_macro(tree):
    ex = tree / "labs" / "lat_tcp" / "exercises.toml"
    ex.write_text((ROOT / "tests" / "fixtures" / "check" / "exercises.toml").read_text())
    md = macros.exercises("lat_tcp")
    out = html_of(md)
    exs = claims_mod.load_exercises(ex)
    assert out.count('class="admonition example"') == len(exs)
    # each numbered in order, its body opening with the change (no lead on a chapter's exercises)
    for i, e in enumerate(exs, 1):
        assert f'!!! example "Exercise {i}: {render.esc(e["title"])}"\n\n    **Change.** ' in md, md[:600]
    assert out.count("<code>labkit check lat_tcp</code>") == len(exs)
    assert "<details" in out  # the prediction is folded until the reader opens it
    ex.write_text(ex.read_text().replace("predict =", "prediction =", 1))
    with pytest.raises(claims_mod.ClaimError, match="'predict' is a required property"):
        macros.exercises("lat_tcp")
    ex.unlink()
    with pytest.raises(claims_mod.ClaimError, match="no exercises file"):
        macros.exercises("lat_tcp")


# Author text (a change, a prediction, a quantity, a reading) is shown as written: `<` cannot
# open a tag, and quotes stay quotes, also inside a code span, where an entity would show as is.
AUTHOR_TEXT = 'run `taskset -c "$CPU_A" ./lat_tcp` with <n> & "m" pinned'
AUTHOR_HTML = '<code>taskset -c "$CPU_A" ./lat_tcp</code> with &lt;n&gt; &amp; "m" pinned'


def with_author_text(toml: str, *keys: str) -> str:
    """``toml`` with the first ``key = "..."`` line of each key set to AUTHOR_TEXT."""
    value = AUTHOR_TEXT.replace('"', '\\"')
    for key in keys:
        toml = re.sub(rf'^{key} = ".*"$', lambda _: f'{key} = "{value}"', toml, count=1, flags=re.M)
    return toml


def test_exercise_text_is_shown_as_written(tree):
    ex = tree / "labs" / "lat_tcp" / "exercises.toml"
    ex.write_text(with_author_text((ROOT / "tests" / "fixtures" / "check" / "exercises.toml").read_text(),
                                   "change", "predict"))
    out = html_of(macros.exercises("lat_tcp"))
    assert out.count(AUTHOR_HTML) == 2, out[:2000]


def test_original_vs_here_text_is_shown_as_written(tree):
    path = tree / "labs" / "lat_tcp" / "original.toml"
    path.write_text(with_author_text(path.read_text(), "quantity", "reading"))
    out = html_of(macros.original_vs_here("lat_tcp"))
    assert out.count(AUTHOR_HTML) == 2, out[:3000]


@pytest.mark.parametrize(("label", "unit", "header"), [
    ("clock_nanosleep", "s", "clock_nanosleep (s)"),   # a letter inside a word is not the unit
    ("strace -c", "s", "strace -c (s)"),
    ("time (s)", "s", "time (s)"),
    ("the job's system time", "s", "the job's system time (s)"),
    ("max_segments", "segments", "max_segments"),     # a sysfs name's last part is a word
    ("read IOPS", "IOPS", "read IOPS"),
    ("p50 µs", "µs", "p50 µs"),
    ("%CPU busiest", "%", "%CPU busiest"),             # a symbol needs no word boundary
])
def test_metrics_table_header_names_the_unit_once(label, unit, header):
    """A column header adds " (unit)" unless its label already names the unit as a word."""
    ms = [{"metric": "x", "unit": unit, "median": 1.5, "n": 3, "case": {"k": "a"}}]
    got, _ = render.metrics_table([(label, ms)], ["k"])
    assert header in got, got


def test_metrics_table_macro(tree):
    """metrics_table: one tab per host with the medians of several metrics, a column narrowed by
    its own where; a typo in a metric, a bad item or missing columns fails the build."""
    keys = ["pin", "client_cpu", "server_cpu", "msize", "tool"]
    where = {"experiment": "pinned"}
    md = macros.metrics_table("lat_tcp", [{"metric": "round_trip", "label": "round trip"},
                                          {"metric": "round_trip", "where": {"pin": "same-cpu"}, "label": "same CPU only"}],
                              where=where, columns=keys, group="pinned")
    html = html_of(md)
    assert "round trip (µs)" in html and "same CPU only (µs)" in html
    for ref in sorted((ROOT / "results").glob("*/lat_tcp.json")):
        r = model.load(ref)
        ms = render.select(r, "round_trip", where)
        header, rows = render.metrics_table([("round trip", ms)], keys)
        assert rows and all(f">{row[-2]}</td>" in html for row in rows), ref
        # the narrowed column holds the same-cpu rows only: every other row shows "–" there
        n_other = sum(1 for x in ms if x["case"]["pin"] != "same-cpu")
        assert html.count(">–</td>") >= n_other > 0
    with pytest.raises(macros.MacroError, match="no host has"):
        macros.metrics_table("lat_tcp", ["round_trip", "no_such_metric"], where=where, columns=keys)
    with pytest.raises(macros.MacroError, match="bad metrics item"):
        macros.metrics_table("lat_tcp", [{"metric": "round_trip", "colour": "red"}], columns=keys)
    with pytest.raises(macros.MacroError, match="columns"):
        macros.metrics_table("lat_tcp", ["round_trip"])


def test_chart_macro_draws_each_host_in_both_schemes(tree):
    """chart: a tab per host with two lazily loaded figures (light, dark) whose files the build
    writes next to the page, sized from the SVG, the alt text naming title, metric, x, series and
    host; a host without the data gets the skip note instead; a metric no host has fails."""
    from labkit.view import charts
    charts.take()
    md = macros.chart("lat_tcp", "round_trip", x="msize", where={"experiment": "msize"}, logx=True,
                      title="Round trip <by size>", group="msize")
    stored = charts.take()
    hosts = sorted(p.parent.name for p in (ROOT / "results").glob("*/lat_tcp.json"))
    imgs = re.findall(r'<img class="pc-chart pc-(light|dark)" alt="([^"]*)" src="(fig-[0-9a-f]{12}\.svg)" '
                      r'width="(\d+)" height="(\d+)" loading="lazy" decoding="async">', md)
    assert [scheme for scheme, *_ in imgs] == ["light", "dark"] * len(hosts)
    assert {alt for _, alt, *_ in imgs} == {f"Round trip &lt;by size&gt;: round_trip by msize on {h}" for h in hosts}
    assert set(stored) == {src for *_, src, _, _ in imgs}            # outside a build: the site root
    for _, _, src, w, h in imgs:
        assert charts.svg_size(stored[src]) == (int(w), int(h))
    light, dark = stored[imgs[0][2]], stored[imgs[1][2]]
    assert "#e2e4e9" in dark and "#e2e4e9" not in light
    # series in the alt text; a host without the data shows why
    add_host(tree, "lat_tcp", "bare-host", lambda r: r.update(measurements=[]))
    md = macros.chart("lat_tcp", "round_trip", x="msize", series="pin", where={"experiment": "msize"}, group="msize")
    assert "round_trip by msize and pin on " in md and "Not measured on this host" in md
    charts.take()
    with pytest.raises(macros.MacroError, match=r"^chart: no host has 'round_tripp' measurements in lab 'lat_tcp'$"):
        macros.chart("lat_tcp", "round_tripp", x="msize")
    with pytest.raises(macros.MacroError, match=r"^chart: no host has 'round_trip' measurements in lab 'lat_tcp' "
                                                r"where \{'msize': -1\}$"):
        macros.chart("lat_tcp", "round_trip", x="msize", where={"msize": -1})


def test_results_table_macro_and_its_optional_rule(tree):
    """results_table: a table per host; a metric no host measured fails unless optional=True and
    the group ran on some host (its skips explain the gap); optional needs a group."""
    md = macros.results_table("lat_tcp", "round_trip", where={"experiment": "msize"}, columns=["msize"], group="msize")
    assert "| msize | median (µs) | min – max (µs) | samples |" in md
    with pytest.raises(macros.MacroError, match="no host has 'nope'"):
        macros.results_table("lat_tcp", "nope", group="msize")
    with pytest.raises(macros.MacroError) as no_group:
        macros.results_table("lat_tcp", "nope", optional=True)
    assert str(no_group.value).endswith("optional=True needs group=, whose skipped steps explain the empty table")
    md = macros.results_table("lat_tcp", "nope", group="msize", optional=True)
    assert md.count("Not measured on this host") == len(list((ROOT / "results").glob("*/lat_tcp.json")))
    with pytest.raises(macros.MacroError, match="no host has 'nope'"):
        macros.results_table("lat_tcp", "nope", group="no-such-group", optional=True)


def test_chart_defaults_are_linear_axes_and_no_title(tree):
    """Without logx, logy and title the chart is the one drawn with them off (the same files), its
    alt text leads with the metric; a log axis draws another chart."""
    from labkit.view import charts
    args = ("lat_tcp", "round_trip")
    kw = dict(x="msize", where={"experiment": "msize"}, group="msize")

    def files(md: str) -> list[str]:
        return re.findall(r'src="(fig-[0-9a-f]{12}\.svg)"', md)
    charts.take()
    plain = macros.chart(*args, **kw)
    assert files(plain) == files(macros.chart(*args, **kw, logx=False, logy=False, title=""))
    assert files(plain) != files(macros.chart(*args, **kw, logx=True))
    assert files(plain) != files(macros.chart(*args, **kw, logy=True))
    charts.take()
    alts = re.findall(r'alt="([^"]*)"', plain)
    assert alts and all(a.startswith("round_trip: round_trip by msize on ") for a in alts)


def test_define_env_registers_every_macro_the_pages_call(monkeypatch):
    """mkdocs-macros' entry point registers each data macro, then the evidence and lesson macros,
    by their function names, and starts the build's state with the env it was given."""
    from labkit.site import macros as pkg
    from labkit.site.macros import build

    class Env:
        def __init__(self):
            self.names = []

        def macro(self, fn):
            self.names.append(fn.__name__)

    monkeypatch.setattr(build, "macro_env", None)
    env = Env()
    pkg.define_env(env)
    assert build.macro_env is env
    want = ["results_table", "metrics_table", "chart", "flamegraph", "claims", "verdicts", "verdict_brief", "cases_table", "provenance",
            "skips", "hosts_table", "host_provenance", "compare_table", "step_output", "compare_hosts", "cast",
            "original_table", "original_tables", "original_vs_here", "exercises", "artifact_text", "annotated_output",
            "tool_exercises", "lab_time", "prose_reads", "evidence", "evidence_link", "lesson_start"]
    assert env.names == want


def test_template_block_tags_leave_no_blank_lines_or_indentation():
    """The macros' templates are written indented, one tag a line: a line holding only a block tag
    disappears from the HTML (Markdown would read a blank or indented line as a new block)."""
    from labkit.site.macros import templates
    t = templates.ENV.from_string("<ul>\n  {% for x in xs %}\n  <li>{{ x }}</li>\n  {% endfor %}\n</ul>")
    assert t.render(xs=[1, 2]) == "<ul>\n  <li>1</li>\n  <li>2</li>\n</ul>"


def test_a_ratio_just_under_a_hundred_is_written_without_a_point():
    from labkit.site.macros.numbers import number
    assert (number(99.94), number(99.95), number(100.0), number(-99.95)) == ("99.9", "100", "100", "-100")


def test_a_file_a_guest_wrote_is_badged_as_emulated_where_it_shows(tree):
    """A file the nvme lab's arm64 guest wrote (under the folder its guest step records as ``out``)
    shows, on the x86_64 host's tab, the badge saying its timings are not hardware; a file of
    the host's own steps does not carry it."""
    badge = "measured in an emulated cortex-a72 guest (QEMU TCG on x86_64): timings are not hardware"
    md = macros.annotated_output("nvme_swiotlb", file="raw/guest/bookworm-dma-ranges/fgraph.excerpt.txt", lines="1-2")
    assert badge in md
    md = macros.artifact_text("nvme_swiotlb", experiment="guest", kernel="6.1", dt="plain", what="function_graph")
    assert badge in md
    r = json.loads(reference("nvme_swiotlb").read_text())
    host_file = next(f"raw/{s['name']}.out" for s in r["steps"] if s["group"] == "dd" and s["status"] == "ok")
    assert macros.build.file_badge(r, host_file) == ""
    assert badge not in macros.annotated_output("nvme_swiotlb", file=host_file, stream="both", lines="1")
    assert macros.build.file_badge(r, "raw/guest/bookworm-dma-ranges-x/f") == ""   # a folder beside, not below
