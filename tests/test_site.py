"""The site built for real: strict build, results injected, broken inputs fail the build."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from conftest import ROOT, build_site
from labkit import model
from labkit.render import fmt


@pytest.fixture(scope="session")
def site(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("site")
    proc = build_site(out)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return out


def _copy_repo(dst: Path) -> Path:
    """A throwaway copy of what the build reads (docs, labs, results, snippets, labkit, config)."""
    for name in ("docs", "labs", "results", "snippets", "labkit"):
        shutil.copytree(ROOT / name, dst / name, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "mkdocs.yml", dst / "mkdocs.yml")
    return dst


def test_every_case_page_is_built(site):
    for page in (ROOT / "docs" / "cases").glob("*.md"):
        assert (site / "cases" / page.stem / "index.html").exists(), page


def test_medians_of_the_result_are_on_the_page(site):
    html = (site / "cases" / "lat_tcp" / "index.html").read_text()
    for path in sorted((ROOT / "results").glob("*/lat_tcp.json")):
        r = model.load(path)
        for m in r["measurements"]:
            if m["case"].get("experiment") in ("pinned", "msize", "free"):
                assert f"<td>{fmt(m['median'])}</td>" in html, (path, m["case"])


def test_no_unrendered_macros_and_no_external_urls(site):
    for page in site.rglob("*.html"):
        text = page.read_text()
        assert "{{" not in re.sub(r"<(code|pre)[^>]*>.*?</\1>", "", text, flags=re.S), page
        # a page may link elsewhere (<a href>), but must load nothing from another origin
        loads = re.findall(r'(?:src|data)="(https?://[^"]+)"', text)
        loads += re.findall(r'<link[^>]+href="(https?://[^"]+)"', text)
        for url in loads:
            pytest.fail(f"{page} loads {url}: pages must not load anything from another origin")


def test_artifacts_are_served(site):
    for path in sorted((ROOT / "results").glob("*/*.json")):
        r = model.load(path)
        for a in r["artifacts"]:
            assert (site / "results" / path.parent.name / a["path"]).is_file(), a


def test_edited_result_changes_the_rendered_table(tmp_path):
    repo = _copy_repo(tmp_path / "repo")
    path = next((repo / "results").glob("*/lat_tcp.json"))
    r = json.loads(path.read_text())
    m = next(m for m in r["measurements"] if m["case"].get("experiment") == "pinned")
    # a marker no real run would give: every sample scaled by 1000 (the median follows)
    m["samples"] = [s * 1000 for s in m["samples"]]
    m.update(model.summarize(m["samples"]))
    model.write_atomic(path, r)
    proc = build_site(tmp_path / "site", repo / "mkdocs.yml")
    assert proc.returncode == 0, proc.stderr[-3000:]
    html = (tmp_path / "site" / "cases" / "lat_tcp" / "index.html").read_text()
    assert f"<td>{fmt(m['median'])}</td>" in html


@pytest.mark.parametrize("bad", [
    '{{ results_table("lat_tcp", "no_such_metric") }}',
    '{{ results_table("no_such_lab", "round_trip") }}',
    '{{ flamegraph("lat_tcp", pin="no-such-pin") }}',
    '{{ step_output("lat_tcp", "no_such_step") }}',
    '{{ chart("lat_tcp", "round_trip", x="msize", kind="pie") }}',
    '{{ undefined_macro() }}',
    '--8<-- "labs/lat_tcp/no_such_file.sh"',
])
def test_broken_page_fails_strict_build(tmp_path, bad):
    repo = _copy_repo(tmp_path / "repo")
    page = repo / "docs" / "cases" / "lat_tcp.md"
    page.write_text(page.read_text() + "\n\n" + bad + "\n")
    proc = build_site(tmp_path / "site", repo / "mkdocs.yml")
    assert proc.returncode != 0, f"build passed with {bad!r}"


def test_invalid_result_fails_build(tmp_path):
    repo = _copy_repo(tmp_path / "repo")
    path = next((repo / "results").glob("*/lat_tcp.json"))
    r = json.loads(path.read_text())
    r["measurements"][0]["median"] += 1.0
    path.write_text(json.dumps(r))
    proc = build_site(tmp_path / "site", repo / "mkdocs.yml")
    assert proc.returncode != 0
    assert "median" in proc.stderr + proc.stdout


def test_shell_braces_in_pages_without_macros_are_left_alone(tmp_path):
    repo = _copy_repo(tmp_path / "repo")
    (repo / "docs" / "method.md").write_text((repo / "docs" / "method.md").read_text()
                                             + '\n```bash\necho "${#arr[@]} {{ not a macro }}"\n```\n')
    proc = build_site(tmp_path / "site", repo / "mkdocs.yml")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "not a macro" in (tmp_path / "site" / "method" / "index.html").read_text()
