"""Notebook 02's first language model: a bigram table over Tiny Shakespeare's characters.

The model is the student's Embedding (Task 2.2) with one row per character and one column per
character: row a holds the logits of the character that follows a. Embedding a character id
*is* predicting the next one.

The training loop here is provided code, not a task. It calls PyTorch's own cross-entropy and
Adam, which the from-scratch rules forbid only in the student's code (Tasks 10.1 and 10.4 have
students write them for the Transformer): nothing here is a task's answer.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import matplotlib.pyplot as plt
import numpy as np
import torch
import torch.nn.functional as F
from matplotlib.figure import Figure
from torch import nn

import minilm.course.viz  # noqa: F401  (the course's shared matplotlib style)
from minilm.course import corpus

Tensor = torch.Tensor


@dataclass(frozen=True)
class CharText:
    """A text as character ids: chars[i] is the character with id i (sorted), ids the whole text."""

    chars: str
    ids: Tensor  # (n,) int64

    @property
    def vocab_size(self) -> int:
        return len(self.chars)

    def decode(self, ids) -> str:
        return "".join(self.chars[int(i)] for i in ids)


def char_text(text: str) -> CharText:
    """`text` as ids over its own sorted characters."""
    chars = "".join(sorted(set(text)))
    lookup = {c: i for i, c in enumerate(chars)}
    return CharText(chars, torch.tensor([lookup[c] for c in text], dtype=torch.long))


def shakespeare_chars() -> CharText:
    """Tiny Shakespeare (corpus.download_tinyshakespeare: downloaded once, or MINILM_TINYSHAKESPEARE's
    local copy) as ids over its 65 characters."""
    return char_text(corpus.download_tinyshakespeare().read_text(encoding="utf-8"))


def pair_counts(data: CharText) -> Tensor:
    """counts[a, b]: how often character b follows character a in the text, (V, V) float64."""
    v = data.vocab_size
    return torch.bincount(data.ids[:-1] * v + data.ids[1:], minlength=v * v).reshape(v, v).double()


def bigram_floor(counts: Tensor) -> float:
    """The lowest average loss (nats per character) any bigram table reaches on the text the counts
    are from: its conditional entropy H(next | current), reached by the table log(counts[a, b] / row a's total)."""
    p = counts / counts.sum(-1, keepdim=True).clamp_min(1)
    return float(-(counts * torch.where(counts > 0, p.log(), 0.0)).sum() / counts.sum())


def table_loss(table: nn.Module, counts: Tensor) -> float:
    """The average cross-entropy of `table` over every pair the counts hold: the loss on the whole text."""
    with torch.no_grad():
        logits = table(torch.arange(counts.shape[0])).double()  # (V, V): row a = the logits after a
    log_p = torch.log_softmax(logits, -1)  # release: not a task (the loss of notebook 02's bigram table, provided)
    return float(-(counts * log_p).sum() / counts.sum())


def train_bigram(table: nn.Module, data: CharText, steps: int = 300, batch_size: int = 1024, lr: float = 0.1,
                 seed: int = 0) -> list[float]:
    """Train `table` (ids → next-character logits) on random pairs (data.ids[i], data.ids[i + 1]) with
    Adam, and return the loss of every step's batch. The batches depend on the seed only."""
    g = torch.Generator().manual_seed(seed)
    # Notebook 02's provided run: Task 10.4 is AdamW, written in notebook 10.
    opt = torch.optim.Adam(table.parameters(), lr=lr)  # release: not a task (a provided loop)

    def batch(step: int):
        i = torch.randint(0, len(data.ids) - 1, (batch_size,), generator=g)
        return data.ids[i], data.ids[i + 1]

    def loss_of(current, following):
        return F.cross_entropy(table(current), following)  # release: not a task (notebook 02's provided loop)

    losses = []
    for step in range(steps):  # notebook 02's own loop: the student writes the course's in Task 10.6
        loss = loss_of(*batch(step))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def sample_bigram(table: nn.Module, data: CharText, length: int = 300, start: str = "\n", seed: int = 0) -> str:
    """`length` characters drawn one at a time from the table's next-character distribution, after `start`."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        logits = table(torch.arange(data.vocab_size)).double()
        probs = torch.softmax(logits, -1)  # release: not a task (sampling the bigram)
    ids = [data.chars.index(start)]
    for _ in range(length):
        ids.append(int(torch.multinomial(probs[ids[-1]], 1, generator=g)))
    return data.decode(ids[1:])


def plot_bigram_losses(losses: list[float], vocab_size: int, floor: float, initial: float | None = None) -> Figure:
    """The loss of every training step, against the uniform guess ln V and the best bigram table."""
    fig, ax = plt.subplots(figsize=(8, 3.6))
    steps = np.arange(1, len(losses) + 1)
    ax.plot(steps, losses, color="C0", lw=1.2, label="training loss (a batch of pairs)")
    ax.axhline(math.log(vocab_size), color="C1", ls="--", lw=1,
               label=f"uniform guess: ln {vocab_size} = {math.log(vocab_size):.2f}")
    ax.axhline(floor, color="C2", ls=":", lw=1.5, label=f"best bigram table (from the counts): {floor:.2f}")
    if initial is not None:
        ax.plot([0], [initial], "o", color="C3", label="the untrained table, on the whole text")
    ax.set(title="A bigram model on Tiny Shakespeare's characters", xlabel="training step",
           ylabel="cross-entropy (nats per character)")
    ax.legend(fontsize=8, loc="center right")
    fig.tight_layout()
    return fig
