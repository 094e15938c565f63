"""Specs of notebook 13: the classic Transformer beside today's (provided). See minilm/course/exercises/__init__.py.

The contract's state_dict names and parameter counts for every ClassicConfig are written out
here, from the config's fields alone (a ClassicConfig or a plain dict of them: the grader's
cases cross to the worker as plain data)."""

from __future__ import annotations

import torch

from minilm.course.exercises import (
    Problem,
    Property,
    at_edge,
    attention_shapes,
    count,
    differs,
    each_row_alone,
    few_values,
    first,
    gen,
    gradient_follows,
    keeps_dtype,
    keeps_inputs,
    keys_problem,
    layers_of_their_own,
    load_matching,
    module_contract,
    randn,
    shown,
    spec,
    state_keys,
    sublayer_adds_no_residual,
    weights,
)
from minilm.course.exercises.rope_attention import rope_built_as

# ClassicConfig's defaults: the course's model.
DEFAULTS = dict(norm_position="pre", norm="rmsnorm", ffn="swiglu", positions="rope", tied_head=False, d_ff=None,
                rope_theta=10000.0)


def _field(cfg, name: str):
    if isinstance(cfg, dict):
        return cfg.get(name, DEFAULTS.get(name))
    return getattr(cfg, name)


def ffn_width(cfg) -> int:
    """The FFN's inner width: d_ff, or 4·d_model for GELU and round(8·d_model/3) for SwiGLU."""
    d_ff, d = _field(cfg, "d_ff"), _field(cfg, "d_model")
    return d_ff if d_ff is not None else (4 * d if _field(cfg, "ffn") == "gelu" else round(8 * d / 3))


def _norm_shapes(prefix: str, cfg) -> dict[str, tuple[int, ...]]:
    d = _field(cfg, "d_model")
    return {f"{prefix}.weight": (d,), **({f"{prefix}.bias": (d,)} if _field(cfg, "norm") == "layernorm" else {})}


def classic_block_shapes(cfg, prefix: str = "") -> dict[str, tuple[int, ...]]:
    """ClassicBlock(cfg)'s state_dict, name → shape, in the module's order."""
    d, h = _field(cfg, "d_model"), ffn_width(cfg)
    ffn = {f"{prefix}ffn.w1.weight": (h, d), f"{prefix}ffn.w2.weight": (d, h)}
    if _field(cfg, "ffn") == "swiglu":
        ffn[f"{prefix}ffn.w3.weight"] = (h, d)
    return {**_norm_shapes(f"{prefix}ln1", cfg), **attention_shapes(d, f"{prefix}attn."),
            **_norm_shapes(f"{prefix}ln2", cfg), **ffn}


def classic_lm_shapes(cfg) -> dict[str, tuple[int, ...]]:
    """ClassicLM(cfg)'s state_dict, name → shape, in order (a tied head is listed under both names)."""
    d, v = _field(cfg, "d_model"), _field(cfg, "vocab_size")
    shapes = {"token_embeddings.weight": (v, d)}
    if _field(cfg, "positions") == "learned":
        shapes["position_embeddings.weight"] = (_field(cfg, "context_length"), d)
    for i in range(_field(cfg, "num_layers")):
        shapes |= classic_block_shapes(cfg, f"layers.{i}.")
    if _field(cfg, "norm_position") == "pre":
        shapes |= _norm_shapes("ln_final", cfg)
    return shapes | {"lm_head.weight": (v, d)}


def classic_block_keys(cfg) -> list[str]:
    return list(classic_block_shapes(cfg))


def classic_lm_keys(cfg) -> list[str]:
    return list(classic_lm_shapes(cfg))


def classic_parameter_count(cfg) -> int:
    """Every parameter once: a tied head adds none of its own."""
    shapes = classic_lm_shapes(cfg)
    if _field(cfg, "tied_head"):
        del shapes["lm_head.weight"]
    return sum(torch.Size(s).numel() for s in shapes.values())


def classic_lm_state(g, cfg) -> dict[str, torch.Tensor]:
    """Random weights for ClassicLM(cfg); a tied head gets the embedding's."""
    state = weights(g, classic_lm_shapes(cfg))
    if _field(cfg, "tied_head"):
        state["lm_head.weight"] = state["token_embeddings.weight"]
    return state


# ---------------------------------------------------------------- 13.1: LayerNorm

LN_MISTAKES = {
    "layer_norm_no_mean": "subtract the mean first: LayerNorm centres x, then divides by the standard deviation "
                          "(without the mean it is RMSNorm plus a bias)",
    "layer_norm_unbiased_var": "use the biased variance, mean((x − mean)²), dividing by d_model as torch.nn.LayerNorm "
                               "does, not by d_model − 1 (torch.var's default)",
    "layer_norm_eps_outside_sqrt": "eps belongs inside the square root: sqrt(var + eps), not sqrt(var) + eps",
    "ignores_eps": "use the eps given to the constructor",
}


def _layer_norm_collect(m, c):
    eps = {"eps": c["eps"]} if "eps" in c else {}
    if "w" in c:
        return {"y": m.layer_norm(c["x"], c["w"], c["b"], **eps)}
    norm = m.LayerNorm(c["d"], **eps)
    state = norm.state_dict()
    out = {"keys": state_keys(norm),
           **{f"{k}0": state[k].clone() if k in state else "missing" for k in ("weight", "bias")}}
    load_matching(norm, c["state"], f"LayerNorm({c['d']})")
    out["y"] = norm(c["x"])
    return out


def _layer_norm_invariant(got, c) -> Problem | None:
    y, x = got["y"], c["x"]
    if type(y) is torch.Tensor and y.dtype != x.dtype:
        return Problem(f"layer_norm must return the input's dtype ({str(x.dtype).replace('torch.', '')}), got "
                       f"{str(y.dtype).replace('torch.', '')}", "wrong_dtype")
    if "w" in c:
        return None
    what = f"LayerNorm({c['d']})"
    if got["keys"] == ["weight"]:
        return Problem(f"{what}: LayerNorm has a learnable bias beside its gain: add an nn.Parameter `bias`, "
                       "starting at "
                       "zeros", "layer_norm_no_bias")
    w0, b0 = got["weight0"], got["bias0"]
    return first(keys_problem(got["keys"], ["weight", "bias"], what),
                 None if type(w0) is torch.Tensor and type(b0) is torch.Tensor and torch.equal(w0, torch.ones(c["d"]))
                 and torch.equal(b0, torch.zeros(c["d"])) else Problem(
                     "LayerNorm must start with weight at ones and bias at zeros (the identity after normalizing)",
                     "wrong_init"))


