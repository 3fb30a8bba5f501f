"""The claims contract of issue 13: every claim names the original investigation's
conclusion it tests (``source``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from labkit import claims

ROOT = Path(__file__).resolve().parent.parent
CLAIM_FILES = sorted((ROOT / "labs").glob("*/claims.toml"))


@pytest.mark.parametrize("path", CLAIM_FILES, ids=lambda p: p.parent.name)
def test_every_claim_has_a_source(path):
    missing = [c["id"] for c in claims.load(path) if not c.get("source")]
    assert not missing, f"{path}: claims without source (the original conclusion they test): {missing}"

