"""Task 1: the bias-free linear layer (notebooks/01_linear.ipynb)."""

# YOUR FILE: write the bodies that raise NotImplementedError (see the task ids below).
# Generated from the reference by `minilm stubs`: the signatures,
# shape annotations and docstrings are the spec, and the validation calls are provided.

from __future__ import annotations

import math

import torch
from jaxtyping import Float
from torch import Tensor, nn

from minilm.course.validate import check_last_dim, check_positive_int


def linear(x: Float[Tensor, "... d_in"], weight: Float[Tensor, "d_out d_in"]) -> Float[Tensor, "... d_out"]:
    """Task 1.1: y = x Wᵀ over any leading dims, with no bias.

    weight is stored (d_out, d_in), as in PyTorch and CS336, so row j of W is output j's
    weights. Do not use torch.nn.functional.linear: that is what the tests compare against.
    """
    check_last_dim(x, weight.shape[-1], "linear")
    raise NotImplementedError("Task 1.1 is not implemented yet: write linear in minilm/linear.py")


class Linear(nn.Module):
    """Task 1.2: a bias-free linear layer holding `weight` of shape (out_features, in_features).

    Initialize weight from a truncated normal with std = sqrt(2 / (in_features + out_features)),
    cut at ±3 std (torch.nn.init.trunc_normal_ takes the cut-offs a and b in absolute units).
    """

    def __init__(self, in_features: int, out_features: int, device=None, dtype=None):
        super().__init__()
        check_positive_int(in_features, "in_features", "Linear")
        check_positive_int(out_features, "out_features", "Linear")
        self.in_features, self.out_features = in_features, out_features
        raise NotImplementedError("Task 1.2 is not implemented yet: write Linear.__init__ in minilm/linear.py")

    def forward(self, x: Float[Tensor, "... in_features"]) -> Float[Tensor, "... out_features"]:
        check_last_dim(x, self.in_features, "Linear")
        raise NotImplementedError("Task 1.2 is not implemented yet: write Linear.forward in minilm/linear.py")

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, bias=False"
