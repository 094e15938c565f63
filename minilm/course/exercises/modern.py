"""Specs of notebook 14: the modern recipe (provided). See minilm/course/exercises/__init__.py."""

from __future__ import annotations

import torch
from torch import nn

from minilm.course.exercises import (
    Problem,
    Property,
    at_edge,
    count,
    differs,
    dtype_shown,
    each_row_alone,
    first,
    gradient_follows,
    keeps_dtype,
    keeps_inputs,
    keys_problem,
    learns,
    load_matching,
    module_contract,
    off_points,
    optimizer_edges,
    randn,
    rises_then_falls,
    shown,
    spec,
    state_keys,
    sublayer_adds_no_residual,
    weights,
)

# ---------------------------------------------------------------- 14.1: Newton–Schulz


def _ns_collect(m, c):
    G = c["G"]
    X = m.newton_schulz(G, c["steps"]) if "steps" in c else m.newton_schulz(G)
    return {"X": X, "shape": list(X.shape) if type(X) is torch.Tensor else "?", "dtype": str(getattr(X, "dtype", "?"))}


def _ns_invariant(got, c) -> Problem | None:
    G = c["G"]
    if got["shape"] != list(G.shape) or got["dtype"] != str(G.dtype):
        mistake = "wrong_shape" if got["shape"] != list(G.shape) else "wrong_dtype"
        return Problem(f"newton_schulz must return a tensor of G's shape {list(G.shape)} and dtype "
                       f"{str(G.dtype).replace('torch.', '')}, got shape {shown(got['shape'])} and dtype "
                       f"{dtype_shown(got['dtype'])}", mistake)
    return None


def _ns_cases():
    small = randn(140, 4, 7)
    return [dict(G=small * (0.5 / small.norm()), what="G (4, 7) with Frobenius norm 0.5"),
            dict(G=randn(141, 5, 9), steps=2, what="G (5, 9), steps=2"),
            dict(G=randn(142, 9, 4, scale=3.0), what="a tall G (9, 4)"),
            dict(G=randn(144, 3, 5, dtype=torch.float64), steps=0, what="float64 G (3, 5), steps=0")]


def _ns_transpose(m):
    g = randn(89, 4, 9)
    d = differs(m.newton_schulz(g.T), m.newton_schulz(g).T, atol=1e-4)
    return d and f"for G (4, 9), newton_schulz(Gᵀ) and newton_schulz(G)ᵀ: {d}"


def _ns_orthogonal(m):
    s = torch.linalg.svdvals(m.newton_schulz(randn(90, 6, 10)).double())
    return None if 0.5 < s.min() and s.max() < 1.3 else (
        f"for G (6, 10) the result's singular values run from {s.min().item():.3g} to {s.max().item():.3g}, expected "
        "all near 1 (0.7 … 1.2 for the quintic)")


def _reflection(n: int, seed: int) -> torch.Tensor:
    """A Householder reflection I − 2 v vᵀ / ‖v‖²: an orthogonal (n, n) matrix, built by hand."""
    v = randn(seed, n, 1)
    return torch.eye(n) - 2 * (v @ v.T) / (v.T @ v)


def _ns_rotation(m):
    G, Q, R = randn(91, 5, 8), _reflection(5, 92), _reflection(8, 93)
    d = differs(m.newton_schulz(Q @ G @ R), Q @ m.newton_schulz(G) @ R, atol=1e-4)
    return d and (f"for G (5, 8) and orthogonal Q (5, 5) and R (8, 8), newton_schulz(Q G R) and "
                  f"Q newton_schulz(G) R: {d}")


def _ns_zero(m):
    return at_edge("on an all-zero G (4, 6), the result and zeros", lambda: m.newton_schulz(torch.zeros(4, 6)),
                   torch.zeros(4, 6))


def _ns_diagonal(m):
    G = torch.tensor([[0.6, 0.0, 0.0], [0.0, 0.8, 0.0]])  # singular values 0.6 and 0.8, Frobenius norm 1
    s = torch.tensor([0.6, 0.8], dtype=torch.float64)
    for steps in range(3):
        got = m.newton_schulz(G, steps)
        want = torch.zeros(2, 3, dtype=torch.float64)
        want[0, 0], want[1, 1] = s
        d = differs(got.double(), want, atol=1e-4)
        if d:
            shown_s = [round(float(v), 4) for v in s]
            return (f"on G = [[0.6, 0, 0], [0, 0.8, 0]] (‖G‖_F = 1) with steps={steps}, the result and the diagonal "
                    f"{shown_s}, each singular value mapped {steps} time(s) by a·s + b·s³ + c·s⁵: {d}")
        a, b, c = 3.4445, -4.7750, 2.0315
        s = a * s + b * s**3 + c * s**5
    return None


