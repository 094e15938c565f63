"""Task 3: RMSNorm (notebooks/03_rmsnorm.ipynb)."""

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
    # BEGIN SOLUTION 3.1
    in_dtype = x.dtype
    x = x.float()
    inv_rms = torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + eps)  # 1 / rms: a multiply is cheaper than a divide
    return (x * inv_rms * weight.float()).to(in_dtype)
    # END SOLUTION


class RMSNorm(nn.Module):
    """Task 3.2: RMSNorm with a learnable gain `weight` of shape (d_model,), starting at ones."""

    def __init__(self, d_model: int, eps: float = 1e-5, device=None, dtype=None):
        super().__init__()
        check_positive_int(d_model, "d_model", "RMSNorm")
        check_positive(eps, "eps", "RMSNorm")
        self.d_model, self.eps = d_model, eps
        # BEGIN SOLUTION 3.2
        self.weight = nn.Parameter(torch.ones(d_model, device=device, dtype=dtype))
        # END SOLUTION

    def forward(self, x: Float[Tensor, "... d_model"]) -> Float[Tensor, "... d_model"]:
        check_last_dim(x, self.d_model, "RMSNorm", "d_model")
        # BEGIN SOLUTION 3.2
        return rms_norm(x, self.weight, self.eps)
        # END SOLUTION

    def extra_repr(self) -> str:
        return f"d_model={self.d_model}, eps={self.eps}"
