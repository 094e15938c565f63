"""Specs of notebooks 1–4: Linear, Embedding, RMSNorm, SwiGLU (provided). See minilm/course/exercises/__init__.py."""

from __future__ import annotations

import math

import torch

from minilm.course.exercises import (
    Problem,
    Property,
    at_edge,
    differs,
    each_row_alone,
    few_values,
    first,
    gradient_follows,
    init_problem,
    keeps_dtype,
    keeps_inputs,
    keys_problem,
    learns,
    load_state,
    module_contract,
    one_line,
    randn,
    shown,
    spec,
    state_keys,
    sublayer_adds_no_residual,
    weights,
)

# ---------------------------------------------------------------- 1: Linear


def _linear_cases():
    return [dict(x=randn(1, 2, 3, 8), w=randn(2, 5, 8), what="x (2, 3, 8), W (5, 8)"),
            dict(x=randn(3, 4, 6), w=randn(4, 6, 6), what="a square W (6, 6)"),
            dict(x=randn(5, 7), w=randn(6, 3, 7), what="a 1-D x (7,)")]


def _linear_noncontiguous(m):
    x, w = randn(50, 2, 3, 6).transpose(0, 1), randn(51, 4, 6)  # x (3, 2, 6): a view, not contiguous in memory
    d = differs(m.linear(x, w), m.linear(x.contiguous(), w))
    return d and f"on x (3, 2, 6) {d}"


def _linear_leading_ones(m):
    for shape, d_out in (((1, 3, 6), 4), ((1, 6), 4), ((2, 1, 6), 4), ((2, 3, 6), 1)):
        y = m.linear(randn(113, *shape), randn(114, d_out, 6))
        got = tuple(y.shape) if isinstance(y, torch.Tensor) else None
        if got != (*shape[:-1], d_out):
            got = shown(list(got) if got else got)
            return f"x {shape} and W ({d_out}, 6) give y of shape {got}, expected {(*shape[:-1], d_out)}"
    return None


def _linear_rows(m):
    x, w = randn(52, 3, 2, 5), randn(53, 4, 5)
    d = differs(m.linear(x, w)[1, 0], m.linear(x[1, 0], w))
    if d:
        return f"for x (3, 2, 5), linear(x)[1, 0] and linear(x[1, 0]): {d}"
    return at_edge("for x (0, 2, 5), an empty batch, the output and an empty (0, 2, 4)", lambda: m.linear(x[:0], w),
                   torch.zeros(0, 2, 4))


def _linear_columns(m):
    w = randn(54, 4, 6)
    d = differs(m.linear(torch.eye(6), w), w.T)
    return d and f"with W (4, 6), linear(e_i, W) for the unit vectors e_0 … e_5 (the rows of torch.eye(6)) and W's " \
                 f"columns W[:, i]: {d}"


LINEAR_PROPERTIES = (
    Property("y_j = Σ_i W[j, i] x_i, nothing more: the unit vector e_i gives W's column i", _linear_columns,
             example="w = torch.randn(4, 6)\nprint(minilm.linear(torch.eye(6), w) - w.T)  # zeros",
             idea="y = x Wᵀ with W (d_out, d_in), no scale, no bias and no other factor: output j is the dot "
                  "product of x with row j of W"),
    keeps_inputs("linear", lambda: (randn(91, 3, 6), randn(92, 4, 6)), "on x (3, 6) and W (4, 6)"),
    Property("a non-contiguous x (a transposed view) gives what its contiguous copy gives", _linear_noncontiguous,
             example="x = torch.randn(2, 3, 6).transpose(0, 1)  # (3, 2, 6), a view: not contiguous\n"
                     "w = torch.randn(4, 6)\n"
                     "print(minilm.linear(x, w) - minilm.linear(x.contiguous(), w))",
             idea="x.view needs x's memory in order, which a transposed view is not: reshape copies when it must, "
                  "and x @ W.T needs no reshaping at all (matmul broadcasts over the leading dims)"),
    Property("y keeps x's leading dims, sizes of 1 included, and ends in d_out, 1 included: x (1, 3, 6) gives y (1, 3, "
             "d_out)", _linear_leading_ones,
             example="print(minilm.linear(torch.randn(1, 3, 6), torch.randn(4, 6)).shape)  # (1, 3, 4)",
             idea="x @ W.T keeps every leading dim; squeeze() or view with sizes worked out by hand drops those of "
                  "size 1"),
    Property("each vector of x is mapped on its own, whatever the leading dims, an empty batch too", _linear_rows,
             example="x, w = torch.randn(3, 2, 5), torch.randn(4, 5)\n"
                     "print(minilm.linear(x, w)[1, 0] - minilm.linear(x[1, 0], w))",
             idea="y = x Wᵀ acts on the last dim only: flatten nothing across vectors, mix no rows"),
)

spec("1.1",
     dtypes=keeps_dtype("linear", lambda: (randn(150, 3, 5), randn(151, 4, 5)), "on x (3, 5) and W (4, 5)"),
     gradient=gradient_follows("linear", lambda: (randn(120, 3, 5).double(), randn(121, 4, 5).double()),
                               "on x (3, 5) and W (4, 5)",
                               wrt=(0, 1), call="x, torch.randn(2, 4, dtype=torch.float64)"),
     collect=lambda m, c: {"y": m.linear(c["x"], c["w"])}, cases=_linear_cases,
     outputs={"y": "linear(x, W)"}, properties=LINEAR_PROPERTIES,
     mistakes={"not_transposed": "you computed x W; the contract is y = x Wᵀ (W is (d_out, d_in))"},
     passed="matches F.linear for 1-D, 2-D and 3-D inputs")


