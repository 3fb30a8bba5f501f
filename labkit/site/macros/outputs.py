"""Real outputs on the page: a step's command and an excerpt of what it printed, the same with
code annotations that explain it line by line, and a text artifact a lab wrote."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ... import model
from ...view import commands, render
from . import build
from .excerpts import Selection, pattern_error, shown_of, stream_name
from .build import MacroError, Note

if TYPE_CHECKING:
    from ...model import Result

ANNOTATE_LANG = "pkgconfig"
"""Pygments lexer for annotated outputs. mkdocs-material turns ``(n)`` markers into code
annotations only inside comment tokens (``.c``, ``.c1``, ``.cm``), and a plain-text block has
none. The pkg-config lexer treats ``#`` to the end of a line as a comment and leaves almost every
other output line as plain text, so a marker line ``# (n)!`` becomes an annotation without
colouring the tool's output as if it were code."""

_HAS_COUNTED_PAREN = re.compile(r"#.*\(\d+\)")


@dataclass
class _Output:
    """One host's output as a page shows it: its lines (machine paths replaced), the command
    that printed it (or None), its status ("exit status 0, 0.12 s") and what it is (for
    :func:`labkit.site.macros.excerpts.shown_of`)."""
    lines: list[str]
    prompt: str | None
    status: str
    source: str


def _check_stream(macro: str, stream: str) -> None:
    """Raises MacroError unless ``stream`` is out, err or both."""
    if stream not in ("out", "err", "both"):
        raise MacroError(f"{macro}: stream={stream!r}: one of out, err, both")


def _display(text: str, result: Result) -> str:
    """``text`` as a reader sees it: machine paths replaced (:func:`labkit.view.commands.display_text`),
    without its final newlines."""
    return commands.display_text(text.rstrip("\n"), result)


def step_label(step: str | dict) -> str:
    """How a message names a step reference: its name, or ``case k=v, ...``."""
    return step if isinstance(step, str) else "case " + model.case_text(step)


def find_step(macro: str, step: str | dict, r: Result) -> dict | None:
    """The step of ``r`` that ``step`` refers to: by name (a step that stands for itself, such
    as ``setup.df``), or, for a dict of case key/values, the one step whose case holds them
    (:func:`labkit.model.find_step`). None when this run has no such step.

    Raises:
        MacroError: ``step`` is neither a name nor a dict, or the case picks several steps.
    """
    if isinstance(step, str):
        return model.find_step(r, name=step)
    if not isinstance(step, dict) or not step:
        raise MacroError(f"{macro}: step={step!r}: a step's name or a dict of its case keys")
    try:
        return model.find_step(r, where=step)
    except ValueError as exc:
        raise MacroError(f"{macro}: on {r['host']['label']}, {exc}") from None


def _step_output(macro: str, lab: str, step: str | dict, stream: str, host, r: Result) -> _Output | Note:
    """What step ``step`` (a name or a case, :func:`find_step`) printed on ``stream`` (out,
    err, or both: out then err) on this host, or a Note: the step is not in this run, or was
    skipped (:func:`build.skip_note`).

    Raises:
        MacroError: the step ran but its raw output file is missing; see :func:`find_step`.
    """
    s = find_step(macro, step, r)
    if s is None:
        return Note(render.admonition("warning", "Not run on this host",
                                      f"No step of this run has the case {render.code_span(model.case_text(step))}."
                                      if isinstance(step, dict) else f"Step {render.code_span(step)} is not in this run."))
    if s["status"] == "skipped":
        return build.skip_note(r, s["group"])
    text = ""
    for ext in (("out", "err") if stream == "both" else (stream,)):
        f = host.dir / lab / "raw" / f"{s['name']}.{ext}"
        if not f.exists():
            raise MacroError(f"{macro}: {f} is missing")
        text += f.read_text(errors="replace")
    status = (f"exit status {s['exit_code']}" + (" (expected to fail)" if s.get("expect") == "failure" else "")
              + f", {s['seconds']:.2f} s")
    return _Output(_display(text, r).splitlines(), commands.display_command(s["command"], r), status, stream_name(stream))


def _file_output(lab: str, file: str, host, r: Result) -> _Output | Note:
    """The file ``file`` (relative to ``<host>/<lab>/``) this host's run kept, with its command
    from the sibling ``.cmd`` file when there is one, or a Note that the run kept no such file."""
    f = host.dir / lab / file
    if not f.is_file():
        return Note(render.admonition("warning", "Not kept on this host",
                                      f"This run of {render.code_span(lab)} kept no {render.code_span(file)}."))
    cmd = f.with_name(f.name.rsplit(".", 1)[0] + ".cmd")  # x.iostat.out -> x.iostat.cmd
    prompt = commands.display_command(cmd.read_text().strip(), r) if cmd.is_file() else None
    return _Output(_display(f.read_text(errors="replace"), r).splitlines(), prompt, f"the file {render.code_span(file)} of this run",
                   "the file")


