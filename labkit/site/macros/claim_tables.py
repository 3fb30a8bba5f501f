"""Claims and verdicts: every claim of a lab with its verdict on each host, and the original's
conclusions with how each fares. Verdicts are evaluated at build time from the stored
measurements and today's ``labs/<lab>/claims.toml`` (:mod:`labkit.stats.claims`)."""

from __future__ import annotations

import html
import re
from typing import TYPE_CHECKING

from ...stats import claims as claims_mod
from ...view import commands, render
from .. import fast_tables
from . import build, differ, templates
from .build import EMULATED_BADGE, MacroError
from .numbers import number as _num, times as _times
from .original import load_original
from .tables import stacked_table

if TYPE_CHECKING:
    from ...model import Effect, Result, Verdict

ROLE_WORD = {"conclusion": "Original's conclusion", "instrument": "Instrument check", "ours": "Ours"}


def side_label(own: dict, other: dict) -> str:
    """What tells one side of a claim from the other: the values of the selector keys that
    differ (``same-cpu``; ``kernel=5.10, dt=plain`` when several differ)."""
    diff = {k: v for k, v in own.items() if other.get(k) != v}
    if len(diff) == 1:
        value = next(iter(diff.values()))
        if isinstance(value, str) and not re.fullmatch(r"[-+.\d]+", value):
            return value
    return ", ".join(f"{k}={render.case_cell(k, v)}" for k, v in diff.items())


def _sides(c: dict) -> tuple[str, str]:
    """The labels of a comparison's sides a and b (:func:`side_label`; "a" and "b" when their
    selectors do not differ)."""
    return side_label(c["a"], c["b"]) or "a", side_label(c["b"], c["a"]) or "b"


def value_text(x: float, u: str) -> str:
    """A claim side's value with its unit, bytes in KiB/MiB/GiB (``14.29 µs``, ``512 MiB``);
    a plain ratio or fraction without one."""
    if u in ("ratio", "fraction"):
        return render.fmt(x)
    if u == "x":
        return f"{render.fmt(x)}×"
    div, shown = render.display_scale(u, [x])
    return f"{render.fmt(x / div)} {shown}".rstrip()


def interval_text(e: Effect) -> str:
    """An effect's interval as "2.31× (95 % interval 2.10–2.52×)", or the estimate alone with
    the reason when no interval exists."""
    if e.get("estimate") is None:
        return e["method"]
    if e.get("low") is None:
        return f"{_times(e['estimate'])} ({e['method']})"
    if e["low"] == e["high"] and str(e.get("method", "")).startswith("no spread"):
        return f"{_times(e['estimate'])} (no spread in the samples)"
    span = claims_mod.span_text(e, _num, _times)
    return f"{_times(e['estimate'])} ({round(e['level'] * 100)} % interval {span})"


def _effect_text(c: dict, e: Effect, result: Result) -> str | None:
    """The effect of a decided comparison or trend in words, from the verdict's fields: for a
    comparison the two sides' values and the ratio with its interval and what the claim needs;
    for a trend its first and last points and their ratio. None for other kinds."""
    stat = c.get("statistic", "median")
    if c["kind"] in ("compare", "within"):
        a, _ = claims_mod.side(result, c["metric"], c["a"], stat)
        b, _ = claims_mod.side(result, c["metric"], c["b"], stat)
        la, lb = _sides(c)
        mean = " (means)" if stat == "mean" else ""
        what = "per-repetition ratio" if c.get("paired") else "ratio"
        return (f"{value_text(a.value, a.unit)} {la} vs {value_text(b.value, b.unit)} {lb}{mean}: {what} "
                f"{la} ÷ {lb} = {interval_text(e)}, needs {e['needs']}; n = {e['n_a']} / {e['n_b']}")
    if c["kind"] == "increasing":
        ms = [m for m in claims_mod.select(result, c["metric"], c["where"])
              if isinstance(m["case"].get(c["over"]), (int, float))]
        first = min(ms, key=lambda m: m["case"][c["over"]])
        last = max(ms, key=lambda m: m["case"][c["over"]])
        over = c["over"]
        return (f"{c['metric']} from {value_text(first['median'], first['unit'])} at {over} = "
                f"{render.case_cell(over, first['case'][over])} to {value_text(last['median'], last['unit'])} at "
                f"{over} = {render.case_cell(over, last['case'][over])}: last ÷ first = {interval_text(e)}, "
                f"needs {e['needs']}")
    return None


