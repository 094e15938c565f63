"""Task 10: the loss, gradient clipping, the learning-rate schedule, AdamW and checkpoints
(notebooks/10_training.ipynb), and the training loop that runs them (notebooks/10b_train.ipynb)."""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterable, Iterator
from typing import IO, BinaryIO, NamedTuple

import torch
from jaxtyping import Float, Int
from torch import Tensor, nn

from minilm.course.validate import (
    check_logits_targets,
    check_nonnegative,
    check_nonnegative_int,
    check_positive,
    check_train_args,
)


def cross_entropy(logits: Float[Tensor, "... vocab_size"], targets: Int[Tensor, "..."]) -> Float[Tensor, ""]:
    """Task 10.1: the mean negative log-likelihood of `targets` under softmax(logits).

    loss = mean over every leading position of  −log softmax(logits)[target]
         = mean of  logsumexp(logits) − logits[target].
    Compute logsumexp with the max trick (m + log Σ exp(logits − m), m = the max logit) so
    that logits as large as ±1e4 give a finite loss. Do not use torch.nn.functional.cross_entropy,
    torch.logsumexp or log_softmax: they are what the tests compare against.
    """
    check_logits_targets(logits, targets, "cross_entropy")
    # BEGIN SOLUTION 10.1
    m = logits.amax(dim=-1, keepdim=True).detach()  # (..., 1); a shift the result cancels, so no gradient
    log_sum_exp = m.squeeze(-1) + torch.log(torch.exp(logits - m).sum(dim=-1))  # (...)
    target_logits = logits.gather(-1, targets.unsqueeze(-1)).squeeze(-1)  # (...)
    return (log_sum_exp - target_logits).mean()
    # END SOLUTION


def clip_grad_norm(parameters: Iterable[nn.Parameter], max_norm: float) -> Float[Tensor, ""]:
    """Task 10.2: clip the gradients of `parameters` to a global L2 norm of at most max_norm.

    The norm is ONE number over all gradients together, sqrt(Σ over every parameter and entry
    of grad²), not one per parameter. When it exceeds max_norm, multiply every gradient in
    place by max_norm / (norm + 1e-6); otherwise leave them alone. Parameters whose .grad is
    None are skipped. Return the norm before clipping (a 0-dim tensor), as
    torch.nn.utils.clip_grad_norm_ does.
    """
    check_positive(max_norm, "max_norm", "clip_grad_norm")
    # BEGIN SOLUTION 10.2
    grads = [p.grad for p in parameters if p.grad is not None]
    if not grads:
        return torch.tensor(0.0)
    norm = torch.sqrt(sum((g.detach().float() ** 2).sum() for g in grads))
    if norm > max_norm:
        scale = max_norm / (norm + 1e-6)
        for g in grads:
            g.mul_(scale.to(g.dtype))
    return norm
    # END SOLUTION


def lr_cosine_schedule(it: int, max_lr: float, min_lr: float, warmup_iters: int, cosine_cycle_iters: int) -> float:
    """Task 10.3: the learning rate at iteration `it` (counting from 0), as in CS336:

        it < warmup_iters:                         it / warmup_iters · max_lr        (linear warmup from 0)
        warmup_iters ≤ it ≤ cosine_cycle_iters:    min_lr + ½ (1 + cos(π · (it − warmup_iters)
                                                   / (cosine_cycle_iters − warmup_iters))) (max_lr − min_lr)
        it > cosine_cycle_iters:                   min_lr
    """
    check_nonnegative_int(it, "it", "lr_cosine_schedule")
    check_nonnegative(max_lr, "max_lr", "lr_cosine_schedule")
    check_nonnegative(min_lr, "min_lr", "lr_cosine_schedule")
    check_nonnegative_int(warmup_iters, "warmup_iters", "lr_cosine_schedule")
    check_nonnegative_int(cosine_cycle_iters, "cosine_cycle_iters", "lr_cosine_schedule")
    if min_lr > max_lr:
        raise ValueError(f"lr_cosine_schedule: min_lr must be <= max_lr, got min_lr={min_lr} and max_lr={max_lr}")
    if cosine_cycle_iters <= warmup_iters:
        raise ValueError(
            f"lr_cosine_schedule: cosine_cycle_iters must be greater than warmup_iters, "
            f"got cosine_cycle_iters={cosine_cycle_iters} and warmup_iters={warmup_iters}"
        )
    # BEGIN SOLUTION 10.3
    if it < warmup_iters:
        return it / warmup_iters * max_lr
    if it <= cosine_cycle_iters:
        progress = (it - warmup_iters) / (cosine_cycle_iters - warmup_iters)  # 0 → 1
        return min_lr + 0.5 * (1 + math.cos(math.pi * progress)) * (max_lr - min_lr)
    return min_lr
    # END SOLUTION


