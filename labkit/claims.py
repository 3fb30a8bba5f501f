"""Claims: a chapter's testable statements, kept as data in ``labs/<lab>/claims.toml``.

Each ``[[claim]]`` has ``id``, ``statement`` (ours, checked on every host), ``source`` (the
original investigation's conclusion this claim tests, quoted or paraphrased faithfully, with
its machine and kernel), an optional ``timing`` (bool, see below) and a ``kind``:

``step``
    ``step = "NAME"``: holds if that step did what it was designed to do (for a step
    run with ``--expect-fail``: it failed). ``stdout_empty = true`` also requires that
    it printed nothing on standard output. Skipped → untested.
``compare``
    ``metric``, selectors ``a`` and ``b`` (case subsets), ``relation`` and ``factor``
    (default 1): ``less``: a·factor < b; ``greater``: a > b·factor; ``not_less``:
    a·factor ≥ b (a is not below b by more than the tolerance ``factor``).
``within``
    a·scale_a and b·scale_b agree within ``factor``: max(x/y, y/x) ≤ factor.
``increasing``
    ``metric``, selector ``where``, numeric case key ``over``: the last point exceeds
    the first by ``factor`` (default 1) and no point drops by more than ``tolerance``
    (fraction of the highest earlier point, default 0.1).

Optional on compare, within and increasing: ``statistic = "median"`` (the default) or
``"mean"`` (only where the original compared means, and the statement says so).
No other key is allowed: a typo fails loud (:class:`ClaimError`).

**Sides.** A selector picks every measurement of ``metric`` whose case contains all its
key/values; the side is the pool of all their samples. Its value is the pool's median
(or mean), its range the pool's min–max, its n the pool's size.

**Verdicts** (``holds``, ``fails``, ``inconclusive``, ``untested``, ``not applicable``),
tried in this order:

1. ``not applicable``: the claim is about time or speed (``timing``, default true for
   compare, within and increasing, false for step) and the result's host has an emulated
   CPU (``host.emulation.accelerator == "tcg"``): "emulated CPU: timings are not hardware".
2. ``untested``: a side has no measurement, fewer than two ``over`` points, the step was
   skipped or did not run (the evidence gives the reason). A claim never pretends to hold.
3. ``inconclusive``: a side (for ``increasing``: any point) has fewer than 3 samples
   (:data:`MIN_SAMPLES`).
4. The relation is decided on the two values (medians, or means), then checked against
   the noise of the samples. A side's range is its min–max, or its interquartile range
   (p25–p75) from :data:`IQR_FROM` samples on (per-I/O distributions). ``compare`` (a difference): when the two ranges, with the factor applied as the relation
   applies it (a·factor and b for less and not_less, a and b·factor for greater), overlap
   (min a ≤ max b and min b ≤ max a, touching counts) the difference between a and b is
   within noise → ``inconclusive``; otherwise the values decide ``holds`` or ``fails``.
   ``within`` (an agreement; ranges taken after scaling): ``holds`` when the values agree
   within ``factor`` and so does every pair of samples (max x ≤ factor·min y and
   max y ≤ factor·min x), ``fails`` when the values disagree and the ranges do not overlap,
   else ``inconclusive``. ``increasing``: ``holds`` when the values pass (last > first·factor,
   no drop) and the first and last ranges do not overlap; ``fails`` when the values fail
   and the failure is beyond noise (last ≤ first·factor with first and last ranges apart,
   or a drop whose range lies apart from the earlier point it drops from); else
   ``inconclusive``.

Ties are exact: a·factor == b is not "less" (fails when the ranges are apart), a ratio of
exactly ``factor`` is "within". Exercises (``labs/<lab>/exercises.toml``) use the same
evaluator: :func:`load_exercises`, :func:`exercise_claim`.
"""

from __future__ import annotations

import statistics
import tomllib
from pathlib import Path

KINDS = {"step", "compare", "within", "increasing"}
RELATIONS = {"less", "greater", "not_less"}
STATISTICS = {"median", "mean"}
VERDICTS = ("holds", "fails", "inconclusive", "untested", "not applicable")
MIN_SAMPLES = 3
# From this many samples on, a side's noise range is its interquartile range, not min–max: a
# distribution of every I/O (hundreds of samples) always has overlapping extremes, and one
# outlier would make every such comparison inconclusive whatever the effect.
IQR_FROM = 20
EMULATED_EVIDENCE = "emulated CPU: timings are not hardware"

