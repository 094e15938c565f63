"""Checks for the data, training and generation tasks 9.1–11.3 (provided). See minilm/course/checks.py.

Every check compares with the reference's outputs on the same inputs, stored in
minilm/course/expected.pt, or with an invariant: get_batch's windows, a checkpoint's round trip, the
KV cache's logits against your own model's full forward pass. The sampling filter (11.1) is
checked on fixed logits, and generate (11.2) on a fixed stand-in model (`ToyLM`) without a
cache, so neither needs the KV cache of 11.3.
"""

from __future__ import annotations

import io

import numpy as np
import torch
from torch import nn

import minilm
from minilm.course.checks import CheckFailed, compare, expect, mistake_output, reference, register
from minilm.course.checks_model import _fixed_state

# A small model for the cache check: fast, but with every code path.
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
    expect(starts != {0, 1}, "with 11 tokens and context_length 8 the valid starts are 0, 1 and 2, but 2 "
           "(= len(dataset) − context_length − 1) was never drawn in 300 draws: torch.randint's high is exclusive, "
           "so torch.randint(0, len(dataset) − context_length, …) already includes the last start",
           "last_start_never_drawn")
    expect(starts == {0, 1, 2}, f"with 11 tokens and context_length 8 the valid starts are 0, 1 and 2 (uniformly), "
           f"got starts {sorted(starts)}", "start_range")
    memmap_like = np.arange(50, dtype=np.uint16)
    x16, y16 = minilm.get_batch(memmap_like, 2, 5, "cpu")
    expect(x16.dtype == torch.long and torch.equal(y16, x16 + 1), "a uint16 dataset must also give int64 (x, y) shifted by one")
    return "(x, y) are int64 windows shifted by one, starts uniform over every valid offset"


# ---------------------------------------------------------------- 9.2: train_bpe

# A small corpus where every rule of the docstring decides some merge: repeated words (counts
# weighted by frequency), ties, pre-token boundaries, "aaa" (overlapping pairs), multi-byte
# characters, a contraction and digits.
BPE_CORPUS = ("low low low low low lower lower newest newest newest newest newest newest widest widest widest\n"
              "aaa aaa aaab baaa ab ab ba\n"
              "It's a café; we'll see cafés, 2024 and 2025!\n")
BPE_MERGES = 40
BPE_MISTAKES = {
    "bpe_no_pretokenization": "your merges cross pre-token boundaries: split the text with regex.finditer(GPT2_PATTERN, "
                          "text) first and count pairs only inside each chunk",
    "bpe_tie_smallest_pair": "on a tie you took the smallest pair; the rule is the lexicographically greatest "
                         "(the max of (count, pair))",
    "bpe_counts_not_weighted": "count each chunk's pairs as many times as the chunk occurs in the text, not once per "
                           "distinct chunk",
    "bpe_merges_right_to_left": "replace a pair's occurrences left to right: with the merge (a, a), \"aaa\" becomes "
                            "[aa, a], not [a, aa]",
}


def _bpe_result(result, call: str) -> tuple[dict, list]:
    """train_bpe's (vocab, merges), after checking their types (a clear line instead of a crash below)."""
    expect(isinstance(result, tuple) and len(result) == 2,
           f"{call} returned {type(result).__name__}, expected a tuple (vocab, merges)")
    vocab, merges = result
    expect(isinstance(vocab, dict), f"{call}: vocab must be a dict {{id: bytes}}, got {type(vocab).__name__}")
    expect(isinstance(merges, list), f"{call}: merges must be a list of (bytes, bytes) pairs, got {type(merges).__name__}")
    for k, m in enumerate(merges):
        expect(isinstance(m, tuple) and len(m) == 2 and all(isinstance(p, bytes) for p in m),
               f"{call}: merges[{k}] must be a pair (bytes, bytes), got {m!r}")
    return result


def _merge_ids(merges: list[tuple[bytes, bytes]]) -> torch.Tensor:
    """Merges as (left id, right id) rows: ids 0–255 the bytes, 256 + k the k-th merge's token (-1 if unknown)."""
    ids = {bytes([i]): i for i in range(256)}
    rows = []
    for k, (left, right) in enumerate(merges):
        rows.append([ids.get(left, -1), ids.get(right, -1)])
        ids.setdefault(left + right, 256 + k)
    return torch.tensor(rows, dtype=torch.long).reshape(-1, 2)


