"""Task 6: softmax, scaled dot-product attention and causal multi-head self-attention
(notebooks/06_attention.ipynb)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import torch
from einops import rearrange
from jaxtyping import Bool, Float, Int
from torch import Tensor, nn

from minilm.course.validate import check_divisible, check_last_dim, check_mask, check_tensor

from .linear import Linear
from .rope import RotaryPositionalEmbedding

if TYPE_CHECKING:
    from .generation import KVCache


def softmax(x: Float[Tensor, "..."], dim: int) -> Float[Tensor, "..."]:
    """Task 6.1: softmax along `dim`, stable for inputs as large as ±1e4.

    exp overflows above ~88 in float32; subtracting the max along `dim` first changes nothing
    mathematically and keeps every exponent ≤ 0. Do not use torch.softmax.
    """
    check_tensor(x, "x", "softmax")
    # BEGIN SOLUTION 6.1
    # The max is a constant shift that softmax cancels: detached, autograd skips its backward.
    exps = torch.exp(x - x.amax(dim=dim, keepdim=True).detach())
    return exps / exps.sum(dim=dim, keepdim=True)
    # END SOLUTION


def scaled_dot_product_attention(
    q: Float[Tensor, "... queries d_k"],
    k: Float[Tensor, "... keys d_k"],
    v: Float[Tensor, "... keys d_v"],
    mask: Bool[Tensor, "... queries keys"] | None = None,
) -> Float[Tensor, "... queries d_v"]:
    """Task 6.2: softmax(q kᵀ / sqrt(d_k)) v, where mask (True = may attend) removes the
    scores it marks False before the softmax. Use your softmax."""
    for name, t in (("q", q), ("k", k), ("v", v)):
        check_tensor(t, name, "scaled_dot_product_attention")
    check_last_dim(k, q.shape[-1], "scaled_dot_product_attention", "d_k (q's last dim)", "k")
    if k.shape[-2] != v.shape[-2]:
        raise ValueError(
            f"scaled_dot_product_attention: k and v must have the same number of keys, "
            f"got k {tuple(k.shape)} and v {tuple(v.shape)}"
        )
    check_mask(mask, (*q.shape[:-1], k.shape[-2]), "scaled_dot_product_attention")
    # BEGIN SOLUTION 6.2
    # Plain matmuls (einsum copies its operands here) and every step on the small q rather than on
    # the (queries × keys) scores where that can be: these are the biggest tensors in the model.
    q = q / math.sqrt(q.shape[-1])
    scores = q @ k.transpose(-2, -1)  # (..., queries, keys)
    if mask is not None:
        scores.masked_fill_(~mask, float("-inf"))  # in place: scores is ours
    return softmax(scores, dim=-1) @ v  # (..., queries, d_v)
    # END SOLUTION


class MultiHeadSelfAttention(nn.Module):
    """Task 6.3: causal multi-head self-attention with bias-free q_proj, k_proj, v_proj and
    output_proj (all d_model → d_model). Head h uses rows h·d_k … (h+1)·d_k − 1 of each
    projection, d_k = d_model / num_heads. With theta, RoPE rotates q and k (not v): keep a
    RotaryPositionalEmbedding(theta, d_k, max_seq_len) in self.rope (None without theta).
    The attention itself is your scaled_dot_product_attention (Task 6.2) with a causal mask, one
    call for every head, not a second copy of its body.

    token_positions gives each token's position for RoPE: (seq,), or (batch, seq) with each batch
    row's own positions, which all the heads of that row share. When it is None the positions are
    0 … seq − 1.

    kv_cache (notebook 11, Task 11.3; leave it unused until then): a KVCache holding the keys and
    values of the len(kv_cache) tokens before this call's. When it is given:
      - default positions continue after the cached tokens: len(kv_cache) … len(kv_cache) + seq − 1
        (read len(kv_cache) before updating it);
      - pass this call's k and v, after RoPE, through k, v = kv_cache.update(k, v) and attend over
        all the keys and values it returns;
      - the queries are then the last `queries` of `keys` tokens, so the causal mask has shape
        (queries, keys) and query i may attend to keys 0 … keys − queries + i (a prefill of many
        tokens into an empty cache needs it as much as a call without a cache). Without a cache,
        keys = queries and this is the usual causal mask.
    """

    def __init__(self, d_model: int, num_heads: int, max_seq_len: int | None = None, theta: float | None = None,
                 device=None, dtype=None):
        super().__init__()
        check_divisible(d_model, num_heads, "MultiHeadSelfAttention")
        if theta is not None and max_seq_len is None:
            raise ValueError("MultiHeadSelfAttention: RoPE (theta given) needs max_seq_len, got max_seq_len=None")
        self.d_model, self.num_heads, self.d_k = d_model, num_heads, d_model // num_heads
        # BEGIN SOLUTION 6.3
        self.rope = RotaryPositionalEmbedding(theta, self.d_k, max_seq_len,
                                              device=device) if theta is not None else None
        self.q_proj = Linear(d_model, d_model, device=device, dtype=dtype)
        self.k_proj = Linear(d_model, d_model, device=device, dtype=dtype)
        self.v_proj = Linear(d_model, d_model, device=device, dtype=dtype)
        self.output_proj = Linear(d_model, d_model, device=device, dtype=dtype)
        # END SOLUTION

    def forward(
        self,
        x: Float[Tensor, "... seq d_model"],
        token_positions: Int[Tensor, "... seq"] | None = None,
        kv_cache: KVCache | None = None,
    ) -> Float[Tensor, "... seq d_model"]:
        check_last_dim(x, self.d_model, "MultiHeadSelfAttention", "d_model")
        # BEGIN SOLUTION 6.3
        if token_positions is None:
            start = len(kv_cache) if kv_cache is not None else 0  # tokens already cached come first
            token_positions = torch.arange(start, start + x.shape[-2], device=x.device)
        q, k, v = (
            rearrange(proj(x), "... seq (heads d_k) -> ... heads seq d_k", heads=self.num_heads)
            for proj in (self.q_proj, self.k_proj, self.v_proj)
        )
        if self.rope is not None:
            positions = token_positions.unsqueeze(-2)  # (..., 1, seq): the same positions for every head
            q, k = self.rope(q, positions), self.rope(k, positions)
        if kv_cache is not None:
            k, v = kv_cache.update(k, v)
        queries, keys = q.shape[-2], k.shape[-2]
        causal = torch.ones(queries, keys, dtype=torch.bool, device=x.device).tril(diagonal=keys - queries)
        out = scaled_dot_product_attention(q, k, v, causal)
        return self.output_proj(rearrange(out, "... heads seq d_k -> ... seq (heads d_k)"))
        # END SOLUTION
