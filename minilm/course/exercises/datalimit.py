"""Specs of notebook 16: past the data limit (provided). See minilm/course/exercises/__init__.py."""

from __future__ import annotations

import torch

from minilm.course.exercises import (
    Problem,
    Property,
    at_edge,
    differs,
    dtype_shown,
    gen,
    gradient_follows,
    keeps_inputs,
    randn,
    shown,
    spec,
)

# ---------------------------------------------------------------- 16.1: dropout


def _dropout_collect(m, c):
    x = c["x"].clone()
    y = m.dropout(x, c["p"], c["training"], generator=gen(c["seed"]))
    return {"y": y, "x_changed": not torch.equal(x, c["x"]),
            "dtype": str(getattr(y, "dtype", "?")), "shape": list(getattr(y, "shape", []))}


def _dropout_cases():
    return [dict(x=randn(160, 4, 8), p=0.5, training=True, seed=0, what="x (4, 8), p 0.5, training"),
            dict(x=randn(161, 3, 5, dtype=torch.float64), p=0.2, training=True, seed=1,
                 what="float64 x (3, 5), p 0.2, training"),
            dict(x=randn(162, 2, 6), p=0.3, training=False, seed=2, what="x (2, 6), p 0.3, not training"),
            dict(x=randn(163, 5), p=0.0, training=True, seed=3, what="x (5,), p 0, training")]


def _ones(n: int = 200_000) -> torch.Tensor:
    return torch.ones(n)


def _dropout_identity(m):
    x = randn(164, 3, 7)
    for p, training in ((0.5, False), (0.0, True)):
        given = x.clone()
        g = gen(0)
        out = m.dropout(given, p, training, generator=g)
        d = differs(out, x, atol=0, rtol=0)
        if d:
            return f"dropout(x, {p}, training={training}) on x (3, 7) should return x unchanged: {d}"
        if out is not given:  # a copy costs memory and time, and drawing a mask moves the generator on
            drew = " and drew random numbers" if torch.rand(1, generator=g).item() != torch.rand(
                1, generator=gen(0)).item() else ""
            return f"dropout(x, {p}, training={training}) returned a new tensor{drew}, expected x itself"
    return None


def _dropout_mean(m):
    for p in (0.1, 0.5):
        y = m.dropout(_ones(), p, True, generator=gen(1))
        mean = y.double().mean().item()
        if abs(mean - 1) > 0.02:
            return f"on 200,000 ones with p {p}, the output's mean is {mean:.4f}, not about 1"
    return None


def _dropout_zeros(m):
    for p in (0.1, 0.5, 0.8):
        y = m.dropout(_ones(), p, True, generator=gen(2))
        zeros = (y == 0).double().mean().item()
        if abs(zeros - p) > 0.01:
            return f"on 200,000 ones with p {p}, a fraction {zeros:.3f} of the outputs is zero, not about {p}"
    return None


def _dropout_inf_dropped(m):
    x = torch.full((400,), float("-inf"))  # a masked logit: dropped, it is 0, not NaN
    y = m.dropout(x, 0.5, True, generator=gen(9))
    bad = int(torch.isnan(y).sum()) if isinstance(y, torch.Tensor) else -1
    return None if bad == 0 else (f"on 400 entries of −inf with p 0.5, {bad} of the output's entries are NaN: a "
                                  "dropped entry is 0 whatever it held (−inf · 0 is NaN)")


def _dropout_kept(m):
    x = randn(165, 40, 50) + 5  # no zero among the inputs
    y = m.dropout(x.clone(), 0.25, True, generator=gen(3))
    kept = y != 0
    if not kept.any():
        return "on x (40, 50) with p 0.25, every output is zero"
    d = differs(y[kept], x[kept] / 0.75, atol=0, rtol=1e-6)
    return d and f"on x (40, 50) with p 0.25, the entries kept against x / (1 − p): {d}"