def _Linear_collect(m, c):
    torch.manual_seed(c["seed"])
    big = m.Linear(c["init_in"], c["init_out"])  # big enough for its statistics to be tight
    layer = m.Linear(c["d_in"], c["d_out"])
    out = {"keys": state_keys(layer), "weight_shape": list(layer.weight.shape), "init": big.weight.detach().clone()}
    load_state(layer, {"weight": c["w"]})
    out["y"] = layer(c["x"])
    out["learnable"] = [p.requires_grad for p in layer.parameters()]
    out["dtype"] = str(m.Linear(4, 3, dtype=torch.float64).weight.dtype)
    return out


def _Linear_invariant(got, c) -> Problem | None:
    what = f"Linear({c['d_in']}, {c['d_out']})"
    shape = [c["d_out"], c["d_in"]]
    return first(
        keys_problem(got["keys"], ["weight"], what),
        None if got["weight_shape"] == shape else Problem(
            f"{what}.weight must have shape (out_features, in_features) = {tuple(shape)}, got "
            f"{shown(got['weight_shape'])}", "weight_transposed"),
        init_problem(got["init"], math.sqrt(2 / (c["init_in"] + c["init_out"])),
                     f"Linear({c['init_in']}, {c['init_out']}) init"),
        None if got["dtype"] == "torch.float64" else Problem(
            "Linear(..., dtype=torch.float64) must create a float64 weight", "ignores_dtype"))


def _Linear_is_linear(m):
    layer, x = m.Linear(6, 4), randn(124, 3, 6)
    with torch.no_grad():
        d = differs(layer(x), x @ layer.weight.T)  # only this task's code runs: never Task 1.1's linear
    return d and f"Linear(6, 4) on x (3, 6), its output and x @ layer.weight.T: {d}"


spec("1.2", properties=(learns(lambda m: (m.Linear(6, 4), (randn(115, 3, 6),)), "Linear(6, 4)"),
                        Property("Linear's forward is x Wᵀ with its own weight, nothing added or scaled",
                                 _Linear_is_linear,
                                 example="layer, x = minilm.Linear(6, 4), torch.randn(3, 6)\n"
                                         "print(layer(x) - x @ layer.weight.T)  # zeros",
                                 idea="forward returns linear(x, self.weight): the init's std belongs to the "
                                      "weight, not to the output"),
                        *module_contract(lambda m, **kw: m.Linear(48, 80, **kw), lambda _: (randn(118, 3, 48),),
                                         "Linear(48, 80)")),
     collect=_Linear_collect, invariant=_Linear_invariant, free=("init",),
     cases=lambda: [dict(seed=0, init_in=512, init_out=256, d_in=64, d_out=32,
                         w=weights(35, {"weight": (32, 64)})["weight"],
                         x=randn(7, 3, 5, 64), what="Linear(64, 32) and x (3, 5, 64)")],
     outputs={"y": "the output"},
     passed="weight (out, in), truncated-normal init, no bias, forward matches F.linear")

# ---------------------------------------------------------------- 2: Embedding


def _embedding_cases():
    w = randn(8, 11, 6)
    return [dict(ids=torch.tensor([[0, 3, 10], [3, 3, 1]]), w=w, what="ids (2, 3), W (11, 6)"),
            dict(ids=torch.tensor(5), w=w, what="a single id (a 0-d tensor)")]


def _embedding_row_i(m):
    w = randn(172, 5, 3)
    return at_edge("embedding(torch.arange(5), W) for W (5, 3), against W itself (id i looks up row i)",
                   lambda: m.embedding(torch.arange(5), w), w) or at_edge(
        "embedding(torch.tensor([4, 0, 4]), W) for W (5, 3), against rows 4, 0, 4 of W",
        lambda: m.embedding(torch.tensor([4, 0, 4]), w), torch.stack((w[4], w[0], w[4])))


def _embedding_any_shape(m):
    w = randn(173, 7, 3)
    for shape in ((), (4,), (1, 3), (2, 1, 3), (0,)):
        ids = torch.arange(7).repeat(3)[:math.prod(shape)].reshape(shape)
        try:
            y = m.embedding(ids, w)
        except Exception as e:  # noqa: BLE001 - raising on a shape the contract allows is breaking the property
            return f"on ids of shape {shape} and W (7, 3): your code raised {one_line(e)}"
        got = tuple(y.shape) if type(y) is torch.Tensor else None
        if got != (*shape, 3):
            return f"ids of shape {shape} and W (7, 3) give an output of shape " \
                   f"{shown(list(got)) if got is not None else type(y).__name__}, expected {(*shape, 3)}"
    return None


EMBEDDING_PROPERTIES = (
    Property("the output's shape is token_ids' shape followed by d_model, for any shape of token_ids (0-d, sizes "
             "of 1, empty)", _embedding_any_shape,
             example="w = torch.randn(7, 3)\nfor ids in (torch.tensor(2), torch.tensor([[1, 2, 3]]), "
                     "torch.zeros(2, 1, 3, dtype=torch.long)):\n    print(minilm.embedding(ids, w).shape)",
             idea="W[token_ids] keeps every dim of token_ids and appends d_model; flattening the ids, squeeze() "
                  "or a view with sizes worked out by hand loses dims of size 1 or the 0-d case"),
    Property("id i looks up row i of W: embedding(torch.arange(vocab), W) is W itself", _embedding_row_i,
             example="w = torch.randn(5, 3)\nprint(minilm.embedding(torch.arange(5), w) - w)  # zeros",
             idea="index W's rows (its first dim, vocab) by the ids as they are: W[token_ids], no shift, no "
                  "transpose"),
    keeps_inputs("embedding", lambda: (torch.tensor([[0, 3], [2, 2]]), randn(174, 5, 4)), "on ids (2, 2), W (5, 4)"),
)

