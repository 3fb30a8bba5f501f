"""mkdocs-macros module: inject lab results into pages (DESIGN.md, "Injection into pages").

Enabled per page (``render_macros: true`` in the front matter; ``render_by_default``
is off), so shell ``{{ }}`` in code blocks elsewhere is never evaluated. Every macro
renders one content tab per host (tabs linked site-wide by host label). A missing
result, an unknown metric or artifact, or a bad argument raises, and
``on_error_fail: true`` turns that into a failed ``mkdocs build --strict``.

Macros: ``results_table``, ``chart``, ``flamegraph``, ``claims``, ``provenance``,
``skips``, ``hosts_table``, ``compare_table``, ``lab_source``.
"""

from __future__ import annotations

import html
import posixpath

from . import charts, render, stale
from . import claims as claims_mod
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
        body = "\n".join(f"- `{s['name']}` {s['status']}: {s['reason']}" for s in bad)
    elif group and not steps:
        body = f"The `{group}` steps did not run in this run (`--only` or an older lab)."
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
            header, rows = render.measurement_table(ms, render.case_keys(ms, where, columns))
            tabs.append((host.title, render.markdown_table(header, rows)))
        else:
            tabs.append((host.title, _skip_note(result, group)))
    if not found and not (optional and _group_ran(lab, group)):
        raise MacroError(f"results_table: no host has {metric!r} measurements in lab {lab!r} where {where}")
    return render.tabs(tabs)


def _group_ran(lab: str, group: str | None) -> bool:
    """True if some host recorded steps of ``group`` (so an empty table is explained by skips)."""
    if not group:
        raise MacroError("optional=True needs group=, whose skipped steps explain the empty table")
    return any(s["group"] == group for _, r in _need_lab(lab) for s in r["steps"])


def chart(lab: str, metric: str, x: str, series: str | None = None, where: dict | None = None,
          kind: str = "line", logx: bool = False, logy: bool = False, title: str = "",
          group: str | None = None, ylabel: str | None = None, xbytes: bool = False) -> str:
    """Markdown: per host, an SVG chart (matplotlib) of ``metric`` against case key ``x``.

    The SVG is embedded as a data URI (no request leaves the page). Raises MacroError
    if no host has matching measurements, ValueError on bad chart arguments.
    """
    tabs, found = [], 0
    for host, result in _need_lab(lab):
        ms = render.select(result, metric, where)
        if not ms:
            tabs.append((host.title, _skip_note(result, group)))
            continue
        found += 1
        svg = charts.chart_svg(ms, x, series, kind=kind, logx=logx, logy=logy, xbytes=xbytes,
                               title=f"{title} ({host.label})" if title else host.label, ylabel=ylabel)
        alt = html.escape(f"{title or metric}: {metric} by {x}" + (f" and {series}" if series else "") + f" on {host.label}")
        tabs.append((host.title, f'<img class="pc-chart" alt="{alt}" src="{charts.data_uri(svg)}">'))
    if not found:
        raise MacroError(f"chart: no host has {metric!r} measurements in lab {lab!r} where {where}")
    return render.tabs(tabs)


def _artifacts(result: dict, kind: str, case: dict) -> list[dict]:
    return [a for a in result["artifacts"]
            if a["kind"] == kind and all(a["case"].get(k) == v for k, v in case.items())]


def _svg_size(path) -> tuple[float, float]:
    """(width, height) of an SVG's root element, from its attributes (inferno writes both)."""
    import re
    head = path.read_text(errors="replace")[:4000]
    m = re.search(r"<svg[^>]*?\swidth=\"([\d.]+)[^\"]*\"[^>]*?\sheight=\"([\d.]+)", head, re.S)
    if not m:
        raise MacroError(f"{path}: no width/height on the SVG root; not an inferno flame graph?")
    return float(m.group(1)), float(m.group(2))


