"""Tables of measurements: one metric or several per host, two hosts side by side, every pair
of hosts, the home page's cases, and the stacked table other modules lay long text out in."""

from __future__ import annotations

import html

from ... import results as results_mod
from ...view import render
from .. import fast_tables
from . import build, templates
from .build import MacroError


def results_table(lab: str, metric: str, where: dict | None = None, columns: list | None = None,
                  group: str | None = None, optional: bool = False) -> str:
    """Markdown: per host, a table of ``metric`` measurements (median, min–max, samples, unit).

    ``where`` filters cases (subset match); ``columns`` picks and orders case columns;
    ``group`` names the lab's step group, for the skip note of hosts without data.
    ``optional=True`` (for steps that need what few hosts have, e.g. PMU counters) shows the
    skip notes when no host has data; it needs ``group``, so a typo still fails.

    Raises:
        MacroError: no host has any matching measurement (a typo must not pass).
    """
    def table(host, result):
        ms = render.select(result, metric, where)
        if not ms:
            return build.skip_note(result, group)
        header, rows = render.measurement_table(ms, render.case_keys(ms, where, columns), page=True)
        return build.guest_badge(result, ms) + fast_tables.table(header, rows)

    md, found = build.per_host(lab, table)
    if not found and not (optional and build.group_ran(lab, group)):
        raise MacroError(f"results_table: no host has {metric!r} measurements in lab {lab!r} where {where}")
    return md


def _metric_specs(metrics: list, where: dict | None) -> list[dict]:
    """``metrics_table``'s ``metrics`` as ``{"metric", "where", "label"}`` dicts, each ``where``
    merged over the table's.

    Raises:
        MacroError: an item that is neither a metric name nor such a dict.
    """
    specs = []
    for item in metrics:
        spec = {"metric": item} if isinstance(item, str) else dict(item)
        if not isinstance(spec.get("metric"), str) or set(spec) - {"metric", "where", "label"}:
            raise MacroError(f"metrics_table: bad metrics item {item!r}")
        spec["where"] = {**(where or {}), **(spec.get("where") or {})}
        spec.setdefault("label", spec["metric"])
        specs.append(spec)
    return specs


def metrics_table(lab: str, metrics: list, where: dict | None = None, columns: list | None = None,
                  group: str | None = None, optional: bool = False) -> str:
    """Markdown: per host, one table of several metrics side by side, a row per case
    (:func:`labkit.view.render.metrics_table`: medians, units in the headers, samples).

    ``metrics``: each a metric name, or a dict ``{"metric": name, "where": {...}, "label":
    header}`` (``where`` narrows that column, e.g. ``{"process": "all"}``; ``label`` defaults
    to the metric's name). ``where``, ``columns``, ``group`` and ``optional`` as in
    :func:`results_table`, whose one-metric tables keep min–max.

    Raises:
        MacroError: no ``columns``, a bad ``metrics`` item, or a metric no host measured where
            asked (a typo must not pass; with ``optional=True`` a group that ran explains it).
        ValueError: a column with two measurements of one case, or mixed units.
    """
    if not columns:
        raise MacroError("metrics_table: columns= names the case keys of a row")
    specs = _metric_specs(metrics, where)
    seen = set()  # labels of the columns some host has data for

    def table(host, result):
        cols = [(s["label"], render.select(result, s["metric"], s["where"])) for s in specs]
        cols = [(label, ms) for label, ms in cols if ms]
        seen.update(label for label, _ in cols)
        if not cols:
            return build.skip_note(result, group)
        header, rows = render.metrics_table(cols, list(columns))
        return build.guest_badge(result, [m for _, ms in cols for m in ms]) + fast_tables.table(header, rows)

    md, _ = build.per_host(lab, table)
    # a host without any column adds nothing to seen, so this also catches "no host has data"
    missing = [s["label"] for s in specs if s["label"] not in seen]
    if missing and not (optional and build.group_ran(lab, group)):
        raise MacroError(f"metrics_table: no host has {missing} measurements in lab {lab!r} where {where}")
    return md


def _side_by_side(a: results_mod.Host, b: results_mod.Host, lab: str) -> tuple[list[str], list[list[str]]]:
    """(header, rows) of ``lab``'s medians on hosts ``a`` and ``b`` with the ratio b/a
    (:func:`labkit.view.render.compare_rows`), the host columns headed by badged labels, cells escaped."""
    header, rows = render.compare_rows(a.results[lab], b.results[lab])
    header[2], header[3] = render.host_label(a.results[lab]["host"]), render.host_label(b.results[lab]["host"])
    return header, [[render.esc(c) for c in row] for row in rows]


