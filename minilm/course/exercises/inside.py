"""Specs of notebook 15: inside the trained model (provided). See minilm/course/exercises/__init__.py."""

from __future__ import annotations

import torch

from minilm.course.exercises import (
    Problem,
    Property,
    attention_shapes,
    differs,
    gen,
    lm_shapes,
    load_state,
    one_line,
    randn,
    shown,
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


# ---------------------------------------------------------------- 15.1: what each attention receives


def _lm(m, config: list, state: dict):
    """The student's TransformerLM(*config) (vocab, context, d_model, layers, heads, d_ff, theta), weights loaded."""
    with torch.random.fork_rng(devices=[]):
        lm = m.TransformerLM(*config)
    load_state(lm, state)
    return lm


def _inputs_cases():
    return [dict(config=[97, 32, 32, 2, 4, 48, 10000.0], state=weights(150, lm_shapes(97, 32, 2, 48)),
                 ids=torch.randint(0, 97, (2, 9), generator=gen(151)),
                 what="TransformerLM(97, 32, 32, 2, 4, 48) and ids (2, 9)"),
            dict(config=[61, 16, 24, 3, 2, 40, 10000.0], state=weights(152, lm_shapes(61, 24, 3, 40)),
                 ids=torch.randint(0, 61, (7,), generator=gen(153)),
                 what="TransformerLM(61, 16, 24, 3, 2, 40) and ids (7,)")]


class _Stop(Exception):
    """What the model raises in the middle of a forward, to see whether the hooks still go."""


def _stop(module, args):
    raise _Stop("the model stopped here")


def _hooks_left(lm) -> int:
    """Forward hooks and forward pre-hooks on any module of lm."""
    return sum(len(mod._forward_pre_hooks) + len(mod._forward_hooks) for mod in lm.modules())


def _after_error(m, lm, ids) -> int:
    """The hooks left on lm after attention_inputs ran it and it raised after its last layer (in ln_final)."""
    stop = lm.ln_final.register_forward_pre_hook(_stop)
    try:
        m.attention_inputs(lm, ids)
    except _Stop:
        pass
    finally:
        stop.remove()
    return _hooks_left(lm)


def _inputs_collect(m, c):
    lm = _lm(m, c["config"], c["state"])
    got = m.attention_inputs(lm, c["ids"])
    got = list(got) if type(got) in (list, tuple) else got
    out = {"inputs": got, "hooks_left": _hooks_left(lm),
           "requires_grad": type(got) is list and any(type(t) is torch.Tensor and t.requires_grad for t in got)}
    out["hooks_left_after_error"] = _after_error(m, lm, c["ids"])
    return out


def _inputs_invariant(got, c) -> Problem | None:
    layers, inputs = c["config"][3], got["inputs"]
    if type(inputs) is not list or not all(type(t) is torch.Tensor for t in inputs):
        return Problem("attention_inputs must return a list of tensors, one per layer")
    if len(inputs) != layers:
        return Problem(f"on {c['what']}: {len(inputs)} tensors for a model of {layers} layers, expected one per layer")
    want = (*c["ids"].shape, c["config"][2])
    wrong = [i for i, t in enumerate(inputs) if tuple(t.shape) != want]
    if wrong:
        return Problem(f"on {c['what']}: tensor {wrong[0]} has shape {shown(list(inputs[wrong[0]].shape))}, expected "
                       f"{want}: what the attention received keeps ids' own dims (…, seq) and adds d_model, no "
                       "batch dim of its own")
    if got["hooks_left"] != 0:
        return Problem(f"on {c['what']}: {shown(got['hooks_left'])} hook(s) left on the model after attention_inputs "
                       "returned", "inputs_hooks_never_removed")
    if got["hooks_left_after_error"] != 0:
        return Problem(f"on {c['what']}: {shown(got['hooks_left_after_error'])} hook(s) left on the model after it "
                       "raised inside attention_inputs", "inputs_hooks_left_when_raising")
    if got["requires_grad"] is not False:
        return Problem(f"on {c['what']}: the tensors returned require grad", "inputs_keep_grad")
    return None


PROBE_LM = [97, 32, 32, 3, 4, 48, 10000.0]


def _probe_lm(m, seed: int = 154):
    lm = _lm(m, PROBE_LM, weights(seed, lm_shapes(97, 32, 3, 48)))
    return lm, torch.randint(0, 97, (2, 8), generator=gen(seed + 1))


def _recorded(lm, ids) -> dict[str, list]:
    """What each block and each attention got and what each attention gave, as the modules' own forwards saw
    them (each forward wrapped for one run of the model)."""
    seen: dict[str, list] = {"block": [], "attn": [], "out": []}

    def wrap(module, into: str, out: str | None = None):
        forward = module.forward

        def recording(x, *args, **kw):
            seen[into].append(x.detach().clone())
            y = forward(x, *args, **kw)
            if out:
                seen[out].append(y.detach().clone())
            return y
        module.forward = recording

    for layer in lm.layers:
        wrap(layer, "block")
        wrap(layer.attn, "attn", "out")
    try:
        with torch.no_grad():
            lm(ids)
    finally:
        for layer in lm.layers:
            del layer.forward, layer.attn.forward
    return seen


def _as_list(got, layers: int) -> str | list:
    if type(got) not in (list, tuple) or not all(type(t) is torch.Tensor for t in got):
        return f"attention_inputs returned {type(got).__name__}, expected a list of tensors"
    if len(got) != layers:
        return f"on a model of {layers} layers, attention_inputs returned {len(got)} tensors"
    return list(got)


def _one_per_layer(m):
    lm, ids = _probe_lm(m)
    sizes = []
    for _ in range(2):  # each size read at once: a list that outlives the call is the same list both times
        second = m.attention_inputs(lm, ids)
        sizes.append(len(second) if type(second) in (list, tuple) else None)
    if None not in sizes and sizes[1] > sizes[0]:
        return (f"on a model of 3 layers, two calls in a row returned {sizes[0]} and then {sizes[1]} tensors: the list "
                "outlives the call and keeps growing")
    got = _as_list(second, 3)
    if type(got) is str:
        return got
    wrong = [i for i, t in enumerate(got) if t.shape != (2, 8, 32)]
    if wrong:
        return (f"on ids (2, 8) through a model with d_model 32, tensor {wrong[0]} has shape "
                f"{tuple(got[wrong[0]].shape)}, expected (2, 8, 32)")
    # one sequence without a batch dim (none is added), and a batch of one (its dim of size 1 is kept)
    for given, want, what in ((ids[0], (8, 32), "ids (8,), one sequence without a batch dim"),
                              (ids[:1], (1, 8, 32), "ids (1, 8), a batch of one")):
        got = _as_list(m.attention_inputs(lm, given), 3)
        if type(got) is str:
            return f"on {what}: {got}"
        wrong = [i for i, t in enumerate(got) if t.shape != want]
        if wrong:
            return f"on {what}, tensor {wrong[0]} has shape {tuple(got[wrong[0]].shape)}, expected {want}"
    return None


def _what_each_got(m):
    lm, ids = _probe_lm(m, 156)
    seen = _recorded(lm, ids)
    got = _as_list(m.attention_inputs(lm, ids), 3)
    if type(got) is str:
        return got
    for i, t in enumerate(got):
        d = differs(t, seen["attn"][i])
        if not d:
            continue
        if not differs(t, seen["attn"][2 - i]):
            return f"tensor {i} is what layer {2 - i}'s attention received: the layers are in reverse order"
        if not differs(t, seen["block"][i]):
            return (f"tensor {i} is layer {i}'s block input, before ln1: the hook is on the block, not on its "
                    "attention")
        if not differs(t, seen["out"][i]):
            return f"tensor {i} is layer {i}'s attention's output, not its input"
        return f"on a model of 3 layers and ids (2, 8), tensor {i} and what layer {i}'s attention received: {d}"
    got = _as_list(m.attention_inputs(lm.to(torch.bfloat16), ids), 3)  # kept as received: no cast, no copy to float
    if type(got) is str:
        return got
    kinds = sorted({str(t.dtype).replace("torch.", "") for t in got})
    return None if kinds == ["bfloat16"] else (f"on the same model in bfloat16, the tensors are {', '.join(kinds)}: "
                                               "expected bfloat16, what each attention received")


def _hooks_gone(m):
    lm, ids = _probe_lm(m, 158)
    m.attention_inputs(lm, ids)
    left = _hooks_left(lm)
    if left:
        return f"after attention_inputs returned, {left} hook(s) are left on the model's modules"
    left = _after_error(m, lm, ids)
    return left and (f"after the model raised inside attention_inputs (in ln_final, after its last layer), {left} "
                     "hook(s) are left on the model's modules") or None


def _no_grad(m):
    lm, ids = _probe_lm(m, 160)
    got = _as_list(m.attention_inputs(lm, ids), 3)
    if type(got) is str:
        return got
    grad = [i for i, t in enumerate(got) if t.requires_grad]
    return grad and f"tensor {grad[0]} requires grad (the model's parameters do; the tensors you keep must not)" or None


def _output_unchanged(m):
    lm, ids = _probe_lm(m, 162)
    with torch.no_grad():
        before = lm(ids)
    during = []
    watch = lm.register_forward_hook(lambda module, args, out: during.append(out.detach().clone()))
    try:
        m.attention_inputs(lm, ids)
    finally:
        watch.remove()
    if not during:
        return "attention_inputs did not run the model"
    d = differs(during[-1], before)
    return d and f"the model's logits while attention_inputs ran it and without its hooks: {d}"


LM = ("model = minilm.TransformerLM(97, 32, 32, 3, 4, 48, 10000.0)\n"
      "ids = torch.randint(0, 97, (2, 8))\n")
INPUTS_PROPERTIES = (
    Property("attention_inputs returns one tensor (..., seq, d_model) per layer, ids' leading dims kept, sizes of 1 "
             "too", _one_per_layer,
             example=LM + "print([x.shape for x in minilm.attention_inputs(model, ids)])  # 3 × (2, 8, 32)\n"
                          "print([x.shape for x in minilm.attention_inputs(model, ids[0])])  # 3 × (8, 32)",
             idea="register one hook per layer, on model.layers[i].attn, and run the model once on ids as they "
                  "come (add no batch dim): each hook keeps its args[0] in one list, made anew at each call (not a "
                  "default argument or a module-level list, which outlive the call)"),
    Property("tensor i is what model.layers[i].attn received: the block's input after ln1, in the layers' order",
             _what_each_got,
             example=LM + "xs = minilm.attention_inputs(model, ids)\n"
                          "x = model.token_embeddings(ids)\n"
                          "print(xs[0] - model.layers[0].ln1(x))  # zeros",
             idea="a forward pre-hook on layer.attn (not on the block, and not a forward hook, which sees the "
                  "output) gets the attention's arguments: keep args[0]; the hooks fire layer by layer, so "
                  "append in the order they run"),
    Property("no hook is left on the model afterwards, also when the model raises", _hooks_gone,
             example=LM + "minilm.attention_inputs(model, ids)\n"
                          "print([len(layer.attn._forward_pre_hooks) for layer in model.layers])  # all 0",
             idea="keep the handle each register_forward_pre_hook returns and call .remove() on every one in a "
                  "finally block around running the model"),
    Property("the tensors returned do not require grad", _no_grad,
             example=LM + "print([x.requires_grad for x in minilm.attention_inputs(model, ids)])  # all False",
             idea="run the model under torch.no_grad() (and keep args[0].detach())"),
    Property("the hooks only look: the model's output while they are on is its output without them",
             _output_unchanged,
             example=LM + "before = model(ids)\n"
                          "model.register_forward_hook(lambda mod, args, out: print((out - before).abs().max()))\n"
                          "minilm.attention_inputs(model, ids)  # 0",
             idea="let the hook return None: a pre-hook that returns something replaces the module's input"),
)

spec("15.1", properties=INPUTS_PROPERTIES, collect=_inputs_collect, cases=_inputs_cases,
     invariant=_inputs_invariant,
     outputs={"inputs": "what each layer's attention received"},
     mistakes={
         "inputs_hooks_never_removed": "keep the handle each register_forward_pre_hook returns and call .remove() on "
                                       "every one: a hook left on the model runs on every later forward",
         "inputs_hooks_left_when_raising": "remove the hooks in a finally block around running the model, so that "
                                           "they go also when the model raises",
         "inputs_keep_grad": "run the model under torch.no_grad() (or keep args[0].detach()): the tensors you return "
                             "must not hold on to the autograd graph",
     },
     passed="one forward pre-hook per layer catches what each attention receives, and every hook is removed")

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


def _self_head(m):
    p = torch.eye(8)
    prev, ind = float(m.previous_token_score(p)), float(m.induction_score(p, 4))
    if abs(prev) > 1e-6 or abs(ind) > 1e-6:
        return (f"a head (8, 8) that attends only to each token itself (query 0 too) scores {prev:.4g} as "
                f"previous-token head and {ind:.4g} as induction head with period 4, expected 0 and 0")
    return None


def _induction_head(m):
    for seq, period in ((8, 4), (9, 3)):
        p = _induction_only(seq, period)
        ind = float(m.induction_score(p, period))
        if abs(ind - 1) > 1e-6:
            return (f"a head ({seq}, {seq}) whose queries t = {period} … {seq - 1} attend only to key t − {period} + 1 "
                    f"(the token after the earlier copy) scores {ind:.4g} as induction head with period {period}, "
                    "expected 1")
    for seq, period in ((8, 4), (9, 3)):  # only the first query counted, t = period, attends there
        p = torch.eye(seq)
        p[period] = 0.0
        p[period, 1] = 1.0
        ind, want = float(m.induction_score(p, period)), 1 / (seq - period)
        if abs(ind - want) > 1e-6:
            return (f"a head ({seq}, {seq}) whose query t = {period} alone attends to key 1 (the token after the "
                    f"earlier copy) scores {ind:.4g} as induction head with period {period}, expected "
                    f"1 / {seq - period} = {want:.4g}: the mean runs over the {seq - period} queries t = {period} … "
                    f"{seq - 1}")
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
    Property("a head that attends only to each token itself scores 0 as previous-token head and as induction head: "
             "query 0's weight on itself counts for neither", _self_head,
             example="p = torch.eye(8)\nprint(minilm.previous_token_score(p), minilm.induction_score(p, 4))  # 0 and 0",
             idea="average pattern[..., t, t − 1] over the queries t = 1 … seq − 1 only: query 0 has no previous "
                  "token, so its row adds nothing, neither to the sum nor to the count"),
    Property("a head that attends only to the token after the earlier copy scores 1 as induction head, the mean over "
             "queries t = period … seq − 1",
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


def _probe_layer(m, seed: int):
    return _layer(m, 32, 4, weights(seed, attention_shapes(32))), randn(seed + 1, 2, 7, 32)


LAYER = "attn = minilm.MultiHeadSelfAttention(32, 4, 32, 10000.0)\nx = torch.randn(7, 32)\n"


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
        for heads in ([2], [0, 3]):
            m.ablate_heads(layer, heads).remove()
            d = differs(layer(x), before)
            if d:
                return (f"after ablating {'head 2' if heads == [2] else 'heads 0 and 3'} and removing the handle, the "
                        f"output and the output before: {d}")
    return None


def _keeps_dtype(m):
    """A bfloat16 layer: output_proj receives bfloat16, the other heads' columns as they came."""
    layer = m.MultiHeadSelfAttention(32, 4, dtype=torch.bfloat16)
    load_state(layer, {k: v.to(torch.bfloat16) for k, v in weights(196, attention_shapes(32)).items()})
    x, seen = randn(197, 2, 7, 32, dtype=torch.bfloat16), []
    with torch.no_grad():
        handle = m.ablate_heads(layer, [1])
        capture = layer.output_proj.register_forward_pre_hook(lambda module, args: seen.append(args[0]))
        try:
            layer(x)
        except Exception as e:  # noqa: BLE001 - raising on a bfloat16 layer is breaking the property
            return f"on MultiHeadSelfAttention(32, 4, dtype=torch.bfloat16) with head 1 ablated: your code raised " \
                   f"{one_line(e)}"
        finally:
            capture.remove()
            handle.remove()
    got = str(seen[-1].dtype).replace("torch.", "") if seen else "nothing"
    return None if got == "bfloat16" else ("on MultiHeadSelfAttention(32, 4, dtype=torch.bfloat16) with head 1 "
                                           f"ablated, output_proj received {got}, expected bfloat16")


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
    Property("after handle.remove() the module computes what it did before, however many heads were listed",
             _restored,
             example=LAYER +
                     "before = attn(x)\nminilm.ablate_heads(attn, [0, 3]).remove()\nprint(attn(x) - before)  # zeros",
             idea="leave the weights alone: register one forward pre-hook on output_proj that zeroes every head "
                  "listed, and return its handle: a hook per head leaves all but the returned one in place"),
    Property("ablating head h zeroes its columns h·d_k … (h+1)·d_k − 1 of output_proj's input and passes the other "
             "heads' columns on unchanged", _slices, example=ABLATE_EXAMPLE,
             idea="in a forward pre-hook on output_proj, return the input with columns h·d_k … (h+1)·d_k − 1 set to "
                  "0: the heads' outputs sit side by side there as (heads d_k)"),
    Property("the hook keeps output_proj's input in the module's dtype: a bfloat16 layer stays bfloat16",
             _keeps_dtype,
             example="attn = minilm.MultiHeadSelfAttention(32, 4, dtype=torch.bfloat16)\n"
                     "handle = minilm.ablate_heads(attn, [1])\n"
                     "attn.output_proj.register_forward_pre_hook(lambda m, args: print(args[0].dtype))  # bfloat16\n"
                     "attn(torch.randn(7, 32, dtype=torch.bfloat16)); handle.remove()",
             idea="zero the columns with masked_fill or torch.where on the input itself (or multiply by a mask "
                  "made in its dtype, x.new_ones): a float32 mask times bfloat16 columns gives float32"),
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
