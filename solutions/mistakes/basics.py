"""Known mistakes in notebooks 1–4 (Linear, Embedding, RMSNorm, SwiGLU: Tasks 1.1–4.3).
See solutions/mistakes/__init__.py for the format and how they are used."""

from __future__ import annotations

import torch

from solutions import oracles, swiglu
from solutions.mistakes import mutant, variant

_original_swiglu = swiglu.swiglu


def _linear_not_transposed(x, weight):
    return x @ weight if x.shape[-1] == weight.shape[0] else x @ weight.T


def _rms_norm_no_weight(x, weight, eps=1e-5):
    return oracles.rms_norm(x, torch.ones_like(weight), eps)


def _RMSNorm_ignores_eps(self, x):
    return oracles.rms_norm(x, self.weight, 1e-5)


def _rms_norm_minus_mean(x, weight, eps=1e-5):
    xf = x.float()
    xf = xf - xf.mean(-1, keepdim=True)
    return (xf / torch.sqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * weight).to(x.dtype)


def _rms_norm_eps_outside(x, weight, eps=1e-5):
    xf = x.float()
    return (xf / (torch.sqrt(xf.pow(2).mean(-1, keepdim=True)) + eps) * weight).to(x.dtype)


def _rms_norm_whole_tensor(x, weight, eps=1e-5):
    xf = x.float()
    return (xf / torch.sqrt(xf.pow(2).mean() + eps) * weight).to(x.dtype)  # one mean over every element


def _swiglu_no_gate(x, w1, w2, w3):
    return torch.nn.functional.linear(torch.nn.functional.silu(torch.nn.functional.linear(x, w1)), w2)


def _SwiGLU_no_gate(self, x):
    return _swiglu_no_gate(x, self.w1.weight, self.w2.weight, self.w3.weight)


def _swiglu_swapped(x, w1, w2, w3):
    return _original_swiglu(x, w3, w2, w1)


def _SwiGLU_forward_swapped(self, x):
    return self.w2(swiglu.silu(self.w3(x)) * self.w1(x))


_R, _S = "solutions.rmsnorm", "solutions.swiglu"

def _linear_through_view(x, weight):  # flattens the leading dims with .view, which needs contiguous memory
    return (x.view(-1, x.shape[-1]) @ weight.T).view(*x.shape[:-1], weight.shape[0])


def _rms_norm_in_input_dtype(x, weight, eps=1e-5):  # no float32 upcast: x² overflows float16 near 300
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight


MISTAKES: list[dict] = [
    # Task 1.1: linear
    mutant("linear_view", "1.1", [("solutions.linear", "linear", _linear_through_view)], "non-contiguous",
           broken="a non-contiguous x"),
    variant("not_transposed", "1.1", [("solutions.linear", "linear", _linear_not_transposed)]),
    # Task 3.1: rms_norm
    mutant("rms_norm_no_upcast", "3.1", [("solutions.rmsnorm", "rms_norm", _rms_norm_in_input_dtype)], "float16",
           broken="a float16 x"),
    mutant("subtracts_mean", "3.1", [(_R, "rms_norm", _rms_norm_minus_mean)], "LayerNorm"),
    mutant("eps_outside_sqrt", "3.1", [(_R, "rms_norm", _rms_norm_eps_outside)], "inside the square root"),
    mutant("rms_over_whole_tensor", "3.1", [(_R, "rms_norm", _rms_norm_whole_tensor)], "each vector"),
    variant("ignores_weight", "3.1", [(_R, "rms_norm", _rms_norm_no_weight)]),
    # Task 3.2: RMSNorm
    variant("ignores_weight", "3.2", [(_R, "rms_norm", _rms_norm_no_weight)]),
    variant("ignores_eps", "3.2", [(_R, "RMSNorm.forward", _RMSNorm_ignores_eps)]),
    # Task 4.1: silu
    variant("sigmoid_only", "4.1", [(_S, "silu", torch.sigmoid)]),
    variant("relu", "4.1", [(_S, "silu", torch.relu)]),
    # Task 4.2: swiglu
    mutant("w1_w3_swapped", "4.2", [(_S, "swiglu", _swiglu_swapped), (_S, "SwiGLU.forward", _SwiGLU_forward_swapped)],
           "swapped"),
    variant("no_gate", "4.2", [(_S, "swiglu", _swiglu_no_gate)]),
    # Task 4.3: SwiGLU
    variant("no_gate", "4.3", [(_S, "SwiGLU.forward", _SwiGLU_no_gate)]),
]
