"""mkdocs-macros module: inject lab results into pages (DESIGN.md, "Injection into pages").

Enabled per page (``render_macros: true`` in the front matter; ``render_by_default``
is off), so shell ``{{ }}`` in code blocks elsewhere is never evaluated. Every macro
renders one content tab per host (tabs linked site-wide by host label). A missing
result, an unknown metric or artifact, or a bad argument raises, and
``on_error_fail: true`` turns that into a failed ``mkdocs build --strict``.

Macros: ``results_table``, ``metrics_table``, ``chart``, ``flamegraph``, ``claims``, ``provenance``,
``skips``, ``hosts_table``, ``host_provenance``, ``compare_table``, ``step_output``,
``compare_hosts``, ``cast``, and for the original investigation (``labs/<lab>/original.toml``,
:mod:`labkit.original`) and its exercises (``labs/<lab>/exercises.toml``):
``original_table``, ``original_tables``, ``original_vs_here``, ``exercises``.

Text that comes from a result or a tool's output is escaped (:func:`render.esc`, code
blocks); a host whose CPU is emulated (QEMU TCG) carries a badge in every tab and table.
"""

from __future__ import annotations

import html
import posixpath
import re

from . import charts, commands, render, stale
from . import claims as claims_mod
from . import original as original_mod
from . import results as results_mod
from .results import ROOT


class MacroError(ValueError):
    """A macro was called with arguments that match nothing."""


_HOSTS_CACHE: list | None = None


def _hosts():
    """All hosts with results, loaded and validated once per build (define_env resets it)."""
    global _HOSTS_CACHE
    if _HOSTS_CACHE is None:
        _HOSTS_CACHE = results_mod.load_hosts(ROOT)
    return _HOSTS_CACHE


def _skip_note(result: dict, group: str | None) -> str:
    """Why a host has no data for ``group``: its skipped/failed steps, else that it did not run."""
    steps = [s for s in result["steps"] if group is None or s["group"] == group]
    bad = [s for s in steps if s["status"] != "ok"]
    if bad:
        body = "\n".join(f"- {render.code_span(s['name'])} {s['status']}" + (
            f": {render.esc(commands.display_text(s['reason'], result))}" if s["reason"] else
            " (the result records no reason; the run's log may say)") for s in bad)
    elif group and not steps:
        body = f"The {render.code_span(group)} steps did not run in this run (`--only` or an older lab)."
    else:
        body = "No measurement of this kind in this run."
    return render.admonition("warning", "Not measured on this host", body)


def _rel(page, target: str) -> str:
    """URL of site path ``target`` relative to the rendered page (for raw HTML attributes)."""
    base = page.url if page is not None else ""
    base_dir = base if base.endswith("/") or base == "" else posixpath.dirname(base) + "/"
    return posixpath.relpath(target, base_dir or ".")


def _rel_src(page, target: str) -> str:
    """Path of site file ``target`` relative to the page's Markdown source (for Markdown links,
    which mkdocs resolves and checks against the site's files)."""
    src_dir = posixpath.dirname(page.file.src_uri) if page is not None else ""
    return posixpath.relpath(target, src_dir or ".")


def _need_lab(lab: str):
    hosts = _hosts()
    return results_mod.for_lab(lab, hosts)


def _tab(host, result: dict, body: str) -> tuple[str, str]:
    """(tab title, body) for one host, the body led by the emulated-CPU badge when it applies."""
    badge = render.emulation_badge(result["host"])
    return host.title, (f"{badge}\n\n{body}" if badge else body)


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
    tabs, found = [], 0
    for host, result in _need_lab(lab):
        ms = render.select(result, metric, where)
        if ms:
            found += 1
            header, rows = render.measurement_table(ms, render.case_keys(ms, where, columns), page=True)
            tabs.append(_tab(host, result, render.markdown_table(header, rows)))
        else:
            tabs.append(_tab(host, result, _skip_note(result, group)))
    if not found and not (optional and _group_ran(lab, group)):
        raise MacroError(f"results_table: no host has {metric!r} measurements in lab {lab!r} where {where}")
    return render.tabs(tabs)


def metrics_table(lab: str, metrics: list, where: dict | None = None, columns: list | None = None,
                  group: str | None = None, optional: bool = False) -> str:
    """Markdown: per host, one table of several metrics side by side, a row per case
    (:func:`labkit.render.metrics_table`: medians, units in the headers, samples).

    ``metrics``: each a metric name, or a dict ``{"metric": name, "where": {...}, "label":
    header}`` (``where`` narrows that column, e.g. ``{"process": "all"}``; ``label`` defaults
    to the metric's name). ``where``, ``columns``, ``group`` and ``optional`` as in
    :func:`results_table`, whose one-metric tables keep min–max.

    Raises:
        MacroError: a bad ``metrics`` item, or a metric no host measured where asked (a typo
            must not pass; with ``optional=True`` a group that ran explains it).
        ValueError: a column with two measurements of one case, or mixed units.
    """
    if not columns:
        raise MacroError("metrics_table: columns= names the case keys of a row")
    specs = []
    for item in metrics:
        spec = {"metric": item} if isinstance(item, str) else dict(item)
        if not isinstance(spec.get("metric"), str) or set(spec) - {"metric", "where", "label"}:
            raise MacroError(f"metrics_table: bad metrics item {item!r}")
        spec["where"] = {**(where or {}), **(spec.get("where") or {})}
        spec.setdefault("label", spec["metric"])
        specs.append(spec)
    tabs, seen = [], set()
    for host, result in _need_lab(lab):
        cols = [(s["label"], render.select(result, s["metric"], s["where"])) for s in specs]
        seen |= {s["label"] for s, (_, ms) in zip(specs, cols) if ms}
        cols = [(label, ms) for label, ms in cols if ms]
        if cols:
            header, rows = render.metrics_table(cols, list(columns))
            tabs.append(_tab(host, result, render.markdown_table(header, rows)))
        else:
            tabs.append(_tab(host, result, _skip_note(result, group)))
    # (no host with data means every column is missing: this check covers it)
    missing = [s["label"] for s in specs if s["label"] not in seen]
    if missing and not (optional and _group_ran(lab, group)):
        raise MacroError(f"metrics_table: no host has {missing} measurements in lab {lab!r} where {where}")
    return render.tabs(tabs)


def _group_ran(lab: str, group: str | None) -> bool:
    """True if some host recorded steps of ``group`` (so an empty table is explained by skips)."""
    if not group:
        raise MacroError("optional=True needs group=, whose skipped steps explain the empty table")
    return any(s["group"] == group for _, r in _need_lab(lab) for s in r["steps"])