NS_PROPERTIES = (
    Property("each of the `steps` iterations maps every singular value s to a·s + b·s³ + c·s⁵, starting from G / "
             "‖G‖_F", _ns_diagonal,
             example="G = torch.tensor([[0.6, 0.0, 0.0], [0.0, 0.8, 0.0]])\n"
                     "print(minilm.newton_schulz(G, steps=0), minilm.newton_schulz(G, steps=1))\n"
                     "# steps=1: 3.4445·0.6 − 4.775·0.6³ + 2.0315·0.6⁵ = 1.1944 on the diagonal",
             idea="X ← G / (‖G‖_F + eps), then exactly `steps` times A = X Xᵀ, X ← a·X + (b·A + c·A·A)·X with "
                  "(a, b, c) = NS_COEFFICIENTS in that order"),
    keeps_inputs("newton_schulz", lambda: (randn(110, 4, 6),), "on G (4, 6)"),
    Property("newton_schulz(Gᵀ) is newton_schulz(G)ᵀ (a tall G is orthogonalized in its wide orientation)",
             _ns_transpose,
             example="G = torch.randn(4, 9)\nprint(minilm.newton_schulz(G.T) - minilm.newton_schulz(G).T)",
             idea="transpose a tall G (rows > cols) before the iteration and the result back after it"),
    Property("an all-zero G gives an all-zero result: G / (‖G‖_F + eps) is 0, and the iteration keeps it 0", _ns_zero,
             example="print(minilm.newton_schulz(torch.zeros(4, 6)))  # zeros, not NaN",
             idea="divide by the Frobenius norm plus eps, G / (G.norm() + eps): without eps a zero gradient is 0 / 0"),
    Property("it changes the singular values alone: for orthogonal Q and R, newton_schulz(Q G R) is Q newton_schulz(G) "
             "R", _ns_rotation,
             example="G = torch.randn(5, 8)\nQ = torch.linalg.qr(torch.randn(5, 5)).Q\n"
                     "print(minilm.newton_schulz(Q @ G) - Q @ minilm.newton_schulz(G))  # zeros",
             idea="build every step from matrix products, A = X @ X.T and A @ A: an element-wise product (A * A) or "
                  "a power of entries mixes the singular vectors"),
    Property("the result's singular values are all near 1", _ns_orthogonal,
             example="print(torch.linalg.svdvals(minilm.newton_schulz(torch.randn(6, 10))))",
             idea="normalize by the Frobenius norm first, then X ← aX + (bA + cA²)X with A = X Xᵀ, `steps` times"),
)

spec("14.1", properties=NS_PROPERTIES,
     # the iteration runs in float32 whatever G's dtype: only the result is rounded to it
     dtypes=keeps_dtype("newton_schulz", lambda: (randn(94, 5, 8),), "on G (5, 8)", half_atol=1e-2,
                        idea="run the whole iteration in float32 (G.float()) whatever G's dtype, and round only the "
                             "result to G's dtype: every matmul in bfloat16 keeps 8 bits"),
     collect=_ns_collect, cases=_ns_cases, invariant=_ns_invariant, free=("shape", "dtype"), atol=1e-4,
     outputs={"X": "the result"},
     mistakes={
         "ns_cubic": "that is the cubic Newton–Schulz step X ← 1.5·X − 0.5·X Xᵀ X; use the quintic, "
                     "X ← a·X + (b·A + c·A·A)·X with A = X Xᵀ and (a, b, c) = NS_COEFFICIENTS",
         "ns_not_normalized": "divide G by its Frobenius norm (+ eps) first: the iteration only maps singular "
                              "values in [0, 1] towards 1",
         "ns_ignores_steps": "run the iteration `steps` times (steps=0: only the normalization)",
     },
     passed="matches the quintic iteration on wide, tall and square matrices (SVD check in the tests)")

# ---------------------------------------------------------------- 14.2: Muon


def _muon_collect(m, c):
    params = [nn.Parameter(p.clone()) for p in c["init"]]
    opt = m.Muon(params, **c["hparams"])
    for step_grads in c["grads"]:
        for p, g in zip(params, step_grads):
            p.grad = g.clone()
        opt.step()
    out = {"params": [p.detach().clone() for p in params]}
    p = nn.Parameter(torch.ones(3, 2))  # a schedule changes group["lr"]: read it at every step
    opt = m.Muon([p], lr=0.1)
    opt.param_groups[0]["lr"] = 0.0
    p.grad = torch.ones(3, 2)
    opt.step()
    out["lr_zero_step"] = p.detach().clone()
    return out


def _muon_cases():
    shapes = ((3, 7), (7, 3), (4, 4))  # wide first: a missing and an inverted scale differ at [0] or [1]
    init = [randn(150 + i, *s, scale=0.3) for i, s in enumerate(shapes)]
    grads = [[randn(160 + 10 * t + i, *s) for i, s in enumerate(shapes)] for t in range(3)]
    return [dict(init=init, grads=grads, hparams=dict(lr=0.05, momentum=0.9, weight_decay=0.1),
                 what="3 steps of a wide, a tall and a square matrix (lr 0.05, momentum 0.9, weight_decay 0.1)"),
            dict(init=init, grads=grads[:2], hparams=dict(lr=0.02, momentum=0.95, nesterov=False, ns_steps=3),
                 what="2 steps without Nesterov, ns_steps=3")]


def _muon_moves(m, shape, grads, **hparams) -> list[torch.Tensor]:
    """How far each of len(grads) steps moves one (rows × cols) matrix: p before minus p after, with ns_steps 0,
    where O = U / (‖U‖ + eps): its direction is U's, its size 1."""
    p = nn.Parameter(randn(170, *shape, scale=0.3))
    opt = m.Muon([p], **{"ns_steps": 0, "weight_decay": 0.0} | hparams)
    moves = []
    for g in grads:
        before = p.detach().clone()
        p.grad = g.clone()
        opt.step()
        moves.append(before - p.detach())
    return moves


def _muon_step_size(m):
    for shape, scale in (((8, 2), 2.0), ((3, 2), 1.5 ** 0.5), ((2, 8), 1.0)):
        (move,) = _muon_moves(m, shape, [randn(171, *shape)], lr=0.01)
        size = move.norm().item()
        if abs(size - 0.01 * scale) > 1e-4 * scale:
            rows, cols = shape
            return (f"with ns_steps 0 (so ‖O‖ = 1), lr 0.01, one step moved a {rows} × {cols} matrix by {size:.5g} "
                    f"(Frobenius norm), expected lr · sqrt(max(1, {rows}/{cols})) = {0.01 * scale:.5g}")
    return None