def _ln_state(seed: int, d: int) -> dict[str, torch.Tensor]:
    return weights(seed, {"ln.weight": (d,), "ln.bias": (d,)})  # a gain near 1 and a bias near 0


def _layer_norm_cases():
    cases = []
    for shape, scale, offset in (((2, 5, 16), 1.0, 0.5), ((3, 8), 1e-2, 3.0), ((16,), 50.0, -20.0)):
        st = _ln_state(61, shape[-1])
        cases.append(dict(x=randn(60, *shape, scale=scale) + offset, w=st["ln.weight"], b=st["ln.bias"],
                          what=f"x {shape} (values {offset:g} ± {scale:g})"))
    cases.append(dict(x=(randn(63, 4, 16) * 3 + 1).to(torch.bfloat16), w=torch.ones(16, dtype=torch.bfloat16),
                      b=torch.zeros(16, dtype=torch.bfloat16), what="x (4, 16) in bfloat16"))
    for seed, eps, scale, offset in ((64, None, 1.0, 2.0), (66, 1e-2, 1e-2, 0.0)):
        st = _ln_state(seed, 24)
        case = dict(d=24, state={"weight": st["ln.weight"], "bias": st["ln.bias"]},
                    x=randn(seed + 1, 2, 3, 24, scale=scale)
                    + offset, what=f"LayerNorm(24{'' if eps is None else f', eps={eps:g}'}) and x (2, 3, 24)")
        cases.append(case if eps is None else case | {"eps": eps})
    return cases


def _layer_norm_standardizes(m):
    x = randn(87, 3, 16) * 5 + 40
    y = m.layer_norm(x, torch.ones(16), torch.zeros(16))
    d = differs(y.mean(-1), torch.zeros(3), atol=1e-4) or differs(y.pow(2).mean(-1), torch.ones(3), atol=1e-3)
    if not d:
        return None
    rows = ", ".join(f"{a:.4g} and {b:.4g}" for a, b in zip(y.mean(-1).tolist(), y.pow(2).mean(-1).tolist()))
    saw = f"on x (3, 16) around 40, your rows' means and mean squares are {rows}"
    if bool((y == 1).all()):  # x̂ · 0 + 1: the bias multiplies and the weight adds
        saw += ": every output is 1, the weight's value (do the weight and the bias swap places?)"
    return saw


def _layer_norm_shift(m):
    x, w, b = randn(124, 3, 16, scale=0.1), randn(125, 16), randn(126, 16)
    d = differs(m.layer_norm(x + 300, w, b), m.layer_norm(x, w, b), atol=1e-2, rtol=1e-2)
    return d and f"on x (3, 16) of size ~0.1, layer_norm(x + 300) and layer_norm(x): {d}"


def _layer_norm_float16(m):
    x, w, b = (randn(88, 2, 16, scale=30) + 300).half(), torch.ones(16).half(), torch.zeros(16).half()
    d = differs(m.layer_norm(x, w, b), m.layer_norm(x.float(), w.float(), b.float()).half(), atol=2e-2, rtol=2e-2)
    return d and f"on a float16 x (2, 16) near 300 and its float32 copy: {d}"


def _layer_norm_module_bias(m):
    norm = m.LayerNorm(8)
    bias = torch.arange(8.0)
    load_matching(norm, {"weight": torch.zeros(8), "bias": bias}, "LayerNorm(8)")
    d = differs(norm(randn(122, 3, 8)), bias.expand(3, 8))
    return d and f"LayerNorm(8) with weight 0 and bias 0, 1, …, 7: the output and the bias: {d}"


def _layer_norm_constant_rows(m):
    x, bias = torch.tensor([[2.5] * 8, [0.0] * 8, [-4.0] * 8]), torch.arange(8.0) / 4
    return at_edge("on x (3, 8) whose rows are all 2.5, all 0 and all −4 (variance 0), weight 1 and bias 0, 0.25, "
                   "…, 1.75: the output and the bias in every row", lambda: m.layer_norm(x, torch.ones(8), bias),
                   bias.expand(3, 8))


def _layer_norm_eps_added(m):
    x = torch.tensor([[1e-3, -1e-3] * 2])  # mean 0, variance 1e-6: with eps = 1e-6 the root is of 2e-6
    y = m.layer_norm(x, torch.ones(4), torch.zeros(4), eps=1e-6)
    got = float(y[0, 0]) if type(y) is torch.Tensor and y.numel() else float("nan")
    want = 1e-3 / (2e-6) ** 0.5  # 1/√2
    return None if abs(got - want) < 1e-4 else (
        f"x = [0.001, −0.001] × 2 has variance 1e-6; with eps 1e-6 its first value comes out {got:.5g}, expected "
        f"0.001 / √(1e-6 + 1e-6) = {want:.5g}")


def _layer_norm_default_eps(m):
    x, w, b = randn(123, 3, 8, scale=1e-3), torch.ones(8), torch.zeros(8)  # variance ≈ 1e-6: eps changes y
    d = differs(m.layer_norm(x, w, b), m.layer_norm(x, w, b, eps=1e-5), atol=1e-6)
    if d:
        return f"on x (3, 8) of size ~1e-3, layer_norm(x, w, b) and layer_norm(x, w, b, eps=1e-5): {d}"
    with torch.no_grad():
        d = differs(m.LayerNorm(8)(x), m.LayerNorm(8, eps=1e-5)(x), atol=1e-6)
    return d and f"on x (3, 8) of size ~1e-3, LayerNorm(8) and LayerNorm(8, eps=1e-5): {d}"


