"""The runs behind the numbers: the hosts as probed, each lab's run (when, how long, which tools,
stale or fresh) and the steps that were skipped or failed."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...view import commands, render
from .. import fast_tables
from . import build
from .build import MacroError

if TYPE_CHECKING:
    from ...model import Result


def _virtualization(h: dict) -> str:
    """A host's virtualization as probed (systemd-detect-virt: "kvm", "none"...), and, for an
    emulated CPU, that it is emulated: inside a QEMU TCG guest the probe sees no hypervisor and
    says "none", which alone would read as bare metal."""
    seen = h.get("virtualization") or "–"
    emu = h.get("emulation")
    if emu and emu.get("accelerator") == "tcg":
        return f"emulated CPU (QEMU TCG); seen from inside: {seen}"
    return seen


def host_rows(h: dict) -> list[list[str]]:
    """(field, value) rows of a probed host (a result's ``host``), every value escaped (it
    comes from the host)."""
    def cap(c):  # noqa: E306
        return ("yes" if c["available"] else "no") + f" ({c['reason']})"
    mem = f"{h['memory_bytes'] / 2**30:.1f} GiB" if h.get("memory_bytes") else "–"
    rows = [
        ["arch", h["arch"]], ["CPU", f"{h.get('cpu_vendor') or '?'} {h.get('cpu_model') or '?'}"
                                   + (f" ({h['cpu_signature']})" if h.get("cpu_signature") else "")],
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
    if h.get("audit_context") or audit_note(h):
        rows.append(["audit contexts of the run's processes", h.get("audit_context") or audit_note(h)])
    return [[k, render.esc(v)] for k, v in rows]


def audit_note(h: dict) -> str:
    """Why a host's measurements were made by processes carrying kernel audit contexts (audit
    work on every system call, labkit/run/auditctx.py), or "" when they were not or it is not
    known: ``audit_context`` "present: REASON"; a result from before ``audit_context`` existed
    whose probe found audit enabled on the boot (nothing suppressed the contexts then)."""
    ctx = h.get("audit_context")
    if ctx:
        return f"present ({ctx.removeprefix('present: ')})" if ctx.startswith("present: ") else ""
    if h.get("audit_ever_enabled") is True:
        return "present (audit had been enabled on this boot and the run did not suppress the contexts)"
    return ""


def provenance(lab: str) -> str:
    """Markdown: per host, where and how ``lab``'s numbers were made: the host as probed, the
    run (start, duration in s, mode, command, commit) and the tools' versions; a result older
    than the lab's last change (by commit, :func:`labkit.stale.staleness`) is marked stale.

    Raises:
        NoResult: no host has a result of ``lab``.
    """
    def table(host, r):
        run = r["run"]
        state, why = build.freshness(r)
        warn = render.admonition("warning", "Stale result", why) + "\n" if state == "stale" else ""
        if audit_note(r["host"]):
            warn += render.admonition("warning", "Measured with audit contexts",
                                      render.esc(f"This run's processes carried kernel audit contexts (or may have) and "
                                                 f"then pay audit work on every system call: {audit_note(r['host'])}.")) + "\n"
        rows = host_rows(r["host"]) + [
            ["freshness", f"{state}: {why}"],
            ["run started", run["start"]], ["duration", f"{run['duration_s']:.0f} s"],
            ["mode", "quick" if run["quick"] else "full"], ["command", render.code_span(commands.display_command(run["command"], r))],
            ["git commit", (run["git_commit"] or "–")[:12] + (" (uncommitted changes)" if run.get("git_dirty") else "")],
        ] + [[f"tool: {render.esc(t)}", render.esc(v)] for t, v in r["tools"].items()]
        return warn + fast_tables.table(["field", host.label], rows)

    return build.per_host(lab, table)[0]


def skips(lab: str) -> str:
    """Markdown: per host, how many of ``lab``'s steps ran as designed, and a table of the
    steps that were skipped or failed, with their reasons.

    Raises:
        NoResult: no host has a result of ``lab``.
    """
    def table(host, r):
        bad = [s for s in r["steps"] if s["status"] != "ok"]
        ok = sum(1 for s in r["steps"] if s["status"] == "ok")
        if bad:
            body = fast_tables.table(["step", "status", "reason"],
                                         [[render.code_span(s["name"]), s["status"], render.esc(commands.display_text(s["reason"] or "", r))]
                                          for s in bad])
        else:
            body = "Every step ran."
        return f"{ok} of {len(r['steps'])} steps ran as designed.\n\n{body}"

    return build.per_host(lab, table)[0]


def kernels_text(results: dict[str, Result]) -> str:
    """The kernel of a host's results (lab → result): the one release when all agree, else each
    release followed by the labs measured on it (``6.18.44-fc-v782 (fio_engines, fstime);
    6.18.44-fc-v669 (lat_tcp)``), so that no lab's numbers are put on another kernel."""
    by_kernel: dict[str, list[str]] = {}
    for lab, r in sorted(results.items()):
        by_kernel.setdefault(r["host"]["kernel"], []).append(lab)
    if len(by_kernel) == 1:
        return next(iter(by_kernel))
    return "; ".join(f"{k} ({', '.join(labs)})" for k, labs in by_kernel.items())


