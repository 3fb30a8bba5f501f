"""Formatting shared by the page macros and the command line: numbers, rows, tables, tabs,
escaping of text that comes from results and tool outputs, the emulated-CPU badge."""

from __future__ import annotations

import html
import math
import re

from .. import model
from ..model import Measurement, Result
from ..formats import UNIT_DISPLAY, fmt, fmt_case_value, unit  # noqa: F401 - the pages' names for them

# Material icons (inline SVG via pymdownx.emoji): no emoji font needed in the browser.
VERDICT_MARK = {
    "holds": ":material-check-circle:{ .pc-holds } holds",
    "fails": ":material-close-circle:{ .pc-fails } fails",
    "inconclusive": ":material-help-circle-outline:{ .pc-inconclusive } inconclusive",
    "untested": ":material-minus-circle-outline:{ .pc-untested } untested",
    "not applicable": ":material-cancel:{ .pc-not-applicable } not applicable",
}

def byte_keys() -> frozenset:
    """Case keys whose values are sizes in bytes, as the labs' manifests declare them
    (``[case_units]`` in ``labs/<lab>/lab.toml``: fio's bs, fstime's bufsize...): the site's
    tables show them in B, KiB, MiB or GiB."""
    global _BYTE_KEYS
    if _BYTE_KEYS is None:
        from .. import manifest
        _BYTE_KEYS = frozenset(k for k, u in manifest.case_units().items() if u == "bytes")
    return _BYTE_KEYS


_BYTE_KEYS: frozenset | None = None


def human_bytes(n: float) -> str:
    """``1024`` → ``"1 KiB"``, ``65536`` → ``"64 KiB"``, ``14`` → ``"14 B"``, ``1536`` → ``"1.5 KiB"``."""
    for suffix, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= size:
            return f"{n / size:g} {suffix}"
    return f"{n:g} B"


def case_cell(key: str, v) -> str:
    """A case value in a site table: a size in bytes (:func:`byte_keys`) as :func:`human_bytes`
    gives it, anything else as :func:`fmt_case_value`."""
    if key in byte_keys() and isinstance(v, (int, float)) and not isinstance(v, bool):
        return human_bytes(v)
    return fmt_case_value(v)


def case_keys(measurements: list[Measurement], where: dict | None = None, columns: list[str] | None = None) -> list[str]:
    """Case keys to show as columns: ``columns`` if given, else every key in first-seen order
    minus those fixed by ``where``."""
    if columns:
        return list(columns)
    keys: list[str] = []
    for m in measurements:
        for k in m["case"]:
            if k not in keys and k not in (where or {}):
                keys.append(k)
    return keys


select = model.select   # the one selector of measurements (labkit/model.py)


BYTE_UNITS = ("bytes", "B")
_BINARY = (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10))


def byte_scale(values: list[float]) -> tuple[float, str]:
    """(divisor, unit) showing byte counts ``values`` in B, KiB, MiB or GiB: the largest
    binary unit not above the column's largest value."""
    top = max((abs(v) for v in values if v is not None), default=0)
    for name, size in _BINARY:
        if top >= size:
            return float(size), name
    return 1.0, "B"


def display_scale(u: str, values: list[float]) -> tuple[float, str]:
    """(divisor, unit shown) for numbers in unit ``u``: byte counts in the binary unit
    :func:`byte_scale` picks for ``values``, anything else unscaled with :func:`unit`'s name."""
    return byte_scale(values) if u in BYTE_UNITS else (1.0, unit(u))


def column_decimals(values: list[float]) -> int:
    """Decimals for a column of numbers, the same for every row so that right-aligned values
    line up: three significant digits for the column's smallest non-zero magnitude, at most 3
    (values ≥ 100 get none, 10–99 one, 1–9.99 two, below 1 three)."""
    mags = [math.floor(math.log10(abs(v))) for v in values if v]
    if not mags:
        return 0
    if all(float(v).is_integer() for v in values if v is not None):
        return 0
    return max(0, min(3, 2 - min(mags)))


def fmt_fixed(x: float | None, decimals: int) -> str:
    """``x`` with ``decimals`` decimals and thousands separators (``12,345.6``); "–" for None."""
    if x is None:
        return "–"
    return f"{x:,.{decimals}f}"


def figure_first(keys: list, figures: list) -> list:
    """The columns of a site table in the order a phone shows them: the first case column, the
    figure columns, the other case columns. A 390 px screen shows about three columns before
    the table scrolls sideways: the figure stays among them whatever the number of case keys.
    ``figure_first(["e", "d"], ["median"])`` → ``["e", "median", "d"]``."""
    return list(keys[:1]) + list(figures) + list(keys[1:])