def chart(lab: str, metric: str, x: str, series: str | None = None, where: dict | None = None,
          kind: str = "line", logx: bool = False, logy: bool = False, title: str = "",
          group: str | None = None, ylabel: str | None = None, xbytes: bool = False,
          xlabel: str | None = None) -> str:
    """Markdown: per host, an SVG chart (matplotlib, :func:`labkit.charts.chart_svg`) of
    ``metric`` against case key ``x``, titled ``title``, the host named in its legend.

    Each chart is drawn for the light and the dark scheme and written as two files next to
    the page (``fig-<hash>.svg``), shown with ``<img loading="lazy">`` and their size, one
    per scheme (CSS). Raises MacroError if no host has matching measurements, ValueError on
    bad chart arguments.
    """
    page = _macro_env.page if _macro_env is not None else None
    page_dir = _page_dir(page)
    tabs, found = [], 0
    for host, result in _need_lab(lab):
        ms = render.select(result, metric, where)
        if not ms:
            tabs.append(_tab(host, result, _skip_note(result, group)))
            continue
        found += 1
        opts = dict(kind=kind, logx=logx, logy=logy, xbytes=xbytes, title=title, ylabel=ylabel, xlabel=xlabel,
                    host=host.label)
        alt = html.escape(f"{title or metric}: {metric} by {x}" + (f" and {series}" if series else "") + f" on {host.label}")
        imgs = []
        for scheme, dark in (("light", False), ("dark", True)):
            svg = charts.chart_svg(ms, x, series, dark=dark, **opts)
            w, h = charts.svg_size(svg)
            name = charts.store(page_dir, svg)
            imgs.append(f'<img class="pc-chart pc-{scheme}" alt="{alt}" src="{name}" width="{w}" height="{h}" '
                        f'loading="lazy" decoding="async">')
        tabs.append(_tab(host, result, f'<span class="pc-figure">{"".join(imgs)}</span>'))
    if not found:
        raise MacroError(f"chart: no host has {metric!r} measurements in lab {lab!r} where {where}")
    return render.tabs(tabs)


def _page_dir(page) -> str:
    """The site folder of the page being rendered (``cases/lat_tcp/``; ``""`` for the home
    page or outside a build), where its figure files go."""
    if page is None:
        return ""
    url = page.url
    return url if url.endswith("/") or url == "" else posixpath.dirname(url) + "/"


def _artifacts(result: dict, kind: str, case: dict) -> list[dict]:
    return [a for a in result["artifacts"]
            if a["kind"] == kind and all(a["case"].get(k) == v for k, v in case.items())]


def _svg_size(path) -> tuple[float, float]:
    """(width, height) of an SVG's root element, from its attributes (inferno writes both)."""
    head = path.read_text(errors="replace")[:4000]
    m = re.search(r"<svg[^>]*?\swidth=\"([\d.]+)[^\"]*\"[^>]*?\sheight=\"([\d.]+)", head, re.S)
    if not m:
        raise MacroError(f"{path}: no width/height on the SVG root; not an inferno flame graph?")
    return float(m.group(1)), float(m.group(2))


def flamegraph(lab: str, kind: str = "flamegraph", group: str | None = None, **case) -> str:
    """Markdown: per host, the interactive inferno flame graph SVG of the artifact whose
    case matches ``case`` (``<object>`` so its search and zoom scripts run).

    The figure keeps the SVG's own proportions (inferno sets its height from the deepest
    stack), fills the content width, and never shrinks below three quarters of its own width
    (``--pc-w``; inferno's 12 px text stays at 9 px or more): where the column is narrower, on a
    phone and in a 1280 px window's 688 px column alike, it scrolls sideways
    (docs/assets/casebook.css). It loads when it comes near the
    viewport (``data-pc-src``, docs/assets/casebook.js), so a page's weight does not count
    figures a reader never scrolls to; without JavaScript the link under it opens it.

    Raises:
        MacroError: no host has such an artifact, or a host has several.
    """
    page = _macro_env.page if _macro_env is not None else None
    tabs, found = [], 0
    for host, result in _need_lab(lab):
        arts = _artifacts(result, kind, case)
        if len(arts) > 1:
            raise MacroError(f"flamegraph: {len(arts)} {kind} artifacts match {case} on {host.label}; be more specific")
        if not arts:
            tabs.append(_tab(host, result, _skip_note(result, group)))
            continue
        found += 1
        a = arts[0]
        w, h = _svg_size(host.dir / a["path"])
        target = f"results/{host.label}/{a['path']}"
        title = html.escape(a.get("title", kind))
        how = ("click a frame to zoom, Ctrl-F to search" if kind in ("flamegraph", "diff_flamegraph")
               else "a static image") + "; where the column is too narrow for its text, the figure scrolls sideways"
        body = (f'<span class="pc-flamegraph-wrap"><object class="pc-flamegraph" type="image/svg+xml" '
                f'data-pc-src="{_rel(page, target)}" width="{w:g}" height="{h:g}" '
                f'style="aspect-ratio:{w:g}/{h:g};--pc-w:{w:g}px" aria-label="{title}"></object></span>\n\n'
                f'{render.esc(a.get("title", kind))}. [Open it on its own page]({_rel_src(page, target)}) ({how}).')
        tabs.append(_tab(host, result, body))
    if not found:
        raise MacroError(f"flamegraph: no host has a {kind} artifact of lab {lab!r} matching {case}")
    return render.tabs(tabs)


def _side_label(own: dict, other: dict) -> str:
    """What tells one side of a claim from the other: the values of the selector keys that
    differ (``same-cpu``; ``kernel=5.10, dt=plain`` when several differ)."""
    diff = {k: v for k, v in own.items() if other.get(k) != v}
    if len(diff) == 1:
        value = next(iter(diff.values()))
        if isinstance(value, str) and not re.fullmatch(r"[-+.\d]+", value):
            return value
    return ", ".join(f"{k}={render.case_cell(k, v)}" for k, v in diff.items())


def _value(x: float, u: str) -> str:
    """A claim side's value with its unit, bytes in KiB/MiB/GiB (``14.29 µs``, ``512 MiB``);
    a plain ratio or fraction without one."""
    if u in ("ratio", "fraction"):
        return render.fmt(x)
    div, shown = render.display_scale(u, [x])
    return f"{render.fmt(x / div)} {shown}".rstrip()


def _times(x: float) -> str:
    """A ratio as "3.64×", "22.0×", "1.00×" or "1,670×": three significant digits, trailing zeros
    kept (14,819 vs 14,777 IOPS is "1.00×", not "1×", which reads as equal), never in scientific
    notation (which ``:.3g`` gives from 1,000 up)."""
    return f"{x:,.0f}×" if x >= 99.95 else f"{x:#.3g}×"


def _interval_text(e: dict) -> str:
    """An effect's interval as "2.31× (95 % interval 2.10–2.52×)", or the estimate alone with
    the reason when no interval exists."""
    if e.get("estimate") is None:
        return e["method"]
    if e.get("low") is None:
        return f"{_times(e['estimate'])} ({e['method']})"
    if e["low"] == e["high"]:
        return f"{_times(e['estimate'])} (no spread in the samples)"
    return f"{_times(e['estimate'])} ({round(e['level'] * 100)} % interval {e['low']:#.3g}–{_times(e['high'])})"