LAYER_NORM_PROPERTIES = (
    keeps_inputs("layer_norm", lambda: (randn(106, 3, 16), randn(107, 16), randn(108, 16)), "on x (3, 16)"),
    Property("with weight 1 and bias 0, each row comes out with mean 0 and mean square 1", _layer_norm_standardizes,
             example="x = 5 * torch.randn(3, 16) + 40\ny = minilm.layer_norm(x, torch.ones(16), torch.zeros(16))\n"
                     "print(y.mean(-1), y.pow(2).mean(-1))  # 0 and 1",
             idea="subtract each row's mean, divide by the square root of the mean of the squared deviations "
                  "(the biased variance) + eps, over the last dim; then multiply by the weight and add the bias"),
    Property("adding one number to every entry of a row changes nothing, even 300 to entries of size 0.1",
             _layer_norm_shift,
             example="x, w, b = 0.1 * torch.randn(3, 16), torch.ones(16), torch.zeros(16)\n"
                     "print(minilm.layer_norm(x + 300, w, b) - minilm.layer_norm(x, w, b))  # zeros",
             idea="subtract the mean first, then average the squared deviations: mean((x − mean)²). E[x²] − E[x]² is "
                  "the same on paper, but in float32 two numbers near 90,000 cancel and the digits of a variance of "
                  "0.01 are lost"),
    Property("a row whose entries are all equal (variance 0) comes out as the bias: eps keeps 0 / 0 away",
             _layer_norm_constant_rows,
             example="print(minilm.layer_norm(torch.full((2, 8), 2.5), torch.ones(8), torch.zeros(8)))  # zeros",
             idea="add eps to the variance inside the square root, sqrt(var + eps): a constant row's deviations are "
                  "0, and 0 / sqrt(0) is NaN"),
    Property("eps is added to the variance under the root: a row whose variance equals eps comes out at ±1/√2 "
             "(weight 1, bias 0)", _layer_norm_eps_added,
             example="x = torch.tensor([[1e-3, -1e-3, 1e-3, -1e-3]])  # variance 1e-6\n"
                     "print(minilm.layer_norm(x, torch.ones(4), torch.zeros(4), eps=1e-6))  # ±0.7071",
             idea="(x − mean) / sqrt(var + eps): eps is added inside the square root, not used as a floor (max, "
                  "clamp) nor added to the standard deviation"),
    Property("the default eps of layer_norm and LayerNorm is the contract's 1e-5", _layer_norm_default_eps,
             example="x = 1e-3 * torch.randn(3, 8)\nw, b = torch.ones(8), torch.zeros(8)\n"
                     "print(minilm.layer_norm(x, w, b) - minilm.layer_norm(x, w, b, eps=1e-5))  # zeros",
             idea="keep the signatures' default, eps: float = 1e-5, in layer_norm and in LayerNorm.__init__"),
    Property("LayerNorm multiplies by weight, then adds bias: with weight 0 the output is the bias",
             _layer_norm_module_bias,
             example="norm = minilm.LayerNorm(8)\n"
                     "norm.load_state_dict({'weight': torch.zeros(8), 'bias': torch.arange(8.0)})\n"
                     "print(norm(torch.randn(3, 8)))  # every row 0, 1, …, 7",
             idea="(x − mean) / sqrt(var + eps) · self.weight + self.bias: the gain multiplies, the bias is added"),
    Property("a float16 x gives its float32 result rounded to float16, also near 300", _layer_norm_float16,
             idea="compute in float32 (x.float()) and return the input's dtype"),
    *module_contract(lambda m, **kw: m.LayerNorm(32, **kw), lambda _: (randn(121, 2, 3, 32),), "LayerNorm(32)",
                     x_dtype=True),
)

spec("13.1",
     rows=each_row_alone("layer_norm", lambda: (randn(184, 3, 4, 6), randn(185, 6), randn(186, 6)), "on x (3, 4, 6)"),
     dtypes=keeps_dtype("layer_norm", lambda: (randn(165, 3, 6), randn(166, 6), randn(167, 6)), "on x (3, 6)",
                        mixed=True, idea="compute in float32 (x.float(), the weight and bias too) whatever x's "
                                         "dtype, and cast the result once, at the end, to x's dtype"),
     gradient=gradient_follows("layer_norm", lambda: (randn(135, 3, 6).double(), randn(136, 6).double(),
                                                    randn(137, 6).double()), "on x (3, 6)", wrt=(0, 1, 2),
                                call="x, torch.ones(4, dtype=torch.float64), torch.zeros(4, dtype=torch.float64)"),
     properties=LAYER_NORM_PROPERTIES,
     collect=_layer_norm_collect, cases=_layer_norm_cases, invariant=_layer_norm_invariant,
     outputs={"y": "layer_norm"}, mistakes=LN_MISTAKES,
     passed="matches F.layer_norm (biased variance, eps inside the root), weight at ones and bias at zeros")

# ---------------------------------------------------------------- 13.2: sinusoidal positions


def _sinusoid_collect(m, c):
    pe = m.sinusoidal_positions(c["seq"], c["d"])
    return {"shape": list(pe.shape), "dtype": str(pe.dtype), "pe": pe[c["rows"]]}


def _sinusoid_turns(m):
    pe = m.sinusoidal_positions(20001, 8).double()
    sin1, cos1 = pe[1, 0::2], pe[1, 1::2]  # row 1: the sine and cosine of each pair's angle per position
    prev, row = pe[19999], pe[20000]
    turned = torch.stack((prev[0::2] * cos1 + prev[1::2] * sin1, prev[1::2] * cos1 - prev[0::2] * sin1), -1).flatten()
    d = differs(row, turned, atol=2e-6, rtol=0)
    return d and f"row 20,000 and row 19,999 turned by row 1's angles: {d}"


def _sinusoid_slower(m):
    pe = m.sinusoidal_positions(64, 8).double()
    angles = torch.atan2(pe[1, 0::2], pe[1, 1::2])  # position 1's angle in each pair (sin, cos)
    want = 10000.0 ** (-torch.arange(0, 8, 2, dtype=torch.float64) / 8)
    if not torch.allclose(angles, want, atol=1e-5, rtol=1e-4):
        return (f"position 1's angles by pair, d_model 8: {[round(float(a), 4) for a in angles]}, expected "
                f"{[round(float(a), 4) for a in want]}")
    return None


def _sinusoid_rows_are_positions(m):
    pe = m.sinusoidal_positions(12, 8).double()
    d = differs(pe[0], torch.tensor([0.0, 1.0] * 4, dtype=torch.float64))
    if d:
        return f"sinusoidal_positions(12, 8): row 0 is {[round(float(v), 4) for v in pe[0]]}, expected position 0's " \
               "[0, 1, 0, 1, 0, 1, 0, 1]"
    radius = pe[:, 0::2] ** 2 + pe[:, 1::2] ** 2  # each pair (sin a, cos a) of one angle lies on the unit circle
    d = differs(radius, torch.ones_like(radius))
    return d and f"sinusoidal_positions(12, 8): sin² + cos² of each pair (columns 2i, 2i + 1) and 1: {d}"


