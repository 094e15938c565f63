"""Checks for the data, training and generation tasks 9.1–11.2 (provided). See minilm/checks.py.

Every check compares with an independent oracle: torch.nn.functional.cross_entropy,
torch.nn.utils.clip_grad_norm_, torch.optim.AdamW, CS336's schedule written out, and the
model's own full forward pass for the KV cache and generation.
"""

from __future__ import annotations

import io
import math

import numpy as np
import torch
import torch.nn.functional as F

import minilm
from minilm import oracles
from minilm.checks import CheckFailed, compare, expect, register

# A small model for the generation and cache checks: fast, but with every code path.
VOCAB, CONTEXT, D_MODEL, LAYERS, HEADS, D_FF = 53, 12, 16, 2, 2, 24


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _small_lm(seed: int = 0):
    torch.manual_seed(seed)
    return minilm.TransformerLM(VOCAB, CONTEXT, D_MODEL, LAYERS, HEADS, D_FF)


# ---------------------------------------------------------------- 9: get_batch

@register("9.1")
def check_get_batch() -> str:
    data = np.arange(1000, dtype=np.int64)  # token i is i: the windows' starts are visible
    x, y = minilm.get_batch(data, 4, 8, "cpu")
    for name, t in (("x", x), ("y", y)):
        expect(isinstance(t, torch.Tensor), f"get_batch returned {name} of type {type(t).__name__}, expected a tensor")
        expect(tuple(t.shape) == (4, 8), f"{name} has shape {tuple(t.shape)}, expected (batch_size, context_length) = (4, 8)")
        expect(t.dtype == torch.long, f"{name} has dtype {t.dtype}, expected torch.long (int64)")
    expect(bool((x[:, 1:] - x[:, :-1] == 1).all()), "each row of x must be consecutive tokens dataset[i : i + context_length]")
    expect(not torch.equal(y, x), "y equals x: the targets must be the inputs shifted by one (y = dataset[i + 1 : i + 1 + context_length])",
           "targets_not_shifted")
    expect(torch.equal(y, x + 1), "y must be x shifted by one: y[b, t] = dataset[i + t + 1], the token that follows x[b, t]",
           "targets_not_shifted")
    # Starts must cover 0 … len − context_length − 1: with len = context_length + 3 there are three.
    small = np.arange(11, dtype=np.int64)
    torch.manual_seed(0)
    starts = set(minilm.get_batch(small, 300, 8, "cpu")[0][:, 0].tolist())
    expect(starts == {0, 1, 2}, f"with 11 tokens and context_length 8 the valid starts are 0, 1 and 2 (uniformly), "
           f"got starts {sorted(starts)}", "start_range")
    memmap_like = np.arange(50, dtype=np.uint16)
    x16, y16 = minilm.get_batch(memmap_like, 2, 5, "cpu")
    expect(x16.dtype == torch.long and torch.equal(y16, x16 + 1), "a uint16 dataset must also give int64 (x, y) shifted by one")
    return "(x, y) are int64 windows shifted by one, starts uniform over every valid offset"


# ---------------------------------------------------------------- 10: training

@register("10.1")
def check_cross_entropy() -> str:
    cases = [
        (torch.randn(4, 7, generator=_gen(1)), torch.randint(0, 7, (4,), generator=_gen(2))),
        (torch.randn(2, 3, 11, generator=_gen(3)) * 3, torch.randint(0, 11, (2, 3), generator=_gen(4))),
        (torch.randn(1, 5, generator=_gen(5)), torch.tensor([4])),
        (torch.randn(2, 2, 2, 13, generator=_gen(6)), torch.randint(0, 13, (2, 2, 2), generator=_gen(7))),
    ]
    for i, (logits, targets) in enumerate(cases):
        got = minilm.cross_entropy(logits, targets)
        want = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))
        compare(got, want, f"cross_entropy for logits of shape {tuple(logits.shape)}", {
            "sum_not_mean": (lambda lo=logits, t=targets: F.cross_entropy(lo.reshape(-1, lo.shape[-1]), t.reshape(-1),
                                                                           reduction="sum"),
                             "you summed the losses; the contract is the mean over every position"),
        })
    for scale in (1e4, -1e4):
        logits = torch.randn(3, 9, generator=_gen(8)) * scale
        targets = torch.tensor([0, 4, 8])
        got = minilm.cross_entropy(logits, targets)
        want = F.cross_entropy(logits, targets)
        if isinstance(got, torch.Tensor) and not torch.isfinite(got).all():
            raise CheckFailed(f"cross_entropy gives {got.item()} for logits of size ±1e4: exp overflows. Use the "
                              "log-sum-exp trick: subtract the max logit before exp and add it back after the log",
                              "no_logsumexp")
        compare(got, want, f"cross_entropy for logits scaled by {scale:g}", rtol=1e-4, atol=1e-3)
    return "matches F.cross_entropy on 4 cases, stable at ±1e4"


