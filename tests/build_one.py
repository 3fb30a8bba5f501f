"""Build the site with only one chapter (plus index, method, hosts), for working on that
chapter while others are unfinished:  .venv/bin/python tests/build_one.py LAB [--serve]

Writes .mkdocs-LAB.yml and .docs-LAB/ (both git-ignored) in the repo root.
"""

import shutil
import subprocess
import sys
from pathlib import Path


ROOT = Path(__file__).resolve().parent.parent


def main() -> int:
    lab = sys.argv[1]
    docs = ROOT / f".docs-{lab}"
    if docs.exists():
        shutil.rmtree(docs)
    (docs / "cases").mkdir(parents=True)
    for name in ("index.md", "method.md", "hosts.md", "assets"):
        (docs / name).symlink_to(ROOT / "docs" / name)
    (docs / "cases" / f"{lab}.md").symlink_to(ROOT / "docs" / "cases" / f"{lab}.md")
    for other in (ROOT / "docs" / "cases").glob("*.md"):  # stubs, so index.md's links resolve
        if other.stem != lab:
            (docs / "cases" / other.name).write_text(f"# {other.stem}\n\n(not built by build_one.py)\n")
    text = (ROOT / "mkdocs.yml").read_text()
    cfg_lines = []
    for line in text.splitlines():
        cfg_lines.append(line)
    cfg = "\n".join(cfg_lines).split("\nnav:")[0]
    cfg += f"\ndocs_dir: .docs-{lab}\nsite_dir: .site-{lab}\nnav:\n  - Home: index.md\n" + "".join(f"  - cases/{p.name}\n" for p in sorted((ROOT / "docs" / "cases").glob("*.md"))) + "  - Hosts: hosts.md\n"
    conf = ROOT / f".mkdocs-{lab}.yml"
    conf.write_text(cfg)
    cmd = [sys.executable, "-m", "mkdocs", "serve" if "--serve" in sys.argv else "build", "--strict", "-f", str(conf)]
    return subprocess.call(cmd, cwd=ROOT, env={**__import__("os").environ, "NO_MKDOCS_2_WARNING": "1"})


if __name__ == "__main__":
    raise SystemExit(main())
