"""`make mutation`: mutation testing of the modules that turn results into verdicts and pages
(labkit's claims and their calibration, the staleness rule, model, results, render, charts, macros) and of those a result's provenance, the
site's structure and a run's safety rest on (record, manifest, probe, supervisor, journal, the
guest's QEMU command line) with mutmut, against the fast tier's tests of those modules. Prints the
kill ratio per module and in all (target: >= 80 % in all; issue 42 asks >= 90 % per module).

mutmut mutates files in place, one mutant at a time: it runs in a copy of the checkout (the
files git tracks, as they are in the work tree) under a temporary directory, never in the tree
in use. Tests that already fail without any mutant are reported and left out (mutmut needs a
green baseline); a timed-out mutant counts as killed (the tests noticed).

    .venv/bin/python tests/mutation.py --mutmut .tools/mutmut/bin/mutmut [--paths labkit/stats/claims.py,...]
                                       [--sample N [--seed S]] [--keep DIR] [--json FILE]

``--sample N`` tests N mutants per module drawn at random (fixed seed) instead of every one:
mutmut lists every mutant of the module, is stopped, and runs the drawn ones by id. A module of
several hundred mutants takes an hour in full on two CPUs; the sample gives its ratio with the
binomial uncertainty printed beside it.
"""

from __future__ import annotations

import argparse
import math
import random
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PY = ROOT / ".venv" / "bin" / "python"
MACROS = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "labkit" / "site" / "macros").glob("*.py"))  # the page macros' modules
# What a result's provenance, the nav and CI, and a run's stop and undo depend on (issue 42).
CONTRACT_PATHS = ["labkit/record.py", "labkit/manifest.py", "labkit/run/probe.py", "labkit/run/supervisor.py",
                  "labkit/run/journal.py", "labkit/guest/command.py"]
DEFAULT_PATHS = ["labkit/stats/claims.py", "labkit/stats/calibration.py", "labkit/stale.py", "labkit/model.py", "labkit/results.py", "labkit/view/render.py",
                 "labkit/view/charts.py", *MACROS, *CONTRACT_PATHS]
# The fast tier's unit tests of each module (no lab run, no site build, no browser), quickest
# first: pytest stops at the first failure, so most mutants cost a second or two.
CLAIMS_TESTS = ["tests/test_claims_handbuilt.py", "tests/test_claims_rules.py", "tests/test_claims_boundaries.py",
                "tests/test_claims_intervals.py",
                "tests/test_claims_sign.py", "tests/test_results_loading.py", "tests/test_claims_contract.py",
                "tests/test_check.py", "tests/test_cli.py", "tests/test_calibration.py"]
PAGE_TESTS = ["tests/test_render_values.py", "tests/test_macros_tables.py", "tests/test_macros_pages.py", "tests/test_macros_render.py",
              "tests/test_macros_excerpts.py", "tests/test_claims_handbuilt.py", "tests/test_cli.py"]
# Tests of one page macros module beyond the page tests every macros module runs.
MACRO_TESTS = {"labkit/site/macros/differ.py": ["tests/test_differ.py"],
               "labkit/site/macros/runs.py": ["tests/test_audit_context.py"],
               "labkit/site/macros/claim_tables.py": ["tests/test_claims_rules.py"],
               "labkit/site/macros/tables.py": ["tests/test_manifest_order.py"]}
TESTS = {"labkit/stats/claims.py": CLAIMS_TESTS + ["tests/test_build_speed.py"],   # the verdict cache
         "labkit/model.py": CLAIMS_TESTS + ["tests/test_audit_context.py", "tests/test_build_speed.py"],
         "labkit/stats/calibration.py": ["tests/test_calibration.py", "tests/test_claims_sign.py"],
         # the staleness rule: which files of a lab count as measuring code
         "labkit/stale.py": ["tests/test_stale_rule.py", "tests/test_results_loading.py", "tests/test_model_claims.py"],
         "labkit/results.py": ["tests/test_results_loading.py", "tests/test_cli.py", "tests/test_check.py"],
         "labkit/view/render.py": PAGE_TESTS, "labkit/view/charts.py": ["tests/test_charts_figure.py"] + PAGE_TESTS + ["tests/test_build_speed.py"],
         # the tool cards' macros (annotated outputs, exercises, lab times) are tested on the cards
         **{path: PAGE_TESTS + ["tests/test_tools_cards.py"] + MACRO_TESTS.get(path, []) for path in MACROS},
         # charts drawn in worker processes during a build: tested with the build's caches
         "labkit/site/macros/beside.py": ["tests/test_build_speed.py"] + PAGE_TESTS,
         # the fake lab (tests/fakelab) runs the supervisor, the journal and `labkit record` for
         # real: about a minute for the file, so these modules cost the most per surviving mutant
         "labkit/record.py": ["tests/test_record*.py", "tests/test_case*.py", "labs/nvme_swiotlb/tests/test_nvme_swiotlb_record.py",
                              "labs/lat_tcp/tests/test_lat_tcp_claims.py", "labs/optane_kyber/tests/test_optane_kyber_claims.py",
                              "tests/test_stale_rule.py", "tests/test_lab_contract.py"],
         "labkit/manifest.py": ["tests/test_manifest_order.py", "tests/test_toml_schemas.py", "tests/test_lab_folders.py"],
         "labkit/run/probe.py": ["tests/test_probe_sysroot.py", "tests/test_probe.py", "tests/test_probe_audit.py"],
         "labkit/run/supervisor.py": ["tests/test_supervisor*.py", "tests/test_step_protocol.py", "tests/test_lab_contract.py"],
         "labkit/run/journal.py": ["tests/test_journal*.py", "tests/test_lab_contract.py"],
         "labkit/guest/command.py": ["tests/test_guest_command.py", "tests/test_guest.py", "tests/test_guest_cli.py"]}