_COMMON = {"id", "statement", "kind", "source", "timing", "role", "conclusion", "emulated_ok"}
ROLES = ("conclusion", "instrument", "ours")
# kind: (required keys, optional keys) beyond the common ones
_KIND_KEYS = {
    "step": ({"step"}, {"stdout_empty"}),
    "compare": ({"metric", "a", "b", "relation"}, {"factor", "statistic", "paired"}),
    "within": ({"metric", "a", "b", "factor"}, {"scale_a", "scale_b", "statistic"}),
    "increasing": ({"metric", "where", "over"}, {"factor", "tolerance", "statistic"}),
}


class ClaimError(ValueError):
    """A claims.toml (or exercises.toml) entry is malformed."""


def check_spec(c: dict, where: str, *, named: bool = True) -> None:
    """Check one claim body (a dict as read from TOML).

    ``named=False`` is for an exercise's ``check`` table, which has no ``id``/``statement``.

    Raises:
        ClaimError: naming ``where``: a missing or unknown key, a bad kind, relation,
        statistic, selector, factor or timing.
    """
    name = f"{where}: claim {c.get('id', '?')}" if named else where
    if "kind" not in c:
        raise ClaimError(f"{name} has no kind")
    if c["kind"] not in KINDS:
        raise ClaimError(f"{name}: unknown kind {c['kind']!r} (one of {sorted(KINDS)})")
    need, optional = _KIND_KEYS[c["kind"]]
    need = need | ({"id", "statement"} if named else set())
    for key in sorted(need):
        if key not in c:
            raise ClaimError(f"{name} ({c['kind']}) needs {key}")
    allowed = _COMMON | need | optional
    unknown = sorted(set(c) - allowed)
    if unknown:
        raise ClaimError(f"{name} ({c['kind']}): unknown key(s) {unknown} (allowed: {sorted(allowed)})")
    if named:
        if c.get("role") not in ROLES:
            raise ClaimError(f"{name}: role must be one of {list(ROLES)}, not {c.get('role')!r}")
        if (c["role"] == "conclusion") != ("conclusion" in c):
            raise ClaimError(f"{name}: a claim has conclusion = \"<id in original.toml>\" exactly when its role is conclusion")
    if "conclusion" in c and not (isinstance(c["conclusion"], str) and c["conclusion"].strip()):
        raise ClaimError(f"{name}: conclusion must name a [[conclusion]] id of original.toml")
    if "emulated_ok" in c and not (isinstance(c["emulated_ok"], str) and c["emulated_ok"].strip()):
        raise ClaimError(f"{name}: emulated_ok must be the reason, a non-empty string")
    if "paired" in c and not isinstance(c["paired"], bool):
        raise ClaimError(f"{name}: paired must be true or false")
    if c["kind"] == "compare" and c["relation"] not in RELATIONS:
        raise ClaimError(f"{name}: relation {c['relation']!r} not in {sorted(RELATIONS)}")
    if c.get("statistic", "median") not in STATISTICS:
        raise ClaimError(f"{name}: statistic {c['statistic']!r} not in {sorted(STATISTICS)}")
    if "timing" in c and not isinstance(c["timing"], bool):
        raise ClaimError(f"{name}: timing must be true or false, not {c['timing']!r}")
    for key in ("a", "b", "where"):
        if key in c and not isinstance(c[key], dict):
            raise ClaimError(f"{name}: {key} must be a table of case keys, not {c[key]!r}")
    for key in ("factor", "scale_a", "scale_b", "tolerance"):
        if key in c and (isinstance(c[key], bool) or not isinstance(c[key], (int, float)) or c[key] < 0
                         or (key != "tolerance" and c[key] == 0)):
            raise ClaimError(f"{name}: {key} must be a positive number, not {c[key]!r}")
    for key in ("statement", "source", "step", "metric", "over"):
        if key in c and not (isinstance(c[key], str) and c[key].strip()):
            raise ClaimError(f"{name}: {key} must be a non-empty string")


def load(path: Path | str) -> list[dict]:
    """Read and check ``claims.toml``; return the list of claim dicts (as written).

    Raises:
        ClaimError: bad TOML, unknown kind, relation or key, missing keys, duplicate ids.
    """
    try:
        data = tomllib.loads(Path(path).read_text())
    except tomllib.TOMLDecodeError as exc:
        raise ClaimError(f"{path}: not valid TOML: {exc}") from None
    unknown = sorted(set(data) - {"claim"})
    if unknown:
        raise ClaimError(f"{path}: unknown top-level table(s) {unknown}; claims are [[claim]] entries")
    claims = data.get("claim", [])
    seen = set()
    for c in claims:
        check_spec(c, str(path))
        if c["id"] in seen:
            raise ClaimError(f"{path}: duplicate claim id {c['id']}")
        seen.add(c["id"])
    return claims