def measurement_table(ms: list[Measurement], keys: list[str], *, page: bool = False) -> tuple[list[str], list[list[str]]]:
    """(header, rows) for measurements: case columns, median, min–max, samples, unit.

    With ``page=True`` (the site's tables): the median comes right after the first case column
    (:func:`figure_first`, then the other case columns, min–max and samples); the unit goes
    into the headers ("median (µs)") when every row has the same unit (else a unit column
    follows the median), byte counts are shown in KiB/MiB/GiB (measured values, and the sizes
    in :func:`byte_keys` case columns), and each number column has one precision
    (:func:`column_decimals`) with thousands separators (:func:`markdown_table` right-aligns
    them). Without it (the terminal): case columns, then every number as :func:`fmt` writes
    it and a unit column.
    """
    if not page:
        header = keys + ["median", "min – max", "samples", "unit"]
        rows = []
        for m in ms:
            rows.append([fmt_case_value(m["case"].get(k, "")) for k in keys]
                        + [fmt(m["median"]), f"{fmt(m['min'])} – {fmt(m['max'])}", str(m["n"]), unit(m["unit"])])
        return header, rows
    units = {m["unit"] for m in ms}
    one_unit = len(units) == 1
    div, shown = display_scale(next(iter(units)), [m["max"] for m in ms]) if one_unit else (1.0, "")
    scaled = [(m["median"] / div, m["min"] / div, m["max"] / div) for m in ms]
    d = column_decimals([v for t in scaled for v in t])
    suffix = f" ({shown})" if one_unit and shown else ""
    header = figure_first(keys, [f"median{suffix}"] + ([] if one_unit else ["unit"])) + [f"min – max{suffix}", "samples"]
    rows = []
    for m, (med, lo, hi) in zip(ms, scaled):
        rows.append(figure_first([case_cell(k, m["case"].get(k, "")) for k in keys],
                                 [fmt_fixed(med, d)] + ([] if one_unit else [unit(m["unit"])]))
                    + [f"{fmt_fixed(lo, d)} – {fmt_fixed(hi, d)}", f"{m['n']:,}"])
    return header, rows


def names_unit(label: str, unit: str) -> bool:
    """Whether ``label`` already names ``unit`` as a word of its own ("IOPS" in "read IOPS",
    "s" in "time (s)", "segments" in "max_segments", "%" in "%CPU"), not inside a longer word
    ("s" in "clock_nanosleep") or after an apostrophe ("job's"): a column header adds
    " (unit)" only when it does not. A unit's letters must stand apart from the label's letters
    and digits; its symbols need not."""
    before = r"(?<![^\W_]|[/'’])" if re.match(r"\w", unit) else ""
    after = r"(?![^\W_])" if re.search(r"\w$", unit) else ""
    return re.search(before + re.escape(unit) + after, label) is not None


def metrics_table(columns: list[tuple[str, list[Measurement]]], keys: list[str]) -> tuple[list[str], list[list[str]]]:
    """(header, rows) for several metrics of the same cases side by side, as the site shows them:
    one row per case (its values of ``keys``, first-seen order over all columns), one column
    per (label, measurements) pair holding each case's median, then ``samples``. The metric
    columns come right after the first case column (:func:`figure_first`).

    Each metric column has its unit in the header ("IOPS", "bandwidth (MiB/s)"), byte counts
    in KiB/MiB/GiB and one precision (as :func:`measurement_table` with ``page=True``); a case
    a metric did not measure shows "–". ``samples`` is the measurements' n, or their range
    ("3–5") when the metrics of a row differ. Min–max stay in the one-metric tables.

    Raises:
        ValueError: a column has two measurements of the same case (``keys`` must tell them
            apart: add a key, or narrow the column's ``where``), or more than one unit.
    """
    order: list[tuple] = []
    cells: list[dict[tuple, dict]] = []
    for label, ms in columns:
        by_case: dict[tuple, dict] = {}
        for m in ms:
            case = tuple(case_cell(k, m["case"].get(k, "")) for k in keys)
            if case in by_case:
                raise ValueError(f"metrics_table: column {label!r} has two measurements for "
                                 f"{dict(zip(keys, case))}; add a key or narrow its where")
            by_case[case] = m
            if case not in order:
                order.append(case)
        cells.append(by_case)
    labels: list[str] = []
    formatted: list[dict[tuple, str]] = []
    for (label, ms), by_case in zip(columns, cells):
        units = {m["unit"] for m in ms}
        if len(units) > 1:
            raise ValueError(f"metrics_table: column {label!r} mixes units {sorted(units)}")
        u = next(iter(units), "")
        div, shown = display_scale(u, [m["median"] for m in ms])
        d = column_decimals([m["median"] / div for m in ms])
        labels.append(f"{label} ({shown})" if shown and not names_unit(label, shown) else label)
        formatted.append({c: fmt_fixed(m["median"] / div, d) for c, m in by_case.items()})
    header = figure_first(keys, labels) + ["samples"]
    rows = []
    for case in order:
        ns = [by[case]["n"] for by in cells if case in by]
        lo, hi = min(ns), max(ns)
        rows.append(figure_first(case, [f.get(case, "–") for f in formatted]) + [f"{lo:,}" if lo == hi else f"{lo:,}–{hi:,}"])
    return header, rows