def _muon_momentum(m):
    g1, g2 = randn(172, 4, 4), randn(173, 4, 4)
    for nesterov, mu in ((True, 0.9), (False, 0.9)):
        moves = _muon_moves(m, (4, 4), [g1, g2], lr=0.01, momentum=mu, nesterov=nesterov)
        # B₁ = (1 − μ)g₁, B₂ = μB₁ + (1 − μ)g₂; U₂ = (1 − μ)g₂ + μB₂ with Nesterov, else B₂
        want = (1 + mu) * g2 + mu * mu * g1 if nesterov else mu * g1 + g2
        got = moves[1] / moves[1].norm()
        d = differs(got, want / want.norm(), atol=1e-4)
        if d:
            rule = "(1 + μ)·g₂ + μ²·g₁ (Nesterov)" if nesterov else "μ·g₁ + g₂ (the buffer B, nesterov=False)"
            return f"with ns_steps 0 and μ {mu}, the second step's direction and {rule}: {d}"
    return None


def _muon_decay_then_step(m):
    g = randn(174, 3, 5)
    (move,) = _muon_moves(m, (3, 5), [g], lr=0.1, weight_decay=0.5)
    p0 = randn(170, 3, 5, scale=0.3)
    d = differs(move, 0.05 * p0 + 0.1 * g / g.norm(), atol=1e-5)
    return d and ("one step of a 3 × 5 matrix with ns_steps 0 (O = g / ‖g‖ on the first step), lr 0.1 and weight_decay "
                  f"0.5, the move and lr · weight_decay · p + lr · O: {d}")


def _muon_decay(m):
    (move,) = _muon_moves(m, (3, 5), [torch.zeros(3, 5)], lr=0.1, weight_decay=0.5)
    p0 = randn(170, 3, 5, scale=0.3)
    d = differs(move, p0 * 0.05, atol=1e-6)
    return d and f"with a zero gradient, lr 0.1 and weight_decay 0.5, the step and lr · weight_decay · p: {d}"


MUON_PROPERTIES = (
    Property("one step moves p by lr · sqrt(max(1, rows / cols)) times an O of norm 1", _muon_step_size,
             example="p = torch.nn.Parameter(torch.randn(8, 2)); before = p.detach().clone()\n"
                     "opt = minilm.Muon([p], lr=0.01, ns_steps=0); p.grad = torch.randn(8, 2); opt.step()\n"
                     "print((before - p.detach()).norm())  # 0.02: ns_steps=0 gives O = U / ‖U‖",
             idea="p ← p − lr · sqrt(max(1, rows / cols)) · O with rows, cols = p.shape: a tall matrix steps further"),
    Property("the buffer moves once per step, B ← μ·B + (1 − μ)·g, and Nesterov looks ahead with (1 − μ)·g + μ·B",
             _muon_momentum,
             example="# with ns_steps=0 each step moves p along U / ‖U‖: after g1, g2 (μ 0.9, Nesterov)\n"
                     "# the second move points along 1.9·g2 + 0.81·g1",
             idea="update the buffer in place once (B.mul_(μ).add_(g, alpha=1 − μ)), then build the look-ahead U "
                  "as a new tensor from g and B, without writing into B again"),
    Property("with a zero gradient only the decay acts: p ← p − lr · weight_decay · p", _muon_decay,
             example="p = torch.nn.Parameter(torch.ones(3, 5))\n"
                     "opt = minilm.Muon([p], lr=0.1, weight_decay=0.5); p.grad = torch.zeros(3, 5); opt.step()\n"
                     "print(p)  # 0.95 everywhere",
             idea="decay first, p ← p · (1 − lr · weight_decay), decoupled from the gradient, then the orthogonal "
                  "step; newton_schulz of a zero matrix is zero"),
    *optimizer_edges(lambda m, params: m.Muon(params, lr=0.1), "Muon"),
    Property("the decay multiplies the weight before the orthogonal step: one step moves p by lr · weight_decay · p "
             "+ lr · sqrt(max(1, rows / cols)) · O", _muon_decay_then_step,
             example="# with ns_steps=0 the first O is g / ‖g‖: from p, one step with lr 0.1 and weight_decay 0.5\n"
                     "# moves p by 0.05 · p + 0.1 · g / ‖g‖",
             idea="p ← p · (1 − lr · weight_decay) first, then p ← p − lr · scale · O: decaying after the step "
                  "also shrinks the step"),
)

spec("14.2", properties=MUON_PROPERTIES, collect=_muon_collect, cases=_muon_cases, atol=1e-5,
     invariant=lambda got, c: None if type(got["lr_zero_step"]) is torch.Tensor and torch.equal(
         got["lr_zero_step"], torch.ones(3, 2)) else Problem(
         "after setting param_groups[0]['lr'] = 0 a step must not move the parameters: read lr from the param group "
         "at every step"),
     outputs={"params": "the parameters"},
     mistakes={
         "muon_no_nesterov": "with nesterov=True orthogonalize the look-ahead (1 − μ)·g + μ·B, not the buffer B itself",
         "muon_no_scale": "multiply the step by sqrt(max(1, rows / cols)): a tall matrix (rows > cols) takes a larger "
                          "step",
         "muon_scale_inverted": "the scale is sqrt(max(1, rows / cols)), rows = p.shape[0]: yours uses cols / rows",
         "muon_not_orthogonalized": "pass the momentum through newton_schulz: without it Muon is SGD with momentum",
         "muon_decay_without_lr": "decay by lr · weight_decay: p ← p − lr · weight_decay · p, as AdamW does",
     },
     passed="matches Muon's update for 3 steps: momentum, Nesterov, Newton–Schulz and the shape's scale")

# ---------------------------------------------------------------- 14.3: parameter groups


class _Block(nn.Module):
    def __init__(self, m, d: int, f: int):
        super().__init__()
        self.ln1 = nn.Parameter(torch.ones(d))
        self.q_proj = m.Linear(d, d)
        self.w1 = m.Linear(d, f)
        self.w2 = m.Linear(f, d)
        self.bias = nn.Parameter(torch.zeros(f))