# --thorough adds the fast tier's tests on every committed result (a minute per surviving mutant).
THOROUGH = ["tests/test_tools_cards.py", "tests/test_claims_failable.py", "tests/test_model_claims.py",
            "labs/fio_engines/tests/test_fio_engines_claims.py", "labs/fstime/tests/test_fstime_claims.py",
            "labs/lat_tcp/tests/test_lat_tcp_claims.py", "labs/optane_kyber/tests/test_optane_kyber_claims.py"]
PYTEST = [str(PY), "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", "-p", "no:playwright", "-p", "no:base_url",
          "-m", "not lab and not guest and not slow and not timing"]


def copy_tree(dest: Path) -> None:
    """The work tree's files, as they are, into ``dest``: those git tracks (less any deleted) and
    the new ones it does not ignore (a tracked file may already use one: a module, a lab.sh
    part); .venv and .tools linked."""
    listed = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                            capture_output=True, check=True).stdout.split(b"\0")
    files = b"".join(f + b"\0" for f in dict.fromkeys(listed) if f and os.path.lexists(ROOT / os.fsdecode(f)))
    tar = subprocess.Popen(["tar", "--null", "-T", "-", "-cf", "-"], cwd=ROOT, stdin=subprocess.PIPE,
                           stdout=subprocess.PIPE)
    untar = subprocess.Popen(["tar", "-xf", "-", "-C", str(dest)], stdin=tar.stdout)
    tar.stdin.write(files)
    tar.stdin.close()
    tar.stdout.close()
    if untar.wait() or tar.wait():
        raise SystemExit("mutation: copying the checkout failed")
    for link in (".venv", ".tools"):
        if (ROOT / link).exists():
            (dest / link).symlink_to(ROOT / link)


def test_files(work: Path, patterns: list[str]) -> list[str]:
    """The test files of ``patterns`` (paths or globs relative to ``work``) that exist there, in
    the patterns' order, each once."""
    found = [p.relative_to(work).as_posix() for pat in patterns for p in sorted(work.glob(pat)) if p.is_file()]
    return list(dict.fromkeys(found))


def baseline_failures(work: Path, tests: list[str], env: dict) -> list[str]:
    """Node ids of tests that fail without any mutant."""
    proc = subprocess.run([*PYTEST[:3], "-q", "-p", "no:cacheprovider", "-m", PYTEST[-1], "-rf", *tests],
                          cwd=work, env=env, capture_output=True, text=True)
    return [l.split()[1] for l in proc.stdout.splitlines() if l.startswith("FAILED ")]


STATES = ("killed", "timeout", "survived", "suspicious", "skipped", "untested")


def statuses(mutmut: str, work: Path, env: dict) -> dict[int, str]:
    """Every mutant in mutmut's cache in ``work``, its id to its status (one of :data:`STATES`),
    from ``mutmut result-ids STATUS``, mutmut 2's command for it (not its database). Empty when
    mutmut has listed nothing yet, or its cache is busy (it may be running)."""
    out: dict[int, str] = {}
    for state in STATES:
        proc = subprocess.run([mutmut, "result-ids", state], cwd=work, env=env, capture_output=True, text=True)
        if proc.returncode:
            return {}
        # ids only: without a cache mutmut prints a line about clearing it, and no id
        out.update((int(x), state) for x in proc.stdout.split() if x.isdigit())
    return out


def counts(status: dict[int, str], modules: dict[str, set[int]], only: set[int] | None = None) -> dict[str, dict[str, int]]:
    """Per module (source file): how many of its mutants (``modules``: file to ids) are killed,
    timeout, survived, suspicious, skipped, untested (``status``: id to state); with ``only``, of
    those mutant ids alone (a sampled run)."""
    out: dict[str, dict[str, int]] = {}
    for path, ids in modules.items():
        d = out.setdefault(path, dict.fromkeys(STATES, 0))
        for mid in ids:
            if only is None or mid in only:
                d[status.get(mid, "untested")] += 1
    return out