def hosts_table() -> str:
    """Markdown: every host with results: label (badged when emulated), arch, CPU, kernel (per
    lab when its results were measured on several: :func:`kernels_text`), virtualization, and
    each lab with its mode and date, and "stale" when the lab's code changed after the run
    (:func:`labkit.stale.staleness`; the lab's provenance says why).

    Raises:
        MacroError: no host has any result.
    """
    rows = []
    for h in build.all_hosts():
        hh = next(iter(h.results.values()))["host"]
        labs = ", ".join(f"{lab} ({'quick' if r['run']['quick'] else 'full'}, {r['run']['start'][:10]}"
                         f"{', stale' if build.freshness(r)[0] == 'stale' else ''})"
                         for lab, r in sorted(h.results.items()))
        rows.append([render.host_label(hh, h.title), render.esc(hh["arch"]), render.esc(f"{hh.get('cpu_model')}, {hh['cpus']} CPUs"),
                     render.esc(kernels_text(h.results)), render.esc(_virtualization(hh)), labs])
    if not rows:
        raise MacroError("hosts_table: no results at all: the guide needs at least one host")
    return fast_tables.table(["host", "arch", "CPU", "kernel", "virtualization", "labs (mode, date)"], rows)


def host_provenance() -> str:
    """Markdown: per host tab, its probe fields (from its newest result)."""
    tabs = []
    for h in build.all_hosts():
        newest = max(h.results.values(), key=lambda r: r["run"]["start"])
        tabs.append(build.tab(h, newest, fast_tables.table(["field", h.label], host_rows(newest["host"]))))
    return render.tabs(tabs)


def duration_text(seconds: float) -> str:
    """``527.3`` → ``"8 min 47 s"``; under a minute ``"42 s"``."""
    s = int(round(seconds))
    return f"{s // 60} min {s % 60:02d} s" if s >= 60 else f"{s} s"


def lab_time(lab: str) -> str:
    """Inline Markdown (for a table cell): how long ``lab`` ran on each host with a result, from
    the result's ``run.duration_s``, with the mode (quick or full) and the host (emulated hosts
    badged), e.g. ``8 min 47 s (full run, xeon-kvm-2vcpu)``; hosts separated by "; " (a line
    break inside a list item would leave a lone ")." on a phone).

    Raises:
        NoResult: no host has a result of ``lab``.
    """
    return "; ".join(f"{duration_text(r['run']['duration_s'])} ({'quick' if r['run']['quick'] else 'full'} run, "
                     f"{render.host_label(r['host'], host.title)}{skipped_groups(r)})" for host, r in build.for_lab(lab))


def skipped_groups(result: Result) -> str:
    """``", without the guest group"`` when whole groups of ``result`` were skipped (every step
    of the group ``skipped``): a time that left out a group is not the time of the whole lab."""
    by_group: dict[str, set[str]] = {}
    for step in result.get("steps", []):
        by_group.setdefault(step["group"], set()).add(step["status"])
    gone = [g for g, states in by_group.items() if states == {"skipped"}]
    if not gone:
        return ""
    return f", without the {' and '.join(gone)} group{'s' if len(gone) > 1 else ''}"
