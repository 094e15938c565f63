"""Known mistakes in the quantization tasks (12.1–12.3): deliberately wrong variants of the
reference. See solutions/mistakes.py for the format and how they are used: the tests must fail
on every one, and checks.run(task).mistake must name it."""

from __future__ import annotations

import torch
from torch import nn

from solutions import quantization as quant

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


def _m(name, task, patches, diagnosis):
    return {"name": name, "task": task, "patches": patches, "diagnosis": diagnosis}


_Q = "solutions.quantization"

MUTANTS: list[dict] = [
    _m("scale_per_column", "12.1", [(_Q, "quantize_int8", _quantize(_scale_per_column))], "output row"),
    _m("truncates", "12.1", [(_Q, "quantize_int8", _quantize(lambda w, a, pc: a / 127, rounding=torch.trunc))],
       "torch.round"),
    _m("absmax_not_over_127", "12.1", [(_Q, "quantize_int8", _quantize(lambda w, a, pc: a))], "by 127"),
    _m("range_128", "12.1", [(_Q, "quantize_int8", _quantize(lambda w, a, pc: a / 128, lo=-128))], "127"),
    _m("not_buffers", "12.2", [(_Q, "Int8Linear.__init__", _init_plain_attributes)], "register_buffer"),
    _m("keeps_float_weight", "12.2", [(_Q, "Int8Linear.from_linear", classmethod(_from_linear_keeps_float)),
                                      (_Q, "Int8Linear.forward", _forward_keeps_float)], "float weight"),
    _m("forgets_scale", "12.2", [(_Q, "Int8Linear.forward", _forward_forgets_scale)], "scale"),
    _m("lm_head_left_float", "12.3", [(_Q, "quantize_model", _quantize_model_skips_lm_head)], "lm_head"),
    _m("top_level_only", "12.3", [(_Q, "quantize_model", _quantize_model_top_level)], "at any depth"),
    _m("quantizes_every_weight", "12.3", [(_Q, "quantize_model", _quantize_model_every_weight)], "embedding"),
]
