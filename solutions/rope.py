"""Task 5: rotary positional embedding, RoPE (notebooks/05_rope.ipynb)."""

from __future__ import annotations

import torch
from einops import rearrange
from jaxtyping import Float, Int
from torch import Tensor, nn

from minilm.course.validate import (
    check_broadcast,
    check_even,
    check_positions,
    check_positive,
    check_positive_int,
    check_tensor,
)


def rope_angles(
    token_positions: Int[Tensor, "..."], d_k: int, theta: float = 10000.0
) -> Float[Tensor, "... half"]:
    """Task 5.1: the angle p · θ^(−2i/d_k) by which pair i turns at position p, for every
    position p in token_positions and every pair i = 0 … d_k/2 − 1, as float32.

    token_positions may have any shape, e.g. (seq,) or (batch, seq) with other positions in
    each batch row; the result has shape (*token_positions.shape, d_k // 2).
    """
    check_positions(token_positions, None, "rope_angles")
    check_positive_int(d_k, "d_k", "rope_angles")
    check_even(d_k, "rope_angles")
    check_positive(theta, "theta", "rope_angles")
    # BEGIN SOLUTION 5.1
    inv_freq = theta ** (-torch.arange(0, d_k, 2, device=token_positions.device, dtype=torch.float64) / d_k)
    return (token_positions.to(torch.float64)[..., None] * inv_freq).float()
    # END SOLUTION


def rotate_pairs(
    x: Float[Tensor, "... seq d_k"], cos: Float[Tensor, "... seq half"], sin: Float[Tensor, "... seq half"]
) -> Float[Tensor, "... seq d_k"]:
    """Task 5.1: rotate each adjacent pair (x[2i], x[2i+1]) of the last dim by the angle whose
    cosine and sine are cos[..., i] and sin[..., i]:

        x'[2i]   = x[2i] cos − x[2i+1] sin
        x'[2i+1] = x[2i] sin + x[2i+1] cos

    Pairs are adjacent dims (0, 1), (2, 3), …, not the two halves of the vector.
    """
    # BEGIN SOLUTION 5.1
    pairs = rearrange(x.float(), "... (half two) -> ... half two", two=2)
    x_even, x_odd = pairs.unbind(-1)
    rotated = torch.stack((x_even * cos - x_odd * sin, x_even * sin + x_odd * cos), dim=-1)
    return rearrange(rotated, "... half two -> ... (half two)").to(x.dtype)
    # END SOLUTION


def rope(
    x: Float[Tensor, "... seq d_k"], token_positions: Int[Tensor, "... seq"], theta: float = 10000.0
) -> Float[Tensor, "... seq d_k"]:
    """Task 5.1: apply RoPE to x, with each token at its 0-based position in token_positions.

    token_positions broadcasts against x's leading dims (x.shape[:-1]): (seq,) gives every
    batch row the same positions, (batch, 1, seq) gives each batch row its own for x of shape
    (batch, heads, seq, d_k). Use rope_angles and rotate_pairs.
    """
    check_tensor(x, "x", "rope")
    check_even(x.shape[-1], "rope")
    check_positions(token_positions, None, "rope")
    check_broadcast(token_positions, tuple(x.shape[:-1]), "rope", "token_positions", "x's leading dims")
    # BEGIN SOLUTION 5.1
    angles = rope_angles(token_positions, x.shape[-1], theta)
    return rotate_pairs(x, angles.cos(), angles.sin())
    # END SOLUTION


class RotaryPositionalEmbedding(nn.Module):
    """Task 5.2: RoPE with cos and sin precomputed for positions 0 … max_seq_len − 1.

    Store them as non-persistent buffers (register_buffer(..., persistent=False)) named `cos`
    and `sin`, of shape (max_seq_len, d_k // 2): they are derived, not learned, so they stay
    out of the state_dict. They stay float32 whatever `dtype` is (accepted, like every module's,
    for a uniform signature): rotating in low precision would blur distant positions.
    """

    def __init__(self, theta: float, d_k: int, max_seq_len: int, device=None, dtype=None):
        super().__init__()
        check_positive(theta, "theta", "RotaryPositionalEmbedding")
        check_positive_int(d_k, "d_k", "RotaryPositionalEmbedding")
        check_even(d_k, "RotaryPositionalEmbedding")
        check_positive_int(max_seq_len, "max_seq_len", "RotaryPositionalEmbedding")
        self.theta, self.d_k, self.max_seq_len = theta, d_k, max_seq_len
        # BEGIN SOLUTION 5.2
        angles = rope_angles(torch.arange(max_seq_len, device=device), d_k, theta)  # (max_seq_len, d_k/2)
        self.register_buffer("cos", angles.cos(), persistent=False)
        self.register_buffer("sin", angles.sin(), persistent=False)
        # END SOLUTION

    def forward(self, x: Float[Tensor, "... seq d_k"],
                token_positions: Int[Tensor, "... seq"]) -> Float[Tensor, "... seq d_k"]:
        check_tensor(x, "x", "RotaryPositionalEmbedding")
        if x.shape[-1] != self.d_k:
            raise ValueError(f"RotaryPositionalEmbedding: the last dim of x must be d_k={self.d_k}, got shape "
                             f"{tuple(x.shape)}")
        check_positions(token_positions, self.max_seq_len, "RotaryPositionalEmbedding")
        check_broadcast(token_positions, tuple(x.shape[:-1]), "RotaryPositionalEmbedding", "token_positions",
                        "x's leading dims")
        # BEGIN SOLUTION 5.2
        return rotate_pairs(x, self.cos[token_positions], self.sin[token_positions])
        # END SOLUTION

    def extra_repr(self) -> str:
        return f"theta={self.theta}, d_k={self.d_k}, max_seq_len={self.max_seq_len}"