def claim_sentence(c: dict, v: Verdict, result: Result) -> str:
    """Markdown inline text: the verdict ``v`` of claim ``c`` on ``result`` as a sentence, from
    the verdict's fields (never from its evidence string): for a comparison the two sides'
    values and the effect with its interval and what the claim needs ("14.29 µs same-cpu vs
    62.48 µs other-core: a ÷ b = 0.229× (95 % interval 0.21–0.25×), needs < 0.909, n = 22 /
    22"); for a trend its first and last points and the ratio; otherwise (a step, no data, an
    emulated CPU) the verdict's reason or evidence. Verdicts other than holds and fails end with
    their reason; flags (drift, two modes) follow, then the emulated-CPU badge."""
    e = v.get("effect")
    text = _effect_text(c, e, result) if e else None
    if text is None:
        text = commands.display_text(v.get("reason") or v["evidence"], result)
        reason = None
    else:
        reason = v.get("reason")
    out = render.esc(text)
    if reason and v["verdict"] not in ("holds", "fails"):
        out += f"; {render.esc(commands.display_text(reason, result))}"
    for flag in v.get("flags", []):
        out += f" ⚠ {render.esc(flag)}"
    if v.get("emulated"):
        out += " " + EMULATED_BADGE
    return out


def claims(lab: str) -> str:
    """Markdown: per host, a count of the verdicts and a table of each claim of
    ``labs/<lab>/claims.toml``: its role, statement and ``source`` ("Original: ..."), then its
    verdict (holds, fails, inconclusive, untested, not applicable: each with its own mark and
    CSS class) as a sentence (:func:`claim_sentence`) with the raw evidence folded under it.

    Verdicts are evaluated at build time from the result's measurements and today's
    claims.toml (:func:`labkit.stats.claims.evaluate_one`), so a claim added after the run shows
    what the stored data say; where the verdict stored at run time differs, the cell says so.

    Raises:
        ClaimError: a missing or malformed claims.toml; NoResult: no host has a result of ``lab``.
    """
    spec = build.lab_file(claims_mod.load, lab, "claims.toml")

    def table(host, result):
        stored = {c["id"]: c for c in result["claims"]}
        rows, count = [], {}
        for c in spec:
            v = claims_mod.evaluate_cached(c, result)
            count[v["verdict"]] = count.get(v["verdict"], 0) + 1
            statement = templates.render("claim_statement.html", role=ROLE_WORD[c["role"]], statement=c["statement"],
                                         source=c.get("source") or "")
            evidence = render.esc(commands.display_text(v["evidence"], result))
            old = stored.get(c["id"])
            changed = ""
            if old is not None and old["verdict"] != v["verdict"]:
                changed = (f" *(recorded as {render.esc(old['verdict'])} when the lab ran; the claim or the"
                           f" verdict rules changed since)*")
            sentence = claim_sentence(c, v, result)
            verdict = f"{render.VERDICT_MARK[v['verdict']]}: {sentence}{changed}"
            if sentence != evidence:  # a step's or a skip's evidence is its sentence: no fold
                verdict += templates.render("evidence_fold.html", evidence=evidence)
            rows.append([statement, verdict])
        summary = ", ".join(f"{count[k]} {k}" for k in claims_mod.VERDICTS if k in count)
        return f"{len(spec)} claims: {summary}.\n\n" + fast_tables.table(["Claim", "Here"], rows, align=None)

    return build.per_host(lab, table)[0]


def _ratio_name(c: dict) -> str:
    """What an effect divides, named by its sides: "same-cpu ÷ other-core" for a comparison,
    "last ÷ first" for a trend, "" for other kinds."""
    if c["kind"] in ("compare", "within"):
        return " ÷ ".join(_sides(c))
    return "last ÷ first" if c["kind"] == "increasing" else ""


