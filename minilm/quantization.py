"""Task 12: int8 weight quantization for inference (notebooks/12_quantization.ipynb)."""

# YOUR FILE: write the bodies that raise NotImplementedError (see the task ids below).
# Generated from the reference by `minilm stubs`: the signatures,
# shape annotations and docstrings are the spec, and the validation calls are provided.

from __future__ import annotations

import torch
from jaxtyping import Float, Int8
from torch import Tensor, nn

from minilm.course.validate import (
    check_has_weight_matrix,
    check_int8_and_scale,
    check_last_dim,
    check_module,
    check_positive_int,
    check_weight_matrix,
)

from .linear import Linear, linear

QMAX = 127  # symmetric int8 uses −127 … 127: −128 has no positive partner, so q(−w) = −q(w) holds


def quantize_int8(
    w: Float[Tensor, "d_out d_in"], per_channel: bool = True
) -> tuple[Int8[Tensor, "d_out d_in"], Float[Tensor, "d_out_or_1 1"]]:
    """Task 12.1: symmetric absmax int8 quantization of a weight matrix → (q, scale).

    scale = max |w| / 127, taken per output channel (row) when per_channel, so scale has shape
    (d_out, 1), or over the whole matrix otherwise, shape (1, 1); always float32. Where a scale
    would be 0 (an all-zero row, or one so tiny that max |w| / 127 underflows), use 1 instead: the
    row still quantizes to zeros and dequantizes to exact zeros, and nothing divides by 0.
    q = clamp(round(w / scale), −127, 127) as torch.int8, rounding to nearest (torch.round: ties
    to even). Then dequantize_int8(q, scale) is within scale / 2 of w everywhere.
    """
    check_weight_matrix(w, "quantize_int8")
    raise NotImplementedError("Task 12.1 is not implemented yet: write quantize_int8 in minilm/quantization.py")


def dequantize_int8(q: Int8[Tensor, "d_out d_in"], scale: Float[Tensor, "d_out_or_1 1"]) -> Float[Tensor, "d_out d_in"]:
    """Task 12.1: q · scale as float32, the weight that int8 values and scales stand for."""
    check_int8_and_scale(q, scale, "dequantize_int8")
    raise NotImplementedError("Task 12.1 is not implemented yet: write dequantize_int8 in minilm/quantization.py")


class Int8Linear(nn.Module):
    """Task 12.2: a bias-free linear layer whose weight is stored as int8 values and float32 scales.

    Two buffers (saved in state_dict, moved by .to(), but not parameters: nothing here trains):
    `weight_int8`, torch.int8 of shape (out_features, in_features), starting at zeros, and
    `scale`, float32 of shape (out_features, 1) when per_channel, else (1, 1), starting at ones.
    from_linear(layer) fills them with quantize_int8(layer.weight); forward(x) is your linear
    (Task 1.1) with the dequantized weight, in x's dtype.
    """

    def __init__(self, in_features: int, out_features: int, per_channel: bool = True, device=None):
        super().__init__()
        check_positive_int(in_features, "in_features", "Int8Linear")
        check_positive_int(out_features, "out_features", "Int8Linear")
        self.in_features, self.out_features, self.per_channel = in_features, out_features, per_channel
        raise NotImplementedError("Task 12.2 is not implemented yet: "
                                  "write Int8Linear.__init__ in minilm/quantization.py")

    @classmethod
    def from_linear(cls, layer: Linear, per_channel: bool = True) -> Int8Linear:
        """The Int8Linear for `layer` (your Linear, or any module with a 2-D weight (out_features,
        in_features)), on the weight's device: weight_int8 and scale from quantize_int8."""
        check_has_weight_matrix(layer, "Int8Linear.from_linear")
        out_features, in_features = layer.weight.shape
        raise NotImplementedError("Task 12.2 is not implemented yet: "
                                  "write Int8Linear.from_linear in minilm/quantization.py")

    def forward(self, x: Float[Tensor, "... in_features"]) -> Float[Tensor, "... out_features"]:
        check_last_dim(x, self.in_features, "Int8Linear")
        raise NotImplementedError("Task 12.2 is not implemented yet: "
                                  "write Int8Linear.forward in minilm/quantization.py")

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"per_channel={self.per_channel}, bias=False")


def quantize_model(model: nn.Module, per_channel: bool = True) -> nn.Module:
    """Task 12.3: replace every Linear inside `model`, at any depth and lm_head included, by
    Int8Linear.from_linear(that Linear, per_channel), in place, and return `model` itself.

    Only Linear layers: the token embedding and the RMSNorm gains stay as they are (float). An
    Int8Linear already there is left alone, so quantizing twice changes nothing. Replace a child
    with module.add_module(name, new), which also works for a ModuleList's children "0", "1", ….
    """
    check_module(model, "quantize_model")
    raise NotImplementedError("Task 12.3 is not implemented yet: write quantize_model in minilm/quantization.py")
