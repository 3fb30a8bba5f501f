"""Charts drawn beside the build: matplotlib's drawing (most of a cold build's time) runs in
worker processes while mkdocs renders the rest of the site.

During a build (:func:`start`, from ``labkit/site/mkdocs_hooks.py``'s ``on_pre_build``), a chart
that the chart cache (:func:`labkit.view.charts.chart_svg`) does not hold yet is handed to a pool of
:func:`workers` processes (:class:`concurrent.futures.ProcessPoolExecutor`, started
by a ``forkserver``; each worker imports matplotlib in its initializer), and the macro's ``<img>`` carries
placeholders for the figure's file name and size (:func:`later`). mkdocs renders every page's
Markdown before it renders any page's template, so by the time :func:`fill` replaces the
placeholders (``on_page_context``) every chart has long been submitted and the drawing has
overlapped the rest of the build. A chart the cache holds is read at once, and outside a build
(a test calling a macro) every chart is drawn at once: :func:`later` returns ``None`` then.

The SVG bytes are those :func:`labkit.view.charts.chart_svg` gives in the build's own process (the
same function runs in the worker, and keeps its result in the cache). Where workers cannot
start or die, the build draws the rest itself (:func:`give_up`, logged at info level: a
warning would fail ``--strict``). As for any program that uses :mod:`multiprocessing`, a script
that runs a build itself must guard it with ``if __name__ == "__main__":`` (the ``mkdocs``
command and ``python -m mkdocs`` do): the fork server imports the script.
"""

from __future__ import annotations

import itertools
import logging
import multiprocessing
import os
import re
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool

from ... import model
from ...model import Measurement
from ...plot import pyplot
from ...view import charts

_PLACEHOLDER = re.compile(r"@@pcb-draw:(\d+):(src|width|height)@@")

_LOG = logging.getLogger("mkdocs.plugins.labkit")

active = False
"""Whether charts are drawn beside the build now: True from :func:`start` until :func:`finish` or
:func:`give_up`."""
pool: ProcessPoolExecutor | None = None
"""The worker processes (:func:`executor`), None until the first chart the cache lacks and after
:func:`finish`."""
_tokens = itertools.count(1)
_pending: dict[int, tuple[str, Future, tuple]] = {}   # token → (page's site folder, SVG future, chart_svg's arguments)
_done: dict[int, dict] = {}                           # token → {"src", "width", "height"}


def start() -> None:
    """Draw charts beside the build from now on (the pool itself starts at the first chart
    the cache lacks, so a build whose charts are all cached starts no process)."""
    global active
    finish()
    active = True


def finish(cancel: bool = False) -> None:
    """Stop drawing beside the build: wait for the workers (or, with ``cancel``, drop what
    they have not begun, after a failed build) and forget every placeholder."""
    global active, pool
    active = False
    if pool is not None:
        pool.shutdown(wait=True, cancel_futures=cancel)
        pool = None
    _pending.clear()
    _done.clear()


def _cached(ms: list[Measurement], x: str, series: str | None, opts: dict) -> bool:
    """Whether :func:`labkit.view.charts.chart_svg` of these arguments would read its cache (the
    file it names by :func:`labkit.view.charts.chart_key`); False when the cache is off."""
    folder = model.cache_dir("charts")
    return folder is not None and (folder / f"{charts.chart_key(ms, x, series, **opts)}.svg").is_file()


def workers() -> int:
    """How many processes draw: one CPU fewer than the machine has (the build's own process
    renders the pages meanwhile), at least one: on 2 CPUs, one worker drew a cold build's
    70 charts as fast as two did."""
    return max(1, (os.cpu_count() or 1) - 1)