def _grads(seed: int, scale: float) -> list[torch.nn.Parameter]:
    g = _gen(seed)
    params = [torch.nn.Parameter(torch.randn(*s, generator=g)) for s in ((3, 4), (5,), (2, 2, 2))]
    for p in params:
        p.grad = torch.randn(p.shape, generator=g) * scale
    return params


@register("10.2")
def check_clip_grad_norm() -> str:
    for scale, max_norm in ((10.0, 1.0), (0.01, 1.0), (3.0, 2.5)):
        mine, ref = _grads(1, scale), _grads(1, scale)
        no_grad = torch.nn.Parameter(torch.ones(3))  # .grad is None: must be skipped
        norm = minilm.clip_grad_norm(mine + [no_grad], max_norm)
        want_norm = torch.nn.utils.clip_grad_norm_(ref, max_norm)
        compare(torch.as_tensor(norm, dtype=torch.float32).reshape(()), want_norm, "the returned norm (before clipping)", {
            "per_parameter_clipping": (lambda s=scale: torch.stack([p.grad.norm() for p in _grads(1, s)]).norm(),
                                       "the norm must be one global norm over all parameters' gradients"),
        })
        per_param = _grads(1, scale)
        for p in per_param:
            torch.nn.utils.clip_grad_norm_([p], max_norm)
        for i, (p, q) in enumerate(zip(mine, ref)):
            compare(p.grad, q.grad, f"the gradient of parameter {i} after clipping to {max_norm}", {
                "per_parameter_clipping": (per_param[i].grad, "you clipped per parameter, each on its own; "
                                           "compute ONE norm over all gradients and scale them all by the same factor"),
            })
        expect(no_grad.grad is None, "a parameter without a gradient must be left alone (its .grad stays None)")
    return "matches clip_grad_norm_ above and below max_norm, one global norm"


def _cosine_oracle(it, max_lr, min_lr, warmup, cycle):
    if it < warmup:
        return max_lr * it / warmup
    if it > cycle:
        return min_lr
    return min_lr + (max_lr - min_lr) * (1 + math.cos(math.pi * (it - warmup) / (cycle - warmup))) / 2


@register("10.3")
def check_lr_cosine_schedule() -> str:
    args = dict(max_lr=1.0, min_lr=0.1, warmup_iters=7, cosine_cycle_iters=21)
    its = list(range(25))
    got = torch.tensor([float(minilm.lr_cosine_schedule(it, **args)) for it in its], dtype=torch.float64)
    want = torch.tensor([_cosine_oracle(it, 1.0, 0.1, 7, 21) for it in its], dtype=torch.float64)
    shifted = torch.tensor([_cosine_oracle(it + 1, 1.0, 0.1, 7, 21) if it < 7 else want[it].item() for it in its],
                           dtype=torch.float64)
    compare(got, want, "the learning rates for it = 0 … 24 (max_lr 1, min_lr 0.1, warmup 7, cycle 21)", {
        "warmup_off_by_one": (shifted, "the warmup is off by one: at it = 0 the rate must be 0, rising as "
                              "it / warmup_iters · max_lr to max_lr at it = warmup_iters"),
    }, atol=1e-9, rtol=1e-9)
    return "matches CS336's schedule for 25 iterations: warmup, cosine and the floor"


def _adam_reference(params, grads, lr, betas, eps, wd, *, l2=False, bias_correction=True) -> list[torch.Tensor]:
    """Adam variants written out, for naming mistakes (the correct one is torch.optim.AdamW)."""
    ps = [p.detach().clone() for p in params]
    m = [torch.zeros_like(p) for p in ps]
    v = [torch.zeros_like(p) for p in ps]
    for t, step_grads in enumerate(grads, start=1):
        for i, g in enumerate(step_grads):
            if l2:
                g = g + wd * ps[i]
            else:
                ps[i] = ps[i] * (1 - lr * wd)
            m[i] = betas[0] * m[i] + (1 - betas[0]) * g
            v[i] = betas[1] * v[i] + (1 - betas[1]) * g * g
            mh, vh = (m[i] / (1 - betas[0] ** t), v[i] / (1 - betas[1] ** t)) if bias_correction else (m[i], v[i])
            ps[i] = ps[i] - lr * mh / (vh.sqrt() + eps)
    return ps