SINUSOID_PROPERTIES = (
    Property("row p holds position p: row 0 is sin 0, cos 0 = [0, 1, 0, 1, …], and each pair is the sine and cosine "
             "of one angle", _sinusoid_rows_are_positions,
             example="pe = minilm.sinusoidal_positions(12, 8)\nprint(pe[0])  # 0, 1, 0, 1, …\n"
                     "print(pe[:, 0::2] ** 2 + pe[:, 1::2] ** 2)  # ones",
             idea="the angles are positions (seq_len, 1) times frequencies (1, d_model/2): rows are positions, "
                  "columns pairs; then put each angle's sin and cos side by side, pair by pair"),
    Property("pair i turns more slowly as i grows: position 1's angle is 10000^(−2i/d), shrinking with i",
             _sinusoid_slower,
             example="pe = minilm.sinusoidal_positions(64, 8)\n"
                     "print(torch.atan2(pe[1, 0::2], pe[1, 1::2]))  # 1, 0.1, 0.01, 0.001",
             idea="the frequency of pair i is 10000^(−2i/d_model): mind the minus in the exponent"),
    Property("each row is the previous one turned by row 1's angles, also at position 20,000 (the angles p · ω "
             "computed in float64)", _sinusoid_turns,
             example="pe = minilm.sinusoidal_positions(20001, 8).double()\n"
                     "print(pe[20000, 0], torch.sin(torch.tensor(20000.0, dtype=torch.float64)))",
             idea="build the positions and frequencies in float64 (p · 10000^(−2i/d) loses digits in float32 at "
                  "large p), take sin and cos, and convert to float32 only at the end"),
)

spec("13.2", properties=SINUSOID_PROPERTIES,
     collect=_sinusoid_collect, atol=1e-4,
     cases=lambda: [dict(seq=12, d=8, rows=torch.arange(12), what="sinusoidal_positions(12, 8)"),
                    dict(seq=64, d=32, rows=torch.arange(64), what="sinusoidal_positions(64, 32)"),
                    dict(seq=5000, d=6, rows=torch.arange(4997, 5000),
                         what="the last rows of sinusoidal_positions(5000, 6)")],
     invariant=lambda got, c: None if got["shape"] == [c["seq"], c["d"]] and got["dtype"] == "torch.float32"
     else Problem(
         f"sinusoidal_positions({c['seq']}, {c['d']}) must be a float32 tensor of shape (seq_len, d_model) = "
         f"({c['seq']}, {c['d']}), got shape {shown(got['shape'])}", "wrong_shape", f", {got['dtype']}"),
     outputs={"pe": "the rows"},
     mistakes={
         "sinusoid_halves": "interleave: sin at dim 2i and cos at dim 2i+1 of the same frequency, not all the sines "
                            "and then all the cosines",
         "sinusoid_sin_cos_swapped": "put the sine on the even dims (2i) and the cosine on the odd ones (2i+1)",
         "sinusoid_frequency": "pair i's frequency is 1 / 10000^(2i / d_model): i counts pairs, so the exponent is "
                               "2i / d_model (the even dim's index over d_model), not i / d_model",
         "sinusoid_one_based": "the first position is 0: row 0 is sin(0) = 0, cos(0) = 1",
     },
     passed="sin on even dims, cos on odd, frequency 1/10000^(2i/d): matches the paper's formula")

# ---------------------------------------------------------------- 13.3: GELU

def _gelu_odd_part(m):
    x = torch.linspace(-5, 5, 41)
    d = differs(m.gelu(x) - m.gelu(-x), x)
    return d and f"on x from −5 to 5, gelu(x) − gelu(−x) and x: {d}"


def _gelu_at_one(m):
    got = m.gelu(torch.tensor([1.0, -1.0], dtype=torch.float64))
    d = differs(got, torch.tensor([0.8413447460685429, -0.15865525393145707], dtype=torch.float64), atol=1e-6)
    if not d:
        return None
    saw = few_values(got, "gelu(1), gelu(−1)") or f"gelu(±1) and ±1 · Φ(±1) = 0.841345, −0.158655: {d}"
    if type(got) is torch.Tensor and got.shape == (2,) and 0.5 < got[0].item() < 1:
        # x · Φ(x / σ) for some σ: the CDF of a normal of another std (erf(x / 2), erf(x))
        sigma = 1 / (2 ** 0.5 * torch.special.erfinv(2 * got[0] - 1).item())
        if abs(got[0].item() - got[1].item() - 1) < 1e-6 and abs(sigma - 1) > 1e-3:
            saw += f"; yours is 1 · Φ(1 / σ) with σ = {sigma:.3g}, the CDF of a normal of std {sigma:.3g}, not 1"
    return saw


GELU_PROPERTIES = (
    Property("gelu(1) = Φ(1) = 0.841345 and gelu(−1) = −Φ(−1) = −0.158655 (Φ the standard normal CDF)", _gelu_at_one,
             example="print(minilm.gelu(torch.tensor([1.0, -1.0], dtype=torch.float64)))",
             idea="Φ(x) = ½ (1 + erf(x / √2)): the √2 turns erf's scale into the standard normal's"),
    keeps_inputs("gelu", lambda: (randn(109, 2, 7),), "on x (2, 7)"),
    Property("gelu(x) − gelu(−x) = x (since Φ(x) + Φ(−x) = 1)", _gelu_odd_part,
             example="x = torch.linspace(-5, 5, 41)\nprint(minilm.gelu(x) - minilm.gelu(-x) - x)",
             idea="GELU is x · Φ(x), Φ(x) = ½ (1 + erf(x / √2)): the factor x and the one half are easy to drop"),
)

spec("13.3",
     rows=each_row_alone("gelu", lambda: (randn(187, 3, 5),), "on x (3, 5)"),
     dtypes=keeps_dtype("gelu", lambda: (randn(168, 3, 5),), "on x (3, 5)"),
     gradient=gradient_follows("gelu", lambda: (randn(138, 3, 5).double(),), "on x (3, 5)"),
     properties=GELU_PROPERTIES,
     collect=lambda m, c: {"y": m.gelu(c["x"])},
     cases=lambda: [dict(x=torch.linspace(-6, 6, 121), what="x on [-6, 6]"),
                    dict(x=randn(68, 2, 3, 4, scale=2), what="x (2, 3, 4)"),
                    dict(x=torch.tensor([-40.0, -10.0, 10.0, 40.0], dtype=torch.float64),
                         what="float64 x of ±10, ±40")],
     outputs={"y": "gelu"},
     mistakes={
         "gelu_tanh": "that is the tanh approximation 0.5x(1 + tanh(√(2/π)(x + 0.044715x³))); write the exact form "
                      "0.5·x·(1 + erf(x/√2))",
         "gelu_sigmoid": "that is the sigmoid approximation x·σ(1.702x); write the exact form 0.5·x·(1 + erf(x/√2))",
         "gelu_relu": "that is ReLU; GELU is x·Φ(x) = 0.5·x·(1 + erf(x/√2)), smooth and slightly negative below 0",
     },
     passed="matches F.gelu (exact, erf form), in float32 and float64")

