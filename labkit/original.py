"""The original investigation's figures, as data: ``labs/<lab>/original.toml``.

These are quotes typed from the seed write-up (strings exactly as published, units in the
column headers), never measurements. Layout::

    [source]    seed (a file name, never a path), author_context (one line)
    [[machine]] id, name, arch, kernel (optional when every table naming it gives one)
    [[table]]   id, title, machine = "id" | machines = ["id", ...], kernel (optional),
                columns = [...], rows = [[...], ...] (each as long as columns), note (optional)
    [[conclusion]] id, text (a conclusion the original draws, with its machine and kernel),
                machine (optional), untestable (optional: why no host we have can test it; a
                conclusion without it is tested by a claim whose role is conclusion)
    [[ratio]]   id, quantity, reading,
                original = {table, a = [row label, column], b = [row label, column]}
                here = {metric, a = {selector}, b = {selector}, statistic (optional)}

A row label is the row's first cell. The original ratio is a ÷ b of the two cells' numbers
(:func:`cell_number`); the ratio here is a ÷ b of the two sides' medians per host
(:mod:`labkit.stats.claims` sides). ``labkit/original.schema.json`` describes every key and is checked
on load (:mod:`labkit.tomlschema`); this module adds what a schema cannot say (unique ids, the
machines, tables, rows and cells an entry names). Every error names the file and the entry.
"""

from __future__ import annotations

import re
from pathlib import Path

from . import tomlschema


class OriginalError(ValueError):
    """original.toml is malformed, or a table, row or column it names does not exist."""


SCHEMA = Path(__file__).with_name("original.schema.json")


def load(path: Path | str) -> dict:
    """Read ``original.toml``, check it against ``labkit/original.schema.json`` and for what a
    schema cannot say; returns ``{"source": {...}, "machine": [...], "table": [...],
    "ratio": [...], "conclusion": [...]}`` (ratio may be empty).

    Raises:
        OriginalError: one line naming the file: a missing file, bad TOML, a schema violation
        with its JSON path (a missing or unknown key, a seed that is a path, a table with both
        or neither of machine and machines, ...), duplicate ids, a row whose length differs from
        the columns, a machine without a kernel, a machine, table, row or column that does not
        exist, a cell that a ratio needs but that holds no number.
    """
    data = tomlschema.load(path, SCHEMA, OriginalError, missing="no such file (the original investigation's figures)")
    data.setdefault("ratio", [])
    for section in ("machine", "table", "ratio", "conclusion"):
        seen = set()
        for e in data[section]:
            if e["id"] in seen:
                raise OriginalError(f"{path}: duplicate {section} id {e['id']!r}")
            seen.add(e["id"])
    machines = {m["id"]: m for m in data["machine"]}
    for c in data["conclusion"]:
        if "machine" in c and c["machine"] not in machines:
            raise OriginalError(f"{path}: conclusion {c['id']}: machine {c['machine']!r} is not a [[machine]] id")
    for t in data["table"]:
        _check_table(t, machines, f"{path}: table {t['id']}")
    tables = {t["id"]: t for t in data["table"]}
    for r in data["ratio"]:
        where = f"{path}: ratio {r['id']}"
        if r["original"]["table"] not in tables:
            raise OriginalError(f"{where}: original table {r['original']['table']!r} is not in this file "
                                f"(tables: {sorted(tables)})")
        for side in ("a", "b"):
            cell(tables[r["original"]["table"]], r["original"][side], f"{where}: original.{side}", number=True)
    return data


def _check_table(t: dict, machines: dict, where: str) -> None:
    for mid in [t["machine"]] if "machine" in t else t["machines"]:
        if mid not in machines:
            raise OriginalError(f"{where}: machine {mid!r} is not a [[machine]] of this file (machines: {sorted(machines)})")
        if not t.get("kernel") and not machines[mid].get("kernel"):
            raise OriginalError(f"{where}: no kernel for machine {mid!r} (give kernel in the table or the machine)")
    for i, row in enumerate(t["rows"], 1):
        if len(row) != len(t["columns"]):
            raise OriginalError(f"{where}: row {i} has {len(row)} cells, the table has {len(t['columns'])} columns")


def table(orig: dict, table_id: str, where: str = "original.toml") -> dict:
    """The ``[[table]]`` with id ``table_id``. Raises OriginalError if there is none."""
    for t in orig["table"]:
        if t["id"] == table_id:
            return t
    raise OriginalError(f"{where}: no table {table_id!r} (tables: {[t['id'] for t in orig['table']]})")


def table_machines(orig: dict, t: dict) -> list[tuple[dict, str]]:
    """(machine, kernel) for each machine a table names; the table's kernel wins."""
    machines = {m["id"]: m for m in orig["machine"]}
    ids = [t["machine"]] if "machine" in t else t["machines"]
    return [(machines[i], t.get("kernel") or machines[i]["kernel"]) for i in ids]


def caption(orig: dict, t: dict) -> str:
    """``Original: <machine name>, kernel <k>`` (machines joined by ``;``)."""
    return "Original: " + "; ".join(f"{m['name']}, kernel {k}" for m, k in table_machines(orig, t))


_NUMBER = re.compile(r"^\s*[~≈]?\s*([-+]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?)\s*([kKM]?)(?![\w.])")


def cell_number(text: str) -> float | None:
    """The number a published cell starts with, or None: ``"12.8296"`` → 12.8296,
    ``"~13"`` → 13, ``"~10 (mean)"`` → 10, ``"106k"`` → 106000, ``"1,608"`` → 1608."""
    m = _NUMBER.match(text)
    if not m:
        return None
    return float(m.group(1).replace(",", "")) * {"": 1, "k": 1e3, "K": 1e3, "M": 1e6}[m.group(2)]


def cell(t: dict, ref: list, where: str, number: bool = False) -> str:
    """The cell ``ref = [row label, column header]`` of table ``t`` (its text).

    Raises:
        OriginalError: no such row or column, a label that names several rows, or
        (``number=True``) a cell that holds no number.
    """
    if not (isinstance(ref, list) and len(ref) == 2 and all(isinstance(x, str) for x in ref)):
        raise OriginalError(f"{where}: must be [row label, column header], not {ref!r}")
    label, col = ref
    if col not in t["columns"]:
        raise OriginalError(f"{where}: table {t['id']} has no column {col!r} (columns: {t['columns']})")
    rows = [r for r in t["rows"] if r[0] == label]
    if len(rows) != 1:
        labels = [r[0] for r in t["rows"]]
        raise OriginalError(f"{where}: table {t['id']} has {len(rows)} rows labelled {label!r} (row labels: {labels})")
    text = rows[0][t["columns"].index(col)]
    if number and cell_number(text) is None:
        raise OriginalError(f"{where}: cell {label!r} / {col!r} of table {t['id']} holds no number: {text!r}")
    return text


def original_ratio(orig: dict, ratio: dict) -> tuple[float, str, str]:
    """(a ÷ b, a's cell text, b's cell text) of a ``[[ratio]]``'s original figures.

    Raises:
        OriginalError: b's number is zero.
    """
    t = table(orig, ratio["original"]["table"])
    ta = cell(t, ratio["original"]["a"], f"ratio {ratio['id']}: original.a", number=True)
    tb = cell(t, ratio["original"]["b"], f"ratio {ratio['id']}: original.b", number=True)
    b = cell_number(tb)
    if not b:
        raise OriginalError(f"ratio {ratio['id']}: original b cell {tb!r} is zero")
    return cell_number(ta) / b, ta, tb