_EXERCISE_KEYS = {"id", "title", "change", "predict", "check"}


def load_exercises(path: Path | str) -> list[dict]:
    """Read and check ``labs/<lab>/exercises.toml``: ``[[exercise]]`` entries with ``id``,
    ``title``, ``change`` (one knob and the command to run), ``predict`` (the direction to
    predict) and ``check`` (a claim body without id/statement, evaluated like a claim).

    Raises:
        ClaimError: a missing file, bad TOML, a missing or unknown key, a bad check,
        a duplicate id, or no exercise at all.
    """
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise ClaimError(f"{path}: no exercises file") from None
    except tomllib.TOMLDecodeError as exc:
        raise ClaimError(f"{path}: not valid TOML: {exc}") from None
    unknown = sorted(set(data) - {"exercise"})
    if unknown:
        raise ClaimError(f"{path}: unknown top-level table(s) {unknown}; exercises are [[exercise]] entries")
    exercises = data.get("exercise", [])
    if not exercises:
        raise ClaimError(f"{path}: no [[exercise]] entries")
    seen = set()
    for ex in exercises:
        where = f"{path}: exercise {ex.get('id', '?')}"
        for key in sorted(_EXERCISE_KEYS):
            if key not in ex:
                raise ClaimError(f"{where} needs {key}")
        extra = sorted(set(ex) - _EXERCISE_KEYS)
        if extra:
            raise ClaimError(f"{where}: unknown key(s) {extra} (allowed: {sorted(_EXERCISE_KEYS)})")
        for key in ("id", "title", "change", "predict"):
            if not (isinstance(ex[key], str) and ex[key].strip()):
                raise ClaimError(f"{where}: {key} must be a non-empty string")
        if not isinstance(ex["check"], dict):
            raise ClaimError(f"{where}: check must be a table (a claim body)")
        if {"id", "statement"} & set(ex["check"]):
            raise ClaimError(f"{where}: check takes no id or statement (the exercise has them)")
        check_spec(ex["check"], f"{where}: check", named=False)
        if ex["id"] in seen:
            raise ClaimError(f"{path}: duplicate exercise id {ex['id']}")
        seen.add(ex["id"])
    return exercises


def exercise_claim(exercise: dict) -> dict:
    """The claim an exercise's check amounts to: ``{"id": exercise id, "statement":
    exercise's prediction, **check}``, for :func:`evaluate_one`."""
    return {"id": exercise["id"], "statement": exercise["predict"], **exercise["check"]}


def is_timing(claim: dict) -> bool:
    """True if ``claim`` is about time or speed: its ``timing``, default true except for steps."""
    return bool(claim.get("timing", claim["kind"] != "step"))


def emulated(result: dict) -> bool:
    """True if the result's host has an emulated CPU (``host.emulation.accelerator == "tcg"``)."""
    emu = result["host"].get("emulation")
    return bool(emu and emu.get("accelerator") == "tcg")


def select(result: dict, metric: str, where: dict) -> list[dict]:
    """Measurements of ``metric`` whose case contains every key/value of ``where``."""
    return [m for m in result["measurements"]
            if m["metric"] == metric and all(m["case"].get(k) == v for k, v in where.items())]


def _fmt(x: float) -> str:
    return f"{x:.4g}"


def _describe(where: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in where.items()) or "all"


