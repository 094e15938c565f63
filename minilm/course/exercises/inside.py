"""Specs of notebook 15: inside the trained model (provided). See minilm/course/exercises/__init__.py."""

from __future__ import annotations

import torch

from minilm.course.exercises import (
    Property,
    attention_shapes,
    differs,
    load_state,
    randn,
    spec,
    weights,
)


def _layer(m, d: int, heads: int, state: dict, theta: float | None = 10000.0, max_len: int = 32):
    """The student's MultiHeadSelfAttention(d, heads) with RoPE (theta) or without (None), weights loaded."""
    layer = m.MultiHeadSelfAttention(d, heads, *([max_len, theta] if theta is not None else []))
    load_state(layer, state)
    return layer


def _case_layer(m, c):
    return _layer(m, c["d"], c["heads"], c["state"], c.get("theta"), c.get("max_len", 32))


# ---------------------------------------------------------------- 15.1: attention patterns


def _pattern_cases():
    return [dict(d=32, heads=4, theta=10000.0, state=weights(150, attention_shapes(32)), x=randn(151, 2, 9, 32),
                 what="MultiHeadSelfAttention(32, 4) with RoPE, x (2, 9, 32)"),
            dict(d=32, heads=2, state=weights(152, attention_shapes(32)), x=randn(153, 7, 32),
                 what="MultiHeadSelfAttention(32, 2) without RoPE, x (7, 32)")]


def _probe_layer(m, seed: int = 160):
    return _layer(m, 32, 4, weights(seed, attention_shapes(32))), randn(seed + 1, 2, 7, 32)


def _pattern_rows(m):
    layer, x = _probe_layer(m)
    p = m.attention_pattern(layer, x)
    d = differs(p.sum(-1), torch.ones(2, 4, 7), atol=1e-4)
    return d and f"on x (2, 7, 32) through MultiHeadSelfAttention(32, 4), the rows' sums and 1: {d}"


def _pattern_future(m):
    layer, x = _probe_layer(m, 162)
    p = m.attention_pattern(layer, x)
    if type(p) is not torch.Tensor or p.shape != (2, 4, 7, 7):
        return f"expected a pattern of shape (2, 4, 7, 7), got {tuple(p.shape) if type(p) is torch.Tensor else p}"
    future = p.detach().triu(1).abs().max().item()
    return f"on x (2, 7, 32), a query puts weight {future:.3g} on a key after it" if future else None


def _pattern_mixes(m):
    """What the forward mixes: output_proj(the heads' pattern @ v, merged) is the module's output."""
    layer, x = _probe_layer(m, 164)
    p = m.attention_pattern(layer, x)  # (2, heads, 7, 7)
    with torch.no_grad():
        v = layer.v_proj(x).unflatten(-1, (4, 8)).transpose(-3, -2)  # (2, heads, 7, d_k)
        mixed = layer.output_proj((p @ v).transpose(-3, -2).flatten(-2))
        d = differs(mixed, layer(x), atol=1e-4)
    return d and (f"on x (2, 7, 32), output_proj(your pattern @ v, heads merged) and your MultiHeadSelfAttention's "
                  f"output: {d}")


LAYER = "attn = minilm.MultiHeadSelfAttention(32, 4, 32, 10000.0)\nx = torch.randn(7, 32)\n"
PATTERN_PROPERTIES = (
    Property("each query's weights sum to 1", _pattern_rows,
             example=LAYER +
                     "print(minilm.attention_pattern(attn, x).sum(-1))  # all ones",
             idea="softmax each query's masked scores over the keys (the last dim)"),
    Property("no query attends to a later key: the weights above the diagonal are 0", _pattern_future,
             example=LAYER +
                     "print(minilm.attention_pattern(attn, x)[0])  # zeros above the diagonal",
             idea="before the softmax, set the scores of keys after the query to -inf (a lower-triangular mask)"),
    Property("the pattern is what your attention mixes: output_proj of (pattern @ v), heads merged, is the "
             "module's output", _pattern_mixes,
             example=LAYER +
                     "p = minilm.attention_pattern(attn, x)  # (4, 7, 7)\n"
                     "v = attn.v_proj(x).unflatten(-1, (4, 8)).transpose(0, 1)  # (4, 7, 8)\n"
                     "print(attn.output_proj((p @ v).transpose(0, 1).flatten(-2)) - attn(x))  # zeros",
             idea="compute the weights exactly as your forward does: the same head split (heads d_k), RoPE on q "
                  "and k at positions 0 … seq − 1, the scores divided by √d_k"),
)

