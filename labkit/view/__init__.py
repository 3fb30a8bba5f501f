"""What a reader sees of results: the pages, and the terminal of the reader's own commands
(``labkit show``, ``hosts``, ``compare``, ``check``).

``render``: tables, host tabs, escaping and the emulated-CPU badge (numbers, units and case
values as ``labkit.formats`` writes them); ``charts``: the SVG charts of measurements
(matplotlib as ``labkit.plot`` sets it up) and their cache; ``commands``: a step's command and
output without the paths of the machine that ran it. The site's hooks and macros and those
commands use them; no lab run does (``tests/test_faults.py``), so a change here leaves the
fault matrix's record as it is. They use nothing of the site's build.
"""