def _claim_sentence(c: dict, v: dict, result: dict) -> str:
    """The verdict as a sentence, from the verdict's fields (never from its evidence string):
    for a comparison the two sides' values and the effect with its interval and what the claim
    needs ("14.29 µs same-cpu vs 62.48 µs other-core: a ÷ b = 0.229× (95 % interval
    0.21–0.25×), needs < 0.909, n = 22 / 22"); for a trend its first and last points and the
    ratio; otherwise (a step, no data, an emulated CPU) the verdict's reason or evidence. Verdicts
    other than holds and fails end with their reason; flags (drift, two modes) follow."""
    stat = c.get("statistic", "median")
    text = None
    e = v.get("effect")
    if e and c["kind"] in ("compare", "within"):
        a, _ = claims_mod.side(result, c["metric"], c["a"], stat)
        b, _ = claims_mod.side(result, c["metric"], c["b"], stat)
        la, lb = _side_label(c["a"], c["b"]) or "a", _side_label(c["b"], c["a"]) or "b"
        mean = " (means)" if stat == "mean" else ""
        what = "per-repetition ratio" if c.get("paired") else "ratio"
        text = (f"{_value(a.value, a.unit)} {la} vs {_value(b.value, b.unit)} {lb}{mean}: {what} "
                f"{la} ÷ {lb} = {_interval_text(e)}, needs {e['needs']}; n = {e['n_a']} / {e['n_b']}")
    elif e and c["kind"] == "increasing":
        ms = [m for m in claims_mod.select(result, c["metric"], c["where"])
              if isinstance(m["case"].get(c["over"]), (int, float))]
        first = min(ms, key=lambda m: m["case"][c["over"]])
        last = max(ms, key=lambda m: m["case"][c["over"]])
        over = c["over"]
        text = (f"{c['metric']} from {_value(first['median'], first['unit'])} at {over} = "
                f"{render.case_cell(over, first['case'][over])} to {_value(last['median'], last['unit'])} at "
                f"{over} = {render.case_cell(over, last['case'][over])}: last ÷ first = {_interval_text(e)}, "
                f"needs {e['needs']}")
    if text is None:
        text = commands.display_text(v.get("reason") or v["evidence"], result)
        reason = None
    else:
        reason = v.get("reason")
    out = render.esc(text)
    if reason and v["verdict"] not in ("holds", "fails"):
        out += f"; {render.esc(commands.display_text(reason, result))}"
    for flag in v.get("flags", []):
        out += f" ⚠ {render.esc(flag)}"
    if v.get("emulated"):
        out += " " + _EMULATED_BADGE
    return out


_EMULATED_BADGE = '<span class="pc-emulated">emulated CPU</span>'
_ROLE_WORD = {"conclusion": "Original's conclusion", "instrument": "Instrument check", "ours": "Ours"}


def claims(lab: str) -> str:
    """Markdown: per host, each claim of ``labs/<lab>/claims.toml`` with its verdict (holds,
    fails, inconclusive, untested, not applicable: each with its own mark and CSS class) as
    a sentence (:func:`_claim_sentence`), the raw evidence folded under it, and the claim's
    ``source`` shown as "Original: ...".

    Verdicts are evaluated at build time from the result's measurements and today's
    claims.toml (:func:`labkit.claims.evaluate_one`), so a claim added after the run shows
    what the stored data say; where the verdict stored at run time differs, the evidence says so.
    """
    spec = claims_mod.load(ROOT / "labs" / lab / "claims.toml")
    tabs = []
    for host, result in _need_lab(lab):
        stored = {c["id"]: c for c in result["claims"]}
        rows, count = [], {}
        for c in spec:
            v = claims_mod.evaluate_cached(c, result)
            count[v["verdict"]] = count.get(v["verdict"], 0) + 1
            statement = f'<span class="pc-role">{_ROLE_WORD[c["role"]]}</span>: ' + html.escape(c["statement"], quote=False)
            if c.get("source"):
                statement += f'<br><span class="pc-source">Original: {html.escape(c["source"], quote=False)}</span>'
            evidence = render.esc(commands.display_text(v["evidence"], result))
            old = stored.get(c["id"])
            changed = ""
            if old is not None and old["verdict"] != v["verdict"]:
                changed = (f" *(recorded as {render.esc(old['verdict'])} when the lab ran; the claim or the"
                           f" verdict rules changed since)*")
            sentence = _claim_sentence(c, v, result)
            verdict = f"{render.VERDICT_MARK[v['verdict']]}: {sentence}{changed}"
            if sentence != evidence:  # a step's or a skip's evidence is its sentence: no fold
                verdict += f'<details class="pc-evidence"><summary>evidence</summary>{evidence}</details>'

            rows.append([statement, verdict])
        summary = ", ".join(f"{count[k]} {k}" for k in claims_mod.VERDICTS if k in count)
        tabs.append(_tab(host, result, f"{len(spec)} claims: {summary}.\n\n"
                         + render.markdown_table(["Claim", "Here"], rows, align=None)))
    return render.tabs(tabs)


def _verdict_cell(c: dict, v: dict) -> str:
    """One verdict, short: its mark, then the effect with its interval and what the claim needs
    (``2.09× (95 % interval 1.51–2.16×), needs > 1.5``), or the reason it is not decided."""
    e = v.get("effect")
    text = render.VERDICT_MARK[v["verdict"]]
    if e and e.get("estimate") is not None:
        text += f": {render.esc(_interval_text(e))}, needs {render.esc(e['needs'])}"
    if v["verdict"] not in ("holds", "fails") and v.get("reason") and not (e and v["reason"].startswith("the 95%")):
        text += f"; {render.esc(v['reason'])}"
    if v.get("flags"):
        text += " ⚠ " + render.esc("; ".join(v["flags"]))
    if v.get("emulated"):
        text += " " + _EMULATED_BADGE
    return text


def cases_table() -> str:
    """Markdown: the home page's table of cases, one row per lab manifest (``labs/<lab>/lab.toml``,
    in its ``order``): the chapter's link, the problem, what the reader practises.

    Raises:
        ManifestError: a malformed lab.toml.
    """
    from . import manifest
    rows = [[f"[{html.escape(m['title'], quote=False)}](cases/{m['name']}.md)", html.escape(m["problem"], quote=False),
             m["practise"]] for m in manifest.labs(ROOT)]
    return render.markdown_table(["chapter", "the problem", "what you practise"], rows, align=None)


def verdicts(lab: str) -> str:
    """Markdown: the original's conclusions and how each fares on every host: one row per
    ``[[conclusion]]`` of ``labs/<lab>/original.toml`` (in its order) and per claim testing it
    (role ``conclusion``), one column per host with the verdict and its effect and interval
    (:func:`_verdict_cell`), evaluated at build time from today's claims.toml; then the
    conclusions no host of ours can test, each with its reason. Instrument checks and our own
    claims are not in this table (:func:`claims` lists every claim).

    Raises:
        ClaimError, OriginalError: a malformed claims.toml or original.toml.
        MacroError: a conclusion claim naming a conclusion original.toml does not have.
    """
    spec = [c for c in claims_mod.load(ROOT / "labs" / lab / "claims.toml") if c["role"] == "conclusion"]
    orig = _original(lab)
    ids = {c["id"] for c in orig["conclusion"]}
    for c in spec:
        if c["conclusion"] not in ids:
            raise MacroError(f"verdicts: claim {c['id']} of {lab} names conclusion {c['conclusion']!r}, "
                             f"which labs/{lab}/original.toml does not have")
    pairs = list(_need_lab(lab))
    header = ["The original concluded", "Claim"] + [render.host_label(r["host"], h.title) for h, r in pairs]
    rows, untestable = [], []
    for con in orig["conclusion"]:
        tested = [c for c in spec if c["conclusion"] == con["id"]]
        if not tested:
            untestable.append(f"- {html.escape(con['text'], quote=False)} *Not tested here: "
                              f"{html.escape(con.get('untestable', 'no claim yet'), quote=False)}*")
            continue
        for k, c in enumerate(tested):
            cells = [_verdict_cell(c, claims_mod.evaluate_cached(c, r)) for _, r in pairs]
            rows.append([html.escape(con["text"], quote=False) if k == 0 else "″",
                         html.escape(c["statement"], quote=False)] + cells)
    out = stacked_table(header, rows)
    if untestable:
        out += "\n\nConclusions of the original that no host of ours can test:\n\n" + "\n".join(untestable) + "\n"
    return out


