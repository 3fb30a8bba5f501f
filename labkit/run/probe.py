"""Host probe: what this machine is and what it allows, every field read, never assumed.

``probe(scratch)`` returns the ``host`` object of a result file (see schema.json).
Sources, per field:

- CPU vendor/model(s): util-linux ``lscpu -J`` (it names arm64 cores from the
  MIDR implementer/part, e.g. Neoverse-N1; a hybrid part lists several models).
- CPU topology (cpus, cores, sockets, SMT): ``/sys/devices/system/cpu/cpuN/topology``.
- kernel: ``uname -r``; distro: ``/etc/os-release``; memory: ``/proc/meminfo``.
- virtualization: ``systemd-detect-virt`` when present, else lscpu's
  "Hypervisor vendor", else ``/proc/cpuinfo``'s ``hypervisor`` flag.
- PMU: ``perf stat -x, -e instructions -- true`` on a short process of our own;
  "<not supported>" means no hardware counters. The fallback event of a plain
  ``perf record`` (``cycles`` → ``cpu-clock``) is read with ``perf evlist``.
- tracefs, loop devices, network namespaces: tried without changing the host.

Every probe function accepts ``sysroot`` so tests can run on the real dumps in
``tests/fixtures/cpuinfo`` (util-linux's lscpu test dumps) instead of invented text.
"""

from __future__ import annotations

import json
import os
import platform
import re
import shutil
import socket
import subprocess
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path


def run_command(cmd: list[str], timeout: float = 20) -> subprocess.CompletedProcess | None:
    """Run ``cmd`` capturing text output; None if the program is missing or times out."""
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except (FileNotFoundError, PermissionError, subprocess.TimeoutExpired):
        return None


def cap(available: bool, reason: str, detail: str | None = None) -> dict:
    """A capability as the probe reports it (a host field of :data:`CAPABILITIES`):
    ``{"available": bool, "reason": str, "detail": str | None}``."""
    return {"available": bool(available), "reason": reason, "detail": detail}


# The host capabilities the probe reports as {"available", "reason", "detail"} (its keys) and the
# name a lab asks for each by (labs/lib/lab.sh: ``lab_require NAME loop``). The supervisor exports
# the names as PCB_LAB_CAPS and each missing one's reason as PCB_CAP_<NAME upper case>.
CAPABILITIES = {"pmu": "pmu", "tracefs": "tracefs", "loop_devices": "loop", "netns": "netns"}


def parse_cpu_list(text: str) -> list[int]:
    """Parse a kernel CPU list such as ``"0-3,8,10-11"`` into ``[0, 1, 2, 3, 8, 10, 11]``.

    Raises:
        ValueError: on text that is not a CPU list.
    """
    cpus: list[int] = []
    text = text.strip()
    if not text:
        return cpus
    for part in text.split(","):
        if "-" in part:
            lo, hi = part.split("-", 1)
            cpus.extend(range(int(lo), int(hi) + 1))
        else:
            cpus.append(int(part))
    return cpus


def lscpu_models(sysroot: str | None = None) -> dict:
    """CPU vendor and model names as util-linux ``lscpu -J`` reports them.

    Returns ``{"vendor": str|None, "models": [str, ...], "hypervisor": str|None,
    "signature": str|None}``; ``models`` has one entry per core type (several on big.LITTLE /
    hybrid parts); ``signature`` is lscpu's CPU family, model and stepping of the first core type,
    ``"family 26, model 2, stepping 1"`` (a model name such as "AMD EPYC" can stand for several
    generations of a VM's CPU; the signature tells them apart), None when lscpu gives none.
    Models lscpu cannot name are reported as ``"unknown"``.
    """
    cmd = ["lscpu", "-J"] + (["--sysroot", sysroot] if sysroot else [])
    proc = run_command(cmd)
    if proc is None or proc.returncode != 0:
        return {"vendor": None, "models": [], "hypervisor": None, "signature": None}
    return parse_lscpu_json(proc.stdout)


def parse_lscpu_json(text: str) -> dict:
    """Vendor, model names and hypervisor from ``lscpu -J`` output (util-linux 2.38 nests
    per-core-type fields as ``children``). Same return shape as :func:`lscpu_models`.

    Raises:
        ValueError: text that is not lscpu's JSON (json.JSONDecodeError, or no "lscpu" list).
    """
    out = {"vendor": None, "models": [], "hypervisor": None, "signature": None}
    ids: dict[str, str] = {}
    data = json.loads(text)
    if not isinstance(data, dict) or not isinstance(data.get("lscpu"), list):
        raise ValueError("not lscpu -J output: no 'lscpu' list")

    def walk(entries):
        for e in entries:
            yield e
            yield from walk(e.get("children", []))

    for e in walk(data["lscpu"]):
        field, data = e.get("field", "").rstrip(":"), e.get("data")
        if field == "Vendor ID" and out["vendor"] is None:
            out["vendor"] = data
        elif field == "Model name":
            out["models"].append(" ".join(data.split()) if data and data != "-" else "unknown")
        elif field == "Hypervisor vendor":
            out["hypervisor"] = data
        elif field in ("CPU family", "Model", "Stepping") and data and data != "-":
            ids.setdefault(field, data)
    words = [f"{name} {ids[field]}" for field, name in (("CPU family", "family"), ("Model", "model"), ("Stepping", "stepping"))
             if field in ids]
    out["signature"] = ", ".join(words) or None
    return out


