"""Progress events: what each line of a lab's terminal is, as a machine-readable kind beside
the human text.

``labs/lib/lab.sh`` (``lab__say KIND TEXT``) writes each progress line with its kind in a tag,
``\\x1fKIND\\x1fTEXT`` (the unit separator, on which :meth:`str.splitlines` does not split,
unlike ``\\x1c`` to ``\\x1e``); the supervisor (:mod:`labkit.run.supervisor`) strips the tag,
colours the line by its kind on a terminal, writes the plain text to the log and, when :data:`ENV` is ``1`` in
its environment (a test harness such as the fault matrix), keeps the tag on what it writes to
stderr, so that the harness reads kinds and never the wording. A kind may carry one argument
after a colon: the step's or the group's name (``ok:build.cscope``, ``group:pinned``). Standard
library only: the supervisor imports it.
"""

from __future__ import annotations

TAG_START, TAG_END = "\x1f", "\x1f"
ENV = "PCB_PROGRESS_TAGS"
"""Set to ``1`` to keep each line's tag on the supervisor's stderr."""

KINDS = {
    # from the lab's body (labs/lib/lab.sh)
    "group": "a group begins (argument: the group)",
    "step": "a step starts (argument: the step)",
    "ok": "a step did what it was designed to do",
    "expected-failure": "a step failed, as designed",
    "failed": "a step failed",
    "detail": "one of a failed step's last error lines",
    "skipped": "a step was skipped, with the reason",
    "repetition": "a repetition after a step's first, not run: one repetition per step (PCB_ONE_REPETITION=1, the full fault matrix); no step boundary",
    "spawn": "a background process was started",
    "figure": "a figure a group measured (argument: the group)",
    "note": "anything else the lab says",
    "cleanup": "an undo action runs",
    "cleanup-failed": "an undo action failed",
    "stop": "the run stops (a full disk, an internal error, a failed journal)",
    # from the supervisor
    "run": "the run starts: lab, host, mode, scratch",
    "left-out": "a group a quick run leaves out (lab.toml quick_leaves_out), and why",
    "record": "the result is being recorded",
    "result": "where the result is, and what to do next",
    "interrupt": "a signal or a write error stops the run",
    "text": "a line without a tag (a tool's output on the lab's stderr)",
}
STEP_ENDS = ("ok", "expected-failure", "failed", "skipped")
"""The kinds that end a step."""
NOT_BOUNDARIES = ("repetition",)
"""The kinds of lines between which the lab does nothing: a harness that stops a run at its
progress lines (the fault matrix) does not count them."""


def tag(kind: str, text: str) -> str:
    """``text`` tagged with ``kind`` (``"ok:NAME"`` or ``"ok"``).

    Raises:
        ValueError: a kind not in :data:`KINDS`.
    """
    if kind.partition(":")[0] not in KINDS:
        raise ValueError(f"unknown progress kind {kind!r}")
    return f"{TAG_START}{kind}{TAG_END}{text}"


def split(line: str) -> tuple[str, str, str]:
    """``(kind, argument, text)`` of a line: its tag's kind and argument (``""`` when none) and
    the text after the tag; ``("text", "", line)`` for a line without a tag."""
    if line.startswith(TAG_START) and TAG_END in line[1:]:
        head, _, text = line[1:].partition(TAG_END)
        kind, _, arg = head.partition(":")
        return kind, arg, text
    return "text", "", line