def _virtualization(h: dict) -> str:
    """A host's virtualization as probed (systemd-detect-virt: "kvm", "none"...), and, for an
    emulated CPU, that it is emulated: inside a QEMU TCG guest the probe sees no hypervisor and
    says "none", which alone would read as bare metal."""
    seen = h.get("virtualization") or "–"
    emu = h.get("emulation")
    if emu and emu.get("accelerator") == "tcg":
        return f"emulated CPU (QEMU TCG); seen from inside: {seen}"
    return seen


def _host_rows(h: dict) -> list[list[str]]:
    """(field, value) rows of a probed host, every value escaped (it comes from the host)."""
    def cap(c):  # noqa: E306
        return ("yes" if c["available"] else "no") + f" ({c['reason']})"
    mem = f"{h['memory_bytes'] / 2**30:.1f} GiB" if h.get("memory_bytes") else "–"
    rows = [
        ["arch", h["arch"]], ["CPU", f"{h.get('cpu_vendor') or '?'} {h.get('cpu_model') or '?'}"],
        ["CPUs / cores / sockets", f"{h['cpus']} / {h['cores']} / {h.get('sockets')}"],
        ["SMT", f"{'yes' if h['smt'] else 'no'} ({h['threads_per_core']} thread{'s' if h['threads_per_core'] != 1 else ''} per core)"],
        ["kernel", h["kernel"]], ["distro", h.get("distro") or "–"],
        ["virtualization", _virtualization(h)], ["memory", mem],
        ["scratch filesystem", h.get("scratch_fs") or "–"],
        ["perf_event_paranoid", str(h.get("perf_event_paranoid"))],
        ["PMU counters", cap(h["pmu"])], ["tracefs", cap(h["tracefs"])],
        ["loop devices", cap(h["loop_devices"])], ["network namespaces", cap(h["netns"])],
        ["root", "yes" if h["root"] else "no"],
    ]
    emu = h.get("emulation")
    if emu:
        rows.append(["emulation", f"{emu['emulator']}, accelerator {emu['accelerator']}, machine {emu.get('machine') or '?'}, "
                     f"CPU {emu.get('guest_cpu') or '?'} on {emu['host_arch']} ({emu.get('host_cpu') or '?'})"])
    if h.get("audit_ever_enabled") is not None:
        rows.append(["audit enabled on this boot before the run", "yes" if h["audit_ever_enabled"] else "no"])
    return [[k, render.esc(v)] for k, v in rows]


def provenance(lab: str) -> str:
    """Markdown: per host, where and how the numbers were made: host, run, tools; a result
    older than the lab's last change (by commit) is marked stale."""
    tabs = []
    for host, r in _need_lab(lab):
        run = r["run"]
        state, why = stale.staleness(r, ROOT)
        warn = render.admonition("warning", "Stale result", why) + "\n" if state == "stale" else ""
        rows = _host_rows(r["host"]) + [
            ["freshness", f"{state}: {why}"],
            ["run started", run["start"]], ["duration", f"{run['duration_s']:.0f} s"],
            ["mode", "quick" if run["quick"] else "full"], ["command", render.code_span(commands.display_command(run["command"], r))],
            ["git commit", (run["git_commit"] or "–")[:12] + (" (uncommitted changes)" if run.get("git_dirty") else "")],
        ] + [[f"tool: {render.esc(t)}", render.esc(v)] for t, v in r["tools"].items()]
        tabs.append(_tab(host, r, warn + render.markdown_table(["field", host.label], rows)))
    return render.tabs(tabs)


def skips(lab: str) -> str:
    """Markdown: per host, the steps that were skipped or failed, with their reasons."""
    tabs = []
    for host, r in _need_lab(lab):
        bad = [s for s in r["steps"] if s["status"] != "ok"]
        ok = sum(1 for s in r["steps"] if s["status"] == "ok")
        if bad:
            body = render.markdown_table(["step", "status", "reason"],
                                         [[render.code_span(s["name"]), s["status"], render.esc(commands.display_text(s["reason"] or "", r))]
                                          for s in bad])
        else:
            body = "Every step ran."
        tabs.append(_tab(host, r, f"{ok} of {len(r['steps'])} steps ran as designed.\n\n{body}"))
    return render.tabs(tabs)


def hosts_table() -> str:
    """Markdown: every host with results: label, CPU, kernel, labs, when."""
    rows = []
    for h in _hosts():
        any_r = next(iter(h.results.values()))
        hh = any_r["host"]
        labs = ", ".join(f"{lab} ({'quick' if r['run']['quick'] else 'full'}, {r['run']['start'][:10]})"
                         for lab, r in sorted(h.results.items()))
        rows.append([render.host_label(hh, h.title), render.esc(hh["arch"]), render.esc(f"{hh.get('cpu_model')}, {hh['cpus']} CPUs"),
                     render.esc(hh["kernel"]), render.esc(_virtualization(hh)), labs])
    if not rows:
        raise MacroError("hosts_table: no results at all: the guide needs at least one host")
    return render.markdown_table(["host", "arch", "CPU", "kernel", "virtualization", "labs (mode, date)"], rows)


def host_provenance() -> str:
    """Markdown: per host tab, its probe fields (from its newest result)."""
    tabs = []
    for h in _hosts():
        newest = max(h.results.values(), key=lambda r: r["run"]["start"])
        tabs.append(_tab(h, newest, render.markdown_table(["field", h.label], _host_rows(newest["host"]))))
    return render.tabs(tabs)


def compare_table(lab: str, host_a: str, host_b: str) -> str:
    """Markdown: medians of two hosts side by side with the ratio b/a ("ratio to" column)."""
    hosts = _hosts()
    a, b = results_mod.host(host_a, hosts), results_mod.host(host_b, hosts)
    if lab not in a.results or lab not in b.results:
        raise MacroError(f"compare_table: both {host_a} and {host_b} need a {lab} result")
    header, rows = render.compare_rows(a.results[lab], b.results[lab])
    header[2], header[3] = render.host_label(a.results[lab]["host"]), render.host_label(b.results[lab]["host"])
    return render.markdown_table(header, [[render.esc(c) for c in row] for row in rows])


EXCERPT_MAX_LINES = 40  # a whole output longer than this needs lines=, match= or tail=


def _line_ranges(spec: str, total: int) -> list[tuple[int, int]]:
    """``"1-20"``, ``"5"``, ``"30-"``, ``"1-3,10-12"`` → 0-based half-open ranges, clipped
    to ``total`` lines. Raises MacroError on a malformed spec."""
    out = []
    for part in str(spec).split(","):
        m = re.fullmatch(r"\s*(\d+)\s*(?:(-)\s*(\d*)\s*)?", part)
        if not m or int(m.group(1)) < 1 or (m.group(3) and int(m.group(3)) < int(m.group(1))):
            raise MacroError(f"step_output: lines={spec!r}: give ranges of line numbers from 1, e.g. '1-20', '7', '30-' or '1-3,10-12'")
        first = int(m.group(1)) - 1
        last = (int(m.group(3)) if m.group(3) else total) if m.group(2) else first + 1
        out.append((first, min(last, total)))
    return out


def _excerpt(text_lines: list[str], lines, match, before: int, after: int, tail) -> tuple[list[str], str] | None:
    """(excerpt lines with "[...]" marks for what is left out, "lines a–b of n" note), or
    None when the selection picks no line of this output."""
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


