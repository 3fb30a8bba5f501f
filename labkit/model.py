"""The result model: one JSON document per lab and host (DESIGN.md, "The result file").

A result is a plain ``dict`` that validates against ``labkit/schema.json``.
This module loads the schema, validates, summarises samples and writes results
atomically (temporary file in the same directory, then ``os.replace``).

A site build loads every result, and python-jsonschema takes a good part of a second to
validate a large one (JSON Schema with format checks). :func:`validate` passes results with
jsonschema-rs where it is installed (milliseconds; python-jsonschema still decides and words
every failure), and :func:`load` remembers in the process which file contents passed (a
build asks for the hosts twice; ``make serve`` rebuilds in one process). A content that
failed is never remembered, so an invalid result fails every time.
"""

from __future__ import annotations

import hashlib
import json
import os
import statistics
import tempfile
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any, Callable, Iterable, TypedDict

import jsonschema

SCHEMA_VERSION = 1

ROOT = Path(__file__).resolve().parent.parent

CACHE_ENV = "PCB_BUILD_CACHE"


class Measurement(TypedDict, total=False):
    """One measurement of a result (``measurements[]`` in labkit/schema.json): ``metric``,
    ``unit``, ``case`` (key → str, int, float or bool), ``samples`` (in run order), their
    ``median``/``min``/``max``/``n``; optional ``step`` (the step that made it) and
    ``emulation`` (the TCG guest it was measured in)."""
    metric: str
    unit: str
    case: dict[str, Any]
    samples: list[float]
    median: float
    min: float
    max: float
    n: int
    step: str
    emulation: dict | None


class Step(TypedDict, total=False):
    """One step of a run (``steps[]``): ``name``, ``group``, ``status`` (ok, failed, skipped),
    ``reason``, ``seconds``, ``command``; optional ``exit_code``, ``expect``, ``stdout_bytes``,
    ``case``."""
    name: str
    group: str
    status: str
    reason: str
    seconds: float
    command: str
    exit_code: int | None
    expect: str
    stdout_bytes: int | None
    case: dict[str, Any]


class Effect(TypedDict):
    """The ratio a verdict was decided on (labkit/stats/claims.py): ``statistic`` (its name),
    ``estimate``, ``low``/``high`` (the interval; None where it does not exist or is open),
    ``level`` (0.95), ``factor`` and ``needs`` (the claim's threshold, in words), ``n_a``/``n_b``
    (samples a side) and ``method`` (how the interval was computed)."""
    statistic: str
    estimate: float | None
    low: float | None
    high: float | None
    level: float
    factor: float
    needs: str
    n_a: int
    n_b: int
    method: str


class Verdict(TypedDict, total=False):
    """A claim's verdict (:func:`labkit.stats.claims.evaluate_one`): ``id``, ``verdict`` (holds,
    fails, inconclusive, untested, not applicable), ``evidence``; optional ``role``, ``reason``
    (every verdict but holds/fails), ``effect``, ``flags``, ``emulated``."""
    id: str
    verdict: str
    evidence: str
    role: str
    reason: str
    effect: Effect
    flags: list[str]
    emulated: bool


class Result(TypedDict, total=False):
    """A result file (labkit/schema.json): ``schema_version``, ``lab``, ``host`` (provenance,
    :func:`labkit.run.probe.probe`), ``tools``, ``run``, ``steps``, ``measurements``, ``artifacts``
    and ``claims`` (the verdicts as evaluated when the run was recorded; pages evaluate again
    with today's claims.toml)."""
    schema_version: int
    lab: str
    host: dict[str, Any]
    tools: dict[str, str]
    run: dict[str, Any]
    steps: list[Step]
    measurements: list[Measurement]
    artifacts: list[dict[str, Any]]
    claims: list[Verdict]


def select(result: Result, metric: str, where: dict | None = None) -> list[Measurement]:
    """Measurements of ``metric`` whose case contains every key/value of ``where`` (all of
    them when ``where`` is empty or None), in the order the result lists them."""
    where = where or {}
    return [m for m in result["measurements"] if m["metric"] == metric and case_holds(m["case"], where)]


