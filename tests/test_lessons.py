"""Chapters are lessons and their data is on evidence pages: the limits a chapter keeps (prose,
tables, the lab's command on the first screen, the reading time at the top), the evidence page
every lab gets, and the search index that leaves the evidence pages' data out."""

from __future__ import annotations

import gzip
import json
import re

import pytest

from conftest import ROOT
from labkit import manifest
from labkit.site import evidence, lesson

LABS = [m["name"] for m in manifest.labs(ROOT)]


def _text(page_html: str) -> str:
    """The article's visible text, tags dropped (for the position of the lab's command)."""
    body = lesson.article(page_html)
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", body))


@pytest.mark.slow
@pytest.mark.parametrize("lab", LABS)
def test_chapter_is_a_lesson(committed_site, lab):
    """A reading time of at most :data:`labkit.site.lesson.MAX_MINUTES` over everything visible in
    the first tab, ≤ 3,000 prose words, ≤ 12 tables, ``run.sh`` within the first 10 % of the
    text, the reading time stated in the first-screen box, a link to the evidence page."""
    page = (committed_site / "cases" / lab / "index.html").read_text()
    m = lesson.measure(page)
    assert m["words"] <= lesson.MAX_WORDS, m
    assert m["tables"] <= lesson.MAX_TABLES, m
    assert m["minutes"] <= lesson.MAX_MINUTES, m
    text = _text(page)
    assert f"labs/{lab}/run.sh" in text
    assert text.index(f"labs/{lab}/run.sh") <= 0.10 * len(text), (text.index(f"labs/{lab}/run.sh"), len(text))
    assert lesson.READING_MARK not in page
    stated = re.search(r"Reading:\s*</strong>\s*about (\d+) min", page)
    assert stated, "reading time missing from the first screen"
    assert int(stated.group(1)) == m["minutes"], (stated.group(1), m)
    assert f'href="../../evidence/{lab}/' in page
    if lab == "nvme_swiotlb":      # the faulty board's shell, beside the lab's command
        assert text.index("labkit guest shell") <= 0.10 * len(text), (text.index("labkit guest shell"), len(text))


def test_lesson_start_offers_a_shell_wrapped_for_a_phone():
    """``shell=`` puts one more command before the needs, broken before its options into lines a
    390 px screen shows whole; two lines, or none, are refused."""
    from labkit.site import macros
    md = lesson.lesson_start("nvme_swiotlb", shell="labkit guest shell --kernel-release bullseye --dt dma-ranges")
    block = md[md.index("```bash\nlabkit"):]
    assert block.startswith("```bash\nlabkit guest shell \\\n    --kernel-release bullseye \\\n"
                            "    --dt dma-ranges\n```"), block
    assert md.index("run.sh --quick") < md.index("labkit guest shell") < md.index("You need")
    assert "labkit" not in lesson.lesson_start("nvme_swiotlb")
    took = lesson.lesson_start("nvme_swiotlb", shell="labkit guest shell", boot={"experiment": "guest", "dt": "dma-ranges"})
    assert re.search(r"\(no root; boots in [0-9.]+ s, emulated, on [^)]+\)", took), took
    with pytest.raises(macros.MacroError, match="no host has boot_time"):
        lesson.lesson_start("nvme_swiotlb", shell="labkit guest shell", boot={"dt": "no-such-tree"})
    for bad in ("", "a\nb", "a ``` b"):
        with pytest.raises(macros.MacroError, match="one command line"):
            lesson.lesson_start("nvme_swiotlb", shell=bad)


@pytest.mark.slow
@pytest.mark.parametrize("lab", LABS)
def test_evidence_page_has_every_metric(committed_site, lab):
    """The evidence page exists and has a table anchor for every metric of every host's result."""
    page = (committed_site / "evidence" / lab / "index.html").read_text()
    metrics = {ms["metric"] for p in ROOT.glob(f"results/*/{lab}.json") for ms in json.loads(p.read_text())["measurements"]}
    assert metrics
    for metric in metrics:
        assert f'id="{evidence.anchor(metric)}"' in page, metric


@pytest.mark.slow
def test_search_index_is_small_and_keeps_evidence_titles_only(committed_site):
    raw = (committed_site / "search" / "search_index.json").read_bytes()
    assert len(gzip.compress(raw)) <= 150_000, len(gzip.compress(raw))
    docs = json.loads(raw)["docs"]
    ev = [d for d in docs if d["location"].startswith("evidence/")]
    assert {d["location"] for d in ev} == {f"evidence/{lab}/" for lab in LABS}
    assert all(d["text"] == "" and d["title"].startswith("Evidence") for d in ev)


