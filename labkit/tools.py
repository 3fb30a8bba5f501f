"""Versions of the tools a lab used, read from each tool itself."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

# How to ask a tool for its version when ``--version`` is not the way.
VERSION_ARGS = {
    "taskset": ["--version"],
    "perf": ["--version"],
    "strace": ["-V"],
    "sockperf": ["--version"],
    "fio": ["--version"],
    "inferno-flamegraph": ["--version"],
    "blktrace": ["-v"],
    "ip": ["-V"],
}


def version(tool: str) -> str:
    """First non-empty line a tool prints about its version, or ``"not installed"``.

    Example: ``version("gcc")`` → ``"gcc (Debian 12.2.0-14+deb12u1) 12.2.0"``.
    """
    if tool.startswith("inferno-"):
        return _cargo_version(tool, "inferno")
    args = VERSION_ARGS.get(tool, ["--version"])
    try:
        proc = subprocess.run([tool, *args], capture_output=True, text=True, timeout=10)
    except FileNotFoundError:
        return "not installed"
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"unknown ({exc.__class__.__name__})"
    text = re.sub(r"\x1b\[[0-9;]*m", "", proc.stdout + "\n" + proc.stderr)
    for line in text.splitlines():
        line = line.strip()
        if line and re.search(r"\d", line):
            return line[:200]
    return "unknown"


def versions(tools: list[str]) -> dict[str, str]:
    """``{tool: version}`` for each named tool (order kept, duplicates dropped)."""
    return {t: version(t) for t in dict.fromkeys(t for t in tools if t)}


def _cargo_version(tool: str, crate: str) -> str:
    """Version of a crate installed by ``cargo install --root DIR``, from DIR/.crates.toml
    (inferno's programs have no ``--version``)."""
    path = shutil.which(tool)
    if not path:
        return "not installed"
    crates = Path(path).resolve().parent.parent / ".crates.toml"
    m = re.search(rf'"{crate} ([^ "]+)', crates.read_text()) if crates.exists() else None
    return f"{crate} {m.group(1)}" if m else "unknown"