spec("2.1", properties=EMBEDDING_PROPERTIES,
     gradient=gradient_follows("embedding", lambda: (torch.tensor([[0, 2, 2], [4, 1, 0]]), randn(175, 5, 4).double()),
                               "on ids (2, 3), W (5, 4)", wrt=(1,), call="torch.tensor([[0, 2], [1, 1]]), x"),
     rows=each_row_alone("embedding", lambda: (torch.tensor([[0, 3, 1], [2, 2, 4]]), randn(171, 5, 4)),
                         "on ids (2, 3)"),
     dtypes=keeps_dtype("embedding", lambda: (torch.tensor([[0, 3], [2, 2]]), randn(152, 5, 4)),
                        "on ids (2, 2), W (5, 4)"),
     collect=lambda m, c: {"y": m.embedding(c["ids"], c["w"])}, cases=_embedding_cases,
     outputs={"y": "embedding(ids, W)"}, passed="matches F.embedding for any shape of ids")


def _Embedding_collect(m, c):
    torch.manual_seed(c["seed"])
    emb = m.Embedding(c["vocab"], c["d"])
    out = {"keys": state_keys(emb), "weight_shape": list(emb.weight.shape), "init": emb.weight.detach().clone()}
    load_state(emb, {"weight": c["w"]})
    out["y"] = emb(c["ids"])
    out["y"].pow(2).sum().backward()  # the lookup is differentiable in the weight: rows of ids get gradients
    grad = emb.weight.grad
    # the looked-up rows' gradients, and every row's sum (a gradient on the wrong row shows): small to store
    out["grad_rows"] = grad[c["ids"].reshape(-1)] if type(grad) is torch.Tensor else grad
    out["grad_row_sums"] = grad.sum(-1) if type(grad) is torch.Tensor else grad
    return out


def _Embedding_invariant(got, c) -> Problem | None:
    what = f"Embedding({c['vocab']}, {c['d']})"
    return first(
        keys_problem(got["keys"], ["weight"], what),
        None if got["weight_shape"] == [c["vocab"], c["d"]] else Problem(
            f"{what}.weight must be (num_embeddings, embedding_dim) = ({c['vocab']}, {c['d']}), got "
            f"{shown(got['weight_shape'])}", "weight_transposed"),
        init_problem(got["init"], 1.0, f"{what} init"))


def _Embedding_rows(m):
    emb = m.Embedding(10, 4)
    with torch.no_grad():
        d = differs(emb(torch.tensor([[3, 0, 9], [1, 1, 4]])), emb.weight[torch.tensor([[3, 0, 9], [1, 1, 4]])])
    return d and f"Embedding(10, 4) on ids [[3, 0, 9], [1, 1, 4]], its output and those rows of its weight: {d}"


spec("2.2", properties=(learns(lambda m: (m.Embedding(10, 4), (torch.arange(10),)), "Embedding(10, 4)"),
                        Property("id i looks up row i of the module's own weight, as it is (no scale, no shift)",
                                 _Embedding_rows,
                                 example="emb = minilm.Embedding(10, 4)\nids = torch.tensor([3, 0, 9])\n"
                                         "print(emb(ids) - emb.weight[ids])  # zeros",
                                 idea="forward returns embedding(token_ids, self.weight): ids count from 0, and the "
                                      "√d_model scale some models apply belongs to the model, not to Embedding"),
                        *module_contract(lambda m, **kw: m.Embedding(100, 32, **kw), lambda _: (torch.arange(10),),
                                         "Embedding(100, 32)")),
     collect=_Embedding_collect, invariant=_Embedding_invariant, free=("init",),
     cases=lambda: [dict(seed=0, vocab=1000, d=64, w=randn(36, 1000, 64), ids=torch.tensor([[1, 999, 0]]),
                         what="Embedding(1000, 64) and ids (1, 3)")],
     outputs={"y": "the lookup", "grad_rows": "the looked-up rows' gradient",
              "grad_row_sums": "the gradient's row sums"},
     passed="weight (vocab, d), truncated-normal init, lookup matches F.embedding")

# ---------------------------------------------------------------- 3: RMSNorm

RMS_MISTAKES = {
    "subtracts_mean": "your output matches LayerNorm: RMSNorm does not subtract the mean, it only divides by "
                      "sqrt(mean(x²) + eps)",
    "eps_outside_sqrt": "eps belongs inside the square root: sqrt(mean(x²) + eps), not sqrt(mean(x²)) + eps",
    "ignores_weight": "multiply by the gain weight after normalizing",
    "rms_over_whole_tensor": "you took one mean of x² over the whole tensor: RMSNorm normalizes each vector on "
                             "its own, "
                             "over the last dim only: sqrt(mean(x², dim=-1, keepdim=True) + eps)",
}


def _rms_norm_cases():
    cases = [dict(x=randn(9, *shape, scale=scale) + 0.5 * scale, w=randn(10, shape[-1]),
                  what=f"x {shape} (values around {scale:g})") for shape, scale in
             (((2, 5, 16), 1.0), ((3, 8), 1e-3), ((16,), 50.0))]
    return cases + [dict(x=randn(11, 4, 16, scale=3).to(torch.bfloat16), w=torch.ones(16, dtype=torch.bfloat16),
                         what="x (4, 16) in bfloat16")]


