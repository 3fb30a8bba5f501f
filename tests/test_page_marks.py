"""labkit.site.page_marks' plain cells: a table cell whose text no inline pattern changes is left
out of the inline processor, and the page is the same HTML as without that. Built with every
Markdown extension mkdocs.yml enables, on cells that must stay plain and cells that each inline
pattern changes (a too-wide :func:`labkit.site.page_marks.plain` fails here)."""

from __future__ import annotations

from pathlib import Path

import markdown
import pytest
from mkdocs.config import load_config

from labkit.site import page_marks

ROOT = Path(__file__).resolve().parent.parent

PLAIN_CELLS = ["69.53 – 83.70", "4 KiB", "libaio", "1,234,567", "MiB/s", "xeon-kvm-2vcpu", "12.5 %", "µs",
               "(none)", "kernel 6.18.44", "p50 / p99", "-5.2", "1/2", "3 - 4", "a.b.c", "#1", "it's \"quoted\"",
               "end_fsync", "x86_64", "snake_case_name", "a__b__c", "vm: kvm; container: docker", "ratio:",
               "swiotlb:swiotlb_bounced", "x:y", "swiotlb=force", "a + b", "~~struck~~", "==marked==", "^^ins^^",
               "++ctrl+alt++", "https://example.org"]   # the last five: no extension of mkdocs.yml gives them a meaning
MARKUP_CELLS = ["`fio --rw=write`", "*em*", "_em_", "**strong**", "__strong__", "a\\|b", "[link](x.md)",
                "![img](x.png)", "<span>x</span>", "&lt;not supported&gt;", "a & b", "x < y", ":smile:",
                "word {: .c}", "<https://example.org>", "a\\*b", "note[^1]",
                "a _b_ c", "x __y__ z", "_em_ x_y", "a :+1: b", "a:smile:"]
LEFT_ALONE = ["_lead", "trail_", "__init__", ":not-an-emoji:"]   # nothing changes them, but plain() keeps them out


@pytest.fixture(scope="module")
def site_markdown():
    """A Markdown converter with mkdocs.yml's extensions and their settings."""
    cfg = load_config(str(ROOT / "mkdocs.yml"))
    return lambda: markdown.Markdown(extensions=cfg["markdown_extensions"], extension_configs=cfg["mdx_configs"])


def _page(cells: list[str]) -> str:
    rows = "\n".join(f"| {c} | {c} |" for c in cells)
    return f"# T\n\n| a | b |\n|---|---:|\n{rows}\n\n=== \"tab\"\n\n    | x |\n    |---|\n" + \
        "\n".join(f"    | {c} |" for c in cells) + "\n\n[^1]: a footnote\n"


def test_plain_cells_render_as_without_the_shortcut(site_markdown, monkeypatch):
    page = _page(PLAIN_CELLS + MARKUP_CELLS + LEFT_ALONE)
    fast = site_markdown().convert(page)
    monkeypatch.setattr(page_marks.PlainCells, "run", lambda self, root: None)
    slow = site_markdown().convert(page)
    assert fast == slow


def test_the_shortcut_takes_plain_cells_and_leaves_markup(site_markdown, monkeypatch):
    seen = []
    run = page_marks.PlainCells.run

    def spy(self, root):
        run(self, root)
        seen.extend(el.text for tag in ("td", "th") for el in root.iter(tag) if isinstance(el.text, page_marks.AtomicString))
    monkeypatch.setattr(page_marks.PlainCells, "run", spy)
    site_markdown().convert(_page(PLAIN_CELLS + MARKUP_CELLS + LEFT_ALONE))
    assert set(seen) == set(PLAIN_CELLS) | {"a", "b", "x"}
    assert not any(page_marks.plain(c) for c in MARKUP_CELLS)
