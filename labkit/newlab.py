"""``labkit new-lab NAME``: scaffold a new case, one lab folder plus one chapter.

Writes ``labs/NAME/`` (run.sh, record.py, claims.toml, original.toml, exercises.toml, lab.toml,
and the lab's tests in ``tests/``) and ``docs/cases/NAME.md`` from the templates below, then runs the new lab once in quick mode
into ``local-results/<this host's label>/``, as a reader's own run is kept (git ignores the
folder), so that the site builds with its page (``mkdocs build --strict`` needs a result for
every lab). Nothing else in the checkout changes: the nav, the home page's table, ``make setup``
and the CI matrix read the lab's manifest. The reference result that is committed, under
``results/<host>/``, is a full run of the finished lab (``run.sh --out results/<host>``).

The scaffold is a real, small lab (dd writes a file in its scratch directory with 4 KiB and
1 MiB blocks, with and without ``conv=fdatasync``, repetitions interleaved) whose two claims
can hold or fail on any host; its original.toml is a placeholder to replace with the
investigation the new chapter retells. Its tests are the two every lab has: its record.py on
hand-made outputs (fast tier: ``make test``) and one real quick run (``lab`` tier). Exercises
for a tool's card, once the lab has some, go in the same folder too,
``labs/NAME/cards/<tool>.exercises.toml`` (:mod:`labkit.cards`); the scaffold writes none.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from . import manifest

NAME = re.compile(r"^[a-z][a-z0-9_]{1,30}$")

RUN_SH = r'''#!/usr/bin/env bash
# labs/{name}/run.sh: {title}
#
#   labs/{name}/run.sh [--quick] [--out DIR] [--only GROUP,..] [--host LABEL]
#
# What it does, one step per command (each kept with its output under <out>/{name}/raw/):
#   write   dd writes a 16 MiB file in the scratch directory with 4 KiB and with 1 MiB blocks,
#           with conv=fdatasync (and, for 1 MiB, without), 5 repetitions (quick: 3) interleaved
# shellcheck source=../lib/lab.sh disable=SC2317 # group_* functions are called by lab_main
source "$(dirname "$0")/../lib/lab.sh"

lab_define {name} "{title}" dd
lab_group write "dd: 4 KiB and 1 MiB blocks, with and without fdatasync, interleaved"

group_write() {{
  lab_require write cmd:dd || return 0
  local reps rep one bs sync opt
  reps=$(lab_quick 3 5)
  for ((rep = 1; rep <= reps; rep++)); do
    for one in 4096:sync 1048576:sync 1048576:none; do
      bs=${{one%:*}} sync=${{one#*:}} opt=()
      [[ $sync == none ]] || opt=(conv=fdatasync)
      lab_run --case experiment=write --case "bs=$bs" --case "sync=$sync" --case "rep=$rep" \
        "write.$bs.$sync.$rep" -- env LC_ALL=C dd if=/dev/zero of="$LAB_SCRATCH/f" bs="$bs" \
        count=$((16 * 1048576 / bs)) "${{opt[@]}}"
    done
  done
}}

lab_main "$@"
'''

RECORD_PY = '''"""{name} lab: raw outputs → measurements (called by ``labkit record``).

