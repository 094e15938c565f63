"""Specs of notebook 12: int8 quantization (provided). See minilm/course/exercises/__init__.py.

Besides the reference's outputs, the invariants need none: int8 values in −127 … 127, scales'
shapes, the layer's output within the quantization error of the float layer, the state_dict's
names and dtypes, which modules a model holds after quantize_model."""

from __future__ import annotations

import torch
from torch import nn

from minilm.course.exercises import (
    Problem,
    Property,
    at_edge,
    differs,
    first,
    gen,
    keeps_inputs,
    lm_shapes,
    load_matching,
    load_state,
    randn,
    shown,
    spec,
    weights,
)

# ---------------------------------------------------------------- 12.1: quantize_int8 and dequantize_int8


def rowed_weight(seed: int) -> torch.Tensor:
    """A (6, 10) weight whose rows differ in size, with an all-zero row (2) and an outlier (row 4)."""
    w = randn(seed, 6, 10) * torch.tensor([[0.02], [0.5], [1.0], [0.1], [0.05], [3.0]])
    w[2] = 0.0
    w[4, 7] = 1.5  # 30x the rest of its row
    return w


def _quantize_collect(m, c):
    result = m.quantize_int8(c["w"], per_channel=c["per_channel"])
    if not (type(result) is tuple and len(result) == 2):
        raise TypeError(f"quantize_int8 must return a tuple (q, scale), got {type(result).__name__}")
    q, scale = result
    # dequantize_int8 on the case's own int8 values and scales, so a wrong scale shape above costs it nothing
    return {"q": q, "scale": scale, "back": m.dequantize_int8(c["q"], c["q_scale"])}


def _kind(t) -> str:
    return str(t.dtype).replace("torch.", "") if type(t) is torch.Tensor else type(t).__name__


def _quantize_invariant(got, c) -> Problem | None:
    q, scale, w = got["q"], got["scale"], c["w"]
    d_out, d_in = w.shape
    if type(q) is not torch.Tensor or q.dtype != torch.int8:
        return Problem(f"quantize_int8 on {c['what']}: q must be a torch.int8 tensor, got {_kind(q)}")
    if type(scale) is not torch.Tensor or scale.dtype != torch.float32:
        return Problem(f"quantize_int8 on {c['what']}: scale must be a float32 tensor (for any weight dtype), got "
                       f"{_kind(scale)}")
    want = (d_out, 1) if c["per_channel"] else (1, 1)
    if c["per_channel"] and tuple(scale.shape) == (1, d_in) and d_in != 1:
        return Problem(f"scale has shape {tuple(scale.shape)}, one per input column: per channel means one scale per "
                       f"output row (the rows of a (d_out, d_in) weight), shape ({d_out}, 1)", "scale_per_column")
    if tuple(scale.shape) != want:
        return Problem(f"{'per-channel' if c['per_channel'] else 'per-tensor'} scale must have shape {want}, got "
                       f"{tuple(scale.shape)}")
    if tuple(q.shape) != tuple(w.shape):
        return Problem(f"q must have w's shape {tuple(w.shape)}, got {tuple(q.shape)}")
    if not (bool(torch.isfinite(scale).all()) and bool((scale > 0).all())):
        return Problem("every scale must be finite and > 0: an all-zero row must not divide by 0; give it scale 1")
    if int(q.min()) < -127:
        return Problem(f"q holds {int(q.min())}: symmetric int8 uses −127 … 127 with scale max |w| / 127 (−128 has no "
                       "positive partner)", "range_128")
    if bool(((w == 0).all(-1) & (q != 0).any(-1)).any()):
        return Problem("an all-zero row must quantize to zeros")
    zero_rows = (w == 0).all(-1) if c["per_channel"] else (w == 0).all().reshape(1)
    if bool(zero_rows.any()) and not bool((scale.reshape(-1)[zero_rows] == 1).all()):
        return Problem(f"an all-zero {'row' if c['per_channel'] else 'weight'} gets scale exactly 1 (the contract: max "
                       f"|w| / 127 would be 0, use 1 instead), got {scale.reshape(-1)[zero_rows].tolist()}")
    back = got["back"]
    if type(back) is not torch.Tensor or back.dtype != torch.float32 or back.shape != w.shape:
        return Problem(f"dequantize_int8 must return a float32 tensor of q's shape, got {_kind(back)}")
    return None


def _quantize_cases():
    w = rowed_weight(1)
    ties = torch.tensor([[0.5, 1.5, 2.5, -0.5, -2.5, 127.0]])  # exact ties: torch.round rounds them to even
    cases = [dict(w=w, per_channel=True, what="a (6, 10) weight with a zero row and an outlier, per channel"),
             dict(w=w, per_channel=False, what="the same weight per tensor"),
             dict(w=ties, per_channel=True, what="ties (w / scale = ±0.5, 1.5, 2.5)"),
             dict(w=w.to(torch.bfloat16), per_channel=True, what="the weight in bfloat16")]
    g = gen(2)
    for c in cases:  # int8 values and positive scales for dequantize_int8, one scale per row or one in all
        c["q"] = torch.randint(-127, 128, tuple(c["w"].shape), generator=g).to(torch.int8)
        c["q_scale"] = torch.rand(c["w"].shape[0] if c["per_channel"] else 1, 1, generator=g) + 1e-3
    return cases