def _same_dtype(got, c) -> Problem | None:
    y, x = got["y"], c["x"]
    if type(y) is torch.Tensor and y.dtype != x.dtype:
        name = str(x.dtype).replace("torch.", "")
        return Problem(f"rms_norm must return the input's dtype ({name}), got {str(y.dtype).replace('torch.', '')}",
                       "wrong_dtype")
    return None


def _rms_norm_float16(m):
    x, w = (randn(54, 2, 16, scale=30) + 300).half(), randn(55, 16).half()
    y = m.rms_norm(x, w)
    d = differs(y, m.rms_norm(x.float(), w.float()).half(), atol=1e-2, rtol=1e-2)
    zeros = " (every value is 0: x² overflowed float16, whose largest value is 65,504)" if (
        type(y) is torch.Tensor and not y.float().abs().sum()) else ""
    return d and f"on x (2, 16) near 300 {d}{zeros}"


def _rms_norm_unit_rms(m):
    x = randn(60, 2, 3, 16, scale=5.0)
    y = m.rms_norm(x, torch.ones(16))
    if type(y) is not torch.Tensor or y.shape != x.shape:
        return f"on x (2, 3, 16) rms_norm returned shape {shown(list(y.shape)) if type(y) is torch.Tensor else '…'}"
    d = differs(y.double().pow(2).mean(-1), torch.ones(2, 3, dtype=torch.float64), atol=1e-3)
    return d and f"on x (2, 3, 16) with weight 1, the mean of y² over the last dim and 1: {d}"


def _rms_norm_each_vector(m):
    x, w = randn(56, 3, 16) * torch.tensor([[0.01], [1.0], [100.0]]), randn(57, 16)
    d = differs(m.rms_norm(x, w)[2], m.rms_norm(x[2:], w)[0])
    return d and f"for the last row of x (3, 16) {d}"


def _rms_norm_scale_free(m):
    x, w = randn(58, 4, 16), randn(59, 16)
    d = differs(m.rms_norm(10 * x, w), m.rms_norm(x, w), atol=1e-4)
    return d and f"for x (4, 16) around 1 {d}"


def _rms_norm_eps_added(m):
    x = torch.full((1, 4), 1e-3)  # mean(x²) = 1e-6; with eps = 1e-6 the root is of 2e-6
    y = m.rms_norm(x, torch.ones(4), eps=1e-6)
    want = 1e-3 / (2e-6) ** 0.5  # 1/√2
    got = float(y[0, 0]) if type(y) is torch.Tensor and y.numel() else float("nan")
    return None if abs(got - want) < 1e-4 else (
        f"x = [0.001] × 4 has mean(x²) = 1e-6; with eps 1e-6 each value comes out {got:.5g}, expected "
        f"0.001 / √(1e-6 + 1e-6) = {want:.5g}")


def _rms_norm_zero_vector(m):
    x = torch.cat((torch.zeros(1, 8), randn(61, 1, 8)))
    return at_edge("on x (2, 8) whose row 0 is all zeros, row 0 of the output and zeros",
                   lambda: m.rms_norm(x, randn(62, 8))[0], torch.zeros(8))


def _rms_norm_gain_after(m):
    x, w = randn(63, 3, 16, scale=2.0), randn(64, 16)
    d = differs(m.rms_norm(x, w), m.rms_norm(x, torch.ones(16)) * w, atol=1e-5)
    return d and f"on x (3, 16) and a random weight w, rms_norm(x, w) and rms_norm(x, ones) · w: {d}"


def _rms_norm_default_eps(m):
    x, w = randn(65, 3, 8, scale=1e-3), torch.ones(8)  # mean(x²) ≈ 1e-6: eps changes the output
    d = differs(m.rms_norm(x, w), m.rms_norm(x, w, eps=1e-5), atol=1e-6)
    return d and f"on x (3, 8) of size ~1e-3, rms_norm(x, w) and rms_norm(x, w, eps=1e-5): {d}"


