"""TOML files checked with a JSON Schema: a lab's lab.toml, claims.toml, exercises.toml, original.toml.

Each format is described, key by key, by a draft 2020-12 JSON Schema beside this module
(``labkit/<format>.schema.json``): the schemas are the formats' documentation, and their modules
(:mod:`labkit.manifest`, :mod:`labkit.stats.claims`, :mod:`labkit.original`) keep in Python only what
a schema cannot say (unique ids, cross-references). A schema names another by its ``$id``
(``https://perf-casebook.invalid/schema/<name>.json``, relative: ``claims.json#/$defs/selector``);
every ``*.schema.json`` in the schema's folder can be referred to.

A file that fails is refused with one line: the file, the JSON path of the bad value (``$`` is the
whole file, ``$.claim[3].factor`` the factor of the fourth ``[[claim]]``), jsonschema's message,
and the id of the entry the value is in, e.g.
``labs/x/claims.toml: $.claim[3].factor: 0 is less than or equal to the minimum of 0 (claim 'fast')``.

Only the standard library is imported with this module (``python3 labkit/manifest.py`` runs
before any venv exists); jsonschema is imported when a file is first validated. Both jsonschema
APIs for references across schemas are used: ``referencing`` (jsonschema 4.18 and later) and,
where it is missing, ``RefResolver`` (Debian bookworm's python3-jsonschema 4.10, in the guests).
"""

from __future__ import annotations

import functools
import json
import tomllib
from pathlib import Path

# Errors about keys a schema does not know come last: a missing or unknown kind of claim leaves
# every key of the kind unknown, and the kind is what is wrong.
_UNKNOWN_KEY = ("additionalProperties", "unevaluatedProperties")

# (schema, text) of the files that passed in this process: a site build loads each lab's files
# for many pages, and validating a claims.toml costs several times parsing it (unevaluatedProperties
# walks each kind's subschema again). A file is parsed on every load: each caller gets its own dicts.
_VALID: set[tuple[str, str]] = set()


def load(path: Path | str, schema_path: Path | str, error_cls: type[Exception], *,
         missing: str = "no such file", optional: bool = False) -> dict:
    """Read the TOML file ``path``, validate it against the JSON Schema ``schema_path``, return it as a dict.

    ``missing``: the message for a file that does not exist. ``optional=True``: validate only
    when jsonschema is installed (else the parsed file is returned unchecked).

    Raises:
        error_cls: one line starting with ``path``: the file does not exist (``missing``), is not
            valid TOML (``not valid TOML: <tomllib's message>``), or fails the schema (see
            :func:`check`).
        ImportError: jsonschema is not installed and ``optional`` is false.
    """
    path = Path(path)
    try:
        text = path.read_text()
        data = tomllib.loads(text)
    except FileNotFoundError:
        raise error_cls(f"{path}: {missing}") from None
    except tomllib.TOMLDecodeError as exc:
        raise error_cls(f"{path}: not valid TOML: {exc}") from None
    key = (str(Path(schema_path).resolve()), text)
    if key not in _VALID:
        check(data, schema_path, error_cls, str(path), optional=optional)
        _VALID.add(key)
    return data


def check(data: object, schema_path: Path | str, error_cls: type[Exception], where: str, *,
          pointer: str = "", optional: bool = False) -> None:
    """Validate ``data`` (as parsed from TOML) against the schema ``schema_path``, or against its
    part at the JSON Pointer ``pointer`` (``"/$defs/claim"``: one claim).

    Raises:
        error_cls: ``<where>: <JSON path>: <message>[ (<section> '<id>')]``, one line, for the
            first error in the order of the document (errors about unknown keys after the others).
        ImportError: jsonschema is not installed and ``optional`` is false.
    """
    try:
        validator = _validator(str(Path(schema_path).resolve()), pointer)
    except ImportError:
        if optional:
            return
        raise
    errors = sorted(validator.iter_errors(data),
                    key=lambda e: (e.validator in _UNKNOWN_KEY, list(e.absolute_path)))
    if errors:
        raise error_cls(f"{where}: {_describe(errors[0], data)}")


@functools.lru_cache(maxsize=16)
def _validator(schema_path: str, pointer: str):
    """A Draft 2020-12 validator of the schema at ``schema_path`` (or its part at ``pointer``),
    able to resolve ``$ref`` to every ``*.schema.json`` of its folder."""
    import jsonschema
    schema = json.loads(Path(schema_path).read_text())
    store = {s["$id"]: s for s in (json.loads(f.read_text()) for f in sorted(Path(schema_path).parent.glob("*.schema.json")))
             if "$id" in s}
    if pointer:
        schema = {"$ref": f"{schema['$id']}#{pointer}"}
    try:
        from referencing import Registry, Resource
    except ImportError:
        return jsonschema.Draft202012Validator(schema, resolver=jsonschema.RefResolver.from_schema(schema, store=store))
    registry = Registry().with_resources((uri, Resource.from_contents(s)) for uri, s in store.items())
    return jsonschema.Draft202012Validator(schema, registry=registry)


def _describe(error, data: object) -> str:
    """``<JSON path>: <message>[ (<section> '<id>')]`` of one jsonschema error, on one line.

    The id is that of the innermost ``[[section]]`` entry on the path that has one. A table
    (dict) in the message is shown as ``{…}`` (the path names it); a failed ``oneOf`` or
    ``anyOf`` is followed by why each alternative failed, a failed ``pattern`` (a regular
    expression) by the schema's description of the value.
    """
    path, entry, node, parent_key = "$", "", data, None
    for p in error.absolute_path:
        node = node[p]
        if isinstance(p, int):
            path += f"[{p}]"
            if isinstance(node, dict) and isinstance(node.get("id"), str) and isinstance(parent_key, str):
                entry = f" ({parent_key} {node['id']!r})"
        else:
            path += f".{p}" if str(p).isidentifier() else f"[{p!r}]"
        parent_key = p
    message = error.message
    if isinstance(error.instance, dict) and message.startswith(repr(error.instance)):
        message = "{…}" + message[len(repr(error.instance)):]      # a table: the path names it
    if error.context:       # anyOf, oneOf: why each alternative failed
        message += " (" + "; ".join(dict.fromkeys(sub.message for sub in error.context)) + ")"
    if error.validator == "pattern" and isinstance(error.schema, dict) and error.schema.get("description"):
        message += f" ({error.schema['description'].rstrip('.')})"
    return f"{path}: {message}{entry}".replace("\n", " ")
