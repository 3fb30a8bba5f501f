"""`make bench`: figures, not a timed test. Prints each lab's quick (and with --full, full)
wall time, the `mkdocs build` time with all results, and the transferred (gzip) size of each
built page, excluding flame graphs, against the targets: lab quick ≤ 120 s, build ≤ 10 s,
chapter page ≤ 400 KB.

Usage: .venv/bin/python tests/bench.py [--full] [--labs lat_tcp,...]
"""

from __future__ import annotations

import argparse
import gzip
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
from conftest import build_site  # noqa: E402


def run_lab(lab: str, quick: bool, out: Path) -> tuple[float, int]:
    t0 = time.time()
    args = ["bash", str(ROOT / "labs" / lab / "run.sh"), "--out", str(out), "--host", "bench"]
    if quick:
        args.append("--quick")
    rc = subprocess.run(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode
    return time.time() - t0, rc


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--full", action="store_true", help="also time each lab's full run")
    ap.add_argument("--labs", help="comma-separated labs (default: all)")
    a = ap.parse_args()
    labs = a.labs.split(",") if a.labs else sorted(p.parent.name for p in ROOT.glob("labs/*/run.sh"))
    print(f"{'lab':<16}{'mode':<7}{'wall s':>9}{'exit':>6}  target")
    with tempfile.TemporaryDirectory() as tmp:
        for lab in labs:
            for quick in ([True, False] if a.full else [True]):
                secs, rc = run_lab(lab, quick, Path(tmp) / lab / ("quick" if quick else "full"))
                target = "≤ 120 s " + ("ok" if secs <= 120 else "OVER") if quick else ""
                print(f"{lab:<16}{'quick' if quick else 'full':<7}{secs:>9.1f}{rc:>6}  {target}")
        site = Path(tmp) / "site"
        t0 = time.time()
        proc = build_site(site)
        build_s = time.time() - t0
        print(f"\nmkdocs build --strict: {build_s:.1f} s (target ≤ 10 s){'' if proc.returncode == 0 else '  FAILED'}")
        print(f"\n{'page':<40}{'html KB':>9}{'gzip KB':>9}  target (chapters ≤ 400 KB transferred)")
        for page in sorted(site.rglob("index.html")):
            raw = page.read_bytes()
            gz = len(gzip.compress(raw))
            rel = str(page.parent.relative_to(site)) or "/"
            flag = ""
            if rel.startswith("cases/"):
                flag = "ok" if gz <= 400_000 else "OVER"
            print(f"{rel:<40}{len(raw) / 1000:>9.0f}{gz / 1000:>9.0f}  {flag}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
