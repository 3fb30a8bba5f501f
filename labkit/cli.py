"""labkit command line.

  labkit record --lab L --lab-dir D --run-dir R --out O --start EPOCH --quick 0|1 --tools a,b --command C
  labkit show LAB [--host H]        measurements, skips and claims of a lab per host
  labkit hosts                      every host with results and its provenance
  labkit compare HOST_A HOST_B [--lab LAB]   medians side by side, ratio B/A, noise flag
  labkit validate [FILE...]         validate result files (default: every one found)
  labkit reevaluate [--write] FILE...   evaluate result files' claims again (today's claims.toml)
  labkit labs [--names|--json|--debs|--matrix]   what the labs' manifests say
  labkit new-lab NAME [--title T]   scaffold labs/NAME and docs/cases/NAME.md, run it once (quick)
  labkit probe [--scratch DIR] [--label L]   print this host's probe as JSON
  labkit label                      print the default host label
  labkit topology [--cpus N]        CPU pairs of the first N CPUs with their relation
  labkit flame --perf-script F --folded O --svg S --title T   fold with inferno, draw
  labkit diff-flame --before A --after B --folded O --svg S --title T [--negate]
  labkit check LAB [--results DIR] [--exercises FILE]   your run vs the chapter's exercises
  labkit recover [--out DIR]... [--scratch DIR]...     undo what killed lab runs left behind
  labkit check TOOL [--results DIR]  your runs vs a tool card's exercises (labs/*/cards/TOOL.exercises.toml)
  labkit guest shell|run|prepare|accel|cache ...   QEMU guests (labkit.guest; labkit guest --help)

Each subcommand imports what it needs, when it runs: `labkit probe`, which every lab run
starts, loads neither numpy nor jsonschema (0.1 s instead of 1 s on two slow vCPUs).

Exit status: 0 ok (for check: it ran, whatever the verdicts), 1 failure (invalid result,
missing data), 2 bad usage (one line on stderr).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


class UsageError(Exception):
    """Bad usage found after parsing (unknown lab, missing folder): exit 2, one line."""


class _Parser(argparse.ArgumentParser):
    """argparse with a one-line error: ``labkit check: error: ... (labkit check --help)``."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _cmd_record(a) -> int:
    from . import model
    from .stats import claims as claims_mod
    from .run.verdict_text import verdict_sentence
    from .record import record
    path = record(a.lab, Path(a.lab_dir), Path(a.run_dir), Path(a.out), start=float(a.start),
                  quick=a.quick == "1", tools=a.tools.replace(",", " ").split(),
                  command=a.command,
                  paths={"scratch": a.scratch, "out": str(Path(a.out).resolve()), "checkout": a.checkout}
                  if a.scratch and a.checkout else None)
    r = model.load(path)
    spec = Path(a.lab_dir) / "claims.toml"
    statements = {c["id"]: c.get("statement") for c in claims_mod.load(spec)} if spec.exists() else {}
    for c in r["claims"]:
        print(f"  {verdict_sentence(c, statements.get(c['id']))}", file=sys.stderr)
    print(f"wrote {path}: {len(r['measurements'])} measurements, {len(r['artifacts'])} artifacts", file=sys.stderr)
    return 0


def _cmd_show(a) -> int:
    from . import results
    from .stats import claims as claims_mod
    from .view import commands, render
    from .run.verdict_text import verdict_line
    hosts = results.load_hosts()
    pairs = results.for_lab(a.lab, hosts)
    for host, r in pairs:
        if a.host and a.host not in (host.label, host.title):
            continue
        run = r["run"]
        print(f"== {host.title}: {r['host'].get('cpu_model')}, {r['host']['cpus']} CPUs, kernel {r['host']['kernel']}; "
              f"{'quick' if run['quick'] else 'full'} run {run['start']}")
        metrics = list(dict.fromkeys(m["metric"] for m in r["measurements"]))
        for metric in metrics:
            ms = render.select(r, metric)
            header, rows = render.measurement_table(ms, render.case_keys(ms))
            print(f"\n{metric}:\n{render.text_table(header, rows)}")
        bad = [s for s in r["steps"] if s["status"] != "ok"]
        if bad:
            print("\nsteps not run as designed:")
            for s in bad:
                print(f"  {s['name']}: {s['status']}: {s['reason']}")
        spec_file = results.ROOT / "labs" / a.lab / "claims.toml"
        verdicts = claims_mod.evaluate(claims_mod.load(spec_file), r) if spec_file.is_file() else r["claims"]
        if verdicts:
            print(f"\nclaims: labs/{a.lab}/claims.toml, evaluated now on this result")
            for c in verdicts:
                print(f"  {commands.display_text(verdict_line(c), r)}")
        print()
    return 0