def _dropout_dtype_shape(m):
    for dtype in (torch.float64, torch.float16):
        x = randn(166, 2, 3, 4, dtype=dtype)
        y = m.dropout(x, 0.5, True, generator=gen(4))
        if not isinstance(y, torch.Tensor) or y.dtype != dtype or y.shape != x.shape:
            return (f"on {str(dtype).replace('torch.', '')} x (2, 3, 4), got dtype "
                    f"{str(getattr(y, 'dtype', '?')).replace('torch.', '')} and shape "
                    f"{shown(list(getattr(y, 'shape', [])))}")
    return None


def _dropout_generator(m):
    x = randn(167, 6, 9)
    a, b = m.dropout(x, 0.5, True, generator=gen(5)), m.dropout(x, 0.5, True, generator=gen(5))
    d = differs(a, b, atol=0, rtol=0)
    if d:
        return f"two calls on x (6, 9), p 0.5, each with a generator seeded 5: {d}"
    if torch.equal(a, m.dropout(x, 0.5, True, generator=gen(6))):
        return "on x (6, 9), p 0.5, generators seeded 5 and 6 gave the same mask: the generator is not used"
    # Without one, torch's global generator draws: each call a new mask, torch.manual_seed repeats them
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(3)
        first, second = m.dropout(x, 0.5, True), m.dropout(x, 0.5, True)
        torch.manual_seed(3)
        again = m.dropout(x, 0.5, True)
    if torch.equal(first, second):
        return ("on x (6, 9), p 0.5 and no generator, two calls in a row dropped the same entries: without a "
                "generator each call draws a new mask from torch's own")
    d = differs(again, first, atol=0, rtol=0)
    return d and f"on x (6, 9), p 0.5 and no generator, the first call after torch.manual_seed(3), twice: {d}"


def _dropout_contract_mask(m):
    for dtype in (torch.float32, torch.float64):
        x = randn(169, 3, 4, 5, dtype=dtype) + 5  # no zero among the inputs
        y = m.dropout(x, 0.3, True, generator=gen(7))
        want = torch.rand(x.shape, generator=gen(7)) >= 0.3  # the contract's own line
        kept = y != 0 if type(y) is torch.Tensor and y.shape == x.shape else None
        if kept is None or not torch.equal(kept, want):
            n = int((kept != want).sum()) if kept is not None else "…"
            return (f"on a {str(dtype)[6:]} x (3, 4, 5), p 0.3 and a generator seeded 7, the entries kept differ from "
                    f"torch.rand(x.shape, generator=generator) >= p at {n} of 60 places")
    return None


def _dropout_invariant(got, c):
    want_shape, want_dtype = list(c["x"].shape), str(c["x"].dtype)
    if got["shape"] != want_shape or got["dtype"] != want_dtype:
        return Problem(f"dropout must return x's shape {want_shape} and dtype {want_dtype.replace('torch.', '')}, "
                       f"got {shown(got['shape'])} and {dtype_shown(got['dtype'])}", "wrong_shape")
    return None


def _dropout_independent(m):
    y = m.dropout(torch.ones(64, 64), 0.5, True, generator=gen(5))
    if type(y) is not torch.Tensor or y.shape != (64, 64):
        return None  # the shape and type are the comparison's to judge
    kept = y != 0
    if not 0.3 < kept.float().mean().item() < 0.7:
        return None  # dropping about p of the entries is another property's to judge
    if bool((kept == kept[0]).all()):
        return "on x = ones(64, 64), p 0.5: every row kept the same entries (one mask shared by the rows)"
    if bool((kept == kept[:, :1]).all()):
        return "on x = ones(64, 64), p 0.5: each row was kept or dropped whole (one draw per row)"
    return None


