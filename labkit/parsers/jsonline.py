"""Our lab programs' machine-readable output: one JSON object per line on stdout."""

from __future__ import annotations

import json


class ParseError(ValueError):
    """Output does not have the expected shape."""


def json_lines(text: str, tool: str | None = None) -> list[dict]:
    """Every line of ``text`` that is a JSON object (with ``"tool": tool`` if given).

    Raises:
        ParseError: if no such line exists (a program that printed no number).
    """
    found = []
    for line in text.splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(obj, dict) and (tool is None or obj.get("tool") == tool):
            found.append(obj)
    if not found:
        raise ParseError(f"no JSON result line{' from ' + tool if tool else ''} in output")
    return found


def json_line(text: str, tool: str | None = None) -> dict:
    """The single JSON result line of ``text``.

    Raises:
        ParseError: none, or more than one.
    """
    found = json_lines(text, tool)
    if len(found) != 1:
        raise ParseError(f"expected one JSON result line, found {len(found)}")
    return found[0]
