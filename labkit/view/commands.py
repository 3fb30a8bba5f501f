"""Commands and outputs as a reader sees them: without the paths of the machine that ran the lab.

A result keeps each step's command exactly as the lab ran it: ``printf %q``-escaped
(labs/lib/lab.sh) and with the absolute paths of that machine. For a page,

- the run's scratch directory (``<parent>/pcb-<lab>.XXXXXX``, made by ``mktemp``) becomes
  ``$SCRATCH``;
- the checkout becomes paths relative to it (``/home/x/perf-casebook/labs/lat_tcp/lat_tcp.c``
  → ``labs/lat_tcp/lat_tcp.c``), as when the reader runs the lab from their checkout;
- an out directory outside the checkout becomes ``$OUT``, and the run's directory in it while
  the run went on (``<out>/.<lab>.partial``, labkit.run.supervisor) the one the run left
  (``<out>/<lab>``), where a reader finds the files after their own run;
- the command is re-quoted for reading: split as the shell would (:func:`shlex.split`, with
  bash's ``$'...'`` quoting decoded) and joined again, quoting only the words that need it.

The paths come from the result itself (:func:`machine_paths`), never from this machine.
"""

from __future__ import annotations

import codecs
import re
import shlex
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..model import Result

_SAFE = re.compile(r"^[\w@%+=:,./-]+$")
_ANSI_C = re.compile(r"\$'((?:[^'\\]|\\.)*)'")
_MARK = {"SCRATCH": "\x00SCRATCH\x00", "OUT": "\x00OUT\x00"}


def machine_paths(result: Result) -> dict:
    """``{"scratch", "checkout", "out", "lab"}``: absolute paths of the machine that made
    ``result``, as its ``run.paths`` records them (labkit.record), each None when the result
    does not record it (a result made before the field existed shows its commands as
    recorded), and the result's lab (which names its run directory in ``out``)."""
    recorded = result["run"].get("paths") or {}
    return {**{k: recorded.get(k) for k in ("scratch", "checkout", "out")}, "lab": result.get("lab")}


def _words(command: str) -> list[str]:
    """The words of a recorded command as the shell splits them (whitespace split if it cannot)."""
    try:
        return shlex.split(_decode_ansi_c(command))
    except ValueError:
        return command.split()


def _sub_path(text: str, path: str, repl: str, relative: bool = False) -> str:
    """Replace ``path`` (as a whole path, not a prefix of a longer name) by ``repl``; with
    ``relative``, ``path/x`` becomes ``x`` and ``path`` alone becomes ``repl``. A text without
    ``path`` is returned as it is, unsearched (most outputs a page shows hold no path)."""
    if path not in text:
        return text
    start, end = r"(?<![\w./-])", r"(?![^/\s'\"\\;:,()=])"
    if relative:
        text = re.sub(start + re.escape(path) + "/", lambda m: "", text)
    return re.sub(start + re.escape(path) + end, lambda m: repl, text)


def _replace_paths(text: str, paths: dict, marks: dict) -> str:
    if paths.get("scratch"):
        text = _sub_path(text, paths["scratch"], marks["SCRATCH"])
        # as a regular expression in a command (pidstat -C 'aux-path=/tmp/pcb-fio_engines\.abc123 ')
        text = _sub_path(text, paths["scratch"].replace(".", "\\."), marks["SCRATCH"])
    co, out = paths.get("checkout"), paths.get("out")
    if out and paths.get("lab"):
        text = _sub_path(text, f"{out}/.{paths['lab']}.partial", f"{out}/{paths['lab']}")
    if out and not (co and (out == co or out.startswith(co + "/"))):
        text = _sub_path(text, out, marks["OUT"])
    if co:
        text = _sub_path(text, co, ".", relative=True)
    return text


def display_text(text: str, result: Result) -> str:
    """``text`` (a tool's output, a step's reason) with the result's machine paths replaced
    by ``$SCRATCH``, ``$OUT`` and paths relative to the checkout."""
    return _replace_paths(text, machine_paths(result), {"SCRATCH": "$SCRATCH", "OUT": "$OUT"})


def _decode_ansi_c(cmd: str) -> str:
    """Turn bash's ``$'a\\nb'`` words into single-quoted words shlex can split."""
    def one(m):
        raw = codecs.escape_decode(m.group(1).encode("utf-8"))[0].decode("utf-8", "replace")
        return "'" + raw.replace("'", "'\"'\"'") + "'"
    return _ANSI_C.sub(one, cmd)


def _quote_word(word: str) -> str:
    """One word for a reader: bare when the shell reads it unchanged, else quoted; the
    ``$SCRATCH``/``$OUT`` marks stay outside quotes so that the shell expands them."""
    parts = re.split("(" + "|".join(re.escape(m) for m in _MARK.values()) + ")", word)
    out = []
    for i, p in enumerate(parts):
        name = next((k for k, v in _MARK.items() if v == p), None)
        if name:
            nxt = parts[i + 1] if i + 1 < len(parts) else ""
            out.append(f"${{{name}}}" if re.match(r"\w", nxt) else f"${name}")
        elif p:
            out.append(p if _SAFE.match(p) else shlex.quote(p))
    return "".join(out) or "''"


def display_command(command: str | None, result: Result) -> str:
    """A recorded command as a reader would type it from the checkout: machine paths
    replaced (module docstring), ``printf %q`` escapes undone, words quoted only where the
    shell needs it. A command the shell could not split is shown with its paths replaced only.

    Example: ``perf stat -x\\, --filter dev\\ ==\\ 7 -o /tmp/pcb-fio.Ab12Cd/x``
    → ``perf stat -x, --filter 'dev == 7' -o $SCRATCH/x``.
    """
    if not command:
        return ""
    paths = machine_paths(result)
    try:
        words = shlex.split(_decode_ansi_c(command))
    except ValueError:
        return display_text(command, result)
    return " ".join(_quote_word(_replace_paths(w, paths, _MARK)) for w in words)
