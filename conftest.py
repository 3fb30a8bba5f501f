"""The suite's rootdir conftest, for tests/ and every lab's own tests (labs/<lab>/tests/): the
test tiers and their guard, and shared fixtures: the repo root, a built site served on
127.0.0.1, Debian's Chromium for Playwright (never a downloaded browser), and a real quick run
of each lab per session. Helpers shared by the tests (tests/labrun.py, ...) are importable by
name from both places: pyproject.toml's ``pythonpath = ["tests"]``."""

from __future__ import annotations

import contextlib
import functools
import http.server
import os
import re
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent
CHROMIUM = (shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
            or "/usr/bin/chromium")
ARTIFACTS = ROOT / "test-artifacts"


def build_site(site_dir: Path, config: Path = ROOT / "mkdocs.yml", env: dict | None = None) -> subprocess.CompletedProcess:
    """``mkdocs build --strict`` of ``config`` into ``site_dir``; returns the finished process."""
    # Copies of the repository share the checkout's build cache: its entries are named by the
    # hash of what makes them, so a copy with other data only adds entries.
    e = dict(os.environ, NO_MKDOCS_2_WARNING="1", PERF_CASEBOOK_LOCAL="0",
             PCB_BUILD_CACHE=os.environ.get("PCB_BUILD_CACHE", str(ROOT / ".cache")))
    e.update(env or {})
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
    runner makes it (.github/ci-labs.sh: the lab under asciinema, the cast attached; as root,
    inside every step of the workflow's lab job, .github/run-lab-job.py), stored as host
    ``test-quick`` in a folder of host folders (usable as PERF_CASEBOOK_RESULTS).

    Returns (finished process, host folder, wall seconds of the lab alone).
    """
    hosts = tmp_path_factory.mktemp("hosts")
    if os.geteuid() == 0:
        # As root, the workflow's whole lab job (apt, tools, the kernel check, then ci-labs.sh as
        # above): tests/test_ci_local.py checks its steps, the others its result.
        argv = [sys.executable, str(ROOT / ".github" / "run-lab-job.py"), "--lab", "lat_tcp", "--out", str(hosts),
                "--host", "test-quick"]
    else:
        argv = ["bash", str(ROOT / ".github" / "ci-labs.sh"), "--labs", "lat_tcp", "--host", "test-quick", "--out",
                str(hosts)]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=880, stdin=subprocess.DEVNULL,
                          env=dict(os.environ, GITHUB_ACTIONS=""))
    out = hosts / "test-quick"
    summary = (out / "ci-labs.tsv").read_text().split("\t") if (out / "ci-labs.tsv").exists() else ["", "", "0"]
    return proc, out, float(summary[2])


# ---- test tiers ------------------------------------------------------------------------------
#
# make test      the fast tier: -m "not lab and not guest and not slow and not timing" (no lab
#                run for real, no guest boot, no browser, no site build; at most 150 s on 2 cores)
# make test-all  everything (what .ci/run runs)
#
# Tiers are explicit marks: `lab` (runs a lab for real, in a guest too), `guest` (boots a QEMU guest), `browser`
# (drives Chromium; every browser test is also `slow`), `slow` (a whole site build, or long
# otherwise), `timing` (measures speed, as Lighthouse does: run alone); `no_run` lets a fast test
# start a lab for its --help or a refused bad usage. A test file or test says its own; nothing
# reads test source to guess it. What a
# test starts is checked while it runs (:func:`tier_of`, the guard in pytest_runtest_*): a test
# that starts a lab, a guest, a browser or a site build without its mark fails, naming the mark.
# Every test gets a pytest-timeout: its own @pytest.mark.timeout, else TIMEOUTS by tier.

TIMEOUTS = {"guest": 1200, "lab": 600, "slow": 600, None: 120}
_STARTS = [
    (re.compile(r"(^|/)labs/[^/]+/run\.sh$"), "lab"),
    (re.compile(r"(^|/)\.github/(ci-labs|lab-job)\.sh$"), "lab"),
    (re.compile(r"(^|/)qemu-system-[\w-]+$"), "guest"),
    (re.compile(r"(^|/)lighthouse$"), "timing"),
    (re.compile(r"(^|/)(chromium|chromium-browser|google-chrome)$|playwright/driver"), "browser"),
]


_WRAPPERS = {"env", "timeout", "setsid", "sudo", "bash", "sh", "nohup", "nice", "taskset"}


def tier_of(argv) -> str | None:
    """The mark a test needs to start ``argv`` (a command as subprocess takes it): ``lab`` for a
    lab's run.sh (with ``--guest`` too: the run holds the host's one lab lock, so it runs in the
    serial tier like any lab), ``guest`` for QEMU, ``browser`` for
    Chromium or Playwright's driver, ``timing`` for Lighthouse (it scores speed: never beside
    another test), ``slow`` for ``mkdocs build``; None otherwise."""
    args = [str(a) for a in (argv if isinstance(argv, (list, tuple)) else str(argv).split())]
    # The program that runs: past wrappers (env, timeout, setsid, sudo, bash, sh), their options
    # and VAR=value words; an argument of another program (shellcheck run.sh) is not a start.
    prog = None
    for i, a in enumerate(args):
        if a.startswith("-") or ("=" in a and "/" not in a.split("=", 1)[0]):
            continue
        if Path(a).name in _WRAPPERS or (i and Path(args[i - 1]).name == "timeout" and a.replace(".", "").isdigit()):
            continue
        prog = a
        break
    for pattern, tier in _STARTS:
        if prog and pattern.search(prog):
            return tier
    if "mkdocs" in args and "build" in args:
        return "slow"
    return None


def _needs(item, tier: str) -> bool:
    if tier in ("lab", "guest") and item.get_closest_marker("no_run"):
        return False          # a lab started only to check that it refuses or explains, and starts nothing
    return tier is not None and not item.get_closest_marker(tier)


_CURRENT: list = []   # the test item setting up or running now (empty between items)


def _audit(event: str, args: tuple) -> None:
    """sys.addaudithook hook: on ``subprocess.Popen`` (raised by Popen before it starts the
    child; args: executable, args, cwd, env), refuse a subprocess the current item's marks do
    not allow."""
    if event != "subprocess.Popen" or not _CURRENT:
        return
    item, argv = _CURRENT[-1], args[1]
    tier = tier_of(argv)
    if _needs(item, tier):
        pytest.fail(f"{item.nodeid} starts {argv if isinstance(argv, str) else ' '.join(map(str, argv))[:120]!r} "
                    f"but is not marked @pytest.mark.{tier}: mark it (a pytestmark line in its file)", pytrace=False)


sys.addaudithook(_audit)   # audit hooks cannot be removed: it checks _CURRENT, set by _guard


@contextlib.contextmanager
def _guard(item):
    """While ``item`` sets up or runs, refuse a subprocess its marks do not allow (:func:`_audit`)."""
    _CURRENT.append(item)
    try:
        yield
    finally:
        _CURRENT.pop()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item):
    with _guard(item):
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    with _guard(item):
        return (yield)


def pytest_configure(config):
    for line in ("lab: runs a lab for real (needs root for most steps); not in the fast tier",
                 "guest: boots a QEMU guest (minutes under TCG); not in the fast tier",
                 "slow: takes long without running a lab (site builds, a browser); not in the fast tier",
                 "browser: drives headless Chromium (also slow)",
                 "timing: measures speed or time (Lighthouse): runs alone, never beside another test",
                 "no_run: starts a lab only for its --help or a bad-usage refusal (nothing runs: fast tier)"):
        config.addinivalue_line("markers", line)


def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.get_closest_marker("browser") and not item.get_closest_marker("slow"):
            item.add_marker(pytest.mark.slow)
        if not item.get_closest_marker("timeout"):
            tier = next((t for t in ("guest", "lab", "slow") if item.get_closest_marker(t)), None)
            item.add_marker(pytest.mark.timeout(TIMEOUTS[tier]))


def _results_status() -> str | None:
    """``git status --porcelain -- results`` of the checkout (None outside a git checkout)."""
    proc = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "--", "results"], capture_output=True,
                          text=True, timeout=60)
    return proc.stdout if proc.returncode == 0 else None


@pytest.fixture(scope="session", autouse=True)
def committed_results_stay_as_they_are():
    """The committed results are linked into tests' trees (:func:`tree`, and a second host's kept
    outputs in tests/test_macros_render.py ``add_host``), never copied: a test that wrote
    through such a link would change them. Checked once a session (each xdist worker's): the
    results' git status must be the same at the end as at the start."""
    before = _results_status()
    yield
    after = _results_status()
    if before is not None and after != before:
        pytest.fail(f"a test changed the committed results (git status -- results):\n{after}", pytrace=False)


@pytest.fixture
def tree(tmp_path, monkeypatch):
    """A checkout-like tree with labs/ and results/ (the committed host folders, their files linked,
    never written) that labkit.site.macros reads instead of the repository; the macros' host cache is
    reset around the test."""
    from labkit.site.macros import build
    root = tmp_path / "repo"
    shutil.copytree(ROOT / "labs", root / "labs")
    for host in (ROOT / "results").iterdir():
        if host.is_dir():
            (root / "results" / host.name).mkdir(parents=True)
            for f in host.iterdir():
                (root / "results" / host.name / f.name).symlink_to(f)
    monkeypatch.setattr(build, "ROOT", root)
    monkeypatch.setenv("PERF_CASEBOOK_LOCAL", "0")
    monkeypatch.delenv("PERF_CASEBOOK_RESULTS", raising=False)
    monkeypatch.setattr(build, "hosts_cache", None)
    yield root


@pytest.fixture
def watched(page):
    """The page with console errors and every requested URL recorded."""
    errors, requests = [], []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("request", lambda r: requests.append(r.url))
    return page, errors, requests
