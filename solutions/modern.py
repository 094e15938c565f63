"""Task 14: the modern recipe (notebooks/14_modern_recipe.ipynb).

The optimizer and schedule of today's fast small-model runs, and small changes to the model:
the Newton–Schulz orthogonalization and the Muon optimizer built on it (after Keller Jordan's
github.com/KellerJordan/Muon), which parameters Muon, AdamW and weight decay each get, a
warmup–stable–decay learning rate driven by the fraction of the run gone, a tanh soft-cap on
the logits and the ReLU² feed-forward network.
"""

from __future__ import annotations

import math

import torch
from jaxtyping import Float
from torch import Tensor, nn

from minilm.course.validate import (
    check_last_dim,
    check_nonnegative,
    check_nonnegative_int,
    check_positive,
    check_positive_int,
)

from .embedding import Embedding
from .linear import Linear

# The quintic's coefficients (a, b, c) of Keller Jordan's Muon: φ(s) = a·s + b·s³ + c·s⁵ (provided).
NS_COEFFICIENTS = (3.4445, -4.7750, 2.0315)


def newton_schulz(G: Float[Tensor, "rows cols"], steps: int = 5, eps: float = 1e-7) -> Float[Tensor, "rows cols"]:
    """Task 14.1: an approximately orthogonal matrix with G's singular vectors (U·S'·Vᵀ where
    G = U·S·Vᵀ, S' near 1), by the quintic Newton–Schulz iteration, in float32:

        X ← G / (‖G‖_F + eps)                       (Frobenius norm: every singular value ≤ 1)
        repeat `steps` times:  A = X Xᵀ,  X ← a·X + (b·A + c·A·A)·X      (a, b, c = NS_COEFFICIENTS)

    Work on the wide orientation: transpose a tall G (rows > cols) first and back at the end, so
    that A is the smaller of the two Gram matrices. Return G's dtype. No torch.linalg.svd, qr or
    polar decompositions: matmuls only.
    """
    if G.ndim != 2:
        raise ValueError(f"newton_schulz: G must be a matrix (2-D), got shape {tuple(G.shape)}")
    check_nonnegative_int(steps, "steps", "newton_schulz")
    check_positive(eps, "eps", "newton_schulz")
    # BEGIN SOLUTION 14.1
    a, b, c = NS_COEFFICIENTS
    X = G.float()
    tall = X.shape[0] > X.shape[1]
    if tall:
        X = X.T
    X = X / (X.norm() + eps)  # ‖X‖₂ ≤ ‖X‖_F: the singular values now lie in [0, 1]
    for _ in range(steps):
        A = X @ X.T
        X = a * X + (b * A + c * A @ A) @ X  # each singular value s becomes a·s + b·s³ + c·s⁵
    if tall:
        X = X.T
    return X.to(G.dtype)
    # END SOLUTION