class Side:
    """One side of a claim: the pooled samples of the measurements a selector matched.

    Attributes: ``label`` (describes the selector), ``samples`` (floats, in the unit
    ``unit``), ``count`` (measurements pooled), ``value`` (median or mean), ``lo``/``hi``
    (range), ``n``.
    """

    def __init__(self, label: str, samples: list[float], unit: str, count: int, statistic: str = "median"):
        self.label, self.samples, self.unit, self.count, self.statistic = label, samples, unit, count, statistic
        self.value = statistics.mean(samples) if statistic == "mean" else statistics.median(samples)
        self.n = len(samples)
        self.min, self.max = min(samples), max(samples)
        if self.n >= IQR_FROM:
            q = statistics.quantiles(samples, n=4, method="inclusive")
            self.lo, self.hi, self.spread = q[0], q[2], "p25–p75"
        else:
            self.lo, self.hi, self.spread = self.min, self.max, "min–max"

    def scaled(self, k: float) -> "Side":
        """The same side with every sample multiplied by ``k``."""
        return Side(self.label, [s * k for s in self.samples], self.unit, self.count, self.statistic)

    def describe(self) -> str:
        """E.g. ``engine=psync: median 1.9e+04 IOPS (min 1.7e+04, max 2e+04, n=3)``."""
        pooled = f", {self.count} measurements pooled" if self.count > 1 else ""
        iqr = f", p25 {_fmt(self.lo)}, p75 {_fmt(self.hi)}" if self.spread == "p25–p75" else ""
        return (f"{self.label}: {self.statistic} {_fmt(self.value)} {self.unit} "
                f"(min {_fmt(self.min)}, max {_fmt(self.max)}{iqr}, n={self.n}{pooled})")


def side(result: dict, metric: str, where: dict, statistic: str = "median") -> tuple[Side | None, str]:
    """(Side, "") for the measurements of ``metric`` matching ``where``, or (None, reason)."""
    ms = select(result, metric, where)
    if not ms:
        return None, f"no {metric} measurement for {_describe(where)}"
    units = sorted({m["unit"] for m in ms})
    if len(units) > 1:
        raise ClaimError(f"{metric} where {_describe(where)} mixes units {units}: make the selector narrower")
    return Side(_describe(where), [float(s) for m in ms for s in m["samples"]], units[0], len(ms), statistic), ""


def overlap(x: Side, y: Side) -> bool:
    """True if the closed ranges of ``x`` and ``y`` overlap (touching counts). Two sides without
    any spread (every sample equal) carry no noise: they never overlap, their values decide."""
    if x.lo == x.hi and y.lo == y.hi:
        return False
    return x.lo <= y.hi and y.lo <= x.hi


def _verdict(claim: dict, verdict: str, evidence: str) -> dict:
    return {"id": claim["id"], "verdict": verdict, "evidence": evidence}


def _few(*sides: tuple[str, Side]) -> str | None:
    few = [f"{name} has n={s.n}" for name, s in sides if s.n < MIN_SAMPLES]
    return f"fewer than {MIN_SAMPLES} samples ({'; '.join(few)})" if few else None


def evaluate_one(claim: dict, result: dict) -> dict:
    """Evaluate one claim on one result (rules in the module docstring).

    Returns ``{"id", "verdict", "evidence"}``; verdict one of :data:`VERDICTS`.
    """
    if is_timing(claim) and emulated(result):
        return _verdict(claim, "not applicable", EMULATED_EVIDENCE)
    kind = claim["kind"]
    if kind == "step":
        return _step(claim, result)
    if kind in ("compare", "within"):
        return _pair(claim, result)
    return _increasing(claim, result)


def _step(claim: dict, result: dict) -> dict:
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


def _pair(claim: dict, result: dict) -> dict:
    stat = claim.get("statistic", "median")
    a, ea = side(result, claim["metric"], claim["a"], stat)
    b, eb = side(result, claim["metric"], claim["b"], stat)
    if a is None or b is None:
        return _verdict(claim, "untested", "; ".join(e for e in (ea, eb) if e))
    f = float(claim.get("factor", 1.0))
    if claim["kind"] == "compare":
        rel = claim["relation"]
        ok = {"less": a.value * f < b.value, "greater": a.value > b.value * f, "not_less": a.value * f >= b.value}[rel]
        test = {"less": "a·{f} < b", "greater": "a > b·{f}", "not_less": "a·{f} ≥ b"}[rel]
        test = test.replace("·{f}", f"·{f:g}" if f != 1.0 else "")
        ratio = f"; ratio a/b = {_fmt(a.value / b.value)}" if b.value else ""
        evidence = f"{test}? a = {a.describe()}; b = {b.describe()}{ratio}"
        few = _few(("a", a), ("b", b))
        if few:
            return _verdict(claim, "inconclusive", f"{evidence}; {few}")
        # The noise test is on the two sides as the relation compares them (factor applied).
        left, right = (a, b.scaled(f)) if rel == "greater" else (a.scaled(f), b)
        if overlap(left, right):
            what = "a and b" if f == 1.0 else test.split("?")[0].replace(" < ", " and ").replace(" > ", " and ").replace(" ≥ ", " and ")
            return _verdict(claim, "inconclusive", f"{evidence}; the ranges of {what} overlap: the difference is within noise")
        return _verdict(claim, "holds" if ok else "fails", f"{evidence}; ranges apart")
    # within
    sa, sb = float(claim.get("scale_a", 1.0)), float(claim.get("scale_b", 1.0))
    x, y = a.scaled(sa), b.scaled(sb)
    ok = x.value <= f * y.value and y.value <= f * x.value
    r = max(x.value / y.value, y.value / x.value) if x.value > 0 and y.value > 0 else float("inf")
    scaled = f" (a×{sa:g} = {_fmt(x.value)}, b×{sb:g} = {_fmt(y.value)})" if (sa, sb) != (1.0, 1.0) else ""
    evidence = f"a = {a.describe()}; b = {b.describe()}{scaled}; ratio {_fmt(r)} vs allowed {f:g}"
    few = _few(("a", a), ("b", b))
    if few:
        return _verdict(claim, "inconclusive", f"{evidence}; {few}")
    every_pair = x.hi <= f * y.lo and y.hi <= f * x.lo
    if ok and every_pair:
        return _verdict(claim, "holds", f"{evidence}; every pair of samples agrees within {f:g}")
    if not ok and not overlap(x, y):
        return _verdict(claim, "fails", f"{evidence}; ranges apart")
    why = ("some pairs of samples differ by more than the factor" if ok
           else "the ranges overlap: the disagreement is within noise")
    return _verdict(claim, "inconclusive", f"{evidence}; {why}")