def step_output(lab: str, step: str | dict, stream: str = "both", lines=None, match: str | None = None,
                context: int = 0, before: int | None = None, after: int | None = None,
                tail: int | None = None) -> str:
    """Markdown: per host, the command of ``step`` (a step's name, or a dict of case keys that
    picks one step, :func:`find_step`) as a reader would type it (machine paths
    replaced, :func:`labkit.view.commands.display_command`) and an excerpt of its real output
    (``stream``: out, err or both: out then err), with its exit status, its time in s and which
    lines are shown.

    Choose the excerpt with one of:

    - ``lines="1-20"`` (also ``"7"``, ``"30-"``, ``"1-3,10-12"``): those lines, numbered from 1;
    - ``match="^ *read"`` (a Python regular expression searched in each line) with
      ``context=N`` lines either side, or ``before=``/``after=``: every matching line;
    - ``tail=N``: the last N lines (``lines=N`` with a number means the same).

    Without any, the whole output is shown if it has at most
    :data:`labkit.site.macros.excerpts.EXCERPT_MAX_LINES` lines. Left-out lines are marked
    ``[... k lines not shown ...]``. Paths of the machine that ran the lab are replaced in the
    excerpt too (``$SCRATCH``, paths relative to the checkout).

    Raises:
        MacroError: no host ran the step, its raw output is not kept, the selection is
        malformed or picks no line on any host, more than one way to select is given, or the
        whole output is too long to show without a selection.
    """
    sel = Selection("step_output", lines, match, context, before, after, tail)
    _check_stream("step_output", stream)
    ran = 0

    def shown(host, r):
        nonlocal ran
        out = _step_output("step_output", lab, step, stream, host, r)
        if isinstance(out, Note):
            return out
        ran += 1
        got = sel.cut(out.lines, f"{step_label(step)} of {lab} on {host.label} printed")
        if got is None:
            what = f"match={sel.match!r}" if sel.match is not None else f"lines={sel.lines!r}"
            return Note(render.admonition("warning", "Nothing to show on this host",
                                          f"{render.esc(what)} picks no line of this host's {len(out.lines)}-line output."))
        excerpt, which = got
        block = render.code_block("$ " + out.prompt + ("\n" + "\n".join(excerpt) if excerpt else ""), "pcb-step")
        return f"{block}\n\n{out.status}; {shown_of(which, out.source)}."

    md, picked = build.per_host(lab, shown)
    if not ran:
        raise MacroError(f"step_output: no host ran step {step_label(step)!r} of lab {lab!r}")
    if not picked:
        raise MacroError(f"step_output: lines={sel.lines!r} / match={sel.match!r} picks no line of {step_label(step)!r} on any host")
    return md


def annotated_block(prompt: str | None, excerpt: list[str], notes: list, used: set) -> str:
    """A code block of ``excerpt`` (after ``$ prompt``) with each note's marker on a line of its
    own under the first line its pattern matches (indented like it: on a narrow screen a marker at
    the end of a long line would be out of sight; several notes may mark one line), followed by the
    annotation list. The output's own lines are never changed. Notes that match no line here are
    left out and the rest numbered from 1 in the order of the lines; the indexes of the notes
    placed are added to ``used``. If a shown line has a ``#`` comment holding ``(digits)``,
    which mkdocs-material would take for a marker, the block is plain text and the notes a list."""
    placed = {}  # line index -> [note text, ...]
    for i, (pattern, text) in enumerate(notes):
        rx = re.compile(pattern)
        hit = next((j for j, line in enumerate(excerpt) if not line.startswith("[... ") and rx.search(line)), None)
        if hit is not None:
            placed.setdefault(hit, []).append(text)
            used.add(i)
    safe = not any(_HAS_COUNTED_PAREN.search(line) for line in excerpt)
    body, items = [f"$ {prompt}"] if prompt else [], []
    for j, line in enumerate(excerpt):
        body.append(line)
        for text in placed.get(j, []):
            items.append(text)
            if safe:
                indent = line[: len(line) - len(line.lstrip())]
                body.append(f"{indent}# ({len(items)})!")
    # The class lets docs/assets/casebook.css keep this block's data rendered: an annotation's
    # tooltip overflows the block, and content-visibility would clip it.
    block = render.code_block("\n".join(body), f"{{.{ANNOTATE_LANG} .pc-annotated}}" if safe else "text")
    listing = "\n".join(f"{n}.  " + "\n    ".join(t.splitlines()) for n, t in enumerate(items, 1))
    return f"{block}\n\n{listing}" if listing else block


