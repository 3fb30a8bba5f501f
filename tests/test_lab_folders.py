"""One folder is one case: every lab folder holds the same files (its tests included) and a valid
manifest, the nav, the home page and the CI workflow come from the manifests, and `labkit
new-lab` adds a case, its tests included, that builds by touching only its own folder, its
chapter and its results."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from labkit import manifest, newlab

ROOT = Path(__file__).resolve().parent.parent
LAB_FILES = {"run.sh", "record.py", "claims.toml", "original.toml", "exercises.toml", "lab.toml", "tests"}
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


def test_no_module_of_labkit_shadows_the_standard_library():
    """``python3 labkit/manifest.py`` (the Makefile's and the workflow's way, before any venv
    exists) puts labkit/ first on sys.path: a top-level module named like a standard one
    (``numbers.py``) would be imported in its place by the standard library itself. ``site``
    is the exception: the interpreter imports the standard one at start-up, before the
    script's folder joins sys.path (and ``python3 labkit/manifest.py`` runs, below)."""
    clash = sorted(p.name for p in (ROOT / "labkit").iterdir()
                   if (p.suffix == ".py" or (p / "__init__.py").is_file()) and p.stem in sys.stdlib_module_names)
    assert clash == ["site"], clash


def _lab_commands(in_guest: bool = True):
    """(path, line, code) for every command line of the labs' shell scripts (labs/*/*.sh and
    labs/lib): a command spread over lines with a backslash is read as one, comment lines are
    left out, and ``code`` is the line with its quoted text (a group's description, a case
    value) blanked and a trailing comment cut. ``in_guest=False`` leaves out the jobs that run
    in a guest (``guest_job.sh``)."""
    for path in sorted((ROOT / "labs").glob("*/*.sh")) + sorted((ROOT / "labs" / "lib").glob("*.sh")):
        if not in_guest and path.name == "guest_job.sh":
            continue
        for line in path.read_text().replace("\\\n", " ").splitlines():
            if not line.lstrip().startswith("#"):
                yield path, line, re.sub(r"\"[^\"]*\"|'[^']*'", "''", line).split(" #")[0]


def test_every_perf_record_of_a_lab_keeps_out_of_the_home_directory():
    """perf record (and perf sched record, which runs it) copies the binaries it sampled into
    ~/.debug, the build-id cache, unless told not to: a lab writes only in its scratch and out
    directories, so every recording a lab's scripts run on the host passes --no-buildid-cache
    (quoted text is not a command, nor is ``perf record -h``). A job run in a guest
    (``guest_job.sh``) is left out: the guest's files go with the guest."""
    missing = [(path.relative_to(ROOT).as_posix(), line.strip()[:120]) for path, line, code in _lab_commands(in_guest=False)
               if re.search(r"\bperf( sched)? record\b(?! -h\b)", code) and "--no-buildid-cache" not in code]
    assert missing == [], missing


def test_every_perf_script_of_a_lab_names_its_fields():
    """What perf script prints by default depends on perf's version and on how the file was
    recorded; the parsers and inferno read that text, so every ``perf script`` a lab runs, in a
    guest too, names its fields with ``-F`` (labs/lib/lab.sh ``LAB_PERF_*``)."""
    missing = [(path.relative_to(ROOT).as_posix(), line.strip()[:120]) for path, line, code in _lab_commands()
               if re.search(r"\bperf script\b", code) and not re.search(r"\bperf script\b.* -F ", code)]
    assert missing == [], missing


def _module(path: Path):
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_new_lab_writes_its_tests_and_its_record_test_passes(tmp_path):
    """`labkit new-lab` (its files only, nothing run) writes the lab's tests beside its code: a
    fast test of its record.py on hand-made outputs, which passes as written, and a real quick
    run marked for the lab tier."""
    root = tmp_path / "repo"
    (root / "labs").mkdir(parents=True)
    (root / "docs" / "cases").mkdir(parents=True)
    files = {p.relative_to(root).as_posix() for p in newlab.scaffold("demo", root)}
    assert {"labs/demo/tests/test_demo_record.py", "labs/demo/tests/test_demo_lab.py"} <= files
    assert LAB_FILES <= {p.name for p in (root / "labs" / "demo").iterdir()}
    fast = _module(root / "labs" / "demo" / "tests" / "test_demo_record.py")
    assert not hasattr(fast, "pytestmark")                              # the fast tier
    fast.test_one_measurement_per_block_size_and_sync(tmp_path)
    lab = _module(root / "labs" / "demo" / "tests" / "test_demo_lab.py")
    assert lab.pytestmark.name == "lab"


def test_new_lab_is_refused_before_writing_while_a_lab_runs(tmp_path, monkeypatch, capsys):
    """`labkit new-lab NAME` runs the new lab once for the result its page needs; while another
    lab run holds the host's lock that run would be refused, so new-lab refuses first (one
    line naming the holder, exit 2) and writes nothing. With --no-run it scaffolds as usual."""
    from labkit import cli, results
    root = tmp_path / "repo"
    (root / "labs").mkdir(parents=True)
    (root / "docs" / "cases").mkdir(parents=True)
    monkeypatch.setattr(results, "ROOT", root)
    monkeypatch.setenv("PCB_LOCK_DIR", str(tmp_path))
    holder = subprocess.Popen([sys.executable, "-c", "import fcntl, os, sys, time; fd = os.open(sys.argv[1], os.O_RDONLY | os.O_CREAT);"
                               " fcntl.flock(fd, fcntl.LOCK_EX); print('held', flush=True); time.sleep(60)",
                               str(tmp_path / "perf-casebook.lock")], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        assert cli.main(["new-lab", "demo"]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "another lab run is in progress" in err[0] and f"pid {holder.pid}" in err[0], err
        assert not (root / "labs" / "demo").exists() and not (root / "docs" / "cases" / "demo.md").exists()
        assert cli.main(["new-lab", "demo", "--no-run"]) == 0
        assert (root / "labs" / "demo" / "run.sh").is_file()
    finally:
        holder.kill()
        holder.wait()


@pytest.mark.lab
@pytest.mark.slow
@pytest.mark.timeout(300)
def test_new_lab_builds_with_only_its_own_files(tmp_path):
    """In a clone: `labkit new-lab demo` (which runs the new lab once, quick, into local-results,
    which git ignores) then `mkdocs build --strict`: the site has /cases/demo/, and git sees
    changes only in labs/demo/ and docs/cases/demo.md."""
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
    for tool in (".venv", ".tools"):
        if (ROOT / tool).exists():
            (clone / tool).symlink_to(ROOT / tool)
    env = dict(os.environ, PYTHONPATH=str(clone), NO_MKDOCS_2_WARNING="1")
    env.pop("PERF_CASEBOOK_LOCAL", None)        # the clone's own local-results: the new lab's run only
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
    assert changed and all(p.startswith(("labs/demo/", "docs/cases/demo.md")) for p in changed), changed
    assert "labs/demo/tests/test_demo_record.py" in changed and "labs/demo/tests/test_demo_lab.py" in changed
    assert (clone / "local-results" / "demo-host" / "demo.json").is_file()
    assert not (clone / "results" / "demo-host").exists()
    assert "demo-host (your machine)" in (tmp_path / "site" / "evidence" / "demo" / "index.html").read_text()
