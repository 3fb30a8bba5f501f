"""The Pygments lexer of a lab step's output as the site shows it (``labkit.site.macros.step_output``):
one ``$ command`` line, with its backslash continuations, then what the command printed, verbatim.

Pygments' ``console`` lexer (``BashSessionLexer``) takes any line that starts with ``#``, ``%``,
``❯`` or ``(name)`` for a prompt, so tool output such as perf report's ``# Samples: 30K`` header,
strace -c's ``% time     seconds  usecs/call`` or ``(1 thread per core)`` was coloured as a
command and, on a phone, wrapped like one. Here only ``$ `` at the start of a line is a prompt.
Registered under the alias ``pcb-step`` through the ``pygments.lexers`` entry point in
pyproject.toml (Pygments' plugin mechanism, pygments.org/docs/plugins); the site's build is its
only user, no lab imports it.
"""

from __future__ import annotations

import re

from pygments.lexers.shell import BashSessionLexer


class StepSessionLexer(BashSessionLexer):
    """``$ command`` lines lexed as bash (Generic.Prompt, then bash tokens); every other line, one
    Generic.Output token each (rendered as ``<span class="go">``)."""

    name = "Lab step session"
    aliases = ["pcb-step"]
    filenames: list[str] = []
    mimetypes: list[str] = []
    _ps1rgx = re.compile(r"^(\$ )(.*\n?)")
    _venv = re.compile(r"(?!)")  # never matches: "(…)" at a line's start is output, not a virtualenv