@register("10.4")
def check_adamw() -> str:
    lr, betas, eps, wd, steps = 0.05, (0.9, 0.99), 1e-8, 0.5, 6
    init = [torch.randn(4, 3, generator=_gen(1)), torch.randn(5, generator=_gen(2))]
    grads = [[torch.randn(p.shape, generator=_gen(10 * t + i)) for i, p in enumerate(init)] for t in range(steps)]

    def run(opt_class):
        params = [torch.nn.Parameter(p.clone()) for p in init]
        opt = opt_class(params, lr=lr, betas=betas, eps=eps, weight_decay=wd)
        for step_grads in grads:
            for p, g in zip(params, step_grads):
                p.grad = g.clone()
            opt.step()
        return [p.detach() for p in params]

    got, want = run(minilm.AdamW), run(torch.optim.AdamW)
    for i, (g, w) in enumerate(zip(got, want)):
        compare(g, w, f"parameter {i} after {steps} steps (weight_decay {wd})", {
            "adam_l2": (_adam_reference(init, grads, lr, betas, eps, wd, l2=True)[i],
                        "you added weight_decay · p to the gradient (Adam with L2); AdamW's decay is decoupled: "
                        "p ← p − lr · weight_decay · p, separately from the moments"),
            "no_bias_correction": (_adam_reference(init, grads, lr, betas, eps, wd, bias_correction=False)[i],
                                   "missing bias correction: divide m by 1 − β1ᵗ and v by 1 − β2ᵗ (t counts from 1)"),
        })
    # A schedule changes group["lr"] between steps: the optimizer must read it each step.
    p = torch.nn.Parameter(torch.ones(3))
    opt = minilm.AdamW([p], lr=0.1, weight_decay=0.0)
    opt.param_groups[0]["lr"] = 0.0
    p.grad = torch.ones(3)
    opt.step()
    expect(torch.equal(p.detach(), torch.ones(3)), "after setting param_groups[0]['lr'] = 0 a step must not move the "
           "parameters: read lr from the param group at every step")
    return f"matches torch.optim.AdamW for {steps} steps, decoupled decay and bias correction"


@register("10.5")
def check_checkpoint() -> str:
    def setup(seed):
        torch.manual_seed(seed)
        model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Linear(8, 2))
        return model, torch.optim.AdamW(model.parameters(), lr=0.01)

    def train_step(model, opt, seed):
        x = torch.randn(5, 4, generator=_gen(seed))
        opt.zero_grad()
        model(x).pow(2).mean().backward()
        opt.step()

    model, opt = setup(0)
    for s in range(3):
        train_step(model, opt, s)
    buffer = io.BytesIO()
    minilm.save_checkpoint(model, opt, 3, buffer)
    buffer.seek(0)
    model2, opt2 = setup(1)  # different weights and no optimizer state yet
    iteration = minilm.load_checkpoint(buffer, model2, opt2)
    expect(iteration == 3, f"load_checkpoint returned {iteration!r}, expected the saved iteration 3")
    for (name, a), b in zip(model.state_dict().items(), model2.state_dict().values()):
        compare(b, a, f"the restored model's {name}")
    # Resuming must continue exactly: the optimizer's moments and step counts are restored too.
    train_step(model, opt, 9)
    train_step(model2, opt2, 9)
    for (name, a), b in zip(model.state_dict().items(), model2.state_dict().values()):
        compare(b, a, f"{name} after one more step from the restored checkpoint "
                "(save and restore the optimizer's state_dict too)")
    return "model, optimizer state and iteration round-trip through a file object"


# ---------------------------------------------------------------- 11: generation and the KV cache

def _greedy_oracle(model, prompt: list[int], n: int) -> list[int]:
    """Greedy decoding by full forward passes over the last context_length tokens."""
    ids = list(prompt)
    with torch.no_grad():
        for _ in range(n):
            logits = model(torch.tensor([ids[-model.context_length:]]))
            ids.append(int(logits[0, -1].argmax()))
    return ids