def listed(mutmut: str, work: Path, env: dict, known: set[int], path: str) -> set[int]:
    """The ids mutmut listed for ``path``: those in its cache now and not in ``known`` (the ids
    before it mutated ``path``). None new while some were known: a --keep directory that already
    holds the module's mutants, whose counts would be zero; said on stderr."""
    ids = set(statuses(mutmut, work, env)) - known
    if not ids and known:
        print(f"mutation: {path}: mutmut listed no new mutant: a --keep directory that already holds this "
              f"module's mutants counts none of them; use a fresh one", file=sys.stderr, flush=True)
    return ids


def sampled_run(mutmut: str, path: str, runner: str, work: Path, env: dict, n: int, seed: int) -> tuple[int, list[int], set[int]]:
    """List ``path``'s mutants with ``mutmut run`` (stopped once they are in its cache, before it
    has tested more than a few), then test ``n`` of them drawn with ``seed``, one ``mutmut run ID``
    each. The module's mutants are those that appear in the cache while it lists them.
    Returns (mutmut's worst exit status, the ids drawn, every id of the module)."""
    base = [mutmut, "run", "--paths-to-mutate", path, "--runner", runner, "--tests-dir", "tests", "--no-progress"]
    source = (work / path).read_bytes()  # stopped mid-mutant, mutmut would leave the file mutated
    known = set(statuses(mutmut, work, env))
    # its own process group: mutmut's multiprocessing helpers must stop with it
    lister = subprocess.Popen(base, cwd=work, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              start_new_session=True)
    ids: set[int] = set()
    stable = 0
    while lister.poll() is None:
        time.sleep(2)
        now = set(statuses(mutmut, work, env)) - known
        stable = stable + 1 if now and len(now) == len(ids) else 0
        ids = now or ids
        if stable >= 2:  # the list stopped growing: mutmut is testing them now
            break
    try:
        os.killpg(lister.pid, signal.SIGTERM)
    except ProcessLookupError:
        pass
    lister.wait()
    time.sleep(1)
    try:
        os.killpg(lister.pid, signal.SIGKILL)  # what ignored SIGTERM
    except ProcessLookupError:
        pass
    (work / path).write_bytes(source)
    ids = listed(mutmut, work, env, known, path)
    drawn = sorted(random.Random(seed).sample(sorted(ids), min(n, len(ids))))
    print(f"mutation: {path}: {len(ids)} mutants, testing {len(drawn)} drawn at random (seed {seed})",
          file=sys.stderr, flush=True)
    worst = 0
    for mid in drawn:
        worst = max(worst, subprocess.run([*base, str(mid)], cwd=work, env=env,
                                          stdout=subprocess.DEVNULL).returncode & 1)
        if (work / path).read_bytes() != source:
            # mutmut stopped mid-mutant (a signal, a crash) and left it in the file: every later
            # mutant would be applied to a mutated file and find its line gone
            print(f"mutation: {path}: mutant {mid} was left in the file; put back", file=sys.stderr, flush=True)
            (work / path).write_bytes(source)
            worst = 1
    return worst, drawn, ids


def interval(detected: int, tried: int) -> tuple[float, float]:
    """95 % Wilson score interval of a kill ratio measured on a sample (Wilson 1927)."""
    if not tried:
        return 0.0, 1.0
    z, p = 1.96, detected / tried
    centre = (p + z * z / (2 * tried)) / (1 + z * z / tried)
    half = z * math.sqrt(p * (1 - p) / tried + z * z / (4 * tried * tried)) / (1 + z * z / tried)
    return max(0.0, centre - half), min(1.0, centre + half)


def ratio(d: dict[str, int]) -> tuple[int, int, float]:
    """(detected, tried, detected/tried): killed, timed out and suspicious count as detected."""
    detected = d["killed"] + d["timeout"] + d["suspicious"]
    tried = detected + d["survived"]
    return detected, tried, (detected / tried if tried else 0.0)


