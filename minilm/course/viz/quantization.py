"""Pictures and measurements for notebook 12 (int8 quantization).

- state_dict_bytes: what a module's state_dict holds, in bytes.
- relative_error: the RMS error of a quantize-dequantize round trip, relative to the weights' RMS.
- plot_weight_grid: a weight matrix's histogram with the int8 grid over it.
- outlier_errors, plot_outlier_errors: what one large weight does to its row and to the others.

Everything quantizes through the functions it is given (the student's quantize_int8 and
dequantize_int8), so the pictures show the student's code at work.
"""

from __future__ import annotations

from collections.abc import Callable

import matplotlib.pyplot as plt
import numpy as np
import torch
from matplotlib.figure import Figure

import minilm.course.viz  # noqa: F401  (the course's shared matplotlib style)

Quantize = Callable[..., tuple[torch.Tensor, torch.Tensor]]
Dequantize = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


def state_dict_bytes(module: torch.nn.Module) -> int:
    """Bytes of every tensor in module.state_dict(): numel × element size (a saved file adds a little)."""
    return sum(t.numel() * t.element_size() for t in module.state_dict().values())


def relative_error(w: torch.Tensor, quantize: Quantize, dequantize: Dequantize, per_channel: bool = True) -> float:
    """RMS(dequantize(quantize(w)) − w) / RMS(w)."""
    w = w.detach().float()
    back = dequantize(*quantize(w, per_channel=per_channel))
    return ((back - w).pow(2).mean().sqrt() / w.pow(2).mean().sqrt()).item()


def plot_weight_grid(w: torch.Tensor, quantize: Quantize, dequantize: Dequantize, name: str = "weight",
                     zoom_levels: int = 6) -> Figure:
    """(a) The histogram of a weight matrix with the 255 values that int8 per tensor can store
    (−127 … 127 times the scale) drawn over it; (b) the levels around 0, with the weights
    before and after the round trip: every weight snaps to its nearest level."""
    w = w.detach().float()
    q, scale = quantize(w, per_channel=False)
    step = float(scale.reshape(-1)[0])
    back = dequantize(q, scale).reshape(-1).numpy()
    values = w.reshape(-1).numpy()
    fig, (ax, zoom) = plt.subplots(1, 2, figsize=(12, 3.8))
    ax.hist(values, bins=200, color="C0", alpha=0.75, label=f"{name} ({values.size:,} weights)")
    levels = np.arange(-127, 128) * step
    ax.vlines(levels, 0, 1, transform=ax.get_xaxis_transform(), colors="C3", lw=0.3, alpha=0.5,
              label=f"the 255 int8 levels k · scale, scale = max|w| / 127 = {step:.2g}")
    ax.axvline(127 * step, color="C3", ls="--", lw=1, label="±max |w| (±127 · scale)")
    ax.axvline(-127 * step, color="C3", ls="--", lw=1)
    ax.set(title="(a) the weights and the int8 grid (per tensor)", xlabel="weight value", ylabel="count")
    ax.legend(fontsize=8, loc="upper left")
    lo, hi = -(zoom_levels + 0.5) * step, (zoom_levels + 0.5) * step
    inside = (values > lo) & (values < hi)
    zoom.hist(values[inside], bins=np.linspace(lo, hi, 10 * (2 * zoom_levels + 1) + 1), color="C0", alpha=0.6,
              label="before: float weights (bins of scale / 10)")
    zoom.vlines(np.arange(-zoom_levels, zoom_levels + 1) * step, 0, 1, transform=zoom.get_xaxis_transform(),
                colors="C3", lw=0.6, ls=":", label="int8 levels")
    kept, counts = np.unique(back[inside], return_counts=True)
    after = zoom.twinx()
    after.vlines(kept, 0, counts, colors="C3", lw=2.5, label="after: dequantized, weights per level (right axis)")
    # Headroom above the bars and the levels for the legend: the twin axes are drawn after zoom's
    # legend, so without it the red levels crossed the legend.
    after.set(ylabel="weights per level", ylim=(0, counts.max() * 1.45 if counts.size else 1))
    zoom.set(title="(b) around 0: every weight rounds to the nearest level", xlabel="weight value",
             ylabel="count", xlim=(lo, hi), ylim=(0, zoom.get_ylim()[1] * 1.3))
    handles = zoom.get_legend_handles_labels()
    extra = after.get_legend_handles_labels()
    zoom.legend(handles[0] + extra[0], handles[1] + extra[1], fontsize=8, loc="upper left", ncol=2,
                framealpha=0.95)
    fig.tight_layout(w_pad=2)
    return fig


def outlier_errors(w: torch.Tensor, quantize: Quantize, dequantize: Dequantize,
                   sizes=(1, 2, 5, 10, 20, 50, 100), row: int = 0, column: int = 0) -> dict[str, list[float]]:
    """Set w[row, column] to size × max |w[row]| for each size and quantize per channel and per
    tensor: the relative RMS error (as relative_error) of the outlier's row without the outlier
    itself, and of all the other rows."""
    w = w.detach().float()
    out = {"sizes": [float(s) for s in sizes], "per channel, its row": [], "per channel, other rows": [],
           "per tensor, its row": [], "per tensor, other rows": []}
    keep = torch.ones_like(w, dtype=torch.bool)
    keep[row, column] = False
    others = torch.ones(w.shape[0], dtype=torch.bool)
    others[row] = False
    for size in sizes:
        spiked = w.clone()
        spiked[row, column] = size * w[row].abs().max()
        for per_channel, label in ((True, "per channel"), (False, "per tensor")):
            err = dequantize(*quantize(spiked, per_channel=per_channel)) - spiked
            for part, mask in ((f"{label}, its row", keep[row]), (f"{label}, other rows", keep[others])):
                e = err[row][mask] if part.endswith("its row") else err[others]
                ref = spiked[row][mask] if part.endswith("its row") else spiked[others]
                out[part].append((e.pow(2).mean().sqrt() / ref.pow(2).mean().sqrt()).item())
    return out


def plot_outlier_errors(result: dict[str, list[float]], name: str = "weight") -> Figure:
    """Relative RMS error against the outlier's size (log-log), per channel and per tensor."""
    fig, ax = plt.subplots(figsize=(8, 3.8))
    styles = {"per channel, its row": ("C0", "-", "o"), "per channel, other rows": ("C0", ":", "s"),
              "per tensor, its row": ("C3", "-", "o"), "per tensor, other rows": ("C3", ":", "s")}
    for label, (color, ls, marker) in styles.items():
        ax.plot(result["sizes"], result[label], color=color, ls=ls, marker=marker, ms=4, label=label)
    ax.set(xscale="log", yscale="log", title=f"One outlier in row 0 of {name}: the error of everything else",
           xlabel="outlier size (× the row's largest |w| before)", ylabel="relative RMS error of the other weights")
    ax.legend(fontsize=8, loc="upper left")
    fig.tight_layout()
    return fig
