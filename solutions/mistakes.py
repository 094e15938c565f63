"""Known mistakes: deliberately wrong variants of the reference ("mutants").

The test suite must fail on every one, and each task's check must name it, so a student
whose code makes the same mistake is told which one. solutions/tests/test_mistakes.py proves
both. Each mutant is a dict:

    name       the mistake's name, as the check reports it (Verdict.mistake)
    task       the task whose tests and check must catch it
    patches    (module, attribute path, replacement): what to swap in the reference
    diagnosis  words the check's message must contain
    raises     (optional) True for a mistake that raises on some inputs (batched token positions)
               instead of returning a wrong output: checks name it from the error, the grader
               reports the error

Also a pytest plugin: `python -m pytest -p solutions.mistakes` with MINILM_MUTANT=<name>
runs the suite with that mutant in place.
"""

from __future__ import annotations

import contextlib
import importlib
import math
import os

import torch
from einops import rearrange

from solutions import attention, block, model, rope


def _rotate_split_halves(x, cos, sin):
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half].float(), x[..., half:].float()
    return torch.cat((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1).to(x.dtype)


def _angles_one_based(token_positions, d_k, theta=10000.0):
    return _original_rope_angles(token_positions + 1, d_k, theta)


_original_rope_angles = rope.rope_angles


# rope / attention shapes (issue 13)

def _angles_frequency(exponent: float):
    """rope_angles with pair i turning by θ^(−exponent·i/d_k) per position instead of θ^(−2i/d_k)."""
    def angles(token_positions, d_k, theta=10000.0):
        inv_freq = theta ** (-exponent * torch.arange(d_k // 2, dtype=torch.float64) / d_k)
        return (token_positions.to(torch.float64)[..., None] * inv_freq).float()
    return angles


def _angles_outer(token_positions, d_k, theta=10000.0):
    # torch.outer takes 1-D vectors only: right for (seq,) positions, an error for (batch, seq).
    inv_freq = theta ** (-torch.arange(0, d_k, 2, dtype=torch.float64) / d_k)
    return torch.outer(token_positions.to(torch.float64), inv_freq).float()


def _RoPE_forward_index_select(self, x, token_positions):
    # index_select takes a 1-D index: right for (seq,) positions, an error for (batch, seq).
    return rope.rotate_pairs(x, self.cos.index_select(0, token_positions), self.sin.index_select(0, token_positions))


def _mhsa_positions_without_heads_axis(self, x, token_positions=None, kv_cache=None):
    # RoPE gets token_positions (..., seq) as they come, for q and k of shape (..., heads, seq, d_k):
    # right for (seq,) positions, wrong (or an error) for (batch, seq).
    if token_positions is None:
        token_positions = torch.arange(x.shape[-2], device=x.device)
    q, k, v = (rearrange(proj(x), "... seq (heads d_k) -> ... heads seq d_k", heads=self.num_heads)
               for proj in (self.q_proj, self.k_proj, self.v_proj))
    if self.rope is not None:
        q, k = self.rope(q, token_positions), self.rope(k, token_positions)
    seq = q.shape[-2]
    causal = torch.ones(seq, seq, dtype=torch.bool, device=x.device).tril()
    out = attention.scaled_dot_product_attention(q, k, v, causal)
    return self.output_proj(rearrange(out, "... heads seq d_k -> ... seq (heads d_k)"))


def _sdpa(scale: bool = True, invert: bool = False, use_mask: bool = True, fill: float = float("-inf")):
    def sdpa(q, k, v, mask=None):
        scores = q @ k.transpose(-1, -2)
        if scale:
            scores = scores / math.sqrt(q.shape[-1])
        if mask is not None and use_mask:
            scores = scores.masked_fill(mask if invert else ~mask, fill)
        return attention.softmax(scores, dim=-1) @ v
    return sdpa


def _softmax_always_last_dim(x, dim):
    exps = torch.exp(x - x.amax(dim=-1, keepdim=True))
    return exps / exps.sum(dim=-1, keepdim=True)


def _softmax_unstable(x, dim):
    exps = torch.exp(x)
    return exps / exps.sum(dim=dim, keepdim=True)


def _rms_norm_minus_mean(x, weight, eps=1e-5):
    xf = x.float()
    xf = xf - xf.mean(-1, keepdim=True)
    return (xf / torch.sqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * weight).to(x.dtype)


def _rms_norm_eps_outside(x, weight, eps=1e-5):
    xf = x.float()
    return (xf / (torch.sqrt(xf.pow(2).mean(-1, keepdim=True)) + eps) * weight).to(x.dtype)


def _swiglu_swapped(x, w1, w2, w3):
    return _original_swiglu(x, w3, w2, w1)


def _SwiGLU_forward_swapped(self, x):
    return self.w2(swiglu_mod.silu(self.w3(x)) * self.w1(x))


swiglu_mod = importlib.import_module("solutions.swiglu")
_original_swiglu = swiglu_mod.swiglu


def _block_post_norm(self, x, token_positions=None, kv_cache=None):
    x = self.ln1(x + self.attn(x, token_positions, kv_cache))
    return self.ln2(x + self.ffn(x))


_original_lm_init = model.TransformerLM.__init__


def _lm_init_tied(self, *args, **kwargs):
    _original_lm_init(self, *args, **kwargs)
    self.lm_head.weight = self.token_embeddings.weight


def _lm_forward_no_final_norm(self, token_ids, kv_cache=None):
    start = len(kv_cache[0]) if kv_cache else 0
    positions = torch.arange(start, start + token_ids.shape[-1], device=token_ids.device)
    x = self.token_embeddings(token_ids)
    for i, layer in enumerate(self.layers):
        x = layer(x, positions, kv_cache[i] if kv_cache is not None else None)
    return self.lm_head(x)


# issue 13: named mistakes


def _mhsa_forward(merge: str = "heads d_k", scale_by_d_model: bool = False, diagonal: int = 0, rope_on_v: bool = False,
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


def _block_parallel(self, x, token_positions=None, kv_cache=None):
    return x + self.attn(self.ln1(x), token_positions, kv_cache) + self.ffn(self.ln2(x))


def _rms_norm_whole_tensor(x, weight, eps=1e-5):
    xf = x.float()
    return (xf / torch.sqrt(xf.pow(2).mean() + eps) * weight).to(x.dtype)  # one mean over every element


# issue 26: mistakes that got only "values differ"


def _softmax_global_max(x, dim):
    exps = torch.exp(x - x.max())  # one max over the whole tensor: a row far below it underflows to 0 / 0
    return exps / exps.sum(dim=dim, keepdim=True)


def _sdpa_mask_after_softmax(q, k, v, mask=None):
    weights = attention.softmax(q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1]), dim=-1)
    if mask is not None:
        weights = weights.masked_fill(~mask, 0.0)  # after the softmax: the kept weights no longer sum to 1
    return weights @ v


_original_block_init = block.TransformerBlock.__init__


def _block_init_shared_norm(self, *args, **kwargs):
    _original_block_init(self, *args, **kwargs)
    self.ln2 = self.ln1  # one RMSNorm, one gain, for both sublayers


def _block_ln1_for_both(self, x, token_positions=None, kv_cache=None):
    x = x + self.attn(self.ln1(x), token_positions, kv_cache)
    return x + self.ffn(self.ln1(x))  # ln1 again where ln2 belongs


def _rope_init_table_one_short(self, theta, d_k, max_seq_len, device=None, dtype=None):
    torch.nn.Module.__init__(self)
    self.theta, self.d_k, self.max_seq_len = theta, d_k, max_seq_len
    angles = rope.rope_angles(torch.arange(max_seq_len - 1, device=device), d_k, theta)  # positions 0 … max − 2
    self.register_buffer("cos", angles.cos(), persistent=False)
    self.register_buffer("sin", angles.sin(), persistent=False)


_original_lm_forward = model.TransformerLM.forward


def _lm_forward_probabilities(self, token_ids, kv_cache=None):
    return attention.softmax(_original_lm_forward(self, token_ids, kv_cache), dim=-1)  # probabilities, not logits


def _m(name, task, patches, diagnosis, raises=False):
    return {"name": name, "task": task, "patches": patches, "diagnosis": diagnosis, "raises": raises}


MUTANTS: list[dict] = [
    _m("rope_split_halves", "5.1", [("solutions.rope", "rotate_pairs", _rotate_split_halves)], "split halves"),
    _m("rope_one_based", "5.1", [("solutions.rope", "rope_angles", _angles_one_based)], "1-based positions"),
    # rope / attention shapes (issue 13)
    _m("rope_frequency", "5.1", [("solutions.rope", "rope_angles", _angles_frequency(1.0))], "θ^(−i/d_k)"),
    _m("rope_frequency_doubled", "5.1", [("solutions.rope", "rope_angles", _angles_frequency(4.0))], "θ^(−4i/d_k)"),
    _m("rope_positions_1d", "5.1", [("solutions.rope", "rope_angles", _angles_outer)], "token_positions[..., None]",
       raises=True),
    _m("rope_table_positions_1d", "5.2",
       [("solutions.rope", "RotaryPositionalEmbedding.forward", _RoPE_forward_index_select)],
       "self.cos[token_positions]",
       raises=True),
    _m("attention_positions_1d", "6.3",
       [("solutions.attention", "MultiHeadSelfAttention.forward", _mhsa_positions_without_heads_axis)], "heads axis",
       raises=True),
    _m("no_scaling", "6.2", [("solutions.attention", "scaled_dot_product_attention", _sdpa(scale=False))], "sqrt(d_k)"),
    _m("mask_inverted", "6.2", [("solutions.attention", "scaled_dot_product_attention", _sdpa(invert=True))],
       "inverted"),
    _m("softmax_wrong_dim", "6.1", [("solutions.attention", "softmax", _softmax_always_last_dim)], "dim"),
    _m("softmax_unstable", "6.1", [("solutions.attention", "softmax", _softmax_unstable)], "subtract the max"),
    _m("subtracts_mean", "3.1", [("solutions.rmsnorm", "rms_norm", _rms_norm_minus_mean)], "LayerNorm"),
    _m("eps_outside_sqrt", "3.1", [("solutions.rmsnorm", "rms_norm", _rms_norm_eps_outside)], "inside the square root"),
    _m("w1_w3_swapped", "4.2", [("solutions.swiglu", "swiglu", _swiglu_swapped),
                                ("solutions.swiglu", "SwiGLU.forward", _SwiGLU_forward_swapped)], "swapped"),
    _m("post_norm", "7.1", [("solutions.block", "TransformerBlock.forward", _block_post_norm)], "post-norm"),
    _m("tied_lm_head", "8.1", [("solutions.model", "TransformerLM.__init__", _lm_init_tied)], "tied"),
    _m("missing_final_norm", "8.1", [("solutions.model", "TransformerLM.forward", _lm_forward_no_final_norm)],
       "ln_final"),
    # issue 13: named mistakes
    _m("heads_not_transposed", "6.3", [("solutions.attention", "MultiHeadSelfAttention.forward",
                                        _mhsa_forward(merge="reshape"))], "moving the heads dim"),
    _m("heads_merged_d_k_first", "6.3", [("solutions.attention", "MultiHeadSelfAttention.forward",
                                          _mhsa_forward(merge="d_k heads"))], "(heads d_k)"),
    _m("scaled_by_d_model", "6.3", [("solutions.attention", "MultiHeadSelfAttention.forward",
                                     _mhsa_forward(scale_by_d_model=True))], "sqrt(d_model)"),
    _m("causal_sees_next_token", "6.3", [("solutions.attention", "MultiHeadSelfAttention.forward",
                                          _mhsa_forward(diagonal=1))], "diagonal"),
    _m("rope_on_v", "6.3", [("solutions.attention", "MultiHeadSelfAttention.forward",
                             _mhsa_forward(rope_on_v=True))], "not v"),
    _m("mask_ignored", "6.2", [("solutions.attention", "scaled_dot_product_attention", _sdpa(use_mask=False))],
       "ignores the mask"),
    _m("mask_filled_with_zero", "6.2", [("solutions.attention", "scaled_dot_product_attention", _sdpa(fill=0.0))],
       "-inf"),
    _m("parallel_block", "7.1", [("solutions.block", "TransformerBlock.forward", _block_parallel)], "sequential"),
    _m("rms_over_whole_tensor", "3.1", [("solutions.rmsnorm", "rms_norm", _rms_norm_whole_tensor)], "each vector"),
    # issue 26: mistakes that got only "values differ"
    _m("softmax_global_max", "6.1", [("solutions.attention", "softmax", _softmax_global_max)], "whole tensor"),
    _m("mask_after_softmax", "6.2", [("solutions.attention", "scaled_dot_product_attention", _sdpa_mask_after_softmax)],
       "after the softmax"),
    _m("logits_are_probabilities", "8.1", [("solutions.model", "TransformerLM.forward", _lm_forward_probabilities)],
       "sums to 1"),
    _m("shared_norm", "7.1", [("solutions.block", "TransformerBlock.__init__", _block_init_shared_norm)],
       "its own RMSNorm"),
    _m("block_ln1_for_both", "7.1", [("solutions.block", "TransformerBlock.forward", _block_ln1_for_both)], "ln2"),
    _m("rope_table_one_short", "5.2",
       [("solutions.rope", "RotaryPositionalEmbedding.__init__", _rope_init_table_one_short)], "one row per position"),
]


def all_mutants() -> list[dict]:
    """The architecture mutants above plus the training and generation ones, the quantization ones and notebook 13's."""
    try:
        from solutions.mistakes_training import MUTANTS as training
    except ModuleNotFoundError:
        training = []
    try:
        from solutions.mistakes_quantization import MUTANTS as quantization
    except ModuleNotFoundError:
        quantization = []
    from solutions.mistakes_classic import MUTANTS as classic_mutants  # notebook 13
    from solutions.mistakes_modern import MUTANTS as modern_mutants  # notebook 14

    return MUTANTS + list(training) + list(quantization) + list(classic_mutants) + list(modern_mutants)


def get(name: str) -> dict:
    for m in all_mutants():
        if m["name"] == name:
            return m
    raise ValueError(f"unknown mutant {name!r}; known: {', '.join(m['name'] for m in all_mutants())}")


@contextlib.contextmanager
def applied(mutant: dict):
    """Swap the mutant's replacements into the reference for the duration of the block."""
    undo = []
    try:
        for module_name, path, replacement in mutant["patches"]:
            owner = importlib.import_module(module_name)
            *parents, attr = path.split(".")
            for p in parents:
                owner = getattr(owner, p)
            undo.append((owner, attr, owner.__dict__[attr] if isinstance(owner, type) else getattr(owner, attr)))
            setattr(owner, attr, replacement)
        yield mutant
    finally:
        for owner, attr, original in reversed(undo):
            setattr(owner, attr, original)


def pytest_configure(config):
    name = os.environ.get("MINILM_MUTANT")
    if name:
        config._minilm_mutant = applied(get(name))
        config._minilm_mutant.__enter__()
