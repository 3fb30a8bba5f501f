"""Which lines of a tool's output a page shows: the one selection (``lines=``, ``match=`` with
context, ``tail=``, or the whole output up to :data:`EXCERPT_MAX_LINES`) and the one cut that
marks what it leaves out, shared by the output macros (:mod:`labkit.site.macros.outputs`)."""

from __future__ import annotations

import re
import warnings

from .build import MacroError

EXCERPT_MAX_LINES = 40  # a whole output longer than this needs lines=, match= or tail=

_LINES_HELP = "give ranges of line numbers from 1, e.g. '1-20', '7', '30-' or '1-3,10-12'"


def _line_ranges(spec: str, total: int) -> list[tuple[int, int]]:
    """``"1-20"``, ``"5"``, ``"30-"``, ``"1-3,10-12"`` → 0-based half-open ranges, clipped
    to ``total`` lines.

    Raises:
        ValueError: a malformed spec.
    """
    out = []
    for part in str(spec).split(","):
        m = re.fullmatch(r"\s*(\d+)\s*(?:(-)\s*(\d*)\s*)?", part)
        if not m or int(m.group(1)) < 1 or (m.group(3) and int(m.group(3)) < int(m.group(1))):
            raise ValueError(f"lines={spec!r}: {_LINES_HELP}")
        first = int(m.group(1)) - 1
        last = (int(m.group(3)) if m.group(3) else total) if m.group(2) else first + 1
        out.append((first, min(last, total)))
    return out


def excerpt(text_lines: list[str], lines, match, before: int, after: int, tail) -> tuple[list[str], str] | None:
    """Cut ``text_lines`` to ``lines`` (a spec as :func:`_line_ranges` reads it), the lines
    ``match`` (a regular expression) finds with ``before``/``after`` lines of context, the last
    ``tail`` lines, or (all None) every line.

    Returns:
        (the excerpt, with "[... k lines not shown ...]" and "[... k more lines ...]" where
        lines are left out; which lines it shows: "lines 2–3, 10 of 12 lines", "all 3 lines",
        "its one line", "no output"), or None when the selection picks no line of a non-empty
        output.

    Raises:
        ValueError: a malformed ``lines`` spec.
    """
    n = len(text_lines)
    if match is not None:
        pat = re.compile(match)
        keep = set()
        for i, line in enumerate(text_lines):
            if pat.search(line):
                keep.update(range(max(0, i - before), min(n, i + after + 1)))
        ranges = [(i, i + 1) for i in sorted(keep)]
    elif lines is not None:
        ranges = [(a, b) for a, b in _line_ranges(lines, n) if a < b]
    elif tail is not None:
        ranges = [(max(0, n - int(tail)), n)] if n else []
    else:
        ranges = [(0, n)]
    picked = sorted({i for a, b in ranges for i in range(a, b)})
    if not picked and n:
        return None
    out, prev, spans = [], -1, []
    for i in picked:
        if i > prev + 1:
            out.append(f"[... {i - prev - 1} line{'s' if i - prev - 1 > 1 else ''} not shown ...]")
        if spans and spans[-1][1] == i:
            spans[-1][1] = i + 1
        else:
            spans.append([i, i + 1])
        out.append(text_lines[i])
        prev = i
    if picked and picked[-1] < n - 1:
        left = n - 1 - picked[-1]
        out.append(f"[... {left} more line{'s' if left > 1 else ''} ...]")
    if not n:
        return out, "no output"
    shown = ", ".join(f"{a + 1}" if b == a + 1 else f"{a + 1}–{b}" for a, b in spans)
    if len(picked) == n:
        return out, "its one line" if n == 1 else "both lines" if n == 2 else f"all {n} lines"
    return out, f"line{'s' if len(picked) > 1 else ''} {shown} of {n} lines"


def pattern_error(pattern: str) -> str | None:
    """Why ``pattern`` is not a sound Python regular expression, or None. A warning of the
    compiler counts (a ``[[`` read as a nested set, an escape Python will reject): a pattern that
    works today by luck must not pass a strict build."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        try:
            re.compile(pattern)
        except (re.error, Warning) as exc:
            return str(exc)
    return None


class Selection:
    """A macro's choice of lines, checked when it is made: ``lines="1-20"`` (also ``"7"``,
    ``"30-"``, ``"1-3,10-12"``; a number means ``tail=``), ``match=`` a regular expression with
    ``context`` lines either side (or ``before``/``after``), ``tail=N``; at most one of them.

    Raises (on construction):
        MacroError: more than one way to select, a malformed ``lines`` spec, or a ``match``
        that is not a regular expression; each names ``macro``.
    """

    def __init__(self, macro: str, lines=None, match: str | None = None, context: int = 0,
                 before: int | None = None, after: int | None = None, tail: int | None = None):
        if isinstance(lines, int) and not isinstance(lines, bool):
            lines, tail = None, lines if tail is None else tail
        if sum(x is not None for x in (lines, match, tail)) > 1:
            raise MacroError(f"{macro}: choose one of lines=, match= or tail=")
        if lines is not None:
            try:
                _line_ranges(lines, 0)
            except ValueError as exc:
                raise MacroError(f"{macro}: {exc}") from None
        if match is not None:
            why = pattern_error(match)
            if why:
                raise MacroError(f"{macro}: match={match!r} is not a regular expression: {why}")
        self.macro, self.lines, self.match, self.tail = macro, lines, match, tail
        self.before = context if before is None else before
        self.after = context if after is None else after

    @property
    def chosen(self) -> bool:
        """True if the page chose lines (else the whole output is shown)."""
        return self.lines is not None or self.match is not None or self.tail is not None

    def cut(self, text_lines: list[str], what: str) -> tuple[list[str], str] | None:
        """:func:`excerpt` of ``text_lines``; ``what`` names the output with a verb for the error
        ("strace of fstime on h1 printed").

        Raises:
            MacroError: no lines were chosen and the output has more than
            :data:`EXCERPT_MAX_LINES`.
        """
        if not self.chosen and len(text_lines) > EXCERPT_MAX_LINES:
            raise MacroError(f"{self.macro}: {what} {len(text_lines)} lines: "
                             f"choose an excerpt with lines='1-20', match='regex' (with context=) or tail=N")
        return excerpt(text_lines, self.lines, self.match, self.before, self.after, self.tail)


def stream_name(stream: str) -> str:
    """``out`` → "standard output", ``err`` → "standard error", ``both`` → "output (stdout, then stderr)"."""
    return {"out": "standard output", "err": "standard error", "both": "output (stdout, then stderr)"}[stream]


def shown_of(shown: str, source: str) -> str:
    """The end of an output's caption: which lines of ``source`` (:func:`stream_name`, or "the
    file") are shown ("lines 2–3 of 10 lines of standard output"), or that it was empty
    ("no standard output", "no output on stdout or stderr", "an empty file")."""
    if shown != "no output":
        return f"{shown} of {source}"
    return {"the file": "an empty file", stream_name("both"): "no output on stdout or stderr"}.get(source, f"no {source}")
