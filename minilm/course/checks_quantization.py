"""Checks for the quantization tasks 12.1–12.3 (provided). See minilm/course/checks.py.

Each check compares with the reference's outputs on the same inputs, stored in
minilm/course/expected.pt, and with invariants that need no reference: int8 values in −127 … 127, the
dequantized weight within half a step of the original, the state_dict's names and dtypes, which
modules a model holds after quantize_model.
"""

from __future__ import annotations

import torch
from torch import nn

import minilm
from minilm.course.checks import CheckFailed, compare, expect, register
from minilm.course.checks_model import _fixed_state

# A small model for the quantize_model check: every kind of Linear, in a ModuleList.
VOCAB, CONTEXT, D_MODEL, LAYERS, HEADS, D_FF = 53, 12, 16, 2, 2, 24


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _weight(seed: int = 1) -> torch.Tensor:
    """A (6, 10) weight whose rows differ in size, with an all-zero row (2) and an outlier (row 4)."""
    w = torch.randn(6, 10, generator=_gen(seed)) * torch.tensor([[0.02], [0.5], [1.0], [0.1], [0.05], [3.0]])
    w[2] = 0.0
    w[4, 7] = 1.5  # 30x the rest of its row
    return w


class _Holder(nn.Module):
    """A stand-in linear layer: just a weight (out_features, in_features), so Task 12.2 is checked
    on Int8Linear alone."""

    def __init__(self, weight: torch.Tensor):
        super().__init__()
        self.weight = nn.Parameter(weight.clone())


def _pair(got, what: str):
    expect(isinstance(got, tuple) and len(got) == 2,
           f"{what} must return a tuple (q, scale), got {type(got).__name__}")
    q, scale = got
    expect(isinstance(q, torch.Tensor) and q.dtype == torch.int8,
           f"{what}: q must be a torch.int8 tensor, got {q.dtype if isinstance(q, torch.Tensor) else type(q).__name__}")
    expect(isinstance(scale, torch.Tensor) and scale.dtype == torch.float32,
           f"{what}: scale must be a float32 tensor, got "
           f"{scale.dtype if isinstance(scale, torch.Tensor) else type(scale).__name__}")
    return q, scale


_Q_MISTAKES = {
    "truncates": "your int8 values are w / scale truncated towards zero (.to(torch.int8) cuts the fraction off): "
                 "round to the nearest integer first, with torch.round",
    "absmax_not_over_127": "your scale is max |w| itself, so every value lands on −1, 0 or 1: divide max |w| by 127 "
                           "so the largest weight maps to ±127",
}


