"""Checks for the architecture tasks 1.1–8.1 (provided). See minilm/course/checks.py.

Each check runs your code on fixed inputs (modules get fixed weights through load_state_dict)
and compares with the reference's outputs stored in minilm/course/expected.pt."""

from __future__ import annotations

import math

import torch

import minilm
from minilm.course.checks import CheckFailed, compare, expect, register

# A small model shape that exercises every code path quickly.
VOCAB, CONTEXT, D_MODEL, LAYERS, HEADS, D_FF, THETA = 97, 32, 32, 2, 4, 48, 10000.0


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _randn(*shape, seed: int = 0, scale: float = 1.0) -> torch.Tensor:
    return torch.randn(*shape, generator=_gen(seed)) * scale


def lm_state_dict_keys(num_layers: int) -> list[str]:
    """The exact state_dict keys of TransformerLM (CS336 naming), in order."""
    per_layer = ["ln1.weight", "attn.q_proj.weight", "attn.k_proj.weight", "attn.v_proj.weight",
                 "attn.output_proj.weight", "ln2.weight", "ffn.w1.weight", "ffn.w2.weight", "ffn.w3.weight"]
    keys = ["token_embeddings.weight"]
    for i in range(num_layers):
        keys += [f"layers.{i}.{k}" for k in per_layer]
    return keys + ["ln_final.weight", "lm_head.weight"]


def lm_parameter_count(vocab_size: int, d_model: int, num_layers: int, d_ff: int) -> int:
    """Closed form: embeddings + layers × (4 d² attention + 3 d d_ff SwiGLU + 2 d norms) + final norm + head."""
    per_layer = 4 * d_model * d_model + 3 * d_model * d_ff + 2 * d_model
    return vocab_size * d_model + num_layers * per_layer + d_model + d_model * vocab_size


def _fixed_state(module, seed: int, scale: float = 0.3) -> dict[str, torch.Tensor]:
    """Load fixed weights into `module` (after its keys were checked): random, scaled by `scale`,
    norm gains near 1 so a swapped or missing norm shows. Returns the state loaded."""
    g = _gen(seed)
    state = {}
    for name, value in sorted(module.state_dict().items()):
        w = torch.randn(value.shape, generator=g)
        owner = name.split(".")[-2] if "." in name else ""
        state[name] = 1 + 0.3 * w if owner.startswith("ln") else w * scale
    with torch.no_grad():
        module.load_state_dict(state)
    return state


def _keys(module, expected: list[str], what: str) -> None:
    got = list(module.state_dict())
    if sorted(got) != sorted(expected):
        missing, extra = sorted(set(expected) - set(got)), sorted(set(got) - set(expected))
        parts = []
        if missing:
            parts.append(f"missing {', '.join(missing[:4])}")
        if extra:
            parts.append(f"unexpected {', '.join(extra[:4])}")
        raise CheckFailed(f"{what}: state_dict keys differ from the contract ({'; '.join(parts)})", "state_dict_names")


def _init_stats(w: torch.Tensor, std: float, what: str) -> None:
    w = w.detach().double()
    expect(w.abs().max() <= 3 * std * 1.0001,
           f"{what}: some weights lie beyond ±3 std ({w.abs().max().item() / std:.2f} std): use a truncated normal "
           f"cut at a=-3·std, b=3·std (trunc_normal_'s a and b are absolute, not in units of std)",
           "init_not_truncated")
    # A normal truncated at ±3σ has standard deviation 0.9866σ.
    got = w.std().item()
    expect(abs(got / (0.9866 * std) - 1) < 0.05,
           f"{what}: the weights' std is {got:.3g}, expected about {0.9866 * std:.3g} (std {std:.3g} truncated at ±3 std)",
           "init_wrong_std")
    expect(abs(w.mean().item()) < 0.05 * std, f"{what}: the weights' mean should be about 0", "init_not_centered")


# ---------------------------------------------------------------- 5: RoPE

_ROPE_HALVES = "your output matches RoPE applied to split halves: rotate adjacent pairs (2i, 2i+1)"
_ROPE_ONE_BASED = "your output matches RoPE with 1-based positions: the first token is at position 0"
_ROPE_FREQUENCY = "the frequencies are off: pair i turns by θ^(−2i/d_k) per position, not θ^(−i/d_k)"
_ROPE_FREQUENCY_DOUBLED = ("the frequencies are off: pair i turns by θ^(−2i/d_k) per position, not θ^(−4i/d_k) "
                           "(torch.arange(0, d_k, 2) already counts 2i: do not double it)")