spec("15.1", properties=PATTERN_PROPERTIES,
     collect=lambda m, c: {"pattern": m.attention_pattern(_case_layer(m, c), c["x"])},
     cases=_pattern_cases, outputs={"pattern": "the attention pattern"},
     mistakes={
         "pattern_no_scaling": "divide the scores q·k by √d_k (d_k = d_model / num_heads) before the softmax, as "
                               "your forward does",
         "pattern_scaled_by_d_model": "divide the scores by √d_k, not √d_model: each head's scores are dot products "
                                      "of d_k-dim vectors",
         "pattern_not_causal": "apply the causal mask: query t attends to keys 0 … t only, so the weights above the "
                               "diagonal are 0",
         "pattern_no_rope": "rotate q and k with attn.rope at positions 0 … seq − 1 when attn.rope is not None: the "
                            "model attends with the rotated ones",
         "pattern_softmax_over_queries": "softmax each query's scores over the keys (the last dim), not over the "
                                         "queries",
         "pattern_heads_interleaved": "head h uses rows h·d_k … (h+1)·d_k − 1 of q_proj and k_proj: split d_model as "
                                      "(heads d_k), not (d_k heads)",
     },
     passed="every head's causal weights, as your MultiHeadSelfAttention computes them (with and without RoPE)")

# ---------------------------------------------------------------- 15.2: head scores


