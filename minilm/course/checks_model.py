"""Checks for the architecture tasks 1.1–8.1 (provided). See minilm/course/checks.py.

Each check runs your code on fixed inputs (modules get fixed weights through load_state_dict)
and compares with the reference's outputs stored in minilm/course/expected.pt."""

from __future__ import annotations

import math

import torch

import minilm
from minilm.course.checks import CheckFailed, compare, expect, register

# A small model shape that exercises every code path quickly.
VOCAB, CONTEXT, D_MODEL, LAYERS, HEADS, D_FF, THETA = 97, 32, 32, 2, 4, 48, 10000.0


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _randn(*shape, seed: int = 0, scale: float = 1.0) -> torch.Tensor:
    return torch.randn(*shape, generator=_gen(seed)) * scale


def lm_state_dict_keys(num_layers: int) -> list[str]:
    """The exact state_dict keys of TransformerLM (CS336 naming), in order."""
    per_layer = ["ln1.weight", "attn.q_proj.weight", "attn.k_proj.weight", "attn.v_proj.weight",
                 "attn.output_proj.weight", "ln2.weight", "ffn.w1.weight", "ffn.w2.weight", "ffn.w3.weight"]
    keys = ["token_embeddings.weight"]
    for i in range(num_layers):
        keys += [f"layers.{i}.{k}" for k in per_layer]
    return keys + ["ln_final.weight", "lm_head.weight"]


def lm_parameter_count(vocab_size: int, d_model: int, num_layers: int, d_ff: int) -> int:
    """Closed form: embeddings + layers × (4 d² attention + 3 d d_ff SwiGLU + 2 d norms) + final norm + head."""
    per_layer = 4 * d_model * d_model + 3 * d_model * d_ff + 2 * d_model
    return vocab_size * d_model + num_layers * per_layer + d_model + d_model * vocab_size


def _fixed_state(module, seed: int, scale: float = 0.3) -> dict[str, torch.Tensor]:
    """Load fixed weights into `module` (after its keys were checked): random, scaled by `scale`,
    norm gains near 1 so a swapped or missing norm shows. Returns the state loaded."""
    g = _gen(seed)
    state = {}
    for name, value in sorted(module.state_dict().items()):
        w = torch.randn(value.shape, generator=g)
        owner = name.split(".")[-2] if "." in name else ""
        state[name] = 1 + 0.3 * w if owner.startswith("ln") else w * scale
    with torch.no_grad():
        module.load_state_dict(state)
    return state


def _keys(module, expected: list[str], what: str) -> None:
    got = list(module.state_dict())
    if sorted(got) != sorted(expected):
        missing, extra = sorted(set(expected) - set(got)), sorted(set(got) - set(expected))
        parts = []
        if missing:
            parts.append(f"missing {', '.join(missing[:4])}")
        if extra:
            parts.append(f"unexpected {', '.join(extra[:4])}")
        raise CheckFailed(f"{what}: state_dict keys differ from the contract ({'; '.join(parts)})", "state_dict_names")


def _init_stats(w: torch.Tensor, std: float, what: str) -> None:
    w = w.detach().double()
    expect(w.abs().max() <= 3 * std * 1.0001,
           f"{what}: some weights lie beyond ±3 std ({w.abs().max().item() / std:.2f} std): use a truncated normal "
           f"cut at a=-3·std, b=3·std (trunc_normal_'s a and b are absolute, not in units of std)",
           "init_not_truncated")
    # A normal truncated at ±3σ has standard deviation 0.9866σ.
    got = w.std().item()
    expect(abs(got / (0.9866 * std) - 1) < 0.05,
           f"{what}: the weights' std is {got:.3g}, expected about {0.9866 * std:.3g} (std {std:.3g} truncated at ±3 std)",
           "init_wrong_std")
    expect(abs(w.mean().item()) < 0.05 * std, f"{what}: the weights' mean should be about 0", "init_not_centered")