def _dequantize_alone(m):
    q = torch.tensor([[-127, -1, 0, 1, 127], [3, -3, 64, -64, 0]], dtype=torch.int8)
    scale = torch.tensor([[0.5], [0.25]])
    got = m.dequantize_int8(q, scale)
    d = differs(got, q.float() * scale, atol=0, rtol=0)
    if d is None and got.dtype != torch.float32:
        d = f"came out {str(got.dtype).replace('torch.', '')}"
    return d and f"dequantize_int8 on q [[-127, -1, 0, 1, 127], [3, -3, 64, -64, 0]] and scales [[0.5], [0.25]]: {d}"


def _quantize_error(m):
    w = randn(86, 6, 10) * torch.tensor([[1e-3], [0.1], [1.0], [10.0], [0.0], [3.0]])
    for per_channel in (True, False):
        q, scale = m.quantize_int8(w, per_channel=per_channel)
        back = m.dequantize_int8(q, scale)
        if q.dtype != torch.int8 or q.abs().max() > 127:
            return f"per_channel={per_channel}: q must be int8 within ±127, got {str(q.dtype).replace('torch.', '')}"
        over = ((back - w).abs() - scale.float() / 2).max().item()
        if over > 1e-6:
            return (f"per_channel={per_channel}, rows of size 1e-3 … 10 and a zero row: dequantize(quantize(w)) is "
                    f"off by {over:.3g} more than scale / 2 somewhere")
    return None


def _quantize_underflow(m):
    w = randn(87, 3, 5)
    w[1] = 5e-44  # a float32 subnormal: 5e-44 / 127 rounds to 0
    for per_channel, x, what in ((True, w, "w (3, 5) whose row 1 is all 5e-44, per channel"),
                                 (False, torch.full((3, 5), 5e-44), "w (3, 5) all 5e-44, per tensor")):
        row = 1 if per_channel else 0
        found = at_edge(f"on {what} (max |w| / 127 underflows to 0), row {row}'s scale and q against 1 and zeros",
                        lambda: torch.cat([t.double().reshape(t.shape[0], -1)[row] for t in
                                           m.quantize_int8(x, per_channel=per_channel)[::-1]]),
                        torch.tensor([1.0, 0, 0, 0, 0, 0], dtype=torch.float64), atol=0, rtol=0)
        if found:
            return found
    return None


def _quantize_ties(m):
    w = torch.tensor([[0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 3.5, 127.0]])  # scale 1: w / scale is w itself
    q, _ = m.quantize_int8(w)
    got = [int(v) for v in q.flatten()] if type(q) is torch.Tensor else None
    want = [0, 2, 2, 0, -2, -2, 4, 127]
    return None if got == want else (f"on w = [0.5, 1.5, 2.5, −0.5, −1.5, −2.5, 3.5, 127] (scale 1), q is "
                                     f"{shown(got)}, expected {want} (ties to even)")


def _quantize_bfloat16(m):
    w = rowed_weight(88).to(torch.bfloat16)
    for per_channel in (True, False):
        q, scale = m.quantize_int8(w, per_channel=per_channel)
        q32, scale32 = m.quantize_int8(w.float(), per_channel=per_channel)
        d = differs(scale.float(), scale32, atol=0, rtol=0) or differs(q.float(), q32.float(), atol=0, rtol=0)
        if d:
            return f"on a bfloat16 w (6, 10), per_channel={per_channel}, (q, scale) and those of its float32 copy: {d}"
    return None


def _quantize_odd(m):
    w = randn(112, 4, 6)
    w[:, 0] = -3.0  # every row's largest magnitude is negative
    for per_channel in (True, False):
        q, scale = m.quantize_int8(w, per_channel)
        q_neg, scale_neg = m.quantize_int8(-w, per_channel)
        d = differs(scale_neg, scale, atol=0, rtol=0)
        if d:
            return (f"per_channel={per_channel}, on w (4, 6) whose largest magnitudes are negative, the scales of w "
                    f"and of −w: {d}")
        d = differs(q_neg.int(), -q.int(), atol=0, rtol=0) if type(q) is torch.Tensor else None
        if d:
            return f"per_channel={per_channel}, on w (4, 6), q for −w and −q for w: {d}"
    return None