def test_measure_counts_every_visible_word_but_not_folds_or_the_box():
    html = ('<article class="md-content__inner md-typeset"><p>one two three</p><pre><code>a b c d</code></pre>'
            '<table><tr><td>x y</td></tr></table><details><summary>s</summary><p>hidden words here</p></details>'
            '<details open><summary>t</summary><p>shown</p></details>'
            '<div class="pc-lesson-start"><p>box words</p></div><p><span class="pc-emulated">a badge</span></p><figure><div data-pc-cast="x"></div></figure><img class="pc-chart pc-light"><img class="pc-chart pc-dark"><p>four</p></article>')
    m = lesson.measure(html)
    assert (m["words"], m["technical"], m["tables"], m["figures"]) == (7, 6, 1, 2)
    assert m["minutes"] == 2  # 7/200 + 6/150 + 2 × 0.5, rounded up
    assert lesson.measure("<p>" + "w " * 150 * 3 + "</p>")["minutes"] == 3
    assert lesson.measure("<pre>" + "w " * 150 * 3 + "</pre>")["minutes"] == 3   # 150 a minute
    assert lesson.measure("<table><tr><td>" + "w " * 451 + "</td></tr></table>")["minutes"] == 4


def test_fill_replaces_the_mark_with_minutes():
    words = " ".join(["word"] * 450)
    out = lesson.fill(f"<p>{lesson.READING_MARK}</p><p>{words}</p>")
    assert ">3 min<" in out and lesson.READING_MARK not in out  # 451 words / 200 = 2.3 → 3


def test_index_titles_adds_one_title_only_entry_per_evidence_page(tmp_path):
    (tmp_path / "search").mkdir()
    docs = [{"location": "cases/x/", "title": "X", "text": "prose"},
            {"location": "evidence/x/", "title": "old", "text": "lots of data"}]
    (tmp_path / "search" / "search_index.json").write_text(json.dumps({"config": {}, "docs": docs}))
    titles = {"evidence/x/": "Evidence: X", "evidence/y/": "Evidence: Y"}
    assert evidence.index_titles(tmp_path, titles) == 2
    kept = json.loads((tmp_path / "search" / "search_index.json").read_text())["docs"]
    assert kept == [docs[0], {"location": "evidence/x/", "title": "Evidence: X", "text": ""},
                    {"location": "evidence/y/", "title": "Evidence: Y", "text": ""}]
    assert evidence.index_titles(tmp_path / "none", titles) == 0


def test_evidence_link_fails_on_an_unknown_metric():
    from labkit.site import macros
    macros.build.hosts_cache = None
    known = next(iter(evidence.metrics_by_group("lat_tcp").values()))[0]
    assert f"#{evidence.anchor(known)})" in evidence.evidence_link("lat_tcp", metric=known)
    with pytest.raises(macros.MacroError, match="no measurement"):
        evidence.evidence_link("lat_tcp", metric="no_such_metric")


def test_page_markdown_appends_the_labs_own_evidence(tmp_path):
    lab = tmp_path / "labs" / "demo"
    lab.mkdir(parents=True)
    (lab / "lab.toml").write_text((ROOT / "labs" / "lat_tcp" / "lab.toml").read_text())
    md = evidence.page_markdown("demo", tmp_path)
    assert "{{ evidence('demo') }}" in md and md.startswith("---\n")
    (lab / "evidence.md").write_text("## Own block {: #own }\n")
    assert evidence.page_markdown("demo", tmp_path).rstrip().endswith("## Own block {: #own }")


def test_a_host_tab_set_counts_once():
    """Two hosts' copies of one table and chart count as one table and one figure; the prose
    inside the second tab is not read twice."""
    tab = ('<div class="tabbed-set tabbed-alternate" data-tabs="1:2"><input><input><div class="tabbed-labels">'
           '<label>a</label><label>b</label></div><div class="tabbed-content">'
           '<div class="tabbed-block"><p>note one</p><table><tr><td>1</td></tr></table><img class="pc-chart pc-light"></div>'
           '<div class="tabbed-block"><p>note two</p><table><tr><td>2</td></tr></table><img class="pc-chart pc-light"></div>'
           '</div></div><p>after</p>')
    m = lesson.measure(f'<article class="md-content__inner md-typeset">{tab}{tab}</article>')
    assert (m["words"], m["technical"], m["tables"], m["figures"]) == (6, 2, 2, 2)
