"""Pictures and the RoPE explorer for notebooks/05_rope.ipynb (provided: not an exercise).

Every function that rotates vectors takes `rope_fn` (default: the student's `minilm.rope`), so
the pictures show what *your* RoPE does, and the tests can pass the oracle instead.
"""

from __future__ import annotations

import math

import ipywidgets as widgets
import matplotlib.pyplot as plt
import torch
from matplotlib.figure import Figure

import minilm
from minilm.course.viz import picture


def _rope(rope_fn=None):
    """The rope function to use: rope_fn, else the selected implementation's `rope`."""
    if rope_fn is not None:
        return rope_fn
    # Not `minilm.rope`: once the submodule minilm/rope.py is imported, that name can refer to
    # the module rather than to the function, depending on import order.
    return minilm.exercise_module("rope").rope


def unit_pairs(d_k: int) -> torch.Tensor:
    """A (d_k,) vector whose every pair (x[2i], x[2i+1]) is (1, 0): rotating it shows the angles."""
    x = torch.zeros(d_k)
    x[0::2] = 1.0
    return x


def plot_sinusoidal(num_positions: int = 64, d_model: int = 64, base: float = 10000.0) -> Figure:
    """The clocks of the original Transformer's positions (Vaswani et al. 2017), without its table
    (building PE, one row per position, is Task 13.2): left, sin(p·ω_i) of a few pairs i as waves
    of a continuous position p, ω_i = base^(−2i/d_model); right, every pair's wavelength 2π/ω_i."""
    p = torch.linspace(0, num_positions - 1, 400, dtype=torch.float64)
    pairs = torch.arange(d_model // 2, dtype=torch.float64)
    fig, (ax0, ax1) = plt.subplots(1, 2, figsize=(11, 3.8))
    for i in (0, d_model // 32, d_model // 8, 3 * d_model // 16):
        omega = base ** (-2 * i / d_model)
        ax0.plot(p.numpy(), torch.sin(p * omega).numpy(), label=f"pair {i}: sin(p·{omega:.2g})")
    ax0.set(title="Each pair is a clock: low pairs fast, high pairs slow", xlabel="position p",
            ylabel="sin(p·ω_i), dim 2i")
    # Outside the axes: the fast waves sweep the whole of [−1, 1], so no corner inside is free.
    ax0.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0, fontsize=8)
    ax1.plot(pairs.numpy(), (2 * math.pi * base ** (2 * pairs / d_model)).numpy(), "o-", ms=3)
    ax1.set(yscale="log", title=f"Wavelength of each pair (d_model={d_model})", xlabel="pair index i",
            ylabel="2π / ω_i (positions per turn)")
    fig.tight_layout()
    return fig


def plot_pair_rotation(rope_fn=None, d_k: int = 16, theta: float = 10000.0, num_positions: int = 48,
                       pairs: tuple[int, ...] = (0, 2), first_steps: int = 7) -> Figure:
    """One point per position: pair i of the rotated vector (1, 0, 1, 0, …), colored by position
    and joined in order of position, so each step's turn shows. A fast pair (small i) races around
    the circle; a slow pair (large i) barely moves."""
    rope_fn = _rope(rope_fn)
    positions = torch.arange(num_positions)
    x = unit_pairs(d_k).expand(num_positions, d_k)
    rotated = rope_fn(x, positions, theta=theta)  # (positions, d_k)
    fig, axes = plt.subplots(1, len(pairs), figsize=(5.2 * len(pairs), 4.6), layout="constrained")
    t = torch.linspace(0, 2 * math.pi, 200)
    for ax, i in zip(axes, pairs):
        ax.plot(t.cos().numpy(), t.sin().numpy(), color="0.8", lw=1, zorder=0)
        pts = rotated[:, 2 * i: 2 * i + 2].detach().numpy()
        # The dots joined in order of position: faintly all of them, and the first steps as arrows,
        # so a fast pair's jumps (1 rad: a lap every ~6 positions) read as a sequence, not a scatter.
        ax.plot(pts[:, 0], pts[:, 1], "-", color="0.5", lw=0.6, alpha=0.35, zorder=1)
        omega = theta ** (-2 * i / d_k)
        if omega > 0.3:  # a slow pair's order is plain from the colors; arrows would hide its dots
            for p in range(min(first_steps, num_positions - 1)):
                ax.annotate("", pts[p + 1].tolist(), pts[p].tolist(), zorder=3,
                            arrowprops=dict(arrowstyle="-|>", color="tab:red", lw=1.2, shrinkA=3, shrinkB=3))
        sc = ax.scatter(pts[:, 0], pts[:, 1], c=positions.numpy(), cmap="viridis", s=28, zorder=2)
        for p in range(min(3 if omega > 0.3 else 1, num_positions)):
            out = pts[p] / max(float((pts[p] ** 2).sum()) ** 0.5, 1e-9)  # label just outside the circle
            ax.annotate(f"p = {p}", pts[p].tolist(), textcoords="offset points", fontsize=9, zorder=4,
                        xytext=(22 * out[0] - 12, 14 * out[1] - 4))
        ax.set(title=f"pair {i}: {omega:.3g} rad per position", xlabel=f"x[{2 * i}]", ylabel=f"x[{2 * i + 1}]",
               xlim=(-1.3, 1.3), ylim=(-1.3, 1.3), aspect="equal")
    fig.colorbar(sc, ax=axes, label="position p", fraction=0.04)
    fig.suptitle(f"RoPE rotates each pair by p·ω_i (d_k={d_k}, θ={theta:g}); red arrows: a fast pair's first "
                 f"{first_steps} steps")
    return fig


def measured_frequencies(rope_fn=None, d_k: int = 64, theta: float = 10000.0) -> torch.Tensor:
    """ω_i measured from rope_fn: the angle by which pair i of (1, 0, 1, 0, …) turns at position 1."""
    rotated = _rope(rope_fn)(unit_pairs(d_k)[None], torch.tensor([1]), theta=theta)[0]
    return torch.atan2(rotated[1::2], rotated[0::2]).detach().double()


def plot_frequencies(rope_fn=None, d_k: int = 64, thetas: tuple[float, ...] = (10000.0, 500000.0)) -> Figure:
    """Frequency ω_i and wavelength 2π/ω_i of each pair, measured from rope_fn, against the formula."""
    omegas = [measured_frequencies(rope_fn, d_k, theta) for theta in thetas]  # before the figure: a stub raises here
    fig, (ax0, ax1) = plt.subplots(1, 2, figsize=(11, 3.8))
    i = torch.arange(d_k // 2, dtype=torch.float64).numpy()
    for theta, omega in zip(thetas, omegas):
        (line,) = ax0.plot(i, omega.numpy(), "o", ms=4, label=f"measured, θ={theta:g}")
        ax0.plot(i, theta ** (-2 * i / d_k), "-", color=line.get_color(), lw=1, alpha=0.6,
                 label=f"θ^(−2i/d_k), θ={theta:g}")
        ax1.plot(i, (2 * math.pi / omega).numpy(), "o-", ms=4, color=line.get_color(), label=f"θ={theta:g}")
    ax0.set(yscale="log", title=f"Frequency of each pair (d_k={d_k})", xlabel="pair index i",
            ylabel="ω_i (radians per position)")
    ax1.set(yscale="log", title="Wavelength: positions per full turn", xlabel="pair index i",
            ylabel="2π / ω_i (positions)")
    # The curves fall from the top left; the bottom left stays empty whatever θ.
    ax0.legend(loc="lower left", fontsize=8)
    ax1.legend(loc="upper left")
    fig.tight_layout()
    return fig


def relative_scores(rope_fn, q: torch.Tensor, k: torch.Tensor, positions: torch.Tensor, theta: float = 10000.0
                    ) -> torch.Tensor:
    """S[m, n] = ⟨R_m q, R_n k⟩ for every pair of positions: (len(positions), len(positions))."""
    rope_fn = _rope(rope_fn)
    n = len(positions)
    rq = rope_fn(q.expand(n, -1), positions, theta=theta)  # (n, d_k)
    rk = rope_fn(k.expand(n, -1), positions, theta=theta)
    return rq @ rk.T


def distance_profile(rope_fn, q: torch.Tensor, k: torch.Tensor, max_distance: int, theta: float = 10000.0
                     ) -> torch.Tensor:
    """⟨R_0 q, R_δ k⟩ for δ = 0 … max_distance, batched over the leading dims of q and k: (..., δ)."""
    rope_fn = _rope(rope_fn)
    deltas = torch.arange(max_distance + 1)
    rk = rope_fn(k.unsqueeze(-2).expand(*k.shape[:-1], len(deltas), k.shape[-1]), deltas, theta=theta)
    return (q.unsqueeze(-2) * rk).sum(-1)


def plot_relative_dot(rope_fn=None, d_k: int = 64, theta: float = 10000.0, num_positions: int = 32,
                      max_distance: int = 256, num_samples: int = 256) -> Figure:
    """Left: ⟨R_m q, R_n k⟩ over all (m, n) is constant along diagonals (depends on n − m only).
    Right: for identical q = k, the score decays and oscillates with distance (normalized to 1 at 0)."""
    torch.manual_seed(0)
    q, k = torch.randn(d_k), torch.randn(d_k)
    scores = relative_scores(rope_fn, q, k, torch.arange(num_positions), theta)
    fig, (ax0, ax1) = plt.subplots(1, 2, figsize=(11.5, 4.2), gridspec_kw={"width_ratios": [1, 1.5]})
    scores = scores.detach()
    vmax = scores.abs().max().item()
    im = ax0.imshow(scores.numpy(), cmap="RdBu_r", vmin=-vmax, vmax=vmax)
    ax0.set(title="⟨R_m q, R_n k⟩: constant along diagonals", xlabel="key position n", ylabel="query position m")
    ax0.grid(False)
    fig.colorbar(im, ax=ax0, fraction=0.046)
    qs = torch.randn(num_samples, d_k)
    prof = (distance_profile(rope_fn, qs, qs, max_distance, theta) / d_k).detach().numpy()  # (samples, δ); E|q|² = d_k
    deltas = torch.arange(max_distance + 1).numpy()
    ax1.plot(deltas, prof[0], lw=0.8, alpha=0.7, label="one random q (q = k)")
    ax1.plot(deltas, prof.mean(0), lw=2, label=f"mean over {num_samples} random q")
    ax1.axhline(0, color="0.5", lw=0.8)
    ax1.set(title="q·k for the same vector placed δ positions apart", xlabel="relative distance δ = n − m",
            ylabel="⟨R_m q, R_(m+δ) q⟩ / d_k")
    ax1.legend()
    fig.tight_layout()
    return fig


# ---------------------------------------------------------------- the explorer


class RopeExplorer:
    """Sliders for position, θ and pair index; a picture of that pair rotated on the unit circle
    (with its path over positions 0 … p) and of every pair's angle at position p.

    The sliders sit in one row above the picture, which is shown at its natural size (SIZE, in
    CSS pixels) from a PNG of twice as many pixels (viz/picture.py): about 420 pixels tall in all.

    Attributes: position, theta, pair (the sliders), fig, point (the current pair's marker),
    trail (its path), bars (every pair's angle), image (the rendered PNG), widget (display this).
    """

    SIZE = (900, 378)  # the picture's width and height in CSS pixels

    def __init__(self, rope_fn=None, d_k: int = 16, max_position: int = 64):
        self.rope_fn, self.d_k = rope_fn, d_k
        self.position = widgets.IntSlider(value=5, min=0, max=max_position, description="position p")
        self.theta = widgets.FloatLogSlider(value=10000.0, base=10, min=0, max=6, step=0.1, description="θ")
        self.pair = widgets.IntSlider(value=0, min=0, max=d_k // 2 - 1, description="pair i")
        # A bare Figure (not pyplot): never auto-shown, so nothing leaks into the cell's output.
        self.fig = picture.figure(*self.SIZE, layout="tight")
        self.ax_circle, self.ax_angles = self.fig.subplots(1, 2, gridspec_kw={"width_ratios": [1, 1.3]})
        t = torch.linspace(0, 2 * math.pi, 200)
        self.ax_circle.plot(t.cos().numpy(), t.sin().numpy(), color="0.8", lw=1)
        (self.trail,) = self.ax_circle.plot([], [], ".-", color="tab:blue", alpha=0.35, lw=0.8, label="positions 0 … p")
        self.point = self.ax_circle.scatter([1.0], [0.0], s=90, color="tab:red", zorder=3, label="position p")
        self.ax_circle.set(xlim=(-1.3, 1.3), ylim=(-1.3, 1.3), aspect="equal")
        self.ax_circle.legend(loc="lower left", fontsize=8)
        self.bars = self.ax_angles.bar(range(d_k // 2), [0.0] * (d_k // 2), color="tab:blue")
        self.ax_angles.set(ylim=(0, 2 * math.pi), xlabel="pair index i", ylabel="angle p·ω_i mod 2π (rad)",
                           title="every pair's angle at position p")
        self.image = picture.image(self.fig)
        for w in (self.position, self.theta, self.pair):
            w.observe(lambda _: self.update(), names="value")
        self.widget = widgets.VBox([widgets.HBox([self.position, self.theta, self.pair]), self.image],
                                   layout=widgets.Layout(align_items="flex-start"))
        self.update()

    def rotated(self) -> torch.Tensor:
        """(1, 0, 1, 0, …) rotated at positions 0 … p with the current θ: (p + 1, d_k)."""
        positions = torch.arange(self.position.value + 1)
        x = unit_pairs(self.d_k).expand(len(positions), self.d_k)
        return _rope(self.rope_fn)(x, positions, theta=self.theta.value)

    def update(self) -> None:
        rotated, i, p = self.rotated(), self.pair.value, self.position.value
        path = rotated[:, 2 * i: 2 * i + 2].detach().numpy()
        self.trail.set_data(path[:, 0], path[:, 1])
        self.point.set_offsets(path[-1:])
        angles = (torch.atan2(rotated[-1, 1::2], rotated[-1, 0::2]) % (2 * math.pi)).tolist()
        for j, (bar, a) in enumerate(zip(self.bars, angles)):
            bar.set_height(a)
            bar.set_color("tab:red" if j == i else "tab:blue")
        omega = self.theta.value ** (-2 * i / self.d_k)
        self.ax_circle.set_title(f"pair {i} at p={p}: ω_{i} = {omega:.3g} rad/position")
        self.ax_circle.set(xlabel=f"x[{2 * i}]", ylabel=f"x[{2 * i + 1}]")
        self.image.value = picture.png(self.fig)


def rope_explorer(rope_fn=None, d_k: int = 16) -> RopeExplorer:
    """A RoPE explorer over your rope (or rope_fn); display its `.widget`."""
    return RopeExplorer(rope_fn, d_k)
