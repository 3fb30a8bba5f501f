"""Evidence pages: ``/evidence/<lab>/``, every measurement of a lab on every host, generated from
the results so that a chapter can stay a short lesson and link to the exact block it summarises.

The page (:func:`page_markdown`, added to the site by ``labkit/site/mkdocs_hooks.py``) is the
generic part (:func:`evidence`: every claim of every role, one table per metric grouped by the
lab's step groups, artifacts, recordings, skipped steps, provenance) followed by the lab's own
``labs/<lab>/evidence.md`` when it has one (annotated outputs and tables that need a lab's
knowledge). Chapters link into it with :func:`evidence_link`, which fails the build on a metric
the lab never measured. Evidence pages are kept out of full-text search: the search plugin skips
them (front matter ``search: exclude``), and :func:`index_titles` adds their titles to its index.
"""

from __future__ import annotations

import json
from pathlib import Path

from .. import manifest, model
from ..view import render
from . import fast_tables, macros

PREFIX = "evidence"
"""Site folder of the evidence pages: ``evidence/<lab>.md`` → ``/evidence/<lab>/``."""


def page_src(lab: str) -> str:
    """Source path of ``lab``'s evidence page inside the docs (``evidence/<lab>.md``)."""
    return f"{PREFIX}/{lab}.md"


def page_title(m: dict) -> str:
    """The title of the evidence page of the lab whose manifest is ``m``."""
    return f"Evidence: {m['title']}"


def page_markdown(lab: str, root: Path) -> str:
    """The Markdown source of ``lab``'s evidence page: front matter (macros on), the generic
    :func:`evidence` block, then ``labs/<lab>/evidence.md`` verbatim when it exists.

    Raises:
        ManifestError: ``labs/<lab>/lab.toml`` is missing or malformed.
    """
    m = manifest.load(root / "labs" / lab)
    extra = root / "labs" / lab / "evidence.md"
    tail = "\n\n" + extra.read_text() if extra.is_file() else ""
    title = page_title(m)
    return (f"---\ntitle: {json.dumps(title)}\nrender_macros: true\nsearch:\n  exclude: true\n---\n\n"
            f"# {render.esc(title)}\n\n"
            f"Every measurement the lab made, on every host, with the claims they decide. The lesson is the "
            f"[chapter](../cases/{lab}.md); this page is its data.\n\n"
            f"{{{{ evidence({lab!r}) }}}}{tail}\n")


def anchor(metric: str) -> str:
    """The heading id of ``metric``'s table on an evidence page (``metric-<metric>``)."""
    return "metric-" + "".join(ch if ch.isalnum() or ch in "-_" else "-" for ch in metric)


def metrics_by_group(lab: str) -> dict[str, list[str]]:
    """``{step group: [metric, ...]}`` over every host's result of ``lab``, in the order the
    steps ran (first host first); a metric belongs to the group of the step that first measured it.

    Raises:
        MacroError: no host has a result of ``lab``.
    """
    seen: dict[str, str] = {}
    for _, r in macros.build.for_lab(lab):
        group_of = {s["name"]: s["group"] for s in r["steps"]}
        for ms in r["measurements"]:
            seen.setdefault(ms["metric"], group_of.get(ms.get("step"), "derived"))
    out: dict[str, list[str]] = {}
    for metric, group in seen.items():
        out.setdefault(group, []).append(metric)
    return out


def _artifact_rows(lab: str) -> list[list[str]]:
    """One row per artifact (flame graph, folded stacks, log) of every host, with a link."""
    page = macros.build.page()
    rows = []
    for host, r in macros.build.for_lab(lab):
        for a in r["artifacts"]:
            if a["kind"] == "cast":
                continue
            case = model.case_text(a.get("case", {})) or "–"
            href = macros.build.rel_src(page, f"results/{host.label}/{a['path']}")
            rows.append([render.esc(host.label), render.esc(a["kind"]), render.esc(case),
                         f"[{render.esc(a.get('title') or Path(a['path']).name)}]({href})"])
    return rows


