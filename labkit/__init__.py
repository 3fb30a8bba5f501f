"""labkit: the Perf Casebook's Python side, one folder per side (DESIGN.md, "Layout").

At the top level, what a lab and its files are written against, and the command line:
``record`` (a lab's record.py gets its ``Run``; ``labkit record``), ``steps`` (a step's record),
``heatmap`` (``python -m labkit.heatmap``, a lab step), ``model`` and ``schema.json`` (the result
file), ``results`` (where results are), ``stale`` (which files of a lab folder measure),
``manifest``, ``original``, ``cards`` and ``tomlschema`` with the ``*.schema.json`` (the formats of
a lab's TOML files and of the tool cards' exercises), ``cli`` (``labkit``) and ``newlab``.

The sides: ``parsers/`` (tool outputs to data), ``guest/`` (QEMU guests), ``run/`` (the process
that runs a lab), ``stats/`` (claims and their verdicts), ``view/`` (what a reader sees, on pages
and in a terminal), ``site/`` (what only the site's build uses).
"""

__version__ = "0.1.0"
