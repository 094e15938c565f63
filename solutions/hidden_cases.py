"""The grader's hidden cases for every task (instructors only: never in the student edition).

`HIDDEN[task](g)` draws one task's hidden cases from the generator g (seeded per submission):
the notebook's kinds of input with other values, plus shapes, dtypes and settings the notebook
does not show. The visible cases, and what is collected on every case, are the task's spec
(minilm/course/exercises/); a hidden case has the same fields as the spec's visible ones.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from minilm.course.exercises import attention_shapes, block_shapes, lm_shapes, weights
from minilm.course.exercises import randint as _int
from minilm.course.exercises import randn as _randn

HIDDEN: dict[str, Callable[[torch.Generator], list[dict]]] = {}


def hidden(task: str):
    def deco(fn):
        HIDDEN[task] = fn
        return fn
    return deco


def hidden_cases(task: str, g: torch.Generator) -> list[dict]:
    return HIDDEN[task](g)


# ---------------------------------------------------------------- 1–4: Linear, Embedding, RMSNorm, SwiGLU


@hidden("1.1")
def _linear(g):
    d_in, d_out = _int(g, 1, 17), _int(g, 1, 17)
    return [dict(x=_randn(g, 2, 3, 8), w=_randn(g, 5, 8), what="x (2, 3, 8), W (5, 8)"),
            dict(x=_randn(g, 4, 6), w=_randn(g, 6, 6), what="a square W (6, 6)"),
            dict(x=_randn(g, 2, 1, 3, d_in), w=_randn(g, d_out, d_in),
                 what=f"x (2, 1, 3, {d_in}), W ({d_out}, {d_in})"),
            dict(x=_randn(g, 5, 4, dtype=torch.float64), w=_randn(g, 3, 4, dtype=torch.float64), what="float64 inputs"),
            dict(x=_randn(g, 4, 5).T, w=_randn(g, 2, 4), what="a non-contiguous x (a transpose)"),
            dict(x=_randn(g, 2, 3, 6).transpose(0, 1), w=_randn(g, 4, 6), what="a non-contiguous x (3, 2, 6)")]


@hidden("1.2")
def _Linear(g):
    d_in, d_out = _int(g, 3, 40), _int(g, 3, 40)
    return [dict(seed=_int(g, 0, 10**6), init_in=_int(g, 300, 700), init_out=256, d_in=d_in, d_out=d_out,
                 w=_randn(g, d_out, d_in), x=_randn(g, 3, 5, d_in), what=f"Linear({d_in}, {d_out})")]


@hidden("2.1")
def _embedding(g):
    v, d = _int(g, 2, 50), _int(g, 1, 9)
    w = _randn(g, 11, 6)
    return [dict(ids=torch.tensor([[0, 3, 10], [3, 3, 1]]), w=w, what="ids (2, 3), W (11, 6)"),
            dict(ids=torch.randint(0, v, (2, 3, 4), generator=g), w=_randn(g, v, d),
                 what=f"ids (2, 3, 4), W ({v}, {d})")]


@hidden("2.2")
def _Embedding(g):
    vocab, d = _int(g, 800, 1500), _int(g, 40, 80)
    return [dict(seed=_int(g, 0, 10**6), vocab=vocab, d=d, w=_randn(g, vocab, d),
                 ids=torch.randint(0, vocab, (2, 5), generator=g), what=f"Embedding({vocab}, {d})")]


@hidden("3.1")
def _rms_norm(g):
    d = _int(g, 1, 33)
    cases = [dict(x=_randn(g, *shape, scale=scale) + 0.5 * scale, w=_randn(g, shape[-1]),
                  what=f"x {shape} with values around {scale:g}") for shape,
             scale in (((2, 5, 16), 1.0), ((16,), 50.0))]
    return cases + [
        dict(x=_randn(g, 4, 16, scale=3).to(torch.bfloat16), w=torch.ones(16, dtype=torch.bfloat16), what="bfloat16 x"),
        dict(x=_randn(g, 3, d, scale=1e-3), w=_randn(g, d), eps=1e-2, what=f"x (3, {d}) and eps=1e-2"),
        dict(x=_randn(g, 2, 6, scale=4).half(), w=_randn(g, 6).half(), what="float16 x"),
        dict(x=(_randn(g, 2, 16, scale=30) + 300).half(), w=_randn(g, 16).half(), what="float16 x near 300")]


@hidden("3.2")
def _RMSNorm(g):
    d = _int(g, 2, 40)
    return [dict(d=d, w=_randn(g, d), x=_randn(g, 2, 3, d), what=f"RMSNorm({d})"),
            dict(d=d, eps=1e-2, w=_randn(g, d), x=_randn(g, 2, d, scale=1e-3), what=f"RMSNorm({d}, eps=1e-2)")]


@hidden("4.1")
def _silu(g):
    return [dict(x=_randn(g, 2, 3, 4), what="x (2, 3, 4)"),
            dict(x=torch.tensor([-100.0, -30.0, 0.0, 30.0, 100.0]), what="large |x|"),
            dict(x=_randn(g, 5, dtype=torch.float64), what="float64 x")]


@hidden("4.2")
def _swiglu(g):
    shapes = [(16, 40), (_int(g, 1, 12), _int(g, 1, 30))]
    return [dict(x=_randn(g, 3, 5, d), w1=_randn(g, f, d, scale=0.2), w2=_randn(g, d, f, scale=0.2),
                 w3=_randn(g, f, d, scale=0.2), what=f"x (3, 5, {d}), d_ff {f}") for d, f in shapes]


@hidden("4.3")
def _SwiGLU(g):
    d, f = _int(g, 2, 12), _int(g, 2, 30)
    state = weights(g, {"w1.weight": (f, d), "w2.weight": (d, f), "w3.weight": (f, d)})
    return [dict(d=d, f=f, state=state, x=_randn(g, 2, 7, d), what=f"SwiGLU({d}, {f})")]


# ---------------------------------------------------------------- 5–6: RoPE and attention


@hidden("5.1")
def _rope(g):
    d = 2 * _int(g, 1, 16)
    pos = torch.tensor([[7, 0, 3, 100, 2], [1, 1, 1, 1, 1]])
    return [dict(pos=pos, d_k=16, theta=500.0, what="batched positions (2, 5), d_k=16, theta=500"),
            dict(x=_randn(g, 2, 6, 8), pos=torch.arange(6), what="x (2, 6, 8), positions 0…5"),
            dict(x=_randn(g, 2, 3, 5, 16), pos=pos.unsqueeze(1), theta=500.0,
                 what="batched positions (2, 1, 5), theta=500"),
            dict(pos=torch.randint(0, 4096, (2, 3, 5), generator=g), d_k=d, theta=float(_int(g, 10, 10**5)),
                 what=f"positions (2, 3, 5), d_k={d}"),
            dict(pos=torch.tensor(_int(g, 0, 100)), d_k=d, what=f"one position (a 0-d tensor), d_k={d}"),
            dict(x=_randn(g, 3, 7, d), pos=torch.randint(0, 4096, (3, 7), generator=g), theta=float(_int(g, 10, 10**5)),
                 what=f"x (3, 7, {d}) with random positions per batch row (3, 7)"),
            dict(x=_randn(g, 4, 2, dtype=torch.float64), pos=torch.arange(4), what="float64 x with d_k = 2")]


@hidden("5.2")
def _RoPE(g):
    x, d = _randn(g, 3, 10, 8), 2 * _int(g, 1, 12)
    return [dict(theta=10000.0, d_k=8, max_len=64, x=x, pos=torch.randint(0, 64, (3, 10), generator=g),
                 what="RotaryPositionalEmbedding(10000, 8, 64) with batched positions (3, 10)"),
            dict(theta=float(_int(g, 100, 10**5)), d_k=d, max_len=2048, x=_randn(g, 2, 3, 9, d),
                 pos=torch.randint(0, 2048, (2, 1, 9), generator=g),
                 what=f"d_k={d}, max_seq_len=2048, batched positions (2, 1, 9)"),
            dict(theta=float(_int(g, 100, 10**5)), d_k=d, max_len=512, x=_randn(g, 4, 6, d),
                 pos=torch.randint(0, 512, (4, 6), generator=g),
                 what=f"d_k={d}, max_seq_len=512, batched positions (4, 6)")]


@hidden("6.1")
def _softmax(g):
    x = _randn(g, 3, 4, 5)
    return [*(dict(x=x, dim=d, what=f"x (3, 4, 5), dim={d}") for d in (-1, 0, 1)),
            dict(x=torch.tensor([[0.0, float("-inf"), 1.0], [float("-inf"), 2.0, float("-inf")]]), dim=-1,
                 what="rows with -inf entries"),
            dict(x=_randn(g, 2, 3, 4, scale=50, dtype=torch.float64), dim=2, what="float64 x, dim=2"),
            # rows far apart: one max over the whole tensor underflows the lowest row to 0 / 0
            dict(x=_randn(g, 3, 6) + torch.tensor([[0.0], [-300.0], [300.0]]), dim=-1, what="rows ±300 apart")]


@hidden("6.2")
def _sdpa(g):
    q, k, v = _randn(g, 2, 3, 4, 8), _randn(g, 2, 3, 6, 8), _randn(g, 2, 3, 6, 5)
    mask = torch.rand(4, 6, generator=g) > 0.5
    mask[:, 0], mask[:, 1] = True, False
    nq, nk, d, dv = _int(g, 1, 7), _int(g, 1, 9), _int(g, 1, 16), _int(g, 1, 8)
    m2 = torch.rand(2, 1, nq, nk, generator=g) > 0.3
    m2[..., 0] = True
    return [dict(q=q, k=k, v=v, what="4 queries, 6 keys, no mask"),
            dict(q=q, k=k, v=v, mask=mask, what="a boolean mask"),
            dict(q=_randn(g, 2, 3, nq, d), k=_randn(g, 2, 3, nk, d), v=_randn(g, 2, 3, nk, dv), mask=m2,
                 what=f"a mask (2, 1, {nq}, {nk}) broadcast over heads, d_v={dv}")]


@hidden("6.3")
def _mhsa(g):
    d, h = 32, 4
    cases = [dict(d=d, heads=h, max_len=32, theta=10000.0, state=weights(g, attention_shapes(d)), x=_randn(g, 2, 9, d),
                  what="MultiHeadSelfAttention(32, 4) with RoPE"),
             dict(d=d, heads=h, state=weights(g, attention_shapes(d)), x=_randn(g, 2, 9, d), what="without RoPE")]
    h = _int(g, 1, 4)
    d = h * 2 * _int(g, 1, 4)
    return cases + [
        dict(d=d, heads=h, max_len=64, theta=float(_int(g, 100, 10**5)), state=weights(g, attention_shapes(d)),
             x=_randn(g, 3, 5, d), pos=torch.randint(0, 64, (3, 5), generator=g),
             what=f"{h} heads, d_model {d}, batched token positions (3, 5)"),
        # as many batch rows as heads: positions given to RoPE without a heads axis broadcast
        # silently, each head rotated by another batch row's positions
        dict(d=d, heads=h, max_len=64, theta=10000.0, state=weights(g, attention_shapes(d)),
             x=_randn(g, h, 4, d), pos=torch.randint(0, 64, (h, 4), generator=g),
             what=f"{h} heads, a batch of {h}, batched token positions ({h}, 4)"),
        dict(d=d, heads=h, max_len=16, theta=10000.0, state=weights(g, attention_shapes(d)), x=_randn(g, 1, 1, d),
             what="a single token")]


# ---------------------------------------------------------------- 7–8: block and LM


@hidden("7.1")
def _block(g):
    return [dict(d=32, heads=4, d_ff=48, max_len=32, theta=10000.0, state=weights(g, block_shapes(32, 48)),
                 x=_randn(g, 2, 7, 32), what="TransformerBlock(32, 4, 48)"),
            dict(d=16, heads=2, d_ff=24, max_len=64, theta=500.0, state=weights(g, block_shapes(16, 24)),
                 x=_randn(g, 2, 6, 16), pos=torch.randint(0, 64, (6,), generator=g),
                 what="TransformerBlock(16, 2, 24) with explicit positions and theta=500")]


@hidden("8.1")
def _lm(g):
    configs = [(97, 32, 32, 2, 4, 48, 10000.0), (61, 16, 16, 1, 2, 40, 1000.0)]
    return [dict(config=list(cfg), state=weights(g, lm_shapes(cfg[0], cfg[2], cfg[3], cfg[5])),
                 ids=torch.randint(0, cfg[0], (2, 12 if i == 0 else 16), generator=g),
                 what=f"TransformerLM{tuple(cfg[:6])}") for i, cfg in enumerate(configs)]


# ---------------------------------------------------------------- 9–10: data, BPE and training


@hidden("9.1")
def _get_batch(g):
    off, n = _int(g, 0, 5000), _int(g, 50, 3000)
    return [dict(data=torch.arange(off, off + n), np_dtype="int64", batch=4, ctx=8, seed=_int(g, 0, 10**6), small=True,
                 what=f"{n} int64 tokens, batch 4, context 8"),
            dict(data=torch.arange(off, off + 50), np_dtype="uint16", batch=2, ctx=5, seed=_int(g, 0, 10**6),
                 what="a uint16 dataset"),
            dict(data=torch.arange(off, off + 9), np_dtype="int64", batch=3, ctx=8, seed=_int(g, 0, 10**6),
                 what="context_length + 1 tokens: one window")]


# Pieces of text for the BPE cases: repeated words and their overlaps, contractions, digits,
# punctuation, runs of spaces and newlines, and multi-byte characters.
_BPE_PIECES = ("a", "b", "aa", "ab", "ba", "the", "The", "then", "than", " ", " ", " ", "  ", "\n", "\n\n", "'s",
               "'ll", "1", "23", "2024", ".", ",", "!?", "é", "café", "naïve", "🤖", "\t", "x")


@hidden("9.2")
def _train_bpe(g):
    from minilm.course.exercises.training import BPE_CORPUS

    cases = [dict(text=BPE_CORPUS, num_merges=_int(g, 10, 60), what="the check's corpus, other merges")]
    for length, merges in ((_int(g, 20, 80), _int(g, 5, 40)), (_int(g, 150, 400), _int(g, 30, 120))):
        picks = torch.randint(0, len(_BPE_PIECES), (length,), generator=g).tolist()
        cases.append(dict(text="".join(_BPE_PIECES[i] for i in picks), num_merges=merges,
                          what=f"a text of {length} random pieces, {merges} merges"))
    return cases + [dict(text="x", num_merges=_int(g, 0, 3), what="a one-character text")]


@hidden("9.3")
def _tokenizer(g):
    from minilm.course.exercises.training import CORPUS_MERGES, EOT, ORDER_MERGES
    from solutions.bpe import train_bpe

    def text(length):
        picks = torch.randint(0, len(_BPE_PIECES), (length,), generator=g).tolist()
        return "".join(_BPE_PIECES[i] for i in picks)

    # Merges learned from one random text, used on others (so some words fall apart into bytes),
    # with <|endoftext|> between documents.
    n_merges = _int(g, 20, 80)
    _, merges = train_bpe(text(_int(g, 150, 400)), n_merges)
    docs = [text(_int(g, 10, 60)) for _ in range(3)]
    order = [(b"a", b"b"), (b"b", b"a"), (b"ab", b"a"), (b"a", b"a"), (b"ba", b"b"), (b"aa", b"b")]
    picks = torch.randint(0, 2, (4, 9), generator=g).tolist()
    return [
        dict(merges=merges, special_tokens=[EOT], what=f"{len(merges)} merges of a random text, <|endoftext|>",
             texts=[EOT.join(docs), docs[0] + EOT + EOT, text(_int(g, 5, 30))],
             decode=[bytes([b]) for b in "naïve 🤖".encode()] + [b"\xe2", b"!"]),
        dict(merges=ORDER_MERGES[::-1][:3] + ORDER_MERGES[:3], special_tokens=None,
             what="other merges whose order matters",
             texts=["ababc", "abcab cabab", "bcbcaab"]),
        dict(merges=order, special_tokens=["<|a|>"], what="merges of a and b only, a special token <|a|>",
             texts=["".join("ab"[i] for i in row) + "<|a|>" for row in picks]),
        dict(merges=CORPUS_MERGES, special_tokens=[EOT + EOT, EOT, "<|pad|>"], extra=[b"<|pad|>"],
             what="three special tokens, one of them in vocab",
             texts=["<|pad|>low<|endoftext|><|endoftext|><|endoftext|>widest<|pad|><|pad|>", EOT]),
    ]


@hidden("10.1")
def _cross_entropy(g):
    v = _int(g, 2, 40)
    return [dict(logits=_randn(g, 4, 7), targets=torch.randint(0, 7, (4,), generator=g), what="logits (4, 7)"),
            dict(logits=_randn(g, 2, 3, 11, scale=3), targets=torch.randint(0, 11, (2, 3), generator=g),
                 what="logits (2, 3, 11)"),
            dict(logits=_randn(g, 3, 9, scale=1e4), targets=torch.tensor([0, 4, 8]), what="logits of size ±1e4"),
            dict(logits=_randn(g, 2, 2, 2, v), targets=torch.randint(0, v, (2, 2, 2), generator=g),
                 what=f"logits (2, 2, 2, {v})"),
            dict(logits=_randn(g, 5, v, scale=-1e4), targets=torch.randint(0, v, (5,), generator=g),
                 what="large negative logits")]


@hidden("10.2")
def _clip(g):
    out = []
    for scale, max_norm in ((10.0, 1.0), (0.01, 1.0), (float(_int(g, 1, 20)), 0.5)):
        params = [_randn(g, *s) for s in ((3, 4), (5,), (2, 2, 2))]
        out.append(dict(params=params, grads=[_randn(g, *p.shape, scale=scale) for p in params], max_norm=max_norm,
                        what=f"gradients of size ~{scale:g}, max_norm {max_norm:g}"))
    params = [_randn(g, 3, 4), _randn(g, 5)]
    return out + [dict(params=params, grads=[torch.zeros_like(p) for p in params], max_norm=1.0,
                       what="all-zero gradients")]


@hidden("10.3")
def _lr(g):
    w = _int(g, 1, 20)
    return [dict(args=dict(max_lr=3e-3, min_lr=1e-4, warmup_iters=w, cosine_cycle_iters=w + _int(g, 1, 50)),
                 its=list(range(80)), what="other settings"),
            dict(args=dict(max_lr=1.0, min_lr=0.1, warmup_iters=0, cosine_cycle_iters=_int(g, 1, 30)),
                 its=list(range(35)), what="warmup_iters 0 (max_lr at it = 0)")]


@hidden("10.4")
def _adamw(g):
    def case(shapes_by_group, group_hparams, hparams, steps, what):
        init = [[_randn(g, *s) for s in grp] for grp in shapes_by_group]
        flat = [p for grp in init for p in grp]
        return dict(init=init, group_hparams=group_hparams, hparams=hparams,
                    grads=[[_randn(g, *p.shape) for p in flat] for _ in range(steps)], what=what)

    return [case([[(4, 3), (5,)]], [{}], dict(lr=0.05, betas=(0.9, 0.99), eps=1e-8, weight_decay=0.5), 6,
                 "6 steps, weight_decay 0.5"),
            case([[(3, 2)], [(4,)]], [{}, {"weight_decay": 0.0, "lr": 0.01}],
                 dict(lr=0.02, betas=(0.8, 0.95), eps=1e-6, weight_decay=0.1), 5, "two parameter groups"),
            *_adamw_eps_cases(g)]


def _adamw_eps_cases(g):
    """AdamW where eps's place matters: gradients of ~1e-6 … 1e-4 (v̂ of eps's size or below), and a large eps."""
    scale = 10.0 ** -_int(g, 4, 6)
    init = [_randn(g, 3, 4), _randn(g, 6)]
    tiny = [[_randn(g, *p.shape, scale=scale) for p in init] for _ in range(4)]
    unit = [[_randn(g, *p.shape) for p in init] for _ in range(3)]
    return [dict(init=[init], group_hparams=[{}], hparams=dict(lr=0.01, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.1),
                 grads=tiny, what=f"4 steps with gradients of size ~{scale:g}, eps 1e-8"),
            dict(init=[init], group_hparams=[{}], hparams=dict(lr=0.05, betas=(0.9, 0.99), eps=0.1, weight_decay=0.0),
                 grads=unit, what="3 steps with eps 0.1")]


@hidden("10.5")
def _checkpoint(g):
    return [dict(seed=_int(g, 0, 1000), xs=[_randn(g, 5, 4) for _ in range(3)], more=_randn(g, 5, 4), iteration=3,
                 to_path=False, what="a file object"),
            dict(seed=_int(g, 0, 1000), xs=[_randn(g, 5, 4) for _ in range(2)], more=_randn(g, 5, 4),
                 iteration=_int(g, 1, 10**6), to_path=True, what="a path")]


@hidden("10.6")
def _train(g):
    start = _int(g, 1, 5)
    return [dict(seed=_int(g, 0, 1000), start=0, stop=_int(g, 3, 8), lr=0.005 * _int(g, 1, 4),
                 clip=float(_int(g, 1, 4)), eval_every=_int(g, 1, 3), what="other steps, clip and evaluation"),
            dict(seed=_int(g, 0, 1000), start=start, stop=start + _int(g, 2, 7), lr=0.01, clip=2.0, eval_every=3,
                 what="resumed mid-run, evaluating every 3 steps")]


# ---------------------------------------------------------------- 11: generation


@hidden("11.1")
def _next_token_probs(g):
    from minilm.course.exercises.generation import LOGITS

    vocab = _int(g, 20, 60)
    rows = _randn(g, 3, 2, vocab, scale=2.0)
    # One token holds most of the mass: top_p just above it must keep the token that crosses it too.
    peaked = _randn(g, 4, vocab)
    peaked[:, _int(g, 0, vocab - 1)] += 4.0
    return [dict(logits=LOGITS, kw=dict(temperature=0.8, top_k=5, top_p=0.9), what="temperature, top_k and top_p"),
            dict(logits=rows, kw=dict(temperature=1.3, top_p=0.75), what=f"rows (3, 2, {vocab}), top_p 0.75"),
            dict(logits=rows, kw=dict(top_k=_int(g, 2, 9)), what=f"rows (3, 2, {vocab}), top_k"),
            dict(logits=rows, kw=dict(temperature=0.0), what=f"rows (3, 2, {vocab}), greedy"),
            dict(logits=peaked, kw=dict(top_p=0.9), what="top_p 0.9 where one token holds most of the mass"),
            dict(logits=rows, kw=dict(temperature=0.9, top_k=vocab + 3, top_p=0.5),
                 what="top_k above the vocabulary size"),
            dict(logits=rows.to(torch.bfloat16), kw=dict(top_p=0.8), what="bfloat16 logits, top_p 0.8")]


@hidden("11.2")
def _generate(g):
    vocab, ctx, prompt = 23, 12, [3, 14, 15, 9, 2]
    table = _randn(g, vocab, vocab, scale=2.0)
    # No top_p but 1e-6 (greedy for any top_p): 11.2's points depend on the loop, not on Task 11.1's top_p.
    return [dict(table=table, ctx=ctx, prompt=torch.tensor(prompt), n=15, kw=dict(temperature=0.0),
                 what="greedy, 15 new tokens, past context_length"),
            dict(table=table, ctx=ctx, prompt=torch.tensor(prompt), n=10, kw=dict(temperature=0.0),
                 what="a prompt given as a Python list", as_list=True),
            dict(table=table, ctx=ctx, prompt=torch.arange(ctx + 4) % vocab, n=6, kw=dict(temperature=0.0),
                 what="a prompt longer than context_length"),
            dict(table=table, ctx=ctx, prompt=torch.tensor(prompt), n=30, gen_seed=_int(g, 0, 10**6),
                 kw=dict(temperature=1.2), what="temperature 1.2, 30 tokens"),
            dict(table=table, ctx=ctx, prompt=torch.tensor(prompt), n=30, gen_seed=_int(g, 0, 10**6),
                 kw=dict(temperature=0.9, top_k=3), what="temperature 0.9, top_k 3"),
            dict(table=table, ctx=ctx, prompt=torch.tensor(prompt), n=0, kw=dict(temperature=0.0),
                 what="max_new_tokens 0 (the prompt alone)")]


@hidden("11.3")
def _kv_cache(g):
    cfg = [53, 12, 16, 2, 2, 24, 10000.0]
    toy = dict(toy_table=_randn(g, 23, 23, scale=2.0), toy_ctx=12, toy_prompt=[3, 14, 15, 9, 2])
    cases = [dict(k1=_randn(g, 1, 2, 3, 4), v1=_randn(g, 1, 2, 3, 4), k2=_randn(g, 1, 2, 1, 4),
                  v2=_randn(g, 1, 2, 1, 4),
                  attn_config=(16, 2, 64), attn_state=weights(g, attention_shapes(16)), x=_randn(g, 2, 10, 16),
                  chunks=[5, 3, 1, 1], config=cfg, state=weights(g, lm_shapes(53, 16, 2, 24)),
                  ids=torch.randint(0, 53, (1, 10), generator=g), prefill=6, n=15, **toy,
                  what="a 6-token prompt, then 4 single tokens through the cache"),
             dict(k1=_randn(g, 2, 1, 2, 6), v1=_randn(g, 2, 1, 2, 6), k2=_randn(g, 2, 1, 3, 6),
                  v2=_randn(g, 2, 1, 3, 6),
                  attn_config=(24, 3, 64), attn_state=weights(g, attention_shapes(24)), x=_randn(g, 3, 12, 24),
                  chunks=[1, 4, 2, 1, 4], config=cfg, state=weights(g, lm_shapes(53, 16, 2, 24)),
                  ids=torch.randint(0, 53, (2, 12), generator=g), prefill=1, n=25, **toy,
                  what="a batch of 2, a 1-token prompt, and generation past context_length with the cache")]
    # Explicit token_positions through attention's cache, drawn after the rest: (seq,) starting past 0, and
    # each batch row's own (batch, seq). Keys cached before RoPE and rotated at 0 … keys − 1 get both wrong.
    for c in cases:
        batch, seq = c["x"].shape[0], c["x"].shape[-2]
        start = _int(g, 1, 30)
        c["positions"] = torch.arange(start, start + seq)
        c["row_positions"] = torch.randint(0, 64 - seq + 1, (batch, 1), generator=g) + torch.arange(seq)
    return cases


# ---------------------------------------------------------------- 12: quantization


@hidden("12.1")
def _quantize(g):
    d_out, d_in = _int(g, 1, 20), _int(g, 1, 40)
    w = _randn(g, 6, 10) * torch.tensor([[0.02], [0.5], [1.0], [0.1], [0.05], [3.0]])
    w[2] = 0.0  # an all-zero row
    w[4, 7] = 1.5  # an outlier
    tiny = _randn(g, 3, 5)
    tiny[1] = 1e-44  # max |w| / 127 underflows to 0
    cases = [dict(w=w, per_channel=True, what="a (6, 10) weight with a zero row and an outlier, per channel"),
             dict(w=w, per_channel=False, what="the same weight per tensor"),
             dict(w=_randn(g, d_out, d_in, scale=50.0), per_channel=True,
                  what=f"a ({d_out}, {d_in}) weight of size ~50"),
             dict(w=_randn(g, 4, 7, dtype=torch.float64), per_channel=True, what="a float64 weight"),
             dict(w=_randn(g, 5, 9).to(torch.bfloat16), per_channel=False, what="a bfloat16 weight per tensor"),
             dict(w=tiny, per_channel=True, what="a row of 1e-44"),
             dict(w=torch.zeros(2, 3), per_channel=False, what="an all-zero weight per tensor")]
    for c in cases:  # int8 values and positive scales for dequantize_int8, one scale per row or one in all
        rows = c["w"].shape[0] if c["per_channel"] else 1
        c["q"] = torch.randint(-127, 128, tuple(c["w"].shape), generator=g).to(torch.int8)
        c["q_scale"] = torch.rand(rows, 1, generator=g) + 1e-3
    return cases


@hidden("12.2")
def _int8_linear(g):
    d_out, d_in = _int(g, 1, 24), _int(g, 1, 24)
    return [dict(w=_randn(g, 6, 10), x=_randn(g, 3, 4, 10), per_channel=True, what="Int8Linear from a (6, 10) weight"),
            dict(w=_randn(g, 6, 10), x=_randn(g, 3, 4, 10), per_channel=False, what="the same per tensor"),
            dict(w=_randn(g, d_out, d_in, scale=0.1), x=_randn(g, 2, d_in), per_channel=True,
                 what=f"a ({d_out}, {d_in}) weight"),
            dict(w=_randn(g, 3, 5), x=_randn(g, 4, 5, dtype=torch.float64), per_channel=True, what="a float64 x")]


@hidden("12.3")
def _quantize_model(g):
    configs = [((53, 12, 16, 2, 2, 24, 10000.0), True), ((61, 16, 16, 1, 2, 40, 1000.0), False)]
    return [dict(config=list(cfg), per_channel=pc, state=weights(g, lm_shapes(cfg[0], cfg[2], cfg[3], cfg[5])),
                 ids=torch.randint(0, cfg[0], (2, 10), generator=g),
                 what=f"TransformerLM{tuple(cfg[:6])}, per_channel={pc}") for cfg, pc in configs]


# ---------------------------------------------------------------- 13: the classic Transformer


def _ln_state(g, d: int) -> dict:
    return {"weight": 1 + 0.3 * torch.randn(d, generator=g), "bias": 0.2 * torch.randn(d, generator=g)}


@hidden("13.1")
def _layer_norm(g):
    cases = []
    for shape, scale, offset in (((2, 5, 16), 1.0, 0.5), ((16,), 50.0, -20.0)):
        st = _ln_state(g, shape[-1])
        cases.append(dict(x=_randn(g, *shape, scale=scale) + offset, w=st["weight"], b=st["bias"],
                          what=f"x {shape} with values {offset:g} ± {scale:g}"))
    d = _int(g, 2, 40)
    st = _ln_state(g, d)
    return cases + [
        dict(d=24, state=_ln_state(g, 24), x=_randn(g, 2, 3, 24) + 2, what="LayerNorm(24)"),
        dict(x=_randn(g, 3, d, scale=1e-2), w=st["weight"], b=st["bias"], eps=1e-2, what=f"x (3, {d}) and eps=1e-2"),
        dict(x=_randn(g, 2, 6, scale=4).half() + 1, w=torch.ones(6).half(), b=torch.zeros(6).half(), what="float16 x"),
        dict(d=d, eps=1e-2, state=_ln_state(g, d), x=_randn(g, 2, d, scale=1e-2), what=f"LayerNorm({d}, eps=1e-2)")]


@hidden("13.2")
def _sinusoid(g):
    seq, d = _int(g, 100, 3000), 2 * _int(g, 1, 40)
    return [dict(seq=64, d=32, rows=torch.arange(64), what="sinusoidal_positions(64, 32)"),
            dict(seq=seq, d=d, rows=torch.randint(0, seq, (20,), generator=g),
                 what=f"sinusoidal_positions({seq}, {d})"),
            dict(seq=1, d=2, rows=torch.arange(1), what="sinusoidal_positions(1, 2)"),
            dict(seq=200_001, d=8, rows=torch.tensor([0, 99_999, 200_000]), what="sinusoidal_positions(200001, 8)")]


@hidden("13.3")
def _gelu(g):
    return [dict(x=_randn(g, 2, 3, 4, scale=2), what="x (2, 3, 4)"),
            dict(x=torch.tensor([-100.0, -30.0, 0.0, 30.0, 100.0]), what="large |x|"),
            dict(x=_randn(g, 7, scale=3, dtype=torch.float64), what="float64 x")]


@hidden("13.4")
def _gelu_ffn(g):
    d, f = _int(g, 1, 12), _int(g, 1, 40)
    return [dict(d=d, f=f, state=weights(g, {"w1.weight": (f, d), "w2.weight": (d, f)}), x=_randn(g, 2, 7, d),
                 what=f"GeluFFN({d}, {f})")]


@hidden("13.5")
def _classic_block(g):
    from minilm.course.exercises.classic import BLOCK_CHANGES, CLASSIC, classic_block_shapes

    base = dict(vocab_size=97, context_length=32, d_model=32, num_layers=1, num_heads=4)
    cases = []
    for name, changes in BLOCK_CHANGES.items():
        cfg = base | changes
        cases.append(dict(config=cfg, state=weights(g, classic_block_shapes(cfg)), x=_randn(g, 2, 7, 32),
                          what=f"ClassicBlock ({name})"))
    h = _int(g, 1, 3)
    d = 2 * h * _int(g, 1, 4)
    cfg = dict(vocab_size=50, context_length=64, d_model=d, num_layers=1, num_heads=h, d_ff=_int(g, 1, 40),
               rope_theta=float(_int(g, 100, 10**5)), norm_position="post")
    cases.append(dict(config=cfg, state=weights(g, classic_block_shapes(cfg)), x=_randn(g, 3, 5, d),
                      pos=torch.randint(0, 64, (3, 5), generator=g),
                      what=f"a post-norm RoPE block, d_model {d}, {h} heads, batched token positions"))
    cfg = cfg | CLASSIC | dict(norm_position="pre")
    cases.append(dict(config=cfg, state=weights(g, classic_block_shapes(cfg)), x=_randn(g, 1, 1, d),
                      what="a pre-norm LayerNorm GELU block on a single token"))
    return cases


@hidden("13.6")
def _classic_lm(g):
    from minilm.course.exercises.classic import BASE, CLASSIC, ONE_CHANGE, classic_lm_state

    cases = [dict(config=BASE | changes, name=name, state=classic_lm_state(g, BASE | changes),
                  ids=torch.randint(0, 97, (2, 12), generator=g), what=f"ClassicLM ({name})")
             for name, changes in {**ONE_CHANGE, "classic": CLASSIC}.items()]
    cfg = dict(vocab_size=61, context_length=16, d_model=16, num_layers=1, num_heads=2, positions="learned",
               tied_head=True, norm="layernorm")
    cases.append(dict(config=cfg, name="tied, learned positions", state=classic_lm_state(g, cfg),
                      ids=torch.randint(0, 61, (3, 16), generator=g),
                      what="a tied head with learned positions over the full context"))
    cfg = BASE | CLASSIC | dict(d_ff=_int(g, 8, 80), num_layers=3)
    cases.append(dict(config=cfg, name="classic, 3 layers", state=classic_lm_state(g, cfg),
                      ids=torch.randint(0, 97, (1, 32), generator=g),
                      what="the classic model, 3 layers, over the full context"))
    return cases


# ---------------------------------------------------------------- 14: the modern recipe


@hidden("14.1")
def _newton_schulz(g):
    r, c = _int(g, 2, 30), _int(g, 2, 30)
    G = _randn(g, 7, 4)
    return [dict(G=G * (0.3 / G.norm()), what="G (7, 4) with Frobenius norm 0.3"),
            dict(G=_randn(g, r, c, scale=10.0), what=f"G ({r}, {c})"),
            dict(G=_randn(g, 1, c), what=f"a single row (1, {c})"),
            dict(G=_randn(g, 9, 6, dtype=torch.float64), steps=_int(g, 1, 7), what="float64 G (9, 6), other steps"),
            dict(G=torch.zeros(r, c), what=f"an all-zero G ({r}, {c})")]


@hidden("14.2")
def _muon(g):
    # wide first: a missing and an inverted scale then differ at different matrices
    shapes = ((_int(g, 2, 5), _int(g, 6, 20)), (_int(g, 6, 20), _int(g, 2, 5)), (1, _int(g, 2, 9)))
    init = [_randn(g, *s, scale=0.3) for s in shapes]
    grads = [[_randn(g, *s) for s in shapes] for _ in range(5)]
    return [dict(init=init, grads=grads, hparams=dict(lr=0.03, momentum=0.8, weight_decay=0.2),
                 what="5 steps of a wide, a tall and a one-row matrix"),
            dict(init=init, grads=grads[:2], hparams=dict(lr=0.1, momentum=0.0, nesterov=True, ns_steps=4),
                 what="2 steps with momentum 0"),
            dict(init=init[:1], grads=[[gr[0]] for gr in grads], hparams=dict(lr=0.01, nesterov=False),
                 what="5 steps without Nesterov, defaults otherwise")]


@hidden("14.3")
def _parameter_groups(g):
    return [dict(config=dict(vocab=_int(g, 5, 20), d=_int(g, 2, 8), f=_int(g, 3, 12), layers=_int(g, 1, 3),
                             tied=tied, positions=pos), what=f"a model (tied head {tied}, positions {pos})")
            for tied, pos in ((False, False), (True, True), (False, True))]


@hidden("14.4")
def _wsd(g):
    warmup = float(torch.rand((), generator=g)) * 0.2
    decay = 0.1 + float(torch.rand((), generator=g)) * 0.5
    return [dict(args=dict(max_lr=0.02, min_lr=0.002, warmup=warmup, decay=decay),
                 progress=torch.rand(30, generator=g).mul(1.2).tolist(), what="random progress in [0, 1.2)"),
            dict(args=dict(max_lr=1.0, min_lr=1.0, warmup=0.5, decay=0.5), progress=[0.0, 0.25, 0.5, 0.75, 1.0],
                 what="min_lr = max_lr, warmup + decay = 1"),
            dict(args=dict(max_lr=1.0, min_lr=0.0, warmup=0.0, decay=0.2), progress=[0.0, 0.79, 0.8, 0.9, 2.0],
                 what="no warmup, decay 0.2")]


@hidden("14.5")
def _softcap(g):
    return [dict(x=_randn(g, 3, 5, scale=40), cap=float(_int(g, 5, 50)), what="logits (3, 5)"),
            dict(x=torch.tensor([0.0, 1e-3, -1e4, 1e4]), cap=15.0, what="0, tiny and huge logits"),
            dict(x=_randn(g, 2, 4, scale=3).half(), cap=2.0, what="float16 logits")]


@hidden("14.6")
def _relu2(g):
    d, f = _int(g, 1, 12), _int(g, 1, 40)
    return [dict(d=d, f=f, state=weights(g, {"w1.weight": (f, d), "w2.weight": (d, f)}), x=_randn(g, 2, 5, d),
                 what=f"ReLUSquaredFFN({d}, {f})"),
            dict(d=4, f=6, state=weights(g, {"w1.weight": (6, 4), "w2.weight": (4, 6)}), x=_randn(g, 4),
                 what="a single vector")]


# ---------------------------------------------------------------- 15: inside the trained model


@hidden("15.1")
def _attention_inputs(g):
    layers, h = _int(g, 1, 4), _int(g, 1, 4)
    d, vocab, seq = h * 2 * _int(g, 1, 4), _int(g, 5, 80), _int(g, 1, 12)
    d_ff = _int(g, 1, 40)
    batch = _int(g, 1, 4)
    return [dict(config=[97, 32, 32, 2, 4, 48, 10000.0], state=weights(g, lm_shapes(97, 32, 2, 48)),
                 ids=torch.randint(0, 97, (2, 9), generator=g), what="TransformerLM(97, 32, 32, 2, 4, 48), ids (2, 9)"),
            dict(config=[vocab, 16, d, layers, h, d_ff, float(_int(g, 100, 10**5))],
                 state=weights(g, lm_shapes(vocab, d, layers, d_ff)),
                 ids=torch.randint(0, vocab, (batch, seq), generator=g),
                 what=f"{layers} layers of {h} heads, d_model {d}, ids ({batch}, {seq})"),
            dict(config=[vocab, 16, d, 4, h, d_ff, 10000.0], state=weights(g, lm_shapes(vocab, d, 4, d_ff), scale=1.0),
                 ids=torch.randint(0, vocab, (seq,), generator=g),
                 what=f"4 layers of {h} heads, d_model {d}, ids ({seq},), larger weights")]


@hidden("15.2")
def _head_scores(g):
    from minilm.course.exercises.inside import causal_pattern

    period = _int(g, 1, 6)
    seq = period + _int(g, 1, 6)
    return [dict(pattern=causal_pattern(g, 2, 3, 8, 8), period=4, what="a random pattern (2, 3, 8, 8), period 4"),
            dict(pattern=causal_pattern(g, 4, seq, seq, scale=5.0), period=period,
                 what=f"a sharp random pattern (4, {seq}, {seq}), period {period}"),
            dict(pattern=causal_pattern(g, 2, 2, dtype=torch.float64), period=1, what="float64, 2 tokens, period 1")]


@hidden("15.3")
def _ablate_heads(g):
    h = _int(g, 2, 4)
    d = h * 2 * _int(g, 1, 4)
    some = [i for i in range(h) if torch.rand((), generator=g) < 0.5] or [h - 1]
    return [dict(d=32, heads=4, theta=10000.0, state=weights(g, attention_shapes(32)), x=_randn(g, 2, 6, 32),
                 ablate=[2], what="head 2 of 4 ablated"),
            dict(d=d, heads=h, theta=10000.0, max_len=16, state=weights(g, attention_shapes(d)),
                 x=_randn(g, 3, _int(g, 1, 9), d), ablate=some, what=f"heads {some} of {h} ablated"),
            dict(d=d, heads=h, theta=10000.0, max_len=16, state=weights(g, attention_shapes(d)), x=_randn(g, 4, d),
                 ablate=list(range(h)), what=f"all {h} heads ablated"),
            dict(d=d, heads=h, state=weights(g, attention_shapes(d)), x=_randn(g, 4, d), ablate=[],
                 what="no head ablated, without RoPE")]


# ---------------------------------------------------------------- 16: past the data limit


@hidden("16.1")
def _dropout(g):
    p = [0.1, 0.25, 0.5, 0.75][_int(g, 0, 3)]
    return [dict(x=_randn(g, 3, _int(g, 1, 9), 6), p=p, training=True, seed=_int(g, 0, 10_000),
                 what=f"x (3, …, 6), p {p}, training"),
            dict(x=_randn(g, 64, 32), p=0.9, training=True, seed=_int(g, 0, 10_000), what="x (64, 32), p 0.9"),
            dict(x=_randn(g, 4, 5).half(), p=0.5, training=True, seed=_int(g, 0, 10_000),
                 what="float16 x (4, 5), p 0.5"),
            dict(x=_randn(g, 2, 2, 3, dtype=torch.float64), p=p, training=False, seed=_int(g, 0, 10_000),
                 what=f"float64 x (2, 2, 3), p {p}, not training"),
            dict(x=_randn(g, 7), p=0.0, training=False, seed=0, what="x (7,), p 0, not training")]


@hidden("16.2")
def _distillation(g):
    def case(shape, scale, temperature, alpha, what, dtype=torch.float32):
        return dict(student=_randn(g, *shape, scale=scale, dtype=dtype),
                    teacher=_randn(g, *shape, scale=scale, dtype=dtype),
                    targets=torch.randint(0, shape[-1], shape[:-1], generator=g), temperature=temperature,
                    alpha=alpha, what=what)
    v = _int(g, 2, 40)
    T = [0.5, 1.5, 3.0, 10.0][_int(g, 0, 3)]
    return [case((_int(g, 1, 6), v), 2.0, T, 0.5, f"logits (…, {v}), T {T}, α 0.5"),
            case((2, _int(g, 1, 5), v), 1.0, 2.0, 0.0, "α 0 (the cross-entropy alone)"),
            case((3, 4, 5), 3.0, T, 1.0, f"the soft part alone, T {T}", torch.float64),
            case((4, v), 500.0, 1.0, 0.9, "logits of size ~500"),
            case((1, 2), 1.0, 7.0, 0.25, "a vocabulary of 2, T 7")]
