"""Checks for notebook 13's tasks 13.1–13.6, the classic Transformer (provided). See minilm/course/checks.py.

Each check runs your code on fixed inputs (modules get fixed weights through load_state_dict)
and compares with the reference's outputs stored in minilm/course/expected.pt. The contract's
state_dict names and parameter counts for every ClassicConfig are written out here."""

from __future__ import annotations

import math

import torch

import minilm
from minilm.course.checks import CheckFailed, compare, expect, register
from minilm.course.checks_model import CONTEXT, D_MODEL, HEADS, LAYERS, VOCAB, _gen, _randn, lm_state_dict_keys


def _norm_keys(prefix: str, norm: str) -> list[str]:
    return [f"{prefix}.weight"] + ([f"{prefix}.bias"] if norm == "layernorm" else [])


def classic_block_keys(cfg) -> list[str]:
    """The state_dict keys of ClassicBlock(cfg), in order."""
    ffn = ["ffn.w1.weight", "ffn.w2.weight"] + (["ffn.w3.weight"] if cfg.ffn == "swiglu" else [])
    attn = [f"attn.{n}.weight" for n in ("q_proj", "k_proj", "v_proj", "output_proj")]
    return _norm_keys("ln1", cfg.norm) + attn + _norm_keys("ln2", cfg.norm) + ffn


def classic_lm_keys(cfg) -> list[str]:
    """The state_dict keys of ClassicLM(cfg), in order (a tied head is listed under both names)."""
    keys = ["token_embeddings.weight"] + (["position_embeddings.weight"] if cfg.positions == "learned" else [])
    for i in range(cfg.num_layers):
        keys += [f"layers.{i}.{k}" for k in classic_block_keys(cfg)]
    if cfg.norm_position == "pre":
        keys += _norm_keys("ln_final", cfg.norm)
    return keys + ["lm_head.weight"]


def classic_parameter_count(cfg) -> int:
    """Closed form: embeddings (+ learned positions) + layers × (4 d² attention + FFN + 2 norms)
    + the final norm (pre-norm only) + the head (untied only)."""
    d, h = cfg.d_model, cfg.hidden
    norm = d if cfg.norm == "rmsnorm" else 2 * d
    ffn = (3 if cfg.ffn == "swiglu" else 2) * d * h
    n = cfg.vocab_size * d + (cfg.context_length * d if cfg.positions == "learned" else 0)
    n += cfg.num_layers * (4 * d * d + ffn + 2 * norm)
    n += norm if cfg.norm_position == "pre" else 0
    return n + (0 if cfg.tied_head else d * cfg.vocab_size)


def _state(module, seed: int, scale: float = 0.3) -> dict[str, torch.Tensor]:
    """Load fixed weights: norm gains near 1 and biases near 0 (both distinct per norm, so a
    swapped or shared norm shows), the rest random and scaled; a tied head gets the embedding's."""
    g = _gen(seed)
    state = {}
    for name, value in sorted(module.state_dict().items()):
        w = torch.randn(value.shape, generator=g)
        owner, leaf = (name.split(".")[-2], name.split(".")[-1]) if "." in name else ("", name)
        if owner.startswith("ln"):
            state[name] = 1 + 0.3 * w if leaf == "weight" else 0.2 * w
        else:
            state[name] = w * scale
    if "lm_head.weight" in state and getattr(module, "config", None) is not None and module.config.tied_head:
        state["lm_head.weight"] = state["token_embeddings.weight"]
    with torch.no_grad():
        module.load_state_dict(state)
    return state


def _keys(module, expected: list[str], what: str, mistakes: dict[str, tuple[str, str]] | None = None) -> None:
    """The state_dict keys must be the contract's; `mistakes` maps a key that is wrongly present
    (or, prefixed with "-", wrongly missing) to (label, advice)."""
    got = list(module.state_dict())
    if sorted(got) == sorted(expected):
        return
    missing, extra = sorted(set(expected) - set(got)), sorted(set(got) - set(expected))
    for key, (label, advice) in (mistakes or {}).items():
        if (key.startswith("-") and key[1:] in missing) or key in extra:
            raise CheckFailed(f"{what}: {advice}", label)
    parts = ([f"missing {', '.join(missing[:4])}"] if missing else []) + ([f"unexpected {', '.join(extra[:4])}"] if extra else [])
    raise CheckFailed(f"{what}: state_dict keys differ from the contract ({'; '.join(parts)})", "state_dict_names")