def _cmd_hosts(a) -> int:
    from . import results
    from .view import render
    rows = []
    for h in results.load_hosts():
        hh = next(iter(h.results.values()))["host"]
        rows.append([h.title, hh["arch"], f"{hh.get('cpu_model')}", str(hh["cpus"]), hh["kernel"],
                     ", ".join(sorted(h.results)), str(h.dir)])
    print(render.text_table(["host", "arch", "CPU", "CPUs", "kernel", "labs", "folder"], rows))
    return 0


def _cmd_compare(a) -> int:
    from . import results
    from .view import render
    hosts = results.load_hosts()
    ha, hb = results.host(a.host_a, hosts), results.host(a.host_b, hosts)
    labs = [a.lab] if a.lab else sorted(set(ha.results) & set(hb.results))
    if not labs:
        print(f"labkit compare: {ha.label} and {hb.label} have no lab in common", file=sys.stderr)
        return 1
    for lab in labs:
        if lab not in ha.results or lab not in hb.results:
            print(f"labkit compare: both hosts need a {lab} result", file=sys.stderr)
            return 1
        header, rows = render.compare_rows(ha.results[lab], hb.results[lab])
        header[4] = f"ratio to {ha.label}"
        print(f"== {lab}\n{render.text_table(header, rows)}\n")
    return 0


def _cmd_validate(a) -> int:
    from . import model, results
    files = [Path(f) for f in a.files] or [p for base, _ in results.search_path() if base.is_dir()
                                            for p in sorted(base.glob("*/*.json"))]
    for f in files:
        model.load(f)
        print(f"ok {f}")
    return 0


def _cmd_reevaluate(a) -> int:
    """Evaluate each result's claims again with today's labs/<lab>/claims.toml and rules and say
    how many verdicts differ from the stored ones (the verdicts at record time; pages always
    evaluate afresh). With ``--write``, also rewrite the file's ``claims`` (measurements, steps
    and provenance are left as measured)."""
    from . import model, results
    from .stats import claims as claims_mod
    for f in (Path(x) for x in a.files):
        r = model.load(f)
        spec = results.ROOT / "labs" / r["lab"] / "claims.toml"
        before = {c["id"]: c["verdict"] for c in r["claims"]}
        r["claims"] = claims_mod.evaluate(claims_mod.load(spec), r) if spec.is_file() else []
        model.validate(r, str(f))
        changed = [c["id"] for c in r["claims"] if before.get(c["id"]) != c["verdict"]]
        if a.write:
            model.write_atomic(f, r)
        print(f"{f}: {len(r['claims'])} claims, {len(changed)} verdicts differ from the stored ones"
              f"{': ' + ', '.join(changed) if changed else ''}{' (rewritten)' if a.write else ''}")
    return 0


def _cmd_labs(a) -> int:
    """The labs' manifests: names (default), JSON, Debian packages or a CI matrix."""
    from . import manifest
    flag = next((f for f in ("json", "debs", "matrix") if getattr(a, f)), "names")
    return manifest.main([f"--{flag}"])


def _lab_run_in_progress() -> str:
    """"" when no lab run holds the host's lock (:class:`labkit.run.supervisor.Lock`), else
    what a run would be refused with (the holder's pid, its lab when readable)."""
    import os
    from .run import supervisor
    lock = supervisor.Lock(supervisor.lock_path())
    try:
        if lock.take():
            return ""
        pid = lock.holder()
        lab = supervisor.holder_lab(pid) if pid else ""
        return f"{supervisor.LOCK_HELD} ({lab + ', ' if lab else ''}pid {pid or 'unknown'})"
    finally:
        if lock.fd is not None:
            os.close(lock.fd)