def _merges_of(ids: torch.Tensor) -> list[tuple[bytes, bytes]]:
    tokens = [bytes([i]) for i in range(256)]
    merges = []
    for left, right in ids.tolist():
        merges.append((tokens[left], tokens[right]))
        tokens.append(tokens[left] + tokens[right])
    return merges


def _compare_merges(merges: list, what: str, mistakes: dict[str, str]) -> None:
    got = _merge_ids(merges)
    want = reference(what, got, tuple(mistakes))
    if torch.equal(got, want):
        return
    for label, advice in mistakes.items():
        out = mistake_output(label, what)
        if out is not None and torch.equal(got, out):
            raise CheckFailed(f"{what}: {advice}", label)
    expected = _merges_of(want)
    first = next((k for k, (a, b) in enumerate(zip(merges, expected)) if a != b), None)
    if first is None:
        raise CheckFailed(f"{what}: you returned {len(merges)} merges, expected {len(expected)}")
    raise CheckFailed(f"{what}: merge {first} is {merges[first]!r}, expected {expected[first]!r} (the most frequent "
                      "pair over the chunks, each weighted by its count; a tie goes to the greatest pair)")


@register("9.2")
def check_train_bpe() -> str:
    call = f"train_bpe(the check's corpus, {BPE_MERGES})"
    vocab, merges = _bpe_result(minilm.train_bpe(BPE_CORPUS, BPE_MERGES), call)
    _compare_merges(merges, f"the {BPE_MERGES} merges learned from the check's corpus", BPE_MISTAKES)
    expect(sorted(vocab) == list(range(256 + len(merges))),
           f"{call}: vocab's ids must be 0 … 255 + len(merges) = {255 + len(merges)}, one per byte and per merge")
    expect(all(vocab[i] == bytes([i]) for i in range(256)), f"{call}: vocab[i] must be bytes([i]) for i = 0 … 255")
    expect(all(vocab[256 + k] == a + b for k, (a, b) in enumerate(merges)),
           f"{call}: vocab[256 + k] must be the bytes of merges[k] joined, left + right")
    # Overlapping occurrences: "aaa" holds (a, a) twice, and merging it left to right leaves [aa, a].
    _, aaa = _bpe_result(minilm.train_bpe("aaa aaa aaab", 3), 'train_bpe("aaa aaa aaab", 3)')
    _compare_merges(aaa, 'the 3 merges learned from "aaa aaa aaab"', {
        "bpe_merges_right_to_left": BPE_MISTAKES["bpe_merges_right_to_left"]})
    vocab0, merges0 = _bpe_result(minilm.train_bpe(BPE_CORPUS, 0), "train_bpe(the check's corpus, 0)")
    expect(merges0 == [] and sorted(vocab0) == list(range(256)),
           "with num_merges = 0 the merges must be [] and vocab the 256 single bytes")
    # " ab" and "ab" become single tokens after two merges: then there is no pair left to merge.
    _, few = _bpe_result(minilm.train_bpe("ab ab", 10), 'train_bpe("ab ab", 10)')
    expect(len(few) == 2, f"train_bpe('ab ab', 10) made {len(few)} merges; after (b'a', b'b') and (b' ', b'ab') "
                          "every chunk is one token, so training must stop there, with 2 merges")
    return (f"the {BPE_MERGES} merges of the check's corpus match, vocab = 256 bytes + one token per merge, "
            "stops when no pair is left")


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
        compare(got, f"cross_entropy for logits of shape {tuple(logits.shape)}", {
            "sum_not_mean": "you summed the losses; the contract is the mean over every position",
        })
    for scale in (1e4, -1e4):
        logits = torch.randn(3, 9, generator=_gen(8)) * scale
        targets = torch.tensor([0, 4, 8])
        got = minilm.cross_entropy(logits, targets)
        if isinstance(got, torch.Tensor) and not torch.isfinite(got).all():
            raise CheckFailed(f"cross_entropy gives {got.item()} for logits of size ±1e4: exp overflows. Use the "
                              "log-sum-exp trick: subtract the max logit before exp and add it back after the log",
                              "no_logsumexp")
        compare(got, f"cross_entropy for logits scaled by {scale:g}", rtol=1e-4, atol=1e-3)
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
        mine = _grads(1, scale)
        no_grad = torch.nn.Parameter(torch.ones(3))  # .grad is None: must be skipped
        norm = minilm.clip_grad_norm(mine + [no_grad], max_norm)
        compare(torch.as_tensor(norm, dtype=torch.float32).reshape(()), "the returned norm (before clipping)", {
            "per_parameter_clipping": "the norm must be one global norm over all parameters' gradients",
        })
        for i, p in enumerate(mine):
            compare(p.grad, f"the gradient of parameter {i} after clipping to {max_norm}", {
                "per_parameter_clipping": "you clipped per parameter, each on its own; "
                                          "compute ONE norm over all gradients and scale them all by the same factor",
            })
        expect(no_grad.grad is None, "a parameter without a gradient must be left alone (its .grad stays None)")
    return "matches clip_grad_norm_ above and below max_norm, one global norm"


