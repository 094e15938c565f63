"""Known mistakes: deliberately wrong variants of the reference ("mutants").

The test suite must fail on every one, and each task's check must name it, so a student
whose code makes the same mistake is told which one. solutions/tests/test_mistakes.py proves
both. Each mutant is a dict:

    name       the mistake's name, as the check reports it (Verdict.mistake)
    task       the task whose tests and check must catch it
    patches    (module, attribute path, replacement): what to swap in the reference
    diagnosis  words the check's message must contain

Also a pytest plugin: `python -m pytest -p solutions.mistakes` with MINILM_MUTANT=<name>
runs the suite with that mutant in place.
"""

from __future__ import annotations

import contextlib
import importlib
import math
import os

import torch

from solutions import attention, model, rope


def _rotate_split_halves(x, cos, sin):
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half].float(), x[..., half:].float()
    return torch.cat((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1).to(x.dtype)


def _angles_one_based(token_positions, d_k, theta=10000.0):
    return _original_rope_angles(token_positions + 1, d_k, theta)


_original_rope_angles = rope.rope_angles


def _sdpa(scale: bool = True, invert: bool = False):
    def sdpa(q, k, v, mask=None):
        scores = q @ k.transpose(-1, -2)
        if scale:
            scores = scores / math.sqrt(q.shape[-1])
        if mask is not None:
            scores = scores.masked_fill(mask if invert else ~mask, float("-inf"))
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


def _m(name, task, patches, diagnosis):
    return {"name": name, "task": task, "patches": patches, "diagnosis": diagnosis}


MUTANTS: list[dict] = [
    _m("rope_split_halves", "5.1", [("solutions.rope", "rotate_pairs", _rotate_split_halves)], "split halves"),
    _m("rope_one_based", "5.1", [("solutions.rope", "rope_angles", _angles_one_based)], "1-based positions"),
    _m("no_scaling", "6.2", [("solutions.attention", "scaled_dot_product_attention", _sdpa(scale=False))], "sqrt(d_k)"),
    _m("mask_inverted", "6.2", [("solutions.attention", "scaled_dot_product_attention", _sdpa(invert=True))], "inverted"),
    _m("softmax_wrong_dim", "6.1", [("solutions.attention", "softmax", _softmax_always_last_dim)], "dim"),
    _m("softmax_unstable", "6.1", [("solutions.attention", "softmax", _softmax_unstable)], "subtract the max"),
    _m("subtracts_mean", "3.1", [("solutions.rmsnorm", "rms_norm", _rms_norm_minus_mean)], "LayerNorm"),
    _m("eps_outside_sqrt", "3.1", [("solutions.rmsnorm", "rms_norm", _rms_norm_eps_outside)], "inside the square root"),
    _m("w1_w3_swapped", "4.2", [("solutions.swiglu", "swiglu", _swiglu_swapped),
                                ("solutions.swiglu", "SwiGLU.forward", _SwiGLU_forward_swapped)], "swapped"),
    _m("post_norm", "7.1", [("solutions.block", "TransformerBlock.forward", _block_post_norm)], "post-norm"),
    _m("tied_lm_head", "8.1", [("solutions.model", "TransformerLM.__init__", _lm_init_tied)], "tied"),
    _m("missing_final_norm", "8.1", [("solutions.model", "TransformerLM.forward", _lm_forward_no_final_norm)], "ln_final"),
]


def all_mutants() -> list[dict]:
    """The architecture mutants above plus the training and generation ones, and notebook 13's."""
    try:
        from solutions.mistakes_training import MUTANTS as training
    except ModuleNotFoundError:
        training = []
    from solutions.mistakes_classic import MUTANTS as classic_mutants  # notebook 13

    return MUTANTS + list(training) + list(classic_mutants)


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
