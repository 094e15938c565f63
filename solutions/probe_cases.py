"""The grader's inputs for every task's probe (instructors only: never in the student edition).

`CASES[task](g, hidden)` draws one task's cases from the generator g: with hidden=False the
notebook's own inputs (a fixed seed), with hidden=True the same kinds of input with other
values plus shapes and settings the notebook does not show (a seed drawn per submission).
The probes that run them, and what they collect, are in minilm/course/grading/probes.py.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from minilm.course.grading.probes import _int, _randn, attention_shapes, block_shapes, lm_shapes, weights

CASES: dict[str, Callable[[torch.Generator, bool], list[dict]]] = {}


def cases(task: str):
    def deco(fn):
        CASES[task] = fn
        return fn
    return deco


@cases("1.1")
def _linear_cases(g, hidden):
    cases = [dict(x=_randn(g, 2, 3, 8), w=_randn(g, 5, 8), what="x (2, 3, 8), W (5, 8)"),
             dict(x=_randn(g, 4, 6), w=_randn(g, 6, 6), what="a square W"),
             dict(x=_randn(g, 7), w=_randn(g, 3, 7), what="a 1-D x")]
    if hidden:
        d_in, d_out = _int(g, 1, 17), _int(g, 1, 17)
        cases += [dict(x=_randn(g, 2, 1, 3, d_in), w=_randn(g, d_out, d_in), what=f"x (2, 1, 3, {d_in}), W ({d_out}, {d_in})"),
                  dict(x=_randn(g, 5, 4, dtype=torch.float64), w=_randn(g, 3, 4, dtype=torch.float64), what="float64 inputs"),
                  dict(x=_randn(g, 4, 5).T, w=_randn(g, 2, 4), what="a non-contiguous x (a transpose)")]
    return cases


@cases("1.2")
def _Linear_cases(g, hidden):
    d_in, d_out = (_int(g, 3, 40), _int(g, 3, 40)) if hidden else (64, 32)
    return [dict(seed=_int(g, 0, 10**6), init_in=512 if not hidden else _int(g, 300, 700), init_out=256, d_in=d_in,
                 d_out=d_out, w=_randn(g, d_out, d_in), x=_randn(g, 3, 5, d_in), what=f"Linear({d_in}, {d_out})")]


@cases("2.1")
def _embedding_cases(g, hidden):
    w = _randn(g, 11, 6)
    cases = [dict(ids=torch.tensor([[0, 3, 10], [3, 3, 1]]), w=w, what="ids (2, 3), W (11, 6)"),
             dict(ids=torch.tensor(5), w=w, what="a single id")]
    if hidden:
        v, d = _int(g, 2, 50), _int(g, 1, 9)
        cases.append(dict(ids=torch.randint(0, v, (2, 3, 4), generator=g), w=_randn(g, v, d), what=f"ids (2, 3, 4), W ({v}, {d})"))
    return cases


@cases("2.2")
def _Embedding_cases(g, hidden):
    vocab, d = (1000, 64) if not hidden else (_int(g, 800, 1500), _int(g, 40, 80))
    return [dict(seed=_int(g, 0, 10**6), vocab=vocab, d=d, w=_randn(g, vocab, d),
                 ids=torch.randint(0, vocab, (2, 5), generator=g), what=f"Embedding({vocab}, {d})")]


@cases("3.1")
def _rms_norm_cases(g, hidden):
    cases = []
    for shape, scale in (((2, 5, 16), 1.0), ((3, 8), 1e-3), ((16,), 50.0)):
        cases.append(dict(x=_randn(g, *shape, scale=scale) + 0.5 * scale, w=_randn(g, shape[-1]),
                          what=f"x {shape} with values around {scale:g}"))
    cases.append(dict(x=_randn(g, 4, 16, scale=3).to(torch.bfloat16), w=torch.ones(16, dtype=torch.bfloat16),
                      what="bfloat16 x"))
    if hidden:
        d = _int(g, 1, 33)
        cases += [dict(x=_randn(g, 3, d, scale=1e-3), w=_randn(g, d), eps=1e-2, what=f"x (3, {d}) and eps=1e-2"),
                  dict(x=_randn(g, 2, 6, scale=4).half(), w=_randn(g, 6).half(), what="float16 x")]
    return cases


@cases("3.2")
def _RMSNorm_cases(g, hidden):
    d = 24 if not hidden else _int(g, 2, 40)
    return [dict(d=d, w=_randn(g, d), x=_randn(g, 2, 3, d), what=f"RMSNorm({d})"),
            dict(d=d, eps=1e-2, w=_randn(g, d), x=_randn(g, 2, d, scale=1e-3), what=f"RMSNorm({d}, eps=1e-2)")]


@cases("4.1")
def _silu_cases(g, hidden):
    cases = [dict(x=torch.linspace(-8, 8, 101), what="x on [-8, 8]"), dict(x=_randn(g, 2, 3, 4), what="x (2, 3, 4)")]
    if hidden:
        cases += [dict(x=torch.tensor([-100.0, -30.0, 0.0, 30.0, 100.0]), what="large |x|"),
                  dict(x=_randn(g, 5, dtype=torch.float64), what="float64 x")]
    return cases


@cases("4.2")
def _swiglu_cases(g, hidden):
    shapes = [(16, 40)] + ([(_int(g, 1, 12), _int(g, 1, 30))] if hidden else [])
    return [dict(x=_randn(g, 3, 5, d), w1=_randn(g, f, d, scale=0.2), w2=_randn(g, d, f, scale=0.2),
                 w3=_randn(g, f, d, scale=0.2), what=f"x (3, 5, {d}), d_ff {f}") for d, f in shapes]


@cases("4.3")
def _SwiGLU_cases(g, hidden):
    d, f = (16, 40) if not hidden else (_int(g, 2, 12), _int(g, 2, 30))
    state = weights(g, {"w1.weight": (f, d), "w2.weight": (d, f), "w3.weight": (f, d)})
    return [dict(d=d, f=f, state=state, x=_randn(g, 2, 7, d), what=f"SwiGLU({d}, {f})")]


@cases("5.1")
def _rope_cases(g, hidden):
    pos = torch.tensor([[7, 0, 3, 100, 2], [1, 1, 1, 1, 1]])
    cases = [dict(pos=torch.arange(6), d_k=8, what="rope_angles(positions 0…5, d_k=8)"),
             dict(pos=pos, d_k=16, theta=500.0, what="rope_angles of batched positions (2, 5), d_k=16, theta=500"),
             dict(x=_randn(g, 2, 6, 8), pos=torch.arange(6), what="x (2, 6, 8), positions 0…5"),
             dict(x=_randn(g, 2, 3, 5, 16), pos=pos.unsqueeze(1), theta=500.0,
                  what="batched positions (2, 1, 5) and theta=500"),
             dict(x=_randn(g, 3, 4, 8), pos=torch.tensor([[0, 1, 2, 3], [9, 4, 4, 60], [2, 3, 5, 7]]),
                  what="x (3, 4, 8), batched positions (3, 4)")]
    if hidden:
        d = 2 * _int(g, 1, 16)
        cases += [dict(pos=torch.randint(0, 4096, (2, 3, 5), generator=g), d_k=d, theta=float(_int(g, 10, 10**5)),
                       what=f"rope_angles of positions (2, 3, 5), d_k={d}"),
                  dict(pos=torch.tensor(_int(g, 0, 100)), d_k=d, what=f"rope_angles of one position (a 0-d tensor), d_k={d}"),
                  dict(x=_randn(g, 3, 7, d), pos=torch.randint(0, 4096, (3, 7), generator=g), theta=float(_int(g, 10, 10**5)),
                       what=f"x (3, 7, {d}) with random positions per batch row (3, 7)"),
                  dict(x=_randn(g, 4, 2, dtype=torch.float64), pos=torch.arange(4), what="float64 x with d_k = 2")]
    return cases


@cases("5.2")
def _RoPE_cases(g, hidden):
    x = _randn(g, 3, 10, 8)
    cases = [dict(theta=10000.0, d_k=8, max_len=64, x=x, pos=torch.tensor([0, 5, 63, 2, 2, 9, 1, 40, 17, 33]),
                  what="RotaryPositionalEmbedding(10000, 8, 64)"),
             dict(theta=10000.0, d_k=8, max_len=64, x=x, pos=torch.randint(0, 64, (3, 10), generator=g),
                  what="RotaryPositionalEmbedding(10000, 8, 64) with batched positions (3, 10)")]
    if hidden:
        d = 2 * _int(g, 1, 12)
        cases += [dict(theta=float(_int(g, 100, 10**5)), d_k=d, max_len=2048, x=_randn(g, 2, 3, 9, d),
                       pos=torch.randint(0, 2048, (2, 1, 9), generator=g),
                       what=f"d_k={d}, max_seq_len=2048, batched positions (2, 1, 9)"),
                  dict(theta=float(_int(g, 100, 10**5)), d_k=d, max_len=512, x=_randn(g, 4, 6, d),
                       pos=torch.randint(0, 512, (4, 6), generator=g),
                       what=f"d_k={d}, max_seq_len=512, batched positions (4, 6)")]
    return cases


@cases("6.1")
def _softmax_cases(g, hidden):
    x = _randn(g, 3, 4, 5)
    cases = [dict(x=x, dim=d, what=f"x (3, 4, 5), dim={d}") for d in (-1, 0, 1)]
    cases.append(dict(x=torch.tensor([[1e4, 0.0, -1e4], [1e4, 1e4, 1e4], [-1e4, -1e4, -1e4]]), dim=-1,
                      what="inputs of ±1e4"))
    if hidden:
        cases += [dict(x=torch.tensor([[0.0, float("-inf"), 1.0], [float("-inf"), 2.0, float("-inf")]]), dim=-1,
                       what="rows with -inf entries"),
                  dict(x=_randn(g, 2, 3, 4, scale=50, dtype=torch.float64), dim=2, what="float64 x, dim=2")]
    return cases


@cases("6.2")
def _sdpa_cases(g, hidden):
    q, k, v = _randn(g, 2, 3, 4, 8), _randn(g, 2, 3, 6, 8), _randn(g, 2, 3, 6, 5)
    mask = torch.rand(4, 6, generator=g) > 0.5
    mask[:, 0], mask[:, 1] = True, False
    cases = [dict(q=q, k=k, v=v, what="4 queries, 6 keys, no mask"), dict(q=q, k=k, v=v, mask=mask, what="a boolean mask")]
    if hidden:
        nq, nk, d, dv = _int(g, 1, 7), _int(g, 1, 9), _int(g, 1, 16), _int(g, 1, 8)
        m2 = torch.rand(2, 1, nq, nk, generator=g) > 0.3
        m2[..., 0] = True
        cases.append(dict(q=_randn(g, 2, 3, nq, d), k=_randn(g, 2, 3, nk, d), v=_randn(g, 2, 3, nk, dv), mask=m2,
                          what=f"a mask (2, 1, {nq}, {nk}) broadcast over heads, d_v={dv}"))
    return cases


@cases("6.3")
def _mhsa_cases(g, hidden):
    d, h = 32, 4
    state, x = weights(g, attention_shapes(d)), _randn(g, 2, 9, d)
    cases = [dict(d=d, heads=h, max_len=32, theta=10000.0, state=state, x=x, what="MultiHeadSelfAttention(32, 4) with RoPE"),
             dict(d=d, heads=h, max_len=32, theta=10000.0, state=state, x=x,
                  pos=torch.tensor([[0, 1, 2, 3, 4, 5, 6, 7, 8], [3, 4, 5, 6, 10, 11, 12, 13, 31]]),
                  what="MultiHeadSelfAttention(32, 4) with RoPE and batched token_positions (2, 9)"),
             dict(d=d, heads=h, state=weights(g, attention_shapes(d)), x=_randn(g, 2, 9, d), what="without RoPE")]
    if hidden:
        h = _int(g, 1, 4)
        d = h * 2 * _int(g, 1, 4)
        cases += [dict(d=d, heads=h, max_len=64, theta=float(_int(g, 100, 10**5)), state=weights(g, attention_shapes(d)),
                       x=_randn(g, 3, 5, d), pos=torch.randint(0, 64, (3, 5), generator=g),
                       what=f"{h} heads, d_model {d}, batched token positions (3, 5)"),
                  # as many batch rows as heads: positions given to RoPE without a heads axis broadcast
                  # silently, each head rotated by another batch row's positions
                  dict(d=d, heads=h, max_len=64, theta=10000.0, state=weights(g, attention_shapes(d)),
                       x=_randn(g, h, 4, d), pos=torch.randint(0, 64, (h, 4), generator=g),
                       what=f"{h} heads, a batch of {h}, batched token positions ({h}, 4)"),
                  dict(d=d, heads=h, max_len=16, theta=10000.0, state=weights(g, attention_shapes(d)), x=_randn(g, 1, 1, d),
                       what="a single token")]
    return cases


@cases("7.1")
def _block_cases(g, hidden):
    d, h, f = 32, 4, 48
    cases = [dict(d=d, heads=h, d_ff=f, max_len=32, theta=10000.0, state=weights(g, block_shapes(d, f)),
                  x=_randn(g, 2, 7, d), what="TransformerBlock(32, 4, 48)")]
    if hidden:
        cases.append(dict(d=16, heads=2, d_ff=24, max_len=64, theta=500.0, state=weights(g, block_shapes(16, 24)),
                          x=_randn(g, 2, 6, 16), pos=torch.randint(0, 64, (6,), generator=g),
                          what="TransformerBlock(16, 2, 24) with explicit positions and theta=500"))
    return cases


@cases("8.1")
def _lm_cases(g, hidden):
    configs = [(97, 32, 32, 2, 4, 48, 10000.0)] + ([(61, 16, 16, 1, 2, 40, 1000.0)] if hidden else [])
    return [dict(config=list(cfg), state=weights(g, lm_shapes(cfg[0], cfg[2], cfg[3], cfg[5])),
                 ids=torch.randint(0, cfg[0], (2, 12 if i == 0 else 16), generator=g),
                 what=f"TransformerLM{tuple(cfg[:6])}") for i, cfg in enumerate(configs)]


@cases("9.1")
def _get_batch_cases(g, hidden):
    off = 0 if not hidden else _int(g, 0, 5000)
    n = 1000 if not hidden else _int(g, 50, 3000)
    return [dict(data=torch.arange(off, off + n), np_dtype="int64", batch=4, ctx=8, seed=_int(g, 0, 10**6), small=True,
                 what=f"{n} int64 tokens, batch 4, context 8"),
            dict(data=torch.arange(off, off + 50), np_dtype="uint16", batch=2, ctx=5, seed=_int(g, 0, 10**6),
                 what="a uint16 dataset")]


# Pieces of text for the hidden BPE cases: repeated words and their overlaps, contractions,
# digits, punctuation, runs of spaces and newlines, and multi-byte characters.
_BPE_PIECES = ("a", "b", "aa", "ab", "ba", "the", "The", "then", "than", " ", " ", " ", "  ", "\n", "\n\n", "'s",
               "'ll", "1", "23", "2024", ".", ",", "!?", "é", "café", "naïve", "🤖", "\t", "x")


@cases("9.2")
def _train_bpe_cases(g, hidden):
    from minilm.course.checks_training import BPE_CORPUS, BPE_MERGES

    cases = [dict(text=BPE_CORPUS, num_merges=BPE_MERGES, what=f"the check's corpus, {BPE_MERGES} merges"),
             dict(text="aaa aaa aaab", num_merges=3, what='"aaa aaa aaab", 3 merges'),
             dict(text="ab ab", num_merges=10, what='"ab ab", 10 merges (only 2 are possible)')]
    if hidden:
        for length, merges in ((_int(g, 20, 80), _int(g, 5, 40)), (_int(g, 150, 400), _int(g, 30, 120))):
            picks = torch.randint(0, len(_BPE_PIECES), (length,), generator=g).tolist()
            cases.append(dict(text="".join(_BPE_PIECES[i] for i in picks), num_merges=merges,
                              what=f"a text of {length} random pieces, {merges} merges"))
        cases.append(dict(text="x", num_merges=_int(g, 0, 3), what="a one-character text"))
    return cases


@cases("10.1")
def _ce_cases(g, hidden):
    cases = [dict(logits=_randn(g, 4, 7), targets=torch.randint(0, 7, (4,), generator=g), what="logits (4, 7)"),
             dict(logits=_randn(g, 2, 3, 11, scale=3), targets=torch.randint(0, 11, (2, 3), generator=g),
                  what="logits (2, 3, 11)"),
             dict(logits=_randn(g, 3, 9, scale=1e4), targets=torch.tensor([0, 4, 8]), what="logits of size ±1e4")]
    if hidden:
        v = _int(g, 2, 40)
        cases += [dict(logits=_randn(g, 2, 2, 2, v), targets=torch.randint(0, v, (2, 2, 2), generator=g),
                       what=f"logits (2, 2, 2, {v})"),
                  dict(logits=_randn(g, 5, v, scale=-1e4), targets=torch.randint(0, v, (5,), generator=g),
                       what="large negative logits")]
    return cases


@cases("10.2")
def _clip_cases(g, hidden):
    out = []
    for scale, max_norm in ((10.0, 1.0), (0.01, 1.0), (3.0, 2.5)) + (((float(_int(g, 1, 20)), 0.5),) if hidden else ()):
        params = [_randn(g, *s) for s in ((3, 4), (5,), (2, 2, 2))]
        out.append(dict(params=params, grads=[_randn(g, *p.shape, scale=scale) for p in params], max_norm=max_norm,
                        what=f"gradients of size ~{scale:g}, max_norm {max_norm:g}"))
    return out


@cases("10.3")
def _lr_cases(g, hidden):
    cases = [dict(args=dict(max_lr=1.0, min_lr=0.1, warmup_iters=7, cosine_cycle_iters=21), its=list(range(25)),
                  what="max_lr 1, min_lr 0.1, warmup 7, cycle 21")]
    if hidden:
        w = _int(g, 1, 20)
        cases.append(dict(args=dict(max_lr=3e-3, min_lr=1e-4, warmup_iters=w, cosine_cycle_iters=w + _int(g, 1, 50)),
                          its=list(range(80)), what="other settings"))
    return cases


@cases("10.4")
def _adamw_cases(g, hidden):
    def case(shapes_by_group, group_hparams, hparams, steps, what):
        init = [[_randn(g, *s) for s in grp] for grp in shapes_by_group]
        flat = [p for grp in init for p in grp]
        return dict(init=init, group_hparams=group_hparams, hparams=hparams,
                    grads=[[_randn(g, *p.shape) for p in flat] for _ in range(steps)], what=what)

    cases = [case([[(4, 3), (5,)]], [{}], dict(lr=0.05, betas=(0.9, 0.99), eps=1e-8, weight_decay=0.5), 6,
                  "6 steps, weight_decay 0.5")]
    if hidden:
        cases.append(case([[(3, 2)], [(4,)]], [{}, {"weight_decay": 0.0, "lr": 0.01}],
                          dict(lr=0.02, betas=(0.8, 0.95), eps=1e-6, weight_decay=0.1), 5, "two parameter groups"))
    return cases


@cases("10.5")
def _ckpt_cases(g, hidden):
    cases = [dict(seed=0, xs=[_randn(g, 5, 4) for _ in range(3)], more=_randn(g, 5, 4), iteration=3, to_path=False,
                  what="a file object")]
    if hidden:
        cases.append(dict(seed=_int(g, 0, 1000), xs=[_randn(g, 5, 4) for _ in range(2)], more=_randn(g, 5, 4),
                          iteration=_int(g, 1, 10**6), to_path=True, what="a path"))
    return cases


@cases("11.1")
def _next_token_probs_cases(g, hidden):
    logits = torch.tensor([4.0, 2.6, 2.2, 1.8, 1.5, 1.2, 1.0, 0.8, 0.5, 0.3, 0.0, -0.5])  # the notebook's
    ties = torch.tensor([1.0, 3.0, 2.0, 3.0, 2.0, 0.5])
    cases = [dict(logits=logits, kw=dict(temperature=0.0), what="greedy"),
             dict(logits=ties, kw=dict(temperature=0.0), what="greedy with two maxima"),
             dict(logits=logits, kw=dict(temperature=0.7), what="temperature 0.7"),
             dict(logits=ties, kw=dict(top_k=3), what="top_k 3 with a tie at the 3rd largest"),
             dict(logits=logits, kw=dict(top_p=0.6), what="top_p 0.6"),
             dict(logits=logits, kw=dict(temperature=0.8, top_k=5, top_p=0.9), what="temperature, top_k and top_p")]
    if hidden:
        vocab = _int(g, 20, 60)
        rows = _randn(g, 3, 2, vocab, scale=2.0)
        # One token holds most of the mass: top_p just above it must keep the token that crosses it too.
        peaked = _randn(g, 4, vocab)
        peaked[:, _int(g, 0, vocab - 1)] += 4.0
        cases += [dict(logits=rows, kw=dict(temperature=1.3, top_p=0.75), what=f"rows (3, 2, {vocab}), top_p 0.75"),
                  dict(logits=rows, kw=dict(top_k=_int(g, 2, 9)), what=f"rows (3, 2, {vocab}), top_k"),
                  dict(logits=rows, kw=dict(temperature=0.0), what=f"rows (3, 2, {vocab}), greedy"),
                  dict(logits=peaked, kw=dict(top_p=0.9), what="top_p 0.9 where one token holds most of the mass"),
                  dict(logits=rows, kw=dict(temperature=0.9, top_k=vocab + 3, top_p=0.5), what="top_k above the vocabulary size"),
                  dict(logits=rows.to(torch.bfloat16), kw=dict(top_p=0.8), what="bfloat16 logits, top_p 0.8")]
    return cases


@cases("11.2")
def _generate_cases(g, hidden):
    vocab, ctx = 23, 12
    table = _randn(g, vocab, vocab, scale=2.0)
    chain = _randn(g, vocab, vocab) + 8.0 * torch.roll(torch.eye(vocab), 1, dims=1)  # token i → i + 1
    prompt = [3, 14, 15, 9, 2]
    cases = [dict(table=table, ctx=ctx, prompt=torch.tensor(prompt), n=15, kw=dict(temperature=0.0),
                  what="greedy, 15 new tokens, past context_length"),
             dict(table=table, ctx=ctx, prompt=torch.tensor(prompt), n=6, gen_seed=3, kw=dict(temperature=0.7, top_k=5),
                  what="temperature 0.7, top_k 5"),
             dict(table=table, ctx=ctx, prompt=torch.tensor(prompt), n=8, gen_seed=4, kw=dict(top_p=1e-6),
                  what="top_p 1e-6 (greedy)"),
             dict(table=chain, ctx=ctx, prompt=torch.tensor([2]), n=10, kw=dict(temperature=0.0, eos_token_id=6),
                  what="eos_token_id 6 (generation must stop right after it)")]
    if hidden:
        # No top_p here (and only top_p 1e-6, greedy for any top_p, above): 11.2's points depend on
        # the loop, not on Task 11.1's top_p.
        cases += [dict(table=table, ctx=ctx, prompt=torch.tensor(prompt), n=10, kw=dict(temperature=0.0),
                       what="a prompt given as a Python list", as_list=True),
                  dict(table=table, ctx=ctx, prompt=torch.arange(ctx + 4) % vocab, n=6, kw=dict(temperature=0.0),
                       what="a prompt longer than context_length"),
                  dict(table=table, ctx=ctx, prompt=torch.tensor(prompt), n=30, gen_seed=_int(g, 0, 10**6),
                       kw=dict(temperature=1.2), what="temperature 1.2, 30 tokens"),
                  dict(table=table, ctx=ctx, prompt=torch.tensor(prompt), n=30, gen_seed=_int(g, 0, 10**6),
                       kw=dict(temperature=0.9, top_k=3), what="temperature 0.9, top_k 3")]
    return cases


@cases("11.3")
def _kv_cases(g, hidden):
    cfg = [53, 12, 16, 2, 2, 24, 10000.0]
    cases = [dict(k1=_randn(g, 1, 2, 3, 4), v1=_randn(g, 1, 2, 3, 4), k2=_randn(g, 1, 2, 1, 4), v2=_randn(g, 1, 2, 1, 4),
                  attn_config=(16, 2, 12), attn_state=weights(g, attention_shapes(16)), x=_randn(g, 2, 10, 16),
                  chunks=[5, 3, 1, 1], config=cfg, state=weights(g, lm_shapes(53, 16, 2, 24)),
                  ids=torch.randint(0, 53, (1, 10), generator=g), prefill=6, n=15,
                  what="a 6-token prompt, then 4 single tokens through the cache")]
    if hidden:
        cases.append(dict(k1=_randn(g, 2, 1, 2, 6), v1=_randn(g, 2, 1, 2, 6), k2=_randn(g, 2, 1, 3, 6),
                          v2=_randn(g, 2, 1, 3, 6), attn_config=(24, 3, 16), attn_state=weights(g, attention_shapes(24)),
                          x=_randn(g, 3, 12, 24), chunks=[1, 4, 2, 1, 4], config=cfg,
                          state=weights(g, lm_shapes(53, 16, 2, 24)), ids=torch.randint(0, 53, (2, 12), generator=g),
                          prefill=1, n=25,
                          what="a batch of 2, a 1-token prompt, and generation past context_length with the cache"))
    return cases


@cases("12.1")
def _quantize_cases(g, hidden):
    w = _randn(g, 6, 10) * torch.tensor([[0.02], [0.5], [1.0], [0.1], [0.05], [3.0]])
    w[2] = 0.0  # an all-zero row
    w[4, 7] = 1.5  # an outlier
    cases = [dict(w=w, per_channel=True, what="a (6, 10) weight with a zero row and an outlier, per channel"),
             dict(w=w, per_channel=False, what="the same weight per tensor")]
    if hidden:
        d_out, d_in = _int(g, 1, 20), _int(g, 1, 40)
        tiny = _randn(g, 3, 5)
        tiny[1] = 1e-44  # max |w| / 127 underflows to 0
        cases += [dict(w=_randn(g, d_out, d_in, scale=50.0), per_channel=True, what=f"a ({d_out}, {d_in}) weight of size ~50"),
                  dict(w=_randn(g, 4, 7, dtype=torch.float64), per_channel=True, what="a float64 weight"),
                  dict(w=_randn(g, 5, 9).to(torch.bfloat16), per_channel=False, what="a bfloat16 weight per tensor"),
                  dict(w=tiny, per_channel=True, what="a row of 1e-44"),
                  dict(w=torch.zeros(2, 3), per_channel=False, what="an all-zero weight per tensor")]
    for c in cases:  # int8 values and positive scales for dequantize_int8, one scale per row or one in all
        rows = c["w"].shape[0] if c["per_channel"] else 1
        c["q"] = torch.randint(-127, 128, tuple(c["w"].shape), generator=g).to(torch.int8)
        c["q_scale"] = torch.rand(rows, 1, generator=g) + 1e-3
    return cases


@cases("12.2")
def _int8_linear_cases(g, hidden):
    cases = [dict(w=_randn(g, 6, 10), x=_randn(g, 3, 4, 10), per_channel=True, what="Int8Linear from a (6, 10) weight"),
             dict(w=_randn(g, 6, 10), x=_randn(g, 3, 4, 10), per_channel=False, what="the same per tensor")]
    if hidden:
        d_out, d_in = _int(g, 1, 24), _int(g, 1, 24)
        cases += [dict(w=_randn(g, d_out, d_in, scale=0.1), x=_randn(g, 2, d_in), per_channel=True,
                       what=f"a ({d_out}, {d_in}) weight"),
                  dict(w=_randn(g, 3, 5), x=_randn(g, 4, 5, dtype=torch.float64), per_channel=True, what="a float64 x")]
    return cases


@cases("12.3")
def _quantize_model_cases(g, hidden):
    configs = [((53, 12, 16, 2, 2, 24, 10000.0), True)] + ([((61, 16, 16, 1, 2, 40, 1000.0), False)] if hidden else [])
    return [dict(config=list(cfg), per_channel=pc, state=weights(g, lm_shapes(cfg[0], cfg[2], cfg[3], cfg[5])),
                 ids=torch.randint(0, cfg[0], (2, 10), generator=g),
                 what=f"TransformerLM{tuple(cfg[:6])}, per_channel={pc}") for cfg, pc in configs]


# 13: the classic Transformer ----------------------------------------------------------------

def _ln_state(g, d: int) -> dict:
    return {"weight": 1 + 0.3 * torch.randn(d, generator=g), "bias": 0.2 * torch.randn(d, generator=g)}


@cases("13.1")
def _layer_norm_cases(g, hidden):
    cases = []
    for shape, scale, offset in (((2, 5, 16), 1.0, 0.5), ((3, 8), 1e-2, 3.0), ((16,), 50.0, -20.0)):
        st = _ln_state(g, shape[-1])
        cases.append(dict(x=_randn(g, *shape, scale=scale) + offset, w=st["weight"], b=st["bias"],
                          what=f"x {shape} with values {offset:g} ± {scale:g}"))
    cases.append(dict(d=24, state=_ln_state(g, 24), x=_randn(g, 2, 3, 24) + 2, what="LayerNorm(24)"))
    if hidden:
        d = _int(g, 2, 40)
        st = _ln_state(g, d)
        cases += [dict(x=_randn(g, 3, d, scale=1e-2), w=st["weight"], b=st["bias"], eps=1e-2, what=f"x (3, {d}) and eps=1e-2"),
                  dict(x=_randn(g, 2, 6, scale=4).half() + 1, w=torch.ones(6).half(), b=torch.zeros(6).half(),
                       what="float16 x"),
                  dict(d=d, eps=1e-2, state=_ln_state(g, d), x=_randn(g, 2, d, scale=1e-2), what=f"LayerNorm({d}, eps=1e-2)")]
    return cases


@cases("13.2")
def _sinusoid_cases(g, hidden):
    cases = [dict(seq=12, d=8, rows=torch.arange(12), what="sinusoidal_positions(12, 8)"),
             dict(seq=64, d=32, rows=torch.arange(64), what="sinusoidal_positions(64, 32)")]
    if hidden:
        seq, d = _int(g, 100, 3000), 2 * _int(g, 1, 40)
        cases += [dict(seq=seq, d=d, rows=torch.randint(0, seq, (20,), generator=g), what=f"sinusoidal_positions({seq}, {d})"),
                  dict(seq=1, d=2, rows=torch.arange(1), what="sinusoidal_positions(1, 2)")]
    return cases


@cases("13.3")
def _gelu_cases(g, hidden):
    cases = [dict(x=torch.linspace(-6, 6, 121), what="x on [-6, 6]"), dict(x=_randn(g, 2, 3, 4, scale=2), what="x (2, 3, 4)")]
    if hidden:
        cases += [dict(x=torch.tensor([-100.0, -30.0, 0.0, 30.0, 100.0]), what="large |x|"),
                  dict(x=_randn(g, 7, scale=3, dtype=torch.float64), what="float64 x")]
    return cases


@cases("13.4")
def _gelu_ffn_cases(g, hidden):
    d, f = (16, 64) if not hidden else (_int(g, 1, 12), _int(g, 1, 40))
    return [dict(d=d, f=f, state=weights(g, {"w1.weight": (f, d), "w2.weight": (d, f)}), x=_randn(g, 2, 7, d),
                 what=f"GeluFFN({d}, {f})")]


_CLASSIC = dict(norm_position="post", norm="layernorm", ffn="gelu", positions="sinusoidal", tied_head=True)


def _classic_shapes(cfg: dict, prefix: str = "") -> dict[str, tuple[int, ...]]:
    d = cfg["d_model"]
    h = cfg.get("d_ff") or (4 * d if cfg.get("ffn") == "gelu" else round(8 * d / 3))
    norm = ["weight"] + (["bias"] if cfg.get("norm") == "layernorm" else [])
    shapes = {f"{prefix}{ln}.{p}": (d,) for ln in ("ln1", "ln2") for p in norm}
    shapes |= attention_shapes(d, f"{prefix}attn.")
    shapes |= {f"{prefix}ffn.w1.weight": (h, d), f"{prefix}ffn.w2.weight": (d, h)}
    if cfg.get("ffn", "swiglu") == "swiglu":
        shapes[f"{prefix}ffn.w3.weight"] = (h, d)
    return shapes


@cases("13.5")
def _classic_block_cases(g, hidden):
    base = dict(vocab_size=97, context_length=32, d_model=32, num_layers=1, num_heads=4)
    variants = [{}, dict(norm_position="post"), dict(norm="layernorm"), dict(ffn="gelu"), dict(positions="none"), _CLASSIC]
    cases = []
    for v in variants:
        cfg = base | v
        cases.append(dict(config=cfg, state=weights(g, _classic_shapes(cfg)), x=_randn(g, 2, 7, 32),
                          what=f"ClassicBlock with {v or 'the modern config'}"))
    if hidden:
        h = _int(g, 1, 3)
        d = 2 * h * _int(g, 1, 4)
        cfg = dict(vocab_size=50, context_length=64, d_model=d, num_layers=1, num_heads=h, d_ff=_int(g, 1, 40),
                   rope_theta=float(_int(g, 100, 10**5)), norm_position="post")
        cases.append(dict(config=cfg, state=weights(g, _classic_shapes(cfg)), x=_randn(g, 3, 5, d),
                          pos=torch.randint(0, 64, (3, 5), generator=g),
                          what=f"a post-norm RoPE block, d_model {d}, {h} heads, batched token positions"))
        cfg = cfg | _CLASSIC | dict(norm_position="pre")
        cases.append(dict(config=cfg, state=weights(g, _classic_shapes(cfg)), x=_randn(g, 1, 1, d),
                          what="a pre-norm LayerNorm GELU block on a single token"))
    return cases


def _classic_lm_shapes(cfg: dict) -> dict[str, tuple[int, ...]]:
    d, v = cfg["d_model"], cfg["vocab_size"]
    shapes = {"token_embeddings.weight": (v, d)}
    if cfg.get("positions") == "learned":
        shapes["position_embeddings.weight"] = (cfg["context_length"], d)
    for i in range(cfg["num_layers"]):
        shapes |= _classic_shapes(cfg, f"layers.{i}.")
    if cfg.get("norm_position", "pre") == "pre":
        shapes |= {f"ln_final.{p}": (d,) for p in ["weight"] + (["bias"] if cfg.get("norm") == "layernorm" else [])}
    return shapes | {"lm_head.weight": (v, d)}


def _classic_lm_state(g, cfg: dict) -> dict:
    state = weights(g, _classic_lm_shapes(cfg))
    if cfg.get("tied_head"):
        state["lm_head.weight"] = state["token_embeddings.weight"]
    return state


@cases("13.6")
def _classic_lm_cases(g, hidden):
    base = dict(vocab_size=97, context_length=32, d_model=32, num_layers=2, num_heads=4)
    variants = [{}, dict(norm_position="post"), dict(norm="layernorm"), dict(ffn="gelu"), dict(positions="sinusoidal"),
                dict(positions="learned"), dict(positions="none"), dict(tied_head=True), _CLASSIC]
    cases = []
    for v in variants:
        cfg = base | v
        cases.append(dict(config=cfg, state=_classic_lm_state(g, cfg), ids=torch.randint(0, 97, (2, 12), generator=g),
                          what=f"ClassicLM with {v or 'the modern config'}"))
    if hidden:
        cfg = dict(vocab_size=61, context_length=16, d_model=16, num_layers=1, num_heads=2, positions="learned",
                   tied_head=True, norm="layernorm")
        cases.append(dict(config=cfg, state=_classic_lm_state(g, cfg), ids=torch.randint(0, 61, (3, 16), generator=g),
                          what="a tied head with learned positions over the full context"))
        cfg = base | _CLASSIC | dict(d_ff=_int(g, 8, 80), num_layers=3)
        cases.append(dict(config=cfg, state=_classic_lm_state(g, cfg), ids=torch.randint(0, 97, (1, 32), generator=g),
                          what="the classic model, 3 layers, over the full context"))
    return cases