class _ToyLM(nn.Module):
    """An LM-shaped model: embeddings (token and position), blocks of Linears, 1-D gains and a bias,
    a final gain and a head (tied or not)."""

    def __init__(self, m, vocab: int, d: int, f: int, layers: int, tied: bool, positions: bool):
        super().__init__()
        self.token_embeddings = m.Embedding(vocab, d)
        if positions:
            self.position_embeddings = m.Embedding(16, d)
        self.layers = nn.ModuleList(_Block(m, d, f) for _ in range(layers))
        self.ln_final = nn.Parameter(torch.ones(d))
        self.lm_head = m.Linear(d, vocab)
        if tied:
            self.lm_head.weight = self.token_embeddings.weight


def toy_groups(cfg: dict, muon: bool) -> dict[str, list[str]]:
    """The expected groups of _ToyLM(cfg), by name (in any order)."""
    emb = ["token_embeddings.weight"] + (["position_embeddings.weight"] if cfg["positions"] else [])
    out = {"muon": [], "decay": [], "no_decay": list(emb)}
    for i in range(cfg["layers"]):
        out["no_decay"] += [f"layers.{i}.ln1", f"layers.{i}.bias"]
        out["muon" if muon else "decay"] += [f"layers.{i}.{n}.weight" for n in ("q_proj", "w1", "w2")]
    out["no_decay"].append("ln_final")
    if not cfg["tied"]:
        out["decay"].append("lm_head.weight")
    return out


def _groups_collect(m, c):
    cfg = c["config"]
    model = _ToyLM(m, cfg["vocab"], cfg["d"], cfg["f"], cfg["layers"], cfg["tied"], cfg["positions"])
    names = {id(p): n for n, p in model.named_parameters()}
    out = {}
    for muon in (True, False):
        groups = m.parameter_groups(model, muon=muon)
        if type(groups) is not dict:
            raise TypeError(f"parameter_groups returned {type(groups).__name__}, expected a dict of three lists")
        suffix = "" if muon else "_adamw"
        code = {}  # each parameter's group, in named_parameters order: 0 muon, 1 decay, 2 no_decay (-1: none)
        for k, key in enumerate(("muon", "decay", "no_decay")):
            out[f"{key}{suffix}"] = [names.get(id(p), "?") for p in groups.get(key, ["?"])]
            for p in groups.get(key, []):
                code[id(p)] = k if id(p) not in code else -1  # listed twice: -1
        out[f"groups{suffix}"] = torch.tensor([code.get(id(p), -1) for _, p in model.named_parameters()])
    return out


def _groups_invariant(got, c) -> Problem | None:
    cfg = c["config"]
    for muon in (True, False):
        suffix = "" if muon else "_adamw"
        want = toy_groups(cfg, muon)
        have = {k: got[f"{k}{suffix}"] for k in want}
        call = f"parameter_groups(model, muon={muon}) on {c['what']}"
        everything = [n for v in want.values() for n in v]
        listed = [n for v in have.values() for n in v]
        if "?" in listed:  # a list missing, or entries that are no parameter: the properties say which
            return None
        if sorted(listed) != sorted(everything):
            return Problem(f"{call}: list every parameter of the model exactly once, in one of the three groups "
                           f"({count(len(everything))} parameters; your groups hold {count(len(listed))})",
                           "groups_not_a_partition")
        emb = [n for n in want["no_decay"] if "embeddings" in n]
        if any(n in have["muon"] for n in emb):
            return Problem(f"{call}: an embedding went to Muon: an embedding's rows are looked up one at a time, "
                           "not multiplied as a matrix; it goes to AdamW without decay", "muon_on_embeddings")
        if "lm_head.weight" in have["muon"]:
            return Problem(f"{call}: the output head went to Muon: Muon is for the blocks' matrices; AdamW trains "
                           "lm_head (with decay)", "muon_on_head")
        if any(n in have["decay"] for n in emb):
            return Problem(f"{call}: an embedding is decayed: no weight decay on embeddings (they go to "
                           "'no_decay')", "decay_on_embeddings")
        if any(n not in emb and n in have["decay"] + have["muon"] for n in want["no_decay"]):
            return Problem(f"{call}: a gain or bias (a 1-D parameter) is decayed or given to Muon: those go to "
                           "'no_decay'", "decay_on_gains")
    return None  # any other difference shows in the groups compared, and a property names the rule it breaks


def _groups_by_type(m):
    model = nn.Module()
    model.wte, model.embed_proj = m.Embedding(11, 6), m.Linear(6, 6)  # names that say the opposite of the types
    model.lm_head, model.gain = m.Linear(6, 11), nn.Parameter(torch.ones(6))
    groups = m.parameter_groups(model)
    names = {id(p): n for n, p in model.named_parameters()}
    got = {k: sorted(names.get(id(p), "?") for p in groups.get(k, [])) for k in ("muon", "decay", "no_decay")}
    want = {"muon": ["embed_proj.weight"], "decay": ["lm_head.weight"], "no_decay": ["gain", "wte.weight"]}
    return None if got == want else (f"on a model with an Embedding named wte and a Linear named embed_proj, the "
                                     f"groups are {got}, expected {want}")


GROUP_KEYS = ("muon", "decay", "no_decay")


def _grouped(m, model: nn.Module, muon: bool = True) -> dict[str, list[str]] | str:
    """parameter_groups(model, muon) by our own names, each list sorted ("?" for an entry that is none of the
    model's parameters); or what is wrong with the returned value's form."""
    groups = m.parameter_groups(model, muon=muon)
    if type(groups) is not dict or any(type(groups.get(k)) is not list for k in GROUP_KEYS):
        kinds = [type(groups.get(k)).__name__ for k in GROUP_KEYS] if type(groups) is dict else []
        return (f"parameter_groups(model, muon={muon}) returned {type(groups).__name__}"
                + (f" whose 'muon', 'decay' and 'no_decay' are {', '.join(kinds)}" if kinds else "")
                + ", expected a dict of the three lists")
    names = {id(p): n for n, p in model.named_parameters()}
    return {k: sorted(names.get(id(p), "?") for p in groups[k]) for k in GROUP_KEYS}