RMS_PROPERTIES = (
    Property("the weight multiplies after normalizing: rms_norm(x, w) = rms_norm(x, ones) · w", _rms_norm_gain_after,
             example="x, w = torch.randn(3, 16), torch.randn(16)\n"
                     "print(minilm.rms_norm(x, w) - minilm.rms_norm(x, torch.ones(16)) * w)  # zeros",
             idea="normalize x by its own RMS first, x / sqrt(mean(x²) + eps), then multiply by weight once: the "
                  "gain is not part of the RMS, and it multiplies (not divides)"),
    Property("with weight 1, every vector along the last dim comes out with mean square 1, for any number of leading "
             "dims", _rms_norm_unit_rms,
             example="x = 5 * torch.randn(2, 3, 16)\ny = minilm.rms_norm(x, torch.ones(16))\n"
                     "print(y.pow(2).mean(-1))  # ones, shape (2, 3)",
             idea="divide by the root of the mean of x² over the last dim (dim=-1, not dim=1), kept for the "
                  "division: x² itself, not the variance or the std, which subtract the mean first"),
    Property("its default eps is the contract's 1e-5", _rms_norm_default_eps,
             example="x = 1e-3 * torch.randn(3, 8)\nw = torch.ones(8)\n"
                     "print(minilm.rms_norm(x, w) - minilm.rms_norm(x, w, eps=1e-5))  # zeros",
             idea="keep the signature's default, eps: float = 1e-5, and use that eps in the formula"),
    Property("eps is added to the mean square under the root: a row whose mean square equals eps comes out at 1/√2 "
             "(with weight 1)", _rms_norm_eps_added,
             example="x = torch.full((1, 4), 1e-3)  # mean(x²) = 1e-6\n"
                     "print(minilm.rms_norm(x, torch.ones(4), eps=1e-6))  # 0.7071 = 1/√2",
             idea="x / sqrt(mean(x²) + eps): eps is added inside the square root, not used as a floor (max, clamp) "
                  "nor added after it"),
    keeps_inputs("rms_norm", lambda: (randn(93, 3, 16), randn(94, 16)), "on x (3, 16)"),
    Property("a float16 x gives its float32 result rounded to float16, also for values near 300",
             _rms_norm_float16,
             example="x = torch.full((16,), 300.0, dtype=torch.float16)\nw = torch.ones(16, dtype=torch.float16)\n"
                     "print(minilm.rms_norm(x, w))  # 300² = 90,000 is beyond float16's 65,504",
             idea="compute in float32 (x.float()), then return the input's dtype: the mean of squares overflows "
                  "float16 and loses digits in bfloat16"),
    Property("each vector is normalized on its own: a row normalized with the others or alone comes out the same",
             _rms_norm_each_vector,
             example="x = torch.randn(3, 16) * torch.tensor([[0.01], [1.0], [100.0]])\nw = torch.ones(16)\n"
                     "print(minilm.rms_norm(x, w)[2] - minilm.rms_norm(x[2:], w)[0])",
             idea="take the mean of x² over the last dim only, keeping it (keepdim=True) to divide each vector by "
                  "its own RMS"),
    Property("an all-zero vector comes out as zeros: eps keeps the division finite", _rms_norm_zero_vector,
             example="print(minilm.rms_norm(torch.zeros(2, 8), torch.ones(8)))  # zeros, not NaN",
             idea="add eps to the mean of x² inside the square root, sqrt(mean(x²) + eps): without it a zero vector "
                  "is 0 / 0"),
    Property("scaling x by 10 leaves rms_norm(x) unchanged (for x well above eps)", _rms_norm_scale_free,
             example="x, w = torch.randn(4, 16), torch.ones(16)\nprint(minilm.rms_norm(10 * x, w) - "
                     "minilm.rms_norm(x, w))",
             idea="divide x by the square root of the mean of its squares: a scale of x cancels out"),
)

spec("3.1",
     rows=each_row_alone("rms_norm", lambda: (randn(172, 3, 4, 6), randn(173, 6)), "on x (3, 4, 6)"),
     dtypes=keeps_dtype("rms_norm", lambda: (randn(153, 3, 6), randn(154, 6)), "on x (3, 6)", mixed=True,
                        idea="compute in float32 (x.float(), and the weight too) whatever x's dtype, and cast the "
                             "result once, at the end, to x's dtype"),
     gradient=gradient_follows("rms_norm", lambda: (randn(122, 3, 6).double(), randn(123, 6).double()), "on x (3, 6)",
                               wrt=(0, 1), call="x, torch.ones(4, dtype=torch.float64)"),
     collect=lambda m, c: {"y": m.rms_norm(c["x"], c["w"], **({"eps": c["eps"]} if "eps" in c else {}))},
     cases=_rms_norm_cases, invariant=_same_dtype, outputs={"y": "rms_norm"}, mistakes=RMS_MISTAKES,
     properties=RMS_PROPERTIES,
     passed="matches F.rms_norm (small, large and bfloat16 inputs)")


def _RMSNorm_collect(m, c):
    norm = m.RMSNorm(c["d"], **({"eps": c["eps"]} if "eps" in c else {}))
    out = {"keys": state_keys(norm), "weight0": norm.weight.detach().clone()}
    load_state(norm, {"weight": c["w"]})
    out["y"] = norm(c["x"])
    out["learnable"] = [p.requires_grad for p in norm.parameters()]
    return out


def _RMSNorm_invariant(got, c) -> Problem | None:
    w0 = got["weight0"]
    return first(keys_problem(got["keys"], ["weight"], f"RMSNorm({c['d']})"),
                 None if type(w0) is torch.Tensor and torch.equal(w0, torch.ones(c["d"])) else Problem(
                     "RMSNorm.weight must start at ones", "weight_not_ones"))


def _RMSNorm_default_eps(m):
    x = randn(118, 3, 8, scale=1e-3)  # small enough that eps changes the output
    with torch.no_grad():
        d = differs(m.RMSNorm(8)(x), m.RMSNorm(8, eps=1e-5)(x), atol=1e-6, rtol=1e-4)
    return d and f"on x of size ~1e-3, RMSNorm(8) and RMSNorm(8, eps=1e-5): {d}"


def _RMSNorm_is_rms_norm(m):
    x, w = randn(125, 2, 3, 8), randn(126, 8)
    for eps in (1e-5, 1e-2):
        norm = m.RMSNorm(8, eps=eps)
        with torch.no_grad():
            norm.weight.copy_(w)
            # only this task's code runs: never Task 3.1's rms_norm
            d = differs(norm(x), x / (x.pow(2).mean(-1, keepdim=True) + eps).sqrt() * w)
        if d:
            return (f"RMSNorm(8, eps={eps:g}) with weight w, on x (2, 3, 8), its output and "
                    f"x / √(mean(x²) + {eps:g}) · w: {d}")
    return None


