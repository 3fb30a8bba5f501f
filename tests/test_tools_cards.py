"""The tool cards (docs/tools/<tool>.md) and their self-checking exercises
(labs/<lab>/cards/<tool>.exercises.toml), the method page and the learning path.

- every tool with exercises has a card in the nav, every card has exercises, and every card has
  the same sections and injects real output through a macro;
- each card exercise holds on a committed reference result and fails on a result derived from
  it where the predicted effect is absent (derived as tests/test_claims_failable.py derives
  results for claims: real samples moved, never typed numbers);
- ``labkit check TOOL`` reads the reader's results of each lab the card's exercises need;
- the annotated-output, tool-exercises and lab-time macros;
- every link of the method page, the home page and the cards names a page and a heading that exist.
"""

from __future__ import annotations

import copy
import functools
import json
import re
import subprocess
import sys
import unicodedata
from pathlib import Path

import pytest

import refhost

from labkit import cards, cli, model
from labkit.site import macros
from labkit.stats import claims
from derived import validate_derived
from test_claims_failable import derive

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
SECTIONS = ["The question it answers", "In the cases", "A real output, line by line", "Overhead and traps",
            "When it is missing", "Exercises"]
OUTPUT_MACROS = ("annotated_output(", "step_output(", "results_table(", "flamegraph(", "artifact_text(")


def _exercises():
    out = []
    for tool in cards.tools():
        for lab, exs in cards.load(tool):
            for ex in exs:
                out.append(pytest.param(tool, lab, ex, id=f"{tool}/{lab}/{ex['id']}"))
    return out


@functools.lru_cache(maxsize=None)
def _load(path: Path) -> dict:
    return model.load(path)


def _committed(lab: str) -> list[Path]:
    return sorted((ROOT / "results").glob(f"*/{lab}.json"))


def _holding(lab: str, ex: dict) -> list[Path]:
    """Committed results of ``lab`` on which the exercise's check holds."""
    claim = claims.exercise_claim(ex)
    return [p for p in _committed(lab) if claims.evaluate_one(claim, _load(p))["verdict"] == "holds"]


# --- cards and exercises belong together --------------------------------------------------

def test_every_card_has_exercises_and_every_exercise_a_card():
    pages = sorted(p.stem for p in (DOCS / "tools").glob("*.md"))
    assert pages == cards.tools()
    nav = (ROOT / "mkdocs.yml").read_text()
    for tool in pages:
        assert f"tools/{tool}.md" in nav, f"tools/{tool}.md is not in the nav"


@pytest.mark.parametrize("tool", cards.tools())
def test_card_has_the_same_sections_and_real_output(tool):
    text = (DOCS / "tools" / f"{tool}.md").read_text()
    assert text.startswith("---\nrender_macros: true\n---\n"), "the card injects results: macros on"
    assert re.findall(r"^## (.+)$", text, re.M) == SECTIONS
    assert f'{{{{ tool_exercises("{tool}") }}}}' in text
    real = text.split("## A real output, line by line")[1].split("\n## ")[0]
    assert any(m in real for m in OUTPUT_MACROS), "the real output must come from a committed result"
    assert "annotated_output(" in text, "the output is read line by line, with annotations"


@pytest.mark.parametrize("tool", cards.tools())
def test_exercise_files_load_and_name_labs(tool):
    per_lab = cards.load(tool)
    assert per_lab and all((ROOT / "labs" / lab / "run.sh").is_file() for lab, _ in per_lab)
    for lab, exs in per_lab:
        for ex in exs:
            assert f"labs/{lab}/run.sh" in ex["change"], (tool, ex["id"], "the change names the command to run")


def test_a_stray_file_or_a_repeated_id_fails_loud(tmp_path):
    """A tool's exercises are gathered from every lab's cards/ folder (labs/<lab>/cards/<tool>.exercises.toml);
    an exercise id used in two labs for one tool, or a file of another name there, fails loud; a
    folder without run.sh is not a lab."""
    src = ROOT / "labs" / "lat_tcp" / "cards" / "gdb.exercises.toml"
    for lab in ("lat_tcp", "fstime", "notalab"):
        (tmp_path / "labs" / lab / "cards").mkdir(parents=True)
        if lab != "notalab":
            (tmp_path / "labs" / lab / "run.sh").write_text("")
    (tmp_path / "labs" / "lat_tcp" / "cards" / "t.exercises.toml").write_text(src.read_text())
    (tmp_path / "labs" / "notalab" / "cards" / "t.exercises.toml").write_text(src.read_text())
    assert cards.tools(root=tmp_path) == ["t"] and [lab for lab, _ in cards.load("t", root=tmp_path)] == ["lat_tcp"]
    (tmp_path / "labs" / "fstime" / "cards" / "t.exercises.toml").write_text(src.read_text())
    with pytest.raises(claims.ClaimError, match="used twice"):
        cards.load("t", root=tmp_path)
    (tmp_path / "labs" / "fstime" / "cards" / "t.exercises.toml").unlink()
    (tmp_path / "labs" / "fstime" / "cards" / "t.toml").write_text(src.read_text())
    with pytest.raises(claims.ClaimError, match="holds only"):
        cards.tools(root=tmp_path)
    with pytest.raises(KeyError):
        cards.load("no_such_tool")


