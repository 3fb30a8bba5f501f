"""What keeps a warm site build fast without letting it show stale or invalid data: the build's
on-disk caches (labkit.model.cache_dir, ``.cache/`` of the checkout, git-ignored).

- Chart SVGs (labkit.view.charts.chart_svg) are named by a hash of the measurements, the chart's
  arguments, the drawing code and matplotlib's version: a second build reads them back without
  importing matplotlib; a changed measurement, argument or drawing code draws anew; a chart
  that fails to draw is never kept.
- Result validations (labkit.model.load) are remembered in the process by a hash of the file's
  content (a build loads the hosts twice; ``make serve`` rebuilds in one process): a file is
  validated once; a content that failed is never remembered, so an invalid result fails every
  time, also after a valid version of the same file was remembered. Nothing of it is kept on
  disk: validating every committed result takes a fraction of a second with jsonschema-rs.
- ``PCB_BUILD_CACHE=off`` reads and writes nothing.

The numbers are drawing inputs, not measurements."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from labkit import model, results
from labkit.view import charts
from test_render_values import m
import refhost

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    """A fresh cache folder for this test, and a process that has validated nothing yet."""
    folder = tmp_path / "cache"
    monkeypatch.setenv("PCB_BUILD_CACHE", str(folder))
    monkeypatch.setattr(model, "VALIDATED", set())
    return folder


@pytest.fixture
def draws(monkeypatch) -> list:
    """Every chart that is really drawn (labkit.view.charts.draw_svg), by its arguments."""
    calls, real = [], charts.draw_svg

    def spy(ms, x, series=None, **opts):
        calls.append((x, series, opts))
        return real(ms, x, series, **opts)
    monkeypatch.setattr(charts, "draw_svg", spy)
    return calls


@pytest.fixture
def validations(monkeypatch) -> list:
    """Every result validated against the schema and the invariants (labkit.model.validate)."""
    calls, real = [], model.validate

    def spy(result, source="<result>"):
        calls.append(source)
        return real(result, source)
    monkeypatch.setattr(model, "validate", spy)
    return calls


def two_points(second=(2.0, 3.0, 4.0)) -> list[dict]:
    return [m(case={"q": 1}), m(case={"q": 2}, samples=second)]


def test_a_chart_is_drawn_once_then_read_back(cache, draws):
    svg = charts.chart_svg(two_points(), "q", host="h")
    assert len(draws) == 1
    kept = list((cache / "charts").iterdir())
    assert [p.name for p in kept] == [f"{charts.chart_key(two_points(), 'q', host='h')}.svg"]
    assert kept[0].read_text() == svg
    assert charts.chart_svg(two_points(), "q", host="h") == svg and len(draws) == 1


def test_a_warm_chart_does_not_import_matplotlib(cache, tmp_path):
    """A build whose charts are all cached never loads matplotlib (about 2 s of a build)."""
    svg = charts.chart_svg(two_points(), "q", host="h")
    (tmp_path / "ms.json").write_text(json.dumps(two_points()))
    code = ("import json, sys; from labkit.view import charts; "
            f"svg = charts.chart_svg(json.load(open({str(tmp_path / 'ms.json')!r})), 'q', host='h'); "
            "print(json.dumps([svg, 'matplotlib' in sys.modules]))")
    env = {"PCB_BUILD_CACHE": str(cache), "PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=ROOT,
                         timeout=120, check=True).stdout
    assert json.loads(out) == [svg, False]


def test_a_changed_measurement_or_argument_draws_a_changed_chart(cache, draws):
    before = charts.chart_svg(two_points(), "q", host="h")
    after = charts.chart_svg(two_points(second=(2.0, 3.5, 4.0)), "q", host="h")   # one median moved
    assert after != before and len(draws) == 2
    # what the cache returns for the changed data is what drawing it gives
    assert after == charts.draw_svg(two_points(second=(2.0, 3.5, 4.0)), "q", host="h")
    # the same samples in another order change no summary, and are still another chart's key
    reordered = two_points(second=(4.0, 3.0, 2.0))
    assert reordered[1]["median"] == two_points()[1]["median"]
    assert charts.chart_key(reordered, "q") != charts.chart_key(two_points(), "q")
    for opts in ({"host": "h", "dark": True}, {"host": "h", "title": "T"}, {"host": "h2"}, {"host": "h", "logy": True}):
        charts.chart_svg(two_points(), "q", **opts)
    assert len(draws) == 7           # the direct draw_svg call above counts too
    assert len(list((cache / "charts").iterdir())) == 6


def test_changed_drawing_code_draws_again(cache, draws, monkeypatch):
    charts.chart_svg(two_points(), "q", host="h")
    key = charts.chart_key(two_points(), "q", host="h")
    monkeypatch.setattr(charts, "code_digest", lambda: b"another charts.py")
    assert charts.chart_key(two_points(), "q", host="h") != key
    charts.chart_svg(two_points(), "q", host="h")
    assert len(draws) == 2
    # the real digest covers charts.py, render.py and matplotlib's version
    monkeypatch.undo()
    assert len(charts.code_digest()) == 32


def test_a_chart_that_fails_is_never_kept(cache):
    for bad in ([], [m(case={"q": "a"})]):
        for _ in range(2):
            with pytest.raises(ValueError):
                charts.chart_svg(bad, "q")
    assert not (cache / "charts").exists() or not list((cache / "charts").iterdir())


def test_off_reads_and_writes_nothing(monkeypatch, draws):
    for off in ("off", "0", "OFF"):
        monkeypatch.setenv("PCB_BUILD_CACHE", off)
        assert model.cache_dir("charts") is None
    a, b = charts.chart_svg(two_points(), "q"), charts.chart_svg(two_points(), "q")
    assert a == b and len(draws) == 2


def test_the_default_cache_is_in_the_checkout_and_git_ignored(monkeypatch):
    monkeypatch.delenv("PCB_BUILD_CACHE", raising=False)
    assert model.cache_dir("charts") == ROOT / ".cache" / "charts"
    for kind in ("charts", "verdicts"):
        probe = model.cache_dir(kind).relative_to(ROOT) / "0123.svg"
        ignored = subprocess.run(["git", "check-ignore", "-q", str(probe)], cwd=ROOT)
        assert ignored.returncode == 0, f"{probe} is not git-ignored"


# ---- result validation ----

@pytest.fixture(scope="module")
def reference() -> dict:
    """The smallest committed result, loaded without the cache."""
    path = min((ROOT / "results").glob("*/*.json"), key=lambda p: p.stat().st_size)
    data = json.loads(path.read_text())
    model.validate(data, str(path))
    return data


def test_a_result_is_validated_once(cache, validations, tmp_path, reference):
    f = tmp_path / "lab.json"
    model.write_atomic(f, reference)
    assert model.load(f) == reference and model.load(f) == reference
    assert validations == [str(f)]                                  # once in the process
    model.VALIDATED.clear()                                         # another process
    assert model.load(f) == reference and validations == [str(f)] * 2
    assert not (cache / "validated").exists()                       # nothing on disk


def test_load_hosts_twice_validates_each_file_once(cache, validations, tmp_path, reference, monkeypatch):
    """A build asks for the hosts twice (labkit/site/mkdocs_hooks.py on_files, labkit.site.macros)."""
    monkeypatch.setenv("PERF_CASEBOOK_RESULTS", "")
    for label in ("h1", "h2"):
        r = copy.deepcopy(reference)
        r["host"]["label"] = label
        model.write_atomic(tmp_path / "results" / label / f"{r['lab']}.json", r)
    assert [h.label for h in results.load_hosts(tmp_path)] == ["h1", "h2"]
    assert [h.label for h in results.load_hosts(tmp_path)] == ["h1", "h2"]
    assert len(validations) == 2


def test_an_invalid_result_fails_every_time_even_after_a_valid_one(cache, validations, tmp_path, reference):
    f = tmp_path / "lab.json"
    model.write_atomic(f, reference)
    model.load(f)
    bad = copy.deepcopy(reference)
    m0 = next(x for x in bad["measurements"] if x["max"] > x["min"])
    m0["median"] = m0["max"] * 2                                    # disagrees with its samples
    model.write_atomic(f, bad)
    for _ in range(2):
        with pytest.raises(model.ResultError, match=r"measurements/\d+: median="):
            model.load(f)
    model.VALIDATED.clear()
    with pytest.raises(model.ResultError, match="median="):
        model.load(f)
    assert len(validations) == 4
    # the same result reformatted is another content: validated again, and still refused
    f.write_text(json.dumps(bad))
    with pytest.raises(model.ResultError, match="median="):
        model.load(f)


def test_the_chart_cache_keeps_the_most_recently_used(cache, monkeypatch):
    folder = cache / "charts"
    folder.mkdir(parents=True)
    for i in range(5):
        (folder / f"old{i}.svg").write_text("<svg/>")
        os.utime(folder / f"old{i}.svg", (1000 + i, 1000 + i))
    monkeypatch.setattr(charts, "CACHE_KEEP", 3)
    monkeypatch.setattr(charts, "PRUNED", set())
    svg = charts.chart_svg(two_points(), "q", host="h")          # drawn and added: the newest
    new = folder / f"{charts.chart_key(two_points(), 'q', host='h')}.svg"
    assert sorted(p.name for p in folder.iterdir()) == sorted(["old3.svg", "old4.svg", new.name])
    # a file read back counts as used
    os.utime(new, (1, 1))
    assert charts.chart_svg(two_points(), "q", host="h") == svg and new.stat().st_mtime > 1000


def test_verdicts_are_remembered_and_follow_the_result(tmp_path, monkeypatch):
    """A verdict comes from the disk cache the second time; a changed sample gives a new one."""
    import copy
    import json as _json
    from labkit import model
    from labkit.stats import claims
    monkeypatch.setenv(model.CACHE_ENV, str(tmp_path))
    result = _json.loads((refhost.RESULTS / "lat_tcp.json").read_text())
    claim = next(c for c in claims.load(ROOT / "labs" / "lat_tcp" / "claims.toml") if c["kind"] == "compare")
    first = claims.evaluate_cached(claim, result)
    assert first == claims.evaluate_one(claim, result)
    assert len(list((tmp_path / "verdicts").glob("*.json"))) == 1
    calls = []
    monkeypatch.setattr(claims, "evaluate_one", lambda c, r: calls.append(1) or {"id": c["id"]})
    assert claims.evaluate_cached(claim, result) == first and not calls
    changed = copy.deepcopy(result)
    changed["measurements"][0]["samples"][0] *= 2
    assert claims.evaluate_cached(claim, changed) == {"id": claim["id"]} and calls == [1]


# ---- charts drawn beside the build (labkit.site.macros.beside) ----

@pytest.fixture
def beside(cache):
    """labkit.site.macros.beside in a build (started), finished after the test."""
    from labkit.site.macros import beside
    charts.take()
    beside.start()
    yield beside
    beside.finish(cancel=True)
    charts.take()


def test_a_chart_drawn_beside_the_build_is_the_chart_drawn_in_it(beside, cache, draws):
    ms = two_points()
    img = beside.later("cases/x/", ms, "q", host="h", dark=True)
    assert img is not None and all(v.startswith("@@pcb-draw:") for v in img.values())
    assert draws == []                           # drawn by a worker, not here
    html = f'<img src="{img["src"]}" width="{img["width"]}" height="{img["height"]}">'
    assert beside.left(html)
    filled = beside.fill(html)
    assert not beside.left(filled)
    figures = charts.take()
    assert len(figures) == 1
    (path, svg), = figures.items()
    w, h = charts.svg_size(svg)
    assert filled == f'<img src="{path.removeprefix("cases/x/")}" width="{w}" height="{h}">'
    assert svg == charts.draw_svg(ms, "q", host="h", dark=True)           # the bytes of drawing it here
    # the worker kept it in the cache: the next build reads it at once, and nothing is submitted
    assert (cache / "charts" / f"{charts.chart_key(ms, 'q', host='h', dark=True)}.svg").read_text() == svg
    assert beside.later("cases/x/", ms, "q", host="h", dark=True) is None


def test_a_chart_that_fails_beside_the_build_fails_where_it_is_filled_in(beside):
    img = beside.later("cases/x/", [m(case={"q": "a"})], "q")      # a line chart of a text x
    with pytest.raises(ValueError, match="must be numeric"):
        beside.fill(img["src"])
    with pytest.raises(ValueError, match="belongs to no chart"):
        beside.fill("@@pcb-draw:999:src@@")


def test_outside_a_build_every_chart_is_drawn_at_once(cache):
    from labkit.site.macros import beside
    beside.finish()
    assert beside.later("cases/x/", two_points(), "q") is None
    assert beside.workers() >= 1


def test_where_workers_cannot_start_the_build_draws_its_charts_itself(beside, monkeypatch, draws):
    tries = []

    def no_pool():
        tries.append(1)
        raise OSError(38, "Function not implemented")      # what a missing /dev/shm gives
    monkeypatch.setattr(beside, "executor", no_pool)
    assert beside.later("cases/x/", two_points(), "q", host="h") is None   # drawn at once, by the caller
    assert beside.later("cases/x/", two_points(), "q", host="h2") is None
    assert tries == [1]                          # the build gave up on workers at the first failure
    img = beside.image("cases/x/", two_points(), "q", host="h3")
    assert img["src"].startswith("fig-") and img["src"].endswith(".svg") and int(img["width"]) > 0
    assert [d[2]["host"] for d in draws] == ["h3"]                    # drawn in this process


def test_a_chart_whose_worker_died_is_drawn_by_the_build(beside, monkeypatch, draws):
    from concurrent.futures import Future
    from concurrent.futures.process import BrokenProcessPool

    class DeadPool:
        def submit(self, fn, *args, **kwargs):
            f = Future()
            f.set_exception(BrokenProcessPool("a worker was killed"))
            return f
    monkeypatch.setattr(beside, "executor", lambda: DeadPool())
    img = beside.later("cases/x/", two_points(), "q", host="h")
    filled = beside.fill(img["src"])
    assert len(draws) == 1 and filled.startswith("fig-") and filled.endswith(".svg")
    assert beside.later("cases/x/", two_points(), "q", host="h3") is None   # the rest: drawn at once


@pytest.mark.parametrize("cpus, want", [(None, 1), (1, 1), (2, 1), (4, 3), (16, 15)])
def test_one_cpu_fewer_than_the_machine_draws_at_least_one(monkeypatch, cpus, want):
    from labkit.site.macros import beside
    monkeypatch.setattr(beside.os, "cpu_count", lambda: cpus)
    assert beside.workers() == want


def test_a_fresh_process_draws_at_once_until_a_build_starts():
    """Outside a build (a test, `labkit show`), later() must never hand a chart to workers."""
    out = subprocess.run([sys.executable, "-c", "from labkit.site.macros import beside; print(beside.active)"],
                         capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert out.stdout.strip() == "False", out.stderr


@pytest.mark.parametrize("cancel", [False, True])
def test_finish_waits_for_the_workers_and_cancels_only_when_asked(monkeypatch, cancel):
    from labkit.site.macros import beside
    calls = []

    class Pool:
        def shutdown(self, wait, cancel_futures):
            calls.append((wait, cancel_futures))
    monkeypatch.setattr(beside, "pool", Pool())
    beside.finish(cancel=True) if cancel else beside.finish()
    assert calls == [(True, cancel)] and beside.pool is None and beside.active is False


def test_workers_that_cannot_start_are_logged_at_info(caplog):
    from labkit.site.macros import beside
    beside.start()
    with caplog.at_level("INFO", logger="mkdocs.plugins.labkit"):
        beside.give_up(OSError("no semaphores"))
    assert "labkit: charts are drawn in the build's own process (OSError: no semaphores)" in caplog.messages
    assert beside.active is False
    beside.finish()


def test_the_theme_templates_compile_once_into_the_build_cache(cache, monkeypatch):
    """mkdocs makes a new theme environment for every build; the hook gives it a bytecode cache in
    the build cache, which Jinja checks against each template's source. None when the cache is off."""
    import jinja2
    from labkit.site import mkdocs_hooks
    env = mkdocs_hooks.on_env(jinja2.Environment(loader=jinja2.DictLoader({"t.html": "{{ 1 + 1 }}"})), None, None)
    assert env.get_template("t.html").render() == "2"
    assert list((cache / "jinja").iterdir())
    again = mkdocs_hooks.on_env(jinja2.Environment(loader=jinja2.DictLoader({"t.html": "{{ 2 + 2 }}"})), None, None)
    assert again.get_template("t.html").render() == "4"        # another source: compiled anew
    monkeypatch.setenv("PCB_BUILD_CACHE", "off")
    assert mkdocs_hooks.on_env(jinja2.Environment(), None, None).bytecode_cache is None