def _cmd_new_lab(a) -> int:
    """Scaffold labs/NAME and docs/cases/NAME.md, then run the lab once (quick) for its result."""
    from . import results
    from .run import probe
    from . import newlab
    if not a.no_run:
        busy = _lab_run_in_progress()
        if busy:   # refused before anything is written: the run would be, and the page needs it
            print(f"labkit new-lab: {busy}; try again when it has ended (or use --no-run)", file=sys.stderr)
            return 2
    try:
        files = newlab.scaffold(a.name, results.ROOT, a.title)
    except ValueError as exc:
        print(f"labkit new-lab: {exc}", file=sys.stderr)
        return 2
    for f in files:
        print(f"wrote {f.relative_to(results.ROOT)}")
    if a.no_run:
        return 0
    label = a.host or probe.default_label()
    print(newlab.dry_run_message(a.name, label))
    return newlab.dry_run(a.name, results.ROOT, label).returncode


def _cmd_probe(a) -> int:
    from .run import probe
    print(json.dumps(probe.probe(a.scratch, a.label), indent=1))
    return 0


def _cmd_label(a) -> int:
    from .run import probe
    print(probe.default_label())
    return 0


def _cmd_topology(a) -> int:
    from .run import probe
    topo = probe.topology()
    cpus = sorted(topo)[: a.cpus]
    for s in cpus:
        for c in cpus:
            print(f"{s} {c} {probe.pair_relation(topo, s, c)}")
    return 0


def _cmd_flame(a) -> int:
    from .parsers import perf as perf_parsers
    n = perf_parsers.fold(Path(a.perf_script), Path(a.folded))
    if n == 0:
        print(f"labkit flame: no stacks in {a.perf_script}", file=sys.stderr)
        return 1
    perf_parsers.flamegraph(Path(a.folded), Path(a.svg), a.title)
    # inferno weights each stack by perf's sample period (ns of cpu-clock here), not by count
    print(f"folded stacks (total weight {n}) in {a.folded}, flame graph {a.svg}")
    return 0


def _cmd_diff_flame(a) -> int:
    """A differential flame graph of --before and --after: drawn on --after's stacks, or with
    --negate on --before's (``inferno-diff-folded -n AFTER BEFORE | inferno-flamegraph --negate``,
    Gregg's way to see what disappeared); red is always more samples in --after."""
    from .parsers import perf as perf_parsers
    first, second = (a.after, a.before) if a.negate else (a.before, a.after)
    perf_parsers.diff_folded(Path(first), Path(second), Path(a.folded))
    perf_parsers.flamegraph(Path(a.folded), Path(a.svg), a.title, diff=True, negate=a.negate)
    shapes = a.before if a.negate else a.after
    print(f"differential flame graph {a.svg} on the stacks of {shapes} (red: more samples in {a.after}, blue: fewer)")
    return 0


def _cmd_attach_cast(a) -> int:
    """Copy an asciinema recording of a lab run next to its result and register it."""
    from . import model
    import shutil
    result_path = Path(a.result)
    r = model.load(result_path)
    first = Path(a.cast).read_text().splitlines()[0]
    if json.loads(first).get("version") != 2:
        print(f"labkit attach-cast: {a.cast} is not an asciicast v2 recording", file=sys.stderr)
        return 1
    rel = f"{r['lab']}/run.cast"
    shutil.copy(a.cast, result_path.parent / rel)
    r["artifacts"] = [x for x in r["artifacts"] if x["kind"] != "cast"] + [
        {"kind": "cast", "case": {}, "path": rel, "title": f"{r['lab']} run on {r['host']['label']}"}]
    model.validate(r, str(result_path))
    model.write_atomic(result_path, r)
    print(f"attached {rel} to {result_path}", file=sys.stderr)
    return 0


CHECK_WORDS = {"holds": "as predicted", "fails": "not as predicted", "inconclusive": "inconclusive",
               "untested": "untested", "not applicable": "not applicable"}


def _check_results(lab: str, folder: Path) -> list[Path]:
    """``folder/<lab>.json`` if ``folder`` is a host folder, else ``folder/*/<lab>.json``."""
    if (folder / f"{lab}.json").is_file():
        return [folder / f"{lab}.json"]
    return sorted(folder.glob(f"*/{lab}.json"))


