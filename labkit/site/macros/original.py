"""The original investigation (``labs/<lab>/original.toml``, :mod:`labkit.original`): its
tables as published, and its ratios beside ours."""

from __future__ import annotations

import html
from typing import TYPE_CHECKING

from ... import original as original_mod
from ...stats import claims as claims_mod
from ...view import render
from .. import fast_tables
from . import build, templates
from .build import EMULATED_BADGE, MacroError
from .numbers import number as _num
from .tables import stacked_table

if TYPE_CHECKING:
    from ...model import Result


def load_original(lab: str) -> dict:
    """``labs/<lab>/original.toml``, loaded and checked.

    Raises:
        OriginalError: a missing or malformed file (the error names the problem).
    """
    return build.lab_file(original_mod.load, lab, "original.toml")


def original_table_md(orig: dict, t: dict) -> str:
    """Markdown: one original table ``t`` (an entry of ``orig["table"]``: ``title``, ``columns``,
    ``rows``, optional ``note``) of the original ``orig`` (:func:`load_original`): caption
    (machine, kernel), title, the cells as published (HTML-escaped), note.

    Raises:
        KeyError: ``t`` lacks ``title``, ``columns`` or ``rows``.
    """
    head = f"**{html.escape(original_mod.caption(orig, t), quote=False)}.** {html.escape(t['title'], quote=False)}"
    table = fast_tables.table([html.escape(c, quote=False) for c in t["columns"]],
                                  [[html.escape(c, quote=False) for c in row] for row in t["rows"]])
    return templates.render("original_table.html", head=head, table=table, note=t.get("note") or "") + "\n"


def original_table(lab: str, table: str) -> str:
    """Markdown: the original investigation's table ``table`` of ``labs/<lab>/original.toml``,
    captioned "Original: <machine>, kernel <k>", cells exactly as published, with its note.

    Raises:
        OriginalError: a bad original.toml, or no table with that id.
    """
    orig = load_original(lab)
    return original_table_md(orig, original_mod.table(orig, table, f"labs/{lab}/original.toml"))


def original_tables(lab: str) -> str:
    """Markdown: every table of ``labs/<lab>/original.toml``, in the file's order.

    Raises:
        OriginalError: a bad original.toml.
    """
    orig = load_original(lab)
    return "\n".join(original_table_md(orig, t) for t in orig["table"])


def here_ratio(result: Result, here: dict) -> str:
    """Markdown inline text: our ratio a ÷ b for one host (medians, or means) with its 95 %
    interval (:func:`labkit.stats.claims.ratio_interval`), marked when measured on an emulated CPU;
    "–" with the reason when a side is missing or zero."""
    stat = here.get("statistic", "median")
    a, why_a = claims_mod.side(result, here["metric"], here["a"], stat)
    b, why_b = claims_mod.side(result, here["metric"], here["b"], stat)
    if a is None or b is None:
        return "– (" + render.esc("; ".join(w for w in (why_a, why_b) if w)) + ")"
    if not b.value:
        return f"– ({render.esc(b.label)}: {stat} is 0)"
    badge = f" {EMULATED_BADGE}" if claims_mod.emulated(result) or a.emulated or b.emulated else ""
    if min(a.n, b.n) < claims_mod.MIN_SAMPLES:
        return f"{_num(a.value / b.value)} (too few samples: n = {a.n} and {b.n}){badge}"
    e = claims_mod.ratio_interval_cached(a, b)
    if e["low"] is None or e["low"] != e["low"]:
        return f"{_num(a.value / b.value)}{badge}"
    return f"{_num(e['estimate'])} ({claims_mod.span_text(e, _num)}){badge}"


def original_vs_here(lab: str) -> str:
    """Markdown: one row per ``[[ratio]]`` of ``labs/<lab>/original.toml``: the quantity, the
    original's ratio (its two cells, machine and kernel), our ratio a ÷ b of medians on
    every host with a result (emulated hosts badged; "within noise" where the two sides'
    ranges overlap, "too few samples" under 3), and the one-line reading; a
    :func:`labkit.site.macros.tables.stacked_table`.

    Raises:
        OriginalError: a bad original.toml; MacroError: it has no [[ratio]];
        NoResult: no host has a result of ``lab``.
    """
    orig = load_original(lab)
    if not orig["ratio"]:
        raise MacroError(f"original_vs_here: labs/{lab}/original.toml has no [[ratio]] entries")
    pairs = build.for_lab(lab)
    header = ["Quantity", "Original"] + [render.host_label(r["host"], h.title) for h, r in pairs] + ["Reading"]
    rows = []
    for q in orig["ratio"]:
        value, ta, tb = original_mod.original_ratio(orig, q)
        t = original_mod.table(orig, q["original"]["table"])
        where = "; ".join(f"{m['name']}, kernel {k}" for m, k in original_mod.table_machines(orig, t))
        cell = html.escape(f"{_num(value)} ({ta} ÷ {tb}; {where})", quote=False)
        rows.append([html.escape(q["quantity"], quote=False), cell] + [here_ratio(r, q["here"]) for _, r in pairs]
                    + [html.escape(q["reading"], quote=False)])
    return stacked_table(header, rows)