spec("3.2", properties=(learns(lambda m: (m.RMSNorm(8), (randn(116, 3, 8),)), "RMSNorm(8)"),
                        Property("RMSNorm's forward is x / √(mean(x²) + self.eps) · self.weight, the weight as it "
                                 "is", _RMSNorm_is_rms_norm,
                                 example="norm = minilm.RMSNorm(8)\nnorm.weight.data = torch.randn(8)\n"
                                         "x = torch.randn(3, 8)\n"
                                         "print(norm(x) - minilm.rms_norm(x, norm.weight, norm.eps))  # zeros",
                                 idea="forward returns rms_norm(x, self.weight, self.eps): the gain is applied once, "
                                      "inside rms_norm, and is the weight itself (not 1 + weight)"),
                        Property("its default eps is the contract's 1e-5", _RMSNorm_default_eps,
                                 example="x = 1e-3 * torch.randn(3, 8)\n"
                                         "print(minilm.RMSNorm(8)(x) - minilm.RMSNorm(8, eps=1e-5)(x))  # zeros",
                                 idea="keep the signature's default, eps: float = 1e-5, and use self.eps in forward"),
                        *module_contract(lambda m, **kw: m.RMSNorm(32, **kw), lambda _: (randn(120, 2, 3, 32),),
                                         "RMSNorm(32)", x_dtype=True)),
     collect=_RMSNorm_collect, invariant=_RMSNorm_invariant,
     cases=lambda: [dict(d=24, w=randn(12, 24), x=randn(13, 2, 3, 24), what="RMSNorm(24) and x (2, 3, 24)"),
                    dict(d=24, eps=1e-2, w=torch.ones(24), x=randn(14, 2, 24, scale=1e-3),
                         what="RMSNorm(24, eps=1e-2) and x (2, 24) around 1e-3")],
     outputs={"y": "the output"},
     mistakes=RMS_MISTAKES | {"ignores_eps": "use the eps given to the constructor"},
     passed="weight starts at ones, forward matches F.rms_norm, honours eps")

# ---------------------------------------------------------------- 4: SwiGLU

def _silu_odd_part(m):
    x = torch.linspace(-6, 6, 25)
    d = differs(m.silu(x) - m.silu(-x), x)
    return d and f"on x from −6 to 6, silu(x) − silu(−x) and x: {d}"


def _silu_far_out(m):
    x = torch.tensor([-1e4, -100.0, 100.0, 1e4])
    y = m.silu(x)
    if type(y) is not torch.Tensor or y.shape != x.shape:
        return f"on x = [-1e4, -100, 100, 1e4] silu returned {type(y).__name__}"
    if not torch.isfinite(y).all():
        return f"silu([-1e4, -100, 100, 1e4]) = {[float(v) for v in y]}: e^x overflows float32 past x ≈ 88"
    d = differs(y, torch.tensor([0.0, 0.0, 100.0, 1e4]), atol=1e-3)
    if d:
        return f"far from 0, silu(x) and (x > 0) · x: {d}"
    small = m.silu(torch.tensor([-20.0, -15.0]))  # x·σ(x) = x·e^x / (1 + e^x): tiny, but not 0
    want = torch.tensor([-20.0, -15.0]).double() * torch.sigmoid(torch.tensor([-20.0, -15.0]).double())
    rel = ((small.double() - want) / want).abs().max().item() if isinstance(small, torch.Tensor) else float("inf")
    return None if rel < 1e-3 else (f"silu(−20) and silu(−15) are {[float(v) for v in small]}, expected "
                                    f"{[float(v) for v in want]} (off by {rel:.0%}): σ(x) for x ≪ 0 is e^x / (1 + e^x),"
                                    " and 1 − σ(−x) cancels to 0")


def _silu_at_one(m):
    got = m.silu(torch.tensor([1.0, -1.0, 3.0], dtype=torch.float64))
    want = torch.tensor([0.7310585786300049, -0.2689414213699951, 2.8577223804673], dtype=torch.float64)
    d = differs(got, want, atol=1e-6)
    return d and ((few_values(got, "silu(1), silu(−1), silu(3)") or f"silu(1), silu(−1), silu(3): {d}")
                  + " (silu(3) = 3·σ(3) = 2.857722)")


spec("4.1",
     rows=each_row_alone("silu", lambda: (randn(174, 3, 5),), "on x (3, 5)"),
     dtypes=keeps_dtype("silu", lambda: (randn(155, 3, 5),), "on x (3, 5)"),
     gradient=gradient_follows("silu", lambda: (randn(124, 3, 5).double(),), "on x (3, 5)"),
     properties=(
         Property("silu(1) = σ(1) = 0.731059 and silu(−1) = −σ(−1) = −0.268941 (σ(x) = 1 / (1 + e^(−x)))",
                  _silu_at_one,
                  example="print(minilm.silu(torch.tensor([1.0, -1.0], dtype=torch.float64)))",
                  idea="SiLU is x · σ(x) with the plain logistic σ(x) = 1 / (1 + e^(−x)): no factor inside σ "
                       "(σ(1.702x) approximates GELU, not SiLU), and not x · Φ(x)"),
         keeps_inputs("silu", lambda: (randn(95, 2, 7),), "on x (2, 7)"),
         Property("far from 0, silu is finite: 0 for x ≪ 0 and x for x ≫ 0 (±100, ±1e4)", _silu_far_out,
                  example="print(minilm.silu(torch.tensor([-1e4, -100.0, 100.0, 1e4])))  # 0, 0, 100, 10000",
                  idea="write σ(x) as 1 / (1 + e^(−x)) (or use torch.sigmoid): e^x / (1 + e^x) is inf / inf for "
                       "x > 88 in float32"),
         Property("silu(x) − silu(−x) = x (since σ(x) + σ(−x) = 1)", _silu_odd_part,
                  example="x = torch.linspace(-6, 6, 25)\nprint(minilm.silu(x) - minilm.silu(-x) - x)  # zeros",
                  idea="SiLU is x · σ(x) with σ(x) = 1 / (1 + e^(−x)): mind the sign in the exponent")),
     collect=lambda m, c: {"y": m.silu(c["x"])},
     cases=lambda: [dict(x=torch.linspace(-8, 8, 101), what="x on [-8, 8]"),
                    dict(x=randn(15, 2, 3, 4), what="x (2, 3, 4)")],
     outputs={"y": "silu"},
     mistakes={"sigmoid_only": "SiLU is x·σ(x), not σ(x) alone", "relu": "that is ReLU; SiLU is x·σ(x)"},
     passed="matches F.silu")

