"""Commands and excerpts on pages: no path of the machine that made a result, commands as a
reader types them (printf %q undone), excerpts chosen by line range, pattern or tail."""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from labkit import model
from labkit.site import macros
from labkit.view import commands

import refhost

ROOT = Path(__file__).resolve().parent.parent
RESULTS = sorted((ROOT / "results").glob("*/*.json"))


def _load(path: Path) -> dict:
    return model.load(path)


@pytest.mark.parametrize("path", RESULTS, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_machine_paths_are_found_in_the_result(path):
    r = _load(path)
    paths = commands.machine_paths(r)
    assert paths["scratch"] and re.fullmatch(rf"/.+/pcb-{r['lab']}\.[A-Za-z0-9]{{6}}", paths["scratch"]), paths
    if paths["checkout"] is None:  # no command shows the checkout (e.g. a guest run: python3, no venv path)
        assert not any(f"/labs/{r['lab']}/" in (s["command"] or "") for s in r["steps"]), paths
    else:
        assert paths["checkout"].startswith("/"), paths
    # The out directory is inside the checkout (results/<host>), or elsewhere (ci-labs.sh --out DIR),
    # then shown as $OUT.
    assert paths["out"] is None or paths["out"].startswith("/"), paths


@pytest.mark.parametrize("path", RESULTS, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_displayed_commands_and_outputs_hold_no_machine_path(path):
    r = _load(path)
    paths = commands.machine_paths(r)
    machine = [p for p in (paths["scratch"], paths["checkout"]) if p]
    for s in r["steps"]:
        shown = commands.display_command(s["command"], r)
        assert not any(p in shown for p in machine), shown
        for ext in ("out", "err"):
            f = path.parent / r["lab"] / "raw" / f"{s['name']}.{ext}"
            if f.exists() and f.stat().st_size < 2_000_000:
                text = commands.display_text(f.read_text(errors="replace"), r)
                for p in machine:
                    assert not re.search(re.escape(p) + r"(?![\w.-])", text), (f, p)


@pytest.mark.parametrize("path", RESULTS, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_displayed_commands_name_the_run_directory_a_reader_finds(path):
    """A command recorded while the run went on names its run directory ``<out>/.<lab>.partial``;
    a reader finds the files in ``<out>/<lab>`` once the run is over, and that is what a page
    shows."""
    r = _load(path)
    paths = commands.machine_paths(r)
    partial = f"{paths['out']}/.{r['lab']}.partial"
    for s in r["steps"]:
        shown = commands.display_command(s["command"], r)
        assert f".{r['lab']}.partial" not in shown, s["name"]
        if partial in (s["command"] or ""):
            assert f"/{r['lab']}/" in shown, shown


def _as_run(word: str, paths: dict) -> str:
    """A recorded argv word as seen from the checkout with $SCRATCH set: what the displayed
    command must give back when the shell splits it."""
    word = re.sub(re.escape(paths["scratch"]) + r"(?![A-Za-z0-9])", "$SCRATCH", word)
    out, checkout = paths.get("out"), paths.get("checkout")
    if out:   # the run's directory while it went on, shown as the one it left
        word = word.replace(f"{out}/.{paths['lab']}.partial", f"{out}/{paths['lab']}")
    if out and not (checkout and out.startswith(checkout + "/")):
        word = re.sub(re.escape(out) + r"(?![A-Za-z0-9])", "$OUT", word)
    return re.sub(r"(?<![\w./-])" + re.escape(checkout) + "/", "", word) if checkout else word


@pytest.mark.parametrize("path", RESULTS, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_displayed_command_splits_to_the_same_words(path):
    """Split as the shell would (with $SCRATCH left as written), the displayed command gives
    the words the lab ran, paths made relative: quoting changed only for reading."""
    r = _load(path)
    paths = commands.machine_paths(r)
    n = 0
    for s in r["steps"]:
        if not s["command"]:
            continue
        shown = commands.display_command(s["command"], r)
        expected = [_as_run(w, paths) for w in shlex.split(s["command"])]
        got = shlex.split(shown.replace("${SCRATCH}", "$SCRATCH").replace("$SCRATCH", "\\$SCRATCH")
                          .replace("${OUT}", "$OUT").replace("$OUT", "\\$OUT"))
        assert got == expected, (s["command"], shown)
        assert "\\," not in shown and "\\ " not in shown, shown  # printf %q escapes are gone
        n += 1
    assert n


def test_result_from_another_machine(tmp_path):
    """Paths are read from the result, not this machine: the same result as if made in a
    checkout elsewhere (with a space in its path) and a scratch under another parent."""
    src = RESULTS[0]
    r = _load(src)
    paths = commands.machine_paths(r)
    text = src.read_text()
    elsewhere = "/home/reader/perf casebook"
    moved = json.loads(text.replace(paths["checkout"] + "/", "/home/reader/pcb-src/")
                       .replace(f'"{paths["checkout"]}"', '"/home/reader/pcb-src"')   # run.paths
                       .replace(paths["scratch"], "/var/tmp/pcb-" + r["lab"] + ".Zz9Yy8"))
    got = commands.machine_paths(moved)
    assert got["checkout"] == "/home/reader/pcb-src" and got["scratch"] == f"/var/tmp/pcb-{r['lab']}.Zz9Yy8"
    for s in moved["steps"]:
        shown = commands.display_command(s["command"], moved)
        assert "/home/reader" not in shown and "/var/tmp" not in shown, shown
    # a checkout whose path holds a space is recorded escaped (printf %q); it is found and removed too
    spaced = json.loads(text.replace(paths["checkout"] + "/", elsewhere.replace(" ", "\\\\ ") + "/")
                        .replace(f'"{paths["checkout"]}"', f'"{elsewhere}"'))   # run.paths: as it is
    for s in spaced["steps"]:
        assert "/home/reader" not in commands.display_command(s["command"], spaced)


def test_printf_q_words_are_shown_readably():
    """Words escaped by bash's own printf %q (the lab contract's recorder) come back readable."""
    words = ["perf", "stat", "-x,", "--filter", "dev == 7", "sh", "-c", "echo 3 > /proc/sys/vm/drop_caches",
             "two\nlines", "it's", "*.fio", "~"]
    recorded = subprocess.run(["bash", "-c", "printf '%q ' \"$@\" | sed 's/ $//'", "bash", *words],
                              capture_output=True, text=True, check=True).stdout
    assert "$'" in recorded  # bash used its $'...' quoting for the newline
    r = {"lab": "x", "steps": [{"command": recorded}], "run": {"command": ""}}
    shown = commands.display_command(recorded, r)
    assert shlex.split(shown) == words
    assert "-x, --filter 'dev == 7'" in shown and "'echo 3 > /proc/sys/vm/drop_caches'" in shown
    assert "'*.fio'" in shown and "'~'" in shown


# ---- step_output excerpts ----

# `tree` (a checkout-like tree of labs/ and the committed results) is in conftest.py.


LAB = "nvme_swiotlb"  # its btt and trace steps print long outputs


def _long_step(lab: str = LAB, minimum: int = 60) -> tuple[str, dict, list[str]]:
    """The first step of ``lab`` whose standard output has ``minimum`` to 2000 lines, in the
    reference's result (the host whose tab comes first, and so the first block of a page):
    (name, result, lines)."""
    path = refhost.result(lab)
    r = _load(path)
    for s in r["steps"]:
        f = path.parent / lab / "raw" / f"{s['name']}.out"
        if s["status"] == "ok" and f.exists() and f.stat().st_size < 200_000:
            lines = commands.display_text(f.read_text(errors="replace").rstrip("\n"), r).splitlines()
            if minimum <= len(lines) <= 2000:
                return s["name"], r, lines
    pytest.skip(f"no step of {lab} printed {minimum} to 2000 lines")


def _block(md: str) -> list[str]:
    """The lines of the first step block (after its $ command line), less the block's own
    indentation (a content tab indents it; a page with one host has no tabs), never more."""
    m = re.search(r"^( *)```+pcb-step\n(.*?)\n\1```", md, re.S | re.M)
    indent = m.group(1)
    return [line[len(indent):] if line.startswith(indent) else line for line in m.group(2).splitlines()][1:]


def test_excerpt_by_line_range(tree):
    step, _, lines = _long_step()
    md = macros.step_output(LAB, step, stream="out", lines="1-20")
    got = _block(md)
    assert got[:20] == lines[:20] and got[20] == f"[... {len(lines) - 20} more lines ...]"
    assert f"lines 1–20 of {len(lines)} lines of standard output" in md
    md = macros.step_output(LAB, step, stream="out", lines="2-3,10")
    assert _block(md) == ["[... 1 line not shown ...]", lines[1], lines[2], "[... 6 lines not shown ...]", lines[9],
                          f"[... {len(lines) - 10} more lines ...]"]
    # a range of one line, written as a range, is that line
    assert _block(macros.step_output(LAB, step, stream="out", lines="7-7")) == _block(
        macros.step_output(LAB, step, stream="out", lines="7"))


def test_excerpt_by_pattern_with_context(tree):
    step, _, lines = _long_step()
    # a word from the middle of the output (the first line from there on that has one)
    word = next(w for line in lines[len(lines) // 2:] for w in re.findall(r"[A-Za-z_]{4,}", line))
    hits = [i for i, l in enumerate(lines) if re.search(re.escape(word), l)]
    md = macros.step_output(LAB, step, stream="out", match=re.escape(word), context=1)
    keep = sorted({j for i in hits for j in range(max(0, i - 1), min(len(lines), i + 2))})
    assert [l for l in _block(md) if not l.startswith("[... ")] == [lines[i] for i in keep]
    md = macros.step_output(LAB, step, stream="out", match=re.escape(word))
    assert [l for l in _block(md) if not l.startswith("[... ")] == [lines[i] for i in hits]


def test_excerpt_by_tail_and_the_old_lines_number(tree):
    step, _, lines = _long_step()
    tail = macros.step_output(LAB, step, stream="out", tail=5)
    assert _block(tail) == [f"[... {len(lines) - 5} lines not shown ...]"] + lines[-5:]
    assert macros.step_output(LAB, step, stream="out", lines=5) == tail


def test_whole_output_only_when_short(tree):
    step, _, lines = _long_step(minimum=macros.excerpts.EXCERPT_MAX_LINES + 1)
    with pytest.raises(macros.MacroError, match="choose an excerpt"):
        macros.step_output(LAB, step, stream="out")
    short = next(s for s in _load(next(p for p in RESULTS if p.stem == "lat_tcp"))["steps"] if s["name"] == "noserver")
    md = macros.step_output("lat_tcp", short["name"])
    ends = r"(all \d+ lines|both lines|its one line) of output \(stdout, then stderr\)|no output on stdout or stderr"
    assert re.search(rf"; ({ends})\.\n", md), md     # the whole output (default stream: both), said plainly


def test_a_step_is_found_by_its_case(tree):
    """A dict picks the one step whose case holds it, and shows what that step's name shows; a
    case two steps share fails the build, naming them; a case no host ran fails it too."""
    r = _load(next(p for p in RESULTS if p.stem == "lat_tcp"))
    s = next(s for s in r["steps"] if s["status"] == "ok" and (s.get("case") or {}).get("rep") == 1
             and s["case"].get("experiment") == "noserver")
    assert macros.step_output("lat_tcp", dict(s["case"])) == macros.step_output("lat_tcp", s["name"])
    with pytest.raises(macros.MacroError, match=r"on .*, case .* picks \d+ steps .*: add case keys"):
        macros.step_output("lat_tcp", {"experiment": "noserver"})
    with pytest.raises(macros.MacroError, match="no host ran step 'case experiment=noserver, rep=999'"):
        macros.step_output("lat_tcp", {"experiment": "noserver", "rep": 999})
    with pytest.raises(macros.MacroError, match="a step's name or a dict of its case keys"):
        macros.step_output("lat_tcp", {})


@pytest.mark.parametrize("kw, match", [
    ({"lines": "20-10"}, "lines='20-10': give ranges of line numbers from 1, e.g. '1-20'"),
    ({"lines": "0-3"}, "lines="),
    ({"lines": "a-b"}, "lines="),
    ({"lines": "1-3", "match": "x"}, "choose one"),
    ({"match": "("}, "not a regular expression"),
    ({"match": "no line has this text, surely: 0xDEADBEEF"}, "picks no line"),
    ({"lines": "100000-"}, "picks no line"),
    ({"stream": "stdout", "tail": 3}, "stream="),
])
def test_bad_excerpt_fails_loud(tree, kw, match):
    step, _, _ = _long_step()
    with pytest.raises(macros.MacroError, match=match):
        macros.step_output(LAB, step, **{"stream": "out", **kw})


def test_step_output_command_is_readable(tree):
    r = _load(next(p for p in RESULTS if p.stem == "fstime"))
    s = next(s for s in r["steps"] if s["command"] and "\\," in s["command"] and s["status"] == "ok")
    md = macros.step_output("fstime", s["name"], tail=3)
    first = re.search(r"\$ (.*)", md).group(1)
    assert first == commands.display_command(s["command"], r) and "\\," not in first
    assert "/tmp/pcb-" not in md and str(commands.machine_paths(r)["checkout"]) + "/" not in md


def test_a_step_block_colours_only_its_dollar_line_as_a_command(tree):
    """labkit.site.lexer (the ``pcb-step`` lexer step_output's blocks name, found through Pygments'
    entry point): perf report's "# ..." header, strace -c's "% time" and a "(...)" line are output,
    where Pygments' console lexer takes them for prompts; a "$ " line and its backslash
    continuation are the command."""
    from pygments.lexers import get_lexer_by_name
    from pygments.token import Generic

    text = ("$ perf report --stdio \\\n    -i perf.data\n# Samples: 30K of event 'cpu-clock'\n"
            "% time     seconds  usecs/call     calls    errors syscall\n(1 thread per core)\n$ ls\nfio.json\n")
    got = [(t, v) for t, v in get_lexer_by_name("pcb-step").get_tokens(text) if t in Generic]
    assert got == [(Generic.Prompt, "$ "), (Generic.Output, "# Samples: 30K of event 'cpu-clock'\n"),
                   (Generic.Output, "% time     seconds  usecs/call     calls    errors syscall\n"),
                   (Generic.Output, "(1 thread per core)\n"), (Generic.Prompt, "$ "), (Generic.Output, "fio.json\n")]
    console = [t for t, _ in get_lexer_by_name("console").get_tokens(text) if t is Generic.Prompt]
    assert len(console) > 2  # what the console lexer does with these lines, and why pcb-step exists
    assert "```pcb-step" in macros.step_output("fstime", "copy.tmpfs.b256.1", tail=2)


def test_the_build_stops_when_the_step_lexer_is_missing(monkeypatch):
    """Without labkit installed, Pygments has no pcb-step lexer and pymdownx.highlight would show
    step outputs as plain text without a word: the build stops instead, saying how to mend it."""
    from mkdocs.exceptions import PluginError
    from pygments.util import ClassNotFound

    from labkit.site import mkdocs_hooks

    def missing(name, **options):
        raise ClassNotFound(f"no lexer for alias {name!r} found")

    monkeypatch.setattr(mkdocs_hooks, "get_lexer_by_name", missing)
    with pytest.raises(PluginError, match=r"^Pygments has no 'pcb-step' lexer: labkit is not installed"):
        mkdocs_hooks.on_pre_build({})


def test_scratch_written_as_a_regular_expression_is_replaced():
    """A command may carry the scratch directory as a regular expression (fio_engines' pidstat
    -C 'aux-path=<scratch with \\.> '): it is shown as $SCRATCH too, paths taken from run.paths."""
    scratch = "/tmp/pcb-fio_engines.q2x1HV"
    r = {"lab": "fio_engines", "steps": [], "run": {"command": "", "paths": {
        "scratch": scratch, "out": "/tmp/out/h", "checkout": "/home/reader/casebook"}}}
    cmd = "env LC_ALL=C pidstat -u -l -C 'aux-path=/tmp/pcb-fio_engines\\.q2x1HV ' 1"
    for shown in (commands.display_command(cmd, r), commands.display_text(cmd, r)):
        assert "/tmp/pcb-" not in shown and "aux-path=$SCRATCH" in shown, shown
    assert commands.machine_paths(r) == {"scratch": scratch, "out": "/tmp/out/h", "checkout": "/home/reader/casebook",
                                         "lab": "fio_engines"}


def test_a_result_without_recorded_paths_shows_none():
    """Paths come from run.paths alone: a result without them has none, whatever its commands
    hold (they are then shown as recorded)."""
    r = {"lab": "fstime", "steps": [{"command": "/home/x/casebook/labs/fstime/fstime -d /tmp/pcb-fstime.abcdef"}],
         "run": {"command": "labs/fstime/run.sh --out results/h"}}
    assert commands.machine_paths(r) == {"scratch": None, "checkout": None, "out": None, "lab": "fstime"}
