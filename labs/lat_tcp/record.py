"""lat_tcp lab: raw outputs → measurements and artifacts (called by ``labkit record``).

Metric ``round_trip`` (µs per round trip). Samples are the lat_tcp program's own samples
(each the mean of one calibrated batch). sockperf reports half the round trip
(its "latency"), so its samples are doubled and marked ``tool = "sockperf"``.
Cases: ``experiment`` (the step group: free, pinned, msize, veth, perf, strace, sockperf),
``tool``, ``pin`` (same-cpu / smt-sibling / other-core / other-package / free),
``server_cpu``, ``client_cpu``, ``msize`` (bytes), ``path`` (loopback / veth), ``traced``
(the tracer the client ran under: ``perf record -g`` or ``strace -c``; absent when untraced).
"""

from __future__ import annotations

from labkit.parsers.jsonline import json_line
from labkit.parsers.sockperf import sockperf_pingpong
from labkit.parsers.strace import strace_summary


def _topology(run) -> dict[tuple[int, int], str]:
    path = run.dir / "topology.txt"
    pairs = {}
    if path.exists():
        for line in path.read_text().splitlines():
            s, c, rel = line.split()
            pairs[(int(s), int(c))] = rel
    return pairs


def _cpu(cmd: str, after: str = "taskset -c ") -> int | None:
    if after not in cmd:
        return None
    return int(cmd.split(after, 1)[1].split()[0])


def _same_cpu_share(path) -> tuple[float, int] | None:
    """From ``ps -o pid,ppid,psr,args -C lat_tcp`` snapshots (blank line between them): the
    fraction of snapshots in which the client and the server's connection child last ran on
    the same CPU, and the number of snapshots used. None when no snapshot had both."""
    if not path.exists():
        return None
    same = total = 0
    for block in path.read_text().split("\n\n"):
        procs = [line.split(None, 3) for line in block.splitlines() if line.strip()]
        procs = [p for p in procs if len(p) == 4]
        server = {p[0] for p in procs if " -s" in f" {p[3]}"}
        child = [p for p in procs if p[1] in server]
        client = [p for p in procs if p[0] not in server and p[1] not in server]
        if len(child) == 1 and len(client) == 1:
            total += 1
            same += child[0][2] == client[0][2]
    return (same / total, total) if total else None


def collect(run) -> None:
    """Parse every lat_tcp, strace and sockperf step of ``run`` into measurements/artifacts."""
    topo = _topology(run)

    def server_cpu(server_step: str) -> int | None:
        cmd = run.raw(server_step, "cmd")
        return _cpu(cmd.read_text()) if cmd.exists() else None

    def lat(step: dict, server_step: str | None, **case):
        out = json_line(run.raw(step["name"]).read_text(), "lat_tcp")
        sc = server_cpu(server_step) if server_step else None
        cc = _cpu(step["command"])
        pin = "free" if sc is None or cc is None else topo.get((sc, cc), "unknown")
        full = {"experiment": step["group"], "tool": "lat_tcp", "pin": pin}
        if sc is not None:
            full.update(server_cpu=sc, client_cpu=cc)
        full.update(case)
        full["msize"] = out["msize"]
        run.add("round_trip", "us", full, out["samples"], step["name"])

    for s in run.steps:
        name = s["name"]
        if s["status"] != "ok" or name == "noserver":
            continue
        if name == "free":
            lat(s, None)
            share = _same_cpu_share(run.dir / "raw" / "free.where.out")
            if share is not None:
                run.add("same_cpu_share", "fraction", {"experiment": "free", "observed": "ps psr every 50 ms"},
                        [share[0]], "free")
        elif name.startswith("pinned.s"):
            lat(s, f"{name}.server")
        elif name.startswith("msize."):
            lat(s, f"msize.{name.split('.')[1]}.server")
        elif name in ("veth.loopback", "veth.veth"):
            lat(s, "veth.server-lo", path=name.split(".")[1])
        elif name == "strace":
            summary = strace_summary((run.dir / "raw" / "strace.summary").read_text())
            for sc_name in ("read", "write", "recvfrom", "sendto", "connect"):
                row = summary["syscalls"].get(sc_name)
                if row:
                    run.add("strace_calls", "calls", {"syscall": sc_name}, [row["calls"]], name)
            lat(s, "strace.server", traced="strace -c")
        elif name.startswith("perf.") and name.endswith(".record"):
            # The client's own figure while perf record -g samples it (the original saw perf slow lat_tcp).
            lat(s, f"perf.{name.split('.')[1]}.server", traced="perf record -g")
        elif name.startswith("perf.") and name.endswith(".flame"):
            kind = name.split(".")[1]
            sc = server_cpu(f"perf.{kind}.server")
            cc = _cpu(run.raw(f"perf.{kind}.record", "cmd").read_text())
            pin = topo.get((sc, cc), "unknown")
            case = {"tool": "lat_tcp", "pin": pin}
            run.artifact("flamegraph", case, f"flame-{kind}.svg",
                         f"lat_tcp client, {pin}: server on CPU {sc}, client on CPU {cc}")
            run.artifact("folded", case, f"flame-{kind}.folded", f"folded stacks, {pin}")
        elif name.startswith("sockperf.") and name.endswith(".lat_tcp"):
            lat(s, f"sockperf.{name.split('.')[1]}.lat_tcp-server")

    # sockperf: one sample per run, the run's average half round trip, doubled.
    for kind in ("same", "other"):
        steps = [s for s in run.steps if s["status"] == "ok" and s["name"].startswith(f"sockperf.{kind}.")
                 and s["name"].rsplit(".", 1)[1].isdigit()]
        if not steps:
            continue
        samples = []
        for s in steps:
            sp = sockperf_pingpong(run.raw(s["name"]).read_text() + run.raw(s["name"], "err").read_text())
            samples.append(sp["avg_us"] * 2 if sp["half_rtt"] else sp["avg_us"])
        sc = server_cpu(f"sockperf.{kind}.server")
        cc = _cpu(steps[0]["command"])
        run.add("round_trip", "us", {"experiment": "sockperf", "tool": "sockperf", "pin": topo.get((sc, cc), "unknown"),
                                     "server_cpu": sc, "client_cpu": cc, "msize": 14}, samples, steps[0]["name"])