def _check_one(ex_label: str, exercises: list[dict], claims: list[dict], files: list[Path]) -> None:
    """Print, per result file, each exercise's verdict in words (and the claims' verdicts)."""
    from . import model
    from .stats import claims as claims_mod
    from .view import commands, render
    for f in files:
        r = model.load(f)
        run = r["run"]
        print(f"== {r['host']['label']}: {f} ({'quick' if run['quick'] else 'full'} run, {run['start']}){ex_label}")
        emu = render.emulation(r["host"])
        if emu:
            print(f"   {emu}")
        for ex in exercises:
            v = claims_mod.evaluate_one(claims_mod.exercise_claim(ex), r)
            evidence = commands.display_text(v["evidence"], r)
            word = CHECK_WORDS[v["verdict"]]
            if v["verdict"] in ("untested", "not applicable"):
                print(f"  {ex['id']}: {word} ({evidence})")
            else:
                print(f"  {ex['id']}: {word}\n      {evidence}")
                if v["verdict"] == "inconclusive" and v.get("reason"):
                    print(f"      why undecided: {commands.display_text(v['reason'], r)}")
        if claims:
            print("  claims of the chapter on this result:")
            for c in claims:
                v = claims_mod.evaluate_one(c, r)
                print(f"    {c['id']}: {v['verdict']}")
        print()


def _check_tool(a, folder: Path) -> int:
    """A tool card's exercises (labs/<lab>/cards/<tool>.exercises.toml), each file on the
    reader's results of its lab."""
    from . import cards, results
    if a.exercises:
        raise UsageError(f"--exercises is for a lab; {a.lab!r} is a tool card "
                         f"(its exercises: labs/*/cards/{a.lab}.exercises.toml)")
    found = 0
    for lab, exercises in cards.load(a.lab, root=results.ROOT):
        files = _check_results(lab, folder)
        if not files:
            print(f"labkit check {a.lab}: no result of {lab} in {folder}: its exercises need one "
                  f"(sudo labs/{lab}/run.sh)", file=sys.stderr)
            continue
        found += 1
        _check_one(f" [{a.lab} card, lab {lab}]", exercises, [], files)
    if not found:
        print(f"labkit check {a.lab}: none of the labs its exercises read has a result in {folder}; "
              f"run one, or name a folder with --results", file=sys.stderr)
        return 1
    return 0


def _cmd_check(a) -> int:
    """Evaluate a lab's exercises (and its claims), or a tool card's, on the reader's own results."""
    from . import cards, results
    from .stats import claims as claims_mod
    lab_dir = results.ROOT / "labs" / a.lab
    folder = Path(a.results) if a.results else results.ROOT / "local-results"
    if a.results and not folder.is_dir():
        raise UsageError(f"--results {a.results}: no such folder")
    if not (lab_dir / "run.sh").is_file():
        if a.lab in cards.tools():
            return _check_tool(a, folder)
        labs = sorted(p.parent.name for p in (results.ROOT / "labs").glob("*/run.sh"))
        raise UsageError(f"no lab {a.lab!r} and no tool card of that name (labs: {', '.join(labs)}; "
                         f"tools: {', '.join(cards.tools())})")
    ex_file = Path(a.exercises) if a.exercises else lab_dir / "exercises.toml"
    if a.exercises and not ex_file.is_file():
        raise UsageError(f"--exercises {a.exercises}: no such file")
    exercises = claims_mod.load_exercises(ex_file)
    claims = claims_mod.load(lab_dir / "claims.toml") if (lab_dir / "claims.toml").is_file() else []
    files = _check_results(a.lab, folder)
    if not files:
        print(f"labkit check: no result of {a.lab} in {folder}: run it first (sudo labs/{a.lab}/run.sh), "
              f"or name a folder with --results", file=sys.stderr)
        return 1
    _check_one("", exercises, claims, files)
    return 0


def recover_audit_rules() -> tuple[int, int]:
    """Remove the task,never rules of runs whose supervisor is gone
    (:func:`labkit.run.auditctx.orphans`): a run killed before its undo whose journal went with
    its out directory leaves one. Returns (status: 0 when none is left, 1 when one could not be
    removed; how many were found)."""
    import os
    import shutil
    from .run import auditctx
    if os.geteuid() != 0 or shutil.which("auditctl") is None:
        return 0, 0
    status, gone = 0, auditctx.orphans(auditctx.rules())
    for pid in gone:
        ok = auditctx.remove(pid)
        print(f"labkit recover: the audit rule '{auditctx.rule_for(pid)}' of a run that is gone (pid {pid}): "
              f"{'removed' if ok else 'could not be removed'}", file=sys.stderr)
        status |= not ok
    return status, len(gone)


