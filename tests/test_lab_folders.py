"""One folder is one case: every lab folder holds the same files and a valid manifest, the nav,
the home page and the CI workflow come from the manifests, and `labkit new-lab` adds a case that
builds by touching only its own folder, its chapter and its results."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from labkit import manifest

ROOT = Path(__file__).resolve().parent.parent
LAB_FILES = {"run.sh", "record.py", "claims.toml", "original.toml", "exercises.toml", "lab.toml"}
LABS = [m["name"] for m in manifest.labs(ROOT)]


def test_every_lab_folder_is_a_case():
    folders = sorted(d.name for d in (ROOT / "labs").iterdir() if d.is_dir() and d.name != "lib")
    assert sorted(LABS) == folders, "a lab folder without run.sh and lab.toml, or the reverse"
    for lab in LABS:
        missing = LAB_FILES - {p.name for p in (ROOT / "labs" / lab).iterdir()}
        assert not missing, f"labs/{lab} lacks {sorted(missing)}"
        assert (ROOT / "docs" / "cases" / f"{lab}.md").is_file(), f"no chapter docs/cases/{lab}.md"


def test_a_bad_manifest_is_refused(tmp_path):
    (tmp_path / "lab.toml").write_text('title = "t"\norder = 1\n')
    with pytest.raises(manifest.ManifestError, match=r"lab.toml: \$: 'problem' is a required property"):
        manifest.load(tmp_path)
    (tmp_path / "lab.toml").write_text('title = "t"\norder = 1\nproblem = "p"\npractise = "q"\ndebs = ["Bad Name"]\n'
                                       'quick_budget_s = 1\nfull_budget_s = 2\n[case]\nrep = "int"\n')
    with pytest.raises(manifest.ManifestError, match=r"\$\.debs\[0\]: 'Bad Name' does not match"):
        manifest.load(tmp_path)
    (tmp_path / "lab.toml").write_text('title = "t"\norder = 1\nproblem = "p"\npractise = "q"\ndebs = []\n'
                                       'quick_budget_s = 1\nfull_budget_s = 2\n[case]\nkernel = "version"\n')
    with pytest.raises(manifest.ManifestError, match=r"\$\.case\.kernel: 'version' is not one of"):
        manifest.load(tmp_path)
    (tmp_path / "lab.toml").write_text("title = ")
    with pytest.raises(manifest.ManifestError, match="not valid TOML"):
        manifest.load(tmp_path)


def test_the_workflow_and_the_makefile_name_no_lab():
    workflow = (ROOT / ".github" / "workflows" / "labs.yml").read_text()
    assert not [lab for lab in LABS if lab in workflow]
    out = subprocess.run([sys.executable, str(ROOT / "labkit" / "manifest.py"), "--matrix"], capture_output=True,
                         text=True, check=True).stdout
    assert out.strip() == '{"lab": [' + ", ".join(f'"{lab}"' for lab in LABS) + "]}"
    debs = subprocess.run(["make", "-s", "-n", "debs"], cwd=ROOT, capture_output=True, text=True).stdout
    for lab in LABS:
        for pkg in manifest.load(ROOT / "labs" / lab).get("debs", []):
            assert f" {pkg} " in f" {debs} ", (lab, pkg)


@pytest.mark.lab
@pytest.mark.slow
@pytest.mark.timeout(300)
def test_new_lab_builds_with_only_its_own_files(tmp_path):
    """In a clone: `labkit new-lab demo` (which runs the new lab once, quick) then `mkdocs build
    --strict`: the site has /cases/demo/, and git sees changes only in labs/demo/,
    docs/cases/demo.md and results/<host>/demo*."""
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
    for tool in (".venv", ".tools"):
        if (ROOT / tool).exists():
            (clone / tool).symlink_to(ROOT / tool)
    env = dict(os.environ, PYTHONPATH=str(clone), PERF_CASEBOOK_LOCAL="0", NO_MKDOCS_2_WARNING="1")
    made = subprocess.run([sys.executable, "-m", "labkit", "new-lab", "demo", "--host", "demo-host"], cwd=clone,
                          env=env, capture_output=True, text=True, timeout=200, stdin=subprocess.DEVNULL)
    assert made.returncode == 0, made.stdout[-2000:] + made.stderr[-2000:]
    built = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(tmp_path / "site")],
                           cwd=clone, env=env, capture_output=True, text=True, timeout=200)
    assert built.returncode == 0, built.stderr[-3000:]
    assert (tmp_path / "site" / "cases" / "demo" / "index.html").is_file()
    status = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=clone,
                            capture_output=True, text=True, check=True).stdout.splitlines()
    changed = sorted(line[3:] for line in status if not line[3:].startswith((".venv", ".tools")))
    assert changed and all(p.startswith(("labs/demo/", "docs/cases/demo.md", "results/demo-host/demo"))
                           for p in changed), changed
    shutil.rmtree(clone / "results" / "demo-host", ignore_errors=True)
