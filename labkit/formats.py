"""How a measured number, its unit and a case value are written, in a lab's terminal
(``labkit.run.progress``, ``labkit record``) and on the pages (``labkit.view.render`` re-exports
them): one set of rules for both, so a reader sees the same figure in either place."""

from __future__ import annotations

import math
import re

# How units are shown to readers (result files keep ASCII unit names).
UNIT_DISPLAY = {"us": "µs", "ns": "ns", "ms": "ms", "s": "s", "KiB/s": "KiB/s", "MiB/s": "MiB/s", "x": "×"}


def unit(u: str) -> str:
    """Display form of a unit name, e.g. ``us`` → ``µs``, ``us/MiB`` → ``µs/MiB``."""
    if u in UNIT_DISPLAY:
        return UNIT_DISPLAY[u]
    return re.sub(r"(?<![A-Za-z])us(?![A-Za-z])", "µs", u)


def fmt(x: float | None) -> str:
    """A measured number with 3-4 significant digits and no exponent for everyday sizes."""
    if x is None:
        return "–"
    if x == 0:
        return "0"
    if float(x).is_integer() and abs(x) < 1e4:
        return str(int(x))
    mag = math.floor(math.log10(abs(x)))
    decimals = max(0, 3 - mag)
    if mag >= 4 or abs(round(x, decimals)) >= 1e4:  # 9999.6 rounds up to 10,000: separator too
        return f"{x:,.0f}"
    return f"{x:.{decimals}f}"


def fmt_case_value(v) -> str:
    """A case value as text: a boolean as ``yes``/``no``, a whole float without its ``.0``
    (``4.0`` → ``4``), anything else as ``str`` gives it."""
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    return str(v)