def case_holds(case: dict | None, where: dict) -> bool:
    """Whether ``case`` (a step's or a measurement's, None for a step without one) contains
    every key/value of ``where``; values compare with their types (``5.10`` the string is not
    ``5.1`` the number), and a value ``None`` in ``where`` asks for a case without that key
    (``{"experiment": None}``: the measurements of no experiment)."""
    case = case or {}
    return all(case.get(k) == v for k, v in where.items())


def select_steps(result: Result, where: dict) -> list[dict]:
    """Steps of ``result`` whose case contains every key/value of ``where``, in run order:
    how a page or a claim picks a step by what it measured rather than by its name."""
    return [s for s in result["steps"] if case_holds(s.get("case"), where)]


def case_text(case: dict) -> str:
    """A case as messages and tables name it: ``k=v, ...`` in the dict's order (``""`` for an
    empty case)."""
    return ", ".join(f"{k}={v}" for k, v in case.items())


def find_step(result: Result, name: str | None = None, where: dict | None = None) -> dict | None:
    """The one step of ``result`` named ``name`` (a step that stands for itself, such as
    ``setup.df``), or, with ``where``, the one step whose case holds every key/value of it
    (:func:`select_steps`: a step that measured a case is found by its case, not by a name that
    spells it). None when this run has no such step. Pages (``step_output``) and step claims
    (``where = {...}``) find steps through it.

    Raises:
        ValueError: neither or both of ``name`` and ``where`` given, or ``where`` picks more than
            one step (the message names three of them: add case keys).
    """
    if (name is None) == (where is None):
        raise ValueError("find_step: a step's name or a case (where), not both")
    if name is not None:
        return next((s for s in result["steps"] if s["name"] == name), None)
    found = select_steps(result, where)
    if len(found) > 1:
        raise ValueError(f"case {case_text(where)} picks {len(found)} steps "
                         f"({', '.join(s['name'] for s in found[:3])}...): add case keys")
    return found[0] if found else None


def cache_dir(kind: str) -> Path | None:
    """The folder of the build's on-disk cache for ``kind`` (``"charts"``, ``"verdicts"``, ...):
    ``$PCB_BUILD_CACHE/<kind>``, by default ``<checkout>/.cache/<kind>`` (git-ignored);
    ``None`` when ``PCB_BUILD_CACHE`` is ``0`` or ``off`` (nothing is read or written then).
    The folder may not exist yet. Every entry is named by a hash of everything that makes
    it, so deleting the folder only costs time."""
    base = os.environ.get(CACHE_ENV)
    if base is not None and base.strip().lower() in ("0", "off"):
        return None
    return Path(base or ROOT / ".cache") / kind


def remembered(kind: str, parts: list[str], compute: Callable[[], Any]) -> Any:
    """``compute()``, remembered on disk as JSON in :func:`cache_dir` ``(kind)`` under the SHA-256
    of ``parts`` (strings that name everything the value depends on: its inputs, the source of
    the code that computes it), and read back from there by a later call, in this process or
    another. With the cache off, or a folder that cannot be written (a read-only checkout),
    ``compute()`` every time. The value must survive ``json.dumps``/``json.loads`` unchanged.
    An exception of ``compute`` propagates and nothing is kept."""
    folder = cache_dir(kind)
    if folder is None:
        return compute()
    path = folder / f"{hashlib.sha256(chr(0).join(parts).encode()).hexdigest()}.json"
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        pass
    value = compute()
    try:
        folder.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(value))
        os.replace(tmp, path)
    except OSError:
        pass
    return value


class ResultError(ValueError):
    """A result file is missing, unreadable or does not match the schema."""


@lru_cache(maxsize=1)
def schema() -> dict:
    """Return the JSON Schema (draft 2020-12) of a result file as a dict."""
    return json.loads(resources.files("labkit").joinpath("schema.json").read_text())


@lru_cache(maxsize=1)
def validator() -> jsonschema.Draft202012Validator:
    """The schema's validator (python-jsonschema, with its format checks): it decides, and its
    messages name what is wrong."""
    return jsonschema.Draft202012Validator(schema(), format_checker=jsonschema.FormatChecker())


@lru_cache(maxsize=1)
def fast_validator():
    """The same schema compiled by jsonschema-rs (a Rust implementation of draft 2020-12, its
    formats checked too), or ``None`` where it is not installed (a guest's Debian userspace).
    It only passes results: python-jsonschema validates every result that it does not pass
    and gives the message. Over the ten committed results it took 7 ms where
    python-jsonschema took 1.8 s (2026-11-30), a sixth of a cold site build's own process."""
    try:
        import jsonschema_rs
    except ImportError:
        return None
    return jsonschema_rs.Draft202012Validator(schema(), validate_formats=True)


