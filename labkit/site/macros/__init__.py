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
- :mod:`.claim_tables`: ``claims``, ``verdicts``;
- :mod:`.original`, the original investigation (``labs/<lab>/original.toml``,
  :mod:`labkit.original`): ``original_table``, ``original_tables``, ``original_vs_here``;
- :mod:`.practice`, exercises (``labs/<lab>/exercises.toml``, the tool cards'):
  ``exercises``, ``tool_exercises``;
- :mod:`.runs`: ``provenance``, ``skips``, ``hosts_table``, ``host_provenance``, ``lab_time``;
- :mod:`labkit.site.evidence` and :mod:`labkit.site.lesson`, built on these: ``evidence``,
  ``evidence_link``, ``lesson_start``.

:mod:`.hosts` holds the build's state (``ROOT``, the hosts loaded once per build, the page
being rendered) and the per-host loop; :mod:`.templates` renders the HTML
(``templates/*.html``, escaped by Jinja). Text that comes from a result or a tool's output is
escaped (:func:`labkit.view.render.esc`, code blocks, the templates); a host whose CPU is emulated
(QEMU TCG) carries a badge in every tab and table.

Every name below is importable as ``labkit.site.macros.<name>``; the underscored ones are the
helpers :mod:`labkit.site.evidence`, :mod:`labkit.site.lesson` and the tests use. ``ROOT``,
``_HOSTS_CACHE``, ``_macro_env`` and ``_hosts`` are :mod:`.hosts`' state: reading or setting
them here reads or sets it there (:class:`_Package`).
"""

from __future__ import annotations

import sys
import types

from . import hosts
from .claim_tables import (_ROLE_WORD, _claim_sentence, _interval_text, _side_label, _times, _value, _verdict_cell, claims,
                           verdicts)
from .excerpts import EXCERPT_MAX_LINES, shown_of, stream_name
from .excerpts import excerpt as _excerpt
from .figures import CAST_FONTS, CAST_IDLE_LIMIT, cast, chart, flamegraph
from .figures import svg_size as _svg_size
from .hosts import EMULATED_BADGE as _EMULATED_BADGE
from .hosts import MacroError
from .hosts import artifacts as _artifacts
from .hosts import for_lab as _need_lab
from .hosts import page_dir as _page_dir
from .hosts import rel as _rel
from .hosts import rel_src as _rel_src
from .hosts import skip_note as _skip_note
from .hosts import tab as _tab
from .original import _here_ratio, original_table, original_tables, original_vs_here
from .outputs import ANNOTATE_LANG, _annotated_block, annotated_output, artifact_text, step_output
from .practice import _describe_check, exercises, tool_exercises
from .runs import _duration, _host_rows, _skipped_groups, host_provenance, hosts_table, lab_time, provenance, skips
from .tables import cases_table, compare_hosts, compare_table, metrics_table, results_table, stacked_table

MACROS = (results_table, metrics_table, chart, flamegraph, claims, verdicts, cases_table, provenance, skips, hosts_table,
          host_provenance, compare_table, step_output, compare_hosts, cast, original_table, original_tables,
          original_vs_here, exercises, artifact_text, annotated_output, tool_exercises, lab_time)
"""The macros this package defines, in the order :func:`define_env` registers them."""


def define_env(env) -> None:
    """mkdocs-macros entry point, called once per build: start the build's state
    (:func:`hosts.start_build`) and register :data:`MACROS`, then the evidence pages' and the
    chapters' macros (:mod:`labkit.site.evidence`, :mod:`labkit.site.lesson`)."""
    hosts.start_build(env)
    for fn in MACROS:
        env.macro(fn)
    from .. import evidence, lesson  # they import this package
    env.macro(evidence.evidence)
    env.macro(evidence.evidence_link)
    env.macro(lesson.lesson_start)


def _forward(name: str) -> property:
    """A property of the package that reads and sets :mod:`.hosts`' attribute ``name``."""
    return property(lambda self: getattr(hosts, name), lambda self, value: setattr(hosts, name, value),
                    doc=f"hosts.{name}")


class _Package(types.ModuleType):
    """The package's module type: its build state is :mod:`.hosts`', where every module reads
    it at call time, so that setting it here (``labkit.site.macros.ROOT = tree``, a test's
    ``monkeypatch.setattr(macros, "_hosts", ...)``, undone by setting it back) reaches every
    macro (Python's "Customizing module attribute access")."""

    ROOT = _forward("ROOT")
    _HOSTS_CACHE = _forward("_HOSTS_CACHE")
    _macro_env = _forward("_macro_env")
    _hosts = _forward("all_hosts")


sys.modules[__name__].__class__ = _Package