def _quantize_shapes(m):
    w = randn(113, 4, 6)
    for per_channel, want in ((True, (4, 1)), (False, (1, 1))):
        q, scale = m.quantize_int8(w, per_channel)
        got = [tuple(t.shape) if type(t) is torch.Tensor else type(t).__name__ for t in (q, scale)]
        if got != [(4, 6), want] or q.dtype != torch.int8 or scale.dtype != torch.float32:
            kinds = [f"{shown(list(t.shape))} {str(t.dtype)[6:]}" if type(t) is torch.Tensor else "not a tensor"
                     for t in (q, scale)]
            return (f"per_channel={per_channel}, on w (4, 6): q is {kinds[0]} and scale {kinds[1]}, expected [4, 6] "
                    f"int8 and {list(want)} float32")
    return None


QUANTIZE_PROPERTIES = (
    Property("q has w's shape and dtype int8; scale is float32 of shape (d_out, 1) per channel, (1, 1) per tensor",
             _quantize_shapes, first=True,
             example="q, s = minilm.quantize_int8(torch.randn(4, 6), per_channel=False)\nprint(q.shape, s.shape)  "
                     "# (4, 6) and (1, 1)",
             idea="keep the reduced dims: amax(dim=1, keepdim=True) per channel, and reshape(1, 1) the one absmax of "
                  "the whole matrix, so that w / scale broadcasts and dequantize gets what it expects"),
    Property("the quantization is symmetric: −w gives −q with the same scale, as the scale comes from max |w|",
             _quantize_odd,
             example="w = torch.tensor([[-3.0, 1.0, 2.0]])\nq, s = minilm.quantize_int8(w)\n"
                     "q2, s2 = minilm.quantize_int8(-w)\nprint(s, s2, q, q2)  # same scale, opposite q",
             idea="take the largest magnitude, w.abs().amax(…), not the largest value: a row whose biggest weight "
                  "is negative would otherwise get a scale too small, and its negative weights would clip at −127"),
    Property("round(w / scale) rounds to the nearest integer, ties to even (torch.round)", _quantize_ties,
             example="q, _ = minilm.quantize_int8(torch.tensor([[0.5, 1.5, 2.5, -0.5, 127.0]]))\n"
                     "print(q)  # 0, 2, 2, 0, 127",
             idea="torch.round(w / scale): floor(x + 0.5) rounds every tie up, and .to(torch.int8) truncates"),
    keeps_inputs("quantize_int8", lambda: (randn(111, 4, 6),), "on w (4, 6)"),
    Property("a row so tiny that max |w| / 127 underflows to 0 gets scale 1 and quantizes to zeros",
             _quantize_underflow,
             example="w = torch.randn(3, 5)\nw[1] = 5e-44  # max |w| / 127 is 0 in float32\n"
                     "q, scale = minilm.quantize_int8(w)\nprint(scale[1], q[1])  # 1 and zeros",
             idea="compute max |w| / 127 first, then replace every scale that came out 0 by 1 (torch.where on the "
                  "scale itself): testing max |w| > 0 misses a max too small to survive the division"),
    Property("dequantize_int8(q, scale) is q · scale as float32, each row times its own scale", _dequantize_alone,
             example="q = torch.tensor([[-127, 0, 127], [3, -3, 64]], dtype=torch.int8)\n"
                     "print(minilm.dequantize_int8(q, torch.tensor([[0.5], [0.25]])))  # q times 0.5, then 0.25",
             idea="convert q to float32 and multiply it by scale, which broadcasts over each row: the int8 values "
                  "count steps of size scale"),
    Property("dequantize(quantize(w)) lies within scale / 2 of w everywhere, zero rows included", _quantize_error,
             example="w = torch.randn(6, 10) * torch.tensor([[1e-3], [0.1], [1.0], [10.0], [0.0], [3.0]])\n"
                     "q, scale = minilm.quantize_int8(w)\nprint(((minilm.dequantize_int8(q, scale) - w).abs() - "
                     "scale / 2).max())  # ≤ 0",
             idea="scale = max|w| / 127 per row (1 where that is 0), then round(w / scale) clamped to ±127"),
    Property("a bfloat16 w gives exactly what its float32 copy gives", _quantize_bfloat16,
             example="w = torch.randn(6, 10).to(torch.bfloat16)\nprint(minilm.quantize_int8(w)[1] - "
                     "minilm.quantize_int8(w.float())[1])  # zeros",
             idea="convert w to float32 first (w.float()), then take max |w| / 127 and w / scale: in bfloat16 the "
                  "scale and the quotient are rounded to 8 bits"),
)

spec("12.1", properties=QUANTIZE_PROPERTIES,
     collect=_quantize_collect, cases=_quantize_cases, invariant=_quantize_invariant,
     outputs={"q": "the int8 values q", "scale": "the scales", "back": "dequantize_int8(q, scale)"},
     mistakes={
         "truncates": "your int8 values are w / scale truncated towards zero (.to(torch.int8) cuts the fraction off): "
                      "round to the nearest integer first, with torch.round",
         "absmax_not_over_127": "your scale is max |w| itself, so every value lands on −1, 0 or 1: divide max |w| by "
                                "127 so the largest weight maps to ±127",
     },
     passed="symmetric absmax int8 per row and per tensor, rounded, zero rows safe, within half a step")

