"""The lines a lab prints at its end, one per claim (labkit.run.verdict_text.verdict_sentence): a short
sentence from the claim's statement, then the effect; the whole statement stays on the pages."""

from __future__ import annotations

from pathlib import Path

import pytest

from labkit.stats import claims
from labkit.run import verdict_text as cli

ROOT = Path(__file__).resolve().parent.parent
SPECS = sorted(ROOT.glob("labs/*/claims.toml"))


def test_headline_drops_asides_and_cuts_at_the_first_clause_past_the_minimum():
    s = ("Pinned with taskset (two CPUs), a round trip is faster on one CPU than on two cores: "
         "the original measured 1.49x (SDP2) and 1.56x (HP380); we claim 1.3x.")
    assert cli.headline(s) == "Pinned with taskset, a round trip is faster on one CPU than on two cores"
    assert cli.headline("Short: then the rest that carries the claim; and more.") == \
        "Short: then the rest that carries the claim; and more"          # no cut leaves 60 characters
    long = "word " * 60
    h = cli.headline(long)
    assert len(h) <= 160 and h.endswith("…") and " " not in h[-2:]


@pytest.mark.parametrize("spec", SPECS, ids=lambda p: p.parent.name)
def test_every_claims_line_is_short_and_tells_the_claims_apart(spec):
    cs = claims.load(spec)
    lines = [cli.verdict_sentence({"id": c["id"], "verdict": "holds", "effect": {
        "statistic": "ratio of medians", "estimate": 0.5, "low": 0.4, "high": 0.6, "needs": "< 0.8"}},
        c["statement"]) for c in cs]
    assert all(len(x) <= 220 for x in lines), max(lines, key=len)
    assert len(set(lines)) == len(lines)                 # no two claims print the same line
    assert all(x.startswith("holds: ") and "(ratio of medians 0.5, 95% 0.4–0.6, needs < 0.8)" in x for x in lines)
