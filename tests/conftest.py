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
def committed_site(tmp_path_factory) -> Path:
    """The site built once per session from the committed results alone (no lab run): a
    directory for tests to serve their way (tests/test_budgets.py gzip-compressed, as a web host
    would; tests/test_browser.py plainly). A test that adds a page removes it again."""
    site = tmp_path_factory.mktemp("site-committed")
    built = build_site(site)
    assert built.returncode == 0, built.stderr[-3000:]
    return site


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


# ---- test tiers ------------------------------------------------------------------------------
#
# make test      the fast tier: -m "not lab and not guest and not slow" (no lab run for real, no
#                guest boot; at most 3 minutes on 2 cores)
# make test-all  everything (what .ci/run runs)
#
# Markers are given here by rule, so that a new test lands in the right tier by what it uses:
#   lab    runs a lab for real (root-heavy): uses a fixture that runs one (LAB_FIXTURES), or calls
#          labrun.interrupt_at, or is marked so in its file
#   guest  boots a QEMU guest: marked so in its file, or uses a fixture that boots one (GUEST_FIXTURES)
#   slow   fast-tier material that takes long: a browser (every `browser` test), whole site builds (SLOW_FILES)
# Every test gets a pytest-timeout: its own @pytest.mark.timeout, else TIMEOUTS by tier.

LAB_FIXTURES = {"quick_run", "quick", "lat_tcp_quick"}
GUEST_FIXTURES = {"guest_run", "arm64_run"}
SLOW_FILES = {"test_browser.py", "test_site.py"}
TIMEOUTS = {"guest": 1200, "lab": 600, "slow": 600, None: 120}


def pytest_configure(config):
    for line in ("lab: runs a lab for real (needs root for most steps); not in the fast tier",
                 "guest: boots a QEMU guest (minutes under TCG); not in the fast tier",
                 "slow: takes long without running a lab (site builds, a browser); not in the fast tier",
                 "browser: drives headless Chromium"):
        config.addinivalue_line("markers", line)


def _calls_interrupt_at(item) -> bool:
    import inspect
    fn = getattr(item, "function", None)
    try:
        return fn is not None and "interrupt_at(" in inspect.getsource(fn)
    except (OSError, TypeError):
        return False


def pytest_collection_modifyitems(config, items):
    for item in items:
        names = set(getattr(item, "fixturenames", ()))
        if names & GUEST_FIXTURES and not item.get_closest_marker("guest"):
            item.add_marker(pytest.mark.guest)
        if (names & LAB_FIXTURES or _calls_interrupt_at(item)) and not item.get_closest_marker("lab"):
            item.add_marker(pytest.mark.lab)
        if (item.path.name in SLOW_FILES or item.get_closest_marker("browser")) and not item.get_closest_marker("slow"):
            item.add_marker(pytest.mark.slow)
        if not item.get_closest_marker("timeout"):
            tier = next((t for t in ("guest", "lab", "slow") if item.get_closest_marker(t)), None)
            item.add_marker(pytest.mark.timeout(TIMEOUTS[tier]))


@pytest.fixture
def tree(tmp_path, monkeypatch):
    """A checkout-like tree with labs/ and results/ (the committed host folders, their files linked,
    never written) that labkit.macros reads instead of the repository; the macros' host cache is
    reset around the test."""
    from labkit import macros
    root = tmp_path / "repo"
    shutil.copytree(ROOT / "labs", root / "labs")
    for host in (ROOT / "results").iterdir():
        if host.is_dir():
            (root / "results" / host.name).mkdir(parents=True)
            for f in host.iterdir():
                (root / "results" / host.name / f.name).symlink_to(f)
    monkeypatch.setattr(macros, "ROOT", root)
    monkeypatch.setenv("PERF_CASEBOOK_LOCAL", "0")
    monkeypatch.delenv("PERF_CASEBOOK_RESULTS", raising=False)
    macros._HOSTS_CACHE = None
    yield root
    macros._HOSTS_CACHE = None