def compare_table(lab: str, host_a: str, host_b: str) -> str:
    """Markdown: medians of two hosts (labels or tab titles) side by side with the ratio b/a
    ("ratio" column), its 95 % interval and whether the difference is beyond noise.

    Raises:
        NoResult: no such host; MacroError: one of them has no result of ``lab``.
    """
    every = build.all_hosts()
    a, b = results_mod.host(host_a, every), results_mod.host(host_b, every)
    if lab not in a.results or lab not in b.results:
        raise MacroError(f"compare_table: both {host_a} and {host_b} need a {lab} result")
    return fast_tables.table(*_side_by_side(a, b, lab))


def compare_hosts() -> str:
    """Markdown: every pair of hosts side by side, one tab per pair ("B vs A"), one table per
    lab they share: medians, ratio B/A ("ratio to A", as the seeds compare machines), its 95 %
    interval and "within noise" where that interval holds 1 (:func:`labkit.view.render.compare_rows`).
    Each lab's table is folded under a
    title that counts its measurements in common and, of those, the differences beyond noise,
    within noise and with too few samples (where one host ran once, "0 beyond noise" alone
    would read as agreement) (a chapter's worth of rows per lab: thousands of rows on one page
    otherwise). With fewer than two hosts sharing a lab, an info admonition saying so."""
    every = build.all_hosts()
    tabs = []
    for i, a in enumerate(every):
        for b in every[i + 1:]:
            shared = sorted(set(a.results) & set(b.results))
            if not shared:
                continue
            parts = []
            for lab in shared:
                header, rows = _side_by_side(a, b, lab)
                header[4] = f"ratio to {render.esc(a.label)}"
                marks = [row[6] for row in rows]  # escaping leaves these words as they are
                title = (f"{lab}: {len(rows)} measurements in common, {marks.count('yes')} beyond noise, "
                         f"{marks.count('within noise')} within noise, {marks.count('too few samples')} with too few samples"
                         + (f", {marks.count('no interval')} with no interval" if "no interval" in marks else ""))
                parts.append(render.admonition("note", title, fast_tables.table(header, rows), folded=True))
            badges = [render.emulation_badge(next(iter(h.results.values()))["host"]) for h in (b, a)]
            parts[:0] = [f"{render.esc(h.label)}: {badge}" for h, badge in zip((b, a), badges) if badge]
            tabs.append((f"{b.label} vs {a.label}", "\n\n".join(parts)))
    if not tabs:
        return render.admonition("info", "One host so far", "Comparisons need results from at least two hosts "
                                 "with a lab in common. Run `make labs` to add this machine.")
    return render.tabs(tabs)


def cases_table() -> str:
    """Markdown: the home page's table of cases, one row per lab manifest (``labs/<lab>/lab.toml``,
    in its ``order``): the chapter's link, the problem, what the reader practises.

    Raises:
        ManifestError: a malformed lab.toml.
    """
    from ... import manifest
    rows = [[f"[{html.escape(m['title'], quote=False)}](cases/{m['name']}.md)", html.escape(m["problem"], quote=False),
             m["practise"]] for m in manifest.labs(build.ROOT)]
    return fast_tables.table(["chapter", "the problem", "what you practise"], rows, align=None)


def stacked_table(header: list[str], rows: list[list[str]]) -> str:
    """Markdown (an HTML block, md_in_html: cells are Markdown inline text, like
    :func:`labkit.view.render.markdown_table`'s) for a table that is a table on a wide screen and a
    card per row on a phone (docs/assets/casebook.css, ``.pc-stack``): the first cell is the
    card's title, each other cell is preceded by its column's header, which a wide screen does
    not show (``.pc-stack-label``, hidden from screen readers, which announce the header cells;
    explicit ARIA roles keep the table's semantics when CSS changes its display). For tables of
    long text cells in many columns, where a phone would squeeze every column into a tall strip.
    Cells keep their markup (an emulation badge in a header goes with every cell of its column);
    a newline in a cell becomes a space."""
    def cell(s):
        return str(s).replace("\n", " ")
    body = [{"first": cell(r[0]) if r else None, "rest": [(cell(h), cell(c)) for h, c in zip(header[1:], r[1:])]}
            for r in rows]
    return templates.render("stacked_table.html", header=[cell(h) for h in header], rows=body) + "\n"
