"""mkdocs-macros module: inject lab results into pages (DESIGN.md, "Chapters and evidence pages").

Enabled per page (``render_macros: true`` in the front matter; ``render_by_default``
is off), so shell ``{{ }}`` in code blocks elsewhere is never evaluated. Every data macro
renders one content tab per host (tabs linked site-wide by host label). A missing
result, an unknown metric or artifact, or a bad argument raises, and
``on_error_fail: true`` turns that into a failed ``mkdocs build --strict``.

The macros, by module:

- :mod:`.tables`: ``results_table``, ``metrics_table``, ``compare_table``, ``compare_hosts``,
  ``cases_table``;
- :mod:`.figures`: ``chart``, ``flamegraph``, ``cast``;
- :mod:`.outputs`: ``step_output``, ``annotated_output``, ``artifact_text`` (lines chosen by
  :mod:`.excerpts`);
- :mod:`.claim_tables`: ``claims``, ``verdicts``, ``verdict_brief``;
- :mod:`.original`, the original investigation (``labs/<lab>/original.toml``,
  :mod:`labkit.original`): ``original_table``, ``original_tables``, ``original_vs_here``;
- :mod:`.practice`, exercises (``labs/<lab>/exercises.toml``, the tool cards'):
  ``exercises``, ``tool_exercises``;
- :mod:`.runs`: ``provenance``, ``skips``, ``hosts_table``, ``host_provenance``, ``lab_time``;
- :mod:`labkit.site.evidence` and :mod:`labkit.site.lesson`, built on these: ``evidence``,
  ``evidence_link``, ``lesson_start``.

:mod:`.build` holds the build's state (``ROOT``, the hosts loaded once per build, the page
being rendered) and the per-host loop; :mod:`.templates` renders the HTML
(``templates/*.html``, escaped by Jinja). Text that comes from a result or a tool's output is
escaped (:func:`labkit.view.render.esc`, code blocks, the templates); a host whose CPU is emulated
(QEMU TCG) carries a badge in every tab and table.

The macros are importable as ``labkit.site.macros.<name>``; every other name lives in its
module (``labkit.site.macros.build.ROOT``, ``...claim_tables.claim_sentence``). :mod:`.build`
holds the build's state: set ``build.ROOT`` to read another checkout, and ``build.hosts_cache``
to None to load its hosts again.
"""

from __future__ import annotations

from . import build, claim_tables, excerpts, figures, original, outputs, practice, runs, tables  # noqa: F401
from .claim_tables import claims, prose_reads, verdict_brief, verdicts
from .figures import cast, chart, flamegraph
from .build import MacroError
from .original import original_table, original_tables, original_vs_here
from .outputs import annotated_output, artifact_text, step_output
from .practice import exercises, tool_exercises
from .runs import host_provenance, hosts_table, lab_time, provenance, skips
from .tables import cases_table, compare_hosts, compare_table, metrics_table, results_table

MACROS = (results_table, metrics_table, chart, flamegraph, claims, verdicts, verdict_brief, cases_table, provenance, skips, hosts_table,
          host_provenance, compare_table, step_output, compare_hosts, cast, original_table, original_tables,
          original_vs_here, exercises, artifact_text, annotated_output, tool_exercises, lab_time, prose_reads)
"""The macros this package defines, in the order :func:`define_env` registers them."""


def define_env(env) -> None:
    """mkdocs-macros entry point, called once per build: start the build's state
    (:func:`build.start_build`) and register :data:`MACROS`, then the evidence pages' and the
    chapters' macros (:mod:`labkit.site.evidence`, :mod:`labkit.site.lesson`)."""
    build.start_build(env)
    for fn in MACROS:
        env.macro(fn)
    from .. import evidence, lesson  # they import this package
    env.macro(evidence.evidence)
    env.macro(evidence.evidence_link)
    env.macro(lesson.lesson_start)