_NUMERIC = re.compile(r"^[-+]?[\d,]*\.?\d+( ?[–-] ?[-+]?[\d,]*\.?\d+)?( ?[A-Za-zµ%/]+)?$")


def table_align(rows: list[list[str]]) -> list[str]:
    """"right" for each column whose every non-empty cell is a number (or a range of two,
    optionally with a unit), else "left": the alignment for :func:`markdown_table`."""
    if not rows:
        return []
    out = []
    for col in zip(*rows):
        cells = [str(c).strip() for c in col if str(c).strip() not in ("", "–")]
        out.append("right" if cells and all(_NUMERIC.match(c) for c in cells) else "left")
    return out


def markdown_table(header: list[str], rows: list[list[str]], align: list[str] | str | None = "auto") -> str:
    """A GitHub/Python-Markdown pipe table; ``|`` in cells is escaped. ``align``: "left" or
    "right" per column; "auto" (default): numbers right, the rest left (:func:`table_align`);
    None: every column left."""
    def cell(s):
        return str(s).replace("|", "\\|").replace("\n", " ")
    if align == "auto":
        align = table_align(rows)
    marks = ["---:" if a == "right" else "---" for a in (align or ["left"] * len(header))]
    out = ["| " + " | ".join(cell(h) for h in header) + " |", "|" + "|".join(marks) + "|"]
    out += ["| " + " | ".join(cell(c) for c in r) + " |" for r in rows]
    return "\n".join(out)


def text_table(header: list[str], rows: list[list[str]]) -> str:
    """A plain aligned text table for the terminal."""
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows)] if rows else [len(h) for h in header]
    line = lambda r: "  ".join(str(c).ljust(w) for c, w in zip(r, widths)).rstrip()
    return "\n".join([line(header), line(["-" * w for w in widths])] + [line(r) for r in rows])


DATA_OPEN, DATA_CLOSE = "<!-- pc-data -->", "<!-- /pc-data -->"


def tabs(items: list[tuple[str, str]]) -> str:
    """pymdownx.tabbed content tabs: one per (title, markdown body), bodies indented 4 spaces,
    or, for a single item, no tab strip: the title as a caption line over the body.

    Tabs with the same title are linked across the site (docs/assets/casebook.js, which also
    remembers the pick), so picking a host once switches every table. The block is marked
    with the comments :data:`DATA_OPEN` / :data:`DATA_CLOSE`, which ``labkit/site/mkdocs_hooks.py``
    turns into ``<div class="pc-data" data-search-exclude>``: measured data stay out of the
    search index, which every page downloads; the prose around them is indexed. (Comments,
    not an md_in_html ``<div markdown>``: that splits a tab set whose bodies hold raw HTML.)
    """
    out = [DATA_OPEN, ""]
    if len(items) == 1:
        title, body = items[0]
        out += [f'<p class="pc-caption">{html.escape(title)}</p>', "", body, ""]
    else:
        for i, (title, body) in enumerate(items):
            # "===!" starts a new tab set, so two macros in a row never merge their tabs.
            out.append(f'==={"!" if i == 0 else ""} "{title}"\n')
            out.append("\n".join(("    " + l) if l.strip() else "" for l in body.splitlines()))
            out.append("")
    out += [DATA_CLOSE, ""]
    return "\n".join(out) + "\n"


def admonition(kind: str, title: str, body: str, folded: bool = False) -> str:
    """A mkdocs-material admonition block; ``folded``: collapsed until the reader opens it
    (pymdownx.details, ``???``)."""
    text = "\n".join(("    " + l) if l.strip() else "" for l in body.splitlines())
    title = html.escape(title, quote=True)
    return f'{"???" if folded else "!!!"} {kind} "{title}"\n\n{text}\n'