# ---------------------------------------------------------------- 12.2: Int8Linear


class _Weight(nn.Module):
    """A stand-in linear layer, just a weight (out_features, in_features): 12.2 is checked on Int8Linear alone."""

    def __init__(self, weight: torch.Tensor):
        super().__init__()
        self.weight = nn.Parameter(weight.clone())


def _int8_linear_collect(m, c):
    d_out, d_in = c["w"].shape
    layer = m.Int8Linear.from_linear(_Weight(c["w"]), per_channel=c["per_channel"])
    state = layer.state_dict()
    out = {"is_int8linear": isinstance(layer, m.Int8Linear), "keys": sorted(state),
           "dtypes": [str(state[k].dtype) for k in sorted(state)], "parameters": len(list(layer.parameters())),
           **{k: state[k] if k in state else "missing" for k in ("weight_int8", "scale")}}
    out["y"] = layer(c["x"])
    fresh = m.Int8Linear(d_in, d_out, per_channel=c["per_channel"])
    # extra or missing keys are judged from "keys"
    per_channel = c["per_channel"]
    load_matching(fresh, state, f"Int8Linear({d_in}, {d_out}, per_channel={per_channel}) loading the state_dict of "
                                f"from_linear(W ({d_out}, {d_in}), per_channel={per_channel})")
    out["y_loaded"] = fresh(c["x"])
    return out


def _int8_linear_invariant(got, c) -> Problem | None:
    keys, (d_out, d_in) = got["keys"], c["w"].shape
    if got["is_int8linear"] is not True:
        return Problem("Int8Linear.from_linear must return an Int8Linear")
    if "weight" in keys:
        return Problem("the state_dict holds the float weight as well: an Int8Linear keeps only weight_int8 and scale, "
                       "or it saves nothing", "keeps_float_weight")
    if not keys:
        return Problem("the state_dict is empty: store weight_int8 and scale with self.register_buffer(name, tensor), "
                       "so state_dict(), load_state_dict() and .to() see them", "not_buffers")
    if keys != ["scale", "weight_int8"]:
        return Problem("state_dict keys must be ['scale', 'weight_int8']", detail=f", got {keys}")
    if got["parameters"] != 0:
        return Problem("Int8Linear must have no parameters: weight_int8 and scale are buffers (register_buffer), "
                       "nothing here trains")
    q, scale = got["weight_int8"], got["scale"]
    rows = d_out if c["per_channel"] else 1
    if q.dtype != torch.int8 or tuple(q.shape) != (d_out, d_in):
        return Problem(f"weight_int8 must be int8 of shape (out_features, in_features) = ({d_out}, {d_in}), got "
                       f"{_kind(q)}, {tuple(q.shape)}")
    if scale.dtype != torch.float32 or tuple(scale.shape) != (rows, 1):
        return Problem(f"scale must be float32 of shape ({rows}, 1), got {_kind(scale)}, {tuple(scale.shape)}")
    y, x = got["y"], c["x"]
    if type(y) is not torch.Tensor or y.dtype != x.dtype:
        return Problem(f"a {_kind(x)} x must give a {_kind(x)} output, got {_kind(y)}")
    float_y = x.double() @ c["w"].double().T
    # |Σ_i x_i (ŵ_ji − w_ji)| ≤ Σ_i |x_i| · scale_j / 2
    bound = x.double().abs().sum(-1, keepdim=True) * scale.double().T / 2
    if y.shape != float_y.shape or not bool(((y.double() - float_y).abs() <= bound * (1 + 1e-4) + 1e-5).all()):
        if y.shape == float_y.shape and torch.allclose(y.double(), x.double() @ q.double().T, rtol=1e-4, atol=1e-4):
            return Problem("your output is x times the int8 values, unscaled: forward must multiply them by the "
                           "scale (dequantize_int8), and from_linear must keep the scale quantize_int8 gave",
                           "forgets_scale")
        return Problem("Int8Linear(x) must be within the quantization error of the float layer: Σ |x_i| · scale_j / 2")
    return None


def _int8_fresh(m):
    for per_channel in (True, False):
        layer = m.Int8Linear(5, 3, per_channel=per_channel)
        q, scale, rows = layer.weight_int8, layer.scale, 3 if per_channel else 1
        if type(q) is not torch.Tensor or q.dtype != torch.int8 or tuple(q.shape) != (3, 5) or bool(q.any()):
            return (f"a fresh Int8Linear(5, 3, per_channel={per_channel}) holds weight_int8 {_held(q)}, expected int8 "
                    "zeros of shape (3, 5)")
        if (type(scale) is not torch.Tensor or scale.dtype != torch.float32 or tuple(scale.shape) != (rows, 1)
                or not bool((scale == 1).all())):
            return (f"a fresh Int8Linear(5, 3, per_channel={per_channel}) holds scale {_held(scale)}, expected "
                    f"float32 ones of shape ({rows}, 1)")
    elsewhere = [(k, t.device.type) for k, t in m.Int8Linear(5, 3, device="meta").state_dict().items()
                 if t.device.type != "meta"]
    return elsewhere and f"Int8Linear(5, 3, device='meta'): {elsewhere[0][0]} is on {elsewhere[0][1]}" or None


