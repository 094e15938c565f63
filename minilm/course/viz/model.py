"""Pictures and tables for notebooks 07 (the Transformer block) and 08 (the language model).

The functions take the student's modules as arguments (so the notebook decides whose code
runs), draw with matplotlib and return the Figure; the notebook cell ends with plt.show().
The FLOPs accounting is plain integer arithmetic, so its table is deterministic.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

import matplotlib.pyplot as plt
import torch
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter
from torch import nn

import minilm.course.viz  # noqa: F401  (the course's shared matplotlib style)

Tensor = torch.Tensor


# ---------------------------------------------------------------- 07: pre-norm vs post-norm


class _WritesNothing(nn.Module):
    """A stand-in sublayer whose edit is zero: it returns zeros shaped like its input."""

    def forward(self, x: Tensor, *args, **kwargs) -> Tensor:
        return torch.zeros_like(x)


@contextmanager
def _swapped(block: nn.Module, **stand_ins: nn.Module) -> Iterator[nn.Module]:
    """`block` with some submodules replaced by stand-ins for the duration, then restored."""
    saved = {name: getattr(block, name) for name in stand_ins}
    try:
        for name, module in stand_ins.items():
            setattr(block, name, module)
        yield block
    finally:
        for name, module in saved.items():
            setattr(block, name, module)


def post_norm(block: nn.Module) -> Callable[[Tensor], Tensor]:
    """The original Transformer's ordering built from `block`'s own weights and its own forward:
    same sublayers, only the norms move from the sublayers' inputs onto the residual stream.

    It never writes the block's wiring out: it runs `block` itself with its two norms replaced by
    the identity and one sublayer by a zero edit, which leaves one residual step of your forward
    (attention's, then the FFN's), and applies the block's own ln1 and ln2 to the stream after
    each step."""
    identity = dict(ln1=nn.Identity(), ln2=nn.Identity())

    def forward(x: Tensor) -> Tensor:
        with _swapped(block, **identity, ffn=_WritesNothing()):
            x = block(x)  # the attention step alone, without its norm
        x = block.ln1(x)
        with _swapped(block, **identity, attn=_WritesNothing()):
            x = block(x)  # the FFN step alone, without its norm
        return block.ln2(x)

    return forward


@dataclass
class ResidualStats:
    """Per-layer statistics of the residual stream; index 0 is the input x_0, index l is x_l."""

    rms: list[float]  # mean over tokens of RMS(x_l) = sqrt(mean_i x_l[i]²)
    carried: list[float]  # mean over tokens of <x_l, x_0> / <x_0, x_0>: how much of x_0 is still in x_l


def residual_stream(layer: Callable[[Tensor], Tensor], x0: Tensor, num_layers: int) -> ResidualStats:
    """Apply `layer` num_layers times to x0 (batch, seq, d_model) and record the stream's
    RMS and the coefficient of x0 left in it after each application."""
    rms, carried = [], []
    x = x0
    with torch.no_grad():
        for depth in range(num_layers + 1):
            if depth:
                x = layer(x)
            rms.append(x.pow(2).mean(-1).sqrt().mean().item())
            carried.append(((x * x0).sum(-1) / (x0 * x0).sum(-1)).mean().item())
    return ResidualStats(rms, carried)


def prenorm_vs_postnorm(block: nn.Module, num_layers: int = 12, batch: int = 2, seq: int = 16,
                        seed: int = 0) -> dict[str, ResidualStats]:
    """Run the same input through num_layers copies of `block` (shared weights) in the pre-norm
    ordering (the block itself) and in the post-norm ordering (post_norm(block))."""
    g = torch.Generator().manual_seed(seed)
    x0 = torch.randn(batch, seq, block.d_model, generator=g)  # (batch, seq, d_model), RMS ≈ 1 like embeddings
    return {"pre-norm": residual_stream(block, x0, num_layers),
            "post-norm": residual_stream(post_norm(block), x0, num_layers)}


def residual_verdicts(stats: dict[str, ResidualStats]) -> list[str]:
    """Robust one-line conclusions about the two stacks (no raw values, thresholds far from the data)."""
    pre, post = stats["pre-norm"], stats["post-norm"]
    n = len(pre.rms) - 1
    return [
        f"pre-norm: residual RMS grows with depth (layer {n} > 3 × layer 0): {pre.rms[-1] > 3 * pre.rms[0]}",
        f"post-norm: residual RMS ≈ 1 after every block: {all(abs(r - 1) < 0.05 for r in post.rms[1:])}",
        f"pre-norm: x_0 still rides in the stream at layer {n} (coefficient > 0.2): {pre.carried[-1] > 0.2}",
        f"post-norm: x_0 has washed out by layer {n} (|coefficient| < 0.2): {abs(post.carried[-1]) < 0.2}",
    ]


def plot_residual_stream(stats: dict[str, ResidualStats]) -> Figure:
    """Two panels per layer: the residual stream's RMS, and how much of the input x_0 it still carries."""
    fig, (ax_rms, ax_carry) = plt.subplots(1, 2, figsize=(10, 3.8))
    for (name, s), color in zip(stats.items(), ("C0", "C3")):
        layers = range(len(s.rms))
        ax_rms.plot(layers, s.rms, "o-", ms=3, color=color, label=name)
        ax_carry.plot(layers, s.carried, "o-", ms=3, color=color, label=name)
    ax_rms.set(title="Residual-stream size through the stack", xlabel="layer $l$ (0 = input)",
               ylabel="mean RMS of $x_l$")
    ax_carry.axhline(0, color="k", lw=0.8)
    ax_carry.set(title="How much of the input $x_0$ is still in $x_l$", xlabel="layer $l$ (0 = input)",
                 ylabel=r"$\langle x_l, x_0\rangle \,/\, \langle x_0, x_0\rangle$")
    ax_rms.legend()
    ax_carry.legend()
    fig.suptitle("Same block weights, same input: pre-norm (x + f(ln(x))) vs post-norm (ln(x + f(x)))", fontsize=10)
    fig.tight_layout()
    return fig