SWIGLU_MISTAKES = {
    "w1_w3_swapped": "the gate is SiLU(W1 x) and the value W3 x: you applied SiLU to W3 x (w1 and w3 swapped)",
    "no_gate": "multiply SiLU(W1 x) by W3 x before W2",
}

def _swiglu_gate_is_silu(m):
    # x = e₀, w3 = ones in column 0, w2 = I: the value W3 x is 1 and W2 the identity, so the output is the gate alone
    z = torch.linspace(-4, 4, 8)
    x, w1 = torch.eye(8)[0], torch.zeros(8, 8)
    w1[:, 0] = z
    w3 = torch.zeros(8, 8)
    w3[:, 0] = 1.0
    got = m.swiglu(x, w1, torch.eye(8), w3)
    want = z * torch.sigmoid(z)
    d = differs(got, want, atol=1e-5)
    return d and (f"with W1 x = z = {[round(v, 2) for v in z.tolist()]}, W3 x = 1 and W2 = I, the output (the gate "
                  f"alone) is {[round(float(v), 3) for v in got]}, expected SiLU(z) = z·σ(z) = "
                  f"{[round(float(v), 3) for v in want]}")


def _swiglu_linear_in_value(m):
    x, w1, w2, w3 = randn(100, 2, 8), randn(101, 12, 8), randn(102, 8, 12), randn(103, 12, 8)
    base = m.swiglu(x, w1, w2, w3)
    d = differs(m.swiglu(x, w1, w2, 2 * w3), 2 * base, atol=1e-4)
    if d:
        return f"on x (2, 8), d_ff 12, swiglu with 2·w3 and 2 · swiglu with w3 (SiLU acts on W1 x alone): {d}"
    d = differs(m.swiglu(x, w1, 2 * w2, w3), 2 * base, atol=1e-4)
    return d and f"on x (2, 8), d_ff 12, swiglu with 2·w2 and 2 · swiglu with w2 (W2 is the last step): {d}"


def _swiglu_ends_in_w2(m):
    x, w1, w3 = randn(96, 2, 8), randn(97, 12, 8), randn(99, 12, 8)
    d = differs(m.swiglu(x, w1, torch.zeros(8, 12), w3), torch.zeros(2, 8))
    return d and f"on x (2, 8), d_ff 12, with w2 all zeros, the output and 0: {d}"


def _swiglu_gate_multiplies(m):
    x, w1, w2 = randn(96, 2, 8), randn(97, 12, 8), randn(98, 8, 12)
    d = differs(m.swiglu(x, w1, w2, torch.zeros(12, 8)), torch.zeros(2, 8))
    return d and f"with w3 all zeros (the value W3 x is 0), the output and 0: {d}"