def table(per: dict[str, dict[str, int]], total: dict[str, int], sampled: bool = False) -> str:
    """The per-module table: killed, timed out, suspicious (slow, but the tests failed: mutmut's
    word), survived and the kill ratio of each module (the modules in name order), then all of
    them; with ``sampled``, each ratio's 95 % interval."""
    width = max([len(f) for f in per] + [22]) + 2
    lines = [f"\n{'module':<{width}}{'killed':>8}{'timeout':>9}{'suspicious':>12}{'survived':>10}{'ratio':>8}"
             + ("   95 % interval" if sampled else "")]
    for f, d in [*sorted(per.items()), ("all", total)]:
        det, tried, r = ratio(d)
        line = f"{f:<{width}}{d['killed']:>8}{d['timeout']:>9}{d['suspicious']:>12}{d['survived']:>10}" + (f"{r:>8.0%}" if tried else f"{'-':>8}")
        if sampled and tried:
            lo, hi = interval(det, tried)
            line += f"   {lo:.0%}–{hi:.0%}"
        lines.append(line)
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mutmut", default=str(ROOT / ".tools" / "mutmut" / "bin" / "mutmut"))
    ap.add_argument("--paths", default=",".join(DEFAULT_PATHS), help="comma-separated files to mutate")
    ap.add_argument("--keep", help="run in this directory and keep it (default: a temporary one, removed)")
    ap.add_argument("--json", help="write the counts to this file")
    ap.add_argument("--target", type=float, default=0.8, help="kill ratio to reach (default 0.8)")
    ap.add_argument("--thorough", action="store_true", help="also the tests on every committed result (slow)")
    ap.add_argument("--sample", type=int, default=0, help="test N mutants per module drawn at random (0: all)")
    ap.add_argument("--seed", type=int, default=15, help="seed of --sample's draw")
    a = ap.parse_args(argv)
    if not Path(a.mutmut).exists():
        print(f"mutation: no mutmut at {a.mutmut} (make mutation installs it)", file=sys.stderr)
        return 2
    paths = [p for p in a.paths.split(",") if p]
    work = Path(a.keep) if a.keep else Path(tempfile.mkdtemp(prefix="pcb-mutation."))
    work.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    try:
        if not (work / "labkit").exists():
            copy_tree(work)
        env = dict(os.environ, PYTHONPATH=str(work), PYTHONDONTWRITEBYTECODE="1")
        drawn: set[int] = set()
        modules: dict[str, set[int]] = {}
        for path in paths:
            tests = test_files(work, TESTS.get(path, CLAIMS_TESTS + PAGE_TESTS) + (THOROUGH if a.thorough else []))
            failing = baseline_failures(work, tests, env)
            if failing:
                print("mutation: left out, failing without any mutant:\n  " + "\n  ".join(failing), file=sys.stderr)
            # mutmut 2 counts only exit status 1 as "tests failed": a mutant that breaks collection
            # (pytest exit 2) or leaves no test to run (5) would pass as a survivor. Any failure is 1.
            inner = shlex.join([*PYTEST, *(f"--deselect={f}" for f in failing), *tests])
            runner = shlex.join(["bash", "-c", f"{inner} || exit 1"])
            print(f"mutation: mutating {path} in {work}\nmutation: runner {runner}", file=sys.stderr, flush=True)
            if a.sample:
                rc, ids, modules[path] = sampled_run(a.mutmut, path, runner, work, env, a.sample, a.seed)
                drawn.update(ids)
            else:
                known = set(statuses(a.mutmut, work, env))
                rc = subprocess.run([a.mutmut, "run", "--paths-to-mutate", path, "--runner", runner,
                                     "--tests-dir", "tests", "--no-progress"], cwd=work, env=env).returncode
                modules[path] = listed(a.mutmut, work, env, known, path)
            if rc & 1 and not a.sample:
                print(f"mutation: mutmut failed on {path} (exit {rc})", file=sys.stderr)
                return 1
            if rc & 1:  # a sample goes on: what mutmut could not test stays untested, not counted
                print(f"mutation: mutmut failed on some mutants of {path}: they are left untested", file=sys.stderr)
        per = counts(statuses(a.mutmut, work, env), modules, only=drawn if a.sample else None)
    finally:
        if not a.keep:
            shutil.rmtree(work, ignore_errors=True)
        # A mutant of the supervisor can break a fake-lab run's undo while its test's temporary
        # folder (the journal) is deleted: the real labkit removes what such runs left on the host.
        subprocess.run([sys.executable, "-m", "labkit", "recover"], cwd=ROOT, stdin=subprocess.DEVNULL)
    total = {k: sum(d.get(k, 0) for d in per.values()) for k in STATES}
    print(table(per, total, sampled=bool(a.sample)))
    det, tried, r = ratio(total)
    lo, hi = interval(det, tried)
    sampled = f", a sample of {a.sample} per module: 95 % interval {lo:.0%}–{hi:.0%}" if a.sample else ""
    print(f"\nkill ratio: {det} of {tried} mutants detected ({r:.1%}; target {a.target:.0%}{sampled}); "
          f"{time.time() - t0:.0f} s")
    if a.json:
        Path(a.json).write_text(json.dumps({"per_module": per, "total": total, "ratio": r, "sample": a.sample,
                                            "interval95": [lo, hi]}, indent=1))
    return 0 if r >= a.target else 1


if __name__ == "__main__":
    raise SystemExit(main())