# ---------------------------------------------------------------- 08: parameters


PARAMETER_GROUPS = ("token_embeddings", "attention", "FFN (SwiGLU)", "norms", "lm_head")


def parameter_group(name: str) -> str:
    """The component a TransformerLM parameter (by its state_dict name) belongs to."""
    if name.startswith("token_embeddings."):
        return "token_embeddings"
    if name.startswith("lm_head."):
        return "lm_head"
    if ".attn." in name:
        return "attention"
    if ".ffn." in name:
        return "FFN (SwiGLU)"
    if ".ln1." in name or ".ln2." in name or name.startswith("ln_final."):
        return "norms"
    raise ValueError(f"parameter {name!r} is not part of the TransformerLM contract")


def parameter_breakdown(model: nn.Module) -> dict[str, int]:
    """Number of parameters per component, in PARAMETER_GROUPS order."""
    counts = dict.fromkeys(PARAMETER_GROUPS, 0)
    for name, p in model.named_parameters():
        counts[parameter_group(name)] += p.numel()
    return counts


def plot_parameter_breakdown(model: nn.Module) -> Figure:
    """Horizontal bars: parameters per component, labelled with the count and the share."""
    counts = parameter_breakdown(model)
    total = sum(counts.values())
    names = list(counts)[::-1]  # first group on top
    fig, ax = plt.subplots(figsize=(8, 3.4))
    bars = ax.barh(names, [counts[n] for n in names], color=[f"C{i}" for i in range(len(names))][::-1])
    for bar, n in zip(bars, names):
        share = 100 * counts[n] / total
        ax.text(bar.get_width(), bar.get_y() + bar.get_height() / 2,
                f"  {counts[n]:,} ({share:.2f}%)" if share < 0.1 else f"  {counts[n]:,} ({share:.1f}%)",
                va="center", fontsize=9)
    ax.set_xlim(0, 1.35 * max(counts.values()))
    ax.set(title=f"Where the {total:,} parameters live", xlabel="parameters", ylabel="component")
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v / 1e6:g}M"))
    fig.tight_layout()
    return fig