def executor() -> ProcessPoolExecutor:
    """The pool of :func:`workers` processes (:data:`pool`), made at the first call (a
    ``forkserver`` starts its processes when the first chart is submitted).

    Raises:
        OSError, RuntimeError, ImportError: the pool cannot be made here (no ``/dev/shm`` for its
        semaphores, ...); :func:`later` then gives up on workers.
    """
    global pool
    if pool is None:
        ctx = multiprocessing.get_context("forkserver")
        os.environ.setdefault("MPLBACKEND", "Agg")      # workers import pyplot headless
        # matplotlib is not preloaded in the fork server: the first submit waits until the server
        # has preloaded and forked (2.3-2.6 s of a cold build with pyplot preloaded, 0.2 s without;
        # with one worker nothing shares the import), while the worker's own import overlaps the build
        ctx.set_forkserver_preload(["labkit.view.charts"])
        pool = ProcessPoolExecutor(max_workers=workers(), mp_context=ctx,
                                    initializer=pyplot)
    return pool


def later(folder: str, ms: list[Measurement], x: str, series: str | None = None, **opts) -> dict[str, str] | None:
    """During a build, for a chart the cache lacks: submit :func:`labkit.view.charts.chart_svg` of
    these arguments to the pool and return the image's ``src``, ``width`` and ``height`` as
    placeholders that :func:`fill` replaces (the figure is then stored for the page's site
    folder ``folder``, as :func:`labkit.view.charts.store`). ``None`` when the chart should be
    drawn at once (no build, the cache holds it, or worker processes cannot start here:
    :func:`give_up`)."""
    if not active or _cached(ms, x, series, opts):
        return None
    try:
        future = executor().submit(charts.chart_svg, ms, x, series, **opts)
    except (OSError, RuntimeError, ImportError) as exc:
        give_up(exc)
        return None
    token = next(_tokens)
    _pending[token] = (folder, future, (ms, x, series, opts))
    return {key: f"@@pcb-draw:{token}:{key}@@" for key in ("src", "width", "height")}


def image(folder: str, ms: list[Measurement], x: str, series: str | None = None, **opts) -> dict:
    """The ``src``, ``width`` and ``height`` of the chart :func:`labkit.view.charts.chart_svg` draws
    of these arguments, stored for the page's site folder ``folder``: placeholders
    (:func:`later`) while a worker draws it, else drawn (or read from the cache) here.

    Raises:
        ValueError: as :func:`labkit.view.charts.chart_figure`, for a chart drawn here.
    """
    return later(folder, ms, x, series, **opts) or _figure(folder, charts.chart_svg(ms, x, series, **opts))


def _figure(folder: str, svg: str) -> dict:
    """``svg`` stored for the site folder ``folder`` (:func:`labkit.view.charts.store`): its file
    name as ``src``, its ``width`` and ``height`` in CSS pixels."""
    width, height = charts.svg_size(svg)
    return {"src": charts.store(folder, svg), "width": width, "height": height}


def give_up(exc: BaseException) -> None:
    """Draw the rest of this build's charts in its own process: worker processes cannot be
    started here (no ``/dev/shm`` for their semaphores, a script that runs the build without
    an ``if __name__ == "__main__"`` guard) or died. Slower, never wrong."""
    global active
    if active:
        _LOG.info("labkit: charts are drawn in the build's own process (%s: %s)", type(exc).__name__, exc)
    active = False


def _resolve(token: int) -> dict:
    """The figure of placeholder ``token`` (``src``, ``width``, ``height``), stored for the site
    once its drawing is done; drawn here if its worker died."""
    if token not in _done:
        if token not in _pending:
            raise ValueError(f"chart placeholder {token} belongs to no chart of this build")
        folder, future, (ms, x, series, opts) = _pending.pop(token)
        try:
            svg = future.result()       # the worker's ValueError for a bad chart, raised here
        except BrokenProcessPool as exc:
            give_up(exc)
            svg = charts.chart_svg(ms, x, series, **opts)
        _done[token] = _figure(folder, svg)
    return _done[token]


def fill(html: str) -> str:
    """``html`` with every chart placeholder of :func:`later` replaced by its figure's file
    name and size, waiting for the workers that still draw them.

    Raises:
        ValueError: a chart could not be drawn (:func:`labkit.view.charts.chart_figure`'s message),
            or a placeholder names no chart of this build.
    """
    return _PLACEHOLDER.sub(lambda m: str(_resolve(int(m.group(1)))[m.group(2)]), html)


def left(html: str) -> bool:
    """Whether ``html`` still holds a chart placeholder (a page must not)."""
    return _PLACEHOLDER.search(html) is not None