spec("16.1", collect=_dropout_collect, cases=_dropout_cases, invariant=_dropout_invariant,
     outputs={"y": "the output", "x_changed": "whether x changed", "dtype": "the dtype", "shape": "the shape"},
     atol=1e-6, rtol=1e-5,
     properties=(
         Property("each entry is kept or dropped on its own: no mask shared by rows, no row dropped whole",
                  _dropout_independent,
                  example="print((minilm.dropout(torch.ones(4, 6), 0.5, True) != 0).int())  # no pattern",
                  idea="draw one uniform number per entry of x, a mask of x's full shape, not of one row or one "
                       "column"),
         Property("not training, or with p = 0, dropout returns x itself", _dropout_identity,
                  example="x = torch.randn(3, 7)\nprint(torch.equal(minilm.dropout(x, 0.5, False), x))  # True",
                  idea="at evaluation the model must see every activation as it is: return x itself when not "
                       "training or when p is 0, before drawing any mask"),
         Property("each entry keeps its expected value: on many ones the output's mean is about 1", _dropout_mean,
                  example="print(minilm.dropout(torch.ones(200_000), 0.5, True).mean())  # ≈ 1",
                  idea="a fraction 1 − p survives, so the survivors must be scaled up by 1 / (1 − p)"),
         Property("a fraction p of the entries is zeroed", _dropout_zeros,
                  example="y = minilm.dropout(torch.ones(200_000), 0.1, True)\n"
                          "print((y == 0).float().mean())  # ≈ 0.1",
                  idea="p is the probability of dropping an entry, not of keeping it: keep where the uniform number "
                       "is at least p"),
         Property("a dropped entry is exactly 0, even where x is −inf or inf", _dropout_inf_dropped,
                  example="print(minilm.dropout(torch.full((8,), float('-inf')), 0.5, True))  # −inf or 0, no NaN",
                  idea="choose between x / (1 − p) and 0 (torch.where(keep, x / (1 − p), 0)) rather than multiplying "
                       "x by the mask: inf · 0 is NaN"),
         Property("every entry kept is exactly x / (1 − p)", _dropout_kept,
                  example="x = torch.randn(4) + 5\nprint(minilm.dropout(x, 0.25, True), x / 0.75)",
                  idea="divide the kept entries by 1 − p (inverted dropout); multiplying by 1 − p is the "
                       "evaluation-time scaling of the original, non-inverted dropout"),
         Property("the mask is the contract's keep = torch.rand(x.shape, generator=generator) >= p, whatever x's "
                  "dtype", _dropout_contract_mask,
                  example="x, g = torch.randn(3, 4) + 5, lambda: torch.Generator().manual_seed(7)\n"
                          "print((minilm.dropout(x, 0.3, True, g()) != 0) == (torch.rand(x.shape, generator=g()) "
                          ">= 0.3))",
                  idea="draw exactly torch.rand(x.shape, generator=generator, device=x.device) >= p: the default "
                       "float32 draw in x's own shape (a float64 draw, another shape or torch.bernoulli gives other "
                       "numbers from the same generator)"),
         keeps_inputs("dropout", lambda: (randn(168, 4, 6), 0.5, True), "on x (4, 6), p 0.5, training"),
         Property("the output has x's dtype and shape", _dropout_dtype_shape,
                  example="print(minilm.dropout(torch.randn(2, 3, dtype=torch.float16), 0.5, True).dtype)",
                  idea="draw the mask with x's shape, and build the output from x so that it keeps x's dtype"),
         Property("the same generator gives the same mask; without one, each call draws a new mask from torch's "
                  "generator, which torch.manual_seed repeats", _dropout_generator,
                  example="g = lambda: torch.Generator().manual_seed(0)\n"
                          "x = torch.randn(5)\n"
                          "print(minilm.dropout(x, 0.5, True, g()), minilm.dropout(x, 0.5, True, g()))",
                  idea="pass generator=generator to torch.rand, as the contract's mask line does, and pass None on "
                       "as it is: torch.rand then draws from torch's own generator (no generator of your own)"),
     ),
     mistakes={
         "dropout_no_rescale": "scale the entries kept by 1 / (1 − p): without it the output's mean shrinks by "
                               "1 − p during training, and the model sees other sizes at evaluation",
         "dropout_scaled_by_keep": "divide the kept entries by (1 − p), do not multiply by it: inverted dropout "
                                   "scales up during training so that evaluation needs no scaling",
         "dropout_p_is_keep": "p is the probability of dropping an entry: keep where torch.rand(…) >= p, so that "
                              "a fraction 1 − p survives",
         "dropout_in_eval": "not training, return x unchanged: dropout is for training only",
     },
     passed="zeroes a fraction p, scales the rest by 1 / (1 − p), identity at evaluation, x untouched")

