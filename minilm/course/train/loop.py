"""The course's one training loop, and the one config type of its small models.

`minilm train`, notebook 10's runs, the ablations of notebooks 13–14, the bigram of notebook 02,
the budget planner's speed probe and the benchmarks all step through `train_step`; all but the
last two through `train`. It runs whatever code it is handed: with minilm's functions, that is the
student's cross_entropy, clip_grad_norm and AdamW.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass

import torch
from torch import Tensor

import minilm


@dataclass(frozen=True)
class TrainConfig:
    """A small TransformerLM and its training run: notebook 10's (about 15 s on a 2-core CPU) by
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


@dataclass
class Step:
    """What one step of `train` did."""

    step: int  # the steps done, this one included
    loss: Tensor  # its training loss, 0-d (.item() waits for an asynchronous device)
    lr: float
    grad_norm: float | None  # the global gradient norm before clipping; None without clipping


def set_lr(optimizer: torch.optim.Optimizer, lr: float) -> None:
    """Every group's learning rate; a group with an "lr_scale" (Muon's) gets lr times it."""
    for group in optimizer.param_groups:
        group["lr"] = lr * group.get("lr_scale", 1.0)


def train_step(loss_of: Callable[[Tensor, Tensor], Tensor], optimizer: torch.optim.Optimizer, x: Tensor,
               y: Tensor, clip: float | None = None, parameters: Iterable[Tensor] = ()):
    """One step: the loss of (x, y), its gradients, clipped to a global norm of `clip` (the student's
    clip_grad_norm over `parameters`) unless None, and the optimizer's update.
    Returns (loss, the gradient norm before clipping, or None)."""
    loss = loss_of(x, y)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    norm = minilm.clip_grad_norm(parameters, clip) if clip is not None else None
    optimizer.step()
    return loss, norm


def train(loss_of: Callable[[Tensor, Tensor], Tensor], parameters: Iterable[Tensor],
          optimizer: torch.optim.Optimizer, batch: Callable[[int], tuple[Tensor, Tensor]],
          lr_at: Callable[[int], float | None], clip: float | None = 1.0, start: int = 0) -> Iterator[Step]:
    """Train from step `start`, one `Step` at a time, until lr_at(step) is None.

        loss_of(x, y)   the loss of a batch: logits (batch, context, vocab) from x (batch, context)
                        against the targets y (batch, context)
        batch(step)     step's (x, y): where the run's batches come from, and how they are seeded
        lr_at(step)     step's learning rate, or None once the run is over (a step count or a clock)

    The caller's loop body does the rest (logging, evaluation, checkpoints): the generator does
    nothing between one step and the next."""
    parameters = list(parameters)
    step = start
    while (lr := lr_at(step)) is not None:
        set_lr(optimizer, lr)
        x, y = batch(step)
        loss, norm = train_step(loss_of, optimizer, x, y, clip, parameters)
        step += 1
        yield Step(step, loss, lr, None if norm is None else float(norm))


def steps_until(stop: int, lr: Callable[[int], float] | float) -> Callable[[int], float | None]:
    """lr_at for a run of a fixed length: lr(step) (or a constant) before step `stop`, None from it."""
    return lambda step: None if step >= stop else (lr(step) if callable(lr) else lr)