@register("12.1")
def check_quantize_int8() -> str:
    w = _weight()
    q, scale = _pair(minilm.quantize_int8(w), "quantize_int8(w)")
    if tuple(scale.shape) == (1, w.shape[1]):
        raise CheckFailed(f"scale has shape {tuple(scale.shape)}, one per input column: per channel means one scale "
                          f"per output row (the rows of a (d_out, d_in) weight), shape ({w.shape[0]}, 1)",
                          "scale_per_column")
    expect(tuple(scale.shape) == (w.shape[0], 1), f"per-channel scale must have shape (d_out, 1) = ({w.shape[0]}, 1), "
           f"got {tuple(scale.shape)}")
    expect(tuple(q.shape) == tuple(w.shape), f"q must have w's shape {tuple(w.shape)}, got {tuple(q.shape)}")
    expect(bool(torch.isfinite(scale).all()) and bool((scale > 0).all()),
           "every scale must be finite and > 0: an all-zero row (row 2 here) must not divide by 0; give it scale 1")
    expect(int(q.min()) >= -127, f"q holds {int(q.min())}: symmetric int8 uses −127 … 127 with scale max |w| / 127 "
           "(−128 has no positive partner)", "range_128")
    compare(q.float(), "the int8 values q for a (6, 10) weight, per channel", _Q_MISTAKES, atol=0, rtol=0)
    compare(scale, "the per-channel scales", _Q_MISTAKES)
    expect(bool((q[2] == 0).all()), "the all-zero row must quantize to zeros")
    back = minilm.dequantize_int8(q, scale)
    expect(isinstance(back, torch.Tensor) and back.dtype == torch.float32,
           "dequantize_int8 must return a float32 tensor")
    compare(back, "dequantize_int8(q, scale)")
    expect(bool(((back - w).abs() <= scale / 2 * (1 + 1e-5)).all()),
           "dequantize_int8(quantize_int8(w)) must be within half a step (scale / 2) of w everywhere")
    qt, st = _pair(minilm.quantize_int8(w, per_channel=False), "quantize_int8(w, per_channel=False)")
    expect(tuple(st.shape) == (1, 1), f"per-tensor scale must have shape (1, 1), got {tuple(st.shape)}")
    compare(qt.float(), "the int8 values q per tensor", _Q_MISTAKES, atol=0, rtol=0)
    compare(st, "the per-tensor scale", _Q_MISTAKES)
    compare(minilm.dequantize_int8(qt, st), "dequantize_int8 per tensor")
    half = torch.tensor([[0.5, 1.5, 2.5, -0.5, -2.5, 127.0]])  # exact ties: torch.round rounds them to even
    compare(minilm.quantize_int8(half)[0].float(), "q for ties (w / scale = ±0.5, 1.5, 2.5)", _Q_MISTAKES, atol=0,
            rtol=0)
    low = minilm.quantize_int8(w.to(torch.bfloat16))[1]
    expect(low.dtype == torch.float32, f"a bfloat16 weight must still give float32 scales, got {low.dtype}")
    return "symmetric absmax int8 per row and per tensor, rounded, zero rows safe, within half a step"


_LINEAR_MISTAKES = {
    "forgets_scale": "your output is x times the int8 values: multiply them by their scale (dequantize_int8) first",
}


@register("12.2")
def check_int8_linear() -> str:
    w = _weight(2)
    layer = minilm.Int8Linear.from_linear(_Holder(w))
    expect(isinstance(layer, minilm.Int8Linear), f"Int8Linear.from_linear must return an Int8Linear, got "
           f"{type(layer).__name__}")
    keys = sorted(layer.state_dict())
    if "weight" in keys:
        raise CheckFailed("the state_dict holds the float weight as well: an Int8Linear keeps only weight_int8 and "
                          "scale, or it saves nothing", "keeps_float_weight")
    if not keys:
        raise CheckFailed("the state_dict is empty: store weight_int8 and scale with self.register_buffer(name, "
                          "tensor), so state_dict(), load_state_dict() and .to() see them", "not_buffers")
    expect(keys == ["scale", "weight_int8"], f"state_dict keys must be ['scale', 'weight_int8'], got {keys}")
    expect(not list(layer.parameters()), "Int8Linear must have no parameters: weight_int8 and scale are buffers "
           "(register_buffer), nothing here trains")
    state = layer.state_dict()
    expect(state["weight_int8"].dtype == torch.int8 and tuple(state["weight_int8"].shape) == (6, 10),
           f"weight_int8 must be int8 of shape (out_features, in_features) = (6, 10), got "
           f"{state['weight_int8'].dtype}, {tuple(state['weight_int8'].shape)}")
    expect(state["scale"].dtype == torch.float32 and tuple(state["scale"].shape) == (6, 1),
           f"scale must be float32 of shape (out_features, 1) = (6, 1), got {state['scale'].dtype}, "
           f"{tuple(state['scale'].shape)}")
    compare(state["weight_int8"].float(), "weight_int8 from a (6, 10) weight", atol=0, rtol=0)
    x = torch.randn(3, 4, 10, generator=_gen(3))
    y = layer(x)
    compare(y, "Int8Linear(x) for x (3, 4, 10)", _LINEAR_MISTAKES)
    float_y = x @ w.T
    bound = x.abs().sum(-1, keepdim=True) * state["scale"].T / 2  # |Σ_i x_i (ŵ_ji − w_ji)| ≤ Σ_i |x_i| · scale_j / 2
    expect(bool(((y - float_y).abs() <= bound * (1 + 1e-4) + 1e-6).all()),
           "Int8Linear(x) must be within the quantization error of the float layer: Σ |x_i| · scale_j / 2")
    fresh = minilm.Int8Linear(10, 6)
    fresh.load_state_dict(state)
    compare(fresh(x), "a new Int8Linear(10, 6) after load_state_dict", want=y)
    per_tensor = minilm.Int8Linear.from_linear(_Holder(w), per_channel=False)
    expect(tuple(per_tensor.state_dict()["scale"].shape) == (1, 1),
           "Int8Linear.from_linear(layer, per_channel=False) must hold one scale, shape (1, 1)")
    compare(per_tensor(x), "Int8Linear(x) per tensor", _LINEAR_MISTAKES)
    y64 = layer(x.double())
    expect(y64.dtype == torch.float64, f"a float64 x must give a float64 output, got {y64.dtype}")
    return "int8 weight and float32 scales as buffers, forward within the quantization error, state_dict round trip"