``bandwidth`` (MB/s, 10^6 bytes per second): dd's rate recomputed from its summary (bytes ÷
seconds), one sample per repetition. Case: ``experiment`` (write), ``bs`` (bytes), ``sync``
(sync: conv=fdatasync; none).
"""

from __future__ import annotations

from collections import defaultdict

from labkit.parsers.dd import dd_summary


def collect(run) -> None:
    """One bandwidth measurement per (bs, sync), its samples in repetition order."""
    samples: dict[tuple, list[float]] = defaultdict(list)
    first: dict[tuple, str] = {{}}
    for s in run.steps:
        case = s.get("case") or {{}}
        if s["status"] != "ok" or case.get("experiment") != "write":
            continue
        key = (("experiment", "write"), ("bs", case["bs"]), ("sync", case["sync"]))
        samples[key].append(dd_summary(run.raw(s["name"], "err").read_text())["mb_per_s"])
        first.setdefault(key, s["name"])
    for key, values in samples.items():
        run.add("bandwidth", "MB/s", dict(key), values, first[key])
'''

CLAIMS_TOML = '''# The {name} chapter's testable statements (labkit/stats/claims.py), evaluated on every host's result.

[[claim]]
id = "bigger-blocks-faster"
role = "conclusion"
conclusion = "bigger-blocks"
statement = "Writing the same 16 MiB with fdatasync, 1 MiB blocks give a higher rate than 4 KiB blocks (per-repetition ratio > 1)."
source = "A placeholder: the original's conclusion this claim tests, with its machine and kernel."
kind = "compare"
timing = true
metric = "bandwidth"
a = {{ experiment = "write", bs = 1048576, sync = "sync" }}
b = {{ experiment = "write", bs = 4096, sync = "sync" }}
relation = "greater"
paired = true

[[claim]]
id = "fdatasync-costs"
role = "conclusion"
conclusion = "sync-costs"
statement = "With 1 MiB blocks, writing without fdatasync gives a higher rate than writing with it (per-repetition ratio > 1)."
source = "A placeholder: the original's conclusion this claim tests, with its machine and kernel."
kind = "compare"
timing = true
metric = "bandwidth"
a = {{ experiment = "write", bs = 1048576, sync = "none" }}
b = {{ experiment = "write", bs = 1048576, sync = "sync" }}
relation = "greater"
paired = true
'''

ORIGINAL_TOML = '''# The original investigation's figures, as data (labkit/original.py): a placeholder to replace
# with the seed's own machines, tables (cells exactly as published) and conclusions.

[source]
seed = "{name}.txt"
author_context = "A placeholder: one line on who wrote the original investigation, and why"

[[machine]]
id = "original"
name = "The original's machine (a placeholder)"
arch = "unknown"
kernel = "not stated"

[[table]]
id = "figures"
title = "A placeholder for the original's table"
machine = "original"
columns = ["case", "figure"]
rows = [["a placeholder", "0"]]

[[conclusion]]
id = "bigger-blocks"
machine = "original"
text = "A placeholder: bigger blocks write faster."

[[conclusion]]
id = "sync-costs"
machine = "original"
text = "A placeholder: flushing to the device costs."
'''

EXERCISES_TOML = '''[[exercise]]
id = "bigger-file"
title = "A larger file"
change = "In labs/{name}/run.sh, write 64 MiB instead of 16 (change 16 * 1048576 to 64 * 1048576). Then run: labs/{name}/run.sh --quick"
predict = "Predict that 1 MiB blocks still write faster than 4 KiB blocks with fdatasync."
check = {{ kind = "compare", metric = "bandwidth", a = {{ experiment = "write", bs = 1048576, sync = "sync" }}, b = {{ experiment = "write", bs = 4096, sync = "sync" }}, relation = "greater", paired = true }}
'''

LAB_TOML = '''# The lab's manifest (labkit/manifest.py): the nav, the home page's table, `make setup` and the
# CI matrix are made from it.
title = "{title}"
order = {order}
problem = "A placeholder: the problem the original investigated, in one line"
practise = "`dd` block sizes, `conv=fdatasync`"
debs = ["coreutils"]
quick_budget_s = 30
full_budget_s = 60

[case_units]
bs = "bytes"

# Every case key of the lab's steps (lab_run --case KEY=VALUE) and its type (labkit/steps.py).
[case]
experiment = "str"
bs = "int"
sync = "str"
rep = "int"
'''

TEST_RECORD_PY = r'''"""labs/{name}/record.py on hand-made dd outputs, without a run (fast tier): one bandwidth
measurement per block size and sync mode, read from each step's case, its samples in repetition
order."""

from __future__ import annotations

from pathlib import Path

import pytest

from labkit import steps
from labkit.record import Run, collect

LAB = Path(__file__).resolve().parents[1]
MIB16 = 16 * 1048576
DD_ERR = "{{records}}+0 records in\n{{records}}+0 records out\n{{b}} bytes copied, {{s}} s, {{r}} MB/s\n"


def run_dir(tmp_path: Path, seconds: dict) -> Run:
    """A run directory as labs/lib/lab.sh writes it: one ok step per (bs, sync, rep), with its
    case (raw/NAME.case) and dd's summary of 16 MiB in ``seconds[(bs, sync, rep)]``."""
    d = tmp_path / "run"
    (d / "raw").mkdir(parents=True)
    (d / "host.json").write_text("{{}}")
    rows = []
    for (bs, sync, rep), s in seconds.items():
        name = f"write.{{bs}}.{{sync}}.{{rep}}"
        row = {{"name": name, "group": "write", "status": "ok", "exit": "0", "seconds": str(s), "expect": "success"}}
        rows.append("\t".join(row.get(c, "") for c in steps.COLUMNS))
        (d / "raw" / f"{{name}}.err").write_text(DD_ERR.format(records=MIB16 // bs, b=MIB16, s=s, r=round(MIB16 / s / 1e6)))
        (d / "raw" / f"{{name}}.case").write_text(f"experiment=write\nbs={{bs}}\nsync={{sync}}\nrep={{rep}}\n")
    (d / "steps.tsv").write_text("\n".join(rows) + "\n")
    return Run("{name}", d, quick=True, lab_dir=LAB)


def test_one_measurement_per_block_size_and_sync(tmp_path):
    seconds = {{(bs, sync, rep): 0.1 * rep + (0.4 if bs == 4096 else 0.0)
               for rep in (1, 2, 3) for bs, sync in ((4096, "sync"), (1048576, "sync"), (1048576, "none"))}}
    run = run_dir(tmp_path, seconds)
    collect(run, LAB)
    got = {{(m["case"]["bs"], m["case"]["sync"]): m for m in run.measurements}}
    assert set(got) == {{(4096, "sync"), (1048576, "sync"), (1048576, "none")}}
    for (bs, sync), m in got.items():
        assert m["metric"] == "bandwidth" and m["unit"] == "MB/s"
        assert m["case"] == {{"experiment": "write", "bs": bs, "sync": sync}}
        assert m["samples"] == pytest.approx([MIB16 / seconds[(bs, sync, rep)] / 1e6 for rep in (1, 2, 3)])
'''

TEST_LAB_PY = '''"""The {name} lab run for real in quick mode (lab tier: make test-all, not make test)."""

from __future__ import annotations

import time

import pytest

from labkit import model
from labrun import check_quick_result, run_lab

pytestmark = pytest.mark.lab     # a real quick run of the {name} lab


def test_quick_run_succeeds_and_validates(tmp_path):
    start = time.monotonic()
    proc = run_lab("{name}", "--quick", "--host", "test-quick", "--out", str(tmp_path))
    seconds = time.monotonic() - start
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = model.load(tmp_path / "{name}.json")
    check_quick_result(result, seconds)
    assert {{m["metric"] for m in result["measurements"]}} == {{"bandwidth"}}
'''

CHAPTER_MD = '''# {title}

```console
$ labs/{name}/run.sh --quick
```

A new case: replace this page with the retelling of the original investigation, each of its
steps followed by the same step on the reader's machine.

## What the lab measured

{{{{ results_table("{name}", "bandwidth", columns=["bs", "sync"], group="write") }}}}

## Verdicts

{{{{ verdicts("{name}") }}}}

## Claims, checked on every host

{{{{ claims("{name}") }}}}

## Exercises

{{{{ exercises("{name}") }}}}

## Where the numbers come from

{{{{ provenance("{name}") }}}}
'''


def scaffold(name: str, root: Path, title: str | None = None) -> list[Path]:
    """Write the new lab's files under ``root``; return their paths.

    Raises:
        ValueError: a bad name (lower case, digits and _, 2 to 31 characters, a letter first),
        or a lab or chapter of that name exists already.
    """
    if not NAME.match(name):
        raise ValueError(f"lab name {name!r}: lower case letters, digits and _, a letter first, 2-31 characters")
    lab, chapter = root / "labs" / name, root / "docs" / "cases" / f"{name}.md"
    if lab.exists() or chapter.exists():
        raise ValueError(f"{lab if lab.exists() else chapter} exists already")
    title = title or f"{name}: a new case"
    order = max((m["order"] for m in manifest.labs(root)), default=0) + 1
    files = {
        lab / "run.sh": RUN_SH, lab / "record.py": RECORD_PY, lab / "claims.toml": CLAIMS_TOML,
        lab / "original.toml": ORIGINAL_TOML, lab / "exercises.toml": EXERCISES_TOML,
        lab / "lab.toml": LAB_TOML, lab / "tests" / f"test_{name}_record.py": TEST_RECORD_PY,
        lab / "tests" / f"test_{name}_lab.py": TEST_LAB_PY, chapter: CHAPTER_MD,
    }
    (lab / "tests").mkdir(parents=True)
    for path, text in files.items():
        path.write_text(text.format(name=name, title=title.replace('"', "'"), order=order))
    (lab / "run.sh").chmod(0o755)
    return list(files)


def dry_run_message(name: str, label: str) -> str:
    """The line ``labkit new-lab`` prints before :func:`dry_run`: where the run goes and why."""
    return (f"running labs/{name}/run.sh --quick once, into local-results/{label}/ (the page needs a result; "
            f"commit a full run's, labs/{name}/run.sh --out results/<host>, as the reference)")


def dry_run(name: str, root: Path, label: str) -> subprocess.CompletedProcess:
    """Run the new lab once in quick mode into ``local-results/<label>/``: its first result, kept
    where a reader's own runs are (:mod:`labkit.results`), outside what git tracks."""
    return subprocess.run(["bash", str(root / "labs" / name / "run.sh"), "--quick", "--host", label,
                           "--out", str(root / "local-results" / label)], stdin=subprocess.DEVNULL)
