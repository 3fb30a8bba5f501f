"""tests/mutation.py's arithmetic: the kill ratio and the Wilson interval printed beside a
sampled ratio (Wilson 1927; the numbers are the formula's, not measurements)."""

from __future__ import annotations

import pytest

import mutation


def test_ratio_counts_timeouts_and_suspicious_as_detected():
    d = {"killed": 6, "timeout": 1, "suspicious": 1, "survived": 2, "skipped": 0, "untested": 5}
    assert mutation.ratio(d) == (8, 10, 0.8)
    assert mutation.ratio({"killed": 0, "timeout": 0, "suspicious": 0, "survived": 0}) == (0, 0, 0.0)


def test_wilson_interval():
    lo, hi = mutation.interval(8, 10)
    assert lo == pytest.approx(0.4902, abs=1e-3) and hi == pytest.approx(0.9433, abs=1e-3)
    lo, hi = mutation.interval(40, 40)
    assert hi == 1.0 and lo == pytest.approx(0.9124, abs=1e-3)
    assert mutation.interval(0, 0) == (0.0, 1.0)