def verdict_cell(c: dict, v: Verdict) -> str:
    """Markdown inline text: one verdict, short: its mark, then the effect named by its sides,
    with its interval and what the claim needs (``same-cpu ÷ other-core = 0.229× (95 % interval
    0.210–0.250×), needs < 0.769``), or the reason it is not decided; flags and the
    emulated-CPU badge after."""
    e = v.get("effect")
    text = render.VERDICT_MARK[v["verdict"]]
    if e and (e.get("estimate") is not None or v["verdict"] in ("holds", "fails")):   # an infinite ratio decides too
        name = _ratio_name(c)
        text += f": {render.esc(name + ' = ' if name else '')}{render.esc(interval_text(e))}, needs {render.esc(e['needs'])}"
    if v["verdict"] not in ("holds", "fails") and v.get("reason") and not (e and v["reason"].startswith("the 95%")):
        text += f"; {render.esc(v['reason'])}"
    if v.get("flags"):
        text += " ⚠ " + render.esc("; ".join(v["flags"]))
    if v.get("emulated"):
        text += " " + EMULATED_BADGE
    return text


def brief_effect(e: Effect | None) -> str:
    """An effect in a few characters: "1.77× (1.70–1.80)", the estimate alone when it has no
    interval, "" when there is none."""
    if not e or e.get("estimate") is None:
        return ""
    if e.get("low") is None or e["low"] == e["high"]:
        return _times(e["estimate"])
    return f"{_times(e['estimate'])} ({claims_mod.span_text(e, _num)})"


def _claim(macro: str, lab: str, claim: str) -> dict:
    """Claim ``claim`` of ``labs/<lab>/claims.toml``, for the macro ``macro``.

    Raises:
        MacroError: the lab has no such claim (the message names ``macro``).
    """
    spec = {c["id"]: c for c in build.lab_file(claims_mod.load, lab, "claims.toml")}
    if claim not in spec:
        raise MacroError(f"{macro}: {lab} has no claim {claim!r} (labs/{lab}/claims.toml)")
    return spec[claim]


def verdict_brief(lab: str, claim: str, sep: str = "<br>") -> str:
    """Markdown inline text for a chapter's one-line verdict table: claim ``claim`` of
    ``labs/<lab>/claims.toml`` on every host with a result of ``lab``, evaluated at build time
    as :func:`verdicts` does; per host its mark and word and, where decided or inconclusive, the
    effect with its 95 % interval (:func:`brief_effect`), then the host, badged "emulated CPU"
    where its CPU is emulated; hosts joined by ``sep``, a line each by default (``holds, 1.77×
    (1.70–1.80) on xeon-kvm-2vcpu<br>not applicable on qemu-arm64-tcg emulated CPU``; ``"; "``
    inside a sentence). The evidence page has the whole verdict (:func:`verdict_cell`), its
    reason and the host's full badge.

    Raises:
        MacroError: ``claim`` is not a claim of the lab.
        NoResult: no host has a result of ``lab``.
    """
    c = _claim("verdict_brief", lab, claim)
    parts = []
    for h, r in build.for_lab(lab):
        v = claims_mod.evaluate_cached(c, r)
        mark = render.VERDICT_MARK[v["verdict"]]
        effect = brief_effect(v.get("effect")) if v["verdict"] in ("holds", "fails", "inconclusive") else ""
        badge = f" {EMULATED_BADGE}" if render.emulation(r["host"]) else ""
        parts.append(f"{mark}{', ' + render.esc(effect) if effect else ''} on {render.esc(h.title or r['host']['label'])}{badge}")
    return sep.join(parts)