# --- each exercise can hold and can fail --------------------------------------------------

@pytest.mark.parametrize("tool", cards.tools())
def test_every_card_has_an_exercise_that_holds_on_a_committed_result(tool):
    """Each card has at least one exercise whose prediction holds on a committed
    result. A timing exercise may be inconclusive on one rerun (its ranges overlap) or not
    applicable on an emulated host; the card still needs one that holds somewhere."""
    verdicts = {}
    for lab, exs in cards.load(tool):
        assert _committed(lab), f"no committed result of {lab}"
        for ex in exs:
            claim = claims.exercise_claim(ex)
            verdicts[ex["id"]] = {p.parent.name: claims.evaluate_one(claim, _load(p))["verdict"] for p in _committed(lab)}
    assert any("holds" in v.values() for v in verdicts.values()), f"{tool}: no exercise holds on a committed result: {verdicts}"


@pytest.mark.parametrize("tool, lab, ex", _exercises())
def test_exercise_never_fails_on_a_committed_result(tool, lab, ex):
    """A committed result where the prediction fails would mean the card predicts wrong (or the
    reference host is not what the card assumes): holds, inconclusive or not applicable only."""
    claim = claims.exercise_claim(ex)
    bad = {p.parent.name: v for p in _committed(lab) if (v := claims.evaluate_one(claim, _load(p)))["verdict"] == "fails"}
    assert not bad, bad


@pytest.mark.parametrize("tool, lab, ex", _exercises())
def test_exercise_can_hold_and_fails_where_the_effect_is_absent(tool, lab, ex):
    """On a result derived from a committed one: with the predicted effect the check holds, and
    with the effect absent it fails (a check that cannot fail checks nothing)."""
    claim = claims.exercise_claim(ex)
    for path in _holding(lab, ex) or _committed(lab)[:1]:
        for want in ("holds", "fails"):
            r = derive(claim, path, want)
            validate_derived(r, claim)
            v = claims.evaluate_one(claim, r)
            assert v["verdict"] == want, (path, want, v)
        if claim.get("stdout_empty"):  # the step did what it should, but printed a number
            r = derive(claim, path, "holds")
            next(s for s in r["steps"] if s["name"] == claim["step"])["stdout_bytes"] = 1
            assert claims.evaluate_one(claim, r)["verdict"] == "fails"


# --- labkit check TOOL --------------------------------------------------------------------

def _write(base: Path, label: str, r: dict) -> None:
    """``r`` relabelled, written to ``base/label``; `labkit check` validates it when it loads it."""
    r = copy.deepcopy(r)
    r["host"]["label"] = label
    model.write_atomic(base / label / f"{r['lab']}.json", r)


@pytest.mark.parametrize("tool", cards.tools())
def test_labkit_check_tool_on_the_readers_results(tool, tmp_path, capsys):
    expected = {}
    for lab, exs in cards.load(tool):
        for ex in exs:
            path = (_holding(lab, ex) or _committed(lab))[0]
            claim = claims.exercise_claim(ex)
            _write(tmp_path / "mine" / ex["id"], "mine", derive(claim, path, "holds"))
            _write(tmp_path / "broken" / ex["id"], "broken", derive(claim, path, "fails"))
            expected[ex["id"]] = lab
    for which, word in (("mine", "as predicted"), ("broken", "not as predicted")):
        for ex_id, lab in expected.items():
            code = cli.main(["check", tool, "--results", str(tmp_path / which / ex_id)])
            out, err = capsys.readouterr()
            assert code == 0, err
            assert f"[{tool} card, lab {lab}]" in out
            assert f"  {ex_id}: {word}\n" in out, out
            # the other labs of the card have no result in this folder: said on stderr, not an error
            others = {lb for lb in expected.values() if lb != lab}
            assert all(f"no result of {lb}" in err for lb in others), err


def test_labkit_check_tool_without_results_says_what_to_run(tmp_path, capsys):
    code = cli.main(["check", "gdb", "--results", str(tmp_path)])
    _, err = capsys.readouterr()
    assert code == 1 and "no result of lat_tcp" in err and "sudo labs/lat_tcp/run.sh" in err