def _tiny_lm(m, tied: bool = False) -> nn.Module:
    model = nn.Module()
    model.token_embeddings = m.Embedding(11, 6)
    model.layers = nn.ModuleList([_Block(m, 6, 10)])
    model.ln_final = nn.Parameter(torch.ones(6))
    model.lm_head = m.Linear(6, 11)
    if tied:
        model.lm_head.weight = model.token_embeddings.weight
    return model


def _groups_three_lists(m):
    for muon in (True, False):
        got = _grouped(m, _tiny_lm(m), muon)
        if type(got) is str:
            return got
    return None


def _groups_each_once(m):
    model = _tiny_lm(m, tied=True)
    model.out_proj = m.Linear(6, 6)
    model.out_proj.weight = model.layers[0].q_proj.weight  # one matrix shared by two Linears
    model.layers[0].w1.weight.requires_grad_(False)  # frozen for now: still the model's, listed once
    want = sorted(n for n, _ in model.named_parameters())
    for muon in (True, False):
        got = _grouped(m, model, muon)
        if type(got) is str:
            return got
        listed = sorted(n for v in got.values() for n in v)
        if listed != want:
            twice = sorted({n for n in listed if listed.count(n) > 1 and n != "?"})
            missing = sorted(set(want) - set(listed))
            parts = [f"{', '.join(twice)} listed more than once"] if twice else []
            parts += [f"{', '.join(missing)} in no list"] if missing else []
            parts += [f"{listed.count('?')} entries that are not the model's parameters"] if "?" in listed else []
            return (f"parameter_groups(model, muon={muon}) on a model with a tied head, a matrix two Linears "
                    f"share and a frozen one ({len(want)} parameters): " + "; ".join(parts))
    return None


def _groups_tied_head(m):
    for muon in (True, False):
        got = _grouped(m, _tiny_lm(m, tied=True), muon)
        if type(got) is str:
            return got
        where = [k for k in GROUP_KEYS if "token_embeddings.weight" in got[k]]
        if where != ["no_decay"]:
            return (f"parameter_groups(model, muon={muon}) with lm_head.weight = token_embeddings.weight: the "
                    f"shared matrix is in {where}, expected ['no_decay'] only")
    return None


def _groups_head_by_identity(m):
    model = nn.Module()
    model.lm_head = m.Linear(6, 11)  # registered first: the head is no position in the list
    model.token_embeddings = m.Embedding(11, 6)
    model.heads = m.Linear(6, 6)  # a name that says head, a matrix for Muon
    model.output = m.Linear(6, 11)  # registered last, a matrix for Muon all the same
    got = _grouped(m, model)
    if type(got) is str:
        return got
    want = {"muon": ["heads.weight", "output.weight"], "decay": ["lm_head.weight"],
            "no_decay": ["token_embeddings.weight"]}
    return None if got == want else (f"on a model registering lm_head first and Linears named heads and output last, "
                                     f"the groups are {got}, expected {want}")


def _groups_not_2d(m):
    model = _tiny_lm(m)
    model.temperature = nn.Parameter(torch.tensor(1.0))  # 0-D
    model.kernel = nn.Parameter(torch.ones(4, 6, 3))  # 3-D
    ndim = {"temperature": "0-D", "kernel": "3-D"}
    for muon in (True, False):
        got = _grouped(m, model, muon)
        if type(got) is str:
            return got
        wrong = [(n, k) for k in ("muon", "decay") for n in got[k]
                 if n in ("temperature", "kernel", "ln_final", "layers.0.ln1", "layers.0.bias")]
        if wrong:
            name, group = wrong[0]
            return (f"parameter_groups(model, muon={muon}): {name} ({ndim.get(name, '1-D')}) is in '{group}', "
                    "expected 'no_decay'")
    return None


def _groups_muon_off(m):
    for tied in (False, True):
        with_muon, without = _grouped(m, _tiny_lm(m, tied), True), _grouped(m, _tiny_lm(m, tied), False)
        for got in (with_muon, without):
            if type(got) is str:
                return got
        before = {n: k for k in GROUP_KEYS for n in with_muon[k]}
        after = {n: k for k in GROUP_KEYS for n in without[k]}
        for name, group in before.items():
            want = "decay" if group == "muon" else group
            if after.get(name) != want:
                return (f"on a model with {'a tied' if tied else 'an untied'} head, {name} is in '{group}' with "
                        f"muon=True and in {repr(after[name]) if name in after else 'no list'} "
                        f"with muon=False, expected '{want}'")
    return None