# ---------------------------------------------------------------- 13.4: GELU FFN


def _gelu_ffn_collect(m, c):
    ffn = m.GeluFFN(c["d"], c["f"])
    out = {"keys": state_keys(ffn), "shapes": [list(v.shape) for _, v in sorted(ffn.state_dict().items())],
           "parameters": sum(p.numel() for p in ffn.parameters())}
    load_matching(ffn, c["state"], f"GeluFFN({c['d']}, {c['f']})")
    out["y"] = ffn(c["x"])
    return out


def _gelu_ffn_invariant(got, c) -> Problem | None:
    d, f = c["d"], c["f"]
    return first(keys_problem(got["keys"], ["w1.weight", "w2.weight"], f"GeluFFN({d}, {f})"),
                 None if got["shapes"] == [[f, d], [d, f]] else Problem(
                     f"GeluFFN({d}, {f}) weights must be w1 ({f}, {d}) and w2 ({d}, {f}), got "
                     f"{shown(got['shapes'])}", "weight_shapes"),
                 None if got["parameters"] == 2 * d * f else Problem(
                     f"GeluFFN({d}, {f}) has {count(got['parameters'])} parameters, expected 2·{d}·{f} = {2 * d * f:,}",
                     "parameter_count"))


def _gelu_ffn_any_width(m):
    shapes = sorted((k, list(v.shape)) for k, v in m.GeluFFN(8, 20).state_dict().items())
    want = [("w1.weight", [20, 8]), ("w2.weight", [8, 20])]
    return None if shapes == want else (f"GeluFFN(8, 20) has {shown([s for _, s in shapes])}, expected w1 [20, 8], "
                                        "w2 [8, 20]")


def _gelu_ffn_is_composition(m):
    ffn, x = m.GeluFFN(8, 20), randn(124, 2, 3, 8)
    with torch.no_grad():
        h = ffn.w1(x)  # only this task's code runs: never Task 13.3's gelu; GELU(h) = h·Φ(h)
        d = differs(ffn(x), ffn.w2(h * (1 + torch.erf(h / 2 ** 0.5)) / 2), atol=1e-5)
    return d and f"GeluFFN(8, 20) on x (2, 3, 8), its output and its own w2(GELU(w1(x))), GELU exact: {d}"


spec("13.4", properties=(
         Property("GeluFFN(d_model, d_ff) uses the d_ff it is given, any d_ff", _gelu_ffn_any_width,
                  example="print({k: v.shape for k, v in minilm.GeluFFN(8, 20).state_dict().items()})",
                  idea="size the inner layer by the d_ff argument, not by a fixed 4 · d_model"),
         sublayer_adds_no_residual(lambda m: m.GeluFFN(8, 20), "GeluFFN(8, 20)"),
         Property("GeluFFN's forward is w2(GELU(w1(x))) of its own submodules, the exact GELU once between them",
                  _gelu_ffn_is_composition,
                  example="ffn, x = minilm.GeluFFN(8, 20), torch.randn(3, 8)\nh = ffn.w1(x)\n"
                          "print(ffn(x) - ffn.w2(h * (1 + torch.erf(h / 2 ** 0.5)) / 2))  # zeros",
                  idea="self.w2(gelu(self.w1(x))): your exact GELU (Task 13.3), applied once, not SiLU or another "
                       "activation"),
         *module_contract(lambda m, **kw: m.GeluFFN(32, 80, **kw), lambda _: (randn(83, 2, 3, 32),),
                          "GeluFFN(32, 80)")),
     collect=_gelu_ffn_collect, invariant=_gelu_ffn_invariant,
     cases=lambda: [dict(d=16, f=64, state=weights(69, {"w1.weight": (64, 16), "w2.weight": (16, 64)}),
                         x=randn(70, 2, 7, 16), what="GeluFFN(16, 64) and x (2, 7, 16)")],
     outputs={"y": "the output"},
     mistakes={
         "gelu_ffn_relu": "your FFN applies ReLU, the 2017 paper's activation: use your gelu between w1 and w2",
         "gelu_ffn_no_activation": "apply gelu between w1 and w2: without it the two layers are one linear map",
         "gelu_ffn_gelu_after_w2": "apply gelu to w1's output, between the layers, not after w2",
     },
     passed=f"w1, w2 shaped as the contract, forward matches w2(GELU(w1 x)); {2 * 16 * 64:,} parameters "
            f"(SwiGLU(16, 43): {3 * 16 * round(8 * 16 / 3):,})")

# ---------------------------------------------------------------- 13.5–13.6: block and LM

BASE = dict(vocab_size=97, context_length=32, d_model=32, num_layers=2, num_heads=4)
CLASSIC = dict(norm_position="post", norm="layernorm", ffn="gelu", positions="sinusoidal", tied_head=True)
# One change at a time from the course's model, then the classic one (changes named as in notebook 13).
ONE_CHANGE = {"modern": {}, "post-norm": dict(norm_position="post"), "LayerNorm": dict(norm="layernorm"),
              "GELU FFN": dict(ffn="gelu"), "sinusoidal positions": dict(positions="sinusoidal"),
              "learned positions": dict(positions="learned"), "no positions": dict(positions="none"),
              "tied head": dict(tied_head=True)}
# A block sees only the norm, the FFN and whether attention applies RoPE.
BLOCK_CHANGES = {"modern": {}, "post-norm": dict(norm_position="post"), "LayerNorm": dict(norm="layernorm"),
                 "GELU FFN": dict(ffn="gelu"), "no RoPE": dict(positions="none"), "classic": CLASSIC}


def _built(cls: str, changes: dict):
    """make(m, **kw) for module_contract: the student's `cls` built from BASE with `changes`."""
    return lambda m, **kw: getattr(m, cls)(m.ClassicConfig(**BASE | changes), **kw)


def _block_collect(m, c):
    out = {"keys": state_keys(blk := m.ClassicBlock(m.ClassicConfig(**c["config"])))}
    load_matching(blk, c["state"], "ClassicBlock")
    out["y"] = blk(c["x"], c["pos"]) if "pos" in c else blk(c["x"])
    return out


