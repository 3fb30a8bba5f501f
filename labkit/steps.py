"""A step's record as labs/lib/lab.sh writes it, read once here: ``steps.tsv`` and ``raw/<step>.case``.

``steps.tsv``: one line a step, tab-separated, the columns :data:`COLUMNS` (lab.sh's
``lab__record_step`` writes them in this order; tabs and newlines inside a field are replaced by
spaces). :func:`read_tsv` is the one reader (the supervisor's count of skipped and failed steps,
:func:`labkit.record.read_steps`).

``raw/<step>.case``: the step's case, one ``KEY=VALUE`` a line (``lab_run --case KEY=VALUE``).
Each key's type is declared by the lab, in the ``[case]`` table of ``labs/<lab>/lab.toml``
(``rep = "int"``, ``kernel = "str"``; :data:`TYPES`), and a value is read as its key's type:
``kernel=6.1`` and ``kernel=5.10`` are both strings where ``kernel`` is declared ``str``. A key
the lab does not declare, or a value that is not of its key's type, is an error (lab.sh refuses
it when the step runs, from :func:`env_words` in ``PCB_LAB_CASE``; :func:`read_case` when a run
directory is recorded).

Only the standard library is imported (labkit.run.supervisor imports this module).
"""

from __future__ import annotations

import csv
import re
import tomllib
from pathlib import Path

# steps.tsv's columns, in order.
COLUMNS = ("name", "group", "status", "exit", "seconds", "expect", "reason")

# Declared case types → the text a value of that type is written as (lab.sh checks the same patterns).
TYPES = {
    "str": re.compile(r"[^\n]*"),
    "int": re.compile(r"-?[0-9]+"),
    "float": re.compile(r"-?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?"),
    "bool": re.compile(r"true|false"),
}
KEY = re.compile(r"[a-z_][a-z0-9_]*")


class CaseError(ValueError):
    """A case field that is not ``KEY=VALUE``, names an undeclared key or is not of its key's type."""


def read_tsv(path: Path | str) -> list[dict[str, str]]:
    """The rows of a ``steps.tsv``, each a dict of :data:`COLUMNS` (a short row's missing
    columns are ``""``; blank lines are skipped)."""
    with open(path, newline="") as f:
        rows = csv.DictReader(f, fieldnames=COLUMNS, delimiter="\t", quoting=csv.QUOTE_NONE, restval="")
        return [row for row in rows if any((row[c] or "").strip() for c in COLUMNS)]


def declared(lab_dir: Path | str) -> dict[str, str]:
    """The case keys a lab declares and their types: the ``[case]`` table of ``<lab_dir>/lab.toml``
    (``{}`` when the file or the table is missing: such a lab can give its steps no case).

    Raises:
        CaseError: a key that is not lower case letters, digits and ``_``, or a type not in :data:`TYPES`.
    """
    path = Path(lab_dir) / "lab.toml"
    try:
        table = tomllib.loads(path.read_text()).get("case", {})
    except FileNotFoundError:
        return {}
    for key, kind in table.items():
        if not KEY.fullmatch(key) or kind not in TYPES:
            raise CaseError(f"{path}: [case] {key} = {kind!r}: a key of a-z, 0-9 and _, "
                            f"and a type of {', '.join(TYPES)}")
    return dict(table)


def env_words(types: dict[str, str]) -> str:
    """``KEY=TYPE`` words, the value of ``PCB_LAB_CASE`` that lab.sh checks ``--case`` fields against."""
    return " ".join(f"{k}={t}" for k, t in types.items())


def value(key: str, text: str, types: dict[str, str]) -> str | int | float | bool:
    """``text`` read as the type ``types`` declares for ``key``.

    Raises:
        CaseError: ``key`` is not declared, or ``text`` is not a value of its type.
    """
    kind = types.get(key)
    if kind is None:
        raise CaseError(f"case key {key!r} is not declared in the lab's lab.toml [case] table")
    if not TYPES[kind].fullmatch(text):
        raise CaseError(f"case {key}={text}: not of type {kind}")
    if kind == "int":
        return int(text)
    if kind == "float":
        return float(text)
    if kind == "bool":
        return text == "true"
    return text


def parse(fields: list[str], types: dict[str, str], where: str = "case") -> dict:
    """A case from ``KEY=VALUE`` fields, each value typed by :func:`value`.

    Raises:
        CaseError: a field without ``=`` or with a bad key, an undeclared key, a value not of its
            type, or a key given twice; the message starts with ``where``.
    """
    case: dict = {}
    for field in fields:
        key, sep, text = field.partition("=")
        if not sep or not KEY.fullmatch(key):
            raise CaseError(f"{where}: {field!r} is not KEY=VALUE (KEY: a-z, 0-9 and _)")
        if key in case:
            raise CaseError(f"{where}: case key {key!r} given twice")
        try:
            case[key] = value(key, text, types)
        except CaseError as exc:
            raise CaseError(f"{where}: {exc}") from None
    return case


def read_case(path: Path, types: dict[str, str]) -> dict | None:
    """A step's case from ``raw/<step>.case`` (:func:`parse` of its non-blank lines), or None
    without one.

    Raises:
        CaseError: see :func:`parse`.
    """
    if not path.exists():
        return None
    return parse([ln for ln in path.read_text().splitlines() if ln.strip()], types, str(path))
