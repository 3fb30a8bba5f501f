"""The hosts a page shows and the state of the build: where results are read from, the hosts
loaded once per build, the page being rendered, and the per-host loop every data macro runs.

Every other module of the package reads this state through this module's attributes
(``build.ROOT``, :func:`all_hosts`, :func:`page`) at call time, so that one assignment (a
test setting ``build.ROOT`` to another checkout) reaches them all.
"""

from __future__ import annotations

import copy
import html
import posixpath
from typing import TYPE_CHECKING, Callable

from ... import results as results_mod
from ... import stale
from ...view import commands, render

if TYPE_CHECKING:
    from ...model import Measurement, Result

ROOT = results_mod.ROOT
"""The checkout whose ``labs/`` and ``results/`` the macros read."""

hosts_cache: list | None = None
files_cache: dict = {}    # (loader, path) -> ((mtime, size), what it returned), for this build (lab_file)
stale_cache: dict = {}    # (function, lab, run commit, dirty, root) -> staleness, for this build (freshness)
macro_env = None  # mkdocs-macros' env (its ``page`` is the page being rendered), or None outside a build


EMULATED_BADGE = '<span class="pc-emulated">emulated CPU</span>'
"""The short badge of a verdict or a ratio measured on an emulated CPU (a host's tab and label
carry the long one, :func:`labkit.view.render.emulation_badge`)."""


class MacroError(ValueError):
    """A macro was called with arguments that match nothing."""


class Note(str):
    """A tab body that says why a host shows nothing (Markdown). A :func:`per_host` body
    returns one instead of data; it does not count as data."""


def start_build(env) -> None:
    """Remember mkdocs-macros' ``env`` (its ``page`` is the page being rendered) and forget
    the loaded hosts: a new build, or a rebuild under ``mkdocs serve``, reads the results again."""
    global macro_env, hosts_cache
    macro_env = env
    hosts_cache = None
    files_cache.clear()
    stale_cache.clear()


def lab_file(load: Callable, lab: str, name: str):
    """``load(ROOT / "labs" / lab / name)`` (a checked reader of a lab's TOML: claims,
    exercises, the original), read and checked once per build while the file keeps its
    modification time and size, and given to each caller as its own deep copy. The reader's
    errors propagate, every call, as they would uncached."""
    path = ROOT / "labs" / lab / name
    try:
        st = path.stat()
        stamp = (st.st_mtime_ns, st.st_size)
    except OSError:
        return load(path)                 # the reader says what is missing
    key = (load.__module__, load.__qualname__, str(path))
    if key not in files_cache or files_cache[key][0] != stamp:
        files_cache[key] = (stamp, load(path))
    return copy.deepcopy(files_cache[key][1])


def freshness(result: Result) -> tuple[str, str]:
    """:func:`labkit.stale.staleness` of ``result`` under :data:`ROOT`, asked of git once per
    build for each lab, run commit and dirty flag (the hosts table and each provenance table
    both show it; each answer costs a few git processes)."""
    run = result["run"]
    ask = stale.staleness
    key = (ask, result["lab"], run.get("git_commit"), bool(run.get("git_dirty")), str(ROOT))
    if key not in stale_cache:
        stale_cache[key] = ask(result, ROOT)
    return stale_cache[key]


def emulated(host: results_mod.Host) -> bool:
    """Whether every result of ``host`` was measured on an emulated CPU (its provenance has
    ``emulation``: a guest under QEMU's TCG, for instance)."""
    return bool(host.results) and all(r["host"].get("emulation") for r in host.results.values())


def all_hosts() -> list[results_mod.Host]:
    """Every host with results under :data:`ROOT`, loaded and validated once per build
    (:func:`labkit.results.load_hosts`), in search order but for the hosts whose CPU is emulated
    (:func:`emulated`), which come after the others: a page's first host tab, the one whose
    tables are in the page at load (:func:`labkit.site.mkdocs_hooks.lazy_tabs`), is a real CPU's
    whatever the labels' alphabetical order.

    Raises:
        ResultError: an invalid result file, or one host label in two places.
    """
    global hosts_cache
    if hosts_cache is None:
        hosts_cache = sorted(results_mod.load_hosts(ROOT), key=emulated)
    return hosts_cache


def for_lab(lab: str) -> list[tuple[results_mod.Host, Result]]:
    """(host, result) for every host with a result of ``lab``, the reader's own hosts first.

    Raises:
        NoResult: no host has a result of ``lab``.
    """
    return results_mod.for_lab(lab, all_hosts())


def page():
    """The page mkdocs-macros is rendering (``url``, ``file.src_uri``), or None outside a build."""
    return macro_env.page if macro_env is not None else None


def page_dir(page) -> str:
    """The site folder of ``page`` (``cases/lat_tcp/``; ``""`` for the home page, a page file at
    the site root such as ``404.html``, or outside a build), where its figure files go."""
    if page is None:
        return ""
    folder, slash, _ = page.url.rpartition("/")
    return folder + slash


def rel(page, target: str) -> str:
    """URL of site path ``target`` relative to ``page``'s URL (for raw HTML attributes)."""
    return posixpath.relpath(target, page_dir(page) or ".")


def rel_src(page, target: str) -> str:
    """Path of site file ``target`` relative to ``page``'s Markdown source (for Markdown links,
    which mkdocs resolves and checks against the site's files)."""
    src_dir = posixpath.dirname(page.file.src_uri) if page is not None else ""
    return posixpath.relpath(target, src_dir or ".")