def _cmd_recover(a) -> int:
    """Find the journals of killed lab runs and undo each with its lab's ``run.sh --recover``."""
    from . import results
    import os
    import subprocess
    from .run import journal
    outs = [Path(d) for d in a.out] if a.out else [results.ROOT / "local-results", results.ROOT / "ci-results"]
    for d in a.out or []:
        if not Path(d).is_dir():
            raise UsageError(f"--out {d}: no such folder")
    scratch = [Path(d) for d in a.scratch] if a.scratch else [Path(os.environ.get("TMPDIR") or "/tmp")]
    files = journal.find(outs, scratch)
    status, removed = recover_audit_rules()
    if not files:
        where = ", ".join(map(str, outs + scratch))
        print(f"labkit recover: no journal in {where}" if removed else
              f"labkit recover: nothing to recover (no journal in {where})", file=sys.stderr)
        return status
    for f in files:
        try:
            j = journal.read(f)
        except (journal.JournalError, OSError) as exc:
            print(f"labkit recover: {exc}", file=sys.stderr)
            status = 1
            continue
        # The script that wrote the journal (its undo actions may be functions of that script).
        script = j.script if j.script and j.script.is_file() else results.ROOT / "labs" / j.lab / "run.sh"
        if journal.running(j):
            print(f"labkit recover: {f}: run of {j.lab} in progress (pid {j.pid}): left alone", file=sys.stderr)
            continue
        if not script.is_file():
            print(f"labkit recover: {f}: no lab {j.lab} here ({script})", file=sys.stderr)
            status = 1
            continue
        print(f"labkit recover: {j.lab}: {len(j.pending)} pending undo actions in {f}", file=sys.stderr)
        args = ["bash", str(script), "--recover", "--out", str(f.parent)]
        if j.scratch_parent and j.scratch_parent.is_dir():
            args += ["--scratch", str(j.scratch_parent)]
        proc = subprocess.run(args, stdin=subprocess.DEVNULL)
        if proc.returncode != 0:
            print(f"labkit recover: {j.lab}: run.sh --recover exited {proc.returncode}", file=sys.stderr)
            status = 1
    return status


def _cmd_calibrate(args) -> int:
    from .stats import calibration
    return calibration.main(args.draws or calibration.DRAWS)