def topology(sysroot: str | None = None) -> dict[int, dict]:
    """Per online CPU: ``{"core": (package, core_id), "package": int, "siblings": [cpu, ...]}``.

    Read from ``/sys/devices/system/cpu/cpuN/topology``. ``core`` is unique per
    physical core (core_id alone repeats across packages). CPUs without
    topology files are treated as one core each.
    """
    root = Path(sysroot or "/") / "sys/devices/system/cpu"
    online_file = root / "online"
    if online_file.exists():
        cpus = parse_cpu_list(online_file.read_text())
    else:
        cpus = list(range(os.cpu_count() or 1))
    topo = {}
    for cpu in cpus:
        t = root / f"cpu{cpu}" / "topology"

        def read(name, default=None):
            try:
                return (t / name).read_text().strip()
            except OSError:
                return default

        package = int(read("physical_package_id", "0"))
        core_id = int(read("core_id", str(cpu)))
        siblings = parse_cpu_list(read("thread_siblings_list", str(cpu)))
        topo[cpu] = {"package": package, "core": (package, core_id), "siblings": siblings}
    return topo


def pair_relation(topo: dict[int, dict], a: int, b: int) -> str:
    """How CPUs ``a`` and ``b`` relate: ``same-cpu``, ``smt-sibling`` (two hardware
    threads of one core), ``other-core`` (same package) or ``other-package``."""
    if a == b:
        return "same-cpu"
    if topo[a]["core"] == topo[b]["core"] or b in topo[a]["siblings"]:
        return "smt-sibling"
    if topo[a]["package"] == topo[b]["package"]:
        return "other-core"
    return "other-package"


def cpu_counts(topo: dict[int, dict]) -> dict:
    """Counts from a topology: logical cpus, physical cores, sockets, threads per core, smt."""
    cores = {t["core"] for t in topo.values()}
    tpc = max((len(t["siblings"]) for t in topo.values()), default=1)
    return {
        "cpus": len(topo),
        "cores": len(cores),
        "sockets": len({t["package"] for t in topo.values()}),
        "threads_per_core": tpc,
    }


def smt_active(sysroot: str | None = None, threads_per_core: int | None = None) -> bool | None:
    """SMT state from ``/sys/devices/system/cpu/smt/active``, else from the topology."""
    f = Path(sysroot or "/") / "sys/devices/system/cpu/smt/active"
    try:
        return f.read_text().strip() == "1"
    except OSError:
        return None if threads_per_core is None else threads_per_core > 1


def virtualization(hypervisor: str | None) -> str | None:
    """Virtualization in use, e.g. ``"vm: kvm; container: docker"`` or ``"none"``.

    Sources: ``systemd-detect-virt --vm`` and ``--container`` when present, else
    lscpu's hypervisor vendor, else the ``hypervisor`` flag of ``/proc/cpuinfo``.
    """
    parts = []
    for kind in ("vm", "container"):
        proc = run_command(["systemd-detect-virt", f"--{kind}"])
        if proc is not None and proc.stdout.strip() not in ("", "none"):
            parts.append(f"{kind}: {proc.stdout.strip()}")
    if not parts and hypervisor:
        parts.append(f"vm: {hypervisor.lower()}")
    if not parts:
        try:
            if re.search(r"^flags\s*:.*\bhypervisor\b", Path("/proc/cpuinfo").read_text(), re.M):
                parts.append("vm: unknown hypervisor (cpuinfo flag)")
        except OSError:
            pass
    return "; ".join(parts) or "none"