# ---------------------------------------------------------------- 16.2: distillation loss


def _distill_collect(m, c):
    s = c["student"].clone().requires_grad_()
    t = c["teacher"].clone().requires_grad_()
    loss = m.distillation_loss(s, t, c["targets"], c["temperature"], c["alpha"])
    loss.backward()
    return {"loss": loss.detach(), "student_grad": s.grad,
            "teacher_gets_gradient": bool(t.grad is not None and t.grad.abs().sum().item() > 0)}


def _distill_cases():
    return [dict(student=randn(170, 4, 10), teacher=randn(171, 4, 10, scale=2),
                 targets=torch.randint(0, 10, (4,), generator=gen(172)), temperature=2.0, alpha=0.5,
                 what="logits (4, 10), T 2, α 0.5"),
            dict(student=randn(173, 2, 3, 7), teacher=randn(174, 2, 3, 7),
                 targets=torch.randint(0, 7, (2, 3), generator=gen(175)), temperature=1.0, alpha=1.0,
                 what="logits (2, 3, 7), T 1, α 1 (the soft part alone)"),
            dict(student=randn(176, 5, 6, dtype=torch.float64), teacher=randn(177, 5, 6, dtype=torch.float64),
                 targets=torch.randint(0, 6, (5,), generator=gen(178)), temperature=4.0, alpha=0.3,
                 what="float64 logits (5, 6), T 4, α 0.3"),
            dict(student=randn(179, 3, 8, scale=1e3), teacher=randn(180, 3, 8, scale=1e3),
                 targets=torch.randint(0, 8, (3,), generator=gen(181)), temperature=0.5, alpha=0.7,
                 what="logits of size ~1,000 (3, 8), T 0.5, α 0.7")]


def _pair(seed: int, *shape: int, scale: float = 1.0):
    s, t = randn(seed, *shape, scale=scale), randn(seed + 1, *shape, scale=scale)
    y = torch.randint(0, shape[-1], shape[:-1], generator=gen(seed + 2))
    return s, t, y


def _distill_same(m):
    s, _, y = _pair(182, 6, 9, scale=2)
    loss = float(m.distillation_loss(s, s.clone(), y, 3.0, 1.0))
    return None if abs(loss) < 1e-5 else f"with α 1 and the student's logits equal to the teacher's (6, 9), T 3, " \
                                          f"the loss is {loss:.6g}, not 0"


def _distill_shift(m):
    s, t, y = _pair(189, 4, 9, scale=3)
    base = m.distillation_loss(s, t, y, 2.0, 0.5)
    for shift in (1000.0, -1000.0):
        shifted = m.distillation_loss(s + shift, t + shift, y, 2.0, 0.5)
        d = at_edge(f"on logits (4, 9) with {shift:+g} added to every student and teacher logit, T 2, α 0.5, the loss "
                    "and the unshifted one", lambda: shifted, base, atol=1e-3)
        if d:
            return d
    return None


def _distill_known_kl(m):
    import math

    teacher = torch.tensor([0.5, 0.25, 0.25]).log().expand(4, 3).clone()
    loss = float(m.distillation_loss(torch.zeros(4, 3), teacher, torch.zeros(4, dtype=torch.long), 1.0, 1.0))
    want = math.log(3) - 1.5 * math.log(2)  # Σ p log(p / (1/3)) for p = ½, ¼, ¼
    return None if abs(loss - want) < 1e-5 else (
        f"with α 1, T 1, teacher probabilities [0.5, 0.25, 0.25] and a uniform student over 3 tokens (4 rows), the "
        f"loss is {loss:.6g}, expected KL = Σ p log(p / (1/3)) = log 3 − 1.5 log 2 = {want:.6g}")