def step_output(lab: str, step: str, stream: str = "both", lines=None, match: str | None = None,
                context: int = 0, before: int | None = None, after: int | None = None,
                tail: int | None = None) -> str:
    """Markdown: per host, the command of ``step`` as a reader would type it (machine paths
    replaced, :func:`labkit.commands.display_command`) and an excerpt of its real output
    (``stream``: out, err or both: out then err), with its exit status and which lines are shown.

    Choose the excerpt with one of:

    - ``lines="1-20"`` (also ``"7"``, ``"30-"``, ``"1-3,10-12"``): those lines, numbered from 1;
    - ``match="^ *read"`` (a Python regular expression searched in each line) with
      ``context=N`` lines either side, or ``before=``/``after=``: every matching line;
    - ``tail=N``: the last N lines (``lines=N`` with a number, as older pages wrote it, means
      the same).

    Without any, the whole output is shown if it has at most :data:`EXCERPT_MAX_LINES` lines.
    Left-out lines are marked ``[... k lines not shown ...]``. Paths of the machine that ran
    the lab are replaced in the excerpt too (``$SCRATCH``, paths relative to the checkout).

    Raises:
        MacroError: no host ran the step, its raw output is not kept, the selection is
        malformed or picks no line on any host, more than one way to select is given, or the
        whole output is too long to show without a selection.
    """
    if isinstance(lines, int) and not isinstance(lines, bool):
        lines, tail = None, lines if tail is None else tail
    if sum(x is not None for x in (lines, match, tail)) > 1:
        raise MacroError("step_output: choose one of lines=, match= or tail=")
    if stream not in ("out", "err", "both"):
        raise MacroError(f"step_output: stream={stream!r}: one of out, err, both")
    if match is not None:
        try:
            re.compile(match)
        except re.error as exc:
            raise MacroError(f"step_output: match={match!r} is not a regular expression: {exc}") from None
    b4 = context if before is None else before
    aft = context if after is None else after
    tabs, found, picked = [], 0, 0
    for host, r in _need_lab(lab):
        s = next((x for x in r["steps"] if x["name"] == step), None)
        if s is None or s["status"] == "skipped":
            tabs.append(_tab(host, r, _skip_note(r, s["group"] if s else None) if s else
                             render.admonition("warning", "Not run on this host", f"Step {render.code_span(step)} is not in this run.")))
            continue
        text = ""
        for ext in (("out", "err") if stream == "both" else (stream,)):
            f = host.dir / lab / "raw" / f"{step}.{ext}"
            if not f.exists():
                raise MacroError(f"step_output: {f} is missing")
            text += f.read_text(errors="replace")
        found += 1
        text_lines = commands.display_text(text.rstrip("\n"), r).splitlines()
        if lines is None and match is None and tail is None and len(text_lines) > EXCERPT_MAX_LINES:
            raise MacroError(f"step_output: {step} of {lab} on {host.label} printed {len(text_lines)} lines: "
                             f"choose an excerpt with lines='1-20', match='regex' (with context=) or tail=N")
        got = _excerpt(text_lines, lines, match, b4, aft, tail)
        if got is None:
            what = f"match={match!r}" if match is not None else f"lines={lines!r}"
            tabs.append(_tab(host, r, render.admonition("warning", "Nothing to show on this host",
                                                        f"{render.esc(what)} picks no line of this host's "
                                                        f"{len(text_lines)}-line output.")))
            continue
        picked += 1
        excerpt, shown = got
        status = f"exit status {s['exit_code']}" + (" (expected to fail)" if s.get("expect") == "failure" else "")
        block = render.code_block("$ " + commands.display_command(s["command"], r) + ("\n" + "\n".join(excerpt) if excerpt else ""),
                                  "pcb-step")
        tabs.append(_tab(host, r, f"{block}\n\n{status}, {s['seconds']:.2f} s; {shown_of(shown, stream_name(stream))}."))
    if not found:
        raise MacroError(f"step_output: no host ran step {step!r} of lab {lab!r}")
    if not picked:
        raise MacroError(f"step_output: lines={lines!r} / match={match!r} picks no line of {step!r} on any host")
    return render.tabs(tabs)


def artifact_text(lab: str, kind: str = "log", lang: str = "text", **case) -> str:
    """Markdown: per host, the text artifact (e.g. a trace excerpt a lab's record.py wrote) whose
    case matches ``case``, as a code block (escaped), with the artifact's title under it.

    Raises:
        MacroError: no host has such an artifact, or a host has several.
    """
    tabs, found = [], 0
    for host, result in _need_lab(lab):
        arts = _artifacts(result, kind, case)
        if len(arts) > 1:
            raise MacroError(f"artifact_text: {len(arts)} {kind} artifacts match {case} on {host.label}; be more specific")
        if not arts:
            tabs.append(_tab(host, result, _skip_note(result, None)))
            continue
        found += 1
        text = commands.display_text((host.dir / arts[0]["path"]).read_text(errors="replace").rstrip("\n"), result)
        title = render.esc(arts[0].get("title", ""))
        tabs.append(_tab(host, result, render.code_block(text, lang) + (f"\n\n{title}." if title else "")))
    if not found:
        raise MacroError(f"artifact_text: no host has a {kind} artifact of lab {lab!r} matching {case}")
    return render.tabs(tabs)


def shown_of(shown: str, source: str) -> str:
    """The end of an output's caption: which lines of ``source`` (:func:`stream_name`, or "the
    file") are shown ("lines 2–3 of 10 lines of standard output"), or that it was empty
    ("no standard output", "no output on stdout or stderr", "an empty file")."""
    if shown != "no output":
        return f"{shown} of {source}"
    return {"the file": "an empty file", stream_name("both"): "no output on stdout or stderr"}.get(source, f"no {source}")


def stream_name(stream: str) -> str:
    """``out`` → "standard output", ``err`` → "standard error", ``both`` → "output (stdout, then stderr)"."""
    return {"out": "standard output", "err": "standard error", "both": "output (stdout, then stderr)"}[stream]


def compare_hosts() -> str:
    """Markdown: every pair of hosts side by side, one tab per pair ("B vs A"), one table per
    lab they share: medians, ratio B/A ("ratio to A", as the seeds compare machines), and
    "within noise" where the two min–max ranges overlap. Each lab's table is folded under a
    title that counts its measurements in common and, of those, the differences beyond noise,
    within noise and with too few samples (where one host ran once, "0 beyond noise" alone
    would read as agreement) (a chapter's worth of rows per lab: thousands of rows on one page
    otherwise)."""
    hosts = _hosts()
    tabs = []
    for i, a in enumerate(hosts):
        for b in hosts[i + 1:]:
            shared = sorted(set(a.results) & set(b.results))
            if not shared:
                continue
            parts = []
            for lab in shared:
                header, rows = render.compare_rows(a.results[lab], b.results[lab])
                header[2], header[3] = render.host_label(a.results[lab]["host"]), render.host_label(b.results[lab]["host"])
                header[4] = f"ratio to {render.esc(a.label)}"
                marks = [row[5] for row in rows]
                title = (f"{lab}: {len(rows)} measurements in common, {marks.count('yes')} beyond noise, "
                         f"{marks.count('within noise')} within noise, {marks.count('too few samples')} with too few samples")
                parts.append(render.admonition("note", title, render.markdown_table(
                    header, [[render.esc(c) for c in row] for row in rows]), folded=True))
            badges = [render.emulation_badge(next(iter(h.results.values()))["host"]) for h in (b, a)]
            parts[:0] = [f"{render.esc(h.label)}: {badge}" for h, badge in zip((b, a), badges) if badge]
            tabs.append((f"{b.label} vs {a.label}", "\n\n".join(parts)))
    if not tabs:
        return render.admonition("info", "One host so far", "Comparisons need results from at least two hosts "
                                 "with a lab in common. Run `make labs` to add this machine.")
    return render.tabs(tabs)


