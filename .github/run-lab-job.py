#!/usr/bin/env python3
"""Run the workflow's lab job (.github/workflows/labs.yml, job ``labs``) on this machine: its
``run:`` steps in the workflow's order, with the step's ``env:`` and GitHub's default shell
(``bash --noprofile --norc -eo pipefail``). ``uses:`` steps (checkout, cache, upload) are
GitHub's and are listed as not run. A step without ``if: always()`` is skipped once a step
has failed, as on GitHub.

    .venv/bin/python .github/run-lab-job.py [--lab LAB] [--full] [--out DIR] [--host LABEL] [--list]

The workflow's expressions are replaced from a fixed table (the matrix's lab, full or quick);
an expression the table does not know stops the runner (exit 2), so that a change of the
workflow cannot pass here unnoticed. The run writes its result into --out (default: a
temporary directory) and keeps the apt archive cache and the steps' state in temporary
directories. Exit status: 0 every step passed, 1 a step failed, 2 bad usage.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
WORKFLOW = ROOT / ".github" / "workflows" / "labs.yml"
FULL_EXPR = "${{ (github.event_name == 'schedule' || github.event_name == 'workflow_dispatch') && '1' || '' }}"


class UnknownExpression(ValueError):
    """The workflow uses an expression this runner cannot evaluate."""


def steps(workflow: Path = WORKFLOW, job: str = "labs") -> list[dict]:
    """The job's steps, in order."""
    return yaml.safe_load(workflow.read_text())["jobs"][job]["steps"]


def expand(text: str, table: dict[str, str]) -> str:
    """Replace every ``${{ ... }}`` in ``text`` from ``table`` (exact expression text)."""
    for expr, value in table.items():
        text = text.replace(expr, value)
    left = re.findall(r"\$\{\{.*?\}\}", text)
    if left:
        raise UnknownExpression(f"unknown workflow expression(s): {', '.join(left)}")
    return text


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--lab", default="lat_tcp", help="the matrix's lab (default lat_tcp)")
    ap.add_argument("--full", action="store_true", help="a full run, as on schedule (default: quick, as on a push)")
    ap.add_argument("--out", help="folder of host folders for the result (default: a temporary one)")
    ap.add_argument("--host", default=f"local-job-{os.uname().machine}", help="host label of the result")
    ap.add_argument("--list", action="store_true", help="print the steps this machine would run, run nothing")
    a = ap.parse_args(argv)
    table = {"${{ matrix.lab }}": a.lab, FULL_EXPR: "1" if a.full else ""}
    tmp = Path(tempfile.mkdtemp(prefix="pcb-lab-job."))
    try:
        return run(a, table, tmp)
    finally:
        # The temporary directory holds the apt cache and the steps' state, and the results
        # when no --out was given: kept only then.
        if a.out or a.list:
            shutil.rmtree(tmp, ignore_errors=True)


def run(a, table: dict, tmp: Path) -> int:
    """Run (or with --list, list) the job's steps; see the module docstring."""
    env_base = dict(os.environ, PCB_CI_OUT=a.out or str(tmp / "results"), PCB_CI_HOST=a.host,
                    PCB_APT_CACHE=str(tmp / "apt"), PCB_JOB_STATE=str(tmp / "state"))
    failed = False
    for n, step in enumerate(steps(), start=1):
        name = step.get("name") or step.get("uses") or step.get("run", "").strip()
        if "uses" in step:
            print(f"[{n}] not run here (GitHub's action): {step['uses'].split('@')[0]}  {name}", file=sys.stderr)
            continue
        try:
            env = {k: expand(str(v), table) for k, v in (step.get("env") or {}).items()}
            script = expand(step["run"], table)
        except UnknownExpression as exc:
            print(f"run-lab-job: step {n} ({name}): {exc}", file=sys.stderr)
            return 2
        always = str(step.get("if", "")).replace(" ", "") == "always()"
        if failed and not always:
            print(f"[{n}] skipped (an earlier step failed): {name}", file=sys.stderr)
            continue
        print(f"[{n}] {name}: {script.strip()}", file=sys.stderr, flush=True)
        if a.list:
            continue
        t0 = time.time()
        rc = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", script], cwd=ROOT,
                            env=dict(env_base, **env), stdin=subprocess.DEVNULL).returncode
        print(f"[{n}] exit {rc} ({time.time() - t0:.0f} s)", file=sys.stderr, flush=True)
        failed = failed or rc != 0
    if not a.list:
        print(f"run-lab-job: {'a step failed' if failed else 'every step passed'}; results in "
              f"{env_base['PCB_CI_OUT']}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
