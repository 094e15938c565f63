"""What the explorers share: a picture shown at its natural size and drawn at twice it (provided:
not an exercise).

An explorer draws on a bare matplotlib Figure and shows it as the PNG of an ipywidgets Image.
Left to itself, the browser stretches that Image to the cell's width: a 558-pixel map became
1,216 × 1,098 blurred pixels, taller than a laptop's window. Here the Image gets an explicit CSS
size, the figure's (figsize × dpi, in CSS pixels), and the PNG has SCALE times as many pixels in
each direction, so it is sharp on a high-density screen and never resized by the layout.
"""

from __future__ import annotations

import io

import ipywidgets as widgets
from matplotlib.figure import Figure

SCALE = 2  # PNG pixels per CSS pixel


def figure(width: int, height: int, **kwargs) -> Figure:
    """A bare Figure (never auto-shown) of width × height CSS pixels at the course's figure.dpi."""
    fig = Figure(**kwargs)  # figure.dpi from rcParams (minilm/course/viz/__init__.py)
    fig.set_size_inches(width / fig.dpi, height / fig.dpi)
    return fig


def display_size(fig: Figure) -> tuple[int, int]:
    """(width, height) of fig in CSS pixels: its size in inches times its dpi."""
    return round(fig.get_figwidth() * fig.dpi), round(fig.get_figheight() * fig.dpi)


def image(fig: Figure) -> widgets.Image:
    """An empty Image widget sized to show fig at its natural size, wherever it is laid out (its
    aspect kept should a narrow cell squeeze it)."""
    width, height = display_size(fig)
    return widgets.Image(format="png", layout=widgets.Layout(
        width=f"{width}px", height=f"{height}px", flex="0 0 auto", object_fit="contain"))


def png(fig: Figure) -> bytes:
    """fig as a PNG of SCALE × its display size in pixels."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=SCALE * fig.dpi)
    return buf.getvalue()
