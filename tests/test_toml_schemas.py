"""The labs' TOML formats are JSON Schemas (labkit/*.schema.json) read by one loader
(labkit/tomlschema.py): every committed file follows its schema, every key is described, and a
bad file is refused with one line naming the file, the JSON path of the bad value and the key."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from labkit.stats import claims
from labkit import manifest, original, tomlschema

ROOT = Path(__file__).resolve().parent.parent
LABKIT = ROOT / "labkit"
SCHEMAS = {p.name: json.loads(p.read_text()) for p in sorted(LABKIT.glob("*.schema.json"))}
NEW = ("claims.schema.json", "exercises.schema.json", "original.schema.json")

CLAIM = ('[[claim]]\nid = "x"\nstatement = "s"\nsource = "s"\nrole = "ours"\nkind = "compare"\nmetric = "m"\n'
         'a = { engine = "libaio" }\nb = { engine = "psync" }\nrelation = "greater"\nfactor = 1.5\n')
EXERCISE = ('[[exercise]]\nid = "e"\ntitle = "t"\nchange = "c"\npredict = "p"\n'
            'check = { kind = "compare", metric = "m", a = {}, b = {}, relation = "less" }\n')
ORIGINAL = ('[source]\nseed = "004.txt"\nauthor_context = "notes"\n'
            '[[machine]]\nid = "m1"\nname = "a machine"\narch = "x86_64"\nkernel = "3.10"\n'
            '[[table]]\nid = "t1"\ntitle = "a table"\nmachine = "m1"\ncolumns = ["case", "us"]\nrows = [["same", "8.2"], ["other", "12.8"]]\n'
            '[[conclusion]]\nid = "c1"\ntext = "other is slower"\n'
            '[[ratio]]\nid = "r1"\nquantity = "other ÷ same"\nreading = "above 1"\n'
            'original = { table = "t1", a = ["other", "us"], b = ["same", "us"] }\n'
            'here = { metric = "round_trip", a = { pin = "other" }, b = { pin = "same" } }\n')
LAB = ('title = "t"\norder = 1\nproblem = "p"\npractise = "q"\ndebs = ["fio"]\n'
       'quick_budget_s = 1\nfull_budget_s = 2\n[case]\nkernel = "str"\n')


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def refused(load, path: Path, text: str, error) -> str:
    path.write_text(text)
    with pytest.raises(error) as exc:
        load(path)
    message = str(exc.value)
    assert "\n" not in message, message
    return message


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_each_schema_is_a_valid_draft_2020_12_schema(name):
    assert SCHEMAS[name]["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    jsonschema.Draft202012Validator.check_schema(SCHEMAS[name])


def _target(ref: str, here: str) -> dict:
    """The schema a ``$ref`` (``#/$defs/x`` or ``claims.json#/$defs/x``) points at."""
    doc, _, pointer = ref.partition("#")
    node = SCHEMAS[doc.replace(".json", ".schema.json")] if doc else SCHEMAS[here]
    for part in pointer.strip("/").split("/"):
        node = node[part]
    return node


def _properties(node, trail=""):
    """(JSON path, schema) of every key a schema's ``properties`` describe, anywhere in it but
    in an ``if`` (a condition on a key, not its description)."""
    if isinstance(node, dict):
        for key, sub in node.get("properties", {}).items():
            yield f"{trail}.{key}", sub
        for key, sub in node.items():
            if key != "if":
                yield from _properties(sub, f"{trail}/{key}")
    elif isinstance(node, list):
        for i, sub in enumerate(node):
            yield from _properties(sub, f"{trail}[{i}]")


@pytest.mark.parametrize("name", NEW)
def test_every_key_has_a_description(name):
    """The schemas are the formats' documentation: each key says what it means."""
    keys = list(_properties(SCHEMAS[name]))
    assert len(keys) >= 6
    for where, sub in keys:
        described = "description" in sub or ("$ref" in sub and "description" in _target(sub["$ref"], name))
        assert described, f"{name}: {where} has no description"


def test_every_committed_file_follows_its_schema():
    labs = sorted(p.parent for p in (ROOT / "labs").glob("*/run.sh"))
    assert len(labs) >= 5
    for lab in labs:
        assert claims.load(lab / "claims.toml"), lab
        assert claims.load_exercises(lab / "exercises.toml"), lab
        assert original.load(lab / "original.toml")["conclusion"], lab
        assert manifest.load(lab)["name"] == lab.name
    cards = sorted((ROOT / "labs").glob("*/cards/*.exercises.toml"))
    assert cards and all(claims.load_exercises(f) for f in cards)
    assert claims.load_exercises(ROOT / "tests" / "fixtures" / "check" / "exercises.toml")


# format: (file name, loader of that file, its error, a good file)
FORMATS = {
    "claims": ("claims.toml", claims.load, claims.ClaimError, CLAIM),
    "exercises": ("exercises.toml", claims.load_exercises, claims.ClaimError, EXERCISE),
    "original": ("original.toml", original.load, original.OriginalError, ORIGINAL),
    "lab": ("lab.toml", lambda f: manifest.load(f.parent), manifest.ManifestError, LAB),
}
BLANK = r"does not match '\\S' (A string with at least one character that is not white space)"

# (format, the good file's text to replace or None to append, the bad text, the one line, {f} the file)
BAD = [
    ("claims", "factor = 1.5", "factor = 0", "{f}: $.claim[0].factor: 0 is less than or equal to the minimum of 0 (claim 'x')"),
    ("claims", None, "factr = 2\n",
     "{f}: $.claim[0]: Unevaluated properties are not allowed ('factr' was unexpected) (claim 'x')"),
    # a kind's own keys are unknown to another kind: the kind, not those keys, is what is wrong
    ("claims", 'kind = "compare"', 'kind = "greater"',
     "{f}: $.claim[0].kind: 'greater' is not one of ['step', 'compare', 'within', 'increasing'] (claim 'x')"),
    ("claims", 'kind = "compare"', 'kind = "within"',
     "{f}: $.claim[0]: Unevaluated properties are not allowed ('relation' was unexpected) (claim 'x')"),
    ("claims", 'engine = "psync"', 'engine = ["psync"]',
     "{f}: $.claim[0].b.engine: ['psync'] is not of type 'string', 'number', 'boolean' (claim 'x')"),
    ("claims", 'role = "ours"', 'role = "ours"\nconclusion = "c1"', "{f}: $.claim[0].role: 'conclusion' was expected (claim 'x')"),
    ("claims", None, CLAIM, "{f}: duplicate claim id x"),
    ("exercises", '"less"', '"fewer"',
     "{f}: $.exercise[0].check.relation: 'fewer' is not one of ['less', 'greater', 'not_less'] (exercise 'e')"),
    ("exercises", 'title = "t"', 'title = ""', "{f}: $.exercise[0].title: '' " + BLANK + " (exercise 'e')"),
    ("exercises", None, EXERCISE, "{f}: duplicate exercise id e"),
    ("original", 'seed = "004.txt"', 'seed = "seeds/004.txt"',
     r"{f}: $.source.seed: 'seeds/004.txt' does not match '^[^/]*[^/\\s][^/]*$' "
     "(The seed write-up's file name, never a path (no /))"),
    ("original", 'machine = "m1"\n', 'machine = "m1"\nmachines = ["m1"]\n',
     "{f}: $.table[0]: {{…}} is valid under each of {{'required': ['machines']}}, {{'required': ['machine']}} (table 't1')"),
    ("original", 'machine = "m1"\n', "", "{f}: $.table[0]: {{…}} is not valid under any of the given schemas "
     "('machine' is a required property; 'machines' is a required property) (table 't1')"),
    ("original", 'b = ["same", "us"]', 'b = ["same"]', "{f}: $.ratio[0].original.b: ['same'] is too short (ratio 'r1')"),
    # what a schema cannot say stays in labkit/original.py
    ("original", 'machine = "m1"', 'machine = "m2"',
     "{f}: table t1: machine 'm2' is not a [[machine]] of this file (machines: ['m1'])"),
    ("original", '["other", "12.8"]', '["other"]', "{f}: table t1: row 2 has 1 cells, the table has 2 columns"),
    ("lab", "order = 1", "order = -1", "{f}: $.order: -1 is less than the minimum of 0"),
    ("lab", 'kernel = "str"', 'kernel = "version"',
     "{f}: $.case.kernel: 'version' is not one of ['str', 'int', 'float', 'bool']"),
    ("lab", 'kernel = "str"', 'Kernel = "str"', "{f}: $.case: 'Kernel' does not match '^[a-z_][a-z0-9_]*$'"),
]


@pytest.mark.parametrize("fmt, old, new, message", BAD)
def test_a_bad_file_is_refused_in_one_line_naming_the_key(tmp_path, fmt, old, new, message):
    name, load, error, good = FORMATS[fmt]
    f = _write(tmp_path / name, good)
    load(f)     # good before the edit: each case fails on the error it names
    assert refused(load, f, good + new if old is None else good.replace(old, new, 1), error) == message.format(f=f)


@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_a_missing_or_broken_file_is_refused(tmp_path, fmt):
    name, load, error, good = FORMATS[fmt]
    f = tmp_path / name
    with pytest.raises(error, match="^" + re.escape(f"{f}: no ")):
        load(f)
    assert refused(load, f, good + "[[x]\n", error).startswith(f"{f}: not valid TOML: ")


def test_a_file_is_validated_again_when_its_text_changes(tmp_path):
    """Validation is remembered per (schema, text), never per path: an edit is checked."""
    f = _write(tmp_path / "claims.toml", CLAIM)
    claims.load(f)
    claims.load(f)
    assert refused(claims.load, f, CLAIM.replace("factor = 1.5", "factor = -1"), claims.ClaimError).endswith(
        "$.claim[0].factor: -1 is less than or equal to the minimum of 0 (claim 'x')")


def test_check_validates_one_part_of_a_schema():
    body = {"kind": "step", "step": "s", "stdout_empty": True}
    tomlschema.check(body, claims.SCHEMA, ValueError, "w", pointer="/$defs/check")
    with pytest.raises(ValueError, match=r"^w: \$: 'id' is a required property$"):
        tomlschema.check(body, claims.SCHEMA, ValueError, "w", pointer="/$defs/claim")


def test_the_manifest_script_runs_without_jsonschema():
    """``python3 labkit/manifest.py`` runs before any venv exists: -S leaves site-packages out."""
    out = subprocess.run([sys.executable, "-S", "labkit/manifest.py", "--names"], cwd=ROOT, capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == [m["name"] for m in manifest.labs(ROOT)]
    probe = subprocess.run([sys.executable, "-S", "-c", "import jsonschema"], capture_output=True, timeout=60)
    assert probe.returncode != 0, "jsonschema importable without site-packages: the test proves nothing"