def _held(t) -> str:
    """A buffer for a message: its dtype, shape and range."""
    if type(t) is not torch.Tensor:
        return type(t).__name__
    span = f", values {t.min().item():g} … {t.max().item():g}" if t.numel() and t.device.type != "meta" else ""
    return f"{_kind(t)} of shape {tuple(t.shape)}{span}"


def _int8_set(m, q: list, scale: list, per_channel: bool):
    """An Int8Linear whose buffers are set by hand to q and scale."""
    q = torch.tensor(q, dtype=torch.int8)
    layer = m.Int8Linear(q.shape[1], q.shape[0], per_channel=per_channel)
    with torch.no_grad():
        layer.weight_int8.copy_(q)
        layer.scale.copy_(torch.tensor(scale))
    return layer


def _int8_forward(m):
    q = [[1, -2, 3], [127, 0, -127]]
    for per_channel, scale, w in ((True, [[0.5], [0.01]], [[0.5, -1.0, 1.5], [1.27, 0.0, -1.27]]),
                                  (False, [[0.25]], [[0.25, -0.5, 0.75], [31.75, 0.0, -31.75]])):
        layer = _int8_set(m, q, scale, per_channel)
        found = at_edge(f"with weight_int8 {q} and scale {scale} set by hand (per_channel={per_channel}), the output "
                        f"on the rows of the identity (3, 3) and the dequantized weight's transpose {w}",
                        lambda: layer(torch.eye(3)), torch.tensor(w).T)
        if found:
            return found
    return None


def _int8_from_linear(m):
    w = randn(112, 4, 6) * torch.tensor([[0.1], [1.0], [3.0], [0.02]])
    source = _Weight(w)
    source.weight.requires_grad_(True)
    for per_channel in (True, False):
        layer = m.Int8Linear.from_linear(source, per_channel=per_channel)
        q, scale = m.quantize_int8(w.clone(), per_channel=per_channel)
        for name, want in (("weight_int8", q), ("scale", scale)):
            got = getattr(layer, name)
            d = differs(got.double(), want.double(), atol=0, rtol=0) if type(got) is torch.Tensor else "no tensor"
            if d:
                return (f"Int8Linear.from_linear of a (4, 6) weight, per_channel={per_channel}: {name} and your "
                        f"quantize_int8(weight, per_channel={per_channel})'s: {d}")
            if got.requires_grad:
                return (f"Int8Linear.from_linear of a weight that requires grad: {name} requires grad too, so the "
                        "float layer stays in its graph")
    if not torch.equal(source.weight.detach(), w):
        return "Int8Linear.from_linear changed the layer's weight"
    return None


def _int8_linear_in_x(m):
    layer = _int8_set(m, [[1, -2, 3, 0, 5], [127, 0, -127, 64, -1], [7, 7, -7, 2, 9]], [[0.5], [0.01], [0.2]], True)
    a, b = randn(113, 2, 3, 5), randn(114, 2, 3, 5)
    d = differs(layer(2 * a - 3 * b), 2 * layer(a) - 3 * layer(b), atol=1e-4)
    if d:
        return f"on x (2, 3, 5), Int8Linear(2a − 3b) and 2·Int8Linear(a) − 3·Int8Linear(b): {d}"
    whole = layer(a)
    for i in (0, 1):
        d = differs(whole[i], layer(a[i]))
        if d:
            return f"on x (2, 3, 5), row {i} of the output and the output on row {i} alone: {d}"
    for dtype in (torch.float64, torch.bfloat16):
        y = layer(a.to(dtype))
        if type(y) is not torch.Tensor or y.dtype != dtype:
            return f"on a {_kind(a.to(dtype))} x the output is {_kind(y)}, expected {_kind(a.to(dtype))}"
        tol = 5e-2 if dtype == torch.bfloat16 else 1e-5
        d = differs(y.float(), whole, atol=tol, rtol=tol)
        if d:
            return f"on x (2, 3, 5), the {_kind(y)} output and the float32 one: {d}"
    return None


def _int8_round_trip(m):
    x = randn(115, 2, 6)
    for per_channel in (True, False):
        layer = m.Int8Linear.from_linear(_Weight(randn(116, 4, 6)), per_channel=per_channel)
        fresh = m.Int8Linear(6, 4, per_channel=per_channel)
        fresh(x)  # used before it is loaded, as a model is between two checkpoints
        fresh.load_state_dict(layer.state_dict())
        d = differs(fresh(x), layer(x))
        if d:
            return (f"per_channel={per_channel}: an Int8Linear(6, 4) that ran forward once, then load_state_dict("
                    f"from_linear(a (4, 6) weight).state_dict()), and that Int8Linear, on x (2, 6): {d}")
    return None