def _distill_alpha0(m):
    s, t, y = _pair(183, 2, 4, 11)
    got = m.distillation_loss(s, t, y, 2.0, 0.0)
    d = differs(got, m.cross_entropy(s, y), atol=1e-6)
    if d and not differs(got, m.cross_entropy(s / 2.0, y), atol=1e-6):
        d += "; yours is the cross-entropy of the student's logits divided by T: the hard part takes them as they are"
    return d and f"with α 0, on logits (2, 4, 11), distillation_loss and your cross_entropy: {d}"


def _distill_teacher_grad(m):
    s, t, y = _pair(184, 5, 7)
    s.requires_grad_(), t.requires_grad_()
    m.distillation_loss(s, t, y, 2.0, 0.5).backward()
    if t.grad is not None and t.grad.abs().sum() > 0:
        return "on logits (5, 7), T 2, α 0.5, the backward pass reached teacher_logits"
    if s.grad is None or not s.grad.abs().sum() > 0:
        return "on logits (5, 7), T 2, α 0.5, the backward pass did not reach student_logits"
    return None


def _soft_grad(m, T: float) -> float:
    s, t, y = _pair(185, 64, 16, scale=0.5)
    s.requires_grad_()
    m.distillation_loss(s, t, y, T, 1.0).backward()
    return s.grad.norm().item()


def _distill_t_squared(m):
    g4, g8 = _soft_grad(m, 4.0), _soft_grad(m, 8.0)
    ratio = g4 / g8 if g8 else float("inf")
    return None if 0.7 < ratio < 1.4 else (
        f"with α 1 on logits (64, 16), the gradient on the student's logits is {g4:.3g} at T 4 and {g8:.3g} at T 8 "
        f"(ratio {ratio:.3g}, about 1 with the T² factor)")


def _distill_mean(m):
    s, t, y = _pair(186, 3, 5, 6)
    one = m.distillation_loss(s, t, y, 2.0, 0.5)
    d = differs(m.distillation_loss(torch.cat([s, s]), torch.cat([t, t]), torch.cat([y, y]), 2.0, 0.5), one,
                atol=1e-6)
    if d:
        return f"on logits (3, 5, 6) and the same batch twice (6, 5, 6), T 2, α 0.5: {d}"
    flat = m.distillation_loss(s.reshape(15, 6), t.reshape(15, 6), y.reshape(15), 2.0, 0.5)
    d = differs(flat, one, atol=1e-6)
    if d:
        return f"on logits (3, 5, 6) and the same flattened to (15, 6): {d}"
    return None if one.shape == () else f"the loss has shape {tuple(one.shape)}, not a 0-dim tensor"


