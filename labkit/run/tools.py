"""Versions of the tools a lab used, read from each tool itself.

Each tool is asked with its own version flag (:data:`VERSION_ARGS`; ``--version`` for the
rest) and the first line of its answer that holds a version number is kept. A tool with no
version flag (``auditd``) is named by the version of the package that installed it (dpkg or
rpm); inferno's programs by cargo's install record. A usage line, an error or anything
without a version number is never recorded as a version: the result says ``unknown (...)``.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

# How to ask a tool for its version when ``--version`` is not the way (from each tool's
# manual page). None: the tool has no version flag; its package is asked instead.
VERSION_ARGS: dict[str, list[str] | None] = {
    "strace": ["-V"],
    "blktrace": ["-v"],
    "blkparse": ["-V"],
    "btt": ["-V"],
    "ip": ["-V"],
    "mkfs.xfs": ["-V"],
    "mkfs.ext4": ["-V"],
    "mke2fs": ["-V"],
    "auditctl": ["-v"],
    "auditd": None,
    "iostat": ["-V"],
    "mpstat": ["-V"],
    "pidstat": ["-V"],
    "sar": ["-V"],
}

_VERSION = re.compile(r"(?<![\d.])\d+\.\d+")
_NOT_A_VERSION = re.compile(r"(?i)\b(usage|invalid|unknown|unrecognized|illegal|error|not installed)\b|^(\[|-|/\*)")


def looks_like_version(text: str) -> bool:
    """True if ``text`` reads like a tool's version line: it holds a dotted number
    (``6.1.0``, ``v0.17.0``, ``fio-3.33``) and is not a usage line or an error."""
    return bool(_VERSION.search(text)) and not _NOT_A_VERSION.search(text.strip())


def version(tool: str) -> str:
    """The first line a tool prints about its version that holds a version number,
    ``"not installed"``, or ``"unknown (<why>)"``.

    Example: ``version("gcc")`` → ``"gcc (Debian 12.2.0-14+deb12u1) 12.2.0"``;
    ``version("mkfs.xfs")`` → ``"mkfs.xfs version 6.1.0"``.
    """
    if tool.startswith("inferno-"):
        return _cargo_version(tool, "inferno")
    path = shutil.which(tool)
    if not path:
        return "not installed"
    args = VERSION_ARGS.get(tool, ["--version"])
    if args is None:
        return _package_version(tool, path)
    try:
        proc = subprocess.run([tool, *args], capture_output=True, text=True, timeout=10, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"unknown ({exc.__class__.__name__})"
    text = re.sub(r"\x1b\[[0-9;]*m", "", proc.stdout + "\n" + proc.stderr)
    for line in text.splitlines():
        line = line.strip()
        if looks_like_version(line):
            return line[:200]
    pkg = _package_version(tool, path)
    return pkg if looks_like_version(pkg) else f"unknown ({tool} {' '.join(args)} printed no version)"


def versions(tools: list[str]) -> dict[str, str]:
    """``{tool: version}`` for each named tool (order kept, duplicates dropped)."""
    return {t: version(t) for t in dict.fromkeys(t for t in tools if t)}


def _package_version(tool: str, path: str) -> str:
    """``"<tool> (package <name> <version>)"`` from the package manager that owns ``path``."""
    for query in (_dpkg, _rpm):
        try:
            got = query(path)
        except (OSError, subprocess.TimeoutExpired):
            got = None
        if got:
            return f"{tool} (package {got})"
    return f"unknown ({tool} has no version flag and no package owns {path})"


def _dpkg(path: str) -> str | None:
    if not shutil.which("dpkg-query"):
        return None
    real = str(Path(path).resolve())
    # with a merged /usr, the package may list /sbin/x for /usr/sbin/x
    for candidate in dict.fromkeys([path, real, re.sub(r"^/usr/", "/", path), re.sub(r"^/usr/", "/", real)]):
        owner = subprocess.run(["dpkg-query", "-S", candidate], capture_output=True, text=True, timeout=10)
        if owner.returncode == 0 and ":" in owner.stdout:
            pkg = owner.stdout.split(":", 1)[0].split(",")[0].strip()
            ver = subprocess.run(["dpkg-query", "-W", "-f=${Version}", pkg], capture_output=True, text=True, timeout=10)
            if ver.returncode == 0 and ver.stdout.strip():
                return f"{pkg} {ver.stdout.strip()}"
    return None


def _rpm(path: str) -> str | None:
    if not shutil.which("rpm"):
        return None
    proc = subprocess.run(["rpm", "-qf", "--qf", "%{NAME} %{VERSION}-%{RELEASE}", path], capture_output=True, text=True,
                          timeout=10)
    return proc.stdout.strip() if proc.returncode == 0 and proc.stdout.strip() else None


def _cargo_version(tool: str, crate: str) -> str:
    """Version of a crate installed by ``cargo install --root DIR``, from DIR/.crates.toml
    (inferno's programs have no ``--version``)."""
    path = shutil.which(tool)
    if not path:
        return "not installed"
    crates = Path(path).resolve().parent.parent / ".crates.toml"
    m = re.search(rf'"{crate} ([^ "]+)', crates.read_text()) if crates.exists() else None
    return f"{crate} {m.group(1)}" if m else f"unknown (no cargo install record of {crate} beside {path})"