def artifacts(result: Result, kind: str, case: dict) -> list[dict]:
    """The artifacts of ``result`` of ``kind`` whose case holds every key and value of ``case``."""
    return [a for a in result["artifacts"]
            if a["kind"] == kind and all(a["case"].get(k) == v for k, v in case.items())]


def one_artifact(macro: str, host, result: Result, kind: str, case: dict) -> dict | None:
    """The artifact of ``kind`` matching ``case`` (:func:`artifacts`) in ``host``'s ``result``,
    or None if it has none.

    Raises:
        MacroError: several match (``macro`` names the caller).
    """
    arts = artifacts(result, kind, case)
    if len(arts) > 1:
        raise MacroError(f"{macro}: {len(arts)} {kind} artifacts match {case} on {host.label}; be more specific")
    return arts[0] if arts else None


def tab(host, result: Result, body: str) -> tuple[str, str]:
    """(tab title, body) for one host, the body led by the emulated-CPU badge when it applies."""
    badge = render.emulation_badge(result["host"])
    return host.title, (f"{badge}\n\n{body}" if badge else body)


def guest_badge(result: Result, ms: list[Measurement]) -> str:
    """HTML badge (class ``pc-emulated``) for measurements ``ms`` of a host that is not itself
    emulated but made some of them inside a guest whose CPU QEMU emulated (TCG; the measurement's
    own ``emulation``), as the nvme lab's arm64 guests on the x86_64 host; "" otherwise (a host
    whose own CPU is emulated has its tab badged by :func:`tab`). Followed by a blank line, to
    lead a table or chart."""
    if render.emulation(result["host"]):
        return ""
    emu = next((m["emulation"] for m in ms if (m.get("emulation") or {}).get("accelerator") == "tcg"), None)
    if emu is None:
        return ""
    text = (f"measured in an emulated {emu.get('guest_cpu') or 'CPU'} guest (QEMU TCG on "
            f"{emu.get('host_arch') or 'this host'}): timings are not hardware")
    return f'<span class="pc-emulated">{html.escape(text)}</span>\n\n'


def file_badge(result: Result, path: str) -> str:
    """:func:`guest_badge` for a file the lab kept (``path`` relative to its result folder, e.g.
    ``raw/guest/bookworm-dma-ranges/fgraph.excerpt.txt``) that a guest wrote: the file lies in
    the folder a step records as its ``out`` case value (the nvme lab's guest runs), and that
    step's measurements say how the guest's CPU ran. "" for any other file."""
    made = {s["name"] for s in result["steps"]
            if isinstance((s.get("case") or {}).get("out"), str) and path.startswith(s["case"]["out"].rstrip("/") + "/")}
    return guest_badge(result, [m for m in result["measurements"] if m.get("step") in made]) if made else ""


def skip_note(result: Result, group: str | None) -> Note:
    """Why a host has no data for step group ``group`` (None: any step): its skipped or failed
    steps with their reasons, else that a quick run left the group out and why (the result's
    ``run.left_out``), else that the group did not run (``--only``), else that nothing of this
    kind was measured. A warning admonition."""
    steps = [s for s in result["steps"] if group is None or s["group"] == group]
    bad = [s for s in steps if s["status"] != "ok"]
    left = (result.get("run", {}).get("left_out") or {}).get(group) if group else None
    if bad:
        body = "\n".join(f"- {render.code_span(s['name'])} {s['status']}" + (
            f": {render.esc(commands.display_text(s['reason'], result))}" if s["reason"] else
            " (the result records no reason; the run's log may say)") for s in bad)
    elif group and not steps and left:
        body = (f"A quick run leaves out the {render.code_span(group)} group ({render.esc(left)}): "
                f"run without `--quick`, or `--quick --only {render.esc(group)}`.")
    elif group and not steps:
        body = f"The {render.code_span(group)} steps did not run in this run."
    else:
        body = "No measurement of this kind in this run."
    return Note(render.admonition("warning", "Not measured on this host", body))


def group_ran(lab: str, group: str | None) -> bool:
    """True if some host recorded steps of ``group`` (so an empty table is explained by skips).

    Raises:
        MacroError: no ``group`` given (``optional=True`` needs one).
    """
    if not group:
        raise MacroError("optional=True needs group=, whose skipped steps explain the empty table")
    return any(s["group"] == group for _, r in for_lab(lab) for s in r["steps"])


def per_host(lab: str, body: Callable[[results_mod.Host, Result], str],
             missing: str | None = None) -> tuple[str, int]:
    """One content tab per host with a result of ``lab`` (:func:`labkit.view.render.tabs`, hosts
    in :func:`for_lab`'s order), each holding ``body(host, result)``: Markdown, or a
    :class:`Note` (e.g. :func:`skip_note`) where the host has nothing of this kind.

    Returns:
        (the tab set's Markdown, how many hosts' bodies were data rather than a Note).

    Raises:
        NoResult: no host has a result of ``lab``; whatever ``body`` raises.
        MacroError: ``missing`` (its text) when given and every host's body was a Note.
    """
    tabs, found = [], 0
    for host, result in for_lab(lab):
        text = body(host, result)
        found += not isinstance(text, Note)
        tabs.append(tab(host, result, text))
    if missing is not None and not found:
        raise MacroError(missing)
    return render.tabs(tabs), found
