"""Independent oracles (instructors only: never in the student edition).

A second, functional implementation of the model built from PyTorch's own ops
(F.linear, F.rms_norm, F.silu, F.scaled_dot_product_attention) and complex-number RoPE,
written differently from the exercises on purpose, plus the known mistakes as switches.
The instructor tests compare the reference with these, and solutions/expected.py computes
the checks' named mistakes that are not in the catalogue from their switches.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor


def rope_complex(x: Tensor, positions: Tensor, theta: float = 10000.0, *, halves: bool = False,
                 offset: int = 0, freq_exponent: float = 2.0) -> Tensor:
    """RoPE as multiplication by e^{i p ω_j} on complex numbers.

    Adjacent pairs (x[2j], x[2j+1]) are the real and imaginary parts of complex number j.
    Mistake switches: halves=True pairs x[j] with x[j + d/2]; offset=1 counts positions from
    1; freq_exponent=1 uses θ^(−j/d) instead of θ^(−2j/d).
    """
    d = x.shape[-1]
    j = torch.arange(d // 2, dtype=torch.float64, device=x.device)
    omega = theta ** (-freq_exponent * j / d)
    angle = (positions.to(torch.float64) + offset)[..., None] * omega
    rotor = torch.polar(torch.ones_like(angle), angle)
    x64 = x.to(torch.float64)
    if halves:
        z = torch.complex(x64[..., : d // 2], x64[..., d // 2 :]) * rotor
        return torch.cat((z.real, z.imag), dim=-1).to(x.dtype)
    z = torch.view_as_complex(x64.reshape(*x.shape[:-1], d // 2, 2).contiguous()) * rotor
    return torch.view_as_real(z).reshape(x.shape).to(x.dtype)


def rms_norm(x: Tensor, weight: Tensor, eps: float = 1e-5) -> Tensor:
    return F.rms_norm(x.float(), (x.shape[-1],), weight.float(), eps).to(x.dtype)


def swiglu(x: Tensor, w1: Tensor, w2: Tensor, w3: Tensor) -> Tensor:
    return F.linear(F.silu(F.linear(x, w1)) * F.linear(x, w3), w2)


def attention(x: Tensor, sd: dict[str, Tensor], prefix: str, num_heads: int, theta: float | None,
              positions: Tensor | None = None, *, causal: bool = True, scale: bool = True,
              rope_halves: bool = False, rope_offset: int = 0) -> Tensor:
    """Causal multi-head self-attention from a state dict (keys prefix + q_proj.weight, …)."""
    seq, d_model = x.shape[-2], x.shape[-1]
    d_k = d_model // num_heads
    if positions is None:
        positions = torch.arange(seq, device=x.device)

    def heads(name: str) -> Tensor:  # (..., seq, d_model) → (..., heads, seq, d_k)
        y = F.linear(x, sd[prefix + name + ".weight"])
        return y.unflatten(-1, (num_heads, d_k)).transpose(-3, -2)

    q, k, v = heads("q_proj"), heads("k_proj"), heads("v_proj")
    if theta is not None:
        pos = positions.unsqueeze(-2)
        q = rope_complex(q, pos, theta, halves=rope_halves, offset=rope_offset)
        k = rope_complex(k, pos, theta, halves=rope_halves, offset=rope_offset)
    out = F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=None if scale else 1.0)
    out = out.transpose(-3, -2).flatten(-2)
    return F.linear(out, sd[prefix + "output_proj.weight"])


def block(x: Tensor, sd: dict[str, Tensor], prefix: str, num_heads: int, theta: float | None,
          positions: Tensor | None = None, *, post_norm: bool = False, **attn_mistakes) -> Tensor:
    """A pre-norm block (post_norm=True: the original Transformer's ordering, for diagnosis)."""
    def attn(h):
        return attention(h, sd, prefix + "attn.", num_heads, theta, positions, **attn_mistakes)

    def ffn(h):
        return swiglu(h, sd[prefix + "ffn.w1.weight"], sd[prefix + "ffn.w2.weight"], sd[prefix + "ffn.w3.weight"])

    ln1, ln2 = sd[prefix + "ln1.weight"], sd[prefix + "ln2.weight"]
    if post_norm:
        x = rms_norm(x + attn(x), ln1)
        return rms_norm(x + ffn(x), ln2)
    x = x + attn(rms_norm(x, ln1))
    return x + ffn(rms_norm(x, ln2))


def transformer_lm(token_ids: Tensor, sd: dict[str, Tensor], num_heads: int, theta: float = 10000.0, *,
                   final_norm: bool = True, post_norm: bool = False, tied: bool = False,
                   **attn_mistakes) -> Tensor:
    """Logits of the whole LM from its state dict (tied=True: the head reuses the embedding)."""
    num_layers = 1 + max(int(k.split(".")[1]) for k in sd if k.startswith("layers."))
    x = F.embedding(token_ids, sd["token_embeddings.weight"])
    for i in range(num_layers):
        x = block(x, sd, f"layers.{i}.", num_heads, theta, post_norm=post_norm, **attn_mistakes)
    if final_norm:
        x = rms_norm(x, sd["ln_final.weight"])
    head = sd["token_embeddings.weight"] if tied else sd["lm_head.weight"]
    return F.linear(x, head)