# ---------------------------------------------------------------- 13.1: LayerNorm

_LN_MISTAKES = {
    "layer_norm_no_mean": "subtract the mean first: LayerNorm centres x, then divides by the standard deviation "
                          "(without the mean it is RMSNorm plus a bias)",
    "layer_norm_unbiased_var": "use the biased variance, mean((x − mean)²), dividing by d_model as torch.nn.LayerNorm "
                               "does, not by d_model − 1 (torch.var's default)",
    "layer_norm_eps_outside_sqrt": "eps belongs inside the square root: sqrt(var + eps), not sqrt(var) + eps",
}


@register("13.1")
def check_layer_norm() -> str:
    for shape, scale, offset in (((2, 5, 16), 1.0, 0.5), ((3, 8), 1e-2, 3.0), ((16,), 50.0, -20.0)):
        x = _randn(*shape, seed=60, scale=scale) + offset
        w, b = 1 + 0.3 * _randn(shape[-1], seed=61), _randn(shape[-1], seed=62, scale=0.5)
        compare(minilm.layer_norm(x, w, b), f"layer_norm on x {shape} (values {offset:g} ± {scale:g})", _LN_MISTAKES)
    x = (_randn(4, 16, seed=63) * 3 + 1).to(torch.bfloat16)
    ones, zeros = torch.ones(16, dtype=torch.bfloat16), torch.zeros(16, dtype=torch.bfloat16)
    y = minilm.layer_norm(x, ones, zeros)
    expect(isinstance(y, torch.Tensor) and y.dtype == torch.bfloat16,
           f"layer_norm must return the input's dtype (bfloat16), got {getattr(y, 'dtype', type(y).__name__)}",
           "wrong_dtype")
    compare(y.float(), "layer_norm in bfloat16", atol=2e-2, rtol=2e-2)
    norm = minilm.LayerNorm(24)
    _keys(norm, ["weight", "bias"], "LayerNorm(24)",
          {"-bias": ("layer_norm_no_bias", "LayerNorm has a learnable bias beside its gain: add an nn.Parameter "
                                           "`bias`, starting at zeros")})
    expect(torch.equal(norm.weight.detach(), torch.ones(24)) and torch.equal(norm.bias.detach(), torch.zeros(24)),
           "LayerNorm must start with weight at ones and bias at zeros (the identity after normalizing)",
           "wrong_init")
    _state(norm, seed=64)
    compare(norm(_randn(2, 3, 24, seed=65) + 2), "LayerNorm(24)(x)", _LN_MISTAKES)
    small = minilm.LayerNorm(24, eps=1e-2)
    _state(small, seed=66)
    compare(small(_randn(2, 24, seed=67, scale=1e-2)), "LayerNorm(24, eps=1e-2)(x)",
            {"ignores_eps": "use the eps given to the constructor"})
    return "matches F.layer_norm (biased variance, eps inside the root), weight at ones and bias at zeros"


# ---------------------------------------------------------------- 13.2: sinusoidal positions

_SIN_MISTAKES = {
    "sinusoid_halves": "interleave: sin at dim 2i and cos at dim 2i+1 of the same frequency, not all the sines "
                       "and then all the cosines",
    "sinusoid_sin_cos_swapped": "put the sine on the even dims (2i) and the cosine on the odd ones (2i+1)",
    "sinusoid_frequency": "pair i's frequency is 1 / 10000^(2i / d_model): i counts pairs, so the exponent is "
                          "2i / d_model (the even dim's index over d_model), not i / d_model",
    "sinusoid_one_based": "the first position is 0: row 0 is sin(0) = 0, cos(0) = 1",
}