def compare_rows(a: Result, b: Result) -> tuple[list[str], list[list[str]]]:
    """Side-by-side medians of two results of the same lab, with the ratio b/a, its 95 %
    interval and whether the difference is beyond noise.

    Header: metric, case, a's label, b's label, "ratio", "95 % interval", "beyond noise?". The
    interval is the one the claims engine decides on for two unpaired sides
    (:func:`labkit.stats.claims.interval_of`: Welch's t interval on the log scale where every
    sample is positive, Fieller's otherwise; calibrated at the n the labs use, DESIGN.md
    "Calibration"). A row is "yes" when the interval excludes 1, "within noise" when it holds 1,
    "too few samples" when either side has fewer than 3 samples (the calibration starts at 3),
    "within noise" too when every sample of both is 0, and "no interval" when the samples admit
    none (the interval column then says why).
    """
    from ..stats import claims as stats_claims
    index_b = {(m["metric"], tuple(sorted(m["case"].items()))): m for m in b["measurements"]}
    header = ["metric", "case", a["host"]["label"], b["host"]["label"], "ratio", "95 % interval", "beyond noise?"]
    rows = []
    for ma in a["measurements"]:
        mb = index_b.get((ma["metric"], tuple(sorted(ma["case"].items()))))
        if mb is None:
            continue
        ratio = mb["median"] / ma["median"] if ma["median"] else float("nan")
        case = ", ".join(f"{k}={fmt_case_value(v)}" for k, v in ma["case"].items())
        if min(ma["n"], mb["n"]) < 3:
            span, mark = "", "too few samples"
        elif not any(ma["samples"]) and not any(mb["samples"]):
            span, mark = "0 in every sample of both", "within noise"
        else:
            _, lo, hi, how = stats_claims.interval_of(tuple(mb["samples"]), tuple(ma["samples"]), "median", False)
            if math.isnan(lo):
                span, mark = how, "no interval"
            else:
                span = stats_claims.span_text({"low": lo, "high": hi}, fmt=lambda x: f"{x:.2f}")
                mark = "yes" if lo > 1 or hi < 1 else "within noise"
        rows.append([ma["metric"], case, f"{fmt(ma['median'])} {unit(ma['unit'])}", f"{fmt(mb['median'])} {unit(mb['unit'])}",
                     f"{ratio:.2f}", span, mark])
    return header, rows


_MD_SPECIAL = re.compile(r"([\\`*_\[\]])")


def esc(text) -> str:
    """``text`` (from a result or a tool's output) made inert for Markdown with HTML:
    ``<``, ``>``, ``&`` become entities and Markdown's inline marks are backslash-escaped,
    so ``skipped: <not supported>`` shows as written instead of becoming a tag."""
    return _MD_SPECIAL.sub(r"\\\1", html.escape(str(text), quote=False))


def code_span(text: str) -> str:
    """Inline code showing ``text`` verbatim, whatever backticks it holds."""
    text = str(text).replace("\n", " ")
    ticks = "`" * (max((len(r) for r in re.findall(r"`+", text)), default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{ticks}{pad}{text}{pad}{ticks}"


def code_block(text: str, lang: str = "text") -> str:
    """A fenced code block showing ``text`` verbatim (the fence outgrows any backtick run in it)."""
    fence = "`" * max(3, max((len(r) for r in re.findall(r"`+", text)), default=0) + 1)
    return f"{fence}{lang}\n{text}\n{fence}"


def emulation(host: dict) -> str | None:
    """``"emulated <arch> (QEMU TCG on <host_arch>): timings are not hardware"`` for a host
    whose CPU is emulated (``host.emulation.accelerator == "tcg"``), else None."""
    emu = host.get("emulation")
    if not emu or emu.get("accelerator") != "tcg":
        return None
    return f"emulated {host['arch']} (QEMU TCG on {emu['host_arch']}): timings are not hardware"


def emulation_badge(host: dict) -> str:
    """HTML badge (class ``pc-emulated``) with :func:`emulation`'s text, or "" on hardware."""
    text = emulation(host)
    return f'<span class="pc-emulated">{html.escape(text)}</span>' if text else ""


def host_label(host: dict, label: str | None = None) -> str:
    """A host's label for a table cell or header, badged when its CPU is emulated."""
    badge = emulation_badge(host)
    name = esc(label or host["label"])
    return f"{name} {badge}" if badge else name