GROUPS_PROPERTIES = (
    Property("it returns a dict of three lists, 'muon', 'decay' and 'no_decay', each there even when empty "
             "(muon with muon=False)", _groups_three_lists,
             example="model = torch.nn.Module()\nmodel.lm_head = minilm.Linear(6, 11)\n"
                     "print({k: len(v) for k, v in minilm.parameter_groups(model, muon=False).items()})"
                     "  # muon 0, decay 1, no_decay 0",
             idea="start from {'muon': [], 'decay': [], 'no_decay': []} and append each parameter itself (not its "
                  "name) to one of them"),
    Property("every parameter is listed exactly once: a matrix two modules share (a tied head) once, a frozen one "
             "(requires_grad False) too", _groups_each_once,
             example="model = minilm.TransformerLM(97, 32, 32, 2, 4, 48, 10000.0)\n"
                     "model.lm_head.weight = model.token_embeddings.weight\ngroups = minilm.parameter_groups(model)\n"
                     "print(sum(map(len, groups.values())), len(list(model.parameters())))  # equal",
             idea="walk model.named_parameters() (or parameters()), which yields a shared parameter once, and put "
                  "each in exactly one list; walking each module's own parameters meets a shared one twice"),
    Property("a head tied to the embedding is an embedding: the shared matrix goes to no_decay, with muon and "
             "without", _groups_tied_head,
             idea="test for an embedding before testing for lm_head: the tied parameter is both, and an embedding's "
                  "rule wins"),
    Property("model.lm_head.weight goes to decay wherever it is registered, and no other matrix does",
             _groups_head_by_identity,
             example="model = torch.nn.Module()\nmodel.lm_head, model.output = minilm.Linear(6, 11), "
                     "minilm.Linear(6, 11)\nprint({k: len(v) for k, v in minilm.parameter_groups(model).items()})"
                     "  # muon 1, decay 1",
             idea="take head = model.lm_head.weight and compare each parameter with it by identity (p is head): not "
                  "the last parameter listed, nor a name containing 'head'"),
    Property("an Embedding is found by its type, whatever its name: a Linear named embed_proj is a matrix for Muon",
             _groups_by_type,
             example="model = torch.nn.Module()\nmodel.wte, model.embed_proj = minilm.Embedding(11, 6), "
                     "minilm.Linear(6, 6)\nmodel.lm_head = minilm.Linear(6, 11)\n"
                     "print({k: len(v) for k, v in minilm.parameter_groups(model).items()})  # 1 each",
             idea="collect the weights of the modules that are instances of your Embedding class (model.modules()), "
                  "and compare parameters by identity (id(p), or p is head), not by their names"),
    Property("every parameter that is not 2-D goes to no_decay: gains and biases, and a 0-D scalar or a 3-D "
             "kernel too", _groups_not_2d,
             example="model = torch.nn.Module()\nmodel.lm_head = minilm.Linear(6, 11)\n"
                     "model.t = torch.nn.Parameter(torch.tensor(1.0))\n"
                     "model.k = torch.nn.Parameter(torch.ones(4, 6, 3))\n"
                     "print(len(minilm.parameter_groups(model)['no_decay']))  # 2",
             idea="Muon and decay take matrices only: test p.ndim != 2 (not p.ndim == 1) for no_decay"),
    Property("muon=False moves the muon list to decay and changes nothing else", _groups_muon_off,
             idea="decide embedding and not-2-D first, lm_head next; any other matrix goes to 'muon' if muon else "
                  "'decay': the flag changes that one branch"),
)

GROUP_CASES = [dict(vocab=11, d=6, f=10, layers=2, tied=False, positions=True),
               dict(vocab=11, d=6, f=10, layers=1, tied=True, positions=False)]

spec("14.3", properties=GROUPS_PROPERTIES, collect=_groups_collect, invariant=_groups_invariant,
     outputs={"groups": "each parameter's group (muon=True)", "groups_adamw": "each parameter's group (muon=False)"},
     free=tuple(f"{k}{s}" for k in ("muon", "decay", "no_decay") for s in ("", "_adamw")),
     cases=lambda: [dict(config=GROUP_CASES[0], what="a 2-layer model with learned positions"),
                    dict(config=GROUP_CASES[1], what="a 1-layer model with a tied head")],
     mistakes={"muon_on_embeddings": "embeddings go to AdamW (without decay), not to Muon",
               "muon_on_head": "lm_head goes to AdamW, not to Muon",
               "decay_on_gains": "1-D parameters (gains, biases) go to 'no_decay'",
               "decay_on_embeddings": "embeddings go to 'no_decay'"},
     passed="the blocks' matrices to Muon, lm_head to AdamW with decay, embeddings and gains without, tied head once")

# ---------------------------------------------------------------- 14.4: WSD


def _wsd_collect(m, c):
    return {"lr": torch.tensor([float(m.lr_wsd_schedule(p, **c["args"])) for p in c["progress"]],
                               dtype=torch.float64)}


def _wsd_at(want: dict, max_lr: float = 2.0, min_lr: float = 0.5, warmup: float = 0.1, decay: float = 0.4):
    """A probe: lr_wsd_schedule at the progress of `want` gives the rates the contract fixes there."""
    return lambda m: off_points(lambda p: m.lr_wsd_schedule(p, max_lr, min_lr, warmup, decay), want,
                                f"max_lr {max_lr:g}, min_lr {min_lr:g}, warmup {warmup:g} and decay {decay:g}",
                                "progress")


def _wsd_shape(m):
    return rises_then_falls(lambda p: m.lr_wsd_schedule(p, 1.0, 0.1, 0.2, 0.3), [i / 50 for i in range(61)], 0.2,
                            "max_lr 1, min_lr 0.1, warmup 0.2 and decay 0.3", "progress")