class AdamW(torch.optim.Optimizer):
    """Task 10.4: AdamW (Loshchilov & Hutter), step for step the same as torch.optim.AdamW.

    For every parameter p with a gradient g, at step t = 1, 2, … (kept in self.state[p]):
        p ← p − lr · weight_decay · p                  (decoupled weight decay: not through g)
        m ← β1 · m + (1 − β1) · g                      (first moment, starts at 0)
        v ← β2 · v + (1 − β2) · g²                     (second moment, starts at 0)
        m̂ = m / (1 − β1ᵗ),  v̂ = v / (1 − β2ᵗ)          (bias correction)
        p ← p − lr · m̂ / (sqrt(v̂) + eps)
    Read lr, betas, eps and weight_decay from each param group (a schedule changes
    group["lr"] between steps). The constructor is provided; write step().
    """

    def __init__(self, params, lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0.01):
        check_nonnegative(lr, "lr", "AdamW")
        check_nonnegative(eps, "eps", "AdamW")
        check_nonnegative(weight_decay, "weight_decay", "AdamW")
        if len(betas) != 2 or not all(isinstance(b, (int, float)) and 0 <= b < 1 for b in betas):
            raise ValueError(f"AdamW: betas must be two numbers in [0, 1), got {betas!r}")
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay))

    @torch.no_grad()
    def step(self, closure=None):
        """One update of every parameter that has a gradient. Returns closure() if given."""
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        # BEGIN SOLUTION 10.4
        for group in self.param_groups:
            lr, (beta1, beta2), eps, wd = group["lr"], group["betas"], group["eps"], group["weight_decay"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if not state:
                    state["step"] = 0
                    state["exp_avg"] = torch.zeros_like(p)
                    state["exp_avg_sq"] = torch.zeros_like(p)
                state["step"] += 1
                t, m, v, g = state["step"], state["exp_avg"], state["exp_avg_sq"], p.grad
                p.mul_(1 - lr * wd)  # decay the weights directly, not via the gradient
                m.mul_(beta1).add_(g, alpha=1 - beta1)
                v.mul_(beta2).addcmul_(g, g, value=1 - beta2)
                # Bias correction: m and v start at 0, so early on they underestimate the moments.
                # m̂ / (sqrt(v̂) + eps) with m̂'s scalar 1 / (1 − β1ᵗ) folded into the step size.
                v_hat = v / (1 - beta2**t)
                p.addcdiv_(m, v_hat.sqrt_().add_(eps), value=-lr / (1 - beta1**t))
        # END SOLUTION
        return loss


def save_checkpoint(model: nn.Module, optimizer: torch.optim.Optimizer, iteration: int,
                    out: str | os.PathLike | BinaryIO | IO[bytes]) -> None:
    """Task 10.5: write everything needed to resume training to `out` (a path or a binary file
    object): the model's state_dict, the optimizer's state_dict (its moments and step counts)
    and the iteration number. Use torch.save on one dict."""
    check_nonnegative_int(iteration, "iteration", "save_checkpoint")
    # BEGIN SOLUTION 10.5
    torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "iteration": iteration}, out)
    # END SOLUTION


def load_checkpoint(src: str | os.PathLike | BinaryIO | IO[bytes], model: nn.Module,
                    optimizer: torch.optim.Optimizer) -> int:
    """Task 10.5: restore `model` and `optimizer` in place from a checkpoint written by
    save_checkpoint, and return the iteration number it stored."""
    # BEGIN SOLUTION 10.5
    checkpoint = torch.load(src, map_location="cpu")  # load_state_dict moves tensors to the params' device
    model.load_state_dict(checkpoint["model"])
    optimizer.load_state_dict(checkpoint["optimizer"])
    return checkpoint["iteration"]
    # END SOLUTION


class Step(NamedTuple):
    """What one step of `train` did."""

    step: int  # the steps done, this one included: start + 1 after the first
    loss: Float[Tensor, ""]  # its training loss, detached (.item() waits for an asynchronous device)
    lr: float  # lr_at's rate for this step
    grad_norm: float | None  # the global gradient norm before clipping; None when clip is None
    val_loss: float | None  # evaluate(step)'s value after this step; None when there was no evaluation


def train(loss_of: Callable[[Tensor, Tensor], Float[Tensor, ""]], parameters: Iterable[nn.Parameter],
          optimizer: torch.optim.Optimizer, batch: Callable[[int], tuple[Tensor, Tensor]],
          lr_at: Callable[[int], float | None], clip: float | None = 1.0, start: int = 0,
          evaluate: Callable[[int], float | None] | None = None, eval_every: int = 0) -> Iterator[Step]:
    """Task 10.6: the training loop, a generator that yields one `Step` per step.

    Steps are numbered s = start, start + 1, …; the run ends at the first s where lr_at(s) is None.
    Step s, in this order:
        1. every param group's "lr" ← lr_at(s), times the group's "lr_scale" when it has one
           (Muon's groups in notebook 14 do)
        2. (x, y) = batch(s); the loss is loss_of(x, y)
        3. the gradients: zeroed first (optimizer.zero_grad()), then the loss's backward pass
        4. unless clip is None: clip the gradients of `parameters` to a global norm of `clip` with
           your clip_grad_norm (Task 10.2), keeping the norm it returns
        5. the optimizer's step
        6. if evaluate is given and s + 1 is a multiple of eval_every: val_loss = evaluate(s + 1),
           run with gradients off (torch.no_grad())
        7. yield Step(s + 1, the loss detached, the rate, the norm as a float or None, val_loss or None)
    Batches depend on s alone, so a run resumed with start = the checkpoint's iteration sees the
    batches an uninterrupted run would have.
    """
    parameters = list(parameters)
    check_train_args(optimizer, clip, start, evaluate, eval_every)
    # BEGIN SOLUTION 10.6
    step = start
    while (lr := lr_at(step)) is not None:
        for group in optimizer.param_groups:
            group["lr"] = lr * group.get("lr_scale", 1.0)
        x, y = batch(step)
        loss = loss_of(x, y)
        optimizer.zero_grad()
        loss.backward()
        grad_norm = None if clip is None else float(clip_grad_norm(parameters, clip))
        optimizer.step()  # with the clipped gradients
        step += 1
        val_loss = None
        if evaluate is not None and step % eval_every == 0:
            with torch.no_grad():
                val_loss = evaluate(step)
        yield Step(step, loss.detach(), lr, grad_norm, val_loss)
    # END SOLUTION