CAST_FONTS = "ui-monospace, 'DejaVu Sans Mono', 'Liberation Mono', Menlo, Consolas, monospace"
CAST_IDLE_LIMIT = 1.0  # seconds: a recording's pauses (a step at work) play back at most this long


def cast(lab: str, title: str | None = None, rows: int | None = None, cols: int | None = None) -> str:
    """Markdown: per host with a recording, an asciinema player of the lab's run (artifact
    kind ``cast``, recorded headless by ``asciinema rec``), played from this site.

    The player (docs/assets/casebook.js) uses the recording's own terminal size unless
    ``rows``/``cols`` are given, a monospace font stack (:data:`CAST_FONTS`), pauses cut to
    :data:`CAST_IDLE_LIMIT` s, and the recording's last screen as its poster. The player's
    script is only on pages that have a recording (``labkit/mkdocs_hooks.py``).

    Raises:
        MacroError: no host has a cast for ``lab``, or a cast is not asciicast v2.
    """
    import json as _json
    page = _macro_env.page if _macro_env is not None else None
    out, found = [], 0
    for host, r in _need_lab(lab):
        arts = _artifacts(r, "cast", {})
        if not arts:
            continue
        a = arts[0]
        path = host.dir / a["path"]
        try:
            lines = path.read_text().splitlines()
            header = _json.loads(lines[0])
            last = _json.loads(lines[-1])[0] if len(lines) > 1 else 0.0
        except (OSError, IndexError, ValueError, KeyError, TypeError) as exc:
            raise MacroError(f"cast: {path} is not an asciicast file: {exc}") from None
        if header.get("version") != 2:
            raise MacroError(f"cast: {path} is asciicast version {header.get('version')}, expected 2")
        found += 1
        src = _rel(page, f"results/{host.label}/{a['path']}")
        name = title or f"{lab} on {host.label}"
        conf = {"cols": cols or header.get("width", 80), "rows": rows or header.get("height", 24),
                "idleTimeLimit": CAST_IDLE_LIMIT, "poster": f"npt:{float(last):.1f}", "fit": "width",
                "terminalFontFamily": CAST_FONTS}
        badge = render.emulation_badge(r["host"])
        out.append(f"**{host.title}**{' ' + badge if badge else ''}\n\n"
                   f'<figure class="pc-cast-figure"><div class="pc-cast" role="region" '
                   f'aria-label="Terminal recording: {html.escape(name)}" data-pc-cast="{html.escape(src)}" '
                   f"data-pc-options='{html.escape(_json.dumps(conf), quote=True)}'></div>"
                   f"<figcaption>{html.escape(name)}: the run as its terminal showed it, pauses shortened to "
                   f'{CAST_IDLE_LIMIT:g} s. <a href="{html.escape(src)}">The recording</a> (asciicast v2, '
                   f"plays in <code>asciinema play</code>).</figcaption></figure>\n")
    if not found:
        raise MacroError(f"cast: no host has a recording of lab {lab!r}")
    return "\n".join(out)


def _original(lab: str) -> dict:
    """labs/<lab>/original.toml, loaded and checked (OriginalError names the problem)."""
    return original_mod.load(ROOT / "labs" / lab / "original.toml")


def _original_table_md(orig: dict, t: dict) -> str:
    """One original table: caption (machine, kernel), title, the cells as published, note."""
    head = f"**{html.escape(original_mod.caption(orig, t), quote=False)}.** {html.escape(t['title'], quote=False)}"
    table = render.markdown_table([html.escape(c, quote=False) for c in t["columns"]],
                                  [[html.escape(c, quote=False) for c in row] for row in t["rows"]])
    note = f'\n\n<p class="pc-original-note">{html.escape(t["note"], quote=False)}</p>' if t.get("note") else ""
    return f'<div class="pc-original" markdown>\n\n{head}\n\n{table}{note}\n\n</div>\n'


def original_table(lab: str, table: str) -> str:
    """Markdown: the original investigation's table ``table`` of ``labs/<lab>/original.toml``,
    captioned "Original: <machine>, kernel <k>", cells exactly as published, with its note.

    Raises:
        OriginalError: a bad original.toml, or no table with that id.
    """
    orig = _original(lab)
    return _original_table_md(orig, original_mod.table(orig, table, f"labs/{lab}/original.toml"))


def original_tables(lab: str) -> str:
    """Markdown: every table of ``labs/<lab>/original.toml``, in the file's order."""
    orig = _original(lab)
    return "\n".join(_original_table_md(orig, t) for t in orig["table"])


def _here_ratio(result: dict, here: dict) -> str:
    """Our ratio a ÷ b for one host (medians, or means) with its bootstrap interval
    (:func:`labkit.claims.ratio_interval`), marked when measured on an emulated CPU."""
    stat = here.get("statistic", "median")
    a, why_a = claims_mod.side(result, here["metric"], here["a"], stat)
    b, why_b = claims_mod.side(result, here["metric"], here["b"], stat)
    if a is None or b is None:
        return "– (" + render.esc("; ".join(w for w in (why_a, why_b) if w)) + ")"
    if not b.value:
        return f"– ({render.esc(b.label)}: {stat} is 0)"
    badge = f" {_EMULATED_BADGE}" if claims_mod.emulated(result) or a.emulated or b.emulated else ""
    if min(a.n, b.n) < claims_mod.MIN_SAMPLES:
        return f"{a.value / b.value:.3g} (too few samples: n={a.n} ÷ n={b.n}){badge}"
    e = claims_mod.ratio_interval(a, b)
    if e["low"] is None or e["low"] != e["low"]:
        return f"{a.value / b.value:.3g}{badge}"
    return f"{e['estimate']:.3g} ({e['low']:.3g}–{e['high']:.3g}){badge}"


def stacked_table(header: list[str], rows: list[list[str]]) -> str:
    """An HTML table (md_in_html: cells are Markdown inline text, like
    :func:`labkit.render.markdown_table`'s) that is a table on a wide screen and a card per row
    on a phone (docs/assets/casebook.css,
    ``.pc-stack``): the first cell is the card's title, each other cell is preceded by its
    column's header, which a wide screen does not show (``.pc-stack-label``, hidden from screen
    readers, which announce the header cells; explicit ARIA roles keep the table's semantics
    when CSS changes its display). For tables of long text cells in many columns, where a
    phone would squeeze every column into a tall strip. Cells keep their markup (an emulation
    badge in a header goes with every cell of its column)."""
    def cell(s):
        return str(s).replace("\n", " ")
    out = ['<div class="pc-stack" markdown>', '<table role="table" markdown="1">',
           '<thead role="rowgroup" markdown="1">', '<tr role="row" markdown="1">']
    out += [f'<th role="columnheader" markdown="span">{cell(h)}</th>' for h in header]
    out += ["</tr>", "</thead>", '<tbody role="rowgroup" markdown="1">']
    for r in rows:
        tds = [f'<td role="cell" markdown="span">{cell(r[0])}</td>'] if r else []
        tds += [f'<td role="cell" markdown="span"><span class="pc-stack-label" aria-hidden="true">{cell(h)}</span> '
                f'{cell(c)}</td>' for h, c in zip(header[1:], r[1:])]
        out.append('<tr role="row" markdown="1">' + "".join(tds) + "</tr>")
    out += ["</tbody>", "</table>", "</div>"]
    return "\n".join(out) + "\n"


