"""Helpers and pictures for notebooks/15_inside.ipynb (provided: not an exercise).

Your model's forward returns logits, not attention: your attention_inputs (Task 15.1) catches what
each layer's attention receives, and `model_patterns` recomputes every head's weights from those
with viz.attention.attention_weights (notebook 06's). The scores are your
previous_token_score and induction_score (Task 15.2), the ablations your ablate_heads (Task 15.3).
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import torch
from matplotlib.figure import Figure
from matplotlib.patches import Patch
from torch import nn

import minilm
import minilm.course.viz  # noqa: F401  (the course's shared matplotlib style)
from minilm.course.viz import attention as viz_attention
from minilm.course.viz import training as viz_training


@torch.no_grad()
def model_patterns(model: nn.Module, ids: torch.Tensor) -> torch.Tensor:
    """Every head's attention weights in every layer on ids (..., seq): (layers, ..., heads, seq, seq), each
    layer's recomputed by viz.attention.attention_weights from what your attention_inputs (Task 15.1) caught."""
    return torch.stack([viz_attention.attention_weights(layer.attn, x)
                        for layer, x in zip(model.layers, minilm.attention_inputs(model, ids))])


def repeated_tokens(vocab_size: int, period: int, batch: int = 16, seed: int = 0, avoid: int | None = None
                    ) -> torch.Tensor:
    """(batch, 2·period) ids: `period` random ids drawn uniformly from 0 … vocab_size − 1 (never `avoid`,
    the RARE id), then the same ids again. Nothing in them can be predicted but the repetition."""
    g = torch.Generator().manual_seed(seed)
    first = torch.randint(0, vocab_size - 1 if avoid == vocab_size - 1 else vocab_size, (batch, period), generator=g)
    return torch.cat([first, first], dim=-1)


@torch.no_grad()
def token_losses(model: nn.Module, ids: torch.Tensor) -> torch.Tensor:
    """The loss (nats) of predicting ids[..., t + 1] at each position t: (..., seq − 1)."""
    logits = model(ids)[..., :-1, :]
    log_sum_exp = torch.logsumexp(logits, -1)  # release: not a task (per-token losses; Task 10.1 averages them)
    return log_sum_exp - logits.gather(-1, ids[..., 1:, None])[..., 0]


def plot_head_scores(scores: dict[str, torch.Tensor], title: str = "Head scores of your trained model") -> Figure:
    """One heatmap per score, layer × head, each cell labelled with its value; scores[name] is (layers, heads)."""
    fig, axes = plt.subplots(1, len(scores), figsize=(4.4 * len(scores), 3.2), squeeze=False, layout="constrained")
    for ax, (name, s) in zip(axes.flat, scores.items()):
        s = s.detach().double().numpy()
        im = ax.imshow(s, cmap="Blues", vmin=0, vmax=1, interpolation="nearest")
        for (layer, head), v in np.ndenumerate(s):
            ax.text(head, layer, f"{v:.2f}", ha="center", va="center", fontsize=11,
                    color="white" if v > 0.6 else "black")
        ax.set_xticks(range(s.shape[1]))
        ax.set_yticks(range(s.shape[0]))
        ax.grid(False)
        ax.set(title=name, xlabel="head", ylabel="layer")
    fig.colorbar(im, ax=axes, label="score (0 … 1)", fraction=0.03)
    fig.suptitle(title, fontsize=12)
    return fig


def plot_repeat_losses(losses: torch.Tensor, period: int) -> Figure:
    """The mean loss at each position of the repeated random tokens (losses (batch, 2·period − 1)), the
    second copy shaded: an induction head would make the second copy's tokens cheap to predict."""
    mean = losses.mean(0).numpy()
    fig, ax = plt.subplots(figsize=(8, 3.4))
    ax.axvspan(period - 0.5, len(mean) - 0.5, color="C2", alpha=0.1, label="predicting the second copy")
    ax.plot(np.arange(len(mean)), mean, "o-", ms=3, color="C0", label="your model's loss")
    ax.set(title=f"Loss on {period} random tokens, then the same {period} again (mean over {losses.shape[0]})",
           xlabel="position t (predicting token t + 1)", ylabel="cross-entropy (nats)", ylim=(0, None))
    ax.legend(fontsize=8, loc="lower left")
    fig.tight_layout()
    return fig


def ablation_costs(model: nn.Module, tokens: np.ndarray, context_length: int, max_tokens: int = 4096
                   ) -> tuple[float, torch.Tensor]:
    """(the loss of the whole model on the first max_tokens of `tokens`, (layers, heads) the loss each
    head ablated alone adds to it), each head switched off by your ablate_heads (Task 15.3)."""
    base = viz_training.evaluate(model, tokens, context_length, max_tokens)
    costs = torch.zeros(len(model.layers), model.layers[0].attn.num_heads)
    for i, layer in enumerate(model.layers):
        for h in range(costs.shape[1]):
            handle = minilm.ablate_heads(layer.attn, [h])
            try:
                costs[i, h] = viz_training.evaluate(model, tokens, context_length, max_tokens) - base
            finally:
                handle.remove()
    return base, costs


def plot_ablation_costs(costs: torch.Tensor, base: float, tokens: int) -> Figure:
    """A bar per head: how much the validation loss rises when that head alone is switched off."""
    layers, heads = costs.shape
    fig, ax = plt.subplots(figsize=(8, 3.4))
    x = np.arange(layers * heads)
    ax.bar(x, costs.flatten().numpy(), color=[f"C{i}" for i in range(layers) for _ in range(heads)])
    ax.set_xticks(x, [f"L{i} H{h}" for i in range(layers) for h in range(heads)])
    ax.axhline(0, color="k", lw=0.8)
    ax.set(title=f"What each head is worth: validation loss {base:.3f} nats, {tokens:,} tokens",
           xlabel="head switched off", ylabel="loss increase (nats per token)")
    ax.legend(handles=[Patch(color=f"C{i}", label=f"layer {i}") for i in range(layers)], fontsize=8, loc="upper right")
    fig.tight_layout()
    return fig