# ---------------------------------------------------------------- 08: FLOPs per token


def flops_per_token(vocab_size: int, context_length: int, d_model: int, num_layers: int, d_ff: int
                    ) -> list[tuple[str, int]]:
    """Forward FLOPs per token by component (a multiply-add counts 2), Chinchilla-style
    (Hoffmann et al. 2022, appendix F): matmuls only; norms, softmax, RoPE and SiLU are ignored.
    Attention counts the full context (n_ctx keys per query), as Kaplan et al. do."""
    d, n_ctx = d_model, context_length
    qkvo = 2 * 4 * d * d  # four d×d projections
    scores = 2 * 2 * n_ctx * d  # q·kᵀ over n_ctx keys, then the weighted sum of n_ctx values
    ffn = 2 * 3 * d * d_ff  # w1, w3: d → d_ff; w2: d_ff → d
    layer = qkvo + scores + ffn
    head = 2 * d * vocab_size
    forward = num_layers * layer + head
    return [
        ("embedding lookup", 0),
        ("per layer: q/k/v/o projections", qkvo),
        ("per layer: attention scores + sum", scores),
        ("per layer: SwiGLU", ffn),
        ("per layer: total", layer),
        (f"all {num_layers} layers", num_layers * layer),
        ("lm_head", head),
        ("forward", forward),
        ("backward (≈ 2 × forward)", 2 * forward),
        ("training step (forward + backward)", 3 * forward),
    ]


def flops_table(rows: Sequence[tuple[str, int]]) -> str:
    """Fixed-width text table of (component, FLOPs) with each row's share of the forward pass."""
    forward = dict(rows)["forward"]
    width = max(len(name) for name, _ in rows)
    lines = [f"{'component':<{width}}  {'FLOPs/token':>13}  {'% of fwd':>8}", "-" * (width + 25)]
    for name, flops in rows:
        lines.append(f"{name:<{width}}  {flops:>13,}  {100 * flops / forward:>7.1f}%")
    return "\n".join(lines)


def plot_flops_vs_context(vocab_size: int, d_model: int, num_layers: int, d_ff: int,
                          contexts: Sequence[int] = (128, 256, 512, 1024, 2048, 4096, 8192)) -> Figure:
    """Stacked bars: forward FLOPs per token by component as the context grows. Only the
    attention-scores term depends on n_ctx; the 2N part stays put."""
    parts = {"q/k/v/o projections": [], "attention scores + sum": [], "SwiGLU": [], "lm_head": []}
    for n_ctx in contexts:
        f = dict(flops_per_token(vocab_size, n_ctx, d_model, num_layers, d_ff))
        parts["q/k/v/o projections"].append(num_layers * f["per layer: q/k/v/o projections"])
        parts["attention scores + sum"].append(num_layers * f["per layer: attention scores + sum"])
        parts["SwiGLU"].append(num_layers * f["per layer: SwiGLU"])
        parts["lm_head"].append(f["lm_head"])
    fig, ax = plt.subplots(figsize=(8, 3.8))
    labels = [str(n) for n in contexts]
    bottom = [0] * len(contexts)
    for i, (name, values) in enumerate(parts.items()):
        ax.bar(labels, [v / 1e6 for v in values], bottom=[b / 1e6 for b in bottom], color=f"C{i}", label=name)
        bottom = [b + v for b, v in zip(bottom, values)]
    ax.set(title=f"Forward FLOPs per token vs context length (d_model {d_model}, {num_layers} layers)",
           xlabel="context length n_ctx", ylabel="MFLOPs per token")
    ax.legend(fontsize=8, loc="upper left")
    fig.tight_layout()
    return fig