INT8_LINEAR_PROPERTIES = (
    Property("a fresh Int8Linear holds int8 zeros and float32 scales of ones, of the contract's shapes, on the device "
             "given", _int8_fresh,
             example="layer = minilm.Int8Linear(5, 3, per_channel=False)\nprint(layer.weight_int8, layer.scale)  "
                     "# zeros (3, 5) and ones (1, 1)",
             idea="register_buffer('weight_int8', torch.zeros(out, in, dtype=torch.int8, device=device)) and "
                  "register_buffer('scale', torch.ones(out if per_channel else 1, 1, device=device))"),
    Property("forward(x) is x times the transpose of weight_int8 · scale, the dequantized weight", _int8_forward,
             example="layer = minilm.Int8Linear(3, 2)\nlayer.weight_int8.copy_(torch.tensor([[1, -2, 3], [127, 0, "
                     "-127]]))\nlayer.scale.copy_(torch.tensor([[0.5], [0.01]]))\nprint(layer(torch.eye(3)))  "
                     "# [[0.5, 1.27], [-1, 0], [1.5, -1.27]]",
             idea="dequantize with your dequantize_int8(weight_int8, scale) (each row times its scale), cast it to "
                  "x's dtype and call your linear(x, weight): the weight is (out, in), so the output is x @ Wᵀ"),
    Property("from_linear holds what your quantize_int8(layer.weight, per_channel) gives, cut from autograd",
             _int8_from_linear,
             example="layer = minilm.Int8Linear.from_linear(linear, per_channel=False)\n"
                     "q, scale = minilm.quantize_int8(linear.weight.detach(), per_channel=False)\n"
                     "print(torch.equal(layer.weight_int8, q), torch.equal(layer.scale, scale))  # True True",
             idea="call quantize_int8(layer.weight.detach(), per_channel) with the per_channel given, build "
                  "cls(in_features, out_features, per_channel, device=…) and copy q and scale into its buffers"),
    Property("forward is linear in x, treats the leading dims as a batch, and returns x's dtype", _int8_linear_in_x,
             example="a, b = torch.randn(2, 3, 5), torch.randn(2, 3, 5)\n"
                     "print(layer(2 * a - 3 * b) - (2 * layer(a) - 3 * layer(b)))  # zeros",
             idea="only the weight is quantized: multiply x as it is (no rounding, no bias, no reshape to 2-D that "
                  "mixes rows) by the dequantized weight cast to x.dtype"),
    Property("an Int8Linear after load_state_dict gives the same outputs as the one it was saved from, whatever it "
             "computed before",
             _int8_round_trip,
             example="new = minilm.Int8Linear(6, 4)\nnew.load_state_dict(layer.state_dict())\n"
                     "print(new(x) - layer(x))  # zeros",
             idea="forward must read weight_int8 and scale, the buffers load_state_dict fills, at every call; a "
                  "dequantized copy made in __init__, from_linear or a first forward is not in the state_dict and "
                  "goes stale"),
)


spec("12.2", properties=INT8_LINEAR_PROPERTIES, collect=_int8_linear_collect, invariant=_int8_linear_invariant,
     cases=lambda: [dict(w=rowed_weight(2), x=randn(3, 3, 4, 10), per_channel=True,
                         what="Int8Linear from a (6, 10) weight"),
                    dict(w=rowed_weight(2), x=randn(3, 3, 4, 10), per_channel=False, what="the same per tensor"),
                    dict(w=rowed_weight(2), x=randn(3, 3, 4, 10).double(), per_channel=True, what="a float64 x")],
     outputs={"weight_int8": "weight_int8", "scale": "scale", "y": "Int8Linear(x)",
              "y_loaded": "a new Int8Linear after load_state_dict"},
     mistakes={"forgets_scale": "your output is x times the int8 values, unscaled: forward must multiply them by "
                                "the scale (dequantize_int8), and from_linear must keep the scale quantize_int8 "
                                "gave"},
     passed="int8 weight and float32 scales as buffers, forward within the quantization error, state_dict round trip")

# ---------------------------------------------------------------- 12.3: quantize_model


def _float_model(m, c):
    """The case's TransformerLM (your Task 8.1) with the case's weights."""
    torch.manual_seed(0)
    model = m.TransformerLM(*c["config"])
    load_state(model, c["state"])
    return model


