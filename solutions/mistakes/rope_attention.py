"""Known mistakes in notebooks 5–6 (RoPE, softmax, attention: Tasks 5.1–6.3).
See solutions/mistakes/__init__.py for the format and how they are used."""

from __future__ import annotations

import math

import torch

from solutions import attention, oracles, rope
from solutions.mistakes import mutant, variant
from solutions.mistakes._shared import mhsa_forward

_original_rope_angles = rope.rope_angles
_original_rope_init = rope.RotaryPositionalEmbedding.__init__

_A = "solutions.attention"


# ---------------------------------------------------------------- 5.1, 5.2: RoPE


def _rotate_split_halves(x, cos, sin):
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half].float(), x[..., half:].float()
    return torch.cat((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1).to(x.dtype)


def _angles_one_based(token_positions, d_k, theta=10000.0):
    return _original_rope_angles(token_positions + 1, d_k, theta)


def _angles(exponent: float = 2.0, sign: float = 1.0):
    """rope_angles with pair i turning by θ^(−exponent·i/d_k) per position instead of θ^(−2i/d_k), or
    the other way round (sign −1)."""
    def angles(token_positions, d_k, theta=10000.0):
        inv_freq = theta ** (-exponent * torch.arange(d_k // 2, dtype=torch.float64) / d_k)
        return (sign * token_positions.to(torch.float64)[..., None] * inv_freq).float()
    return angles


def _angles_outer(token_positions, d_k, theta=10000.0):
    # torch.outer takes 1-D vectors only: right for (seq,) positions, an error for (batch, seq).
    inv_freq = theta ** (-torch.arange(0, d_k, 2, dtype=torch.float64) / d_k)
    return torch.outer(token_positions.to(torch.float64), inv_freq).float()


def _RoPE_forward_index_select(self, x, token_positions):
    # index_select takes a 1-D index: right for (seq,) positions, an error for (batch, seq).
    return rope.rotate_pairs(x, self.cos.index_select(0, token_positions), self.sin.index_select(0, token_positions))


def _rope_init_table_one_short(self, theta, d_k, max_seq_len, device=None, dtype=None):
    _original_rope_init(self, theta, d_k, max_seq_len, device, dtype)
    self.cos, self.sin = self.cos[:-1], self.sin[:-1]  # positions 0 … max − 2: the last one has no row


# ---------------------------------------------------------------- 6.1, 6.2: softmax, attention


def _softmax_always_last_dim(x, dim):
    exps = torch.exp(x - x.amax(dim=-1, keepdim=True))
    return exps / exps.sum(dim=-1, keepdim=True)


def _softmax_unstable(x, dim):
    exps = torch.exp(x)
    return exps / exps.sum(dim=dim, keepdim=True)


def _softmax_global_max(x, dim):
    exps = torch.exp(x - x.max())  # one max over the whole tensor: a row far below it underflows to 0 / 0
    return exps / exps.sum(dim=dim, keepdim=True)


def _softmax_over(fixed: int):
    def softmax(x, dim=-1):
        return torch.softmax(x, dim=fixed)
    return softmax


def _sdpa(scale: bool = True, invert: bool = False, use_mask: bool = True, fill: float = float("-inf")):
    def sdpa(q, k, v, mask=None):
        scores = q @ k.transpose(-1, -2)
        if scale:
            scores = scores / math.sqrt(q.shape[-1])
        if mask is not None and use_mask:
            scores = scores.masked_fill(mask if invert else ~mask, fill)
        return attention.softmax(scores, dim=-1) @ v
    return sdpa


def _sdpa_mask_after_softmax(q, k, v, mask=None):
    weights = attention.softmax(q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1]), dim=-1)
    if mask is not None:
        weights = weights.masked_fill(~mask, 0.0)  # after the softmax: the kept weights no longer sum to 1
    return weights @ v


def _sdpa_over_queries(q, k, v, mask=None):
    scores = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    return torch.softmax(scores, dim=-2) @ v


# ---------------------------------------------------------------- 6.3: multi-head self-attention


def _theta(attn) -> float | None:
    return attn.rope.theta if attn.rope is not None else None


def _sd(module, prefix: str) -> dict[str, torch.Tensor]:
    return {prefix + k: v for k, v in module.state_dict().items()}


def _mhsa_variant(**switches):
    """MultiHeadSelfAttention.forward replaced by the oracle with a mistake's switches."""
    def forward(self, x, token_positions=None, kv_cache=None):
        theta = None if switches.get("no_rope") else _theta(self)
        kw = {k: v for k, v in switches.items() if k != "no_rope"}
        return oracles.attention(x, _sd(self, "attn."), "attn.", self.num_heads, theta, token_positions, **kw)
    return forward


def _mhsa_heads_interleaved(self, x, token_positions=None, kv_cache=None):
    sd, heads = _sd(self, "attn."), self.num_heads
    d_k = x.shape[-1] // heads
    perm = torch.arange(x.shape[-1]).view(d_k, heads).T.reshape(-1)  # "(d_k heads)" instead of "(heads d_k)"
    for n in ("q_proj", "k_proj", "v_proj"):
        sd[f"attn.{n}.weight"] = sd[f"attn.{n}.weight"][perm]
    sd["attn.output_proj.weight"] = sd["attn.output_proj.weight"][:, perm]
    return oracles.attention(x, sd, "attn.", heads, _theta(self), token_positions)


_MHSA = "MultiHeadSelfAttention.forward"

MISTAKES: list[dict] = [
    # Task 5.1: rotate_pairs, rope_angles
    mutant("rope_split_halves", "5.1", [("solutions.rope", "rotate_pairs", _rotate_split_halves)], "split halves"),
    mutant("rope_one_based", "5.1", [("solutions.rope", "rope_angles", _angles_one_based)], "1-based positions"),
    mutant("rope_frequency", "5.1", [("solutions.rope", "rope_angles", _angles(1.0))], "θ^(−i/d_k)"),
    mutant("rope_frequency_doubled", "5.1", [("solutions.rope", "rope_angles", _angles(4.0))],
           "θ^(−4i/d_k)"),
    mutant("rope_positions_1d", "5.1", [("solutions.rope", "rope_angles", _angles_outer)],
           "token_positions[..., None]", raises=True),
    variant("rope_wrong_direction", "5.1", [("solutions.rope", "rope_angles", _angles(sign=-1.0))]),
    # Task 5.2: RotaryPositionalEmbedding
    mutant("rope_table_positions_1d", "5.2",
           [("solutions.rope", "RotaryPositionalEmbedding.forward", _RoPE_forward_index_select)],
           "self.cos[token_positions]", raises=True),
    mutant("rope_table_one_short", "5.2",
           [("solutions.rope", "RotaryPositionalEmbedding.__init__", _rope_init_table_one_short)],
           "one row per position"),
    variant("rope_wrong_direction", "5.2", [("solutions.rope", "rope_angles", _angles(sign=-1.0))]),
    # Task 6.1: softmax
    mutant("softmax_wrong_dim", "6.1", [(_A, "softmax", _softmax_always_last_dim)], "dim"),
    mutant("softmax_unstable", "6.1", [(_A, "softmax", _softmax_unstable)], "subtract the max"),
    mutant("softmax_global_max", "6.1", [(_A, "softmax", _softmax_global_max)], "each slice's own max"),
    *[variant(f"softmax_wrong_dim ({d})", "6.1", [(_A, "softmax", _softmax_over(d))]) for d in (-1, 0, 1)],
    # Task 6.2: scaled_dot_product_attention
    mutant("no_scaling", "6.2", [(_A, "scaled_dot_product_attention", _sdpa(scale=False))], "sqrt(d_k)"),
    mutant("mask_inverted", "6.2", [(_A, "scaled_dot_product_attention", _sdpa(invert=True))], "inverted"),
    mutant("mask_ignored", "6.2", [(_A, "scaled_dot_product_attention", _sdpa(use_mask=False))], "ignores the mask"),
    mutant("mask_filled_with_zero", "6.2", [(_A, "scaled_dot_product_attention", _sdpa(fill=0.0))], "-inf"),
    mutant("mask_after_softmax", "6.2", [(_A, "scaled_dot_product_attention", _sdpa_mask_after_softmax)],
           "after the softmax"),
    variant("softmax_over_queries", "6.2", [(_A, "scaled_dot_product_attention", _sdpa_over_queries)]),
    # Task 6.3: MultiHeadSelfAttention
    mutant("attention_positions_1d", "6.3", [(_A, _MHSA, mhsa_forward(positions_per_head=False))], "heads axis",
           raises=True),
    mutant("heads_not_transposed", "6.3", [(_A, _MHSA, mhsa_forward(merge="reshape"))], "moving the heads dim"),
    mutant("heads_merged_d_k_first", "6.3", [(_A, _MHSA, mhsa_forward(merge="d_k heads"))], "(heads d_k)"),
    mutant("scaled_by_d_model", "6.3", [(_A, _MHSA, mhsa_forward(scale_by_d_model=True))], "sqrt(d_model)"),
    mutant("causal_sees_next_token", "6.3", [(_A, _MHSA, mhsa_forward(diagonal=1))], "diagonal"),
    mutant("rope_on_v", "6.3", [(_A, _MHSA, mhsa_forward(rope_on_v=True))], "not v"),
    variant("not_causal", "6.3", [(_A, _MHSA, _mhsa_variant(causal=False))]),
    variant("no_rope", "6.3", [(_A, _MHSA, _mhsa_variant(no_rope=True))]),
    variant("heads_interleaved", "6.3", [(_A, _MHSA, _mhsa_heads_interleaved)]),
]
