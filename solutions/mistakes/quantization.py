"""Known mistakes in notebook 12 (int8 quantization: Tasks 12.1–12.3).
See solutions/mistakes/__init__.py for the format and how they are used."""

from __future__ import annotations

import torch
from torch import nn

from solutions import quantization as quant
from solutions.mistakes import mutant

_original_quantize_model = quant.quantize_model


def _quantize(scale_of, rounding=torch.round, lo: int = -127, hi: int = 127):
    """quantize_int8 with the scale, the rounding or the range replaced."""
    def quantize_int8(w, per_channel=True):
        w = w.float()
        absmax = w.abs().amax(dim=1, keepdim=True) if per_channel else w.abs().amax().reshape(1, 1)
        scale = scale_of(w, absmax, per_channel)
        scale = torch.where(scale > 0, scale, torch.ones_like(scale))
        return rounding(w / scale).clamp(lo, hi).to(torch.int8), scale
    return quantize_int8


def _scale_per_column(w, absmax, per_channel):
    return (w.abs().amax(dim=0, keepdim=True) if per_channel else absmax) / 127  # one scale per input column


# ---------------------------------------------------------------- 12.2


def _init_plain_attributes(self, in_features, out_features, per_channel=True, device=None):
    nn.Module.__init__(self)
    self.in_features, self.out_features, self.per_channel = in_features, out_features, per_channel
    # plain tensors, not buffers: state_dict() and .to() never see them
    self.weight_int8 = torch.zeros(out_features, in_features, dtype=torch.int8, device=device)
    self.scale = torch.ones(out_features if per_channel else 1, 1, device=device)


def _from_linear_keeps_float(cls, layer, per_channel=True):
    module = _original_from_linear.__func__(cls, layer, per_channel)
    module.weight = nn.Parameter(layer.weight.detach().clone())  # the float weight kept "just in case"
    return module


def _forward_keeps_float(self, x):
    if "weight" in self._parameters:
        return quant.linear(x, self.weight.to(x.dtype))
    return _original_forward(self, x)


def _forward_forgets_scale(self, x):
    return quant.linear(x, self.weight_int8.to(x.dtype))  # the int8 values as if they were the weights


_original_from_linear = quant.Int8Linear.__dict__["from_linear"]
_original_forward = quant.Int8Linear.forward


# ---------------------------------------------------------------- 12.3


def _quantize_model_skips_lm_head(model, per_channel=True):
    for name, child in list(model.named_children()):
        if name == "lm_head":
            continue  # "the output layer is special": but the spec quantizes every Linear
        if isinstance(child, quant.Linear):
            model.add_module(name, quant.Int8Linear.from_linear(child, per_channel))
        else:
            _quantize_model_skips_lm_head(child, per_channel)
    return model


def _quantize_model_top_level(model, per_channel=True):
    for name, child in list(model.named_children()):  # no recursion: only direct children are seen
        if isinstance(child, quant.Linear):
            model.add_module(name, quant.Int8Linear.from_linear(child, per_channel))
    return model


def _quantize_model_every_weight(model, per_channel=True):
    _original_quantize_model(model, per_channel)
    with torch.no_grad():
        for module in model.modules():  # embeddings and RMSNorm gains rounded to int8 as well
            weight = module._parameters.get("weight")
            if weight is not None:
                w2d = weight.reshape(weight.shape[0], -1) if weight.ndim > 1 else weight.reshape(1, -1)
                q, scale = quant.quantize_int8(w2d, per_channel)
                weight.copy_(quant.dequantize_int8(q, scale).reshape(weight.shape))
    return model



_Q = "solutions.quantization"

MISTAKES: list[dict] = [
    # Task 12.1: quantize_int8
    mutant("scale_per_column", "12.1", [(_Q, "quantize_int8", _quantize(_scale_per_column))], "output row"),
    mutant("truncates", "12.1",
           [(_Q, "quantize_int8", _quantize(lambda w, a, pc: a / 127, rounding=torch.trunc))], "torch.round"),
    mutant("absmax_not_over_127", "12.1", [(_Q, "quantize_int8", _quantize(lambda w, a, pc: a))], "by 127"),
    mutant("range_128", "12.1", [(_Q, "quantize_int8", _quantize(lambda w, a, pc: a / 128, lo=-128))], "127"),
    # Task 12.2: Int8Linear
    mutant("not_buffers", "12.2", [(_Q, "Int8Linear.__init__", _init_plain_attributes)], "register_buffer"),
    mutant("keeps_float_weight", "12.2", [(_Q, "Int8Linear.from_linear", classmethod(_from_linear_keeps_float)),
                                          (_Q, "Int8Linear.forward", _forward_keeps_float)], "float weight"),
    mutant("forgets_scale", "12.2", [(_Q, "Int8Linear.forward", _forward_forgets_scale)], "scale"),
    # Task 12.3: quantize_model
    mutant("lm_head_left_float", "12.3", [(_Q, "quantize_model", _quantize_model_skips_lm_head)], "lm_head"),
    mutant("top_level_only", "12.3", [(_Q, "quantize_model", _quantize_model_top_level)], "at any depth"),
    mutant("quantizes_every_weight", "12.3", [(_Q, "quantize_model", _quantize_model_every_weight)], "embedding"),
]
