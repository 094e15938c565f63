"""Task 6: softmax, scaled dot-product attention and causal multi-head self-attention
(notebooks/06_attention.ipynb)."""

# YOUR FILE: write the bodies that raise NotImplementedError (see the task ids below).
# Generated from the reference by `minilm stubs`: the signatures,
# shape annotations and docstrings are the spec, and the validation calls are provided.

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
    raise NotImplementedError("Task 6.1 is not implemented yet: write softmax in minilm/attention.py")


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
    raise NotImplementedError("Task 6.2 is not implemented yet: "
                              "write scaled_dot_product_attention in minilm/attention.py")


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
        raise NotImplementedError("Task 6.3 is not implemented yet: "
                                  "write MultiHeadSelfAttention.__init__ in minilm/attention.py")

    def forward(
        self,
        x: Float[Tensor, "... seq d_model"],
        token_positions: Int[Tensor, "... seq"] | None = None,
        kv_cache: KVCache | None = None,
    ) -> Float[Tensor, "... seq d_model"]:
        check_last_dim(x, self.d_model, "MultiHeadSelfAttention", "d_model")
        raise NotImplementedError("Task 6.3 is not implemented yet: "
                                  "write MultiHeadSelfAttention.forward in minilm/attention.py")