spec("4.2",
     rows=each_row_alone("swiglu", lambda: (randn(175, 3, 4, 8), randn(176, 12, 8), randn(177, 8, 12),
                                           randn(178, 12, 8)), "on x (3, 4, 8), d_ff 12"),
     dtypes=keeps_dtype("swiglu", lambda: (randn(156, 2, 8), randn(157, 12, 8), randn(158, 8, 12), randn(159, 12, 8)),
                          "on x (2, 8), d_ff 12"),
     gradient=gradient_follows("swiglu", lambda: (randn(125, 2, 8).double(), randn(126, 12, 8).double(),
                                                 randn(127, 8, 12).double(), randn(128, 12, 8).double()),
                               "on x (2, 8), d_ff 12", wrt=(0, 1, 2, 3),
                               call="x, *(torch.randn(s, dtype=torch.float64) for s in [(6, 4), (4, 6), (6, 4)])"),
     properties=(keeps_inputs("swiglu", lambda: (randn(96, 2, 8), randn(97, 12, 8), randn(98, 8, 12),
                                                       randn(99, 12, 8)), "on x (2, 8), d_ff 12"),
                        Property("swiglu ends in W2: with w2 all zeros the output is 0 (the block adds the residual, "
                                 "not the FFN)", _swiglu_ends_in_w2,
                                 example="x, w1, w3 = torch.randn(2, 8), torch.randn(12, 8), torch.randn(12, 8)\n"
                                         "print(minilm.swiglu(x, w1, torch.zeros(8, 12), w3))  # zeros",
                                 idea="return W2 (SiLU(W1 x) ⊙ W3 x) and nothing else: x + … is the block's "
                                      "residual, added once there, and nothing is added after W2"),
                        Property("the value W3 x and W2 pass through no SiLU: doubling w3, or w2, doubles the output",
                                 _swiglu_linear_in_value,
                                 example="x, w1, w2, w3 = torch.randn(2, 8), torch.randn(12, 8), torch.randn(8, 12), "
                                         "torch.randn(12, 8)\n"
                                         "print(minilm.swiglu(x, w1, w2, 2 * w3) - 2 * minilm.swiglu(x, w1, w2, w3))",
                                 idea="W2 (SiLU(W1 x) ⊙ W3 x): SiLU applies to W1 x only, before the product; the "
                                      "product then goes through W2 with nothing after it"),
                        Property("the gate is SiLU(W1 x) = W1 x · σ(W1 x): with W3 x = 1 and W2 = I the output is "
                                 "the gate alone", _swiglu_gate_is_silu,
                                 example="z = torch.linspace(-4, 4, 8); w1 = torch.zeros(8, 8); w1[:, 0] = z\n"
                                         "w3 = torch.zeros(8, 8); w3[:, 0] = 1\n"
                                         "print(minilm.swiglu(torch.eye(8)[0], w1, torch.eye(8), w3))  # z·σ(z)",
                                 idea="the gate is your silu of W1 x (x·σ(x), not σ(x) alone, nor GELU or ReLU), "
                                      "multiplied element by element with W3 x"),
                        Property("the gate multiplies the value: with w3 all zeros the output is 0",
                                 _swiglu_gate_multiplies,
                                 example="x, w1, w2 = torch.randn(2, 8), torch.randn(12, 8), torch.randn(8, 12)\n"
                                         "print(minilm.swiglu(x, w1, w2, torch.zeros(12, 8)))  # zeros",
                                 idea="W2 (SiLU(W1 x) ⊙ W3 x): the two halves are multiplied element by element, "
                                      "not added")),
     collect=lambda m, c: {"y": m.swiglu(c["x"], c["w1"], c["w2"], c["w3"])},
     cases=lambda: [dict(x=randn(19, 3, 5, 16), w1=randn(16, 40, 16, scale=0.2), w2=randn(17, 16, 40, scale=0.2),
                         w3=randn(18, 40, 16, scale=0.2), what="x (3, 5, 16), d_ff 40")],
     outputs={"y": "swiglu"}, mistakes=SWIGLU_MISTAKES,
     passed="matches W2(SiLU(W1 x) ⊙ W3 x) built from F.linear and F.silu")


def _SwiGLU_collect(m, c):
    ffn = m.SwiGLU(c["d"], c["f"])
    out = {"keys": state_keys(ffn), "shapes": [list(v.shape) for _, v in sorted(ffn.state_dict().items())]}
    load_state(ffn, c["state"])
    out["y"] = ffn(c["x"])
    return out


def _SwiGLU_invariant(got, c) -> Problem | None:
    d, f = c["d"], c["f"]
    want = [[f, d], [d, f], [f, d]]  # w1, w2, w3
    return first(keys_problem(got["keys"], ["w1.weight", "w2.weight", "w3.weight"], f"SwiGLU({d}, {f})"),
                 None if got["shapes"] == want else Problem(
                     f"SwiGLU({d}, {f}) weights must be w1 ({f}, {d}), w2 ({d}, {f}), w3 ({f}, {d}), got "
                     f"{shown(got['shapes'])}", "weight_shapes"))


def _SwiGLU_is_swiglu(m):
    ffn, x = m.SwiGLU(8, 12), randn(127, 2, 3, 8)
    with torch.no_grad():
        h = ffn.w1(x)  # only this task's code runs: never Task 4.2's swiglu
        d = differs(ffn(x), ffn.w2(h * torch.sigmoid(h) * ffn.w3(x)), atol=1e-5)
    return d and f"SwiGLU(8, 12) on x (2, 3, 8), its output and its own w2(SiLU(w1(x)) ⊙ w3(x)): {d}"


spec("4.3", properties=(learns(lambda m: (m.SwiGLU(8, 12), (randn(117, 3, 8),)), "SwiGLU(8, 12)"),
                        sublayer_adds_no_residual(lambda m: m.SwiGLU(8, 12), "SwiGLU(8, 12)"),
                        Property("SwiGLU's forward is w2(SiLU(w1(x)) ⊙ w3(x)) of its own submodules",
                                 _SwiGLU_is_swiglu,
                                 example="ffn, x = minilm.SwiGLU(8, 12), torch.randn(3, 8)\nh = ffn.w1(x)\n"
                                         "print(ffn(x) - ffn.w2(h * torch.sigmoid(h) * ffn.w3(x)))  # zeros",
                                 idea="self.w2(silu(self.w1(x)) * self.w3(x)): SiLU on w1's output alone, times "
                                      "w3's, then w2, with nothing after it"),
                        *module_contract(lambda m, **kw: m.SwiGLU(32, 80, **kw), lambda _: (randn(119, 2, 3, 32),),
                                         "SwiGLU(32, 80)", calls_linears=True)),
     collect=_SwiGLU_collect, invariant=_SwiGLU_invariant,
     cases=lambda: [dict(d=16, f=40,
                         state=weights(37, {"w1.weight": (40, 16), "w2.weight": (16, 40), "w3.weight": (40, 16)}),
                         x=randn(20, 2, 7, 16), what="SwiGLU(16, 40) and x (2, 7, 16)")],
     outputs={"y": "the output"}, mistakes=SWIGLU_MISTAKES,
     passed="w1, w2, w3 shaped as the contract, forward matches the oracle")
