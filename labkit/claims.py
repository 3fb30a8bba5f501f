"""Claims: a chapter's testable statements, kept as data in ``labs/<lab>/claims.toml``.

Each ``[[claim]]`` has ``id``, ``statement`` (ours, checked on every host), optional
``source`` (what the original investigation saw, quoted as theirs) and a ``kind``:

``step``
    ``step = "NAME"``: holds if that step did what it was designed to do (for a step
    run with ``--expect-fail``: it failed). ``stdout_empty = true`` also requires that
    it printed nothing on standard output. Skipped → untested.
``compare``
    ``metric``, selectors ``a`` and ``b`` (case subsets), ``relation`` and ``factor``:
    ``less``: a·factor < b; ``greater``: a > b·factor; ``not_less``: a ≥ b / factor
    (a is not faster than b by more than the tolerance ``factor``). Medians compared.
``within``
    a·scale_a and b·scale_b agree within ``factor``: max(x/y, y/x) ≤ factor.
``increasing``
    ``metric``, selector ``where``, numeric case key ``over``: the last point exceeds
    the first by ``factor`` (default 1) and no step drops by more than ``tolerance``
    (fraction of the running maximum, default 0.1).

A selector that matches several measurements uses the median of their medians
(``aggregate`` is always "median of medians"; the evidence lists the count).
Missing data gives ``untested`` with the reason: a claim never pretends to hold.
"""

from __future__ import annotations

import statistics
import tomllib
from pathlib import Path

KINDS = {"step", "compare", "within", "increasing"}
RELATIONS = {"less", "greater", "not_less"}


class ClaimError(ValueError):
    """A claims.toml entry is malformed."""


def load(path: Path | str) -> list[dict]:
    """Read and check ``claims.toml``; return the list of claim dicts.

    Raises:
        ClaimError: unknown kind or relation, missing keys, duplicate ids.
    """
    data = tomllib.loads(Path(path).read_text())
    claims = data.get("claim", [])
    seen = set()
    for c in claims:
        for key in ("id", "statement", "kind"):
            if key not in c:
                raise ClaimError(f"{path}: claim {c.get('id', '?')} has no {key}")
        if c["id"] in seen:
            raise ClaimError(f"{path}: duplicate claim id {c['id']}")
        seen.add(c["id"])
        if c["kind"] not in KINDS:
            raise ClaimError(f"{path}: claim {c['id']}: unknown kind {c['kind']!r} (one of {sorted(KINDS)})")
        need = {"step": ["step"], "compare": ["metric", "a", "b", "relation"], "within": ["metric", "a", "b", "factor"],
                "increasing": ["metric", "where", "over"]}[c["kind"]]
        for key in need:
            if key not in c:
                raise ClaimError(f"{path}: claim {c['id']} ({c['kind']}) needs {key}")
        if c["kind"] == "compare" and c["relation"] not in RELATIONS:
            raise ClaimError(f"{path}: claim {c['id']}: relation {c['relation']!r} not in {sorted(RELATIONS)}")
    return claims


def select(result: dict, metric: str, where: dict) -> list[dict]:
    """Measurements of ``metric`` whose case contains every key/value of ``where``."""
    return [m for m in result["measurements"]
            if m["metric"] == metric and all(m["case"].get(k) == v for k, v in where.items())]


def _fmt(x: float) -> str:
    return f"{x:.4g}"


def _describe(where: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in where.items()) or "all"


def _value(result: dict, metric: str, where: dict) -> tuple[float | None, str]:
    ms = select(result, metric, where)
    if not ms:
        return None, f"no {metric} measurement for {_describe(where)}"
    unit = ms[0]["unit"]
    if len(ms) == 1:
        m = ms[0]
        return m["median"], f"{_describe(where)}: median {_fmt(m['median'])} {unit} (min {_fmt(m['min'])}, max {_fmt(m['max'])}, n={m['n']})"
    v = statistics.median(m["median"] for m in ms)
    return v, f"{_describe(where)}: median of {len(ms)} medians {_fmt(v)} {unit}"


def _verdict(claim: dict, verdict: str, evidence: str) -> dict:
    return {"id": claim["id"], "verdict": verdict, "evidence": evidence}


