"""What the labs' ``test_<lab>_readings.py`` share: the committed results a page's sentences read,
as pytest fixtures, and the lookups of their measurements. Each of those tests quotes a sentence
of a chapter or evidence page that reads a committed result in words, and asserts what it says
on the same result (DESIGN.md, "Chapters and evidence pages")."""

from __future__ import annotations

import statistics
from pathlib import Path

import pytest

from labkit import model
import refhost

ROOT = Path(__file__).resolve().parent.parent
EMULATED_HOST = "qemu-arm64-tcg"
"""The committed host whose CPU is emulated (QEMU TCG): its tab is the second one of a page."""
HOSTS = ("reference", "emulated")


def host_fixtures(lab: str):
    """Three pytest fixtures for ``lab``, to bind at a test module's top level
    (``reference, emulated, result = readings.host_fixtures("fstime")``): ``reference``, the
    reference result (:func:`refhost.result`); ``emulated``, the emulated arm64 host's (the
    test is skipped where there is none); ``result``, each of the two in turn, for a sentence
    about every tab. Results are loaded with :func:`labkit.model.load` (validated)."""
    @pytest.fixture(scope="module")
    def reference() -> dict:
        return model.load(refhost.result(lab))

    @pytest.fixture(scope="module")
    def emulated() -> dict:
        path = ROOT / "results" / EMULATED_HOST / f"{lab}.json"
        if not path.exists():
            pytest.skip(f"no committed result of {lab} on {EMULATED_HOST}")
        return model.load(path)

    @pytest.fixture(params=HOSTS)
    def result(request) -> dict:
        return request.getfixturevalue(request.param)

    return reference, emulated, result


def measurements(result: dict, metric: str, **case) -> list[dict]:
    """The measurements of ``metric`` whose case has every item of ``case``
    (:func:`labkit.model.select`, with the case as keywords)."""
    return model.select(result, metric, case)


def samples(result: dict, metric: str, **case) -> list[float]:
    """The samples of the one measurement of ``metric`` whose case has every item of ``case``.

    Raises:
        AssertionError: none or several measurements match (the sentence's case is ambiguous).
    """
    found = measurements(result, metric, **case)
    assert len(found) == 1, (metric, case, [m["case"] for m in found])
    return found[0]["samples"]


def median(result: dict, metric: str, **case) -> float:
    """The median of :func:`samples`."""
    return statistics.median(samples(result, metric, **case))


def folded(path: Path) -> list[tuple[tuple[str, ...], int]]:
    """The stacks of a folded profile (``frame;frame;... COUNT`` per line, as
    inferno-collapse-perf writes them): ``(frames, weight)`` per line, the process name first
    and inferno's ``_[k]`` kernel mark dropped from each frame."""
    out = []
    for line in path.read_text().splitlines():
        if line.strip():
            stack, weight = line.rsplit(" ", 1)
            out.append((tuple(f.removesuffix("_[k]") for f in stack.split(";")), int(weight)))
    return out