def evidence(lab: str) -> str:
    """Markdown: the generic body of ``lab``'s evidence page (see the module docstring).

    Sections (their ids are stable link targets): ``claims``, ``measurements`` with one
    ``metric-<metric>`` table per metric (:func:`labkit.site.macros.results_table`), ``artifacts``,
    ``recordings``, ``skipped``, ``provenance``.

    Raises:
        MacroError: no host has a result of ``lab``.
    """
    parts = ["## Every claim {#claims}\n",
             "Every claim the lab checks, of every role: the original's conclusions, the instrument checks "
             "that make a measurement trustworthy, and the guide's own.\n",
             macros.claims(lab),
             "## Measurements {#measurements}\n",
             "One table per metric, a row per case; median, range and sample count per host.\n"]
    for group, metrics in metrics_by_group(lab).items():
        parts.append(f"### Group `{group}`\n")
        for metric in metrics:
            parts.append(f"#### `{metric}` {{#{anchor(metric)}}}\n")
            parts.append(macros.results_table(lab, metric, group=None if group == "derived" else group))
    rows = _artifact_rows(lab)
    parts.append("## Artifacts {#artifacts}\n")
    parts.append(fast_tables.table(["host", "kind", "case", "file"], rows, align=None) if rows
                 else "No host stored artifacts for this lab.\n")
    parts.append("## Recordings {#recordings}\n")
    with_cast = [h.label for h, r in macros.build.for_lab(lab) if macros.build.artifacts(r, "cast", {})]
    without = [h.label for h, r in macros.build.for_lab(lab) if h.label not in with_cast]
    if with_cast:
        parts.append(macros.cast(lab))
    if without:
        parts.append("No terminal recording from " + ", ".join(render.code_span(x) for x in without)
                     + " (the lab ran without `asciinema`).\n")
    parts += ["## Skipped and failed steps {#skipped}\n", macros.skips(lab),
              "## Provenance {#provenance}\n", macros.provenance(lab)]
    return "\n\n".join(parts)


def evidence_link(lab: str, metric: str | None = None, text: str | None = None, section: str | None = None) -> str:
    """Markdown link from the current page to ``lab``'s evidence page, at ``metric``'s table or at
    a ``section`` id (``claims``, ``artifacts``, ``recordings``, ``skipped``, ``provenance``, or a
    heading id of ``labs/<lab>/evidence.md``, written ``## Title {: #id }`` there because ``{#``
    opens a Jinja comment; mkdocs checks the anchor when it validates links).

    Raises:
        MacroError: ``metric`` is not measured by any host's result of ``lab``, or both
            ``metric`` and ``section`` are given.
    """
    if metric and section:
        raise macros.MacroError("evidence_link: give metric= or section=, not both")
    frag = ""
    if metric:
        known = {m for ms in metrics_by_group(lab).values() for m in ms}
        if metric not in known:
            raise macros.MacroError(f"evidence_link: lab {lab!r} has no measurement {metric!r} (known: {sorted(known)})")
        frag = "#" + anchor(metric)
    elif section:
        frag = "#" + section
    page = macros.build.page()
    label = text or (f"all `{metric}` data" if metric else "the evidence page")
    return f"[{label}]({macros.build.rel_src(page, page_src(lab))}{frag})"


def index_titles(site_dir: Path, titles: dict[str, str]) -> int:
    """Add one title-only entry per evidence page to the search plugin's index
    (``search/search_index.json``), which skipped the pages (front matter ``search: exclude``):
    a reader finds an evidence page by its title, and the index every page downloads carries none
    of its data tables (nor does the build spend a quarter of its time parsing them for it).

    ``titles``: ``{location: title}``, e.g. ``{"evidence/lat_tcp/": "Evidence: ..."}``; an entry
    already at a location is replaced.

    Returns:
        The number of entries added (0 without an index: search disabled).
    """
    path = Path(site_dir) / "search" / "search_index.json"
    if not path.is_file():
        return 0
    index = json.loads(path.read_text())
    docs = [d for d in index.get("docs", []) if d.get("location") not in titles]
    index["docs"] = docs + [{"location": loc, "title": t, "text": ""} for loc, t in titles.items()]
    path.write_text(json.dumps(index, separators=(",", ":")))
    return len(titles)
