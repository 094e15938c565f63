"""Task 4: SiLU and the SwiGLU feed-forward network (notebooks/04_swiglu.ipynb)."""

from __future__ import annotations

import torch
from jaxtyping import Float
from torch import Tensor, nn

from minilm.course.validate import check_last_dim, check_positive_int, check_shape

from .linear import Linear, linear


def silu(x: Float[Tensor, "..."]) -> Float[Tensor, "..."]:
    """Task 4.1: SiLU(x) = x · σ(x), elementwise. Do not use torch.nn.functional.silu."""
    # BEGIN SOLUTION 4.1
    return x * torch.sigmoid(x)
    # END SOLUTION


def swiglu(
    x: Float[Tensor, "... d_model"],
    w1: Float[Tensor, "d_ff d_model"],
    w2: Float[Tensor, "d_model d_ff"],
    w3: Float[Tensor, "d_ff d_model"],
) -> Float[Tensor, "... d_model"]:
    """Task 4.2: W2 (SiLU(W1 x) ⊙ W3 x). W1 x is the gate's input, W3 x the value it gates."""
    d_ff, d_model = w1.shape
    check_shape(w3, (d_ff, d_model), "swiglu", "w3")
    check_shape(w2, (d_model, d_ff), "swiglu", "w2")
    check_last_dim(x, d_model, "swiglu", "d_model")
    # BEGIN SOLUTION 4.2
    return linear(silu(linear(x, w1)) * linear(x, w3), w2)
    # END SOLUTION


class SwiGLU(nn.Module):
    """Task 4.3: the feed-forward network with submodules w1, w3 (d_model → d_ff) and w2 (d_ff → d_model).

    forward calls the submodules, self.w1(x), and never reads their weights (self.w1.weight):
    notebook 12 (Task 12.3) swaps every Linear for an Int8Linear, which has no weight.
    """

    def __init__(self, d_model: int, d_ff: int, device=None, dtype=None):
        super().__init__()
        check_positive_int(d_model, "d_model", "SwiGLU")
        check_positive_int(d_ff, "d_ff", "SwiGLU")
        self.d_model, self.d_ff = d_model, d_ff
        # BEGIN SOLUTION 4.3
        self.w1 = Linear(d_model, d_ff, device=device, dtype=dtype)
        self.w2 = Linear(d_ff, d_model, device=device, dtype=dtype)
        self.w3 = Linear(d_model, d_ff, device=device, dtype=dtype)
        # END SOLUTION

    def forward(self, x: Float[Tensor, "... d_model"]) -> Float[Tensor, "... d_model"]:
        check_last_dim(x, self.d_model, "SwiGLU", "d_model")
        # BEGIN SOLUTION 4.3
        return self.w2(silu(self.w1(x)) * self.w3(x))
        # END SOLUTION