_ANGLE_MISTAKES = {
    "rope_frequency": _ROPE_FREQUENCY,
    "rope_frequency_doubled": _ROPE_FREQUENCY_DOUBLED,
    "rope_one_based": _ROPE_ONE_BASED,
}
_ROPE_MISTAKES = {
    "rope_split_halves": _ROPE_HALVES,
    **_ANGLE_MISTAKES,
    "rope_wrong_direction": "you rotate the wrong way: x'[2i] = x[2i]cos − x[2i+1]sin, x'[2i+1] = x[2i]sin + x[2i+1]cos",
}


def _batched(what: str, call, mistake: str, advice: str):
    """call(), on batched token positions (other positions in each batch row), after the same code
    passed on 1-D positions: an error here means the code assumes 1-D positions, so name that
    (with the error) rather than report a bare exception."""
    try:
        return call()
    except NotImplementedError:
        raise
    except Exception as e:  # noqa: BLE001 - any error: the 1-D run just before succeeded
        error = " ".join(f"{type(e).__name__}: {e}".split())
        raise CheckFailed(f"{what}: raised {error}. {advice}", mistake) from None


_POSITIONS_ANY_SHAPE = "token_positions can be batched (here each batch row has its own positions), not only (seq,)"


@register("5.1")
def check_rope() -> str:
    angles = minilm.rope_angles(torch.arange(6), 8)
    expect(not isinstance(angles, torch.Tensor) or angles.dtype == torch.float32,
           f"rope_angles must return float32 angles, got {getattr(angles, 'dtype', '')}", "wrong_dtype")
    compare(angles, "rope_angles(positions 0…5, d_k=8)", _ANGLE_MISTAKES)
    pos = torch.tensor([[7, 0, 3, 100, 2], [1, 1, 1, 1, 1]])
    what = "rope_angles(batched positions (2, 5), d_k=16, theta=500)"
    angles = _batched(what, lambda: minilm.rope_angles(pos, 16, 500.0), "rope_positions_1d",
                      f"{_POSITIONS_ANY_SHAPE}: multiply token_positions[..., None] by the d_k/2 frequencies "
                      "(torch.outer takes 1-D vectors only)")
    compare(angles, what, _ANGLE_MISTAKES)
    x = _randn(2, 6, 8, seed=21)
    compare(minilm.rope(x, torch.arange(6)), "rope(x (2, 6, 8), positions 0…5)", _ROPE_MISTAKES)
    x = _randn(2, 3, 5, 16, seed=22)
    what = "rope with batched positions (2, 1, 5) and theta=500"
    y = _batched(what, lambda: minilm.rope(x, pos.unsqueeze(1), theta=500.0), "rope_positions_1d", _POSITIONS_ANY_SHAPE)
    compare(y, what, _ROPE_MISTAKES)
    x = _randn(3, 4, 8, seed=40)
    pos = torch.tensor([[0, 1, 2, 3], [9, 4, 4, 60], [2, 3, 5, 7]])
    what = "rope(x (3, 4, 8), batched positions (3, 4))"
    compare(_batched(what, lambda: minilm.rope(x, pos), "rope_positions_1d", _POSITIONS_ANY_SHAPE), what, _ROPE_MISTAKES)
    return "angles and rotation match complex-number RoPE on adjacent pairs (1-D and batched positions, any theta)"


@register("5.2")
def check_RotaryPositionalEmbedding() -> str:
    module = minilm.RotaryPositionalEmbedding(10000.0, 8, 64)
    expect(len(module.state_dict()) == 0,
           f"cos/sin are derived, not learned: register them with persistent=False (state_dict has {list(module.state_dict())})",
           "persistent_buffers")
    x = _randn(3, 10, 8, seed=23)
    pos = torch.tensor([0, 5, 63, 2, 2, 9, 1, 40, 17, 33])
    compare(module(x, pos), "RotaryPositionalEmbedding(…, d_k=8, max_seq_len=64)(x, pos)", _ROPE_MISTAKES)
    pos = torch.randint(0, 64, (3, 10), generator=_gen(41))
    what = "RotaryPositionalEmbedding(…)(x (3, 10, 8), batched positions (3, 10))"
    y = _batched(what, lambda: module(x, pos), "rope_table_positions_1d",
                 f"{_POSITIONS_ANY_SHAPE}: index the tables with the whole tensor, self.cos[token_positions] "
                 "(index_select takes a 1-D index only)")
    compare(y, what, _ROPE_MISTAKES)
    return "precomputed cos/sin (not in the state_dict) give the same rotation as rope (1-D and batched positions)"