class Muon(torch.optim.Optimizer):
    """Task 14.2: Muon, MomentUm Orthogonalized by Newton–Schulz, for 2-D weight matrices.

    For every parameter p (a matrix, shape rows × cols) with a gradient g (buffer B in self.state[p]):
        B ← μ·B + (1 − μ)·g                          (momentum, an average of gradients; B starts at 0)
        U = (1 − μ)·g + μ·B   with nesterov,  U = B  without      (Nesterov: look one step ahead)
        O = newton_schulz(U, ns_steps)
        p ← p − lr · weight_decay · p                (decoupled weight decay, as AdamW)
        p ← p − lr · sqrt(max(1, rows / cols)) · O   (the shape-dependent scale)
    Read lr, momentum, nesterov, weight_decay and ns_steps from each param group. The
    constructor is provided (it refuses parameters that are not matrices); write step().
    """

    def __init__(self, params, lr: float = 0.02, momentum: float = 0.95, nesterov: bool = True,
                 weight_decay: float = 0.0, ns_steps: int = 5):
        check_nonnegative(lr, "lr", "Muon")
        check_nonnegative(weight_decay, "weight_decay", "Muon")
        check_nonnegative_int(ns_steps, "ns_steps", "Muon")
        if not isinstance(momentum, (int, float)) or not 0 <= momentum < 1:
            raise ValueError(f"Muon: momentum must be a number in [0, 1), got {momentum!r}")
        super().__init__(params, dict(lr=lr, momentum=momentum, nesterov=bool(nesterov), weight_decay=weight_decay,
                                      ns_steps=ns_steps))
        for group in self.param_groups:
            for p in group["params"]:
                if p.ndim != 2:
                    raise ValueError(f"Muon: every parameter must be a matrix (2-D), got one of shape "
                                     f"{tuple(p.shape)}: give gains, biases and other non-matrices to AdamW")

    @torch.no_grad()
    def step(self, closure=None):
        """One update of every parameter that has a gradient. Returns closure() if given."""
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        # BEGIN SOLUTION 14.2
        for group in self.param_groups:
            lr, mu, wd = group["lr"], group["momentum"], group["weight_decay"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if not state:
                    state["momentum_buffer"] = torch.zeros_like(p)
                g, buf = p.grad, state["momentum_buffer"]
                buf.mul_(mu).add_(g, alpha=1 - mu)
                update = g * (1 - mu) + buf * mu if group["nesterov"] else buf
                orthogonal = newton_schulz(update, group["ns_steps"])
                scale = math.sqrt(max(1.0, p.shape[0] / p.shape[1]))  # rows / cols: a tall matrix steps further
                p.mul_(1 - lr * wd)
                p.add_(orthogonal, alpha=-lr * scale)
        # END SOLUTION
        return loss


def parameter_groups(model: nn.Module, muon: bool = True) -> dict[str, list[nn.Parameter]]:
    """Task 14.3: every parameter of `model`, once, in one of three lists:

        "muon":     the hidden matrices: every 2-D parameter except the embeddings' and
                    model.lm_head's (empty when muon=False: they go to "decay")
        "decay":    the other matrices AdamW trains with weight decay: model.lm_head.weight (and the
                    hidden matrices when muon=False)
        "no_decay": what AdamW trains without weight decay: the weights of Embedding modules (your
                    Task 2.2 class) and every parameter that is not 2-D (the norms' gains)

    A head tied to the embedding is one parameter (named_parameters lists it once): an embedding.
    """
    # BEGIN SOLUTION 14.3
    embeddings = {id(m.weight) for m in model.modules() if isinstance(m, Embedding)}
    head = model.lm_head.weight
    groups: dict[str, list[nn.Parameter]] = {"muon": [], "decay": [], "no_decay": []}
    for _, p in model.named_parameters():
        if id(p) in embeddings or p.ndim != 2:
            groups["no_decay"].append(p)
        elif p is head or not muon:
            groups["decay"].append(p)
        else:
            groups["muon"].append(p)
    return groups
    # END SOLUTION


def lr_wsd_schedule(progress: float, max_lr: float, min_lr: float, warmup: float, decay: float) -> float:
    """Task 14.4: warmup–stable–decay, as a function of the fraction of the run gone,
    progress = step / total steps (or seconds gone / the budget's training seconds):

        progress < warmup:               max_lr · progress / warmup              (linear warmup from 0)
        warmup ≤ progress < 1 − decay:   max_lr                                  (stable)
        1 − decay ≤ progress < 1:        max_lr + (min_lr − max_lr) · (progress − (1 − decay)) / decay
                                                                                 (linear decay, the last `decay`)
        progress ≥ 1:                    min_lr

    warmup and decay are fractions of the run, with warmup + decay ≤ 1.
    """
    check_nonnegative(progress, "progress", "lr_wsd_schedule")
    check_nonnegative(max_lr, "max_lr", "lr_wsd_schedule")
    check_nonnegative(min_lr, "min_lr", "lr_wsd_schedule")
    check_nonnegative(warmup, "warmup", "lr_wsd_schedule")
    check_positive(decay, "decay", "lr_wsd_schedule")
    if min_lr > max_lr:
        raise ValueError(f"lr_wsd_schedule: min_lr must be <= max_lr, got min_lr={min_lr} and max_lr={max_lr}")
    if warmup + decay > 1:
        raise ValueError(f"lr_wsd_schedule: warmup + decay must be at most 1 (fractions of the run), got "
                         f"warmup={warmup} and decay={decay}")
    # BEGIN SOLUTION 14.4
    if progress < warmup:
        return max_lr * progress / warmup
    if progress < 1 - decay:
        return max_lr
    if progress < 1:
        return max_lr + (min_lr - max_lr) * (progress - (1 - decay)) / decay
    return min_lr
    # END SOLUTION


def softcap(logits: Float[Tensor, "..."], cap: float) -> Float[Tensor, "..."]:
    """Task 14.5: cap · tanh(logits / cap): about the logits where |logits| ≪ cap, never beyond ±cap."""
    check_positive(cap, "cap", "softcap")
    # BEGIN SOLUTION 14.5
    return cap * torch.tanh(logits / cap)
    # END SOLUTION


def matched_relu2_d_ff(swiglu_d_ff: int) -> int:
    """ReLU²'s hidden width with the parameters of SwiGLU(d_model, swiglu_d_ff) (provided): SwiGLU
    has three d_model × d_ff matrices and ReLU² two, so 1.5 × the width, rounded to the nearest
    integer (exact for an even swiglu_d_ff)."""
    return round(1.5 * swiglu_d_ff)


class ReLUSquaredFFN(nn.Module):
    """Task 14.6: the ReLU² feed-forward network, w2(ReLU(w1 x)²), with submodules w1
    (d_model → d_ff) and w2 (d_ff → d_model), your bias-free Linears. ReLU first, then the square:
    a negative pre-activation gives 0, not its square."""

    def __init__(self, d_model: int, d_ff: int, device=None, dtype=None):
        super().__init__()
        check_positive_int(d_model, "d_model", "ReLUSquaredFFN")
        check_positive_int(d_ff, "d_ff", "ReLUSquaredFFN")
        self.d_model, self.d_ff = d_model, d_ff
        # BEGIN SOLUTION 14.6
        self.w1 = Linear(d_model, d_ff, device=device, dtype=dtype)
        self.w2 = Linear(d_ff, d_model, device=device, dtype=dtype)
        # END SOLUTION

    def forward(self, x: Float[Tensor, "... d_model"]) -> Float[Tensor, "... d_model"]:
        check_last_dim(x, self.d_model, "ReLUSquaredFFN", "d_model")
        # BEGIN SOLUTION 14.6
        return self.w2(torch.relu(self.w1(x)).square())
        # END SOLUTION
