"""Pictures for the building-block notebooks 01–04: Linear, Embedding, RMSNorm, SwiGLU.

Every function takes the student's code as an argument (so the notebook decides whose code
runs), draws with matplotlib and returns the Figure; the notebook cell ends with plt.show().
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence

import matplotlib.pyplot as plt
import torch
import torch.nn.functional as F
from matplotlib.figure import Figure

import minilm.course.viz  # noqa: F401  (the course's shared matplotlib style)

Tensor = torch.Tensor


def _no_figure_on_error(plot):
    """Close the figures `plot` opened if it raises (e.g. a student's stub), so that an empty
    figure does not show up under the cell's one-line not-implemented message."""

    @functools.wraps(plot)
    def wrapper(*args, **kwargs):
        before = set(plt.get_fignums())
        try:
            return plot(*args, **kwargs)
        except BaseException:
            for num in set(plt.get_fignums()) - before:
                plt.close(num)
            raise

    return wrapper


# ---------------------------------------------------------------- initialization (01, 02)


def truncated_normal_pdf(x: Tensor, std: float, cut: float = 3.0) -> Tensor:
    """Density of N(0, std²) restricted to [-cut·std, cut·std] and renormalized to integrate to 1."""
    z = x / std
    normal = torch.exp(-0.5 * z**2) / (std * math.sqrt(2 * math.pi))
    mass = math.erf(cut / math.sqrt(2))  # P(|Z| ≤ cut) for a standard normal
    return torch.where(z.abs() <= cut, normal / mass, torch.zeros_like(x))


@_no_figure_on_error
def plot_init_histogram(weight: Tensor, std: float, title: str, cut: float = 3.0, bins: int = 80) -> Figure:
    """Histogram of `weight`'s entries against the truncated-normal density they should follow,
    with the ±cut·std lines where the truncation clips the tails."""
    w = weight.detach().flatten().double()
    fig, ax = plt.subplots(figsize=(7, 3.6))
    lim = 1.15 * cut * std
    ax.hist(w.numpy(), bins=bins, range=(-lim, lim), density=True, alpha=0.55, color="C0",
            label=f"weights ({w.numel():,} entries)")
    xs = torch.linspace(-lim, lim, 801, dtype=torch.float64)
    ax.plot(xs.numpy(), truncated_normal_pdf(xs, std, cut).numpy(), color="C3", lw=2,
            label=f"truncated normal, σ = {std:.3g}")
    untruncated = torch.exp(-0.5 * (xs / std) ** 2) / (std * math.sqrt(2 * math.pi))
    ax.plot(xs.numpy(), untruncated.numpy(), color="C3", lw=1, ls=":", label="untruncated normal")
    for sign in (-1, 1):
        ax.axvline(sign * cut * std, color="k", ls="--", lw=1, label=f"±{cut:g}σ cut" if sign > 0 else None)
    ax.set(title=title, xlabel="weight value", ylabel="density")
    ax.legend(loc="upper right", fontsize=8)
    fig.tight_layout()
    return fig


def activation_scales(layers: Sequence[Callable[[Tensor], Tensor]], x: Tensor) -> list[float]:
    """The standard deviation of x, then of the activations after each layer in turn."""
    stds = [x.std().item()]
    with torch.no_grad():
        for layer in layers:
            x = layer(x)
            stds.append(x.std().item())
    return stds


@_no_figure_on_error
def plot_activation_scale(make_linear: Callable[[int, int], torch.nn.Module], d: int = 128, n_layers: int = 10,
                          gains: Sequence[float] = (0.5, 1.0, 2.0), batch: int = 64) -> Figure:
    """Push a batch through a stack of `n_layers` square layers built by `make_linear(d, d)`, with
    their weights multiplied by each gain: gain 1 is the layer's own init, the others show what a
    std that is off by that factor does to the activations' scale after many layers."""
    torch.manual_seed(0)
    x = torch.randn(batch, d)
    fig, ax = plt.subplots(figsize=(7, 3.6))
    for i, gain in enumerate(gains):
        layers = [make_linear(d, d) for _ in range(n_layers)]
        with torch.no_grad():
            for layer in layers:
                layer.weight.mul_(gain)
        label = "σ = √(2/(d_in+d_out))  (your init)" if gain == 1 else f"σ × {gain:g}"
        ax.plot(range(n_layers + 1), activation_scales(layers, x), marker="o", ms=3, color=f"C{i}", label=label)
    ax.set_yscale("log")
    ax.set(title=f"Activation scale through {n_layers} linear layers (d = {d})",
           xlabel="layer", ylabel="std of activations (log scale)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


# ---------------------------------------------------------------- embedding (02)


@_no_figure_on_error
def plot_one_hot_lookup(token_ids: Tensor, weight: Tensor, embed: Callable[[Tensor, Tensor], Tensor],
                        labels: Sequence[str] | None = None) -> Figure:
    """Three panels: one_hot(ids) (T, V) @ W (V, d) = embed(ids, W) (T, d): a lookup is a matrix
    product with a one-hot matrix, which only picks rows."""
    ids = token_ids.flatten()
    one_hot = F.one_hot(ids, weight.shape[0]).to(weight.dtype)  # (T, V)
    looked_up = embed(ids, weight).detach()  # (T, d)
    labels = list(labels) if labels is not None else [str(int(i)) for i in ids]
    vmax = weight.detach().abs().max().item()
    fig, axes = plt.subplots(1, 3, figsize=(10, 3.4), width_ratios=[weight.shape[0], weight.shape[1], weight.shape[1]])
    panels = [(one_hot, f"one_hot(ids)  ({len(ids)}, {weight.shape[0]})", "Greys", 0, 1),
              (weight.detach(), f"W  {tuple(weight.shape)}", "RdBu_r", -vmax, vmax),
              (looked_up, f"embedding(ids, W)  {tuple(looked_up.shape)}", "RdBu_r", -vmax, vmax)]
    for ax, (data, title, cmap, lo, hi) in zip(axes, panels):
        ax.imshow(data.numpy(), cmap=cmap, vmin=lo, vmax=hi, aspect="auto", interpolation="nearest")
        ax.set_title(title, fontsize=9)
        ax.grid(False)
    axes[0].set(xlabel="token id (vocabulary)", ylabel="position in the sequence")
    axes[0].set_yticks(range(len(ids)), labels)
    axes[1].set(xlabel="embedding dim", ylabel="token id (row of W)")
    axes[2].set(xlabel="embedding dim")
    axes[2].set_yticks(range(len(ids)), labels)
    fig.suptitle("An embedding lookup is one_hot(ids) @ W: it picks rows of W", fontsize=11)
    fig.tight_layout()
    return fig


# ---------------------------------------------------------------- RMSNorm (03)


def layer_norm(x: Tensor, eps: float = 1e-5) -> Tensor:
    """LayerNorm without gain and bias, for contrast: (x - mean) / sqrt(var + eps) over the last dim."""
    return F.layer_norm(x, (x.shape[-1],), eps=eps)  # release: not a task (LayerNorm, the contrast to RMSNorm)


@_no_figure_on_error
def plot_rmsnorm_vs_layernorm(rms_norm: Callable[[Tensor, Tensor], Tensor], n_points: int = 40,
                              offset: tuple[float, float] = (1.6, 1.2)) -> Figure:
    """Three panels comparing rms_norm (gain 1) with LayerNorm:
    (a) in 2-D: RMSNorm puts every input on the circle of radius √d around the origin, keeping its
        direction; LayerNorm first subtracts the mean, which in 2-D leaves only ±(1, −1);
    (b) one 16-dim vector with an offset: LayerNorm removes the offset, RMSNorm keeps it, and
        RMSNorm(100·x) = RMSNorm(x);
    (c) scale invariance: the output's RMS against the input's scale α (it holds until
        α²·mean(x²) approaches eps)."""
    torch.manual_seed(0)
    fig, (ax_geo, ax_vec, ax_scale) = plt.subplots(1, 3, figsize=(13, 5.0), width_ratios=[1, 1.25, 1.1])

    # (a) the 2-D picture
    x2 = torch.randn(n_points, 2) * 0.7 + torch.tensor(offset)
    r2, l2 = rms_norm(x2, torch.ones(2)).detach(), layer_norm(x2)
    t = torch.linspace(0, 2 * math.pi, 200)
    ax_geo.plot(math.sqrt(2) * torch.cos(t), math.sqrt(2) * torch.sin(t), color="C0", lw=1, ls="--",
                label="circle of radius √d (RMSNorm's outputs)")
    ax_geo.plot([-2, 2], [2, -2], color="C1", lw=1, ls="--", label="mean-zero line x₁ + x₂ = 0")
    ax_geo.scatter(x2[:, 0], x2[:, 1], s=12, color="0.5", label="inputs x")
    for a, b in zip(x2[:8], r2[:8]):
        ax_geo.annotate("", xy=b.tolist(), xytext=a.tolist(), arrowprops=dict(arrowstyle="->", color="C0", lw=0.7))
    ax_geo.scatter(r2[:, 0], r2[:, 1], s=14, color="C0", label="RMSNorm(x)", zorder=3)
    ax_geo.scatter(l2[:, 0], l2[:, 1], s=60, color="C1", marker="x", label="LayerNorm(x): only ±(1, −1)", zorder=3)
    ax_geo.set_aspect("equal")
    ax_geo.set(xlim=(-2.2, 3.6), ylim=(-2.2, 3.6), xlabel="x₁", ylabel="x₂",
               title="(a) d = 2: where each norm sends x")
    ax_geo.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.15), ncol=2)

    # (b) one vector with an offset
    d = 16
    x = torch.randn(d) + 2.0
    idx = torch.arange(d)
    ax_vec.bar(idx.numpy(), x.numpy(), color="0.8", label=f"x (mean {x.mean():.1f})")
    ax_vec.plot(idx, layer_norm(x), "s-", color="C1", ms=4, lw=1, label="LayerNorm(x): mean 0, std 1")
    ax_vec.plot(idx, rms_norm(x, torch.ones(d)).detach(), "o-", color="C0", ms=5, lw=1, label="RMSNorm(x): RMS 1")
    ax_vec.plot(idx, rms_norm(100 * x, torch.ones(d)).detach(), "x", color="k", ms=7, label="RMSNorm(100·x)")
    ax_vec.axhline(0, color="k", lw=0.5)
    ax_vec.set(xlabel="component i", ylabel="value", title="(b) a 16-dim vector with an offset")
    ax_vec.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.15), ncol=2)

    # (c) scale invariance, and where eps breaks it
    alphas = torch.logspace(-5, 3, 81)
    x = torch.randn(64)
    x = x / x.pow(2).mean().sqrt()  # RMS 1, so α is the input's RMS
    rms_out = [rms_norm(a * x, torch.ones(64)).detach().pow(2).mean().sqrt().item() for a in alphas]
    ax_scale.semilogx(alphas, rms_out, color="C0", lw=2, label="RMS of RMSNorm(α·x)")
    ax_scale.axvline(math.sqrt(1e-5), color="k", ls="--", lw=1, label="α² = eps = 1e-5")
    ax_scale.set(ylim=(0, 1.2), xlabel="input scale α (RMS of the input)", ylabel="RMS of the output",
                 title="(c) scale invariance, until eps")
    ax_scale.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.15))

    fig.tight_layout()
    return fig