# ---------------------------------------------------------------- 6: attention

@register("6.1")
def check_softmax() -> str:
    x = _randn(3, 4, 5, seed=24)
    for dim in (-1, 0, 1):
        others = {f"softmax_wrong_dim ({d})": f"you normalized over dim {d}, but dim={dim} was asked: use the dim argument"
                  for d in (-1, 0, 1) if d != dim}
        compare(minilm.softmax(x, dim=dim), f"softmax(x (3, 4, 5), dim={dim})", others)
    big = torch.tensor([[1e4, 0.0, -1e4], [1e4, 1e4, 1e4], [-1e4, -1e4, -1e4]])
    compare(minilm.softmax(big, dim=-1), "softmax of inputs ±1e4",
            {"softmax_unstable": "exp overflows for large inputs: subtract the max along dim before exp"})
    return "matches F.softmax on every dim, stable at ±1e4"


_SDPA_MISTAKES = {
    "no_scaling": "divide the scores q·k by sqrt(d_k) before the softmax",
    "mask_inverted": "your mask is inverted: True means a query MAY attend to that key",
    "softmax_over_queries": "normalize each query's scores over the keys (the last dim), not over the queries",
    "mask_ignored": "your attention ignores the mask: where mask is False, set the score to -inf before the softmax, "
                    "so that key gets exactly zero weight",
    "mask_filled_with_zero": "you filled the masked scores with 0, but a score of 0 still gets the weight "
                             "exp(0) / Σ exp(scores) > 0: fill them with -inf, so the softmax gives them exactly 0",
}


@register("6.2")
def check_scaled_dot_product_attention() -> str:
    q, k, v = _randn(2, 3, 4, 8, seed=25), _randn(2, 3, 6, 8, seed=26), _randn(2, 3, 6, 5, seed=27)
    compare(minilm.scaled_dot_product_attention(q, k, v), "attention without a mask (4 queries, 6 keys)", _SDPA_MISTAKES)
    # Every row keeps at least one True and one False, so the inverted mask is a valid mask too.
    mask = torch.rand(4, 6, generator=_gen(28)) > 0.5
    mask[:, 0], mask[:, 1] = True, False
    compare(minilm.scaled_dot_product_attention(q, k, v, mask), "attention with a boolean mask", _SDPA_MISTAKES)
    return "matches F.scaled_dot_product_attention, with and without a mask"


_MHSA_MISTAKES = {
    "not_causal": "apply the causal mask: query t may only see keys 0…t",
    "no_scaling": "divide the scores by sqrt(d_k) (d_k = d_model / num_heads)",
    "rope_split_halves": _ROPE_HALVES,
    "rope_one_based": _ROPE_ONE_BASED,
    "rope_frequency": _ROPE_FREQUENCY,
    "rope_frequency_doubled": _ROPE_FREQUENCY_DOUBLED,
    "no_rope": "apply RoPE to q and k when theta is given",
    "heads_interleaved": "head h must use rows h·d_k … (h+1)·d_k − 1 of each projection: split d_model as (heads d_k)",
    "heads_not_transposed": "you reshaped the heads' outputs (…, heads, seq, d_k) straight to (…, seq, d_model) without "
                            "first moving the heads dim next to d_k, so each row mixes heads and positions: use "
                            "rearrange '… heads seq d_k -> … seq (heads d_k)' (or transpose(-3, -2), then reshape) "
                            "before output_proj",
    "heads_merged_d_k_first": "you merged the heads as (d_k heads), interleaving their columns: head h's output must fill "
                              "columns h·d_k … (h+1)·d_k − 1, so merge with '… heads seq d_k -> … seq (heads d_k)'",
    "scaled_by_d_model": "you divided the scores by sqrt(d_model): each head's scores are dot products of d_k-dim "
                         "vectors, so divide by sqrt(d_k), d_k = d_model / num_heads",
    "causal_sees_next_token": "your causal mask lets query t see key t + 1: keep the diagonal and what lies below it "
                              "(tril with diagonal=0: True where key ≤ query), nothing above",
    "rope_on_v": "you rotated v too: RoPE rotates q and k, not v (the rotation is there to make q·k depend on the "
                 "relative position; the values stay as v_proj made them)",
}