@register("13.2")
def check_sinusoidal_positions() -> str:
    pe = minilm.sinusoidal_positions(12, 8)
    expect(isinstance(pe, torch.Tensor) and tuple(pe.shape) == (12, 8) and pe.dtype == torch.float32,
           f"sinusoidal_positions(12, 8) must be a float32 tensor of shape (seq_len, d_model) = (12, 8), got "
           f"{tuple(pe.shape) if isinstance(pe, torch.Tensor) else type(pe).__name__}"
           f"{', ' + str(pe.dtype) if isinstance(pe, torch.Tensor) else ''}", "wrong_shape")
    compare(pe, "sinusoidal_positions(12, 8)", _SIN_MISTAKES)
    compare(minilm.sinusoidal_positions(64, 32), "sinusoidal_positions(64, 32)", _SIN_MISTAKES)
    compare(minilm.sinusoidal_positions(5000, 6)[-3:], "the last rows of sinusoidal_positions(5000, 6)", _SIN_MISTAKES,
            atol=1e-4)
    return "sin on even dims, cos on odd, frequency 1/10000^(2i/d): matches the paper's formula"


# ---------------------------------------------------------------- 13.3: GELU

_GELU_MISTAKES = {
    "gelu_tanh": "that is the tanh approximation 0.5x(1 + tanh(√(2/π)(x + 0.044715x³))); write the exact form "
                 "0.5·x·(1 + erf(x/√2))",
    "gelu_sigmoid": "that is the sigmoid approximation x·σ(1.702x); write the exact form 0.5·x·(1 + erf(x/√2))",
    "gelu_relu": "that is ReLU; GELU is x·Φ(x) = 0.5·x·(1 + erf(x/√2)), smooth and slightly negative below 0",
}


@register("13.3")
def check_gelu() -> str:
    compare(minilm.gelu(torch.linspace(-6, 6, 121)), "gelu on [-6, 6]", _GELU_MISTAKES)
    compare(minilm.gelu(_randn(2, 3, 4, seed=68, scale=2)), "gelu keeps the shape (2, 3, 4)", _GELU_MISTAKES)
    x = torch.tensor([-40.0, -10.0, 10.0, 40.0], dtype=torch.float64)
    compare(minilm.gelu(x), "gelu on float64 x of ±10, ±40", _GELU_MISTAKES)
    return "matches F.gelu (exact, erf form), in float32 and float64"


# ---------------------------------------------------------------- 13.4: GELU FFN

_FFN_MISTAKES = {
    "gelu_ffn_relu": "your FFN applies ReLU, the 2017 paper's activation: use your gelu between w1 and w2",
    "gelu_ffn_no_activation": "apply gelu between w1 and w2: without it the two layers are one linear map",
    "gelu_ffn_gelu_after_w2": "apply gelu to w1's output, between the layers, not after w2",
}


@register("13.4")
def check_GeluFFN() -> str:
    ffn = minilm.GeluFFN(16, 64)
    _keys(ffn, ["w1.weight", "w2.weight"], "GeluFFN(16, 64)")
    shapes = {k: tuple(v.shape) for k, v in ffn.state_dict().items()}
    expect(shapes == {"w1.weight": (64, 16), "w2.weight": (16, 64)},
           f"GeluFFN(16, 64) weights must be w1 (64, 16) and w2 (16, 64), got {shapes}", "weight_shapes")
    _state(ffn, seed=69)
    compare(ffn(_randn(2, 7, 16, seed=70)), "GeluFFN(16, 64)(x)", _FFN_MISTAKES)
    n, swiglu = sum(p.numel() for p in ffn.parameters()), 3 * 16 * round(8 * 16 / 3)
    expect(n == 2 * 16 * 64, f"GeluFFN(16, 64) has {n:,} parameters, expected 2·16·64 = {2 * 16 * 64:,}", "parameter_count")
    return f"w1, w2 shaped as the contract, forward matches w2(GELU(w1 x)); {n:,} parameters (SwiGLU(16, 43): {swiglu:,})"


# ---------------------------------------------------------------- 13.5–13.6: block and LM

def _config(**changes):
    return minilm.ClassicConfig(VOCAB, CONTEXT, D_MODEL, LAYERS, HEADS, **changes)


# One change at a time from the course's model, then the classic one (changes named as in notebook 13).
ONE_CHANGE = {"modern": {}, "post-norm": dict(norm_position="post"), "LayerNorm": dict(norm="layernorm"),
              "GELU FFN": dict(ffn="gelu"), "sinusoidal positions": dict(positions="sinusoidal"),
              "learned positions": dict(positions="learned"), "no positions": dict(positions="none"),
              "tied head": dict(tied_head=True)}