def _increasing(claim: dict, result: dict) -> dict:
    metric, over, stat = claim["metric"], claim["over"], claim.get("statistic", "median")
    ms = [m for m in select(result, metric, claim["where"])
          if isinstance(m["case"].get(over), (int, float)) and not isinstance(m["case"].get(over), bool)]
    groups: dict[float, list[dict]] = {}
    for m in ms:
        groups.setdefault(m["case"][over], []).append(m)
    if len(groups) < 2:
        return _verdict(claim, "untested", f"fewer than two {over} values for {metric} where {_describe(claim['where'])}")
    xs = sorted(groups)
    units = sorted({m["unit"] for m in ms})
    if len(units) > 1:
        raise ClaimError(f"{metric} where {_describe(claim['where'])} mixes units {units}")
    pts = [Side(f"{over}={x:g}", [float(s) for m in groups[x] for s in m["samples"]], units[0], len(groups[x]), stat)
           for x in xs]
    tol = float(claim.get("tolerance", 0.1))
    f = float(claim.get("factor", 1.0))
    first, last = pts[0], pts[-1]
    drops, robust_drops = [], []
    for k, p in enumerate(pts):
        below = [q for q in pts[:k] if p.value < q.value * (1 - tol)]
        if below:
            top = max(below, key=lambda q: q.value)
            drops.append(f"{p.label}: {_fmt(p.value)} below {top.label}'s {_fmt(top.value)}")
            if any(p.hi < q.lo * (1 - tol) for q in below):
                robust_drops.append(p.label)
    grows = last.value > first.value * f
    series = ", ".join(f"{x:g}→{_fmt(p.value)}" for x, p in zip(xs, pts))
    evidence = (f"{metric} ({units[0]}, {stat} per point) by {over}: {series}; "
                f"last/first = {_fmt(last.value / first.value) if first.value else 'inf'}"
                + (f" (needs > {f:g})" if f != 1.0 else ""))
    if drops:
        evidence += "; drops beyond tolerance: " + "; ".join(drops)
    few = _few(*((p.label, p) for p in pts))
    if few:
        return _verdict(claim, "inconclusive", f"{evidence}; {few}")
    if grows and not drops and not overlap(first, last):
        return _verdict(claim, "holds", f"{evidence}; first and last ranges apart")
    if (not grows and not overlap(first, last)) or robust_drops:
        why = ("first and last ranges apart" if not grows and not overlap(first, last)
               else f"the drop at {', '.join(robust_drops)} is beyond noise")
        return _verdict(claim, "fails", f"{evidence}; {why}")
    why = ("the first and last ranges overlap: the growth is within noise" if grows and not drops
           else "the failure is within noise (ranges overlap)")
    return _verdict(claim, "inconclusive", f"{evidence}; {why}")


def evaluate(claims: list[dict], result: dict) -> list[dict]:
    """Evaluate every claim on ``result`` (a result dict); order kept."""
    return [evaluate_one(c, result) for c in claims]
