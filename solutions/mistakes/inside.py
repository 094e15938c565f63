"""Known mistakes in notebook 15 (inside the trained model: Tasks 15.1–15.3).
See solutions/mistakes/__init__.py for the format and how they are used."""

from __future__ import annotations

import math

import torch
from einops import rearrange

from solutions import inside
from solutions.mistakes import mutant

_I = "solutions.inside"


# ---------------------------------------------------------------- 15.1: attention_pattern


def _pattern(scale: str = "d_k", causal: bool = True, rope: bool = True, dim: int = -1, split: str = "(heads d_k)"):
    """attention_pattern with one step done otherwise: the scale (d_k, d_model or none), the mask, RoPE, the
    softmax's dim or the head split."""
    def attention_pattern(attn, x):
        seq = x.shape[-2]
        q, k = (rearrange(proj(x), f"... seq {split} -> ... heads seq d_k", heads=attn.num_heads)
                for proj in (attn.q_proj, attn.k_proj))
        if rope and attn.rope is not None:
            positions = torch.arange(seq)
            q, k = attn.rope(q, positions), attn.rope(k, positions)
        scores = q @ k.transpose(-2, -1) / {"d_k": math.sqrt(attn.d_k), "d_model": math.sqrt(attn.d_model),
                                            "none": 1.0}[scale]
        if causal:
            scores = scores.masked_fill(~torch.ones(seq, seq, dtype=torch.bool).tril(), float("-inf"))
        return inside.softmax(scores, dim=dim)
    return attention_pattern


# ---------------------------------------------------------------- 15.2: head scores


def _previous_self(pattern):
    return pattern.diagonal(dim1=-2, dim2=-1).mean(-1)


def _previous_over_seq(pattern):
    return pattern.diagonal(offset=-1, dim1=-2, dim2=-1).sum(-1) / pattern.shape[-1]


def _induction_earlier_copy(pattern, period):
    return pattern.diagonal(offset=-period, dim1=-2, dim2=-1).mean(-1)


def _induction_from_first_half(pattern, period):
    return pattern.diagonal(offset=1 - period, dim1=-2, dim2=-1).mean(-1)


# ---------------------------------------------------------------- 15.3: ablate_heads


def _ablate(kind: str):
    """ablate_heads zeroing every num_heads-th column (interleaved), the output's columns (output), the weight's
    columns in place (weights) or the heads not listed (others)."""
    def ablate_heads(attn, heads):
        d_k, off = attn.d_k, torch.zeros(attn.d_model, dtype=torch.bool)
        for h in heads:
            if kind == "interleaved":
                off[h::attn.num_heads] = True
            else:
                off[h * d_k:(h + 1) * d_k] = True
        if kind == "others":
            off = ~off
        if kind == "output":
            return attn.output_proj.register_forward_hook(lambda module, args, out: out.masked_fill(off, 0.0))
        if kind == "weights":
            with torch.no_grad():
                attn.output_proj.weight[:, off] = 0.0
            return attn.output_proj.register_forward_pre_hook(lambda module, args: None)
        return attn.output_proj.register_forward_pre_hook(lambda module, args: (args[0].masked_fill(off, 0.0),))
    return ablate_heads


MISTAKES = [
    # Task 15.1: attention_pattern
    mutant("pattern_no_scaling", "15.1", [(_I, "attention_pattern", _pattern(scale="none"))], "√d_k"),
    mutant("pattern_scaled_by_d_model", "15.1", [(_I, "attention_pattern", _pattern(scale="d_model"))],
           "not √d_model"),
    mutant("pattern_not_causal", "15.1", [(_I, "attention_pattern", _pattern(causal=False))], "causal mask"),
    mutant("pattern_no_rope", "15.1", [(_I, "attention_pattern", _pattern(rope=False))], "attn.rope"),
    mutant("pattern_softmax_over_queries", "15.1", [(_I, "attention_pattern", _pattern(dim=-2))], "over the keys"),
    mutant("pattern_heads_interleaved", "15.1", [(_I, "attention_pattern", _pattern(split="(d_k heads)"))],
           "(heads d_k)"),
    # Task 15.2: previous_token_score, induction_score
    mutant("prev_score_self", "15.2", [(_I, "previous_token_score", _previous_self)], "key t − 1"),
    mutant("prev_score_over_seq", "15.2", [(_I, "previous_token_score", _previous_over_seq)], "seq − 1 queries"),
    mutant("induction_earlier_copy", "15.2", [(_I, "induction_score", _induction_earlier_copy)],
           "token after the earlier copy"),
    mutant("induction_from_first_half", "15.2", [(_I, "induction_score", _induction_from_first_half)],
           "t = period … seq − 1"),
    # Task 15.3: ablate_heads
    mutant("ablate_interleaved", "15.3", [(_I, "ablate_heads", _ablate("interleaved"))], "(heads d_k)"),
    mutant("ablate_output_columns", "15.3", [(_I, "ablate_heads", _ablate("output"))], "output_proj's input"),
    mutant("ablate_weights", "15.3", [(_I, "ablate_heads", _ablate("weights"))], "handle.remove()"),
    mutant("ablate_the_others", "15.3", [(_I, "ablate_heads", _ablate("others"))], "keep the others"),
]