def pmu(run=None, which=shutil.which) -> dict:
    """Whether hardware PMU events count here.

    Method: ``perf stat -x, -e instructions -- true`` (our own short process, not
    ``-a``); a numeric count means the PMU works, ``<not supported>`` or
    ``<not counted>`` means it does not. ``detail`` names the event a plain
    ``perf record`` falls back to (``cpu-clock`` when ``cycles`` is missing).

    Args:
        run: command runner with ``run_command``'s signature (tests pass recorded outputs).
        which: ``shutil.which``'s signature (tests say whether perf is installed).
    """
    run = run or run_command
    if not which("perf"):
        return cap(False, "perf not installed")
    proc = run(["perf", "stat", "-x,", "-e", "instructions", "--", "true"])
    if proc is None:
        return cap(False, "perf stat did not run")
    line = next((l for l in proc.stderr.splitlines() if ",instructions" in l), "")
    value = line.split(",", 1)[0] if line else ""
    fallback = None
    with tempfile.TemporaryDirectory() as tmp:
        data = os.path.join(tmp, "probe.data")
        # --no-buildid-cache: perf record would copy binaries into ~/.debug, outside the lab's directories.
        # --no-bpf-event: without it perf 6.1 waits out its side-band thread's 1 s poll at exit,
        # which doubled the time every lab took to start; the default event does not depend on it.
        usage = run(["perf", "record", "-h"])   # perf before 5.1 has no --no-bpf-event
        nobpf = ["--no-bpf-event"] if usage is not None and "--no-bpf-event" in usage.stdout + usage.stderr else []
        rec = run(["perf", "record", "--no-buildid-cache", *nobpf, "-q", "-o", data, "--", "true"])
        if rec is not None and rec.returncode == 0:
            ev = run(["perf", "evlist", "-i", data])
            if ev is not None and ev.returncode == 0 and ev.stdout.strip():
                fallback = ev.stdout.split()[0]
    detail = f"perf record default event: {fallback}" if fallback else None
    if value.strip().isdigit():
        return cap(True, "perf stat -e instructions counts", detail)
    if value:
        return cap(False, f"perf stat -e instructions: {value.strip()} (no hardware PMU counters here)", detail)
    msg = (proc.stderr.strip().splitlines() or ["no output"])[-1]
    return cap(False, f"perf stat -e instructions failed: {msg}", detail)


def tracefs(root: Path = Path("/")) -> dict:
    """Whether tracefs is mounted and readable (``/sys/kernel/tracing`` or the debugfs path),
    under ``root`` (tests pass a sysroot)."""
    for path in ("/sys/kernel/tracing", "/sys/kernel/debug/tracing"):
        p = root / path.lstrip("/")
        if (p / "trace").exists() and os.access(p / "trace", os.R_OK):
            tracers = (p / "available_tracers").read_text().split() if (p / "available_tracers").exists() else []
            return cap(True, f"{path} readable", "tracers: " + " ".join(tracers))
    if os.geteuid() != 0:
        return cap(False, "tracefs needs root here")
    if "tracefs" in (root / "proc/filesystems").read_text():
        return cap(False, "tracefs supported but not mounted (mount -t tracefs nodev /sys/kernel/tracing)")
    return cap(False, "kernel has no tracefs")


def loop_devices() -> dict:
    """Whether a loop device can be set up: root, ``/dev/loop-control`` and a free device."""
    if os.geteuid() != 0:
        return cap(False, "loop devices need root")
    if not Path("/dev/loop-control").exists():
        return cap(False, "/dev/loop-control missing (no loop driver)")
    proc = run_command(["losetup", "-f"])
    if proc is None or proc.returncode != 0:
        return cap(False, "losetup -f found no free loop device")
    return cap(True, "losetup -f found " + proc.stdout.strip())


def netns() -> dict:
    """Whether network namespaces can be made: ``unshare --net true`` (leaves nothing behind)."""
    if os.geteuid() != 0:
        return cap(False, "network namespaces need root")
    if not shutil.which("ip"):
        return cap(False, "ip (iproute2) not installed")
    proc = run_command(["unshare", "--net", "true"])
    if proc is None or proc.returncode != 0:
        return cap(False, "unshare --net failed: " + (proc.stderr.strip() if proc else "unshare missing"))
    return cap(True, "unshare --net works; ip netns available")


def scratch_fs(path: str | None) -> str | None:
    """Filesystem type of ``path`` (``findmnt -T``), e.g. ``ext4``, ``tmpfs``."""
    if not path:
        return None
    proc = run_command(["findmnt", "-n", "-o", "FSTYPE", "-T", path])
    if proc is None or proc.returncode != 0:
        return None
    return proc.stdout.strip() or None


def distro() -> str | None:
    """``PRETTY_NAME`` from ``/etc/os-release``."""
    try:
        m = re.search(r'^PRETTY_NAME="?([^"\n]*)"?', Path("/etc/os-release").read_text(), re.M)
        return m.group(1) if m else None
    except OSError:
        return None


def memory_bytes() -> int | None:
    """``MemTotal`` from ``/proc/meminfo`` in bytes."""
    try:
        m = re.search(r"^MemTotal:\s+(\d+) kB", Path("/proc/meminfo").read_text(), re.M)
        return int(m.group(1)) * 1024 if m else None
    except OSError:
        return None


