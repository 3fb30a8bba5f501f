"""``labkit record``: turn a lab's run directory into one validated result file.

Input (written by labs/lib/lab.sh): ``<out>/.<lab>.partial/`` with ``host.json``,
``steps.tsv`` and ``raw/<step>.{cmd,out,err,case}`` (read by :mod:`labkit.steps`: the step
cases typed as the lab's lab.toml declares). The lab's own ``labs/<lab>/record.py``
defines ``collect(run: Run) -> None``, which parses raw outputs with labkit's parsers
and calls ``run.add(...)`` / ``run.artifact(...)``. Claims from ``labs/<lab>/claims.toml``
are evaluated on the assembled result. The run directory then replaces ``<out>/<lab>/``
and the result is written atomically to ``<out>/<lab>.json``.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import importlib.util
import shutil
import subprocess
import time
from pathlib import Path

from . import model
from .model import Measurement, Result, Step
from . import steps as steps_format
from .run.tools import versions

ROOT = Path(__file__).resolve().parent.parent


class Run:
    """A lab's run directory, as the lab's ``collect(run)`` sees it.

    Attributes:
        lab: lab name; dir: the run directory; quick: quick mode;
        host: the probe's host dict; steps: list of step dicts (schema "steps");
        case_types: the case keys the lab declares and their types (lab.toml's ``[case]``).
    """

    def __init__(self, lab: str, run_dir: Path, quick: bool, lab_dir: Path | None = None):
        """``lab_dir``: the lab's folder, whose lab.toml declares the case keys (default: labs/<lab>
        of this checkout)."""
        self.lab = lab
        self.dir = Path(run_dir)
        self.quick = quick
        self.case_types = steps_format.declared(lab_dir or ROOT / "labs" / lab)
        self.host = json.loads((self.dir / "host.json").read_text())
        self.steps = read_steps(self.dir, self.case_types)
        self.measurements: list[Measurement] = []
        self.artifacts: list[dict] = []
        self._pending: dict = {}

    def step(self, name: str) -> Step | None:
        """The step called ``name``, or None if the lab did not record it."""
        return next((s for s in self.steps if s["name"] == name), None)

    def ok(self, name: str) -> bool:
        """True if step ``name`` ran and did what it was expected to."""
        s = self.step(name)
        return bool(s and s["status"] == "ok")

    def ok_steps(self, group: str) -> list[Step]:
        """Steps of ``group`` whose status is ok, in run order."""
        return [s for s in self.steps if s["group"] == group and s["status"] == "ok"]

    def steps_where(self, *, status: str | None = "ok", by_rep: bool = False, **case) -> list[Step]:
        """Steps whose case contains every key/value of ``case`` (and whose status is
        ``status``; None: any), in run order, or ordered by their case's ``rep`` (1-based
        repetition number; run order kept among equal numbers) when ``by_rep``."""
        out = [s for s in self.steps if (status is None or s["status"] == status)
               and model.case_holds(s.get("case"), case)]
        return sorted(out, key=lambda s: rep_order(s["case"])) if by_rep else out

    def add_sample(self, metric: str, unit: str, case: dict, value: float, step: str | None = None,
                   emulation: dict | None = None) -> None:
        """Add one sample to the measurement (metric, unit, case), made when the collector
        returns (:meth:`flush_samples`), its samples in the order added and its ``step`` and
        ``emulation`` (see :meth:`add`) the first sample's. The way to build a measurement from
        one step per repetition."""
        self.add_samples(metric, unit, case, [value], step, emulation)

    def add_samples(self, metric: str, unit: str, case: dict, values: list[float], step: str | None = None,
                    emulation: dict | None = None) -> None:
        """:meth:`add_sample` for several samples of one step (e.g. every read() a trace timed)."""
        key = (metric, unit, tuple(case.items()))
        self._pending.setdefault(key, {"samples": [], "step": step, "emulation": emulation})["samples"].extend(values)

    def flush_samples(self) -> None:
        """Turn the samples :meth:`add_sample` gathered into measurements, in the order their
        first sample came (called after the lab's ``collect``, and by a collector that wants its
        measurements in a given order; calling it again adds nothing)."""
        for (metric, unit, case), v in self._pending.items():
            self.add(metric, unit, dict(case), v["samples"], v["step"], v["emulation"])
        self._pending = {}

    def raw(self, name: str, ext: str = "out") -> Path:
        """Path of a step's raw output: ``raw/<name>.<ext>`` (ext: out, err, cmd)."""
        return self.dir / "raw" / f"{name}.{ext}"

    def add(self, metric: str, unit: str, case: dict, samples, step: str | None = None,
            emulation: dict | None = None) -> Measurement:
        """Add a measurement keeping every sample; median/min/max derived (model.measurement).
        ``emulation``: set for samples measured inside an emulated guest."""
        m = model.measurement(metric, unit, case, samples, step, emulation)
        self.measurements.append(m)
        return m

    def artifact(self, kind: str, case: dict, relpath: str, title: str | None = None) -> None:
        """Register a file inside the run directory as an artifact (kind as in the schema).

        Raises:
            FileNotFoundError: if the file does not exist.
        """
        if not (self.dir / relpath).is_file():
            raise FileNotFoundError(f"artifact {relpath} not found in {self.dir}")
        a = {"kind": kind, "case": dict(case), "path": f"{self.lab}/{relpath}"}
        if title:
            a["title"] = title
        self.artifacts.append(a)