def prose_reads(lab: str, claim: str, verdict: str, host: str | None = None) -> str:
    """A guard for a sentence of a page that reads a verdict in words ("on the reference, the
    claim fails"): ``""`` when ``claim`` of ``labs/<lab>/claims.toml``, evaluated at build time
    on ``host``'s committed result (by label; by default the reference host, the first
    committed host in search order whose CPU is not emulated, as :func:`verdicts` compares
    against), has the verdict ``verdict`` (holds, fails, inconclusive, not applicable,
    untested). A reader's own results never count: the sentence is about a committed result.
    Put it beside the sentence it guards; a rerun that changes the verdict then fails the
    build, and the sentence is rewritten instead of contradicting the page's tables.

    Raises:
        MacroError: ``claim`` is not a claim of the lab, ``verdict`` is not a verdict word, no
            committed host (or none called ``host``) has a result of ``lab``, or the verdict
            there is another one (the message names it and its effect).
    """
    if verdict not in render.VERDICT_MARK:
        raise MacroError(f"prose_reads: {verdict!r} is not a verdict ({', '.join(render.VERDICT_MARK)})")
    c = _claim("prose_reads", lab, claim)
    committed = [(h, r) for h, r in build.for_lab(lab) if not h.local]
    if host is None:
        committed = [(h, r) for h, r in committed if not render.emulation(r["host"])][:1]
    else:
        committed = [(h, r) for h, r in committed if host in (h.label, h.title)]
    if not committed:
        raise MacroError(f"prose_reads: no committed result of {lab} on "
                         f"{'a host whose CPU is not emulated' if host is None else repr(host)}")
    h, r = committed[0]
    v = claims_mod.evaluate_cached(c, r)
    if v["verdict"] != verdict:
        effect = brief_effect(v.get("effect"))
        raise MacroError(f"prose_reads: the page says {claim} {verdict} on {h.label}, but it "
                         f"{v['verdict']}{' at ' + effect if effect else ''} there: rewrite the sentence")
    return ""


def verdicts(lab: str) -> str:
    """Markdown: the original's conclusions and how each fares on every host: one row per
    ``[[conclusion]]`` of ``labs/<lab>/original.toml`` (in its order; its words, then the name and
    kernel of the ``[[machine]]`` it names) and per claim testing it
    (role ``conclusion``), one column per host with the verdict and its effect and interval
    (:func:`verdict_cell`; where a host's verdict differs from the reference host's, the first
    committed one, the cell names the host provenance that differs: :mod:`labkit.site.macros.differ`),
    evaluated at build time from today's claims.toml (a
    :func:`labkit.site.macros.tables.stacked_table`); then the conclusions no host of ours can
    test, each with its reason. Instrument checks and our own claims are not in this table
    (:func:`claims` lists every claim).

    Raises:
        ClaimError, OriginalError: a malformed claims.toml or original.toml.
        MacroError: a conclusion claim naming a conclusion original.toml does not have.
        NoResult: no host has a result of ``lab``.
    """
    spec = [c for c in build.lab_file(claims_mod.load, lab, "claims.toml") if c["role"] == "conclusion"]
    orig = load_original(lab)
    ids = {c["id"] for c in orig["conclusion"]}
    for c in spec:
        if c["conclusion"] not in ids:
            raise MacroError(f"verdicts: claim {c['id']} of {lab} names conclusion {c['conclusion']!r}, "
                             f"which labs/{lab}/original.toml does not have")
    machines = {m["id"]: m for m in orig["machine"]}

    def concluded(con: dict) -> str:
        """The conclusion's words, then the machine and kernel it was drawn on, if it names one."""
        m = machines.get(con.get("machine"))
        where = f" ({m['name']}; kernel {m['kernel']})" if m else ""
        return html.escape(con["text"] + where, quote=False)

    pairs = build.for_lab(lab)
    header = ["The original concluded", "Claim"] + [render.host_label(r["host"], h.title) for h, r in pairs]
    rows, untestable = [], []
    for con in orig["conclusion"]:
        tested = [c for c in spec if c["conclusion"] == con["id"]]
        if not tested:
            untestable.append(f"- {concluded(con)} *Not tested here: "
                              f"{html.escape(con.get('untestable', 'no claim yet'), quote=False)}*")
            continue
        for k, c in enumerate(tested):
            vs = [claims_mod.evaluate_cached(c, r) for _, r in pairs]
            cells = [verdict_cell(c, v) for v in vs]
            ref = next((i for i, (h, _) in enumerate(pairs) if not h.local), None)
            for i, ((h, r), v) in enumerate(zip(pairs, vs)):
                note = None if ref is None or i == ref else differ.differs_note(
                    v["verdict"], vs[ref]["verdict"], pairs[ref][1]["host"], r["host"], pairs[ref][0].label)
                if note:
                    cells[i] += f' <span class="pc-differs">↯ {render.esc(note)}</span>'
            rows.append([concluded(con) if k == 0 else "″",
                         html.escape(c["statement"], quote=False)] + cells)
    out = stacked_table(header, rows)
    if untestable:
        out += "\n\nConclusions of the original that no host of ours can test:\n\n" + "\n".join(untestable) + "\n"
    return out