# ---------------------------------------------------------------- SwiGLU (04)


def _derivative(fn: Callable[[Tensor], Tensor], x: Tensor) -> Tensor:
    x = x.detach().clone().requires_grad_(True)
    (grad,) = torch.autograd.grad(fn(x).sum(), x)
    return grad.detach()


@_no_figure_on_error
# F.silu: the curve shown before Task 4.1, not an answer to it.
def plot_activations(silu: Callable[[Tensor], Tensor] = F.silu, lo: float = -5.0,  # release: not a task (see above)
                     hi: float = 5.0) -> Figure:
    """ReLU (original Transformer), GELU (GPT-2/BERT) and SiLU (LLaMA, with SwiGLU): the curves and
    their derivatives (by autograd). `silu` is the SiLU to draw, e.g. the student's minilm.silu."""
    x = torch.linspace(lo, hi, 501)
    curves = {"ReLU(x) = max(0, x)": F.relu, "GELU(x) = x·Φ(x)": F.gelu,  # release: not a task (GELU, for contrast)
              "SiLU(x) = x·σ(x)": silu}
    fig, (ax, ax_d) = plt.subplots(1, 2, figsize=(11, 3.8))
    for i, (name, fn) in enumerate(curves.items()):
        ax.plot(x, fn(x).detach(), color=f"C{i}", lw=2, label=name)
        ax_d.plot(x, _derivative(fn, x), color=f"C{i}", lw=2, label=name.split("(")[0] + "′(x)")
    ax.set(title="Activation functions", xlabel="x", ylabel="f(x)", ylim=(-1, hi))
    ax_d.set(title="Their derivatives", xlabel="x", ylabel="f′(x)", ylim=(-0.2, 1.2))
    for a in (ax, ax_d):
        a.axhline(0, color="k", lw=0.5)
        a.axvline(0, color="k", lw=0.5)
        a.legend(fontsize=8, loc="upper left")
    fig.tight_layout()
    return fig