def _block_sublayers(m):
    """With one sublayer's output projection at zero, a block is its other half, from its own modules:
    pre-norm x + attn(ln1(x)) or x + ffn(ln2(x)); post-norm ln2(ln1(x + attn(x))) or ln2(h + ffn(h)), h = ln1(x)."""
    halves = {("pre", "ffn"): ("x + attn(ln1(x), token_positions)", lambda b, x, p: x + b.attn(b.ln1(x), p)),
              ("pre", "attn"): ("x + ffn(ln2(x))", lambda b, x, p: x + b.ffn(b.ln2(x))),
              ("post", "ffn"): ("ln2(ln1(x + attn(x, token_positions))): attention reads x itself",
                                lambda b, x, p: b.ln2(b.ln1(x + b.attn(x, p)))),
              ("post", "attn"): ("ln2(h + ffn(h)) with h = ln1(x): the FFN reads h itself",
                                 lambda b, x, p: b.ln2(b.ln1(x) + b.ffn(b.ln1(x))))}
    x, pos = randn(86, 2, 5, 32), torch.tensor([[3, 1, 4, 1, 5], [9, 2, 6, 5, 3]])  # not 0 … 4: the given ones
    for (position, zeroed), (rule, half) in halves.items():
        block = m.ClassicBlock(m.ClassicConfig(**BASE | dict(norm_position=position, norm="layernorm")))
        with torch.no_grad():
            (block.ffn.w2 if zeroed == "ffn" else block.attn.output_proj).weight.zero_()
            for i, norm in enumerate((block.ln1, block.ln2)):  # distinct gains and biases: a norm used twice shows
                norm.weight.copy_(1 + 0.3 * randn(87 + i, 32))
                norm.bias.copy_(0.2 * randn(89 + i, 32))
            d = differs(block(x, pos), half(block, x, pos), atol=1e-4)
        if d:
            return (f"norm_position='{position}', with {zeroed}'s output projection at zero, on x (2, 5, 32) and "
                    f"token_positions [[3, 1, 4, 1, 5], [9, 2, 6, 5, 3]], the block and {rule}: {d}")
    return None


def _block_no_rope(m):
    x = randn(91, 1, 5, 32)
    shuffled = x[:, [2, 0, 3, 1, 4]]  # the first four tokens reordered, the last one kept
    for position in ("pre", "post"):
        block = m.ClassicBlock(m.ClassicConfig(**BASE | dict(norm_position=position, positions="none")))
        with torch.no_grad():
            d = differs(block(shuffled)[:, -1], block(x)[:, -1], atol=1e-5)
        if d:
            return (f"positions='none', norm_position='{position}': the last token's output on x (1, 5, 32) and on x "
                    f"with its first four tokens reordered: {d}")
    return None


def _block_rope_built(m):
    cfg = m.ClassicConfig(**BASE | dict(rope_theta=500.0))
    block = m.ClassicBlock(cfg)
    d_k = cfg.d_model // cfg.num_heads
    wrong = rope_built_as(getattr(block.attn, "rope", None), m, 500.0, d_k, cfg.context_length,
                          "ClassicBlock(positions='rope', rope_theta=500).attn")
    if wrong:
        return wrong
    plain = getattr(m.ClassicBlock(m.ClassicConfig(**BASE | dict(positions="learned"))).attn, "rope", "none")
    return None if plain is None else "ClassicBlock(positions='learned').attn has a rope that is not None"


CLASSIC_BLOCK_PROPERTIES = (
    Property("with positions='rope' the attention is built with RoPE(rope_theta, d_k, context_length), and "
             "without it for the other positions", _block_rope_built,
             example="cfg = minilm.ClassicConfig(97, 32, 32, 2, 4, rope_theta=500.0)\n"
                     "print(minilm.ClassicBlock(cfg).attn.rope)  # a RotaryPositionalEmbedding",
             idea="pass the RoPE arguments on one by one (MultiHeadSelfAttention(d, heads, *rope) with rope = "
                  "(context_length, rope_theta)): without the *, the tuple lands in max_seq_len and theta stays None"),
    Property("each sublayer reads what its norm position says: pre-norm x + attn(ln1(x), token_positions); "
             "post-norm ln1(x + attn(x, token_positions)), attention reading the stream itself", _block_sublayers,
             example="cfg = minilm.ClassicConfig(97, 32, 32, 2, 4, norm_position='post', norm='layernorm')\n"
                     "block = minilm.ClassicBlock(cfg); block.ffn.w2.weight.data.zero_()\nx = torch.randn(1, 5, 32)\n"
                     "print(block(x) - block.ln2(block.ln1(x + block.attn(x))))  # zeros",
             idea="pre-norm: h = x + attn(ln1(x)), out = h + ffn(ln2(h)); post-norm: h = ln1(x + attn(x)), out = "
                  "ln2(h + ffn(h)): the sublayers see the unnormalized sum, the norm comes after the add; pass "
                  "token_positions on to attn, which rotates by them"),
    Property("without RoPE (positions other than 'rope') attention sees no order: reordering the earlier tokens "
             "leaves the last token's output as it was", _block_no_rope,
             example="cfg = minilm.ClassicConfig(97, 32, 32, 2, 4, positions='none')\n"
                     "block = minilm.ClassicBlock(cfg)\nx = torch.randn(1, 5, 32)\n"
                     "print(block(x)[:, -1] - block(x[:, [2, 0, 3, 1, 4]])[:, -1])  # zeros",
             idea="build attn as MultiHeadSelfAttention(d_model, num_heads) when config.positions is not 'rope': "
                  "the context length and rope_theta switch RoPE on"),
    *module_contract(lambda m, **kw: m.ClassicBlock(m.ClassicConfig(**BASE | CLASSIC), **kw),
                     lambda _: (randn(84, 2, 5, 32),), "ClassicBlock (classic)",
                     variants={f"ClassicBlock ({label})": _built("ClassicBlock", changes)
                               for label, changes in BLOCK_CHANGES.items()}),
)