spec("16.2",
     gradient=gradient_follows("distillation_loss", lambda: (randn(140, 4, 9).double(), randn(141, 4, 9).double(),
                                torch.tensor([0, 3, 8, 2]), 2.0, 0.5), "on logits (4, 9), T 2, α 0.5",
                                call="x, torch.randn(3, 4, dtype=torch.float64), torch.tensor([0, 1, 2]), 2.0, 0.5"),
     collect=_distill_collect, cases=_distill_cases, atol=1e-5, rtol=1e-4,
     outputs={"loss": "the loss", "student_grad": "the gradient on student_logits",
              "teacher_gets_gradient": "whether teacher_logits get a gradient"},
     properties=(
         Property("adding one number to every logit changes nothing, even ±1000: both softmaxes take the max out "
                  "first", _distill_shift,
                  example="s, t, y = torch.randn(4, 9), torch.randn(4, 9), torch.randint(0, 9, (4,))\n"
                          "print(minilm.distillation_loss(s + 1000, t + 1000, y, 2.0, 0.5), "
                          "minilm.distillation_loss(s, t, y, 2.0, 0.5))",
                  idea="log-softmax as z − max(z) − log Σ exp(z − max(z)), each row's max over the vocabulary, for "
                       "the student's and the teacher's logits / T alike: exp of a logit above ~88 is inf"),
         Property("with α 1 and the student equal to the teacher, the loss is 0", _distill_same,
                  example="s = torch.randn(6, 9); y = torch.zeros(6, dtype=torch.long)\n"
                          "print(minilm.distillation_loss(s, s.clone(), y, 3.0, 1.0))  # 0",
                  idea="KL(p ‖ q) = Σ p (log p − log q) is zero when q = p: both sides softened by the same T"),
         Property("with α 1 and T 1 the loss is KL(p ‖ q) = Σ_v p_v (log p_v − log q_v), summed over the "
                  "vocabulary: [0.5, 0.25, 0.25] against uniform gives log 3 − 1.5 log 2 = 0.0589", _distill_known_kl,
                  example="t = torch.tensor([[0.5, 0.25, 0.25]]).log()\n"
                          "print(minilm.distillation_loss(torch.zeros(1, 3), t, torch.zeros(1, dtype=torch.long), "
                          "1.0, 1.0))  # 0.0589",
                  idea="weigh log p − log q by the teacher's probabilities p and sum over the vocabulary (dim=-1), "
                       "then take the mean over positions only"),
         Property("with α 0 it is your cross_entropy", _distill_alpha0,
                  example="print(minilm.distillation_loss(s, t, y, 2.0, 0.0), minilm.cross_entropy(s, y))",
                  idea="(1 − α) weighs the hard part, the plain cross-entropy of the student's logits (not divided "
                       "by T) against the targets"),
         Property("no gradient reaches teacher_logits", _distill_teacher_grad,
                  example="t = torch.randn(5, 7, requires_grad=True)\n"
                          "minilm.distillation_loss(torch.randn(5, 7, requires_grad=True), t, torch.zeros(5, "
                          "dtype=torch.long), 2.0, 0.5).backward()\nprint(t.grad)  # None",
                  idea="the teacher is fixed: detach its logits before using them"),
         Property("the T² factor keeps the soft part's gradient about the same size at T 4 and T 8",
                  _distill_t_squared,
                  example="for T in (4.0, 8.0):\n    s = torch.randn(64, 16, requires_grad=True)\n"
                          "    minilm.distillation_loss(s, torch.randn(64, 16), torch.zeros(64, dtype=torch.long), T, "
                          "1.0).backward()\n    print(T, s.grad.norm())",
                  idea="softening by T shrinks the gradient by about 1/T²: multiply the KL by T²"),
         Property("it is a mean over positions: the same batch twice, or flattened, gives the same 0-dim loss",
                  _distill_mean,
                  example="print(minilm.distillation_loss(s, t, y, 2.0, 0.5), "
                          "minilm.distillation_loss(torch.cat([s, s]), torch.cat([t, t]), torch.cat([y, y]), "
                          "2.0, 0.5))",
                  idea="sum over the vocabulary inside each KL, then one mean over every leading position"),
     ),
     mistakes={
         "distill_kl_reversed": "the KL runs from the teacher to the student: Σ p_teacher (log p_teacher − "
                                "log q_student), not Σ q_student (log q_student − log p_teacher)",
         "distill_no_t_squared": "multiply the KL by T²: softening by T shrinks its gradient by about 1/T²",
         "distill_teacher_unscaled": "divide the teacher's logits by T too: the soft targets are softmax(teacher / T)",
         "distill_sum_not_mean": "take the mean over positions, not the sum: the loss must not grow with the batch",
     },
     passed="α · T² · KL(teacher ‖ student) + (1 − α) · cross-entropy, mean over positions, teacher fixed")
