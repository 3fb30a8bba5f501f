"""matplotlib for the project's figures: the site's charts (``labkit.view.charts``) and the
figures a lab draws during its run (``labkit.heatmap``), with one set of SVG settings."""

from __future__ import annotations

_RC = {
    "svg.fonttype": "none",       # text stays text: smaller files, searchable labels
    "svg.hashsalt": "perf-casebook",  # stable ids: the same data gives the same SVG
    "font.size": 10,
    "font.family": "sans-serif",
    "axes.spines.top": False,
    "axes.spines.right": False,
}

_PLT = None


def pyplot():
    """``matplotlib.pyplot`` on the Agg backend with the project's SVG settings (text as
    text, stable ids, sans-serif, no top and right spines), imported on the first call: a
    build whose charts all come from the cache never loads matplotlib (2 s of a build)."""
    global _PLT
    if _PLT is None:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        plt.rcParams.update(_RC)
        _PLT = plt
    return _PLT