def default_label() -> str:
    """Default host label: short hostname and architecture, e.g. ``laptop-x86_64``."""
    name = re.sub(r"[^A-Za-z0-9._-]", "-", socket.gethostname().split(".")[0]) or "host"
    return f"{name}-{platform.machine()}"


def perf_event_paranoid() -> int | None:
    try:
        return int(Path("/proc/sys/kernel/perf_event_paranoid").read_text())
    except (OSError, ValueError):
        return None


def audit_ever_enabled(run=None, cmdline: str | None = None) -> bool | None:
    """Whether kernel audit had been enabled on this boot before now, so that every new
    process gets an audit context and pays audit work on each of its system calls.

    The kernel keeps this as ``audit_ever_enabled`` (``kernel/audit.c``): set at boot by
    ``audit=1``, set again whenever audit is enabled, never cleared. ``audit_alloc()``
    (``kernel/auditsc.c``) gives a new task an audit context only when it is set and no
    ``task,never`` rule excludes the task. Sources, in order:

    - ``/proc/cmdline`` with ``audit=1`` (or ``audit=on``): enabled from boot → True;
    - ``auditctl -s`` reporting ``enabled 1`` or ``2``: enabled now → True;
    - ``bpftrace`` printing its own ``curtask->audit_context`` (needs root and kernel
      BTF): non-NULL → True; NULL, with ``auditctl -l`` listing no ``task`` rule → False.

    Anything else (no root, no bpftrace or BTF, a kernel without syscall auditing, a task
    rule that could hide the context) → None: unknown, never a guess.

    Args:
        run: command runner with ``run_command``'s signature (tests pass recorded outputs).
        cmdline: the kernel command line; default: read ``/proc/cmdline``.
    Returns:
        True, False or None.
    """
    run = run or run_command
    if cmdline is None:
        try:
            cmdline = Path("/proc/cmdline").read_text()
        except OSError:
            cmdline = ""
    if {"audit=1", "audit=on"} & set(cmdline.split()):
        return True
    status = run(["auditctl", "-s"])
    if status is not None and status.returncode == 0:
        m = re.search(r"^enabled (\d+)", status.stdout, re.M)
        if m and m.group(1) != "0":
            return True
    bpf = run(["bpftrace", "-e", 'BEGIN { printf("audit_context %lu\\n", (uint64)curtask->audit_context); exit(); }'],
              timeout=60)
    m = re.search(r"^audit_context (\d+)$", bpf.stdout, re.M) if bpf is not None and bpf.returncode == 0 else None
    if m is None:
        return None
    if m.group(1) != "0":
        return True
    rules = run(["auditctl", "-l"])
    if rules is None or rules.returncode != 0 or re.search(r"\btask\b", rules.stdout):
        return None
    return False


def emulation() -> dict | None:
    """``host.emulation``: how this machine's CPU is provided, when it is a QEMU guest that
    labkit.guest booted. A guest cannot tell TCG from KVM by itself; the runner that started
    QEMU knows, and writes it to ``$PCB_EMULATION_FILE`` (JSON, the schema's emulation object)
    in every job. None elsewhere (hardware, or a VM whose CPU is the host's own)."""
    path = os.environ.get("PCB_EMULATION_FILE")
    if not path:
        return None
    try:
        return json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None


def probe(scratch: str | None = None, label: str | None = None) -> dict:
    """Probe this host; return the ``host`` object of a result (schema.json). The two probes
    that start a tool and wait for it (:func:`pmu`: ``perf record``; :func:`audit_ever_enabled`:
    ``bpftrace``, which compiles with clang) run side by side with the rest: every lab run
    starts with this probe."""
    with ThreadPoolExecutor(max_workers=2) as pool:
        pmu_probe, audit_probe = pool.submit(pmu), pool.submit(audit_ever_enabled)
        models = lscpu_models()
        topo = topology()
        counts = cpu_counts(topo)
        distinct = list(dict.fromkeys(models["models"]))
        return {
            "label": label or default_label(),
            "hostname": socket.gethostname(),
            "arch": platform.machine(),
            "cpu_vendor": models["vendor"],
            "cpu_model": " + ".join(distinct) if distinct else None,
            "cpu_models": distinct,
            "cpu_signature": models.get("signature"),
            **counts,
            "smt": smt_active(threads_per_core=counts["threads_per_core"]),
            "kernel": platform.release(),
            "distro": distro(),
            "virtualization": virtualization(models["hypervisor"]),
            "memory_bytes": memory_bytes(),
            "scratch_fs": scratch_fs(scratch),
            "perf_event_paranoid": perf_event_paranoid(),
            "pmu": pmu_probe.result(),
            "tracefs": tracefs(),
            "loop_devices": loop_devices(),
            "netns": netns(),
            "root": os.geteuid() == 0,
            "audit_ever_enabled": audit_probe.result(),
            "emulation": emulation(),
        }
