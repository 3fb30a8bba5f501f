"""Do two runs of a lab reach the same verdicts? Each result's claims are evaluated with today's
``labs/<lab>/claims.toml`` (:func:`labkit.stats.claims.evaluate`, as the pages do); of the claims
decided (holds or fails) in either run, how many have the same verdict in both, which flip
between holds and fails, and every disagreement with both verdicts' estimates and intervals.
Issue 39 asks of two full runs of each lab: at least 95 % of decided verdicts agree, no
holds<->fails flip.

    .venv/bin/python tests/agreement.py A.json B.json [A2.json B2.json ...]

Files come in pairs (a reference, then the run compared with it); a row per pair, then all pairs
pooled; exit status 1 when a pair flips. Bad usage (an odd count, two labs in a pair, a file that
is not a result): one line on stderr, exit status 2.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from labkit import model, results  # noqa: E402
from labkit.stats import claims as claims_mod  # noqa: E402

DECIDED = ("holds", "fails")


def compare(a: list[dict], b: list[dict]) -> dict:
    """Agreement of two lists of verdicts (``{"id", "verdict", "effect"?}``, as
    :func:`labkit.stats.claims.evaluate` returns them) for one lab's claims.

    Returns ``{"decided": n, "agree": n, "flips": [id, ...], "disagree": [(id, verdict_a,
    verdict_b), ...]}``: ``decided`` counts the claims holding or failing in either list (a claim
    in one list only counts, its other verdict "absent"), ``agree`` those with the same verdict in
    both, ``flips`` those that hold in one and fail in the other."""
    va = {v["id"]: v for v in a}
    vb = {v["id"]: v for v in b}
    out = {"decided": 0, "agree": 0, "flips": [], "disagree": []}
    for cid in sorted(set(va) | set(vb)):
        x = va.get(cid, {}).get("verdict", "absent")
        y = vb.get(cid, {}).get("verdict", "absent")
        if x not in DECIDED and y not in DECIDED:
            continue
        out["decided"] += 1
        if x == y:
            out["agree"] += 1
            continue
        out["disagree"].append((cid, x, y))
        if {x, y} == set(DECIDED):
            out["flips"].append(cid)
    return out


def verdicts(result: model.Result) -> list[dict]:
    """Today's verdicts of ``result``'s claims (labs/<lab>/claims.toml of this checkout)."""
    return claims_mod.evaluate(claims_mod.load(results.ROOT / "labs" / result["lab"] / "claims.toml"), result)


def _effect_text(v: dict | None) -> str:
    """"holds 1.03 (0.936–1.223)": a verdict, its estimate and interval as the claims engine
    writes them (:func:`labkit.stats.claims.span_text`); "absent" for a claim the run lacks."""
    if not v:
        return "absent"
    e = v.get("effect") or {}
    if e.get("estimate") is None:
        return v["verdict"]
    span = f" ({claims_mod.span_text(e)})" if e.get("low") is not None else ""
    return f"{v['verdict']} {e['estimate']:.4g}{span}"


def _usage(msg: str) -> None:
    print(f"agreement.py: {msg}", file=sys.stderr)
    raise SystemExit(2)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("files", nargs="+", type=Path, help="result files, in pairs: reference, then the other run")
    a = ap.parse_args(argv)
    if len(a.files) % 2:
        _usage(f"{len(a.files)} files: give them in pairs (reference, other run)")
    pairs = []
    for fa, fb in zip(a.files[::2], a.files[1::2]):
        try:
            ra, rb = model.load(fa), model.load(fb)
        except (OSError, ValueError) as e:
            _usage(f"{e}".splitlines()[0])
        if ra["lab"] != rb["lab"]:
            _usage(f"{fa} is {ra['lab']} and {fb} is {rb['lab']}: a pair is two runs of one lab")
        pairs.append((fa, ra, fb, rb))
    pooled = {"decided": 0, "agree": 0, "flips": 0}
    print("| lab | runs | decided verdicts that agree | holds<->fails | the disagreements (first / second run) |")
    print("|---|---|---|---|---|")
    for fa, ra, fb, rb in pairs:
        a_v, b_v = verdicts(ra), verdicts(rb)
        c = compare(a_v, b_v)
        by_a, by_b = {v["id"]: v for v in a_v}, {v["id"]: v for v in b_v}
        pct = f" ({100 * c['agree'] / c['decided']:.0f} %)" if c["decided"] else ""
        what = "; ".join(f"`{cid}` {_effect_text(by_a.get(cid))} / {_effect_text(by_b.get(cid))}, needs "
                         f"{(by_a.get(cid) or by_b.get(cid) or {}).get('effect', {}).get('needs', '?')}"
                         for cid, _, _ in c["disagree"])
        runs = f"{fa.parent.name}/{fa.name} / {fb.parent.name}/{fb.name}"
        print(f"| {ra['lab']} | {runs} | {c['agree']} of {c['decided']}{pct} | {len(c['flips'])} | {what or '-'} |")
        pooled["decided"] += c["decided"]
        pooled["agree"] += c["agree"]
        pooled["flips"] += len(c["flips"])
    if len(pairs) > 1 and pooled["decided"]:
        print(f"\nall pairs: {pooled['agree']} of {pooled['decided']} decided verdicts agree "
              f"({100 * pooled['agree'] / pooled['decided']:.0f} %), {pooled['flips']} holds<->fails flips")
    return 1 if pooled["flips"] else 0


if __name__ == "__main__":
    sys.exit(main())
