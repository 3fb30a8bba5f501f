"""lat_tcp lab: raw outputs → measurements and artifacts (called by ``labkit record``).

Every measuring step carries its case as fields (``lab_run --case`` in run.sh, read here as
``step["case"]``); no step name or command is parsed.

Metrics:
    ``round_trip`` (µs per round trip): one sample per run, in repetition order. For lat_tcp,
    the run's median over its batches (the program's ``median``; each batch's mean is in the
    step's raw output). sockperf reports half the round trip (its "latency"): its run's
    average is doubled. Case keys, as run.sh gives them (less ``rep``): ``experiment``
    (noserver, free, pinned, msize, veth, perf, strace, sockperf, wakeup), ``tool`` (lat_tcp,
    sockperf), ``pin`` (same-cpu / smt-sibling / other-core / other-package / free),
    ``server_cpu``, ``client_cpu``, ``msize`` (bytes, as the program printed it), ``path``
    (loopback / veth), ``traced`` (``perf record -g``, ``strace -c`` or ``none``, in the perf
    and strace groups; ``perf sched record`` in the wakeup group), ``client`` and ``server`` (noserver: ``unchecked``, the -L client;
    ``none`` / ``listening``).
    ``same_cpu_share`` (fraction), two kinds. Case ``{"experiment": "placement", "observed":
    "sched events"}``: one sample per repetition, from the scheduler events perf recorded
    through one unpinned run (the ``perf script`` step of the pinned group's ``placement``
    runs, :func:`pair_same_cpu_share`): the share of the run's time, from the server's
    connection child's creation to the client's exit, during which the two tasks were on (ran
    on, or last ran on and would run on next) the same CPU. Case ``{"experiment": "free",
    "observed": "ps psr every 50 ms"}``: of the ps snapshots taken during the free group's run,
    the share in which the two last ran on the same CPU, one sample; ps every 50 ms moves the
    pair (the review measured that run faster than the unwatched ones), so that run is what
    the taskset and gdb cards show, not a placement to reason from.
    ``round_trip`` with case ``{"experiment": "placement", "pin": "free", "observed":
    "predicted"}`` (µs): per repetition, the round trip the recorded placement predicts from the
    same repetition's pinned runs: a run that spends share s of its time on one CPU, at the
    same-CPU round trip t_same, and the rest on two, at the other-core (else other-package)
    round trip t_other, makes s·T/t_same + (1 − s)·T/t_other round trips in T, so its mean round
    trip is 1 / (s/t_same + (1 − s)/t_other). The recorded run's own round trip is the
    ``round_trip`` with ``traced = "perf record sched"``.
    ``strace_calls`` (calls): per system call, the calls strace -c counted in each traced run.
    ``cpu_percent`` (% of one CPU), case ``{"experiment": "free", "observed": "ps psr every 50 ms",
    "process": "client" | "server"}`` (the free run's own case, the same ps snapshots): of the free group's run, the client's and the server
    connection child's CPU time over their lives, from the last ps snapshot (:func:`cpu_percent`):
    the original's htop CPU% (50 % each on SDP2, 61 % each on the HP380), one sample each.
    ``wakeup_delay`` (µs), case ``{"experiment": "wakeup", "pin", "server_cpu", "client_cpu",
    "stat": "mean" | "p50" | "p99" | "max"}``: of the wakeup group's run under ``perf sched
    record``, the lat_tcp threads' (client, server, its connection child) waits from a wake-up
    to running on a CPU, over every run that began with a wake-up
    (:func:`labkit.parsers.perf_sched_timehist.wakeup_delays`), one sample each; ``wakeups``
    (count), the same case less ``stat``: how many waits those are; ``preemptions`` (count),
    the same case: how many of the threads' runs ended preempted (runnable) rather than asleep.

Artifacts: a flame graph and its folded stacks per placement (the steps whose case has
``tool = "inferno"``), case ``{"tool": "lat_tcp", "pin": ...}``.

Raises (from ``collect``): ``labkit.parsers.jsonline.ParseError`` when a successful client
step printed no JSON line or a successful ``perf script`` step no tracepoint line, ``ValueError`` when a step's printed msize is not its case's.
"""

from __future__ import annotations

from collections import defaultdict

from labkit.parsers.jsonline import json_line
from labkit.parsers import perf_sched_timehist
from labkit.parsers.perf_sched import cpu_timeline, same_cpu_time, sched_events
from labkit.parsers.sockperf import sockperf_pingpong
from labkit.parsers.strace import strace_summary