CLASSIC = dict(norm_position="post", norm="layernorm", ffn="gelu", positions="sinusoidal", tied_head=True)
# A block sees only the norm, the FFN and whether attention applies RoPE.
BLOCK_CHANGES = {"modern": {}, "post-norm": dict(norm_position="post"), "LayerNorm": dict(norm="layernorm"),
                 "GELU FFN": dict(ffn="gelu"), "no RoPE": dict(positions="none"), "classic": CLASSIC}

_BLOCK_MISTAKES = {
    "norm_before_add": "post-norm normalizes the sum: ln1(x + attn(x)), then ln2(h + ffn(h)); you normalized the "
                       "sublayer's output before the residual add",
    "ignores_norm_position": "with norm_position='post' the block is post-norm, ln1(x + attn(x)) then ln2(h + ffn(h)); "
                             "yours stayed pre-norm",
    "parallel_sublayers": "the FFN reads the attention's result h (after its residual add), not the block's input x: "
                          "the sublayers run one after the other",
    "ln1_for_both": "use ln2 for the second sublayer: each norm has its own gain (and bias)",
}


@register("13.5")
def check_ClassicBlock() -> str:
    x = _randn(2, 7, D_MODEL, seed=71)
    for i, (name, changes) in enumerate(BLOCK_CHANGES.items()):
        cfg = _config(**changes)
        blk = minilm.ClassicBlock(cfg)
        _keys(blk, classic_block_keys(cfg), f"ClassicBlock ({name})")
        _state(blk, seed=72 + i)
        compare(blk(x), f"ClassicBlock ({name})(x)", _BLOCK_MISTAKES, atol=1e-4)
    cfg = _config()
    modern = minilm.ClassicBlock(cfg)
    keys = [k[len("layers.0."):] for k in lm_state_dict_keys(1) if k.startswith("layers.0.")]
    _keys(modern, keys, "ClassicBlock (modern)")
    return "pre- and post-norm, RMSNorm and LayerNorm, SwiGLU and GELU, with and without RoPE: match the reference"


_LM_MISTAKES = {
    "tied_head_unscaled": "with a tied head, divide by √d_model before lm_head: the std-1 embedding rows used as the "
                          "head give logits √d_model times too large",
    "positions_not_added": "add the position vectors (sinusoidal_positions, or position_embeddings) to the token "
                           "embeddings before the first block",
    "final_norm_in_post_norm": "a post-norm model has no ln_final: its last block already ends in ln2",
}


@register("13.6")
def check_ClassicLM() -> str:
    ids = torch.randint(0, VOCAB, (2, 12), generator=_gen(80))
    for i, (name, changes) in enumerate({**ONE_CHANGE, "classic": CLASSIC}.items()):
        cfg = _config(**changes)
        lm = minilm.ClassicLM(cfg)
        _keys(lm, classic_lm_keys(cfg), f"ClassicLM ({name})", {
            "ln_final.weight": ("final_norm_in_post_norm", _LM_MISTAKES["final_norm_in_post_norm"]),
            "-ln_final.weight": ("classic_missing_final_norm", "a pre-norm model needs ln_final before lm_head: its "
                                                               "residual stream is never normalized on the way up")})
        if cfg.tied_head:
            expect(lm.lm_head.weight is lm.token_embeddings.weight,
                   f"ClassicLM ({name}): a tied head shares the embedding's nn.Parameter (lm_head.weight = "
                   "token_embeddings.weight); a copy would drift apart in training", "head_copied_not_shared")
        else:
            expect(lm.lm_head.weight is not lm.token_embeddings.weight,
                   f"ClassicLM ({name}): tied_head=False: lm_head needs its own weight", "tied_lm_head")
        n, want = sum(p.numel() for p in lm.parameters()), classic_parameter_count(cfg)
        expect(n == want, f"ClassicLM ({name}) has {n:,} parameters, expected {want:,}", "parameter_count")
        _state(lm, seed=81 + i)
        compare(lm(ids), f"ClassicLM ({name})(ids (2, 12))", _LM_MISTAKES, atol=1e-4)
    return "every single change and the classic model: state_dict, parameter count and logits match the reference"
