"""Specs of notebooks 5–6: RoPE, softmax, attention (provided). See minilm/course/exercises/__init__.py."""

from __future__ import annotations

import torch

from minilm.course.exercises import (
    Problem,
    Property,
    at_edge,
    attention_shapes,
    differs,
    each_row_alone,
    gen,
    gradient_follows,
    keeps_dtype,
    keeps_inputs,
    keys_problem,
    learns,
    load_state,
    module_contract,
    one_line,
    randn,
    registered_property,
    shown,
    spec,
    state_keys,
    sublayer_adds_no_residual,
    unregistered_tensors,
    weights,
)

ROPE_HALVES = "your output matches RoPE applied to split halves: rotate adjacent pairs (2i, 2i+1)"
ROPE_ONE_BASED = "your output matches RoPE with 1-based positions: the first token is at position 0"
ROPE_FREQUENCY = "the frequencies are off: pair i turns by θ^(−2i/d_k) per position, not θ^(−i/d_k)"
ROPE_FREQUENCY_DOUBLED = ("the frequencies are off: pair i turns by θ^(−2i/d_k) per position, not θ^(−4i/d_k) "
                          "(torch.arange(0, d_k, 2) already counts 2i: do not double it)")
ROPE_MISTAKES = {
    "rope_split_halves": ROPE_HALVES,
    "rope_frequency": ROPE_FREQUENCY,
    "rope_frequency_doubled": ROPE_FREQUENCY_DOUBLED,
    "rope_one_based": ROPE_ONE_BASED,
    "rope_wrong_direction": "you rotate the wrong way: x'[2i] = x[2i]cos − x[2i+1]sin, "
                            "x'[2i+1] = x[2i]sin + x[2i+1]cos",
}
POSITIONS_ANY_SHAPE = "token_positions can be batched (here each batch row has its own positions), not only (seq,)"

# ---------------------------------------------------------------- 5: RoPE


def _rope_collect(m, c):
    kw = {"theta": c["theta"]} if "theta" in c else {}
    if "x" not in c:
        return {"angles": m.rope_angles(c["pos"], c["d_k"], **kw)}
    return {"y": m.rope(c["x"], c["pos"], **kw)}


def _rope_cases():
    pos = torch.tensor([[7, 0, 3, 100, 2], [1, 1, 1, 1, 1]])
    return [dict(pos=torch.arange(6), d_k=8, what="positions 0…5, d_k=8"),
            dict(pos=pos, d_k=16, theta=500.0, what="batched positions (2, 5), d_k=16, theta=500"),
            dict(x=randn(21, 2, 6, 8), pos=torch.arange(6), what="x (2, 6, 8), positions 0…5"),
            dict(x=randn(22, 2, 3, 5, 16), pos=pos.unsqueeze(1), theta=500.0, what="x (2, 3, 5, 16), batched positions "
                 "(2, 1, 5) and theta=500"),
            dict(x=randn(40, 3, 4, 8), pos=torch.tensor([[0, 1, 2, 3], [9, 4, 4, 60], [2, 3, 5, 7]]),
                 what="x (3, 4, 8), batched positions (3, 4)")]


def _float32_angles(got, c) -> Problem | None:
    angles = got.get("angles")
    if type(angles) is torch.Tensor and angles.dtype != torch.float32:
        return Problem(f"rope_angles must return float32 angles, got {str(angles.dtype).replace('torch.', '')}",
                       "wrong_dtype")
    return None


def _rope_on_error(c):
    if c["pos"].ndim < 2:
        return None
    if "x" not in c:
        return "rope_positions_1d", (f"{POSITIONS_ANY_SHAPE}: multiply token_positions[..., None] by the d_k/2 "
                                     "frequencies (torch.outer takes 1-D vectors only)")
    return "rope_positions_1d", POSITIONS_ANY_SHAPE


def _rope_at_zero(m):
    x = randn(60, 2, 3, 8)
    y = m.rope(x, torch.zeros(3, dtype=torch.long))
    d = differs(y, x)
    if d and type(y) is torch.Tensor and y.shape == x.shape:  # where each pair's two entries went
        even, odd = x[..., 0::2], x[..., 1::2]
        parts = {"x[2i]": even, "x[2i+1]": odd}
        came = [next((name for name, v in parts.items() if not differs(y[..., j::2], v)), None) for j in (0, 1)]
        if None not in came and came != ["x[2i]", "x[2i+1]"]:
            d += f"; at angle 0 yours returns each pair (x[2i], x[2i+1]) as ({came[0]}, {came[1]})"
    return d and f"for x (2, 3, 8) at positions 0, rope(x) and x: {d}"


def _rope_keeps_lengths(m):
    x = randn(61, 5, 8)
    y = m.rope(x, torch.tensor([0, 1, 7, 30, 100]))
    d = differs(y.reshape(5, 4, 2).norm(dim=-1), x.reshape(5, 4, 2).norm(dim=-1), atol=1e-4)
    return d and f"for x (5, 8), the lengths of the pairs (x[2i], x[2i+1]) before and after: {d}"


def _turns(rotate, where: str) -> str | None:
    """x = (1, 0, 1, 0) at positions 1 and 7, with d_k = 4 and theta 100: pair i turns by p · 100^(−2i/4), so
    pair 0 by p rad and pair 1 by p/10 rad, and the output is (cos p, sin p, cos p/10, sin p/10)."""
    pos = torch.tensor([1, 7])
    angles = pos.double()[:, None] * torch.tensor([1.0, 0.1], dtype=torch.float64)
    want = torch.stack((angles.cos(), angles.sin()), -1).reshape(2, 4)
    got = rotate(torch.tensor([[1.0, 0.0, 1.0, 0.0]] * 2), pos)
    d = differs(got.double() if type(got) is torch.Tensor else got, want, atol=1e-4)
    return d and (f"{where} on x = (1, 0, 1, 0) at positions p = 1 and 7, the output and (cos p, sin p, cos p/10, "
                  f"sin p/10): {d}")


