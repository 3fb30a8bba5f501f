"""The labs' order (labs/<lab>/lab.toml ``order``, then the folder's name) everywhere it is read:
labkit.manifest.labs, the nav's Cases and Evidence sections (mkdocs hook), the home page's table,
``python3 labkit/manifest.py --names/--matrix/--debs``, the package list ``make setup`` installs
(the Makefile's LAB_DEBS) and the CI workflow's lab matrix (its own ``run:`` line, run here).

The trees are built in tmp_path from the real lat_tcp manifest with its ``order``, ``title`` and
``debs`` rewritten, so that the order differs from the names' (file layouts, no measurements)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml

from labkit import manifest, results
from labkit.site import mkdocs_hooks
from labkit.site.macros import build, tables

ROOT = Path(__file__).resolve().parent.parent
TEMPLATE = (ROOT / "labs" / "lat_tcp" / "lab.toml").read_text()
# folder → (order, debs): by name a, b, c, d; by order d, b, a, c (a and c tie: by name)
LABS = {"alpha": (2, ["pkg-a", "pkg-shared"]), "bravo": (1, ["pkg-b"]), "charlie": (2, ["pkg-shared", "pkg-c"]),
        "delta": (0, ["pkg-d"])}
ORDER = ["delta", "bravo", "alpha", "charlie"]


def manifest_text(name: str, order: int, debs: list[str]) -> str:
    text = re.sub(r"(?m)^order = .*$", f"order = {order}", TEMPLATE)
    text = re.sub(r'(?m)^title = .*$', f'title = "Chapter {name}"', text)
    return re.sub(r"(?m)^debs = \[.*\]$", "debs = " + json.dumps(debs), text)


@pytest.fixture
def tree(tmp_path) -> Path:
    """A checkout's labs/ (four labs, a folder without run.sh, lib/) and the manifest's own code,
    runnable as ``python3 labkit/manifest.py`` there."""
    for name, (order, debs) in LABS.items():
        d = tmp_path / "labs" / name
        d.mkdir(parents=True)
        (d / "lab.toml").write_text(manifest_text(name, order, debs))
        (d / "run.sh").write_text("#!/bin/bash\n")
    (tmp_path / "labs" / "lib").mkdir()                                   # no run.sh: not a lab
    (tmp_path / "labs" / "aaa-draft").mkdir()
    (tmp_path / "labs" / "aaa-draft" / "lab.toml").write_text(manifest_text("aaa-draft", -1, ["pkg-draft"]))
    (tmp_path / "labkit").mkdir()
    for f in ("manifest.py", "tomlschema.py", "lab.schema.json"):
        shutil.copy(ROOT / "labkit" / f, tmp_path / "labkit" / f)
    return tmp_path


def test_the_template_has_the_keys_rewritten():
    for key in ("order", "title", "debs"):
        assert re.search(rf"(?m)^{key} = ", TEMPLATE), key
    assert tomllib.loads(manifest_text("x", 7, ["p"]))["order"] == 7


def test_labs_are_in_order_then_by_name(tree):
    got = manifest.labs(tree)
    assert [m["name"] for m in got] == ORDER
    assert [m["order"] for m in got] == [0, 1, 2, 2]
    assert got[0]["title"] == "Chapter delta" and got[0]["debs"] == ["pkg-d"]


def test_the_committed_labs_are_in_their_manifests_order():
    """The real labs: their order read here with tomllib alone, not by labkit.manifest."""
    folders = [d for d in (ROOT / "labs").iterdir() if (d / "run.sh").is_file()]
    want = [d.name for d in sorted(folders, key=lambda d: (tomllib.loads((d / "lab.toml").read_text())["order"], d.name))]
    assert [m["name"] for m in manifest.labs(ROOT)] == want
    assert want != sorted(want), "the committed order is the names' order: this test would not see a mixup"


def test_the_nav_lists_chapters_and_evidence_in_order(tree, monkeypatch):
    monkeypatch.setattr(results, "ROOT", tree)
    config = {"nav": [{"Home": "index.md"}, {"Cases": []}, {"Evidence": []}, {"Tools": []}]}
    mkdocs_hooks.on_config(config)
    nav = config["nav"]
    assert nav[0] == {"Home": "index.md"} and nav[3] == {"Tools": []}
    assert nav[1]["Cases"] == [{f"Chapter {n}": f"cases/{n}.md"} for n in ORDER]
    assert [list(e) for e in nav[2]["Evidence"]] == [[f"Chapter {n}"] for n in ORDER]
    assert [n in list(e.values())[0] for n, e in zip(ORDER, nav[2]["Evidence"])] == [True] * 4


def test_the_home_table_has_a_row_per_lab_in_order(tree, monkeypatch):
    monkeypatch.setattr(build, "ROOT", tree)
    rows = [line for line in tables.cases_table().splitlines() if line.startswith("| [")]
    assert [re.search(r"\(cases/(\w+)\.md\)", r).group(1) for r in rows] == ORDER


def script(tree: Path, *args: str) -> subprocess.CompletedProcess:
    """``python3 labkit/manifest.py ARGS`` in ``tree``, as the Makefile and the workflow run it
    (the system's python3, before any venv)."""
    return subprocess.run(["python3", "labkit/manifest.py", *args], cwd=tree, capture_output=True, text=True, timeout=60)


def test_the_script_prints_names_matrix_and_debs(tree):
    assert script(tree, "--names").stdout.splitlines() == ORDER
    assert json.loads(script(tree, "--matrix").stdout) == {"lab": ORDER}
    assert [m["name"] for m in json.loads(script(tree, "--json").stdout)] == ORDER
    assert script(tree, "--debs").stdout == "pkg-a pkg-b pkg-c pkg-d pkg-shared\n"   # each once, sorted


def test_a_bad_manifest_is_exit_2_with_its_path(tree):
    (tree / "labs" / "bravo" / "lab.toml").write_text("order = [\n")
    proc = script(tree, "--names")
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.startswith("manifest: ") and "bravo/lab.toml" in proc.stderr


def test_make_setup_installs_every_labs_packages(tree):
    """The Makefile's LAB_DEBS, evaluated by make in the tree (DEBS, what `make setup` installs)."""
    proc = subprocess.run(["make", "-s", "--no-print-directory", "-f", str(ROOT / "Makefile"), "-f", "-", "pcb-print"],
                          cwd=tree, input="pcb-print:\n\t@echo '$(LAB_DEBS)|$(DEBS)'\n", capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    lab_debs, debs = proc.stdout.strip().split("|")
    assert lab_debs == "pkg-a pkg-b pkg-c pkg-d pkg-shared"
    assert debs.split()[:5] == lab_debs.split()


def test_the_ci_matrix_is_the_labs_in_order(tree, tmp_path):
    """The workflow's own step (its ``run:`` line) run in the tree: the job matrix's labs."""
    wf = yaml.safe_load((ROOT / ".github" / "workflows" / "labs.yml").read_text())
    step = next(s for job in wf["jobs"].values() for s in job.get("steps", []) if s.get("id") == "labs")
    out = tmp_path / "github-output"
    proc = subprocess.run(["bash", "-e", "-c", step["run"]], cwd=tree, env={"PATH": "/usr/bin:/bin", "GITHUB_OUTPUT": str(out)},
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    key, value = out.read_text().strip().split("=", 1)
    assert key == "labs" and json.loads(value) == ORDER
    matrix = next(job["strategy"]["matrix"] for job in wf["jobs"].values() if "strategy" in job)
    assert "steps.labs.outputs.labs" in json.dumps(wf) and "needs.list.outputs.labs" in json.dumps(matrix)


def test_case_units_merge_over_labs_and_a_conflict_names_both(tree, monkeypatch):
    assert manifest.case_units(tree) == tomllib.loads(TEMPLATE).get("case_units", {})
    # the schema allows one unit ("bytes") today; the merge still refuses two units for one key
    monkeypatch.setattr(manifest, "labs", lambda root: [{"name": "alpha", "case_units": {"bs": "bytes"}},
                                                        {"name": "bravo", "case_units": {"bs": "KiB"}}])
    with pytest.raises(manifest.ManifestError) as exc:
        manifest.case_units(tree)
    assert str(exc.value) == "case key 'bs': bravo says 'KiB', another lab 'bytes'"


def test_the_script_needs_one_of_its_options_and_says_what_each_prints(tree, capsys):
    with pytest.raises(SystemExit) as exc:
        manifest.main([])
    assert exc.value.code == 2 and "one of the arguments --names --json --debs --matrix is required" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        manifest.main(["--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert re.search(r"(?<!\S)print what the labs' manifests \(labs/\*/lab\.toml\) say(?!\S)", text), text
    for option, says in (("--names", "lab names, one a line, in order"), ("--json", "every manifest, as a JSON list"),
                         ("--debs", "the Debian packages of every lab, one line"),
                         ("--matrix", '{"lab": [names]}, for a CI matrix')):
        assert f"{option} {says}" in text, option