@pytest.mark.parametrize("args, match", [
    (["no_such_tool"], "no lab 'no_such_tool' and no tool card of that name"),
    (["perf", "--exercises", "x.toml"], "--exercises is for a lab; 'perf' is a tool card"),
])
def test_labkit_check_tool_bad_usage_is_one_line_and_exit_2(args, match):
    proc = subprocess.run([sys.executable, "-m", "labkit", "check", *args], capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 2 and proc.stdout == "", proc
    assert len(proc.stderr.strip().splitlines()) == 1 and match in proc.stderr, proc.stderr
    if args == ["no_such_tool"]:
        assert all(t in proc.stderr for t in cards.tools())


# --- the macros the cards and the home page use ---------------------------------------------

def _fstime_strace():
    path = refhost.result("fstime")   # the host whose tab comes first on the card
    return path, (path.parent / "fstime" / "raw" / "strace.err").read_text().splitlines()


def test_annotated_output_marks_lines_without_changing_them():
    _, lines = _fstime_strace()
    md = macros.annotated_output("fstime", "strace", stream="err", lines="1-4",
                                 notes=[["% time", "the columns"], ["attached", "strace -p"]])
    block = md.split("```{.pkgconfig .pc-annotated}\n")[1].split("```")[0]
    shown = [ln.strip() for ln in block.splitlines()]
    while shown and not shown[-1]:  # the blank line before an indented closing fence
        shown.pop()
    # every output line is there, unchanged, each note's marker on a line of its own right after
    # the first line its pattern matches, numbered in the order of the lines
    real = [ln for ln in shown if not re.fullmatch(r"# \(\d+\)!", ln)]
    assert real[1:] == [ln.strip() for ln in lines[:4]] + [f"[... {len(lines) - 4} more lines ...]"]
    attached = next(i for i, ln in enumerate(shown) if "attached" in ln)
    columns = next(i for i, ln in enumerate(shown) if ln.startswith("% time"))
    assert attached < columns   # strace's attach line comes before its table
    assert shown[attached + 1] == "# (1)!"
    assert shown[columns + 1] == "# (2)!"
    assert "1.  strace -p" in md and "2.  the columns" in md


def test_annotated_output_reads_a_kept_file_with_its_command():
    md = macros.annotated_output("lat_tcp", file="raw/pinned.server.err", notes=[["listening", "the server"]])
    assert "$ taskset -c 0 " in md and "# (1)!" in md and "the file `raw/pinned.server.err`" in md


@pytest.mark.parametrize("kwargs, match", [
    (dict(step="strace", stream="err", notes=[["no such line anywhere", "x"]]),
     re.escape("note pattern(s) ['no such line anywhere'] match no shown line")),
    (dict(step="strace", stream="err", notes=[["(", "x"]]), "note pattern"),
    (dict(step="strace", file="raw/strace.err"), "not both"),
    (dict(step="no_such_step"), "no host has"),
    (dict(file="raw/no_such_file.out"), "no host has"),
    (dict(step="strace", stream="err", notes=[["attached"]]), "pairs"),
])
def test_annotated_output_fails_loud(kwargs, match):
    with pytest.raises(macros.MacroError, match=match):
        macros.annotated_output("fstime", **kwargs)


def test_a_marker_is_never_guessed_from_the_output_itself():
    """A '#' comment of the output holding "(digits)" would be taken for a marker by
    mkdocs-material: such a block is shown as plain text, notes as a list."""
    # a note's pattern is never matched against a "[... n lines not shown ...]" mark
    md = macros.outputs.annotated_block("cmd", ["[... 3 lines not shown ...]", "line"], [["line", "a note"]], set())
    assert "\n[... 3 lines not shown ...]\nline\n# (1)!\n```" in md
    md = macros.outputs.annotated_block("cmd", ["# Samples (3) of x", "line"], [["line", "a note"]], set())
    assert md.startswith("```text\n$ cmd\n# Samples (3) of x\nline\n```") and "1.  a note" in md


@pytest.mark.parametrize("tool", cards.tools())
def test_tool_exercises_macro_renders_every_exercise(tool):
    md = macros.tool_exercises(tool)
    titles = [ex["title"] for _, exs in cards.load(tool) for ex in exs]
    for lab, exs in cards.load(tool):
        assert f"local-results/*/{lab}.json" in md
    # numbered 1..n across the card's labs, in file order
    assert re.findall(r'"Exercise (\d+): ([^"]*)"', md) == [(str(i), t) for i, t in enumerate(titles, 1)]
    assert f"`labkit check {tool}`" in md
    with pytest.raises(macros.MacroError):
        macros.tool_exercises("no_such_tool")


@pytest.mark.parametrize("lab", sorted(p.parent.name for p in (ROOT / "labs").glob("*/run.sh")))
def test_lab_time_comes_from_the_results(lab):
    text = macros.lab_time(lab)
    for path in _committed(lab):
        r = _load(path)
        assert f"{macros.runs.duration_text(r['run']['duration_s'])} ({'quick' if r['run']['quick'] else 'full'} run, " in text
    assert macros.runs.duration_text(527.3) == "8 min 47 s" and macros.runs.duration_text(42.4) == "42 s"


def test_home_page_path_has_every_lab_time_and_every_card():
    text = (DOCS / "index.md").read_text()
    assert text.startswith("---\nrender_macros: true\n---\n")
    for lab in sorted(p.parent.name for p in (ROOT / "labs").glob("*/run.sh")):
        assert f'lab_time("{lab}")' in text
    for tool in cards.tools():
        assert f"(tools/{tool}.md)" in text
    assert not re.search(r"\d+ ?(min|s)\b.*\((full|quick) run", text), "lab times come from the macro"


# --- links and anchors --------------------------------------------------------------------

def _slug(heading: str) -> str:
    """Python-Markdown's toc slug of a heading's text (markdown.extensions.toc.slugify), after
    the inline Markdown a heading may hold is reduced to its text."""
    from markdown.extensions.toc import slugify
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)
    text = re.sub(r"[`*]", "", text)
    text = unicodedata.normalize("NFKD", text)
    return slugify(text, "-")


