"""What a reader sees of results, wherever they read them: the pages, the terminal of
``labkit show`` and of a running lab, the figures a lab step draws.

``render``: numbers, units, case values, tables, host tabs and escaping; ``charts``: the SVG
charts of measurements (matplotlib) and their cache; ``commands``: a step's command and output
without the paths of the machine that ran it. The site's hooks and macros, the command line, a
run's progress lines (labkit/run/progress.py) and ``python -m labkit.heatmap`` use them; they
use nothing of the site's build.
"""