def evaluate_one(claim: dict, result: dict) -> dict:
    """Evaluate one claim on one result; returns ``{"id", "verdict", "evidence"}``."""
    kind = claim["kind"]
    if kind == "step":
        step = next((s for s in result["steps"] if s["name"] == claim["step"]), None)
        if step is None:
            return _verdict(claim, "untested", f"step {claim['step']} did not run")
        if step["status"] == "skipped":
            return _verdict(claim, "untested", f"step {claim['step']} skipped: {step['reason']}")
        exp = "failed as designed" if step.get("expect") == "failure" else "succeeded"
        if claim.get("stdout_empty") and step["status"] == "ok":
            if step.get("stdout_bytes") is None:
                return _verdict(claim, "untested", f"step {claim['step']}: its standard output was not kept")
            if step["stdout_bytes"] != 0:
                return _verdict(claim, "fails", f"step {claim['step']} {exp} but printed {step['stdout_bytes']} bytes on stdout")
            exp += ", printed nothing on stdout"
        if step["status"] == "ok":
            return _verdict(claim, "holds", f"step {claim['step']} {exp} (exit {step.get('exit_code')})")
        return _verdict(claim, "fails", f"step {claim['step']}: {step['reason']}")

    metric = claim["metric"]
    if kind in ("compare", "within"):
        a, ea = _value(result, metric, claim["a"])
        b, eb = _value(result, metric, claim["b"])
        if a is None or b is None:
            return _verdict(claim, "untested", "; ".join(e for v, e in ((a, ea), (b, eb)) if v is None))
        if kind == "compare":
            f = float(claim.get("factor", 1.0))
            rel = claim["relation"]
            ok = {"less": a * f < b, "greater": a > b * f, "not_less": a >= b / f}[rel]
            sign = {"less": "<", "greater": ">", "not_less": "≥"}[rel]
            tail = f" (factor {f:g})" if f != 1.0 else ""
            ratio = f"; ratio a/b = {_fmt(a / b)}" if b else ""
            return _verdict(claim, "holds" if ok else "fails", f"a {sign} b{tail}? a = {ea}; b = {eb}{ratio}")
        sa, sb = float(claim.get("scale_a", 1.0)), float(claim.get("scale_b", 1.0))
        x, y = a * sa, b * sb
        r = max(x / y, y / x) if x > 0 and y > 0 else float("inf")
        ok = r <= float(claim["factor"])
        scaled = f" (a×{sa:g} = {_fmt(x)}, b×{sb:g} = {_fmt(y)})" if (sa, sb) != (1.0, 1.0) else ""
        return _verdict(claim, "holds" if ok else "fails",
                        f"a = {ea}; b = {eb}{scaled}; ratio {_fmt(r)} vs allowed {claim['factor']}")

    # increasing
    over = claim["over"]
    ms = [m for m in select(result, metric, claim["where"]) if isinstance(m["case"].get(over), (int, float))]
    points: dict[float, list[float]] = {}
    for m in ms:
        points.setdefault(m["case"][over], []).append(m["median"])
    if len(points) < 2:
        return _verdict(claim, "untested", f"fewer than two {over} values for {metric} where {_describe(claim['where'])}")
    xs = sorted(points)
    ys = [statistics.median(points[x]) for x in xs]
    tol = float(claim.get("tolerance", 0.1))
    f = float(claim.get("factor", 1.0))
    drops = []
    peak = ys[0]
    for x, y in zip(xs, ys):
        if y < peak * (1 - tol):
            drops.append(f"{over}={x:g}: {_fmt(y)} below earlier {_fmt(peak)}")
        peak = max(peak, y)
    ok = ys[-1] > ys[0] * f and not drops
    unit = ms[0]["unit"]
    series = ", ".join(f"{x:g}→{_fmt(y)}" for x, y in zip(xs, ys))
    evidence = f"{metric} ({unit}) by {over}: {series}; last/first = {_fmt(ys[-1] / ys[0])}"
    if drops:
        evidence += "; drops beyond tolerance: " + "; ".join(drops)
    return _verdict(claim, "holds" if ok else "fails", evidence)


def evaluate(claims: list[dict], result: dict) -> list[dict]:
    """Evaluate every claim on ``result`` (a result dict); order kept."""
    return [evaluate_one(c, result) for c in claims]