def validate(result: Result, source: str = "<result>", new: bool = False) -> None:
    """Validate ``result`` against the schema and the model's own invariants.

    Invariants beyond the schema: ``median``/``min``/``max``/``n`` agree with
    ``samples``; every measurement's ``(metric, case)`` is unique; a host whose
    ``audit_context`` says "never enabled" is not one the probe found audit enabled on.
    ``new``: a result being recorded now (``labkit record``), which must also say how its
    run stood with audit (``host.audit_context``; results recorded before it existed lack it).

    Raises:
        ResultError: naming ``source`` and the first violated rule.
    """
    fast = fast_validator()
    errors = [] if fast is not None and fast.is_valid(result) else sorted(
        validator().iter_errors(result), key=lambda e: list(e.absolute_path))
    if errors:
        err = errors[0]
        where = "/".join(str(p) for p in err.absolute_path) or "(top)"
        raise ResultError(f"{source}: {where}: {err.message}")
    host = result["host"]
    if new and "audit_context" not in host:
        raise ResultError(f"{source}: host: a new result must record audit_context (labkit/run/auditctx.py)")
    if host.get("audit_context") == "never enabled" and host.get("audit_ever_enabled") is True:
        raise ResultError(f"{source}: host: audit_context 'never enabled' but audit_ever_enabled is true")
    seen = set()
    for i, m in enumerate(result["measurements"]):
        expect = summarize(m["samples"])
        for key in ("median", "min", "max", "n"):
            if abs(m[key] - expect[key]) > 1e-9 * max(1.0, abs(expect[key])):
                raise ResultError(f"{source}: measurements/{i}: {key}={m[key]} but samples give {expect[key]}")
        key = (m["metric"], json.dumps(m["case"], sort_keys=True))
        if key in seen:
            raise ResultError(f"{source}: measurements/{i}: duplicate metric and case {key}")
        seen.add(key)


def summarize(samples: Iterable[float]) -> dict:
    """Median, min, max and count of ``samples`` (a non-empty iterable of numbers).

    The median of an even count is the mean of the two middle values
    (``statistics.median``), as lmbench's and our programs' reports do.

    Raises:
        ResultError: if ``samples`` is empty.
    """
    values = [float(s) for s in samples]
    if not values:
        raise ResultError("a measurement needs at least one sample")
    return {"median": statistics.median(values), "min": min(values), "max": max(values), "n": len(values)}


def measurement(metric: str, unit: str, case: dict, samples: Iterable[float], step: str | None = None,
                emulation: dict | None = None) -> Measurement:
    """Build one measurement dict: every sample kept, median/min/max/n derived from them.
    ``emulation``: the guest's emulation object when the samples were measured inside an
    emulated guest (``{"accelerator": "tcg", ...}``), whatever host booted it."""
    values = [float(s) for s in samples]
    m = {"metric": metric, "unit": unit, "case": dict(case), "samples": values, **summarize(values)}
    if emulation:
        m["emulation"] = dict(emulation)
    if step:
        m["step"] = step
    return m


VALIDATED: set[str] = set()
"""The SHA-256 (hex) of the result contents that passed :func:`validate` in this process."""


def load(path: Path | str) -> Result:
    """Read and validate one result file. A content that passed :func:`validate` before in this
    process (:data:`VALIDATED`) is not validated again.

    Raises:
        ResultError: if the file is missing, is not JSON, or fails validation.
    """
    path = Path(path)
    try:
        text = path.read_text()
        data = json.loads(text)
    except FileNotFoundError:
        raise ResultError(f"{path}: no such result file") from None
    except json.JSONDecodeError as exc:
        raise ResultError(f"{path}: not valid JSON: {exc}") from None
    key = hashlib.sha256(text.encode()).hexdigest()
    if key not in VALIDATED:
        validate(data, str(path))
        VALIDATED.add(key)
    return data


def write_atomic(path: Path | str, data: Any) -> None:
    """Write ``data`` as indented JSON to ``path`` atomically (temp file + rename)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as fh:
            json.dump(data, fh, indent=1, sort_keys=False)
            fh.write("\n")
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