def test_a_remembered_value_is_computed_once_and_a_failure_never_kept(cache):
    calls = []

    def compute(value):
        calls.append(value)
        if value is None:
            raise ValueError("no value")
        return {"v": value}
    assert model.remembered("kind", ["a", "1"], lambda: compute(1)) == {"v": 1}
    assert model.remembered("kind", ["a", "1"], lambda: compute(2)) == {"v": 1}     # read back
    assert model.remembered("kind", ["a", "2"], lambda: compute(2)) == {"v": 2}     # other parts
    for _ in range(2):
        with pytest.raises(ValueError):
            model.remembered("kind", ["b"], lambda: compute(None))
    assert calls == [1, 2, None, None]


# ---- data blocks set aside while the search plugin parses a page (mkdocs_hooks.set_aside) ----

def test_data_blocks_are_set_aside_for_the_search_plugin_and_put_back_whole():
    """A data block (render.tabs' comments, nested blocks and all) leaves the HTML the search plugin
    parses and comes back as its <div>, byte for byte but for the valued data-search attributes the
    plugin strips; a block with a heading stays (it starts a section of the index), as does one
    whose end is missing; a lost comment fails the build."""
    from types import SimpleNamespace
    from mkdocs.exceptions import PluginError
    from labkit.site import mkdocs_hooks as hooks
    from labkit.view import render
    page = SimpleNamespace(file=SimpleNamespace(url="cases/x/", src_uri="cases/x.md"))
    o, c, div = render.DATA_OPEN, render.DATA_CLOSE, '<div class="pc-data" data-search-exclude>'
    data = f'{o}\n<div class="a"><div>1</div></div><p>2 data-search-x="y"</p>{o}<div>3</div>{c}\n{c}'
    head = f'{o}\n<h3 id="t">T</h3><div>4</div>\n{c}'
    html = f"<p>prose</p>{data}<p>more</p>{head}<div>tail</div>{data}"
    as_divs = html.replace(o, div).replace(c, "</div>")
    aside = hooks.set_aside(html, page)
    assert "<div>1</div>" not in aside and "<div>3</div>" not in aside and aside.count("<!--pc-aside:") == 2
    assert head.replace(o, div).replace(c, "</div>") in aside and "<p>prose</p>" in aside and o not in aside
    assert hooks.put_back(aside, page) == as_divs.replace(' data-search-x="y"', "")
    hooks.set_aside(html, page)
    with pytest.raises(PluginError, match="2 data blocks set aside, 1 put back"):
        hooks.put_back(aside.replace("<!--pc-aside:1-->", ""), page)
    unclosed = f"<p>a</p>{o}<div>x</div>"
    assert hooks.set_aside(unclosed, page) == unclosed.replace(o, div)
    assert hooks.put_back(unclosed, page) == unclosed