_WSD = "lr = lambda p: minilm.lr_wsd_schedule(p, 2.0, 0.5, 0.1, 0.4)\n"
WSD_PROPERTIES = (
    Property("the warmup rises linearly from 0 at progress 0: max_lr · progress / warmup",
             _wsd_at({0.0: 0.0, 0.025: 0.5, 0.05: 1.0, 0.075: 1.5}),
             example=_WSD + "print([lr(p) for p in (0, 0.025, 0.05, 0.075)])  # [0.0, 0.5, 1.0, 1.5]",
             idea="for progress < warmup return max_lr · progress / warmup: 0 at the start, min_lr plays no part"),
    Property("the rate is exactly max_lr from progress = warmup until 1 − decay",
             _wsd_at({0.1: 2.0, 0.3: 2.0, 0.599: 2.0}),
             example=_WSD + "print([lr(p) for p in (0.1, 0.3, 0.599)])  # [2.0, 2.0, 2.0]",
             idea="the stable phase is warmup ≤ progress < 1 − decay: the decay is the LAST `decay` of the run, "
                  "not the part right after the warmup"),
    Property("the decay falls linearly from max_lr at progress 1 − decay to min_lr at progress 1",
             _wsd_at({0.6: 2.0, 0.7: 1.625, 0.8: 1.25, 0.9: 0.875, 0.99: 0.5375}),
             example=_WSD + "print([lr(p) for p in (0.6, 0.7, 0.8, 0.9)])  # [2.0, 1.625, 1.25, 0.875]",
             idea="the fraction of the decay done is (progress − (1 − decay)) / decay, 0 → 1; the rate is "
                  "max_lr + (min_lr − max_lr) times it: a straight line, not a cosine"),
    Property("the rate is exactly min_lr at progress 1 and at every progress beyond",
             _wsd_at({1.0: 0.5, 1.2: 0.5, 3.0: 0.5}),
             example=_WSD + "print([lr(p) for p in (1.0, 1.2, 3.0)])  # [0.5, 0.5, 0.5]",
             idea="for progress ≥ 1 return min_lr itself: the decay's line would go on below it"),
    Property("with warmup 0 there is no warmup: the run starts at max_lr",
             _wsd_at({0.0: 2.0, 0.25: 2.0, 0.75: 1.25}, warmup=0.0, decay=0.5),
             example="print(minilm.lr_wsd_schedule(0.0, 2.0, 0.5, 0.0, 0.5))  # 2.0",
             idea="test progress < warmup before dividing by warmup: with warmup 0 no progress is in the warmup"),
    Property("with warmup + decay = 1 there is no stable phase: the warmup ends at max_lr and the decay starts there",
             _wsd_at({0.125: 1.0, 0.25: 2.0, 0.625: 1.25, 1.0: 0.5}, warmup=0.25, decay=0.75),
             example="lr = lambda p: minilm.lr_wsd_schedule(p, 2.0, 0.5, 0.25, 0.75)\n"
                     "print([lr(p) for p in (0.125, 0.25, 0.625, 1.0)])  # [1.0, 2.0, 1.25, 0.5]",
             idea="keep the four cases apart by progress alone (< warmup, < 1 − decay, < 1, the rest); with "
                  "warmup = 1 − decay the stable range is empty"),
    Property("the rate never falls during the warmup and never rises after it", _wsd_shape,
             example="lr = [minilm.lr_wsd_schedule(i / 50, 1.0, 0.1, 0.2, 0.3) for i in range(61)]\n"
                     "print(lr)  # up to 1.0 at progress 0.2, flat, down to 0.1 from 0.7 to 1, then flat",
             idea="four cases by progress: warmup, stable at max_lr, the decay over the last `decay` of the run, "
                  "min_lr from 1 on"),
)

spec("14.4", properties=WSD_PROPERTIES,
     collect=_wsd_collect, atol=1e-9, rtol=1e-9, outputs={"lr": "the learning rates"},
     cases=lambda: [dict(args=dict(max_lr=1.0, min_lr=0.1, warmup=0.1, decay=0.3),
                         progress=[i / 40 for i in range(45)],
                         what="progress 0, 0.025, … 1.1 (max_lr 1, min_lr 0.1, warmup 0.1, decay 0.3)"),
                    dict(args=dict(max_lr=3e-3, min_lr=0.0, warmup=0.0, decay=1.0), progress=[0.0, 0.25, 0.5, 1.0],
                         what="no warmup, decay over the whole run")],
     mistakes={
         "wsd_decay_after_warmup": "the decay is the LAST part of the run, from progress 1 − decay to 1; yours decays "
                                   "right after the warmup",
         "wsd_decay_to_zero": "decay to min_lr, not to 0",
         "wsd_no_warmup": "rise linearly from 0 to max_lr over the first `warmup` of the run",
     },
     passed="warmup, stable and the final linear decay to min_lr, as fractions of the run")

# ---------------------------------------------------------------- 14.5: soft-cap

def _softcap_bounded(m):
    x = torch.tensor([-1e4, -60.0, -1.0, 0.0, 0.5, 30.0, 1e4])
    y = m.softcap(x, 30.0)
    if not isinstance(y, torch.Tensor) or y.shape != x.shape:
        return "softcap(x, 30) on x (7,) did not return a tensor of shape (7,)"
    if not torch.isfinite(y).all():
        return (f"softcap(x, 30) is NaN or inf at x = {', '.join(f'{v:g}' for v in x[~torch.isfinite(y)].tolist())}, "
                "expected values within ±30")
    if not (y.abs() <= 30.0 + 1e-4).all():
        return f"softcap(x, 30) on x from −10,000 to 10,000 reaches {shown(y.abs().max().item())}, beyond ±30"
    d = differs(y[2:5], x[2:5], atol=2e-3)
    return d and f"for |x| ≤ 1 and cap 30, softcap(x) and x: {d}"


def _softcap_bends(m):
    y = m.softcap(torch.tensor([-5.0, 5.0, 10.0, 20.0]), 10.0)
    d = differs(y, torch.tensor([-4.6211716, 4.6211716, 7.6159416, 9.6402758]), atol=1e-4)
    return d and f"softcap([-5, 5, 10, 20], cap 10) and [-4.621, 4.621, 7.616, 9.640]: {d}"