spec("13.5", properties=CLASSIC_BLOCK_PROPERTIES,
     collect=_block_collect, atol=1e-4,
     cases=lambda: [dict(config=BASE | changes, state=weights(72 + i, classic_block_shapes(BASE | changes)),
                         x=randn(71, 2, 7, 32), what=f"ClassicBlock ({name}) and x (2, 7, 32)")
                    for i, (name, changes) in enumerate(BLOCK_CHANGES.items())],
     invariant=lambda got, c: keys_problem(got["keys"], classic_block_keys(c["config"]), "ClassicBlock"),
     outputs={"y": "the output"},
     mistakes={
         "norm_before_add": "post-norm normalizes the sum: ln1(x + attn(x)), then ln2(h + ffn(h)); you normalized the "
                            "sublayer's output before the residual add",
         "ignores_norm_position": "with norm_position='post' the block is post-norm, ln1(x + attn(x)) then "
                                  "ln2(h + ffn(h)); yours stayed pre-norm",
         "parallel_sublayers": "the FFN reads the attention's result h (after its residual add), not the block's input "
                               "x: the sublayers run one after the other",
         "ln1_for_both": "use ln2 for the second sublayer: each norm has its own gain (and bias)",
     },
     passed="pre- and post-norm, RMSNorm and LayerNorm, SwiGLU and GELU, with and without RoPE: match the reference")


def _lm_collect(m, c):
    torch.manual_seed(0)
    lm = m.ClassicLM(m.ClassicConfig(**c["config"]))
    out = {"keys": state_keys(lm), "parameters": sum(p.numel() for p in lm.parameters()),
           "shared_head": lm.lm_head.weight is lm.token_embeddings.weight}
    load_matching(lm, c["state"], "ClassicLM")
    out["logits"] = lm(c["ids"])
    return out


def _lm_invariant(got, c) -> Problem | None:
    cfg, keys, name = c["config"], got["keys"], c["name"]
    want, tied = classic_lm_keys(cfg), _field(cfg, "tied_head")
    if "ln_final.weight" in keys and "ln_final.weight" not in want:
        return Problem(f"ClassicLM ({name}): a post-norm model has no ln_final: its last block already ends in ln2",
                       "final_norm_in_post_norm")
    if "ln_final.weight" in want and "ln_final.weight" not in keys:
        return Problem(f"ClassicLM ({name}): a pre-norm model needs ln_final before lm_head: its residual stream is "
                       "never normalized on the way up", "classic_missing_final_norm")
    n_params = classic_parameter_count(cfg)
    return first(
        keys_problem(keys, want, f"ClassicLM ({name})"),
        None if got["shared_head"] is tied else Problem(
            f"ClassicLM ({name}): a tied head shares the embedding's nn.Parameter (lm_head.weight = "
            "token_embeddings.weight); a copy would drift apart in training", "head_copied_not_shared") if tied else
        Problem(f"ClassicLM ({name}): tied_head=False: lm_head needs its own weight", "tied_lm_head"),
        None if got["parameters"] == n_params else Problem(
            f"ClassicLM ({name}) has {count(got['parameters'])} parameters, expected {n_params:,}", "parameter_count"))


class _Tap(torch.nn.Module):
    """A block that records what it was given and what it gave back, then is the block it wraps."""

    def __init__(self, inner, index: int, seen: list):
        super().__init__()
        self.inner, self.index, self.seen = inner, index, seen

    def forward(self, *args, **kwargs):
        out = self.inner(*args, **kwargs)
        x = args[0] if args else next(iter(kwargs.values()))
        self.seen.append((self.index, x.detach().clone(), out.detach().clone()))
        return out

    def __getattr__(self, name: str):  # lm.layers[-1].ln2 and the like still reach the block
        try:
            return super().__getattr__(name)
        except AttributeError:
            return getattr(super().__getattr__("inner"), name)


def _lm_traced(m, changes: dict, seed: int = 91):
    """ClassicLM(BASE | changes) with the case's kind of weights, run on ids (2, 6) with every block tapped:
    (lm, ids, logits, [(block index, its input, its output)] in the order the blocks ran)."""
    cfg = BASE | changes
    lm = m.ClassicLM(m.ClassicConfig(**cfg))
    load_matching(lm, classic_lm_state(seed, cfg), "ClassicLM")
    seen: list = []
    for i in range(len(lm.layers)):
        lm.layers[i] = _Tap(lm.layers[i], i, seen)
    ids = torch.randint(0, cfg["vocab_size"], (2, 6), generator=gen(seed + 1))
    with torch.no_grad():
        logits = lm(ids)
    for i in range(len(lm.layers)):
        lm.layers[i] = lm.layers[i].inner
    return lm, ids, logits, seen


def _setting(changes: dict) -> str:
    return ", ".join(f"{k}={v!r}" for k, v in changes.items()) or "the default config"


def _lm_first_block_reads(m, changes: dict) -> str | None:
    """The first block's input against the token embeddings plus the positions the config adds."""
    lm, ids, _, seen = _lm_traced(m, changes)
    if not seen:
        return f"with {_setting(changes)}, no block of lm.layers ran"
    seq, d = ids.shape[-1], BASE["d_model"]
    with torch.no_grad():
        want, rule = lm.token_embeddings(ids), "token_embeddings(ids)"
        kind = changes.get("positions", "rope")
        if kind == "sinusoidal":  # the table by the paper's formula: only this task's code runs, never Task 13.2's
            angles = torch.arange(seq, dtype=torch.float64)[:, None] * 10000.0 ** (
                -torch.arange(0, d, 2, dtype=torch.float64) / d)
            table = torch.stack((angles.sin(), angles.cos()), dim=-1).reshape(seq, d).float()
            want, rule = want + table, rule + " + the sinusoidal table of 6 positions (sin, cos per pair)"
        elif kind == "learned":
            want, rule = want + lm.position_embeddings(torch.arange(seq)), rule + " + position_embeddings(0 … 5)"
    d = differs(seen[0][1], want, atol=1e-4)
    return d and f"with {_setting(changes)}, on ids (2, 6), the first block's input and {rule}: {d}"


def _lm_head_end(m, changes: dict) -> str | None:
    """The logits against lm_head(·) of the last block's output, through ln_final for pre-norm, over √d_model
    with a tied head."""
    lm, _, logits, seen = _lm_traced(m, changes)
    if not seen:
        return f"with {_setting(changes)}, no block of lm.layers ran"
    h, rule = seen[-1][2], "the last block's output h"
    with torch.no_grad():
        if changes.get("norm_position", "pre") == "pre":
            h, rule = lm.ln_final(h), "ln_final(h)"
        if changes.get("tied_head"):
            h, rule = h / BASE["d_model"] ** 0.5, f"{rule} / √32"
        d = differs(logits, lm.lm_head(h), atol=1e-4)
    return d and f"with {_setting(changes)}, the logits and lm_head({rule}), from its own modules: {d}"


