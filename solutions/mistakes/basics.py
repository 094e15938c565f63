"""Known mistakes in notebooks 1–4 (Linear, Embedding, RMSNorm, SwiGLU: Tasks 1.1–4.3).
See solutions/mistakes/__init__.py for the format and how they are used."""

from __future__ import annotations

import torch

from solutions import swiglu
from solutions.mistakes import mutant

_original_swiglu = swiglu.swiglu


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


def _swiglu_swapped(x, w1, w2, w3):
    return _original_swiglu(x, w3, w2, w1)


def _SwiGLU_forward_swapped(self, x):
    return self.w2(swiglu.silu(self.w3(x)) * self.w1(x))


MISTAKES: list[dict] = [
    # Task 3.1: rms_norm
    mutant("subtracts_mean", "3.1", [("solutions.rmsnorm", "rms_norm", _rms_norm_minus_mean)], "LayerNorm"),
    mutant("eps_outside_sqrt", "3.1", [("solutions.rmsnorm", "rms_norm", _rms_norm_eps_outside)],
           "inside the square root"),
    mutant("rms_over_whole_tensor", "3.1", [("solutions.rmsnorm", "rms_norm", _rms_norm_whole_tensor)], "each vector"),
    # Task 4.2: swiglu
    mutant("w1_w3_swapped", "4.2", [("solutions.swiglu", "swiglu", _swiglu_swapped),
                                    ("solutions.swiglu", "SwiGLU.forward", _SwiGLU_forward_swapped)], "swapped"),
]
