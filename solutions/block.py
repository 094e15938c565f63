"""Task 7: the pre-norm Transformer block (notebooks/07_block.ipynb)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from jaxtyping import Float, Int
from torch import Tensor, nn

from minilm.course.validate import check_last_dim, check_positive_int

from .attention import MultiHeadSelfAttention
from .rmsnorm import RMSNorm
from .swiglu import SwiGLU

if TYPE_CHECKING:
    from .generation import KVCache


class TransformerBlock(nn.Module):
    """Task 7.1: x + attn(ln1(x)), then that + ffn(ln2(of that)).

    Submodules: ln1, attn (causal, with RoPE), ln2, ffn (SwiGLU). Pre-norm: each sublayer
    sees a normalized copy, while the residual stream itself is never normalized.
    """

    def __init__(self, d_model: int, num_heads: int, d_ff: int, max_seq_len: int, theta: float = 10000.0,
                 device=None, dtype=None):
        super().__init__()
        check_positive_int(d_ff, "d_ff", "TransformerBlock")
        self.d_model = d_model
        # BEGIN SOLUTION 7.1
        self.ln1 = RMSNorm(d_model, device=device, dtype=dtype)
        self.attn = MultiHeadSelfAttention(d_model, num_heads, max_seq_len, theta, device=device, dtype=dtype)
        self.ln2 = RMSNorm(d_model, device=device, dtype=dtype)
        self.ffn = SwiGLU(d_model, d_ff, device=device, dtype=dtype)
        # END SOLUTION

    def forward(
        self,
        x: Float[Tensor, "... seq d_model"],
        token_positions: Int[Tensor, "... seq"] | None = None,
        kv_cache: KVCache | None = None,
    ) -> Float[Tensor, "... seq d_model"]:
        check_last_dim(x, self.d_model, "TransformerBlock", "d_model")
        # BEGIN SOLUTION 7.1
        x = x + self.attn(self.ln1(x), token_positions, kv_cache)
        return x + self.ffn(self.ln2(x))
        # END SOLUTION