@_no_figure_on_error
def plot_swiglu_gate(silu: Callable[[Tensor], Tensor], lim: float = 4.0, n: int = 201) -> Figure:
    """The SwiGLU unit h = SiLU(a)·b over the plane of its two inputs a = (W1 x)_j (the gate) and
    b = (W3 x)_j (the value), next to slices at fixed a: the gate scales the value linearly, by
    ≈0 for a ≪ 0 and by ≈a for a ≫ 0."""
    a = torch.linspace(-lim, lim, n)
    b = torch.linspace(-lim, lim, n)
    A, B = torch.meshgrid(a, b, indexing="xy")  # A varies along columns (x axis), B along rows
    H = (silu(A) * B).detach()
    fig, (ax, ax_s) = plt.subplots(1, 2, figsize=(11, 4.2), width_ratios=[1.1, 1])
    vmax = H.abs().max().item()
    im = ax.imshow(H.numpy(), origin="lower", extent=(-lim, lim, -lim, lim), cmap="RdBu_r", vmin=-vmax, vmax=vmax,
                   aspect="equal")
    ax.contour(a.numpy(), b.numpy(), H.numpy(), levels=[-8, -4, -2, -1, 1, 2, 4, 8], colors="k", linewidths=0.5)
    ax.grid(False)
    fig.colorbar(im, ax=ax, label="h = SiLU(a)·b")
    ax.set(title="SwiGLU unit: h = SiLU(a)·b", xlabel="gate input a = (W1 x)ⱼ", ylabel="value b = (W3 x)ⱼ")
    for i, a0 in enumerate((-3.0, -1.0, 0.5, 1.0, 3.0)):
        gate = silu(torch.tensor(a0)).item()
        ax_s.plot(b, (silu(torch.full_like(b, a0)) * b).detach(), color=plt.cm.viridis(i / 4), lw=2,
                  label=f"a = {a0:g}: slope SiLU(a) = {gate:.2f}")
    ax_s.set(title="Slices at fixed gate input a", xlabel="value b", ylabel="h")
    ax_s.legend(fontsize=8)
    fig.tight_layout()
    return fig


def ffn_parameter_counts(d_model: int) -> dict[str, int]:
    """Weights of a 4·d_model ReLU/GELU FFN (two matrices, no biases) and of SwiGLU with
    d_ff = 8/3·d_model rounded up to a multiple of 64 (three matrices)."""
    d_ff_swiglu = 64 * math.ceil(8 * d_model / 3 / 64)
    return {"relu_d_ff": 4 * d_model, "relu_params": 2 * d_model * 4 * d_model,
            "swiglu_d_ff": d_ff_swiglu, "swiglu_params": 3 * d_model * d_ff_swiglu}