@register("11.1")
def check_generate() -> str:
    model = _small_lm(0)
    prompt = [3, 14, 15, 9, 2]
    want = _greedy_oracle(model, prompt, 15)  # 20 tokens: past context_length 12
    for use_cache in (False, True):
        got = minilm.generate(model, torch.tensor(prompt), 15, temperature=0.0, use_cache=use_cache)
        expect(isinstance(got, torch.Tensor) and got.ndim == 1,
               f"generate must return a 1-D tensor of token ids, got {got!r:.60}")
        expect(got[: len(prompt)].tolist() == prompt, "the output must start with the prompt")
        expect(got.tolist() == want, f"greedy generation (temperature 0, use_cache={use_cache}) differs from the argmax "
               f"of the model's logits over the last context_length tokens at step "
               f"{next((i for i, (a, b) in enumerate(zip(got.tolist(), want)) if a != b), len(want)) - len(prompt)}")
    # Sampling: the same generator seed gives the oracle's draws from softmax(logits / T), top-k filtered.
    got = minilm.generate(model, prompt, 6, temperature=0.7, top_k=5, use_cache=False, generator=_gen(3))
    g, ids = _gen(3), list(prompt)
    with torch.no_grad():
        for _ in range(6):
            logits = model(torch.tensor([ids[-CONTEXT:]]))[0, -1] / 0.7
            logits[logits < logits.topk(5).values[-1]] = float("-inf")
            ids.append(int(torch.multinomial(torch.softmax(logits, -1), 1, generator=g)))
    expect(got.tolist() == ids, "sampling with temperature 0.7 and top_k 5 differs from torch.multinomial on "
           "softmax(logits / temperature) restricted to the 5 largest logits (with the same generator)")
    # top_p that only the most likely token reaches must be greedy; eos stops right after it.
    nucleus = minilm.generate(model, prompt, 8, top_p=1e-6, use_cache=False, generator=_gen(4))
    expect(nucleus.tolist() == want[: len(prompt) + 8], "top_p = 1e-6 must keep only the most likely token (greedy)")
    eos = want[len(prompt) + 2]
    stopped = minilm.generate(model, prompt, 10, temperature=0.0, eos_token_id=eos)
    expect(stopped.tolist() == want[: want.index(eos, len(prompt)) + 1],
           "with eos_token_id, generation must stop right after emitting it (and include it)")
    return "greedy matches the model's argmax past context_length with and without cache; top-k, top-p, eos"


@register("11.2")
def check_kv_cache() -> str:
    cache = minilm.KVCache()
    expect(len(cache) == 0, f"a new KVCache must have len 0, got {len(cache)}")
    k1, v1 = torch.randn(1, 2, 3, 4, generator=_gen(1)), torch.randn(1, 2, 3, 4, generator=_gen(2))
    k2, v2 = torch.randn(1, 2, 1, 4, generator=_gen(3)), torch.randn(1, 2, 1, 4, generator=_gen(4))
    cache.update(k1, v1)
    k, v = cache.update(k2, v2)
    compare(k, torch.cat((k1, k2), dim=-2), "the keys returned by the second update (the cached ones, then the new)")
    compare(v, torch.cat((v1, v2), dim=-2), "the values returned by the second update")
    expect(len(cache) == 4, f"after caching 3 + 1 positions len(cache) must be 4, got {len(cache)}")

    model = _small_lm(1)
    ids = torch.randint(0, VOCAB, (1, 10), generator=_gen(5))
    sd = {k: v.detach() for k, v in model.state_dict().items()}
    with torch.no_grad():
        want = oracles.transformer_lm(ids, sd, HEADS)  # (1, 10, vocab): all positions at once, no cache
        cache = model.make_kv_cache()
        got = [model(ids[:, :6], kv_cache=cache)]
        got += [model(ids[:, t : t + 1], kv_cache=cache) for t in range(6, 10)]  # one new token at a time
        got = torch.cat(got, dim=1)

        def positions_restart():  # what a model that gives every new token position 0 computes
            x = model.token_embeddings(ids)
            wrong, c = [], model.make_kv_cache()
            for start, end in [(0, 6)] + [(t, t + 1) for t in range(6, 10)]:
                h = x[:, start:end]
                for layer, lc in zip(model.layers, c):
                    h = layer(h, torch.arange(end - start), lc)
                wrong.append(model.lm_head(model.ln_final(h)))
            return torch.cat(wrong, dim=1)

    compare(got, want, "the logits of a 6-token prompt then 4 single tokens through the cache, vs one full forward", {
        "cache_position_zero": (positions_restart, "each new token was rotated as if at position 0: with a cache, "
                                "positions must continue from len(cache) (RoPE needs the true position)"),
    })
    expect(len(cache[0]) == 10, f"after 10 tokens every layer's cache must hold 10 positions, got {len(cache[0])}")
    return "cached step-by-step logits match a full forward pass over 10 tokens"
