"""Known mistakes in notebook 11 (sampling, generation and the KV cache: Tasks 11.1–11.3).
See solutions/mistakes/__init__.py for the format and how they are used."""

from __future__ import annotations

import torch

from solutions.mistakes import mutant
from solutions.mistakes._shared import lm_forward, mhsa_forward


def _next_token_probs_drops_crossing(logits, temperature=1.0, top_k=None, top_p=None):
    logits = logits.float()
    if temperature == 0:
        return torch.zeros_like(logits).scatter_(-1, logits.argmax(dim=-1, keepdim=True), 1.0)
    logits = logits / temperature
    if top_k is not None and top_k < logits.shape[-1]:
        logits = logits.masked_fill(logits < torch.topk(logits, top_k, dim=-1).values[..., -1:], float("-inf"))
    if top_p is not None:
        probs, order = torch.softmax(logits, dim=-1).sort(dim=-1, descending=True)
        drop_sorted = probs.cumsum(dim=-1) > top_p  # drops the token that crosses top_p
        drop_sorted[..., 0] = False  # (but keeps the most likely, as the spec says)
        drop = torch.empty_like(drop_sorted).scatter_(-1, order, drop_sorted)
        logits = logits.masked_fill(drop, float("-inf"))
    return torch.softmax(logits, dim=-1)


_A, _MHSA = "solutions.attention", "MultiHeadSelfAttention.forward"

MISTAKES: list[dict] = [
    # Task 11.1: next_token_probs
    mutant("top_p_drops_crossing", "11.1",
           [("solutions.generation", "next_token_probs", _next_token_probs_drops_crossing)], "crosses top_p"),
    # Task 11.3: the KV cache. The position offset forgotten wherever it is written: the model's positions
    # and attention's default ones.
    mutant("cache_position_zero", "11.3",
           [("solutions.model", "TransformerLM.forward", lm_forward(offset=False)),
            (_A, _MHSA, mhsa_forward(offset=False))], "position 0"),
    mutant("prefill_not_causal", "11.3", [(_A, _MHSA, mhsa_forward(prefill_mask=False))], "prefill"),
    mutant("cache_mask_not_offset", "11.3", [(_A, _MHSA, mhsa_forward(mask_offset=False))], "keys − queries"),
    mutant("cache_keys_before_rope", "11.3", [(_A, _MHSA, mhsa_forward(cache_before_rope=True))],
           "keys must be cached after RoPE, rotated at their own positions"),
]