spec("14.5",
     rows=each_row_alone("softcap", lambda: (20 * randn(188, 3, 5), 15.0), "on logits (3, 5), cap 15"),
     dtypes=keeps_dtype("softcap", lambda: (20 * randn(169, 3, 5), 15.0), "on logits (3, 5), cap 15"),
     gradient=gradient_follows("softcap", lambda: (20 * randn(139, 3, 5).double(), 15.0),
                                "on logits (3, 5) of about ±20, cap 15",
                                call="x, 15.0"),
     properties=(
         keeps_inputs("softcap", lambda: (randn(112, 3, 5) * 50, 30.0), "on logits (3, 5) and cap 30"),
         Property("the output stays within ±cap and is about x where |x| ≪ cap", _softcap_bounded,
                  example="print(minilm.softcap(torch.tensor([-1e4, -1.0, 0.5, 1e4]), 30.0))  # ≈ [-30, -1, 0.5, 30]",
                  idea="cap · tanh(x / cap): tanh keeps it within ±1, and dividing by cap first keeps small x as x"),
         Property("between the two it bends smoothly: with cap 10, x = ±5, 10, 20 give ±4.621, 7.616, 9.640 "
                  "(10 · tanh(x / 10))", _softcap_bends,
                  example="print(minilm.softcap(torch.tensor([-5.0, 5.0, 10.0, 20.0]), 10.0))",
                  idea="one formula for every x, cap · tanh(x / cap): no case for |x| beyond cap, and no clamp")),
     collect=lambda m, c: {"y": m.softcap(c["x"], c["cap"])},
     cases=lambda: [dict(x=torch.linspace(-100, 100, 21), cap=30.0, what="logits on [-100, 100], cap 30"),
                    dict(x=randn(145, 2, 5, scale=5), cap=15.0, what="logits (2, 5), cap 15"),
                    dict(x=randn(146, 4, scale=50, dtype=torch.float64), cap=1.0, what="float64 logits, cap 1")],
     outputs={"y": "softcap"}, atol=1e-5,
     mistakes={
         "softcap_unscaled_input": "divide the logits by cap inside the tanh: cap · tanh(logits / cap), so that small "
                                   "logits pass unchanged",
         "softcap_clamp": "that is a hard clamp at ±cap; the soft-cap is smooth: cap · tanh(logits / cap)",
         "softcap_no_outer_cap": "multiply tanh(logits / cap) by cap: the result lies in (−cap, cap), not (−1, 1)",
     },
     passed="cap · tanh(logits / cap): unchanged near 0, never beyond ±cap")

# ---------------------------------------------------------------- 14.6: ReLU² FFN


def _relu2_collect(m, c):
    ffn = m.ReLUSquaredFFN(c["d"], c["f"])
    out = {"keys": state_keys(ffn), "shapes": [list(v.shape) for _, v in sorted(ffn.state_dict().items())],
           "parameters": sum(p.numel() for p in ffn.parameters())}
    load_matching(ffn, c["state"], f"ReLUSquaredFFN({c['d']}, {c['f']})")
    out["y"] = ffn(c["x"])
    return out


def _relu2_invariant(got, c) -> Problem | None:
    d, f = c["d"], c["f"]
    return first(keys_problem(got["keys"], ["w1.weight", "w2.weight"], f"ReLUSquaredFFN({d}, {f})"),
                 None if got["shapes"] == [[f, d], [d, f]] else Problem(
                     f"ReLUSquaredFFN({d}, {f}) weights must be w1 ({f}, {d}) and w2 ({d}, {f}), got "
                     f"{shown(got['shapes'])}", "weight_shapes"))


def _relu2_negative(m):
    ffn = m.ReLUSquaredFFN(8, 24)
    with torch.no_grad():
        ffn.w1.weight.copy_(-randn(120, 24, 8).abs())  # every pre-activation of a positive x is negative
        y = ffn(randn(121, 2, 3, 8).abs() + 0.1)
    d = differs(y, torch.zeros(2, 3, 8))
    return d and f"with every pre-activation W1 x negative, the output and 0: {d}"


def _relu2_is_composition(m):
    ffn, x = m.ReLUSquaredFFN(8, 24), randn(122, 2, 3, 8)
    with torch.no_grad():
        d = differs(ffn(x), ffn.w2(torch.relu(ffn.w1(x)) ** 2), atol=1e-5)
    return d and f"ReLUSquaredFFN(8, 24) on x (2, 3, 8), its output and its own w2(relu(w1(x))²): {d}"


RELU2_PROPERTIES = (
    learns(lambda m: (m.ReLUSquaredFFN(8, 24), (randn(118, 3, 8),)), "ReLUSquaredFFN(8, 24)"),
    Property("a negative pre-activation contributes nothing: ReLU(·)² is 0 below 0", _relu2_negative,
             example="ffn = minilm.ReLUSquaredFFN(8, 24)\nffn.w1.weight.data = -ffn.w1.weight.data.abs()\n"
                     "print(ffn(torch.rand(2, 8) + 0.1))  # zeros",
             idea="clamp the pre-activations at 0 from below (torch.relu, or clamp(min=0)), then square"),
    sublayer_adds_no_residual(lambda m: m.ReLUSquaredFFN(8, 24), "ReLUSquaredFFN(8, 24)"),
    Property("ReLUSquaredFFN's forward is w2(ReLU(w1(x))²) of its own submodules, nothing scaled or added after",
             _relu2_is_composition,
             example="ffn, x = minilm.ReLUSquaredFFN(8, 24), torch.randn(3, 8)\n"
                     "print(ffn(x) - ffn.w2(torch.relu(ffn.w1(x)) ** 2))  # zeros",
             idea="self.w2(torch.relu(self.w1(x)).square()): the square of the ReLU, no ½ or other factor, and "
                  "nothing applied to w2's output"),
    *module_contract(lambda m, **kw: m.ReLUSquaredFFN(32, 80, **kw), lambda _: (randn(149, 2, 3, 32),),
                     "ReLUSquaredFFN(32, 80)"),
)

spec("14.6", properties=RELU2_PROPERTIES, collect=_relu2_collect, invariant=_relu2_invariant,
     cases=lambda: [dict(d=8, f=24, state=weights(147, {"w1.weight": (24, 8), "w2.weight": (8, 24)}),
                         x=randn(148, 2, 3, 8), what="ReLUSquaredFFN(8, 24) and x (2, 3, 8)")],
     outputs={"y": "the output"},
     mistakes={
         "relu2_not_squared": "square the ReLU: w2(ReLU(w1 x)²); yours is a plain ReLU FFN",
         "relu2_square_without_relu": "apply ReLU before squaring: (w1 x)² alone turns negative pre-activations "
                                      "into positive ones",
         "relu2_after_w2": "apply ReLU² between the layers, to w1's output, not after w2",
     },
     passed=f"w1, w2 shaped as the contract, forward matches w2(ReLU(w1 x)²); {2 * 8 * 24} parameters "
            f"(SwiGLU(8, 16): {3 * 8 * 16})")