def _quantize_model_collect(m, c):
    lm = _float_model(m, c)
    with torch.no_grad():
        out = {"float_logits": lm(c["ids"])}  # your TransformerLM, Task 8.1
    got = m.quantize_model(lm, per_channel=c["per_channel"])
    state = lm.state_dict()
    out |= {"in_place": got is lm, "keys": sorted(state), "dtypes": [str(state[k].dtype) for k in sorted(state)],
            "linears_left": [n for n, mod in lm.named_modules() if isinstance(mod, m.Linear)],
            "int8_linears": sum(isinstance(mod, m.Int8Linear) for mod in lm.modules()),
            # the embedding and the norm gains, which stay float
            "kept": [state[k] if k in state else "missing" for k in c["state"] if not _quantized(k)]}
    try:
        with torch.no_grad():
            out["logits"] = lm(c["ids"])
    except AttributeError as e:
        raise AttributeError(f"after quantize_model your model raised AttributeError: {e}. Call the sub-modules "
                             "(self.w1(x)), never read a Linear's .weight: an Int8Linear has none") from None
    before = {k: v.clone() for k, v in lm.state_dict().items()}
    m.quantize_model(lm, per_channel=c["per_channel"])
    after = lm.state_dict()
    out["idempotent"] = set(after) == set(before) and all(torch.equal(after[k], v) for k, v in before.items())
    return out


def _quantized(name: str) -> bool:
    return name == "lm_head.weight" or name.endswith(("proj.weight", "w1.weight", "w2.weight", "w3.weight"))


def _quantize_model_invariant(got, c) -> Problem | None:
    keys, layers = got["keys"], c["config"][3]
    kept = [k for k in c["state"] if not _quantized(k)]
    changed = [k for k, v in zip(kept, got["kept"]) if type(v) is not torch.Tensor or not torch.equal(v, c["state"][k])]
    return first(
        None if got["in_place"] is True
                 else Problem("quantize_model must quantize in place and return the model itself"),
        None if not all(k in keys for k in c["state"] if _quantized(k)) else Problem(
            "no Linear was quantized: quantize_model replaces every Linear of the model (your Task 1.2 class, at "
            "any depth) by an Int8Linear, in place, and returns the model after the whole walk"),
        None if "lm_head.weight" not in keys else Problem(
            "lm_head is still a float Linear: quantize every Linear, the output head included", "lm_head_left_float"),
        None if not any(_quantized(k) for k in keys) else Problem(
            "the Linears inside the layers are still float: they sit at any depth (layers is a ModuleList of blocks "
            "holding attn and ffn), so look at the children's children too", "top_level_only"),
        None if not got["linears_left"] else Problem(
            f"{shown(len(got['linears_left']))} Linear modules are still float",
            detail=f": {', '.join(map(str, got['linears_left'][:3]))}"),
        None if got["int8_linears"] == 7 * layers + 1 else Problem(
            f"expected {7 * layers + 1} Int8Linear modules (4 attention and 3 feed-forward projections per layer, and "
            f"lm_head), got {shown(got['int8_linears'])}"),
        None if not changed else Problem(f"{changed[0]} changed: the embedding and the RMSNorm gains stay float, only "
                                         "Linears are quantized", "quantizes_every_weight"),
        None if got["idempotent"] is True else Problem(
            "quantizing a quantized model must change nothing (leave Int8Linear modules alone)"))


def _quantize_model_cases():
    cfg = [53, 12, 16, 2, 2, 24, 10000.0]
    state, ids = weights(41, lm_shapes(53, 16, 2, 24)), torch.randint(0, 53, (2, 10), generator=gen(4))
    return [dict(config=cfg, per_channel=pc, state=state, ids=ids,
                 what=f"TransformerLM(53, 12, 16, 2, 2, 24), per_channel={pc}")
            for pc in (True, False)]


class Linear(nn.Module):
    """Another library's Linear, with a bias: a module named Linear that is not the course's, which
    quantize_model leaves alone (torch's own nn.Linear would be refused while Task 12.3 runs)."""

    def __init__(self, d_in: int, d_out: int):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(d_out, d_in))
        self.bias = nn.Parameter(torch.zeros(d_out))

    def forward(self, x):
        return x @ self.weight.T + self.bias


