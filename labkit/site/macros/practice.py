"""Exercises: a chapter's (``labs/<lab>/exercises.toml``) and a tool card's
(``labs/<lab>/cards/<tool>.exercises.toml``): what to change, the prediction to make, and
how ``labkit check`` tests a run."""

from __future__ import annotations

import html

from ...model import case_text
from ...stats import claims as claims_mod
from ...view import commands, render
from . import build
from .build import MacroError


def describe_check(check: dict) -> str:
    """A check (a claim body) as a sentence for a reader, e.g. "the median round_trip with
    pin=same-cpu is below 1/1.5 of the one with pin=other-core"."""
    stat = check.get("statistic", "median")
    sel = lambda w: "with " + case_text(w) if w else "over all cases"  # noqa: E731
    kind, f = check["kind"], check.get("factor", 1)
    if kind == "step":
        which = check["step"] if "step" in check else case_text(check["where"])
        return f"step {which} does what it was designed to do"
    metric = check["metric"]
    if kind == "increasing":
        return f"the {stat} {metric} {sel(check['where'])} grows with {check['over']}"
    a, b = sel(check["a"]), sel(check["b"])
    if kind == "within":
        return f"the {stat} {metric} {a} and the one {b} agree within a factor of {f:g}"
    times = f"{f:g} times " if f != 1 else ""
    if check["relation"] == "less":
        return f"{times}the {stat} {metric} {a} is below the one {b}"
    if check["relation"] == "greater":
        return f"the {stat} {metric} {a} is above {times}the one {b}"
    return f"{times}the {stat} {metric} {a} is at least the one {b}"


def _exercise(number: int, ex: dict, checked: str, lab: str, lead: str = "", ours: str = "") -> str:
    """Markdown: exercise ``ex`` as an admonition numbered ``number``: ``lead``, the change,
    the prediction folded, how ``labkit check <checked>`` tests a result of ``lab``, then ``ours``."""
    body = (f"{lead}**Change.** {html.escape(ex['change'], quote=False)}\n\n"
            f"**Predict** the direction before you run it, then open ours:\n\n"
            + render.admonition("question", "Our prediction", html.escape(ex["predict"], quote=False), folded=True)
            + f"\n**Check it:** `labkit check {checked}` reads your result (local-results/*/{lab}.json) and"
            f" tests: {render.esc(describe_check(ex['check']))}." + (f"\n\n{ours}" if ours else ""))
    return render.admonition("example", f"Exercise {number}: {ex['title']}", body)


def exercises(lab: str) -> str:
    """Markdown: the exercises of ``labs/<lab>/exercises.toml``: for each, what to change,
    the prediction to make (folded, so the reader predicts first), and how to check a run
    with ``labkit check <lab>``.

    Raises:
        ClaimError: a missing or bad exercises.toml.
    """
    exs = build.lab_file(claims_mod.load_exercises, lab, "exercises.toml")
    return "\n".join(_exercise(i, ex, lab, lab) for i, ex in enumerate(exs, 1))


def tool_exercises(tool: str) -> str:
    """Markdown: a tool card's exercises (``labs/<lab>/cards/<tool>.exercises.toml``,
    :mod:`labkit.cards`), rendered like a chapter's (:func:`exercises`) and numbered across the
    card's labs: the lab they run, what to change, the prediction folded, how to check it with
    ``labkit check <tool>``, and, folded, how the check came out on each reference host
    (evaluated now, with the chapters' evaluator).

    Raises:
        MacroError: no exercises for ``tool``; ClaimError: a bad exercises file;
        NoResult: no host has a result of a lab the card's exercises run.
    """
    from ... import cards
    try:
        per_lab = cards.load(tool, root=build.ROOT)
    except KeyError:
        raise MacroError(f"tool_exercises: no exercises for {tool!r} in labs/*/cards/ (tools: {cards.tools()})") from None
    page = build.page()
    out = []
    for lab, exs in per_lab:
        pairs = build.for_lab(lab)
        for ex in exs:
            claim = claims_mod.exercise_claim(ex)
            rows = []
            for host, r in pairs:  # a list, not a table: the evidence is long and pages are read on phones
                v = claims_mod.evaluate_cached(claim, r)
                rows.append(f"- **{render.host_label(r['host'], host.title)}**: {render.VERDICT_MARK[v['verdict']]}. "
                            f"{render.esc(commands.display_text(v['evidence'], r))}")
            ours = render.admonition("success", f"Checked on the {lab} results of this site",
                                     "\n".join(rows), folded=True)
            lead = f"**Lab:** [{lab}]({build.rel_src(page, f'cases/{lab}.md')}). "
            out.append(_exercise(len(out) + 1, ex, tool, lab, lead=lead, ours=ours))
    return "\n".join(out)