STRACE_SYSCALLS = ("read", "write", "recvfrom", "sendto", "connect")


def _snapshots(text: str):
    """Per ``ps -o pid,ppid,psr,pcpu,args -C lat_tcp`` snapshot (blank line between them) with
    exactly one client and one server connection child: ``(client, child)``, each the ps fields
    ``[pid, ppid, psr, pcpu, args]``. Zombies (``<defunct>``, a process of an earlier step not yet
    reaped) are left out. Server processes are those with ``-s`` in their arguments; a child is
    a process whose parent is a server; the client is the rest."""
    for block in text.split("\n\n"):
        procs = [line.split(None, 4) for line in block.splitlines() if line.strip()]
        procs = [p for p in procs if len(p) == 5 and not p[4].endswith("<defunct>")]   # zombies: not running
        server = {p[0] for p in procs if " -s" in f" {p[4]}"}
        child = [p for p in procs if p[1] in server]
        client = [p for p in procs if p[0] not in server and p[1] not in server]
        if len(child) == 1 and len(client) == 1:
            yield client[0], child[0]


def same_cpu_share(text: str) -> tuple[float, int] | None:
    """From ``ps -o pid,ppid,psr,pcpu,args -C lat_tcp`` snapshots (:func:`_snapshots`): the
    fraction of snapshots in which the client and the server's connection child last ran on
    the same CPU, and the number of snapshots used, e.g. ``(0.96, 101)``. None when no
    snapshot had exactly one of each."""
    pairs = list(_snapshots(text))
    if not pairs:
        return None
    return sum(a[2] == b[2] for a, b in pairs) / len(pairs), len(pairs)


def cpu_percent(text: str) -> dict[str, float] | None:
    """The client's and the server connection child's CPU%, from the last snapshot that has
    both (:func:`_snapshots`): ps's ``pcpu``, CPU time over the process's life so far in % of one
    CPU (ps(1): "cputime/realtime ratio"), so the last snapshot gives nearly the whole run's
    average, the figure htop's CPU% column hovers around. ``{"client": %, "server": %}``; None
    when no snapshot had both."""
    pairs = list(_snapshots(text))
    if not pairs:
        return None
    client, child = pairs[-1]
    return {"client": float(client[3]), "server": float(child[3])}


def pair_same_cpu_share(text: str) -> float | None:
    """From ``perf script`` of the scheduler events recorded through one unpinned client run
    (run.sh ``free_sched``; format in :mod:`labkit.parsers.perf_sched`): the share of the time
    from the server's connection child's first placement (``sched_wakeup_new``) to the client's
    exit during which the client and that child were on the same CPU. The client is the task
    whose exec of a file named ``lat_tcp`` comes first; the child, the first ``lat_tcp`` task
    forked after it. None when either is missing or the window is empty.

    Raises:
        ParseError: no tracepoint line in ``text``.
    """
    events = sched_events(text)
    client = next((e.fields.get("pid") for e in events if e.event == "sched:sched_process_exec"
                   and str(e.fields.get("filename", "")).rsplit("/", 1)[-1] == "lat_tcp"), None)
    if client is None:
        return None
    t0 = next(e.time for e in events if e.event == "sched:sched_process_exec" and e.fields.get("pid") == client)
    child = next((e.fields.get("child_pid") for e in events if e.event == "sched:sched_process_fork"
                  and e.fields.get("child_comm") == "lat_tcp" and e.time >= t0), None)
    a, b = cpu_timeline(events, client), cpu_timeline(events, child) if child is not None else []
    if not a or not b:
        return None
    end = next((e.time for e in events if e.event == "sched:sched_process_exit" and e.fields.get("pid") == client),
               events[-1].time)
    start = b[0][0]
    return same_cpu_time(a, b, start, end) / (end - start) if end > start else None


def _placement(run) -> None:
    """``same_cpu_share`` from each recorded unpinned run, and the round trip it predicts
    (module docstring), one sample per repetition."""
    for s in run.steps_where(experiment="placement", tool="perf script", by_rep=True):
        rep = s["case"]["rep"]
        share = pair_same_cpu_share(run.raw(s["name"]).read_text())
        if share is None:
            continue
        run.add_sample("same_cpu_share", "fraction", {"experiment": "placement", "observed": "sched events"},
                       share, s["name"])
        same = run.steps_where(experiment="pinned", pin="same-cpu", rep=rep)
        other = (run.steps_where(experiment="pinned", pin="other-core", rep=rep)
                 or run.steps_where(experiment="pinned", pin="other-package", rep=rep))
        if same and other:
            t_same, t_other = _round_trip(run, same[0]), _round_trip(run, other[0])
            run.add_sample("round_trip", "us", {"experiment": "placement", "pin": "free", "observed": "predicted"},
                           1 / (share / t_same + (1 - share) / t_other), s["name"])
    run.flush_samples()