_ATTR_ID = re.compile(r"\{:?\s*#([\w-]+)[^}]*\}")


def _anchors(page: Path, headings_only: bool = False) -> set[str]:
    """The ids a page's Markdown gives: heading slugs (or a heading's own ``{: #id }``) and,
    unless ``headings_only``, the explicit ids of other blocks (attr_list's ``{ #id }``)."""
    out, seen, fence = set(), {}, False
    for line in page.read_text().splitlines():
        if line.lstrip().startswith(("```", "~~~")):
            fence = not fence
        if fence:
            continue
        m = re.match(r"^#{1,6} (.+?)\s*$", line)
        if m:
            own = _ATTR_ID.search(m.group(1))
            if own:
                out.add(own.group(1))
                continue
            s = _slug(m.group(1))
            n = seen.get(s, 0)
            seen[s] = n + 1
            out.add(s if n == 0 else f"{s}_{n}")
        elif not headings_only:
            out.update(_ATTR_ID.findall(line))
    return out


def _evidence_anchors(lab: str) -> set[str]:
    """The ids of a generated evidence page (labkit/site/evidence.py): its sections, one per metric,
    and those of the lab's own labs/<lab>/evidence.md."""
    from labkit.site import evidence
    ids = {"claims", "measurements", "artifacts", "recordings", "skipped", "provenance"}
    ids |= {evidence.anchor(m["metric"]) for p in (DOCS.parent / "results").glob(f"*/{lab}.json")
            for m in json.loads(p.read_text())["measurements"]}
    own = DOCS.parent / "labs" / lab / "evidence.md"
    return ids | (_anchors(own) if own.is_file() else set())


LINKED = [DOCS / "method.md", DOCS / "index.md", *sorted((DOCS / "tools").glob("*.md"))]


@pytest.mark.parametrize("page", LINKED, ids=lambda p: str(p.relative_to(DOCS)))
def test_links_name_pages_and_headings_that_exist(page):
    """mkdocs --strict checks that a linked page exists, not (in mkdocs 1.6's default
    ``validation.anchors: info``) that its anchor does: this test does."""
    links = re.findall(r"\]\(([^)\s]+\.md)(?:#([^)\s]+))?\)", page.read_text())
    assert links, page
    for target, anchor in links:
        dest = (page.parent / target).resolve()
        if dest.parent == DOCS / "evidence":  # generated at build time from labs/<lab>/
            assert (DOCS.parent / "labs" / dest.stem / "lab.toml").is_file(), (page, target)
            if anchor:
                assert anchor in _evidence_anchors(dest.stem), f"{page.name}: {target}#{anchor}: no such section"
            continue
        assert dest.is_file(), (page, target)
        if anchor:
            assert anchor in _anchors(dest), f"{page.name}: {target}#{anchor}: no such heading"


def test_the_slugs_are_those_mkdocs_makes():
    """_anchors agrees with Python-Markdown's toc on a chapter's headings (rendered for real)."""
    import markdown
    page = DOCS / "cases" / "nvme_swiotlb.md"
    text = re.sub(r"\{\{.*?\}\}", "", page.read_text().split("---", 2)[2], flags=re.S)
    md = markdown.Markdown(extensions=["toc", "attr_list", "admonition", "pymdownx.superfences"])
    md.convert(text)
    ids = set()

    def walk(tokens):
        for t in tokens:
            ids.add(t["id"])
            walk(t["children"])
    walk(md.toc_tokens)
    assert ids == _anchors(page, headings_only=True)