def original_vs_here(lab: str) -> str:
    """Markdown: one row per ``[[ratio]]`` of ``labs/<lab>/original.toml``: the quantity, the
    original's ratio (its two cells, machine and kernel), our ratio a ÷ b of medians on
    every host with a result (emulated hosts badged; "within noise" where the two sides'
    ranges overlap, "too few samples" under 3), and the one-line reading.

    Raises:
        OriginalError: a bad original.toml; MacroError: it has no [[ratio]];
        NoResult: no host has a result of ``lab``.
    """
    orig = _original(lab)
    if not orig["ratio"]:
        raise MacroError(f"original_vs_here: labs/{lab}/original.toml has no [[ratio]] entries")
    pairs = _need_lab(lab)
    header = ["Quantity", "Original"] + [render.host_label(r["host"], h.title) for h, r in pairs] + ["Reading"]
    rows = []
    for q in orig["ratio"]:
        value, ta, tb = original_mod.original_ratio(orig, q)
        t = original_mod.table(orig, q["original"]["table"])
        where = "; ".join(f"{m['name']}, kernel {k}" for m, k in original_mod.table_machines(orig, t))
        cell = html.escape(f"{value:.3g} ({ta} ÷ {tb}; {where})", quote=False)
        rows.append([html.escape(q["quantity"], quote=False), cell] + [_here_ratio(r, q["here"]) for _, r in pairs]
                    + [html.escape(q["reading"], quote=False)])
    return stacked_table(header, rows)


def _describe_check(check: dict) -> str:
    """A check (a claim body) as a sentence for a reader, e.g. "the median round_trip with
    pin=same-cpu is below 1/1.5 of the one with pin=other-core"."""
    stat = check.get("statistic", "median")
    sel = lambda w: "with " + ", ".join(f"{k}={v}" for k, v in w.items()) if w else "over all cases"  # noqa: E731
    kind, f = check["kind"], check.get("factor", 1)
    if kind == "step":
        return f"step {check['step']} does what it was designed to do"
    metric = check["metric"]
    if kind == "increasing":
        return f"the {stat} {metric} {sel(check['where'])} grows with {check['over']}"
    a, b = sel(check["a"]), sel(check["b"])
    if kind == "within":
        return f"the {stat} {metric} {a} and the one {b} agree within a factor of {f:g}"
    times = f"{f:g} times " if f != 1 else ""
    if check["relation"] == "less":
        return f"{times}the {stat} {metric} {a} is below the one {b}"
    if check["relation"] == "greater":
        return f"the {stat} {metric} {a} is above {times}the one {b}"
    return f"{times}the {stat} {metric} {a} is at least the one {b}"


def exercises(lab: str) -> str:
    """Markdown: the exercises of ``labs/<lab>/exercises.toml``: for each, what to change,
    the prediction to make (folded, so the reader predicts first), and how to check a run
    with ``labkit check <lab>``.

    Raises:
        ClaimError: a missing or bad exercises.toml.
    """
    exs = claims_mod.load_exercises(ROOT / "labs" / lab / "exercises.toml")
    out = []
    for i, ex in enumerate(exs, 1):
        body = (f"**Change.** {html.escape(ex['change'], quote=False)}\n\n"
                f"**Predict** the direction before you run it, then open ours:\n\n"
                + render.admonition("question", "Our prediction", html.escape(ex["predict"], quote=False), folded=True)
                + f"\n**Check it:** `labkit check {lab}` reads your result (local-results/*/{lab}.json) and"
                f" tests: {render.esc(_describe_check(ex['check']))}.")
        out.append(render.admonition("example", f"Exercise {i}: {ex['title']}", body))
    return "\n".join(out)


_macro_env = None


def define_env(env):
    """mkdocs-macros entry point: register the macros."""
    global _macro_env, _HOSTS_CACHE
    _macro_env = env
    _HOSTS_CACHE = None  # a new build (or a rebuild under mkdocs serve) reads the results again
    for fn in (results_table, metrics_table, chart, flamegraph, claims, verdicts, cases_table, provenance, skips, hosts_table,
               host_provenance, compare_table, step_output, compare_hosts, cast,
               original_table, original_tables, original_vs_here, exercises, artifact_text):
        env.macro(fn)
    for fn in ONBOARDING_MACROS:  # defined below: the tool cards and the learning path
        env.macro(fn)
    from . import evidence as evidence_mod  # it builds on this module's macros
    env.macro(evidence_mod.evidence)
    env.macro(evidence_mod.evidence_link)
    from . import lesson
    env.macro(lesson.lesson_start)


# --- Tool cards and the learning path (docs/tools/, docs/index.md) ---------------------------

ANNOTATE_LANG = "pkgconfig"
"""Pygments lexer for annotated outputs. mkdocs-material turns ``(n)`` markers into code
annotations only inside comment tokens (``.c``, ``.c1``, ``.cm``), and a plain-text block has
none. The pkg-config lexer treats ``#`` to the end of a line as a comment and leaves almost every
other output line as plain text, so a marker line ``# (n)!`` becomes an annotation without
colouring the tool's output as if it were code."""

_HAS_COUNTED_PAREN = re.compile(r"#.*\(\d+\)")