def causal_pattern(g: torch.Generator | int, *shape: int, scale: float = 2.0,
                   dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """Random attention probabilities (..., seq, seq): a causal softmax of random scores."""
    scores = randn(g, *shape, scale=scale, dtype=dtype)
    scores = scores.masked_fill(~torch.ones(shape[-1], shape[-1], dtype=torch.bool).tril(), float("-inf"))
    return torch.softmax(scores, dim=-1)  # release: not a task (an input)


def _score_cases():
    return [dict(pattern=causal_pattern(170, 2, 3, 8, 8), period=4,
                 what="a random pattern (2 layers, 3 heads, 8, 8), period 4"),
            dict(pattern=causal_pattern(171, 7, 7), period=3, what="one head's random pattern (7, 7), period 3")]


def _previous_only(seq: int) -> torch.Tensor:
    """A head that attends only to the previous token (query 0, which has none, to itself)."""
    p = torch.zeros(seq, seq)
    p[0, 0] = 1.0
    p[torch.arange(1, seq), torch.arange(seq - 1)] = 1.0
    return p


def _induction_only(seq: int, period: int) -> torch.Tensor:
    """A head that attends to the token after the earlier copy (queries period … seq − 1), the others to themselves."""
    p = torch.eye(seq)
    t = torch.arange(period, seq)
    p[t] = 0.0
    p[t, t - period + 1] = 1.0
    return p


def _scores_bounded(m):
    p = causal_pattern(172, 3, 4, 10, 10)
    for name, s in (("previous_token_score", m.previous_token_score(p)), ("induction_score", m.induction_score(p, 5))):
        if type(s) is not torch.Tensor:
            return f"{name} returned {type(s).__name__}, expected a tensor"
        if s.numel() and not (s.min() >= 0 and s.max() <= 1):
            return f"on a random pattern (3, 4, 10, 10), {name} gave scores from {s.min():.3g} to {s.max():.3g}"
    return None


def _previous_head(m):
    p = _previous_only(8)
    prev, ind = float(m.previous_token_score(p)), float(m.induction_score(p, 4))
    if abs(prev - 1) > 1e-6 or abs(ind) > 1e-6:
        return (f"a head (8, 8) that attends only to the previous token scores {prev:.4g} as previous-token head "
                f"(expected 1) and {ind:.4g} as induction head with period 4 (expected 0)")
    return None


def _induction_head(m):
    for seq, period in ((8, 4), (9, 3)):
        p = _induction_only(seq, period)
        ind = float(m.induction_score(p, period))
        if abs(ind - 1) > 1e-6:
            return (f"a head ({seq}, {seq}) whose queries t = {period} … {seq - 1} attend only to key t − {period} + 1 "
                    f"(the token after the earlier copy) scores {ind:.4g} as induction head with period {period}, "
                    "expected 1")
    return None


def _scores_per_head(m):
    p = causal_pattern(173, 2, 3, 8, 8)
    for name, score in (("previous_token_score", m.previous_token_score),
                        ("induction_score", lambda q: m.induction_score(q, 4))):
        d = differs(score(p)[1, 2], score(p[1, 2]))
        if d:
            return f"{name} of a pattern (2, 3, 8, 8) at [1, 2] and of pattern[1, 2] alone: {d}"
    return None


SCORE_EXAMPLE = ("p = torch.zeros(8, 8); p[0, 0] = 1\n"
                 "p[torch.arange(1, 8), torch.arange(7)] = 1  # the previous token\n"
                 "print(minilm.previous_token_score(p), minilm.induction_score(p, 4))  # 1 and 0")
SCORE_PROPERTIES = (
    Property("the scores lie in [0, 1] for any pattern whose rows sum to 1", _scores_bounded,
             example="p = torch.softmax(torch.randn(4, 10, 10).tril() - torch.ones(10, 10).triu(1) * 1e9, -1)\n"
                     "print(minilm.previous_token_score(p), minilm.induction_score(p, 5))",
             idea="each score is a mean of weights, each between 0 and 1: average the entries, do not sum them"),
    Property("a head that attends only to the previous token scores 1 as previous-token head and 0 as induction "
             "head", _previous_head, example=SCORE_EXAMPLE,
             idea="the previous token of query t is key t − 1, the diagonal just below the main one; average it over "
                  "the seq − 1 queries that have one"),
    Property("a head that attends only to the token after the earlier copy scores 1 as induction head",
             _induction_head,
             example="p = torch.eye(8); t = torch.arange(4, 8)\np[t] = 0; p[t, t - 3] = 1  # period 4\n"
                     "print(minilm.induction_score(p, 4))  # 1",
             idea="for the queries t = period … seq − 1 (the repeated half), read the weight on key t − period + 1, "
                  "the token that followed the earlier copy, and average those"),
    Property("the scores keep the pattern's leading dims, one score per head", _scores_per_head,
             example="p = torch.softmax(torch.randn(2, 3, 8, 8), -1)\n"
                     "print(minilm.previous_token_score(p).shape)  # (2, 3)",
             idea="take the diagonal over the last two dims (dim1=-2, dim2=-1) and average over the queries only"),
)

spec("15.2", properties=SCORE_PROPERTIES,
     collect=lambda m, c: {"prev": m.previous_token_score(c["pattern"]),
                           "induction": m.induction_score(c["pattern"], c["period"])},
     cases=_score_cases, outputs={"prev": "previous_token_score", "induction": "induction_score"},
     mistakes={
         "prev_score_self": "the previous token of query t is key t − 1, the diagonal just below the main one "
                            "(offset −1), not key t itself",
         "prev_score_over_seq": "average over the seq − 1 queries that have a previous token (t = 1 … seq − 1), "
                                "not over all seq",
         "induction_earlier_copy": "read key t − period + 1, the token after the earlier copy, not key t − period, "
                                   "the earlier copy itself (that head would be a duplicate-token head)",
         "induction_from_first_half": "the queries are t = period … seq − 1, the repeated part: query period − 1 is "
                                      "still in the first copy",
     },
     passed="previous-token and induction scores: means of the right diagonals, any leading dims")

# ---------------------------------------------------------------- 15.3: ablating heads


def _ablate_cases():
    state = weights(180, attention_shapes(32))
    x = randn(181, 2, 6, 32)
    return [dict(d=32, heads=4, theta=10000.0, state=state, x=x, ablate=[1], what="head 1 of 4 ablated"),
            dict(d=32, heads=4, theta=10000.0, state=state, x=x, ablate=[0, 3], what="heads 0 and 3 of 4 ablated"),
            dict(d=32, heads=2, state=weights(182, attention_shapes(32)), x=randn(183, 5, 32), ablate=[1],
                 what="head 1 of 2 ablated, without RoPE")]


def _ablate_collect(m, c):
    layer = _case_layer(m, c)
    with torch.no_grad():
        handle = m.ablate_heads(layer, c["ablate"])
        y = layer(c["x"])
        handle.remove()
        return {"y": y, "restored": layer(c["x"])}


def _none_ablated(m):
    layer, x = _probe_layer(m, 184)
    with torch.no_grad():
        before = layer(x)
        handle = m.ablate_heads(layer, [])
        d = differs(layer(x), before)
        handle.remove()
    return d and f"with heads=[] on x (2, 7, 32), the output and the output before: {d}"


def _restored(m):
    layer, x = _probe_layer(m, 186)
    with torch.no_grad():
        before = layer(x)
        m.ablate_heads(layer, [2]).remove()
        d = differs(layer(x), before)
    return d and f"after ablating head 2 and removing the handle, the output and the output before: {d}"


def _slices(m):
    """Ablating head 1 of 4: a hook registered after the student's sees output_proj's input."""
    layer, x = _probe_layer(m, 188)
    seen = []

    def run():
        capture = layer.output_proj.register_forward_pre_hook(lambda module, args: seen.append(args[0].clone()))
        layer(x)
        capture.remove()

    with torch.no_grad():
        run()
        handle = m.ablate_heads(layer, [1])
        run()
        handle.remove()
    (before, after), d_k = seen[-2:], 8
    own = after[..., d_k:2 * d_k].abs().max().item()
    if own != 0:
        return f"ablating head 1 of MultiHeadSelfAttention(32, 4) left its columns 8 … 15 of output_proj's input " \
               f"non-zero (up to {own:.3g})"
    keep = torch.ones(32, dtype=torch.bool)
    keep[d_k:2 * d_k] = False
    d = differs(after[..., keep], before[..., keep])
    return d and f"ablating head 1 of 4, the other heads' columns of output_proj's input before and after: {d}"


ABLATE_EXAMPLE = (LAYER +
                  "handle = minilm.ablate_heads(attn, [1])\n"
                  "attn.output_proj.register_forward_pre_hook(lambda m, args: print(args[0][:, 8:16]))  # zeros\n"
                  "attn(x); handle.remove()")
ABLATE_PROPERTIES = (
    Property("with no head listed, the output is unchanged", _none_ablated,
             example=LAYER +
                     "before = attn(x)\nhandle = minilm.ablate_heads(attn, [])\nprint(attn(x) - before)  # zeros",
             idea="zero only the columns of the heads listed; leave every other column as it came in"),
    Property("after handle.remove() the module computes what it did before", _restored,
             example=LAYER +
                     "before = attn(x)\nminilm.ablate_heads(attn, [2]).remove()\nprint(attn(x) - before)  # zeros",
             idea="leave the weights alone: change output_proj's input inside a forward pre-hook, and return the "
                  "handle register_forward_pre_hook gives you"),
    Property("ablating head h zeroes its columns h·d_k … (h+1)·d_k − 1 of output_proj's input and passes the other "
             "heads' columns on unchanged", _slices, example=ABLATE_EXAMPLE,
             idea="in a forward pre-hook on output_proj, return the input with columns h·d_k … (h+1)·d_k − 1 set to "
                  "0: the heads' outputs sit side by side there as (heads d_k)"),
)

spec("15.3", properties=ABLATE_PROPERTIES, collect=_ablate_collect, cases=_ablate_cases,
     outputs={"y": "the output with the heads ablated", "restored": "the output after handle.remove()"},
     mistakes={
         "ablate_interleaved": "head h's slice is columns h·d_k … (h+1)·d_k − 1 (the heads merged as (heads d_k)), "
                               "not every num_heads-th column",
         "ablate_output_columns": "zero head h's slice of output_proj's input (a forward pre-hook): output_proj mixes "
                                  "every head into every column of its output",
         "ablate_weights": "leave the weights alone: zeroing output_proj's weight ablates the head for good, and "
                           "handle.remove() must bring it back",
         "ablate_the_others": "zero the heads listed, and keep the others",
     },
     passed="a pre-hook on output_proj zeroes the listed heads' slices, and handle.remove() undoes it")