def parser() -> argparse.ArgumentParser:
    p = _Parser(prog="labkit", description="Perf Casebook result tool")
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("record", help="turn a lab run directory into a result file")
    for opt in ("lab", "lab-dir", "run-dir", "out", "start", "command"):
        r.add_argument(f"--{opt}", required=True)
    r.add_argument("--quick", choices=["0", "1"], required=True)
    r.add_argument("--tools", default="")
    r.add_argument("--scratch", help="the run's scratch directory (kept as run.paths.scratch)")
    r.add_argument("--checkout", help="the checkout the lab ran from (run.paths.checkout)")
    r.set_defaults(fn=_cmd_record)
    s = sub.add_parser("show", help="show a lab's results per host")
    s.add_argument("lab")
    s.add_argument("--host")
    s.set_defaults(fn=_cmd_show)
    sub.add_parser("hosts", help="list hosts with results").set_defaults(fn=_cmd_hosts)
    c = sub.add_parser("compare", help="compare two hosts (ratio table)",
                       description="Per lab both hosts have a result of: each measurement's median on "
                                   "HOST_A and HOST_B and the ratio HOST_B / HOST_A, one table per lab.")
    c.add_argument("host_a", help="a host label (labkit hosts lists them)")
    c.add_argument("host_b", help="another host label")
    c.add_argument("--lab", help="only this lab (default: every lab both hosts have)")
    c.set_defaults(fn=_cmd_compare)
    v = sub.add_parser("validate", help="validate result files")
    v.add_argument("files", nargs="*")
    v.set_defaults(fn=_cmd_validate)
    lb = sub.add_parser("labs", help="what the labs' manifests say (labs/*/lab.toml)")
    lg = lb.add_mutually_exclusive_group()
    for flag in ("names", "json", "debs", "matrix"):
        lg.add_argument(f"--{flag}", action="store_true")
    lb.set_defaults(fn=_cmd_labs)
    nl = sub.add_parser("new-lab", help="scaffold a new case: labs/NAME/ and docs/cases/NAME.md, and a first result")
    nl.add_argument("name")
    nl.add_argument("--title")
    nl.add_argument("--host", help="host label of the first result (default: this host's)")
    nl.add_argument("--no-run", action="store_true", help="write the files only")
    nl.set_defaults(fn=_cmd_new_lab)
    ev = sub.add_parser("reevaluate", help="evaluate result files' claims again with today's claims.toml")
    ev.add_argument("--write", action="store_true", help="rewrite the files' stored verdicts (default: only report)")
    ev.add_argument("files", nargs="+")
    ev.set_defaults(fn=_cmd_reevaluate)
    cal = sub.add_parser("calibrate", help="false-decision rate and power of the claims' intervals (simulated)")
    cal.add_argument("--draws", type=int, default=None, help="draws per cell (default: labkit.stats.calibration.DRAWS)")
    cal.set_defaults(fn=_cmd_calibrate)
    pr = sub.add_parser("probe", help="probe this host (JSON)")
    pr.add_argument("--scratch")
    pr.add_argument("--label")
    pr.set_defaults(fn=_cmd_probe)
    sub.add_parser("label", help="default host label").set_defaults(fn=_cmd_label)
    t = sub.add_parser("topology", help="CPU pairs and their relation")
    t.add_argument("--cpus", type=int, default=4)
    t.set_defaults(fn=_cmd_topology)
    f = sub.add_parser("flame", help="perf script -> folded stacks -> flame graph (inferno)")
    for opt in ("perf-script", "folded", "svg", "title"):
        f.add_argument(f"--{opt}", required=True)
    f.set_defaults(fn=_cmd_flame)
    d = sub.add_parser("diff-flame", help="differential flame graph of two folded files (inferno)")
    for opt in ("before", "after", "folded", "svg", "title"):
        d.add_argument(f"--{opt}", required=True)
    d.add_argument("--negate", action="store_true",
                   help="draw on --before's stacks (what --after no longer runs shows, in blue)")
    d.set_defaults(fn=_cmd_diff_flame)
    ac = sub.add_parser("attach-cast", help="attach an asciinema recording of the run to a result")
    ac.add_argument("--result", required=True)
    ac.add_argument("--cast", required=True)
    ac.set_defaults(fn=_cmd_attach_cast)
    ck = sub.add_parser("check", help="your own run against a chapter's or a tool card's exercises (predict, run, compare)",
                        description="Evaluate labs/LAB/exercises.toml's checks (the same way as claims) on your "
                                    "results: per exercise and host, as predicted, not as predicted, "
                                    "inconclusive, untested (why) or not applicable (emulated CPU). For a tool "
                                    "card (TOOL, e.g. perf), the exercises of labs/<lab>/cards/TOOL.exercises.toml, "
                                    "each on your results of <lab>.")
    ck.add_argument("lab", help="a lab (labs/LAB) or a tool card (docs/tools/TOOL.md), e.g. lat_tcp or perf")
    ck.add_argument("--results", metavar="DIR",
                    help="a host folder holding LAB.json, or a folder of host folders (default: local-results)")
    ck.add_argument("--exercises", metavar="FILE", help="an exercises file (default: labs/LAB/exercises.toml)")
    ck.set_defaults(fn=_cmd_check)
    rc = sub.add_parser("recover", help="undo what killed lab runs left behind (their journals)",
                        description="Find the journals of lab runs that were killed (SIGKILL, OOM, a closed CI "
                                    "job) and undo what each holds with labs/LAB/run.sh --recover: mounts, loop "
                                    "devices, knobs, tracefs, namespaces, processes. As root, also remove the "
                                    "audit task,never rule of a run whose supervisor is gone and whose journal "
                                    "went with its out directory. Exit 0 when nothing is left "
                                    "to undo, 1 when something could not be undone.")
    rc.add_argument("--out", action="append", metavar="DIR",
                    help="a host folder or a folder of host folders to search (repeatable; default: "
                         "local-results and ci-results)")
    rc.add_argument("--scratch", action="append", metavar="DIR",
                    help="a scratch parent whose pcb-* directories point to journals (repeatable; "
                         "default: $TMPDIR or /tmp)")
    rc.set_defaults(fn=_cmd_recover)
    return p


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["guest"]:   # its own command line (labkit/guest/__main__.py)
        from .guest.__main__ import main as guest_main
        return guest_main(argv[1:], prog="labkit guest")
    args = parser().parse_args(argv)
    try:
        return args.fn(args)
    except UsageError as exc:
        print(f"labkit {args.cmd}: error: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:   # a subcommand imports what it needs: these are loaded if raised
        from . import model, results
        from .stats import claims as claims_mod
        if not isinstance(exc, (model.ResultError, results.NoResult, FileNotFoundError, claims_mod.ClaimError)):
            raise
        print(f"labkit {args.cmd}: {exc}", file=sys.stderr)
        return 1
