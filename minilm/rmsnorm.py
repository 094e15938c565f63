"""Task 3: RMSNorm (notebooks/03_rmsnorm.ipynb)."""

# YOUR FILE: write the bodies that raise NotImplementedError (see the task ids below).
# Generated from the reference by `minilm stubs`: the signatures,
# shape annotations and docstrings are the spec, and the validation calls are provided.

from __future__ import annotations

import torch
from jaxtyping import Float
from torch import Tensor, nn

from minilm.course.validate import check_last_dim, check_positive, check_positive_int


def rms_norm(
    x: Float[Tensor, "... d_model"], weight: Float[Tensor, " d_model"], eps: float = 1e-5
) -> Float[Tensor, "... d_model"]:
    """Task 3.1: x / sqrt(mean(x²) + eps) · weight, over the last dim.

    Compute in float32 (squares of bfloat16 values lose too much precision) and return the
    input's dtype. Unlike LayerNorm, do not subtract the mean.
    """
    check_last_dim(x, weight.shape[-1], "rms_norm", "d_model")
    raise NotImplementedError("Task 3.1 is not implemented yet: write rms_norm in minilm/rmsnorm.py")


class RMSNorm(nn.Module):
    """Task 3.2: RMSNorm with a learnable gain `weight` of shape (d_model,), starting at ones."""

    def __init__(self, d_model: int, eps: float = 1e-5, device=None, dtype=None):
        super().__init__()
        check_positive_int(d_model, "d_model", "RMSNorm")
        check_positive(eps, "eps", "RMSNorm")
        self.d_model, self.eps = d_model, eps
        raise NotImplementedError("Task 3.2 is not implemented yet: write RMSNorm.__init__ in minilm/rmsnorm.py")

    def forward(self, x: Float[Tensor, "... d_model"]) -> Float[Tensor, "... d_model"]:
        check_last_dim(x, self.d_model, "RMSNorm", "d_model")
        raise NotImplementedError("Task 3.2 is not implemented yet: write RMSNorm.forward in minilm/rmsnorm.py")

    def extra_repr(self) -> str:
        return f"d_model={self.d_model}, eps={self.eps}"
