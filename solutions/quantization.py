"""Task 12: int8 weight quantization for inference (notebooks/12_quantization.ipynb)."""

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
    # BEGIN SOLUTION 12.1
    w = w.float()  # a bfloat16 w would round the scales and w / scale a second time
    absmax = w.abs().amax(dim=1, keepdim=True) if per_channel else w.abs().amax().reshape(1, 1)
    scale = absmax / QMAX
    scale = torch.where(scale > 0, scale, torch.ones_like(scale))
    q = torch.round(w / scale).clamp(-QMAX, QMAX).to(torch.int8)
    return q, scale
    # END SOLUTION


def dequantize_int8(q: Int8[Tensor, "d_out d_in"], scale: Float[Tensor, "d_out_or_1 1"]) -> Float[Tensor, "d_out d_in"]:
    """Task 12.1: q · scale as float32, the weight that int8 values and scales stand for."""
    check_int8_and_scale(q, scale, "dequantize_int8")
    # BEGIN SOLUTION 12.1
    return q.float() * scale.float()
    # END SOLUTION


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
        # BEGIN SOLUTION 12.2
        self.register_buffer("weight_int8", torch.zeros(out_features, in_features, dtype=torch.int8, device=device))
        self.register_buffer("scale", torch.ones(out_features if per_channel else 1, 1, device=device))
        # END SOLUTION

    @classmethod
    def from_linear(cls, layer: Linear, per_channel: bool = True) -> Int8Linear:
        """The Int8Linear for `layer` (your Linear, or any module with a 2-D weight (out_features,
        in_features)), on the weight's device: weight_int8 and scale from quantize_int8."""
        check_has_weight_matrix(layer, "Int8Linear.from_linear")
        out_features, in_features = layer.weight.shape
        # BEGIN SOLUTION 12.2
        q, scale = quantize_int8(layer.weight.detach(), per_channel)
        module = cls(in_features, out_features, per_channel, device=layer.weight.device)
        module.weight_int8.copy_(q)
        module.scale.copy_(scale)
        return module
        # END SOLUTION

    def forward(self, x: Float[Tensor, "... in_features"]) -> Float[Tensor, "... out_features"]:
        check_last_dim(x, self.in_features, "Int8Linear")
        # BEGIN SOLUTION 12.2
        # Dequantizing the whole weight is the clearest; int8 kernels instead multiply x by the int8
        # matrix and scale each output by its row's scale, which is the same sum.
        return linear(x, dequantize_int8(self.weight_int8, self.scale).to(x.dtype))
        # END SOLUTION

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
    # BEGIN SOLUTION 12.3
    for name, child in list(model.named_children()):
        if isinstance(child, Linear):
            model.add_module(name, Int8Linear.from_linear(child, per_channel))
        else:
            quantize_model(child, per_channel)
    return model
    # END SOLUTION
