"""The lines a terminal shows for a verdict: at the end of a lab run (``labkit record``) and in
``labkit show``. The whole statement and the full interval are on the chapter's page."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..stats import claims as claims_mod

if TYPE_CHECKING:
    from ..model import Effect, Verdict


def headline(statement: str, min_chars: int = 60, max_chars: int = 160) -> str:
    """The claim's statement shortened for a terminal line: without its parenthetical asides,
    up to the first ": ", "; " or ". " that leaves at least ``min_chars`` characters, then at
    most ``max_chars`` (cut at a space, with "…"). The whole statement is on the chapter and in
    ``labkit show``."""
    depth, kept = 0, []
    for ch in statement:
        if ch == "(":
            depth += 1
        elif ch == ")" and depth:
            depth -= 1
        elif depth == 0:
            kept.append(ch)
    text = " ".join("".join(kept).split()).replace(" ,", ",").replace(" :", ":").rstrip(" .")
    cut = next((i for i in range(min_chars, len(text)) if text[i:i + 2] in (": ", "; ", ". ")), None)
    text = text[:cut]
    if len(text) > max_chars:
        text = text[: text.rfind(" ", 0, max_chars - 1)] + "…"
    return text


def _interval_3g(e: Effect) -> str:
    """"95% low–high" of a verdict's effect at 3 significant digits; "" when it has no interval
    or a zero-width one (sides without spread)."""
    if e.get("low") is None or e["low"] == e["high"]:
        return ""
    return f"95% {claims_mod.span_text(e, lambda x: f'{x:.3g}')}"


def verdict_sentence(v: Verdict, statement: str | None) -> str:
    """The end-of-run verdict line: ``holds: <the statement's first clause, see headline> (ratio
    0.455, 95% 0.33–0.519, needs < 0.77)``; without a statement, :func:`verdict_line`."""
    if not statement:
        return verdict_line(v)
    e = v.get("effect")
    why = ""
    if e and e.get("estimate") is not None:
        ci = _interval_3g(e)
        why = f" ({e['statistic']} {e['estimate']:.3g}{f', {ci}' if ci else ''}, needs {e['needs']})"
    elif v["verdict"] not in ("holds", "fails") and v.get("reason"):
        why = f" ({v['reason']})"
    flags = "".join(f" [{f}]" for f in v.get("flags", []))
    return f"{v['verdict']}: {headline(statement)}{why}{flags}"


def verdict_line(v: Verdict) -> str:
    """One short line for a verdict: ``id: holds: ratio 2.31 (95% 2.10–2.52), needs > 1.5`` from
    its effect, or its reason; never the long evidence string."""
    e = v.get("effect")
    line = f"{v['id']}: {v['verdict']}"
    if e and e.get("estimate") is not None:
        ci = _interval_3g(e)
        line += f": {e['statistic']} {e['estimate']:.3g}{f' ({ci})' if ci else ''}, needs {e['needs']}"
    if v["verdict"] not in ("holds", "fails") and v.get("reason") and not (e and v["reason"].startswith("the 95%")):
        line += f": {v['reason']}"
    for flag in v.get("flags", []):
        line += f" [{flag}]"
    return line
