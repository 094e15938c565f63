"""What two groups' mistakes share: attention's forward with one step done wrong, which Task 6.3
(rope_attention.py) and the cache path of Task 11.3 (generation.py) both patch in."""

from __future__ import annotations

import math

import torch
from einops import rearrange

from solutions import attention


def mhsa_forward(merge: str = "heads d_k", scale_by_d_model: bool = False, diagonal: int = 0, rope_on_v: bool = False,
                 offset: bool = True, prefill_mask: bool = True, mask_offset: bool = True,
                 cache_before_rope: bool = False):
    """MultiHeadSelfAttention.forward as the reference writes it, with one step done wrong: the
    heads' merge, the scale, the mask's diagonal, RoPE on v, or a part of the cache path (Task
    11.3: positions restarting at 0, no mask in a prefill, a mask without the keys − queries offset,
    keys cached before RoPE and the whole cache rotated at 0 … keys − 1 on every call)."""
    def forward(self, x, token_positions=None, kv_cache=None):
        if token_positions is None:
            start = len(kv_cache) if kv_cache is not None and offset else 0
            token_positions = torch.arange(start, start + x.shape[-2], device=x.device)
        q, k, v = (rearrange(proj(x), "... seq (heads d_k) -> ... heads seq d_k", heads=self.num_heads)
                   for proj in (self.q_proj, self.k_proj, self.v_proj))
        if self.rope is not None:
            positions = token_positions.unsqueeze(-2)
            q = self.rope(q, positions)
            if not (cache_before_rope and kv_cache is not None):
                k = self.rope(k, positions)
            if rope_on_v:
                v = self.rope(v, positions)
        if kv_cache is not None:
            k, v = kv_cache.update(k, v)
            if cache_before_rope and self.rope is not None:
                # the cache holds unrotated keys: rotate them all as positions 0 … keys − 1, right only when
                # the positions are the defaults (the same for every row, starting at 0)
                k = self.rope(k, torch.arange(k.shape[-2], device=x.device))
        queries, keys = q.shape[-2], k.shape[-2]
        causal = torch.ones(queries, keys, dtype=torch.bool, device=x.device)
        causal = causal.tril(diagonal=(keys - queries if mask_offset else 0) + diagonal)
        if kv_cache is not None and not prefill_mask:
            causal = None  # "with a cache the queries are new tokens that may see every key": not in a prefill
        if scale_by_d_model:
            q = q * math.sqrt(self.d_k / self.d_model)  # sdpa's 1/sqrt(d_k) then makes it 1/sqrt(d_model)
        out = attention.scaled_dot_product_attention(q, k, v, causal)  # (..., heads, seq, d_k)
        if merge == "reshape":  # heads never moved next to d_k: rows mix heads and positions
            out = out.reshape(*out.shape[:-3], out.shape[-2], self.d_model)
        else:
            out = rearrange(out, f"... heads seq d_k -> ... seq ({merge})")
        return self.output_proj(out)
    return forward