def rep_order(case: dict) -> int:
    """Sort key of a step's case by its repetition: ``rep`` (1-based), 0 where it has none. With a
    stable sort, run order is kept among steps of the same repetition."""
    return case.get("rep", 0)


def read_case(path: Path, types: dict[str, str]) -> dict | None:
    """A step's case from ``raw/<step>.case``, each value of the type the lab declares for its key
    (``types``: :attr:`Run.case_types`); None without one (:func:`labkit.steps.read_case`).

    Raises:
        labkit.steps.CaseError: a line that is not KEY=VALUE, an undeclared key, a value not of its type.
    """
    return steps_format.read_case(Path(path), types)


def read_steps(run_dir: Path, types: dict[str, str]) -> list[Step]:
    """The steps of ``steps.tsv`` (:func:`labkit.steps.read_tsv`) with commands from raw/*.cmd and
    cases from raw/*.case, typed by ``types`` (:func:`read_case`; a step given no case has none)."""
    steps = []
    for row in steps_format.read_tsv(Path(run_dir) / "steps.tsv"):
        name, code, secs = row["name"], row["exit"], row["seconds"]
        cmd_file = Path(run_dir) / "raw" / f"{name}.cmd"
        out_file = Path(run_dir) / "raw" / f"{name}.out"
        case = read_case(Path(run_dir) / "raw" / f"{name}.case", types)
        steps.append({
            "name": name,
            "group": row["group"],
            "status": row["status"],
            "reason": row["reason"] or None,
            "seconds": float(secs or 0),
            "command": cmd_file.read_text().strip() if cmd_file.exists() else None,
            "exit_code": int(code) if code else None,
            "expect": row["expect"] or "success",
            "stdout_bytes": out_file.stat().st_size if out_file.exists() else None,
            **({"case": case} if case is not None else {}),
        })
    return steps


def load_lab_collector(lab_dir: Path):
    """Import ``<lab_dir>/record.py`` and return its ``collect`` function.

    Raises:
        FileNotFoundError: the lab has no record.py (naming the path).
    """
    path = Path(lab_dir) / "record.py"
    spec = importlib.util.spec_from_file_location(f"labrecord_{Path(lab_dir).name}", path)  # a .py path: never None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.collect


def collect(run: Run, lab_dir: Path) -> None:
    """Run the lab's collector (``<lab_dir>/record.py`` ``collect``) on ``run``, then turn the
    samples it gathered with :meth:`Run.add_sample` into measurements."""
    load_lab_collector(lab_dir)(run)
    run.flush_samples()


def measuring_code(lab: str) -> list[str]:
    """Git pathspecs of the code that decides what a run of ``lab`` measures and records: the
    lab's folder (less its page data, which every build reads afresh, and its tests:
    labkit.stale.lab_code), the lab contract, and labkit's probe, recorder, model, parsers and
    guest runner. Page macros, rendering and the claims engine are not in it: they change pages,
    not measurements."""
    from .stale import lab_code
    return [*lab_code(lab), "labs/lib", "labkit/run/supervisor.py",
            "labkit/run/probe.py", "labkit/record.py", "labkit/steps.py", "labkit/model.py", "labkit/schema.json", "labkit/run/tools.py",
            "labkit/parsers", "labkit/guest"]


def git_commit(repo: Path, paths: list[str] | None = None) -> tuple[str | None, bool | None]:
    """(HEAD commit, dirty?) of ``repo``, or (None, None) outside a git work tree.

    ``dirty`` is True when tracked files under ``paths`` (default: the whole tree) differ
    from HEAD, i.e. the run used code that no commit holds. A copy of the checkout without its
    git directory (a guest's: labs/lib/lab.sh --guest) gets both from ``PCB_GIT_COMMIT`` and
    ``PCB_GIT_DIRTY``, read on the host that made the copy.
    """
    if os.environ.get("PCB_GIT_COMMIT") and not (Path(repo) / ".git").exists():
        return os.environ["PCB_GIT_COMMIT"], os.environ.get("PCB_GIT_DIRTY") == "1"
    base = ["git", "-c", "safe.directory=*", "-C", str(repo)]
    try:
        head = subprocess.run(base + ["rev-parse", "HEAD"], capture_output=True, text=True, timeout=10)
        if head.returncode != 0:
            return None, None
        dirty = subprocess.run(base + ["status", "--porcelain", "--untracked-files=no", "--", *(paths or ["."])],
                               capture_output=True, text=True, timeout=10)
        return head.stdout.strip(), bool(dirty.stdout.strip())
    except (OSError, subprocess.TimeoutExpired):
        return None, None