def _nest(m) -> tuple[nn.Module, dict[str, torch.Tensor]]:
    """A model that is no TransformerLM: your Linears at the top, in a ModuleList, a Sequential inside it and a
    ModuleDict in a plain module, and a subclass of yours, beside torch's Embedding and LayerNorm, another
    library's Linear (with a bias: Int8Linear has none) and a parameter of its own; and your Linears' weights
    by name."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = nn.Module()
        model.emb = nn.Embedding(7, 4)  # release: not a task (a module quantize_model must leave alone)
        norm = nn.LayerNorm(4)  # release: not a task (a module quantize_model must leave alone)
        model.blocks = nn.ModuleList([m.Linear(4, 6), nn.Sequential(m.Linear(6, 4), norm)])
        model.inner = nn.Module()
        model.inner.parts = nn.ModuleDict({"proj": m.Linear(4, 5)})
        model.gain = nn.Parameter(torch.linspace(0.5, 1.5, 4))
        model.head = m.Linear(5, 3)
        model.adapter = Linear(4, 4)
        model.frozen = type("FrozenLinear", (m.Linear,), {})(4, 4)  # a subclass of yours is a Linear too
    names = ("blocks.0", "blocks.1.0", "inner.parts.proj", "head", "frozen")
    with torch.no_grad():
        for i, name in enumerate(names):
            w = model.get_submodule(name).weight
            w.copy_(randn(120 + i, *w.shape) * torch.linspace(0.1, 2.0, w.shape[0]).unsqueeze(-1))
    return model, {name: model.get_submodule(name).weight.detach().clone() for name in names}


def _quantize_model_nested(m):
    model, linears = _nest(m)
    kept = {k: v.clone() for k, v in model.state_dict().items() if k.removesuffix(".weight") not in linears}
    got = m.quantize_model(model, per_channel=True)
    if got is not model:
        return "quantize_model on a nested model returned another object, expected the model itself (in place)"
    left = [n for n, mod in model.named_modules() if isinstance(mod, m.Linear)]
    if left:
        sub = " (a subclass of your Linear among them)" if "frozen" in left else ""
        return (f"on a model with Linears in a ModuleList, a Sequential inside it, a ModuleDict and at the top, "
                f"{len(left)} of {len(linears)} stay float Linears{sub}")
    swapped = [n for n in linears if not isinstance(model.get_submodule(n), m.Int8Linear)]
    if swapped:
        return f"on a nested model, {len(swapped)} of its {len(linears)} Linears' places hold no Int8Linear"
    extra = sum(isinstance(mod, m.Int8Linear) for mod in model.modules()) - len(linears)
    if extra:
        swapped_other = isinstance(model.get_submodule("adapter"), m.Int8Linear)
        torch_linear = " (another library's module named Linear among them: only your Linear is quantized)" \
            if swapped_other else ""
        modules = "module" if extra == 1 else "modules"
        return (f"on a nested model with {len(linears)} of your Linears, {extra} other {modules} (torch's "
                f"Embedding and LayerNorm, another Linear, a container) became Int8Linear too{torch_linear}")
    state = model.state_dict()
    changed = [k for k, v in kept.items() if k not in state or not torch.equal(state[k], v)]
    return changed and (f"on a nested model, quantize_model changed {len(changed)} of the {len(kept)} weights that "
                        "are none of your Linears' (torch's Embedding and LayerNorm, another library's Linear, a "
                        "parameter of the model's own)") or None


def _quantize_model_per_channel(m):
    for per_channel in (True, False):
        model, linears = _nest(m)
        m.quantize_model(model, per_channel=per_channel)
        for name, w in linears.items():
            layer = model.get_submodule(name)
            q, scale = m.quantize_int8(w, per_channel=per_channel)
            if not isinstance(layer, m.Int8Linear):
                return f"quantize_model(per_channel={per_channel}) on a nested model left {name} no Int8Linear"
            for buf, want in (("scale", scale), ("weight_int8", q)):
                got = getattr(layer, buf, None)
                d = differs(got.double(), want.double(), atol=0, rtol=0) if type(got) is torch.Tensor else \
                    "no tensor"
                if d:
                    return (f"quantize_model(per_channel={per_channel}) on a nested model: {name}'s {buf} and your "
                            f"quantize_int8 of the weight it replaced, per_channel={per_channel}: {d}")
    return None


QUANTIZE_MODEL_PROPERTIES = (
    Property("every Linear, at any depth and in any container, becomes an Int8Linear in place; nothing else changes",
             _quantize_model_nested,
             example="model = torch.nn.Sequential(minilm.Linear(4, 6), torch.nn.ModuleList([minilm.Linear(6, 4)]))\n"
                     "print(minilm.quantize_model(model))  # Int8Linears, at both depths",
             idea="recurse over model.named_children() whatever their type (ModuleList, Sequential, ModuleDict, a "
                  "plain module): swap each child that is your Linear, recurse into every other; no names of "
                  "TransformerLM's attributes"),
    Property("each Int8Linear holds its own Linear's weight quantized with the per_channel given, at every depth",
             _quantize_model_per_channel,
             example="w = model.lm_head.weight.detach().clone()\nminilm.quantize_model(model, per_channel=False)\n"
                     "print(model.lm_head.scale.shape, torch.equal(model.lm_head.weight_int8, "
                     "minilm.quantize_int8(w, per_channel=False)[0]))  # (1, 1) True",
             idea="pass per_channel on to Int8Linear.from_linear and to the recursive call into each child, and "
                  "swap each Linear by its own name (add_module(name, from_linear(that child, per_channel)))"),
)


spec("12.3", properties=QUANTIZE_MODEL_PROPERTIES, collect=_quantize_model_collect, cases=_quantize_model_cases,
     invariant=_quantize_model_invariant,
     atol=1e-4, free=("kept",),
     outputs={"float_logits": "the float model's logits (your TransformerLM, Task 8.1)",
              "logits": "the quantized logits"},
     passed="every Linear (lm_head too) is an Int8Linear in place; embedding and norms stay float")