def _rope_turns(m):
    got = m.rope_angles(torch.tensor([1, 7]), 4, theta=100.0)
    d = differs(got.double() if type(got) is torch.Tensor else got, torch.tensor([[1.0, 0.1], [7.0, 0.7]],
                                                                                 dtype=torch.float64), atol=1e-5)
    if d:
        return f"rope_angles([1, 7], d_k=4, theta=100) and [[1, 0.1], [7, 0.7]]: {d}"
    return _turns(lambda x, pos: m.rope(x, pos, theta=100.0), "rope(x, positions, theta=100)")


ROPE_TURNS = ("pair i turns by p · θ^(−2i/d_k) at position p: with d_k = 4 and θ = 100, pair 0 by p rad and pair 1 by "
              "p/10 rad")


def _relative(rotate) -> str | None:
    """q·k after rotating q to position m and k to n depends on m − n alone (3 − 1 and 13 − 11 here)."""
    q, k = randn(62, 1, 8), randn(63, 1, 8)
    near = (rotate(q, torch.tensor([3])) * rotate(k, torch.tensor([1]))).sum()
    far = (rotate(q, torch.tensor([13])) * rotate(k, torch.tensor([11]))).sum()
    d = differs(near, far, atol=1e-4)
    return d and f"q at 3 · k at 1 and q at 13 · k at 11 (both 2 apart): {d}"


ROPE_RELATIVE_EXAMPLE = ("q, k = torch.randn(1, 8), torch.randn(1, 8)\n"
                         "at = lambda x, p: minilm.rope(x, torch.tensor([p]))\n"
                         "print((at(q, 3) * at(k, 1)).sum(), (at(q, 13) * at(k, 11)).sum())  # equal")
ROPE_PROPERTIES = (
    keeps_inputs("rope", lambda: (randn(100, 2, 5, 8), torch.arange(5)), "on x (2, 5, 8)"),
    Property("position 0 leaves x unchanged (it turns by angle 0)", _rope_at_zero,
             example="x = torch.randn(3, 8)\nprint(minilm.rope(x, torch.zeros(3, dtype=torch.long)) - x)",
             idea="the angle is the position times the frequency, so the first token (position 0, not 1) turns by 0"),
    Property("each pair (x[2i], x[2i+1]) keeps its length: RoPE only turns it", _rope_keeps_lengths,
             example="x = torch.randn(1, 8)\ny = minilm.rope(x, torch.tensor([5]))\n"
                     "print(x.reshape(4, 2).norm(dim=-1), y.reshape(4, 2).norm(dim=-1))",
             idea="rotate each adjacent pair by its angle: (a, b) → (a cos − b sin, a sin + b cos), both with the "
                  "same angle, neither scaled"),
    Property(ROPE_TURNS, _rope_turns,
             example="print(minilm.rope_angles(torch.tensor([1, 7]), 4, theta=100.0))  # [[1, 0.1], [7, 0.7]]\n"
                     "print(minilm.rope(torch.tensor([[1.0, 0, 1, 0]]), torch.tensor([7]), theta=100.0))\n"
                     "# cos 7, sin 7, cos 0.7, sin 0.7",
             idea="the frequencies are θ^(−2i/d_k) for i = 0 … d_k/2 − 1, i.e. θ ** (−torch.arange(0, d_k, 2) / d_k) "
                  "(pair 0 turns by exactly 1 rad per position), and rope passes its theta on to rope_angles"),
    Property("q·k depends only on how far apart q and k are", lambda m: _relative(m.rope),
             example=ROPE_RELATIVE_EXAMPLE,
             idea="rotate q and k by the same rule, each pair i by position · θ^(−2i/d_k): then the product of the "
                  "two rotations depends on the difference of the positions only"),
)

# Angles computed in float32 (as common as float64) are off by ~1e-7·p rad, so rotated outputs at
# positions in the thousands differ from the reference's by up to ~5e-4: within atol, unlike any mistake.
spec("5.1",
     rows=each_row_alone("rope", lambda: (randn(179, 3, 5, 8), torch.arange(5)), "on x (3, 5, 8)"),
     dtypes=keeps_dtype("rope", lambda: (randn(160, 2, 5, 8), torch.arange(5)), "on x (2, 5, 8)"),
     gradient=gradient_follows("rope", lambda: (randn(129, 2, 5, 8).double(), torch.arange(5)), "on x (2, 5, 8)",
                               call="x, torch.arange(4)"),
     collect=_rope_collect, cases=_rope_cases, invariant=_float32_angles, on_error=_rope_on_error,
     outputs={"angles": "rope_angles", "y": "rope"}, mistakes=ROPE_MISTAKES, atol=1e-3, properties=ROPE_PROPERTIES,
     passed="angles and rotation match complex-number RoPE on adjacent pairs (1-D and batched positions, any theta)")