def left_out(run_dir: Path) -> dict[str, str]:
    """The groups the run left out as a quick run (group → why), from the supervisor's
    ``left_out.json`` in ``run_dir`` (lab.toml ``quick_leaves_out``, :mod:`labkit.run.supervisor`);
    ``{}`` when the file is absent (a full run, or a run dir of an older supervisor).

    Raises:
        ValueError: the file is not a JSON object of strings.
    """
    f = Path(run_dir) / "left_out.json"
    if not f.exists():
        return {}
    data = json.loads(f.read_text())
    if not isinstance(data, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in data.items()):
        raise ValueError(f"{f}: not a JSON object of group -> reason")
    return data


def assemble(lab: str, lab_dir: Path, run_dir: Path, *, start: float, quick: bool,
             tools: list[str], command: str, paths: dict | None = None) -> Result:
    """Build the result dict from a run directory (not yet written). Raises on invalid data.

    ``paths``: ``{"scratch", "out", "checkout"}``, the absolute directories of the run, kept as
    ``run.paths`` so that pages show commands with placeholders instead of this host's paths."""
    run = Run(lab, run_dir, quick, lab_dir)
    collect(run, lab_dir)
    commit, dirty = git_commit(Path(lab_dir).parent.parent, measuring_code(lab))
    result = {
        "schema_version": model.SCHEMA_VERSION,
        "lab": lab,
        "host": run.host,
        "tools": versions(tools),
        "run": {
            "start": dt.datetime.fromtimestamp(start, dt.timezone.utc).isoformat(timespec="seconds"),
            "duration_s": round(time.time() - start, 1),
            "quick": quick,
            "git_commit": commit,
            "git_dirty": dirty,
            "command": command,
            **({"paths": paths} if paths else {}),
            **({"left_out": left} if (left := left_out(run_dir)) else {}),
        },
        "steps": run.steps,
        "measurements": run.measurements,
        "artifacts": run.artifacts,
        "claims": [],
    }
    claims_file = Path(lab_dir) / "claims.toml"
    if claims_file.exists():
        from .stats import claims as claims_mod  # SciPy: only when a result is assembled
        result["claims"] = claims_mod.evaluate(claims_mod.load(claims_file), result)
    model.validate(result, f"{lab} result", new=True)
    return result


def record(lab: str, lab_dir: Path, run_dir: Path, out: Path, **kw) -> Path:
    """Assemble, move the run directory to ``out/<lab>/`` and write ``out/<lab>.json``.

    Artifact paths in the result are relative to ``out`` (``<lab>/...``).
    Returns the path of the result file.
    """
    result = assemble(lab, lab_dir, run_dir, **kw)
    final = Path(out) / lab
    if final.exists():
        shutil.rmtree(final)
    Path(run_dir).rename(final)
    path = Path(out) / f"{lab}.json"
    model.write_atomic(path, result)
    return path


def rederive(path: Path, lab_dir: Path | None = None) -> Result:
    """A committed result file re-derived from its own raw outputs (``<path without .json>/``, as
    :func:`record` left them) by the lab's collector as it is now: its steps read again (cases
    typed as the lab declares them), its measurements and artifacts made again, its claims
    evaluated again. Host, tools and run (start, duration, commit) are kept as measured, and so
    are the artifacts added after recording (``cast``: ``labkit attach-cast``). The raw outputs are
    read from a copy: a collector that rewrites files (gzips traces) leaves the result's folder as
    it is. Written atomically; returns the new result.

    ``python -m labkit.record results/<host>/<lab>.json ...`` does it for each file.
    """
    import tempfile
    path = Path(path)
    old = model.load(path)
    lab_dir = Path(lab_dir or ROOT / "labs" / old["lab"])
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = Path(tmp) / "run"
        shutil.copytree(path.with_suffix(""), run_dir, symlinks=True)
        run = Run(old["lab"], run_dir, old["run"]["quick"], lab_dir)
        collect(run, lab_dir)
    result = {**old, "steps": run.steps, "measurements": run.measurements,
              "artifacts": run.artifacts + [a for a in old["artifacts"] if a["kind"] == "cast"], "claims": []}
    missing = [a["path"] for a in result["artifacts"] if not (path.parent / a["path"]).is_file()]
    if missing:
        raise FileNotFoundError(f"{path}: the collector made artifacts its folder lacks: {', '.join(missing)}")
    claims_file = lab_dir / "claims.toml"
    if claims_file.exists():
        from .stats import claims as claims_mod
        result["claims"] = claims_mod.evaluate(claims_mod.load(claims_file), result)
    model.validate(result, str(path))
    model.write_atomic(path, result)
    return result


if __name__ == "__main__":
    import sys
    for arg in sys.argv[1:]:
        rederive(Path(arg))
        print(f"{arg}: re-derived from {Path(arg).with_suffix('')}/")