def _annotated_block(prompt: str | None, excerpt: list[str], notes: list, used: set) -> str:
    """A code block of ``excerpt`` (after ``$ prompt``) with each note's marker on a line of its
    own under the first line its pattern matches (indented like it: on a narrow screen a marker at
    the end of a long line would be out of sight; several notes may mark one line), followed by the
    annotation list. The output's own lines are never changed. Notes that match no line here are
    left out and the rest numbered from 1 in the order of the lines. If a shown line has a ``#`` comment holding ``(digits)``,
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


def annotated_output(lab: str, step: str | None = None, notes: list | None = None, file: str | None = None,
                     stream: str = "both", lines=None, match: str | None = None, context: int = 0,
                     before: int | None = None, after: int | None = None, tail: int | None = None) -> str:
    """Markdown: per host, a real output with mkdocs-material code annotations that explain it
    line by line.

    The output is either a step's (``step``, ``stream`` as for :func:`step_output`, its command
    shown as a reader would type it) or a file the lab kept in its result folder (``file``,
    relative to ``<host>/<lab>/``, e.g. ``"raw/x.iostat.out"``; its command is read from the
    sibling ``.cmd`` file when the lab kept one). The excerpt is chosen as for
    :func:`step_output` (``lines=``, ``match=`` with ``context``/``before``/``after``, ``tail=``).
    ``notes`` is a list of ``[pattern, markdown]``: each note's marker goes on the first shown
    line the regular expression matches (on each host, so the notes follow that host's output),
    and the note text is the annotation. Machine paths are replaced as in :func:`step_output`.

    Raises:
        MacroError: neither or both of ``step`` and ``file``, a bad selection or pattern, no host
        ran the step or kept the file, the selection picks no line anywhere, or a note's pattern
        matches no shown line on any host (a typo must not pass).
    """
    notes = [list(x) for x in (notes or [])]
    if (step is None) == (file is None):
        raise MacroError("annotated_output: give step= or file=, not both")
    if any(len(x) != 2 or not all(isinstance(y, str) for y in x) for x in notes):
        raise MacroError("annotated_output: notes= is a list of [pattern, text] pairs")
    for pattern, _ in notes:
        try:
            re.compile(pattern)
        except re.error as exc:
            raise MacroError(f"annotated_output: note pattern {pattern!r}: {exc}") from None
    if isinstance(lines, int) and not isinstance(lines, bool):
        lines, tail = None, lines if tail is None else tail
    if sum(x is not None for x in (lines, match, tail)) > 1:
        raise MacroError("annotated_output: choose one of lines=, match= or tail=")
    if stream not in ("out", "err", "both"):
        raise MacroError(f"annotated_output: stream={stream!r}: one of out, err, both")
    if match is not None:
        try:
            re.compile(match)
        except re.error as exc:
            raise MacroError(f"annotated_output: match={match!r} is not a regular expression: {exc}") from None
    b4 = context if before is None else before
    aft = context if after is None else after
    what = step or file
    tabs, found, picked, used = [], 0, 0, set()
    for host, r in _need_lab(lab):
        if step is not None:
            s = next((x for x in r["steps"] if x["name"] == step), None)
            if s is None or s["status"] == "skipped":
                tabs.append(_tab(host, r, _skip_note(r, s["group"]) if s else render.admonition(
                    "warning", "Not run on this host", f"Step {render.code_span(step)} is not in this run.")))
                continue
            text = ""
            for ext in (("out", "err") if stream == "both" else (stream,)):
                f = host.dir / lab / "raw" / f"{step}.{ext}"
                if not f.exists():
                    raise MacroError(f"annotated_output: {f} is missing")
                text += f.read_text(errors="replace")
            prompt = commands.display_command(s["command"], r)
            status = (f"exit status {s['exit_code']}" + (" (expected to fail)" if s.get("expect") == "failure" else "")
                      + f", {s['seconds']:.2f} s")
            source = stream_name(stream)
        else:
            f = host.dir / lab / file
            if not f.is_file():
                tabs.append(_tab(host, r, render.admonition("warning", "Not kept on this host",
                                                            f"This run of {render.code_span(lab)} kept no {render.code_span(file)}.")))
                continue
            text = f.read_text(errors="replace")
            cmd = f.with_name(f.name.rsplit(".", 1)[0] + ".cmd")  # x.iostat.out -> x.iostat.cmd
            prompt = commands.display_command(cmd.read_text().strip(), r) if cmd.is_file() else None
            status = f"the file {render.code_span(file)} of this run"
            source = "the file"
        found += 1
        text_lines = commands.display_text(text.rstrip("\n"), r).splitlines()
        if lines is None and match is None and tail is None and len(text_lines) > EXCERPT_MAX_LINES:
            raise MacroError(f"annotated_output: {what} of {lab} on {host.label} has {len(text_lines)} lines: "
                             f"choose an excerpt with lines='1-20', match='regex' (with context=) or tail=N")
        if file and not text_lines:   # no empty block under notes that describe lines: say it plainly
            picked += 1
            tabs.append(_tab(host, r, render.admonition("warning", "Nothing to show on this host",
                                                        f"On this host {status} is empty.")))
            continue
        got = _excerpt(text_lines, lines, match, b4, aft, tail)
        if got is None:
            tabs.append(_tab(host, r, render.admonition("warning", "Nothing to show on this host",
                                                        f"The selection picks no line of this host's {len(text_lines)}-line output.")))
            continue
        picked += 1
        excerpt, shown = got
        block = _annotated_block(prompt, excerpt, notes, used)
        tabs.append(_tab(host, r, f"{block}\n\n{status}; {shown_of(shown, source)}."))
    if not found:
        raise MacroError(f"annotated_output: no host has {what!r} of lab {lab!r}")
    if not picked:
        raise MacroError(f"annotated_output: the selection picks no line of {what!r} on any host")
    unused = [notes[i][0] for i in range(len(notes)) if i not in used]
    if unused:
        raise MacroError(f"annotated_output: note pattern(s) {unused} match no shown line of {what!r} on any host")
    return render.tabs(tabs)


def tool_exercises(tool: str) -> str:
    """Markdown: a tool card's exercises (``labkit/cards/<tool>/<lab>.exercises.toml``,
    :mod:`labkit.cards`), rendered like a chapter's (:func:`exercises`): what to change, the
    prediction folded, how to check it with ``labkit check <tool>``, and, folded, how the check
    came out on each reference host (evaluated now, with the chapters' evaluator).

    Raises:
        MacroError: no exercises for ``tool``; ClaimError: a bad exercises file.
    """
    from . import cards
    try:
        per_lab = cards.load(tool, root=ROOT)
    except KeyError:
        raise MacroError(f"tool_exercises: no exercises for {tool!r} in labkit/cards/ (tools: {cards.tools()})") from None
    out, i = [], 0
    for lab, exs in per_lab:
        pairs = _need_lab(lab)
        for ex in exs:
            i += 1
            claim = claims_mod.exercise_claim(ex)
            rows = []
            for host, r in pairs:  # a list, not a table: the evidence is long and pages are read on phones
                v = claims_mod.evaluate_cached(claim, r)
                rows.append(f"- **{render.host_label(r['host'], host.title)}**: {render.VERDICT_MARK[v['verdict']]}. "
                            f"{render.esc(commands.display_text(v['evidence'], r))}")
            ours = render.admonition("success", f"Checked on the {lab} results of this site",
                                     "\n".join(rows), folded=True)
            page = _macro_env.page if _macro_env is not None else None
            body = (f"**Lab:** [{lab}]({_rel_src(page, f'cases/{lab}.md')}). **Change.** {html.escape(ex['change'], quote=False)}\n\n"
                    f"**Predict** the direction before you run it, then open ours:\n\n"
                    + render.admonition("question", "Our prediction", html.escape(ex["predict"], quote=False), folded=True)
                    + f"\n**Check it:** `labkit check {tool}` reads your result (local-results/*/{lab}.json) and"
                    f" tests: {render.esc(_describe_check(ex['check']))}.\n\n" + ours)
            out.append(render.admonition("example", f"Exercise {i}: {ex['title']}", body))
    return "\n".join(out)


def _duration(seconds: float) -> str:
    """``527.3`` → ``"8 min 47 s"``; under a minute ``"42 s"``."""
    s = int(round(seconds))
    return f"{s // 60} min {s % 60:02d} s" if s >= 60 else f"{s} s"


def lab_time(lab: str) -> str:
    """Inline Markdown (for a table cell): how long ``lab`` ran on each host with a result, from
    the result's ``run.duration_s``, with the mode (quick or full) and the host (emulated hosts
    badged), e.g. ``8 min 47 s (full run, epyc-kvm-2vcpu)``; hosts separated by "; " (a line
    break inside a list item left a lone ")." on a phone).

    Raises:
        NoResult: no host has a result of ``lab``.
    """
    return "; ".join(f"{_duration(r['run']['duration_s'])} ({'quick' if r['run']['quick'] else 'full'} run, "
                       f"{render.host_label(r['host'], host.title)})" for host, r in _need_lab(lab))


ONBOARDING_MACROS = (annotated_output, tool_exercises, lab_time)
