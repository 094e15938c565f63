"""The one config type of the course's small models, and the schedules its runs hand to the loop.

The training loop itself is the student's (Task 10.6, minilm.train): `minilm train`, notebook 10b's
runs, the ablations of notebooks 13–14, the budget planner's speed probe and the benchmarks all
step through it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass

import torch

import minilm


@dataclass(frozen=True)
class TrainConfig:
    """A small TransformerLM and its training run: notebook 10b's (about 15 s on a 2-core CPU) by
    default; `replace` derives the others (ABLATION)."""

    vocab_size: int = 4096
    context_length: int = 64
    d_model: int = 64
    num_layers: int = 2
    num_heads: int = 4
    d_ff: int = 192
    rope_theta: float = 10000.0
    batch_size: int = 16
    steps: int = 150
    max_lr: float = 5e-3
    min_lr: float = 5e-4
    warmup: int = 15
    weight_decay: float = 0.1
    betas: tuple[float, float] = (0.9, 0.95)
    clip: float = 1.0
    eval_interval: int = 25
    eval_tokens: int = 2048
    train_tokens: int = 0  # 0: all of the training split; else its first N tokens (the data-limited regime)
    seed: int = 0

    def replace(self, **changes) -> TrainConfig:
        return TrainConfig(**(asdict(self) | changes))

    def model(self, device=None) -> torch.nn.Module:
        """A fresh minilm.TransformerLM of this size (seed it first for reproducible weights)."""
        return minilm.TransformerLM(self.vocab_size, self.context_length, self.d_model, self.num_layers,
                                    self.num_heads, self.d_ff, self.rope_theta, device=device)

    def batch_seed(self, step: int) -> int:
        """The seed of step `step`'s batch: batches depend on the step only, so a run resumed
        from a checkpoint sees exactly the batches an uninterrupted run would have."""
        return 1000 * (self.seed + 1) + step


# Notebooks 13–14's ablations: a smaller vocabulary and run, so that a dozen runs fit in minutes.
# d_ff is even, so ReLU²'s width matched to SwiGLU's parameters (258) is exact.
ABLATION = TrainConfig(vocab_size=1024, d_ff=172, batch_size=8, steps=100, warmup=10, eval_tokens=4096)


def steps_until(stop: int, lr: Callable[[int], float] | float) -> Callable[[int], float | None]:
    """lr_at for a run of a fixed length: lr(step) (or a constant) before step `stop`, None from it."""
    return lambda step: None if step >= stop else (lr(step) if callable(lr) else lr)