def flamegraph(lab: str, kind: str = "flamegraph", group: str | None = None, **case) -> str:
    """Markdown: per host, the interactive inferno flame graph SVG of the artifact whose
    case matches ``case`` (``<object>`` so its search and zoom scripts run).

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
            tabs.append((host.title, _skip_note(result, group)))
            continue
        found += 1
        a = arts[0]
        w, h = _svg_size(host.dir / a["path"])
        target = f"results/{host.label}/{a['path']}"
        title = html.escape(a.get("title", kind))
        how = ("click a frame to zoom, Ctrl-F to search" if kind in ("flamegraph", "diff_flamegraph")
               else "a static image")
        body = (f'<object class="pc-flamegraph" type="image/svg+xml" data="{_rel(page, target)}" '
                f'style="width:100%;aspect-ratio:{w}/{h}" aria-label="{title}"></object>\n\n'
                f'{a.get("title", kind)}. [Open it on its own page]({_rel_src(page, target)}) ({how}).')
        tabs.append((host.title, body))
    if not found:
        raise MacroError(f"flamegraph: no host has a {kind} artifact of lab {lab!r} matching {case}")
    return render.tabs(tabs)


def claims(lab: str) -> str:
    """Markdown: per host, each claim of ``labs/<lab>/claims.toml`` with its verdict and evidence."""
    spec = {c["id"]: c for c in claims_mod.load(ROOT / "labs" / lab / "claims.toml")}
    tabs = []
    for host, result in _need_lab(lab):
        got = {c["id"]: c for c in result["claims"]}
        rows = []
        for cid, c in spec.items():
            v = got.get(cid)
            statement = c["statement"] + (f"<br>*The original: {c['source']}*" if c.get("source") else "")
            if v is None:
                rows.append([statement, render.VERDICT_MARK["untested"], "this result predates the claim; rerun the lab"])
            else:
                rows.append([statement, render.VERDICT_MARK[v["verdict"]], v["evidence"]])
        tabs.append((host.title, render.markdown_table(["Claim", "Verdict here", "Evidence"], rows)))
    return render.tabs(tabs)


def _host_rows(h: dict) -> list[list[str]]:
    def cap(c):  # noqa: E306
        return ("yes" if c["available"] else "no") + f" ({c['reason']})"
    mem = f"{h['memory_bytes'] / 2**30:.1f} GiB" if h.get("memory_bytes") else "–"
    return [
        ["arch", h["arch"]], ["CPU", f"{h.get('cpu_vendor') or '?'} {h.get('cpu_model') or '?'}"],
        ["CPUs / cores / sockets", f"{h['cpus']} / {h['cores']} / {h.get('sockets')}"],
        ["SMT", f"{h['smt']} ({h['threads_per_core']} thread(s) per core)"],
        ["kernel", h["kernel"]], ["distro", h.get("distro") or "–"],
        ["virtualization", h.get("virtualization") or "–"], ["memory", mem],
        ["scratch filesystem", h.get("scratch_fs") or "–"],
        ["perf_event_paranoid", str(h.get("perf_event_paranoid"))],
        ["PMU counters", cap(h["pmu"])], ["tracefs", cap(h["tracefs"])],
        ["loop devices", cap(h["loop_devices"])], ["network namespaces", cap(h["netns"])],
        ["root", "yes" if h["root"] else "no"],
    ]


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
            ["mode", "quick" if run["quick"] else "full"], ["command", f"`{run['command']}`"],
            ["git commit", (run["git_commit"] or "–")[:12] + (" (uncommitted changes)" if run.get("git_dirty") else "")],
        ] + [[f"tool: {t}", v] for t, v in r["tools"].items()]
        tabs.append((host.title, warn + render.markdown_table(["", host.label], rows)))
    return render.tabs(tabs)


def skips(lab: str) -> str:
    """Markdown: per host, the steps that were skipped or failed, with their reasons."""
    tabs = []
    for host, r in _need_lab(lab):
        bad = [s for s in r["steps"] if s["status"] != "ok"]
        ok = sum(1 for s in r["steps"] if s["status"] == "ok")
        if bad:
            body = render.markdown_table(["step", "status", "reason"], [[f"`{s['name']}`", s["status"], s["reason"] or ""] for s in bad])
        else:
            body = "Every step ran."
        tabs.append((host.title, f"{ok} of {len(r['steps'])} steps ran as designed.\n\n{body}"))
    return render.tabs(tabs)


def hosts_table() -> str:
    """Markdown: every host with results: label, CPU, kernel, labs, when."""
    rows = []
    for h in _hosts():
        any_r = next(iter(h.results.values()))
        hh = any_r["host"]
        labs = ", ".join(f"{lab} ({'quick' if r['run']['quick'] else 'full'}, {r['run']['start'][:10]})"
                         for lab, r in sorted(h.results.items()))
        rows.append([h.title, hh["arch"], f"{hh.get('cpu_model')}, {hh['cpus']} CPUs", hh["kernel"],
                     hh.get("virtualization") or "–", labs])
    if not rows:
        raise MacroError("hosts_table: no results at all: the guide needs at least one host")
    return render.markdown_table(["host", "arch", "CPU", "kernel", "virtualization", "labs (mode, date)"], rows)


def host_provenance() -> str:
    """Markdown: per host tab, its probe fields (from its newest result)."""
    tabs = []
    for h in _hosts():
        newest = max(h.results.values(), key=lambda r: r["run"]["start"])
        tabs.append((h.title, render.markdown_table(["", h.label], _host_rows(newest["host"]))))
    return render.tabs(tabs)


def compare_table(lab: str, host_a: str, host_b: str) -> str:
    """Markdown: medians of two hosts side by side with the ratio b/a ("ratio to" column)."""
    hosts = _hosts()
    a, b = results_mod.host(host_a, hosts), results_mod.host(host_b, hosts)
    if lab not in a.results or lab not in b.results:
        raise MacroError(f"compare_table: both {host_a} and {host_b} need a {lab} result")
    header, rows = render.compare_rows(a.results[lab], b.results[lab])
    return render.markdown_table(header, rows)


def step_output(lab: str, step: str, stream: str = "both", lines: int = 15) -> str:
    """Markdown: per host, the exact command of ``step`` and the last ``lines`` lines of
    its real output (``stream``: out, err or both), with its exit status.

    Raises:
        MacroError: no host ran the step, or its raw output is not kept.
    """
    tabs, found = [], 0
    for host, r in _need_lab(lab):
        s = next((x for x in r["steps"] if x["name"] == step), None)
        if s is None or s["status"] == "skipped":
            tabs.append((host.title, _skip_note(r, s["group"] if s else None) if s else
                         render.admonition("warning", "Not run on this host", f"Step `{step}` is not in this run.")))
            continue
        text = ""
        for ext in (("out", "err") if stream == "both" else (stream,)):
            f = host.dir / lab / "raw" / f"{step}.{ext}"
            if not f.exists():
                raise MacroError(f"step_output: {f} is missing")
            text += f.read_text(errors="replace")
        found += 1
        body_lines = text.rstrip("\n").splitlines()
        if len(body_lines) > lines:
            body_lines = [f"[... {len(body_lines) - lines} earlier lines ...]"] + body_lines[-lines:]
        status = f"exit status {s['exit_code']}" + (" (expected to fail)" if s.get("expect") == "failure" else "")
        body = "```console\n$ " + (s["command"] or "") + "\n" + "\n".join(body_lines) + "\n```\n\n" + status + f", {s['seconds']:.2f} s."
        tabs.append((host.title, body))
    if not found:
        raise MacroError(f"step_output: no host ran step {step!r} of lab {lab!r}")
    return render.tabs(tabs)


def compare_hosts() -> str:
    """Markdown: every pair of hosts side by side, one tab per pair ("B vs A"), one table per
    lab they share: medians, ratio B/A ("ratio to A", as the seeds compare machines), and
    "within noise" where the two min–max ranges overlap."""
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
                header[4] = f"ratio to {a.label}"
                parts.append(f"**{lab}** ({len(rows)} measurements in common)\n\n" + render.markdown_table(header, rows))
            tabs.append((f"{b.label} vs {a.label}", "\n\n".join(parts)))
    if not tabs:
        return render.admonition("info", "One host so far", "Comparisons need results from at least two hosts "
                                 "with a lab in common. Run `make labs` to add this machine.")
    return render.tabs(tabs)


def cast(lab: str, title: str | None = None, rows: int = 30, cols: int = 110) -> str:
    """Markdown: per host with a recording, an asciinema player of the lab's run (artifact
    kind ``cast``, recorded headless by ``asciinema rec``), played from this site.

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
            header = _json.loads(path.read_text().splitlines()[0])
        except (OSError, IndexError, ValueError) as exc:
            raise MacroError(f"cast: {path} is not an asciicast file: {exc}") from None
        if header.get("version") != 2:
            raise MacroError(f"cast: {path} is asciicast version {header.get('version')}, expected 2")
        found += 1
        conf = {"file": _rel(page, f"results/{host.label}/{a['path']}"), "title": title or f"{lab} on {host.label}",
                "rows": rows, "cols": cols, "preload": True}
        out.append(f"**{host.title}**\n\n```asciinema-player\n{_json.dumps(conf)}\n```\n")
    if not found:
        raise MacroError(f"cast: no host has a recording of lab {lab!r}")
    return "\n".join(out)


_macro_env = None


def define_env(env):
    """mkdocs-macros entry point: register the macros."""
    global _macro_env, _HOSTS_CACHE
    _macro_env = env
    _HOSTS_CACHE = None  # a new build (or a rebuild under mkdocs serve) reads the results again
    for fn in (results_table, chart, flamegraph, claims, provenance, skips, hosts_table,
               host_provenance, compare_table, step_output, compare_hosts, cast):
        env.macro(fn)