def _RoPE_collect(m, c):
    module = m.RotaryPositionalEmbedding(c["theta"], c["d_k"], c["max_len"])
    out = {"keys": state_keys(module), "tables": _table_shapes(module)}
    if out["tables"] == [(c["max_len"], c["d_k"] // 2)] * 2:  # else the invariant says why, before any IndexError
        out["y"] = module(c["x"], c["pos"])
    return out


def _table_shapes(module) -> list:
    return [tuple(t.shape) if isinstance(t := getattr(module, name, None), torch.Tensor) else None
            for name in ("cos", "sin")]


def _RoPE_invariant(got, c) -> Problem | None:
    want, tables = (c["max_len"], c["d_k"] // 2), [tuple(t) if type(t) in (list, tuple) else t for t in got["tables"]]
    if tables != [want] * 2:
        return Problem(f"the buffers cos and sin have shapes {shown(got['tables'][0])} and {shown(got['tables'][1])}; "
                       f"RotaryPositionalEmbedding({c['theta']:g}, {c['d_k']}, {c['max_len']}) needs {want}: one "
                       "row per "
                       f"position 0 … {c['max_len'] - 1} (torch.arange(max_seq_len)), one column per pair",
                       "rope_table_one_short" if tables == [(want[0] - 1, want[1])] * 2 else None)
    if got["keys"]:
        return Problem("cos/sin are derived, not learned: register them with persistent=False", "persistent_buffers",
                       f" (state_dict has {got['keys']})")
    return None


def _RoPE_cases():
    x = randn(23, 3, 10, 8)
    return [dict(theta=10000.0, d_k=8, max_len=64, x=x, pos=torch.tensor([0, 5, 63, 2, 2, 9, 1, 40, 17, 33]),
                 what="RotaryPositionalEmbedding(10000, 8, 64), x (3, 10, 8), positions (10,)"),
            dict(theta=10000.0, d_k=8, max_len=64, x=x, pos=torch.randint(0, 64, (3, 10), generator=gen(41)),
                 what="RotaryPositionalEmbedding(10000, 8, 64), x (3, 10, 8), batched positions (3, 10)")]


def _rope_module(m):
    module = m.RotaryPositionalEmbedding(10000.0, 8, 64)
    return lambda x, pos: module(x, pos)


def _rope_module_at_zero(m):
    x = randn(64, 2, 3, 8)
    d = differs(_rope_module(m)(x, torch.zeros(3, dtype=torch.long)), x)
    return d and f"for x (2, 3, 8) at positions 0, the output and x: {d}"


def _rope_module_own_position(m):
    x, pos = randn(118, 2, 3, 8), torch.tensor([7, 0, 3])
    rope = _rope_module(m)
    d = differs(rope(x, pos)[:, 2:], rope(x[:, 2:], pos[2:]))
    return d and f"token 2 (at position 3) rotated within x (2, 3, 8) and alone: {d}"


def _rope_module_turns(m):
    rope = m.RotaryPositionalEmbedding(100.0, 4, 8)
    return _turns(lambda x, pos: rope(x, pos), "RotaryPositionalEmbedding(100, 4, 8)")


def _rope_tables_float32(m):
    rope = m.RotaryPositionalEmbedding(10000.0, 8, 64, dtype=torch.bfloat16)
    tables = {n: b.dtype for n, b in rope.named_buffers()}
    low = {n: str(d).replace("torch.", "") for n, d in tables.items() if d != torch.float32}
    if low:
        return f"RotaryPositionalEmbedding(10000.0, 8, 64, dtype=torch.bfloat16) stores {low}"
    y = rope(randn(170, 3, 8).to(torch.bfloat16), torch.tensor([0, 1, 2]))
    if type(y) is not torch.Tensor or y.dtype != torch.bfloat16:
        got = str(y.dtype).replace("torch.", "") if type(y) is torch.Tensor else type(y).__name__
        return f"on a bfloat16 x it returned {got}, expected bfloat16"
    return None


spec("5.2", properties=(
         Property("each token is turned by its own position in token_positions, wherever it sits in the sequence",
                  _rope_module_own_position,
                  example="rope = minilm.RotaryPositionalEmbedding(10000.0, 8, 64)\nx = torch.randn(3, 8)\n"
                          "pos = torch.tensor([7, 0, 3])\nprint(rope(x, pos)[2] - rope(x[2:], pos[2:])[0])",
                  idea="index the tables by token_positions (self.cos[token_positions]), not by the token's place "
                       "in the sequence (self.cos[:seq])"),
         Property("position 0 leaves x unchanged (row 0 of the tables is cos 1, sin 0)", _rope_module_at_zero,
                  example="rope = minilm.RotaryPositionalEmbedding(10000.0, 8, 64)\nx = torch.randn(3, 8)\n"
                          "print(rope(x, torch.zeros(3, dtype=torch.long)) - x)",
                  idea="row p of the tables holds the angles of position p, from p = 0: torch.arange(max_seq_len)"),
         Property(ROPE_TURNS + ", for the θ given and up to the tables' last row", _rope_module_turns,
                  example="rope = minilm.RotaryPositionalEmbedding(100.0, 4, 8)\n"
                          "print(rope(torch.tensor([[1.0, 0, 1, 0]]), torch.tensor([7])))  "
                          "# cos 7, sin 7, cos 0.7, sin 0.7",
                  idea="build the tables from rope_angles(torch.arange(max_seq_len), d_k, theta): pass theta on, "
                       "so row p holds position p's angles for the theta given"),
         Property("q·k depends only on how far apart q and k are", lambda m: _relative(_rope_module(m)),
                  example="rope = minilm.RotaryPositionalEmbedding(10000.0, 8, 64)\n" + ROPE_RELATIVE_EXAMPLE.replace(
                      "minilm.rope", "rope"),
                  idea="index the cos and sin tables by each token's position and rotate the adjacent pairs as "
                       "rope does"),
         registered_property("RotaryPositionalEmbedding(10000.0, 8, 64)", lambda m: (
             (stray := unregistered_tensors(m.RotaryPositionalEmbedding(10000.0, 8, 64)))
             and f"it keeps {', '.join(stray)} as plain attributes, not buffers" or None)),
         Property("the cos and sin tables stay float32 whatever dtype the module is given, and the output has "
                  "x's dtype", _rope_tables_float32,
                  example="rope = minilm.RotaryPositionalEmbedding(10000.0, 8, 64, dtype=torch.bfloat16)\n"
                          "print({n: b.dtype for n, b in rope.named_buffers()})  # float32",
                  idea="bfloat16 keeps 8 bits of mantissa: an angle of 60 rad is off by a quarter turn. Build the "
                       "tables in float32 (or float64, then float32), ignore dtype for them, and cast the rotated "
                       "x back to x's dtype")),
     collect=_RoPE_collect, cases=_RoPE_cases, atol=1e-3, free=("tables",), outputs={"y": "the rotation"},
     mistakes=ROPE_MISTAKES,
     invariant=_RoPE_invariant,
     on_error=lambda c: None if c["pos"].ndim < 2 else (
         "rope_table_positions_1d", f"{POSITIONS_ANY_SHAPE}: index the tables with the whole tensor, "
                                    "self.cos[token_positions] (index_select takes a 1-D index only)"),
     passed="precomputed cos/sin (not in the state_dict) give the same rotation as rope (1-D and batched positions)")

# ---------------------------------------------------------------- 6: attention


def _softmax_cases():
    x = randn(24, 3, 4, 5)
    return [*(dict(x=x, dim=d, what=f"x (3, 4, 5), dim={d}") for d in (-1, 0, 1)),
            dict(x=torch.tensor([[1e4, 0.0, -1e4], [1e4, 1e4, 1e4], [-1e4, -1e4, -1e4]]), dim=-1,
                 what="inputs of ±1e4")]


def _softmax_sums(m):
    x = randn(65, 3, 4, 5)
    for dim in (0, 1, -1):
        d = differs(m.softmax(x, dim=dim).sum(dim), torch.ones(x.sum(dim).shape))  # release: not a task (under test)
        if d:
            return f"for x (3, 4, 5) and dim={dim}, the sums along dim and 1: {d}"
    return None


def _softmax_shift(m):
    x = randn(66, 4, 6)
    d = differs(m.softmax(x + 1000.0, dim=-1), m.softmax(x, dim=-1))  # release: not a task (the code under test)
    return d and f"for x (4, 6), softmax(x + 1000) and softmax(x): {d}"


def _softmax_slice_shift(m):
    """Each slice along dim shifted by its own whole number (exact in float32 at this size): nothing changes."""
    x = randn(67, 3, 4, 5)
    for dim in (0, 1, -1):
        shape = list(x.shape)
        shape[dim] = 1
        shift = torch.randint(-40, 41, shape, generator=gen(68)).float()
        d = differs(m.softmax(x + shift, dim=dim), m.softmax(x, dim=dim))  # release: not a task (under test)
        if d:
            return f"for x (3, 4, 5) and dim={dim}, with a different number from −40 … 40 added to each slice: {d}"
    return None


def _softmax_wide(m):
    x = torch.tensor([[1e4, 0.0, -1e4], [-1e4, -1e4 + 1.0, -1e4]])
    y = m.softmax(x, dim=-1)  # release: not a task (the code under test)
    if type(y) is not torch.Tensor or not torch.isfinite(y).all():
        got = [[float(v) for v in row] for row in y] if type(y) is torch.Tensor else type(y).__name__
        return f"softmax([[1e4, 0, -1e4], [-1e4, -1e4 + 1, -1e4]]) = {got}"
    return None


SOFTMAX_PROPERTIES = (
    keeps_inputs("softmax", lambda: (randn(101, 3, 5), -1), "on x (3, 5)"),
    Property("it is finite on entries as far apart as ±1e4", _softmax_wide,
             example="print(minilm.softmax(torch.tensor([[1e4, 0.0, -1e4]]), dim=-1))  # [[1, 0, 0]]",
             idea="subtract each slice's max (not its min) along dim: every exponent is then ≤ 0, and the largest "
                  "is e^0 = 1"),
    Property("each slice along dim sums to 1", _softmax_sums,
             example="x = torch.randn(3, 4, 5)\nprint(minilm.softmax(x, dim=1).sum(dim=1))  # all ones",
             idea="exponentiate, then divide by the sum along the same dim, kept with keepdim=True"),
    Property("adding one number to every entry changes nothing, even 1000", _softmax_shift,
             example="x = torch.randn(4, 6)\nprint(minilm.softmax(x + 1000, dim=-1) - minilm.softmax(x, dim=-1))",
             idea="subtract each slice's max along dim before exp: the result is the same, and exp never overflows"),
    Property("adding a number to one slice along dim changes nothing in it, whatever the other slices get",
             _softmax_slice_shift,
             example="x = torch.randn(3, 4, 5)\nshift = torch.randint(-40, 41, (3, 1, 5)).float()\n"
                     "print(minilm.softmax(x + shift, dim=1) - minilm.softmax(x, dim=1))  # zeros",
             idea="each slice along dim is its own softmax: take its max and its sum along dim, both with "
                  "keepdim=True, never along another dim or over the whole tensor"),
)

spec("6.1",
     rows=each_row_alone("softmax", lambda: (randn(180, 3, 4, 7), -1), "on x (3, 4, 7), dim -1"),
     dtypes=keeps_dtype("softmax", lambda: (randn(161, 3, 7), -1), "on x (3, 7)"),
     gradient=gradient_follows("softmax", lambda: (randn(130, 3, 7).double(), -1), "on x (3, 7)", call="x, dim=-1"),
     properties=SOFTMAX_PROPERTIES,
     collect=lambda m, c: {"y": m.softmax(c["x"], dim=c["dim"])},  # release: not a task (the code under test)
     cases=_softmax_cases, outputs={"y": "softmax"},
     mistakes={**{f"softmax_wrong_dim ({d})": f"you normalized over dim {d}, not over the dim asked: use the dim "
                                              "argument"
                  for d in (-1, 0, 1)},
               "softmax_unstable": "exp overflows for large inputs: subtract the max along dim before exp",
               # outputs a max of the whole tensor gives, and also a max subtracted only when it is positive
               "softmax_global_max": "a row far below the shift you subtracted (the whole tensor's max, or none for "
                                     "a row below 0) has every exp underflow to 0, and 0 / 0 = NaN. Subtract each "
                                     "slice's own max along dim, always: x.amax(dim=dim, keepdim=True)"},
     passed="matches F.softmax on every dim, stable at ±1e4")


def _sdpa_cases():
    q, k, v = randn(25, 2, 3, 4, 8), randn(26, 2, 3, 6, 8), randn(27, 2, 3, 6, 5)
    # Every row keeps at least one True and one False, so the inverted mask is a valid mask too.
    mask = torch.rand(4, 6, generator=gen(28)) > 0.5
    mask[:, 0], mask[:, 1] = True, False
    return [dict(q=q, k=k, v=v, what="4 queries, 6 keys, no mask"),
            dict(q=q, k=k, v=v, mask=mask, what="a boolean mask")]


def _sdpa_rows_sum_to_one(m):
    q, k = randn(67, 2, 4, 8), randn(68, 2, 6, 8)
    mask = torch.ones(4, 6, dtype=torch.bool).tril(1)
    for masked in (None, mask):
        y = m.scaled_dot_product_attention(q, k, torch.ones(2, 6, 3), *([masked] if masked is not None else []))
        d = differs(y, torch.ones(2, 4, 3))
        if d:
            where = f"with v all ones ({'a mask' if masked is not None else 'no mask'})"
            if type(y) is torch.Tensor and y.numel() and torch.allclose(y, y.flatten()[0].expand_as(y)):
                # one number everywhere: the weights may well sum to 1, and something scales after them
                return (f"{where}, every output is {y.flatten()[0].item():.4g}, not 1: the weighted sum of v is "
                        "scaled after the softmax (a scale belongs on the scores q kᵀ, before it)")
            return f"{where}, the output and 1: {d}"
    return None


def _sdpa_masked_keys(m):
    q, k, v = randn(69, 3, 8), randn(70, 5, 8), randn(71, 5, 4)
    mask = torch.tensor([[True, False, True, True, False]] * 3)
    k2, v2 = k.clone(), v.clone()
    k2[[1, 4]], v2[[1, 4]] = 100.0, -100.0
    d = differs(m.scaled_dot_product_attention(q, k2, v2, mask), m.scaled_dot_product_attention(q, k, v, mask))
    return d and f"changing keys 1 and 4, which the mask hides: {d}"


def _sdpa_scale(m):
    """q = (1, 1), keys (1, 1), 0, 0 and v = 1, 0, 0: the scores are 2/√2, 0, 0, so the output is
    e^√2 / (e^√2 + 2); a score divided by anything but √d_k = √2 moves it."""
    q, k, v = torch.tensor([[1.0, 1.0]]), torch.tensor([[1.0, 1.0], [0.0, 0.0], [0.0, 0.0]]), torch.tensor([[1.0],
                                                                                                         [0.0], [0.0]])
    want = torch.tensor([[2 ** 0.5]]).exp()
    d = differs(m.scaled_dot_product_attention(q, k, v), want / (want + 2), atol=1e-5)
    return d and (f"q = (1, 1) against k = (1, 1), (0, 0), (0, 0) with v = 1, 0, 0: the output and "
                  f"e^√2 / (e^√2 + 2) = {(want / (want + 2)).item():.4f}: {d}")


def _sdpa_v_width(m):
    q, k, v = randn(119, 4, 8), randn(120, 6, 8), randn(121, 6, 3)
    d = differs(m.scaled_dot_product_attention(q, k, torch.cat([v, v, v], -1))[:, :3],
                m.scaled_dot_product_attention(q, k, v))
    return d and f"q (4, 8), k (6, 8): the output's first 3 columns with v (6, 9) and with v's first 3 columns: {d}"


SDPA_PROPERTIES = (
    keeps_inputs("scaled_dot_product_attention", lambda: (randn(102, 2, 4, 8), randn(103, 2, 6, 8), randn(104, 2, 6, 3),
                                                          torch.ones(4, 6, dtype=torch.bool).tril(1)),
                 "on q (2, 4, 8), k (2, 6, 8), v (2, 6, 3) and a mask"),
    Property("each query's weights sum to 1: with v all ones, every output is 1", _sdpa_rows_sum_to_one,
             example="q, k = torch.randn(4, 8), torch.randn(6, 8)\n"
                     "print(minilm.scaled_dot_product_attention(q, k, torch.ones(6, 3)))  # all ones",
             idea="softmax each query's scores over the keys (the last dim), after masking, and only then "
                  "multiply by v"),
    Property("the scores are q·k / √d_k, d_k the width of q and k: q = k = (1, 1) scores 2/√2", _sdpa_scale,
             example="q, k = torch.tensor([[1.0, 1.0]]), torch.tensor([[1.0, 1.0], [0, 0], [0, 0]])\n"
                     "v = torch.tensor([[1.0], [0], [0]])\nprint(minilm.scaled_dot_product_attention(q, k, v))  "
                     "# e^√2 / (e^√2 + 2) = 0.6728",
             idea="divide q kᵀ by math.sqrt(d_k), d_k = q.shape[-1], before the softmax: not by d_k, not by the "
                  "number of keys, and mind the precedence (d_k ** 1 / 2 is d_k / 2)"),
    Property("the weights depend on q and k alone: v's width changes nothing but the output's width", _sdpa_v_width,
             example="q, k, v = torch.randn(4, 8), torch.randn(6, 8), torch.randn(6, 3)\n"
                     "sdpa = minilm.scaled_dot_product_attention\n"
                     "print(sdpa(q, k, torch.cat([v, v, v], -1))[:, :3] - sdpa(q, k, v))",
             idea="scale the scores by 1 / √d_k, d_k the last dim of q and k (not of v)"),
    Property("a key the mask rules out has no effect: changing its k and v changes nothing", _sdpa_masked_keys,
             example="q, k, v = torch.randn(3, 8), torch.randn(5, 8), torch.randn(5, 4)\n"
                     "mask = torch.tensor([[True, False, True, True, False]] * 3)\n"
                     "k2, v2 = k.clone(), v.clone(); k2[1], v2[1] = 100.0, -100.0\n"
                     "sdpa = minilm.scaled_dot_product_attention\nprint(sdpa(q, k2, v2, mask) - sdpa(q, k, v, mask))",
             idea="where mask is False the score becomes -inf before the softmax, so that key's weight is exactly 0"),
)

spec("6.2",
     rows=each_row_alone("scaled_dot_product_attention", lambda: (randn(181, 3, 4, 8), randn(182, 3, 6, 8),
                                                                         randn(183, 3, 6, 3)),
                         "on q (3, 4, 8), k (3, 6, 8), v (3, 6, 3)", batched=(0, 1, 2)),
     dtypes=keeps_dtype("scaled_dot_product_attention", lambda: (randn(162, 2, 4, 8), randn(163, 2, 6, 8),
                          randn(164, 2, 6, 3), torch.ones(4, 6, dtype=torch.bool).tril(1)),
                        "on q (2, 4, 8), k (2, 6, 8), v (2, 6, 3) and a causal mask"),
     gradient=gradient_follows("scaled_dot_product_attention", lambda: (randn(131, 2, 4, 8).double(),
                               randn(132, 2, 6, 8).double(), randn(133, 2, 6, 3).double()),
                               "on q (2, 4, 8), k (2, 6, 8), v (2, 6, 3)", wrt=(0, 1, 2), call="x, x, x"),
     properties=SDPA_PROPERTIES,
     collect=lambda m, c: {"y": m.scaled_dot_product_attention(c["q"], c["k"], c["v"],
                                                               *([c["mask"]] if "mask" in c else []))},
     cases=_sdpa_cases, outputs={"y": "attention"},
     mistakes={
         "no_scaling": "divide the scores q·k by sqrt(d_k) before the softmax",
         "mask_inverted": "your mask is inverted: True means a query MAY attend to that key",
         "softmax_over_queries": "normalize each query's scores over the keys (the last dim), not over the queries",
         "mask_ignored": "your attention ignores the mask: where mask is False, set the score to -inf before the "
                         "softmax, "
                         "so that key gets exactly zero weight",
         "mask_filled_with_zero": "you filled the masked scores with 0, but a score of 0 still gets the weight "
                                  "exp(0) / Σ exp(scores) > 0: fill them with -inf, so the softmax gives them "
                                  "exactly 0",
         "mask_after_softmax": "you applied the mask after the softmax: zeroing weights afterwards leaves each row "
                               "summing to less than 1. Set the masked scores to -inf before the softmax, which then "
                               "gives them exactly 0 and spreads the whole weight over the keys left",
     },
     passed="matches F.scaled_dot_product_attention, with and without a mask")


def layer_collect(module, c) -> dict:
    """A layer's state_dict names, then its output on x (and positions, when given) with the case's weights."""
    out = {"keys": state_keys(module)}
    load_state(module, c["state"])
    out["y"] = module(c["x"], c["pos"]) if "pos" in c else module(c["x"])
    return out


MHSA_MISTAKES = {
    "not_causal": "apply the causal mask: query t may only see keys 0…t",
    "no_scaling": "divide the scores by sqrt(d_k) (d_k = d_model / num_heads)",
    "rope_split_halves": ROPE_HALVES,
    "rope_one_based": ROPE_ONE_BASED,
    "rope_frequency": ROPE_FREQUENCY,
    "rope_frequency_doubled": ROPE_FREQUENCY_DOUBLED,
    "no_rope": "apply RoPE to q and k when theta is given",
    "heads_interleaved": "head h must use rows h·d_k … (h+1)·d_k − 1 of each projection: split d_model as (heads d_k)",
    "heads_not_transposed": "you reshaped the heads' outputs (…, heads, seq, d_k) straight to (…, seq, d_model) "
                            "without "
                            "first moving the heads dim next to d_k, so each row mixes heads and positions: use "
                            "rearrange '… heads seq d_k -> … seq (heads d_k)' (or transpose(-3, -2), then reshape) "
                            "before output_proj",
    "heads_merged_d_k_first": "you merged the heads as (d_k heads), interleaving their columns: head h's output "
                              "must fill "
                              "columns h·d_k … (h+1)·d_k − 1, so merge with '… heads seq d_k -> … seq (heads d_k)'",
    "scaled_by_d_model": "you divided the scores by sqrt(d_model): each head's scores are dot products of d_k-dim "
                         "vectors, so divide by sqrt(d_k), d_k = d_model / num_heads",
    "causal_sees_next_token": "your causal mask lets query t see key t + 1: keep the diagonal and what lies below it "
                              "(tril with diagonal=0: True where key ≤ query), nothing above",
    "rope_on_v": "you rotated v too: RoPE rotates q and k, not v (the rotation is there to make q·k depend on the "
                 "relative position; the values stay as v_proj made them)",
}


def _mhsa(m, c):
    return m.MultiHeadSelfAttention(c["d"], c["heads"], *([c["max_len"], c["theta"]] if "theta" in c else []))


def _mhsa_cases():
    d, h, x = 32, 4, randn(29, 2, 9, 32)
    state = weights(38, attention_shapes(d))
    return [dict(d=d, heads=h, max_len=32, theta=10000.0, state=state, x=x,
                 what="MultiHeadSelfAttention(32, 4) with RoPE"),
            dict(d=d, heads=h, max_len=32, theta=10000.0, state=state, x=x,
                 pos=torch.tensor([[0, 1, 2, 3, 4, 5, 6, 7, 8], [3, 4, 5, 6, 10, 11, 12, 13, 31]]),
                 what="MultiHeadSelfAttention(32, 4) with RoPE and batched token_positions (2, 9)"),
            dict(d=d, heads=h, state=weights(39, attention_shapes(d)), x=x,
                 what="MultiHeadSelfAttention(32, 4) without RoPE")]


def causal_property(make, what: str) -> Property:
    """A causal layer or model: changing the inputs from position 5 on leaves positions 0–4 unchanged.
    make(m) → (call, x, x_changed): the layer (weights loaded), an input and the same input changed
    from position 5 on (the seq axis is 1)."""
    def probe(m):
        call, x, changed = make(m)
        d = differs(call(changed)[:, :5], call(x)[:, :5])
        return d and f"changing the input from position 5 on moved the outputs at positions 0–4: {d}"
    return Property(f"{what} is causal: changing a later token leaves the outputs at earlier positions unchanged",
                    probe, idea="apply the causal mask (True where key ≤ query, torch.tril) in every head, so query t "
                                "sees keys 0 … t and nothing after")


def batch_rows_property(make, what: str) -> Property:
    """Each batch row on its own: the output for row 1 of a batch equals the output for row 1 alone."""
    def probe(m):
        call, x, _ = make(m)
        d = differs(call(x)[1], call(x[1:2])[0], atol=1e-4)
        if d:
            return f"the output of batch row 1 in a batch of 2 and alone: {d}"
        try:
            alone = call(x[1])
        except Exception as e:  # noqa: BLE001 - the contract's "..." allows no batch dim at all
            return f"on batch row 1 without its batch dim, {tuple(x[1].shape)}: your code raised {one_line(e)}"
        d = differs(call(x)[1], alone, atol=1e-4)
        return d and f"the output of batch row 1 in a batch of 2 and of that row without a batch dim: {d}"
    return Property(f"{what} treats each batch row on its own, and works without a batch dim", probe,
                    idea="split and merge the heads with the batch dims left where they are: rearrange "
                         "'... seq (heads d_k) -> ... heads seq d_k' and back, never mixing them with seq or heads, "
                         "and read seq as x.shape[-2], not x.shape[1]")


def _mhsa_inputs(m):
    layer = m.MultiHeadSelfAttention(32, 4, 32, 10000.0)
    load_state(layer, weights(72, attention_shapes(32)))
    x = randn(73, 2, 8, 32)
    changed = x.clone()
    changed[:, 5:] = randn(74, 2, 3, 32)
    return layer, x, changed


def _mhsa_relative(m):
    layer, x, _ = _mhsa_inputs(m)
    positions = torch.arange(8)
    with torch.no_grad():
        d = differs(layer(x, positions + 7), layer(x, positions), atol=1e-4)
    return d and f"positions 7 … 14 and 0 … 7 for the same x (2, 8, 32): {d}"


def rope_built_as(rope, m, theta: float, d_k: int, max_len: int, what: str) -> str | None:
    """How `rope`, the RoPE a layer built (its .rope), misses a fresh RotaryPositionalEmbedding(theta, d_k,
    max_len) of the student's own on x (2, d_k) at positions 1 and max_len − 1; None when they agree."""
    if rope is None:
        return f"{what}.rope is None, expected RotaryPositionalEmbedding({theta:g}, {d_k}, {max_len})"
    x, pos = randn(190, 2, d_k), torch.tensor([1, max_len - 1])
    return at_edge(f"{what}.rope and RotaryPositionalEmbedding({theta:g}, {d_k}, {max_len}) on x (2, {d_k}) at "
                   f"positions 1 and {max_len - 1}", lambda: rope(x, pos),
                   lambda: m.RotaryPositionalEmbedding(theta, d_k, max_len)(x, pos))


def _mhsa_rope_built(m):
    layer = m.MultiHeadSelfAttention(32, 4, 16, 500.0)
    wrong = rope_built_as(getattr(layer, "rope", None), m, 500.0, 8, 16, "MultiHeadSelfAttention(32, 4, 16, 500)")
    if wrong:
        return wrong
    plain = getattr(m.MultiHeadSelfAttention(32, 4), "rope", "no attribute")
    return None if plain is None else "MultiHeadSelfAttention(32, 4), without theta, has a rope that is not None"


def _mhsa_first_token(m):
    layer, x, _ = _mhsa_inputs(m)
    with torch.no_grad():
        return at_edge("on x (2, 8, 32), the output at position 0 and output_proj(v_proj(x)) there",
                       lambda: layer(x)[:, 0], lambda: layer.output_proj(layer.v_proj(x[:, :1]))[:, 0])


def _mhsa_same_heads(m):
    """Four heads with the same rows of q_proj, k_proj and v_proj: output_proj receives four equal slices."""
    layer = m.MultiHeadSelfAttention(32, 4, 32, 10000.0)
    block = weights(191, {n: (8, 32) for n in ("q_proj", "k_proj", "v_proj")})
    state = {f"{n}.weight": block[n].repeat(4, 1) for n in block}
    load_state(layer, {**state, "output_proj.weight": weights(192, {"w": (32, 32)})["w"]})
    seen = []
    hook = layer.output_proj.register_forward_pre_hook(lambda module, args: seen.append(args[0].detach().clone()))
    try:
        with torch.no_grad():
            layer(randn(193, 2, 6, 32))
    finally:
        hook.remove()
    if not seen:
        return "output_proj was never called"
    heads = seen[-1].reshape(*seen[-1].shape[:-1], 4, 8)
    for h in range(1, 4):
        d = differs(heads[..., h, :], heads[..., 0, :], atol=1e-4)
        if d:
            return (f"with the four heads' rows of q_proj, k_proj and v_proj equal, head {h}'s slice of output_proj's "
                    f"input (columns {8 * h} … {8 * h + 7}) and head 0's: {d}")
    return None


def _mhsa_uses_positions(m):
    layer, x, _ = _mhsa_inputs(m)
    with torch.no_grad():
        d = differs(layer(x, torch.tensor([0, 5, 1, 9, 2, 2, 7, 30])), layer(x))
    return None if d else ("on x (2, 8, 32), positions [0, 5, 1, 9, 2, 2, 7, 30] and the default 0 … 7 give the same "
                           "output")


def _mhsa_one_head(m):
    """One head without RoPE is causal attention between its own projections, written out here (only this
    task's code runs: never Task 6.2's function)."""
    layer = m.MultiHeadSelfAttention(8, 1)
    load_state(layer, weights(194, attention_shapes(8), scale=0.6))
    x = randn(195, 2, 5, 8)
    with torch.no_grad():
        q, k, v = layer.q_proj(x), layer.k_proj(x), layer.v_proj(x)
        scores = (q @ k.transpose(-2, -1) / 8 ** 0.5).masked_fill(~torch.ones(5, 5, dtype=torch.bool).tril(), -1e9)
        weights_ = (scores - scores.amax(-1, keepdim=True)).exp()
        want = layer.output_proj(weights_ / weights_.sum(-1, keepdim=True) @ v)
        return at_edge("MultiHeadSelfAttention(8, 1) on x (2, 5, 8), the output and output_proj(softmax(q kᵀ / √8, "
                       "causal) v) of its own projections", lambda: layer(x), want)


# every projection takes part first: k computed with q_proj breaks the one-head formula too, but says less
MHSA_PROPERTIES = (learns(lambda m: (lambda layer, x, _: (layer, (x,)))(*_mhsa_inputs(m)), "the attention"),
                   sublayer_adds_no_residual(lambda m: m.MultiHeadSelfAttention(32, 4), "MultiHeadSelfAttention(32, 4)",
                                        last="output_proj"),
                   Property("self.rope is RotaryPositionalEmbedding(theta, d_k, max_seq_len), and None without theta",
                            _mhsa_rope_built,
                            example="attn = minilm.MultiHeadSelfAttention(32, 4, 16, 500.0)\n"
                                    "x, p = torch.randn(2, 8), torch.tensor([1, 15])\n"
                                    "print(attn.rope(x, p) - minilm.RotaryPositionalEmbedding(500.0, 8, 16)(x, p))\n"
                                    "print(minilm.MultiHeadSelfAttention(32, 4).rope)  # None",
                            idea="in __init__, self.rope = RotaryPositionalEmbedding(theta, self.d_k, max_seq_len) "
                                 "in that order (d_k = d_model / num_heads, not d_model) when theta is given, else "
                                 "None"),
                   Property("query 0 sees key 0 alone: the output at the first position is output_proj(v_proj(x)) "
                            "there", _mhsa_first_token,
                            example="attn = minilm.MultiHeadSelfAttention(32, 4, 32, 10000.0)\n"
                                    "x = torch.randn(1, 8, 32)\n"
                                    "print(attn(x)[:, 0] - attn.output_proj(attn.v_proj(x))[:, 0])  # zeros",
                            idea="the causal mask keeps the diagonal (tril(diagonal=0): key t for query t), v is "
                                 "neither rotated nor mixed, and the heads are merged back as '… seq (heads d_k)'"),
                   Property("heads with the same weights compute the same thing: each head attends with its own "
                            "d_k columns alone", _mhsa_same_heads,
                            example="attn = minilm.MultiHeadSelfAttention(32, 4, 32, 10000.0)\n"
                                    "for p in (attn.q_proj, attn.k_proj, attn.v_proj):\n"
                                    "    p.weight.data = p.weight.data[:8].repeat(4, 1)\n"
                                    "attn.output_proj.register_forward_pre_hook(lambda m, a: print(a[0][0, :, :8] - "
                                    "a[0][0, :, 8:16]))\nattn(torch.randn(1, 6, 32))  # zeros",
                            idea="split the heads first ('… seq (heads d_k) -> … heads seq d_k'), then rotate q and k "
                                 "with the RoPE of d_k (the same frequencies in every head) and scale by √d_k"),
                   Property("token_positions reach RoPE: other positions give other outputs", _mhsa_uses_positions,
                            example="attn = minilm.MultiHeadSelfAttention(32, 4, 32, 10000.0)\n"
                                    "x = torch.randn(1, 8, 32)\n"
                                    "print(attn(x, torch.tensor([0, 5, 1, 9, 2, 2, 7, 30])) - attn(x))  # not zeros",
                            idea="use the token_positions given, and torch.arange(seq) only when they are None"),
                   causal_property(_mhsa_inputs, "attention"), batch_rows_property(_mhsa_inputs, "attention"),
                   Property("with RoPE on q and k, only relative positions count: shifting every position by the "
                            "same offset leaves the output unchanged", _mhsa_relative,
                            example="attn = minilm.MultiHeadSelfAttention(32, 4, 32, 10000.0)\n"
                                    "x, p = torch.randn(1, 8, 32), torch.arange(8)\n"
                                    "print(attn(x, p + 7) - attn(x, p))  # zeros",
                            idea="rotate both q and k with self.rope at the same positions, after splitting the "
                                 "heads: q·k then depends on the positions' difference only"),
                   Property("with one head and no RoPE, the layer is output_proj(softmax(q kᵀ / √d_k, causal) v) of "
                            "its own q, k and v", _mhsa_one_head,
                            example="attn = minilm.MultiHeadSelfAttention(8, 1)\nx = torch.randn(5, 8)\n"
                                    "mask = torch.ones(5, 5, dtype=torch.bool).tril()\n"
                                    "sdpa = minilm.scaled_dot_product_attention(attn.q_proj(x), attn.k_proj(x), "
                                    "attn.v_proj(x), mask)\nprint(attn(x) - attn.output_proj(sdpa))  # zeros",
                            idea="call scaled_dot_product_attention(q, k, v, causal) once, with q from q_proj and k "
                                 "from k_proj in that order; it scales by √d_k itself, so do not scale q before"),
                   *module_contract(lambda m, **kw: m.MultiHeadSelfAttention(32, 4, 32, 10000.0, **kw),
                                    lambda _: (randn(82, 2, 5, 32),), "MultiHeadSelfAttention(32, 4, 32, 10000.0)",
                                    calls_linears=True, meta=False))

spec("6.3", properties=MHSA_PROPERTIES,
     collect=lambda m, c: layer_collect(_mhsa(m, c), c), cases=_mhsa_cases, outputs={"y": "the output"},
     invariant=lambda got, c: keys_problem(got["keys"], list(attention_shapes(c["d"])),
                                           f"MultiHeadSelfAttention({c['d']}, {c['heads']})"),
     on_error=lambda c: None if c.get("pos") is None or c["pos"].ndim < 2 else (
         "attention_positions_1d", "token_positions is (batch, seq), one row per batch row, and q and k are (batch, "
                                   "heads, seq, d_k): give RoPE the positions with a heads axis, "
                                   "token_positions.unsqueeze(-2), so each head gets its batch row's positions"),
     mistakes=MHSA_MISTAKES,
     passed="causal, per-head rows, RoPE on q and k (1-D and batched positions): "
            "matches F.scaled_dot_product_attention")