def _small_lm():
    torch.manual_seed(0)
    model = minilm.TransformerLM(VOCAB, CONTEXT, D_MODEL, LAYERS, HEADS, D_FF)
    _fixed_state(model, seed=41)
    return model


def _floats(model) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in model.state_dict().items() if v.is_floating_point()}


@register("12.3")
def check_quantize_model() -> str:
    model = _small_lm()
    before = _floats(model)
    ids = torch.randint(0, VOCAB, (2, 10), generator=_gen(4))
    with torch.no_grad():
        float_logits = model(ids)
    compare(float_logits, "the float model's logits (your TransformerLM, Task 8.1)")
    got = minilm.quantize_model(model)
    expect(got is model, f"quantize_model must quantize in place and return the model itself, got "
           f"{type(got).__name__}")
    keys = set(model.state_dict())
    if "lm_head.weight" in keys:
        raise CheckFailed("lm_head is still a float Linear: quantize every Linear, the output head included",
                          "lm_head_left_float")
    if any(k.startswith("layers.") and k.endswith("proj.weight") or k.endswith(("w1.weight", "w2.weight", "w3.weight"))
           for k in keys):
        raise CheckFailed("the Linears inside the layers are still float: they sit at any depth (layers is a "
                          "ModuleList of blocks holding attn and ffn), so look at the children's children too",
                          "top_level_only")
    linears = [n for n, m in model.named_modules() if isinstance(m, minilm.Linear)]
    expect(not linears, f"these Linears are still float: {', '.join(linears[:3])}")
    n_int8 = sum(isinstance(m, minilm.Int8Linear) for m in model.modules())
    expect(n_int8 == 7 * LAYERS + 1, f"expected {7 * LAYERS + 1} Int8Linear modules (4 attention and 3 feed-forward "
           f"projections per layer, and lm_head), got {n_int8}")
    after = model.state_dict()
    for name, value in before.items():
        if name.startswith("token_embeddings") or name.split(".")[-2].startswith("ln"):
            expect(name in after and torch.equal(after[name], value),
                   f"{name} changed: the embedding and the RMSNorm gains stay float, only Linears are quantized",
                   "quantizes_every_weight")
    try:
        with torch.no_grad():
            logits = model(ids)
    except AttributeError as e:
        if "weight" not in str(e):
            raise
        raise CheckFailed(f"after quantize_model your model raised AttributeError: {e}. Call the sub-modules "
                          "(self.w1(x)), never read a Linear's .weight: an Int8Linear has none") from None
    compare(logits, "the quantized model's logits")
    expect(bool((logits - float_logits).abs().max() < 0.1 * float_logits.abs().max()),
           "the quantized model's logits must stay close to the float model's")
    again = _floats(model)
    minilm.quantize_model(model)
    expect(set(model.state_dict()) == keys and all(torch.equal(model.state_dict()[k], v) for k, v in again.items()),
           "quantizing a quantized model must change nothing (leave Int8Linear modules alone)")
    per_tensor = minilm.quantize_model(_small_lm(), per_channel=False)
    with torch.no_grad():
        compare(per_tensor(ids), "the logits quantized per tensor")
    return "every Linear (lm_head too) is an Int8Linear in place; embedding and norms stay float"
