"""What two groups' mistakes share: MultiHeadSelfAttention.forward and TransformerLM.forward with
one step done wrong. Tasks 6.3 (rope_attention.py) and 8.1 (model.py) patch them in for their own
mistakes, Task 11.3 (generation.py) for the cache path's."""

from __future__ import annotations

import math

import torch
from einops import rearrange

from minilm.course.validate import check_token_ids
from solutions import attention


def mhsa_forward(merge: str = "heads d_k", scale_by_d_model: bool = False, diagonal: int = 0, rope_on_v: bool = False,
                 positions_per_head: bool = True, offset: bool = True, prefill_mask: bool = True,
                 mask_offset: bool = True, cache_before_rope: bool = False):
    """MultiHeadSelfAttention.forward as the reference writes it, with one step done wrong: the
    heads' merge, the scale, the mask's diagonal, RoPE on v, RoPE's positions without the heads
    axis (right for (seq,) positions, wrong or an error for (batch, seq)), or a part of the cache
    path (Task 11.3: positions restarting at 0, no mask in a prefill, a mask without the keys −
    queries offset, keys cached before RoPE and the whole cache rotated at 0 … keys − 1 on every
    call)."""
    def forward(self, x, token_positions=None, kv_cache=None):
        if token_positions is None:
            start = len(kv_cache) if kv_cache is not None and offset else 0
            token_positions = torch.arange(start, start + x.shape[-2], device=x.device)
        q, k, v = (rearrange(proj(x), "... seq (heads d_k) -> ... heads seq d_k", heads=self.num_heads)
                   for proj in (self.q_proj, self.k_proj, self.v_proj))
        if self.rope is not None:
            positions = token_positions.unsqueeze(-2) if positions_per_head else token_positions
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


def lm_forward(final_norm: bool = True, offset: bool = True):
    """TransformerLM.forward as the reference writes it (without its context-length check), with no
    final norm (Task 8.1) or with positions restarting at 0 on every call with a cache (Task 11.3)."""
    def forward(self, token_ids, kv_cache=None):
        check_token_ids(token_ids, self.vocab_size, "TransformerLM")
        start = len(kv_cache[0]) if kv_cache and offset else 0
        positions = torch.arange(start, start + token_ids.shape[-1], device=token_ids.device)
        x = self.token_embeddings(token_ids)
        for i, layer in enumerate(self.layers):
            x = layer(x, positions, kv_cache[i] if kv_cache is not None else None)
        return self.lm_head(self.ln_final(x) if final_norm else x)
    return forward