@register("10.3")
def check_lr_cosine_schedule() -> str:
    args = dict(max_lr=1.0, min_lr=0.1, warmup_iters=7, cosine_cycle_iters=21)
    its = list(range(25))
    got = torch.tensor([float(minilm.lr_cosine_schedule(it, **args)) for it in its], dtype=torch.float64)
    compare(got, "the learning rates for it = 0 … 24 (max_lr 1, min_lr 0.1, warmup 7, cycle 21)", {
        "warmup_off_by_one": "the warmup is off by one: at it = 0 the rate must be 0, rising as "
                             "it / warmup_iters · max_lr to max_lr at it = warmup_iters",
        "cosine_past_cycle": "after cosine_cycle_iters the rate stays at min_lr, but yours follows the cosine back up: "
                             "return min_lr for it > cosine_cycle_iters",
    }, atol=1e-9, rtol=1e-9)
    return "matches CS336's schedule for 25 iterations: warmup, cosine and the floor"


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

    for i, g in enumerate(run(minilm.AdamW)):
        compare(g, f"parameter {i} after {steps} steps (weight_decay {wd})", {
            "adam_l2": "you added weight_decay · p to the gradient (Adam with L2); AdamW's decay is decoupled: "
                       "p ← p − lr · weight_decay · p, separately from the moments",
            "no_bias_correction": "missing bias correction: divide m by 1 − β1ᵗ and v by 1 − β2ᵗ (t counts from 1)",
            "decay_without_lr": "your decay is p ← p − weight_decay · p; AdamW decays by weight_decay times the learning "
                                "rate: p ← p − lr · weight_decay · p (so the schedule scales the decay too)",
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


class _Momentum(torch.optim.Optimizer):
    """SGD with momentum: a stand-in optimizer whose state (a buffer per parameter) a checkpoint
    must keep. Not torch's own optimizers: their step imports torch._dynamo, a second of every
    `minilm status`."""

    def __init__(self, params, lr: float = 0.01, beta: float = 0.9):
        super().__init__(params, dict(lr=lr, beta=beta))

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is not None:
                    buf = self.state[p].setdefault("momentum", torch.zeros_like(p))
                    buf.mul_(group["beta"]).add_(p.grad)
                    p.add_(buf, alpha=-group["lr"])


@register("10.5")
def check_checkpoint() -> str:
    def setup(seed):
        torch.manual_seed(seed)
        model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Linear(8, 2))  # release: not a task (a model to checkpoint)
        return model, _Momentum(model.parameters(), lr=0.01)

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
        compare(b, f"the restored model's {name}", want=a)
    # Resuming must continue exactly: the optimizer's moments and step counts are restored too.
    train_step(model, opt, 9)
    train_step(model2, opt2, 9)
    for (name, a), b in zip(model.state_dict().items(), model2.state_dict().values()):
        compare(b, f"{name} after one more step from the restored checkpoint "
                "(save and restore the optimizer's state_dict too)", want=a)
    return "model, optimizer state and iteration round-trip through a file object"


# ---------------------------------------------------------------- 11: generation and the KV cache

class _Window(list):
    """ToyLM's stand-in KV cache: the token ids it has seen (len = positions cached)."""


class ToyLM(nn.Module):
    """A fixed stand-in language model for the generation checks, so Task 11.2 is checked on
    generate alone (no TransformerLM, no KVCache). Each position's logits mix a token table with
    the running mean over the window fed so far, so cropping the context to context_length
    matters; with a cache (make_kv_cache), the window continues from the cached tokens, as a
    real model's would."""

    def __init__(self, table: torch.Tensor, context_length: int):
        super().__init__()
        self.table, self.context_length = nn.Parameter(table.clone(), requires_grad=False), context_length
        self.fed: list[int] = []  # how many new tokens each call was given

    def make_kv_cache(self) -> list[_Window]:
        return [_Window()]

    def forward(self, token_ids: torch.Tensor, kv_cache: list[_Window] | None = None) -> torch.Tensor:
        past = list(kv_cache[0]) if kv_cache is not None else []
        window = [*past, *token_ids.reshape(-1).tolist()]
        self.fed.append(token_ids.shape[-1])
        if len(window) > self.context_length:
            raise ValueError(f"generate fed the check's stand-in model {len(past)} cached + {token_ids.shape[-1]} new "
                             f"tokens, more than its context_length {self.context_length}: crop to the last "
                             "context_length tokens (with a cache: start a fresh one when it is full)")
        if kv_cache is not None:
            kv_cache[0].extend(token_ids.reshape(-1).tolist())
        rows = self.table[torch.tensor(window)]  # (window, vocab)
        logits = rows + 0.5 * rows.cumsum(0) / torch.arange(1, len(window) + 1).unsqueeze(-1)
        return logits[len(past):].unsqueeze(0)  # (1, new, vocab)


def _toy_lm(seed: int = 0, vocab: int = 23) -> ToyLM:
    return ToyLM(torch.randn(vocab, vocab, generator=_gen(seed)) * 2.0, CONTEXT)


def _ids(got) -> list:
    return got.tolist() if isinstance(got, torch.Tensor) else list(got)


def _first_difference(got: list, want: list, prompt_len: int) -> int:
    """The generation step (0 = the first new token) where two token lists first differ."""
    return next((i for i, (a, b) in enumerate(zip(got, want)) if a != b), min(len(got), len(want))) - prompt_len


# The logits of a made-up next-token distribution (notebook 11's "To be, or not to"): at T = 1
# the cumulative probabilities are 0.543, 0.677, 0.767, 0.827, 0.872, …, so no top_p below sits
# near a boundary, and each has a token that crosses it.
LOGITS = torch.tensor([4.0, 2.6, 2.2, 1.8, 1.5, 1.2, 1.0, 0.8, 0.5, 0.3, 0.0, -0.5])
_CROSSING = {"top_p_drops_crossing": "you dropped the token whose cumulative probability crosses top_p. Keep the "
                                     "smallest set whose probabilities sum to at least top_p: drop a token only when "
                                     "the tokens more likely than it already reach top_p"}


@register("11.1")
def check_next_token_probs() -> str:
    ties = torch.tensor([1.0, 3.0, 2.0, 3.0, 2.0, 0.5])  # two maxima; the 3rd and 4th largest tie
    rows = torch.randn(2, 3, 17, generator=_gen(11)) * 2  # a batch of rows, each filtered on its own
    for logits, settings, mistakes in (
            (LOGITS, dict(temperature=0.0), {}),
            (ties, dict(temperature=0.0), {}),
            (LOGITS, dict(), {}),
            (LOGITS, dict(temperature=0.7), {}),
            (LOGITS, dict(temperature=2.0), {}),
            (LOGITS, dict(top_k=3), {}),
            (ties, dict(top_k=3), {}),
            (LOGITS, dict(top_p=0.6), _CROSSING),
            (LOGITS, dict(top_p=0.85), _CROSSING),
            (LOGITS, dict(top_p=1e-6), _CROSSING),
            (LOGITS, dict(temperature=0.8, top_k=5, top_p=0.9), _CROSSING),
            (rows, dict(temperature=1.2, top_k=12), {}),
            (rows, dict(temperature=1.2, top_p=0.7), _CROSSING),
            (LOGITS.half(), dict(temperature=0.7, top_p=0.6), _CROSSING)):
        shown = ", ".join(f"{k}={v:g}" for k, v in settings.items()) or "defaults"
        what = f"next_token_probs(logits of shape {tuple(logits.shape)}, {logits.dtype}, {shown})".replace("torch.", "")
        before = logits.clone()
        got = minilm.next_token_probs(logits, **settings)
        expect(torch.equal(logits, before), f"{what} changed the logits it was given: filter a copy")
        expect(isinstance(got, torch.Tensor) and got.shape == logits.shape and got.dtype == torch.float32,
               f"{what} must return float32 probabilities of the logits' shape {tuple(logits.shape)}, got "
               f"{got.dtype if isinstance(got, torch.Tensor) else type(got).__name__} of shape "
               f"{tuple(got.shape) if isinstance(got, torch.Tensor) else '?'}")
        compare(got, what, mistakes)
    return "greedy, temperature, top-k with ties and top-p at its crossing token, row by row, in float32"


def _replay(model: ToyLM, prompt: list[int], n: int, seed: int, **sampling) -> list[int]:
    """What generate must return, step by step with your next_token_probs and the same generator."""
    g, ids = _gen(seed), list(prompt)
    with torch.no_grad():
        for _ in range(n):
            logits = model(torch.tensor([ids[-model.context_length:]]))[0, -1]
            ids.append(int(torch.multinomial(minilm.next_token_probs(logits, **sampling), 1, generator=g)))
    return ids


@register("11.2")
def check_generate() -> str:
    model = _toy_lm(0)
    prompt = [3, 14, 15, 9, 2]
    got = minilm.generate(model, torch.tensor(prompt), 15, temperature=0.0, use_cache=False)
    expect(isinstance(got, torch.Tensor) and got.ndim == 1 and got.dtype == torch.long,
           f"generate must return a 1-D LongTensor of token ids, got {got!r:.60}")
    expect(got[: len(prompt)].tolist() == prompt, "the output must start with the prompt")
    want = reference("greedy, 15 new tokens", got).tolist()  # 20 tokens: past context_length 12
    expect(got.tolist() == want, f"greedy generation (temperature 0, use_cache=False) differs from the argmax of the "
           f"model's logits over the last context_length tokens at step {_first_difference(got.tolist(), want, 5)} "
           "(check('11.1') first: generate uses your next_token_probs)")
    expect(_ids(minilm.generate(model, prompt, 15, temperature=0.0, use_cache=False)) == want,
           "a prompt given as a Python list must give the same tokens as the same prompt as a tensor")
    # Sampling: each step draws torch.multinomial(next_token_probs(…), 1, generator=generator).
    for sampling in (dict(temperature=0.9, top_k=6), dict(temperature=1.3), dict(top_p=0.8)):
        shown = ", ".join(f"{k}={v:g}" for k, v in sampling.items())
        got = _ids(minilm.generate(model, prompt, 20, use_cache=False, generator=_gen(7), **sampling))
        replay = _replay(model, prompt, 20, 7, **sampling)
        expect(got == replay, f"sampling ({shown}): your tokens differ at step {_first_difference(got, replay, 5)} from "
               "torch.multinomial(next_token_probs(the last position's logits, temperature, top_k, top_p), 1, "
               "generator=generator), one draw per step with the generator you were given")
    eos = want[len(prompt) + 2]
    stopped = minilm.generate(model, prompt, 10, temperature=0.0, eos_token_id=eos, use_cache=False)
    expect(_ids(stopped) == want[: want.index(eos, len(prompt)) + 1],
           "with eos_token_id, generation must stop right after emitting it (and include it)")
    return "greedy past context_length, sampling with your filter and the given generator, eos (no cache)"


_ATTENTION = "minilm/attention.py, MultiHeadSelfAttention.forward with a cache"
_MODEL = "minilm/model.py, TransformerLM.forward with a cache"
_CACHE_PATH = {
    "prefill_not_causal": "the prefill (many tokens into an empty cache) attends without the causal mask. With a "
                          "cache the mask is (queries, keys) and query i sees keys 0 … keys − queries + i",
    "cache_mask_not_offset": "the mask is not offset: with a cache there are more keys than queries, and query i "
                             "sees keys 0 … keys − queries + i (tril with diagonal = keys − queries)",
}


@register("11.3")
def check_kv_cache() -> str:
    # 1. KVCache itself (minilm/generation.py).
    cache = minilm.KVCache()
    expect(len(cache) == 0, f"minilm/generation.py: a new KVCache must have len 0, got {len(cache)}")
    k1, v1 = torch.randn(1, 2, 3, 4, generator=_gen(1)), torch.randn(1, 2, 3, 4, generator=_gen(2))
    k2, v2 = torch.randn(1, 2, 1, 4, generator=_gen(3)), torch.randn(1, 2, 1, 4, generator=_gen(4))
    cache.update(k1, v1)
    k, v = cache.update(k2, v2)
    compare(k, "minilm/generation.py, KVCache: the keys returned by the second update (the cached ones, then the new)")
    compare(v, "minilm/generation.py, KVCache: the values returned by the second update")
    expect(len(cache) == 4, f"minilm/generation.py: after caching 3 + 1 positions len(cache) must be 4, got {len(cache)}")

    # 2. The cache path of MultiHeadSelfAttention.forward (minilm/attention.py).
    attn = minilm.MultiHeadSelfAttention(D_MODEL, HEADS, CONTEXT, 10000.0)
    _fixed_state(attn, seed=41)
    x = torch.randn(2, 10, D_MODEL, generator=_gen(6))
    with torch.no_grad():
        compare(attn(x), "MultiHeadSelfAttention without a cache (your Task 6.3: run check('6.3'))")
        cache = minilm.KVCache()
        prefill = attn(x[:, :5], kv_cache=cache)
        expect(len(cache) == 5, f"{_ATTENTION}: after a 5-token call the cache holds {len(cache)} positions, not 5. "
               "Pass k and v, after RoPE, through k, v = kv_cache.update(k, v) and attend over what it returns")
        compare(prefill, f"{_ATTENTION}: 5 tokens into an empty cache", _CACHE_PATH)
        chunk = attn(x[:, 5:8], kv_cache=cache)
        compare(chunk, f"{_ATTENTION}: 3 more tokens (queries) after 5 cached, token_positions=None", _CACHE_PATH | {
            "cache_position_zero": "the new tokens were rotated as if at position 0. Without token_positions, "
                                   "positions continue after the cached tokens: len(kv_cache) … len(kv_cache) + seq − 1",
        })
        steps = torch.cat([attn(x[:, t : t + 1], kv_cache=cache) for t in (8, 9)], dim=1)
        compare(steps, f"{_ATTENTION}: then one token at a time", _CACHE_PATH | {
            "cache_position_zero": "each new token was rotated as if at position 0: positions continue from len(kv_cache)",
        })

    # 3. The model hands each layer its cache and continues the positions (minilm/model.py, block.py).
    model = _small_lm(1)
    _fixed_state(model, seed=40)
    ids = torch.randint(0, VOCAB, (1, 10), generator=_gen(5))
    with torch.no_grad():
        full = model(ids)  # (1, 10, vocab): all positions at once, no cache (your own forward, Task 8.1)
        cache = model.make_kv_cache()
        got = [model(ids[:, :6], kv_cache=cache)]
        expect(all(len(c) == 6 for c in cache), f"{_MODEL}: after a 6-token prompt every layer's cache must hold 6 "
               f"positions, got {[len(c) for c in cache]}: give layer i kv_cache[i] (TransformerBlock hands it to attn)")
        got += [model(ids[:, t : t + 1], kv_cache=cache) for t in range(6, 10)]  # one new token at a time
        got = torch.cat(got, dim=1)
    compare(full, "the logits of a full forward over 10 tokens (your TransformerLM, Task 8.1)")
    compare(got, f"{_MODEL}: a 6-token prompt then 4 single tokens, vs one full forward", _CACHE_PATH | {
        "cache_position_zero": "each new token was rotated as if at position 0: with a cache, the positions are "
                               "start … start + seq − 1 with start = len(kv_cache[0]), the tokens already cached",
    })
    expect(len(cache[0]) == 10, f"{_MODEL}: after 10 tokens every layer's cache must hold 10 positions, got {len(cache[0])}")

    # 4. generate's use_cache=True path (minilm/generation.py): the prompt once, then one token per
    # step, and the same tokens as without the cache.
    toy = _toy_lm(0)
    minilm.generate(toy, [3, 14, 15, 9, 2], 6, temperature=0.0, use_cache=True)
    expect(toy.fed == [5, 1, 1, 1, 1, 1], f"minilm/generation.py, generate with use_cache=True: a 5-token prompt and 6 "
           f"new tokens (all within context_length) fed the model {toy.fed} tokens per call, expected [5, 1, 1, 1, 1, 1]: "
           "the prompt once into model.make_kv_cache(), then only the newest token with that cache")
    for name, lm, prompt in (("the check's stand-in model", _toy_lm(0), [3, 14, 15, 9, 2]),
                             ("a small TransformerLM", model, ids[0, :3].tolist())):
        without = _ids(minilm.generate(lm, prompt, 15, temperature=0.0, use_cache=False))
        with_cache = _ids(minilm.generate(lm, prompt, 15, temperature=0.0, use_cache=True))
        expect(with_cache == without, f"minilm/generation.py, generate with use_cache=True on {name}: the tokens "
               f"differ from use_cache=False at step {_first_difference(with_cache, without, len(prompt))} (context_length "
               f"{lm.context_length}: feed the prompt into make_kv_cache(), then only the newest token, and start a "
               "fresh cache when it is full)")
    return "KVCache, attention's cache path (positions, offset mask), the model's and generate's: all match no cache"