def _round_trip(run, step: dict) -> float:
    """One run's sample (µs per round trip) from a lat_tcp or sockperf step's raw output."""
    case = step["case"]
    if case["tool"] == "sockperf":
        sp = sockperf_pingpong(run.raw(step["name"]).read_text() + run.raw(step["name"], "err").read_text())
        return sp["avg_us"] * 2 if sp["half_rtt"] else sp["avg_us"]
    out = json_line(run.raw(step["name"]).read_text(), "lat_tcp")
    if "msize" in case and case["msize"] != out["msize"]:
        raise ValueError(f"step {step['name']}: printed msize {out['msize']}, case says {case['msize']}")
    return out["median"]


def _wakeup_delays(run, step) -> None:
    """The JSON line of a ``wakeup.<pin>.delay`` step (the lat_tcp threads' waits from a wake-up
    to running, :func:`labkit.parsers.perf_sched_timehist.wakeup_delays`): ``wakeup_delay``
    (µs) with ``stat`` mean, p50, p99 and max, ``wakeups`` and ``preemptions`` (counts), under
    the step's case less ``tool``; nothing when no wake-up was counted."""
    out = json_line(run.raw(step["name"]).read_text(), perf_sched_timehist.TOOL)
    if not out["wakeups"]:
        return
    case = {k: v for k, v in step["case"].items() if k != "tool"}
    for stat in ("mean", "p50", "p99", "max"):
        run.add("wakeup_delay", "us", {**case, "stat": stat}, [out[f"{stat}_us"]], step["name"])
    run.add("wakeups", "count", case, [out["wakeups"]], step["name"])
    run.add("preemptions", "count", case, [out["preempted"]], step["name"])


def collect(run) -> None:
    """Parse every measuring step of ``run`` (those with a case) into measurements/artifacts."""
    samples: dict[tuple, list[float]] = defaultdict(list)
    calls: dict[str, list[int]] = defaultdict(list)
    first: dict[tuple | str, str] = {}
    for s in run.steps:
        case = s.get("case")
        if s["status"] != "ok" or not case:
            continue
        name, tool = s["name"], case.get("tool")
        if tool == "inferno":
            pin = case["pin"]
            art = {"tool": "lat_tcp", "pin": pin}
            where = f"server on CPU {case['server_cpu']}, client on CPU {case['client_cpu']}"
            run.artifact("flamegraph", art, f"flame-{pin}.svg", f"lat_tcp client, {pin}: {where}")
            run.artifact("folded", art, f"flame-{pin}.folded", f"folded stacks, {pin}")
            continue
        if tool == "perf-sched-timehist":
            _wakeup_delays(run, s)
            continue
        if tool not in ("lat_tcp", "sockperf"):
            continue
        if "observed" in case:
            # The run beside the ps snapshots: its snapshots are the measurement (see run.sh).
            where = run.raw(f"{name}.where").read_text() if run.raw(f"{name}.where").exists() else ""
            share = same_cpu_share(where)
            if share is not None:
                run.add("same_cpu_share", "fraction", {"experiment": case["experiment"], "observed": case["observed"]},
                        [share[0]], name)
            for process, pct in (cpu_percent(where) or {}).items():
                run.add("cpu_percent", "%", {"experiment": case["experiment"], "observed": case["observed"],
                                             "process": process}, [pct], name)
            continue
        key = tuple((k, v) for k, v in case.items() if k != "rep")
        samples[key].append(_round_trip(run, s))
        first.setdefault(key, name)
        if case.get("traced") == "strace -c":
            summary = strace_summary(run.raw(name, "summary").read_text())
            for sc in STRACE_SYSCALLS:
                row = summary["syscalls"].get(sc)
                if row:
                    calls[sc].append(row["calls"])
                    first.setdefault(sc, name)

    for key, values in samples.items():
        run.add("round_trip", "us", dict(key), values, first[key])
    for sc, values in calls.items():
        run.add("strace_calls", "calls", {"syscall": sc}, values, first[sc])
    _placement(run)
