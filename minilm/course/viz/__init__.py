"""Pictures and interactive explorers for the notebooks (provided: not an exercise).

One submodule per topic; each plotting function returns its matplotlib Figure (so tests can
inspect the plotted data) and each explorer returns its widgets and figure (so tests can move
a slider and check that the picture changed, with no browser).
"""

from __future__ import annotations

import matplotlib

matplotlib.rcParams.update({
    "figure.dpi": 90,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "legend.frameon": False,
})