@register("6.3")
def check_MultiHeadSelfAttention() -> str:
    mhsa = minilm.MultiHeadSelfAttention(D_MODEL, HEADS, CONTEXT, THETA)
    expected = [f"{n}.weight" for n in ("q_proj", "k_proj", "v_proj", "output_proj")]
    _keys(mhsa, expected, f"MultiHeadSelfAttention({D_MODEL}, {HEADS})")
    _fixed_state(mhsa, seed=38)
    x = _randn(2, 9, D_MODEL, seed=29)
    compare(mhsa(x), "MultiHeadSelfAttention with RoPE", _MHSA_MISTAKES)
    pos = torch.tensor([[0, 1, 2, 3, 4, 5, 6, 7, 8], [3, 4, 5, 6, 10, 11, 12, 13, 31]])
    what = "MultiHeadSelfAttention with RoPE and batched token_positions (2, 9)"
    y = _batched(what, lambda: mhsa(x, pos), "attention_positions_1d",
                 "token_positions is (batch, seq), one row per batch row, and q and k are (batch, heads, seq, d_k): "
                 "give RoPE the positions with a heads axis, token_positions.unsqueeze(-2), so each head gets "
                 "its batch row's positions")
    compare(y, what, _MHSA_MISTAKES)
    plain = minilm.MultiHeadSelfAttention(D_MODEL, HEADS)
    _keys(plain, expected, f"MultiHeadSelfAttention({D_MODEL}, {HEADS})")
    _fixed_state(plain, seed=39)
    compare(plain(x), "MultiHeadSelfAttention without RoPE", _MHSA_MISTAKES)
    return "causal, per-head rows, RoPE on q and k (1-D and batched positions): matches F.scaled_dot_product_attention"


# ---------------------------------------------------------------- 7–8: block and LM

_BLOCK_MISTAKES = {
    "post_norm": "your block normalizes after the residual add (post-norm): use h = x + attn(ln1(x)), then h + ffn(ln2(h))",
    "no_residual": "add each sublayer's output to its input (the residual connection)",
    "parallel_block": "your block runs attention and the FFN side by side on the same x (x + attn(ln1(x)) + ffn(ln2(x))); "
                      "the block is sequential: h = x + attn(ln1(x)), then h + ffn(ln2(h)), so the FFN sees the "
                      "attention's output",
}


@register("7.1")
def check_TransformerBlock() -> str:
    blk = minilm.TransformerBlock(D_MODEL, HEADS, D_FF, CONTEXT, THETA)
    keys = [k[len("layers.0."):] for k in lm_state_dict_keys(1) if k.startswith("layers.0.")]
    _keys(blk, keys, "TransformerBlock")
    _fixed_state(blk, seed=30)  # non-trivial norm gains, so a swapped ln1/ln2 shows
    x = _randn(2, 7, D_MODEL, seed=32)
    compare(blk(x), "TransformerBlock(x)", _BLOCK_MISTAKES, atol=1e-4)
    return "pre-norm block: h = x + attn(ln1(x)), then h + ffn(ln2(h))"


def _lm(**kw):
    return minilm.TransformerLM(VOCAB, CONTEXT, D_MODEL, LAYERS, HEADS, D_FF, THETA, **kw)


@register("8.1")
def check_TransformerLM() -> str:
    lm = _lm()
    expect(lm.lm_head.weight.data_ptr() != lm.token_embeddings.weight.data_ptr(),
           "lm_head shares its weight with token_embeddings (tied): the contract is an untied lm_head with its own weight",
           "tied_lm_head")
    _keys(lm, lm_state_dict_keys(LAYERS), "TransformerLM")
    n = sum(p.numel() for p in lm.parameters())
    want = lm_parameter_count(VOCAB, D_MODEL, LAYERS, D_FF)
    expect(n == want, f"TransformerLM has {n:,} parameters, expected {want:,}", "parameter_count")
    _fixed_state(lm, seed=33)
    ids = torch.randint(0, VOCAB, (2, 12), generator=_gen(34))
    compare(lm(ids), "TransformerLM(ids (2, 12))", {
        "missing_final_norm": "apply ln_final before lm_head",
        "post_norm": "your blocks normalize after the residual add (post-norm): the contract is pre-norm",
        "tied_lm_head": "use lm_head, not the embedding matrix, for the logits",
        "parallel_block": "your blocks run attention and the FFN side by side; the block is sequential: "
                          "h = x + attn(ln1(x)), then h + ffn(ln2(h))",
    }, atol=1e-4)
    return "state_dict names and parameter count match the contract, logits match the oracle"
