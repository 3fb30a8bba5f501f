"""Shared fixtures: the repo root, a built site served on 127.0.0.1, Debian's Chromium for
Playwright (never a downloaded browser), and a real quick run of each lab per session."""

from __future__ import annotations

import functools
import http.server
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
CHROMIUM = (shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
            or "/usr/bin/chromium")
ARTIFACTS = ROOT / "test-artifacts"


def build_site(site_dir: Path, config: Path = ROOT / "mkdocs.yml", env: dict | None = None) -> subprocess.CompletedProcess:
    """``mkdocs build --strict`` of ``config`` into ``site_dir``; returns the finished process."""
    e = dict(os.environ, NO_MKDOCS_2_WARNING="1", PERF_CASEBOOK_LOCAL="0", **(env or {}))
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(config), "-d", str(site_dir)],
                          capture_output=True, text=True, env=e, cwd=config.parent)


@pytest.fixture(scope="session")
def root() -> Path:
    return ROOT


@pytest.fixture(scope="session")
def artifacts_dir() -> Path:
    ARTIFACTS.mkdir(exist_ok=True)
    return ARTIFACTS


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


def serve(directory: Path):
    """Serve ``directory`` on 127.0.0.1 (random port) in a thread; returns (server, base_url)."""
    handler = functools.partial(_QuietHandler, directory=str(directory))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


@pytest.fixture(scope="session")
def browser_type_launch_args(browser_type_launch_args):
    """pytest-playwright: launch Debian's Chromium headless, as root, with no background traffic."""
    if not Path(CHROMIUM).exists():
        pytest.skip("Debian chromium not installed (make setup installs it as root)")
    return {
        **browser_type_launch_args,
        "executable_path": CHROMIUM,
        "args": ["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--disable-quic"],
    }


@pytest.fixture(scope="session")
def lat_tcp_quick(tmp_path_factory):
    """One real quick run of the lat_tcp lab for the whole session, made exactly as a CI
    runner makes it (.github/ci-labs.sh: the lab under asciinema, the cast attached), stored
    as host ``test-quick`` in a folder of host folders (usable as PERF_CASEBOOK_RESULTS).

    Returns (finished process, host folder, wall seconds of the lab alone).
    """
    hosts = tmp_path_factory.mktemp("hosts")
    proc = subprocess.run(["bash", str(ROOT / ".github" / "ci-labs.sh"), "--labs", "lat_tcp", "--host", "test-quick",
                           "--out", str(hosts)], capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    out = hosts / "test-quick"
    summary = (out / "ci-labs.tsv").read_text().split("\t") if (out / "ci-labs.tsv").exists() else ["", "", "0"]
    return proc, out, float(summary[2])
