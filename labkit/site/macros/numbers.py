"""How the pages write a ratio: one rule for the verdict cells and the "Original vs here"
rows."""

from __future__ import annotations


def number(x: float) -> str:
    """A ratio's number: "3.64", "22.0", "1.00", "158" or "1,670": three significant digits,
    trailing zeros kept (14,819 vs 14,777 IOPS is "1.00", not "1", which reads as equal), no
    trailing point ("158.", which ``:#.3g`` gives from 100 up) and never scientific notation
    (which ``:.3g`` gives from 1,000 up); an exact zero is "0"."""
    if x == 0:
        return "0"
    return f"{x:,.0f}" if abs(x) >= 99.95 else f"{x:#.3g}"


def times(x: float) -> str:
    """A ratio as "3.64×", "22.0×", "1.00×", "0×" or "1,670×" (:func:`number`)."""
    return f"{number(x)}×"