def _check_notes(notes: list) -> list[list[str]]:
    """``annotated_output``'s ``notes`` as [pattern, text] lists.

    Raises:
        MacroError: an item is not a pair of strings, or a pattern is not a regular expression.
    """
    notes = [list(x) for x in notes]
    if any(len(x) != 2 or not all(isinstance(y, str) for y in x) for x in notes):
        raise MacroError("annotated_output: notes= is a list of [pattern, text] pairs")
    for pattern, _ in notes:
        why = pattern_error(pattern)
        if why:
            raise MacroError(f"annotated_output: note pattern {pattern!r}: {why}")
    return notes


def annotated_output(lab: str, step: str | dict | None = None, notes: list | None = None, file: str | None = None,
                     stream: str = "both", lines=None, match: str | None = None, context: int = 0,
                     before: int | None = None, after: int | None = None, tail: int | None = None) -> str:
    """Markdown: per host, a real output with mkdocs-material code annotations that explain it
    line by line.

    The output is either a step's (``step``, ``stream`` as for :func:`step_output`, its command
    shown as a reader would type it) or a file the lab kept in its result folder (``file``,
    relative to ``<host>/<lab>/``, e.g. ``"raw/x.iostat.out"``; its command is read from the
    sibling ``.cmd`` file when the lab kept one). The excerpt is chosen as for
    :func:`step_output` (``lines=``, ``match=`` with ``context``/``before``/``after``, ``tail=``).
    A file a guest wrote is led by the emulated-guest badge
    (:func:`labkit.site.macros.build.file_badge`). ``notes`` is a list of ``[pattern, markdown]``: each note's marker goes on the first shown
    line the regular expression matches (on each host, so the notes follow that host's output),
    and the note text is the annotation. Machine paths are replaced as in :func:`step_output`.

    Raises:
        MacroError: neither or both of ``step`` and ``file``, a bad selection or pattern, no host
        ran the step or kept the file, the selection picks no line anywhere, or a note's pattern
        matches no shown line on any host (a typo must not pass).
    """
    if (step is None) == (file is None):
        raise MacroError("annotated_output: give step= or file=, not both")
    notes = _check_notes(notes or [])
    sel = Selection("annotated_output", lines, match, context, before, after, tail)
    _check_stream("annotated_output", stream)
    what = step_label(step) if step is not None else file
    found, used = 0, set()

    def shown(host, r):
        nonlocal found
        out = (_step_output("annotated_output", lab, step, stream, host, r) if step is not None
               else _file_output(lab, file, host, r))
        if isinstance(out, Note):
            return out
        found += 1
        got = sel.cut(out.lines, f"{what} of {lab} on {host.label} has")
        if file and not out.lines:  # no empty block under notes that describe lines: say it plainly
            return render.admonition("warning", "Nothing to show on this host", f"On this host {out.status} is empty.")
        if got is None:
            return Note(render.admonition("warning", "Nothing to show on this host",
                                          f"The selection picks no line of this host's {len(out.lines)}-line output."))
        excerpt, which = got
        block = annotated_block(out.prompt, excerpt, notes, used)
        badge = build.file_badge(r, file) if file else ""
        return f"{badge}{block}\n\n{out.status}; {shown_of(which, out.source)}."

    md, picked = build.per_host(lab, shown)
    if not found:
        raise MacroError(f"annotated_output: no host has {what!r} of lab {lab!r}")
    if not picked:
        raise MacroError(f"annotated_output: the selection picks no line of {what!r} on any host")
    unused = [notes[i][0] for i in range(len(notes)) if i not in used]
    if unused:
        raise MacroError(f"annotated_output: note pattern(s) {unused} match no shown line of {what!r} on any host")
    return md


def artifact_text(lab: str, kind: str = "log", lang: str = "text", **case) -> str:
    """Markdown: per host, the text artifact of ``kind`` (e.g. a trace excerpt a lab's record.py
    wrote) whose case matches ``case``, whole, as a code block in Pygments language ``lang``
    (machine paths replaced, as in :func:`step_output`), with the artifact's title under it; led
    by the emulated-guest badge when a guest wrote it (:func:`labkit.site.macros.build.file_badge`).

    Raises:
        MacroError: no host has such an artifact, or a host has several.
    """
    def shown(host, result):
        a = build.one_artifact("artifact_text", host, result, kind, case)
        if a is None:
            return build.skip_note(result, None)
        text = _display((host.dir / a["path"]).read_text(errors="replace"), result)
        title = render.esc(a.get("title", ""))
        badge = build.file_badge(result, a["path"].removeprefix(f"{lab}/"))
        return badge + render.code_block(text, lang) + (f"\n\n{title}." if title else "")

    return build.per_host(lab, shown,
                          missing=f"artifact_text: no host has a {kind} artifact of lab {lab!r} matching {case}")[0]
