"""lat_tcp lab: raw outputs → measurements and artifacts (called by ``labkit record``).

Every measuring step carries its case as fields (``lab_run --case`` in run.sh, read here as
``step["case"]``); no step name or command is parsed.

Metrics:
    ``round_trip`` (µs per round trip): one sample per run, in repetition order. For lat_tcp,
    the run's median over its batches (the program's ``median``; each batch's mean is in the
    step's raw output). sockperf reports half the round trip (its "latency"): its run's
    average is doubled. Case keys, as run.sh gives them (less ``rep``): ``experiment``
    (noserver, free, pinned, msize, veth, perf, strace, sockperf), ``tool`` (lat_tcp,
    sockperf), ``pin`` (same-cpu / smt-sibling / other-core / other-package / free),
    ``server_cpu``, ``client_cpu``, ``msize`` (bytes, as the program printed it), ``path``
    (loopback / veth), ``traced`` (``perf record -g``, ``strace -c`` or ``none``, in the perf
    and strace groups), ``client`` and ``server`` (noserver: ``unchecked``, the -L client;
    ``none`` / ``listening``).
    ``same_cpu_share`` (fraction): of the ps snapshots taken during the observed unpinned
    run (the step whose case has ``observed``), the share in which the client and the
    server's connection child last ran on the same CPU. One sample.
    ``strace_calls`` (calls): per system call, the calls strace -c counted in each traced run.

Artifacts: a flame graph and its folded stacks per placement (the steps whose case has
``tool = "inferno"``), case ``{"tool": "lat_tcp", "pin": ...}``.

Raises (from ``collect``): ``labkit.parsers.jsonline.ParseError`` when a successful client
step printed no JSON line, ``ValueError`` when a step's printed msize is not its case's.
"""

from __future__ import annotations

from collections import defaultdict

from labkit.parsers.jsonline import json_line
from labkit.parsers.sockperf import sockperf_pingpong
from labkit.parsers.strace import strace_summary

STRACE_SYSCALLS = ("read", "write", "recvfrom", "sendto", "connect")


def same_cpu_share(text: str) -> tuple[float, int] | None:
    """From ``ps -o pid,ppid,psr,args -C lat_tcp`` snapshots (blank line between them): the
    fraction of snapshots in which the client and the server's connection child last ran on
    the same CPU, and the number of snapshots used, e.g. ``(0.96, 101)``. None when no
    snapshot had exactly one of each. Server processes are those with ``-s`` in their
    arguments; a child is a process whose parent is a server; the client is the rest."""
    same = total = 0
    for block in text.split("\n\n"):
        procs = [line.split(None, 3) for line in block.splitlines() if line.strip()]
        procs = [p for p in procs if len(p) == 4]
        server = {p[0] for p in procs if " -s" in f" {p[3]}"}
        child = [p for p in procs if p[1] in server]
        client = [p for p in procs if p[0] not in server and p[1] not in server]
        if len(child) == 1 and len(client) == 1:
            total += 1
            same += child[0][2] == client[0][2]
    return (same / total, total) if total else None


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
        if tool not in ("lat_tcp", "sockperf"):
            continue
        if "observed" in case:
            # The run beside the ps snapshots: its snapshots are the measurement (see run.sh).
            share = same_cpu_share(run.raw(f"{name}.where").read_text()) if run.raw(f"{name}.where").exists() else None
            if share is not None:
                run.add("same_cpu_share", "fraction", {"experiment": case["experiment"], "observed": case["observed"]},
                        [share[0]], name)
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
