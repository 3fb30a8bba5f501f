"""The HTML the macros write, as Jinja templates (``labkit/site/macros/templates/*.html``).

Values are escaped by the environment (``autoescape``); a value that is already Markdown or HTML
(a table cell, a rendered table) is marked ``|safe`` in the template that takes it, and each
template's first comment lists what it takes. A missing value fails (``StrictUndefined``).
Templates render without their file's last newline: the Markdown around them adds the blank
lines it needs.
"""

from __future__ import annotations

from pathlib import Path

import jinja2

ENV = jinja2.Environment(
    loader=jinja2.FileSystemLoader(Path(__file__).with_name("templates")),
    autoescape=True,
    undefined=jinja2.StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
)
"""The Jinja environment of the macros' templates: ``templates/*.html``, autoescaped, strict about
missing values, block tags trimmed with the whitespace before them (a line holding only a block tag
leaves nothing)."""


def render(template: str, /, **values) -> str:
    """HTML: the template ``templates/<template>`` filled with ``values``.

    Raises:
        jinja2.TemplateNotFound: no such template; jinja2.UndefinedError: a value it uses is missing.
    """
    return ENV.get_template(template).render(**values)