def _lm_tied(m):
    for changes in (dict(tied_head=True, positions="none"), CLASSIC | dict(positions="none")):
        lm = m.ClassicLM(m.ClassicConfig(**BASE | changes))
        if lm.lm_head.weight is not lm.token_embeddings.weight:
            return f"with {_setting(changes)}, lm_head.weight is not token_embeddings.weight (the same nn.Parameter)"
        gap = _lm_first_block_reads(m, changes) or _lm_head_end(m, changes)
        if gap:
            return gap
    return None


def _lm_positions(m):
    for kind in ("sinusoidal", "learned", "rope", "none"):
        gap = _lm_first_block_reads(m, dict(positions=kind))
        if gap:
            return gap
    return None


def _lm_blocks_in_order(m):
    for changes in (dict(num_layers=3), dict(num_layers=3, norm_position="post", positions="sinusoidal"),
                    dict(num_layers=3, positions="learned")):
        _, _, _, seen = _lm_traced(m, changes)
        order = [i for i, _, _ in seen]
        if order != [0, 1, 2]:
            return f"with {_setting(changes)}, the blocks ran in the order {shown(order)}, expected [0, 1, 2]"
        for (i, _, out), (j, x, _) in zip(seen, seen[1:]):
            d = differs(x, out, atol=1e-5)
            if d:
                return f"with {_setting(changes)}, block {j}'s input and block {i}'s output: {d}"
    return None


def _lm_ends(m):
    for changes in ({}, dict(norm_position="post"), dict(norm_position="post", norm="layernorm", ffn="gelu")):
        gap = _lm_head_end(m, changes)
        if gap:
            return gap
    return None


LM_PROPERTIES = (
    layers_of_their_own(lambda m: m.ClassicLM(m.ClassicConfig(**BASE | CLASSIC | dict(num_layers=3))),
                        "ClassicLM(num_layers=3)"),
    Property("the first block reads token_embeddings(ids) plus the positions, added once: "
             "sinusoidal_positions(seq, d_model) with 'sinusoidal', position_embeddings(0 … seq − 1) with "
             "'learned', nothing with 'rope' (inside attention) or 'none'", _lm_positions,
             example="cfg = minilm.ClassicConfig(97, 32, 32, 2, 4, positions='sinusoidal')\n"
                     "lm = minilm.ClassicLM(cfg)\nids = torch.randint(0, 97, (1, 6))\n"
                     "x = lm.token_embeddings(ids) + minilm.sinusoidal_positions(6, 32)\n"
                     "# x is what lm.layers[0] must be given",
             idea="x = token_embeddings(ids); add sinusoidal_positions(seq, d_model) or "
                  "position_embeddings(torch.arange(seq)) once, before the loop over the blocks; with 'rope' the "
                  "blocks' attention uses the positions, with 'none' nothing does"),
    Property("the blocks run one after the other, in order: block i + 1 reads block i's output, nothing added "
             "between them", _lm_blocks_in_order,
             example="cfg = minilm.ClassicConfig(97, 32, 32, 3, 4)\nlm = minilm.ClassicLM(cfg)\n"
                     "ids = torch.randint(0, 97, (1, 6))\nh = lm.token_embeddings(ids)\n"
                     "for layer in lm.layers:\n    h = layer(h)\nprint(lm(ids) - lm.lm_head(lm.ln_final(h)))  # zeros",
             idea="for layer in self.layers: x = layer(x, positions): each block adds its own residuals, so no "
                  "x + layer(x), and no positions or norm between the blocks"),
    Property("the logits are lm_head(ln_final(h)) of the last block's output h with pre-norm, and lm_head(h) with "
             "post-norm (no ln_final: the last block already ends in ln2)", _lm_ends,
             example="cfg = minilm.ClassicConfig(97, 32, 32, 2, 4, norm_position='post')\nlm = minilm.ClassicLM(cfg)\n"
                     "ids = torch.randint(0, 97, (1, 6))\nh = lm.token_embeddings(ids)\n"
                     "for layer in lm.layers:\n    h = layer(h)\nprint(lm(ids) - lm.lm_head(h))  # zeros",
             idea="after the loop: ln_final only with norm_position 'pre', then lm_head; the √d_model division only "
                  "with tied_head; no softmax, the logits stay unnormalized"),
    Property("with tied_head, lm_head.weight is token_embeddings.weight (one nn.Parameter), the embeddings go in "
             "unscaled, and the logits are lm_head(x / √d_model)", _lm_tied,
             example="cfg = minilm.ClassicConfig(97, 32, 32, 2, 4, tied_head=True, positions='none')\n"
                     "lm = minilm.ClassicLM(cfg)\nids = torch.randint(0, 97, (1, 6))\nh = lm.token_embeddings(ids)\n"
                     "for layer in lm.layers:\n    h = layer(h)\n"
                     "print(lm(ids) - lm.lm_head(lm.ln_final(h) / 32 ** 0.5))  # zeros",
             idea="set self.lm_head.weight = self.token_embeddings.weight after building both, and in forward "
                  "divide what goes into lm_head by math.sqrt(d_model), only with tied_head; "
                  "the embeddings themselves go in as they are"),
    *module_contract(
        lambda m, **kw: m.ClassicLM(m.ClassicConfig(**BASE | CLASSIC | dict(positions="learned")), **kw),
        lambda _: (torch.randint(0, 97, (2, 5), generator=gen(85)),), "ClassicLM (classic, learned positions)",
        variants={f"ClassicLM ({label})": _built("ClassicLM", changes) for label, changes in ONE_CHANGE.items()}),
)

spec("13.6", properties=LM_PROPERTIES,
     collect=_lm_collect, invariant=_lm_invariant, atol=1e-4,
     cases=lambda: [dict(config=BASE | changes, name=name, state=classic_lm_state(81 + i, BASE | changes),
                         ids=torch.randint(0, 97, (2, 12), generator=gen(80)),
                         what=f"ClassicLM ({name}) and ids (2, 12)")
                    for i, (name, changes) in enumerate({**ONE_CHANGE, "classic": CLASSIC}.items())],
     outputs={"logits": "the logits"},
     mistakes={
         "tied_head_unscaled": "with a tied head, divide by √d_model before lm_head: the std-1 embedding rows used as "
                               "the head give logits √d_model times too large",
         "positions_not_added": "add the position vectors (sinusoidal_positions, or position_embeddings) to the token "
                                "embeddings before the first block",
         "final_norm_in_post_norm": "a post-norm model has no ln_final: its last block already ends in ln2",
     },
     passed="every single change and the classic model: state_dict, parameter count and logits match the reference")
