"""Specs of notebook 11: sampling, generation and the KV cache (provided). See minilm/course/exercises/__init__.py.

The sampling filter (11.1) is checked on fixed logits, and generate (11.2) on a fixed stand-in
model (`ToyLM`) without a cache, so neither needs the KV cache of 11.3."""

from __future__ import annotations

import torch
from torch import nn

from minilm.course.exercises import (
    Problem,
    Property,
    at_edge,
    attention_shapes,
    differs,
    first,
    gen,
    keeps_inputs,
    lm_shapes,
    load_state,
    randn,
    shown,
    spec,
    weights,
)

# ---------------------------------------------------------------- 11.1: next_token_probs

# The logits of a made-up next-token distribution (notebook 11's "To be, or not to"): at T = 1
# the cumulative probabilities are 0.543, 0.677, 0.767, 0.827, 0.872, …, so no top_p below sits
# near a boundary, and each has a token that crosses it.
LOGITS = torch.tensor([4.0, 2.6, 2.2, 1.8, 1.5, 1.2, 1.0, 0.8, 0.5, 0.3, 0.0, -0.5])


def _probs_collect(m, c):
    logits = c["logits"].clone()
    probs = m.next_token_probs(logits, **c["kw"])
    return {"probs": probs, "logits_unchanged": torch.equal(logits, c["logits"])}


def _probs_invariant(got, c) -> Problem | None:
    probs, shape = got["probs"], tuple(c["logits"].shape)
    if got["logits_unchanged"] is not True:
        return Problem(f"next_token_probs on {c['what']} changed the logits it was given: filter a copy")
    if type(probs) is not torch.Tensor or tuple(probs.shape) != shape or probs.dtype != torch.float32:
        kind = f"{probs.dtype} of shape {tuple(probs.shape)}" if type(probs) is torch.Tensor else type(probs).__name__
        return Problem(f"next_token_probs on {c['what']} must return float32 probabilities of the logits' shape "
                       f"{shape}, got {kind.replace('torch.', '')}")
    return None


def _probs_cases():
    ties = torch.tensor([1.0, 3.0, 2.0, 3.0, 2.0, 0.5])  # two maxima; the 3rd and 4th largest tie
    rows = randn(11, 2, 3, 17, scale=2)  # a batch of rows, each filtered on its own
    cases = []
    for logits, kw in ((LOGITS, dict(temperature=0.0)), (ties, dict(temperature=0.0)), (LOGITS, dict()),
                       (LOGITS, dict(temperature=0.7)), (LOGITS, dict(temperature=2.0)), (LOGITS, dict(top_k=3)),
                       (ties, dict(top_k=3)), (LOGITS, dict(top_p=0.6)), (LOGITS, dict(top_p=0.85)),
                       (LOGITS, dict(top_p=1e-6)), (LOGITS, dict(temperature=0.8, top_k=5, top_p=0.9)),
                       (rows, dict(temperature=1.2, top_k=12)), (rows, dict(temperature=1.2, top_p=0.7)),
                       (LOGITS.half(), dict(temperature=0.7, top_p=0.6))):
        shown = ", ".join(f"{k}={v:g}" for k, v in kw.items()) or "defaults"
        what = f"logits of shape {tuple(logits.shape)}, {logits.dtype}, {shown}".replace("torch.", "")
        cases.append(dict(logits=logits, kw=kw, what=what))
    return cases


def _probs_rows(m):
    logits = randn(85, 3, 9) * 3
    kept = logits.clone()
    for kw in (dict(), dict(temperature=0.5), dict(top_k=3), dict(top_p=0.6), dict(top_k=4, top_p=0.9)):
        probs = m.next_token_probs(logits, **kw)
        d = differs(probs.sum(-1), torch.ones(3))
        if d:
            return f"with {kw or 'the defaults'}, each row's sum and 1: {d}"
    return None if torch.equal(logits, kept) else "next_token_probs changed the logits it was given"


def _probs_top_k(m):
    logits = torch.tensor([[0.1, 2.0, -1.0, 3.0, 0.5, 1.5]])
    probs = m.next_token_probs(logits, top_k=2)
    kept = [int(i) for i in (probs[0] > 0).nonzero().flatten()] if isinstance(probs, torch.Tensor) else None
    if kept != [1, 3]:
        return f"on logits {logits[0].tolist()} it keeps tokens {shown(kept)}, expected [1, 3]"
    rows = randn(119, 3, 12) * torch.tensor([[0.1], [1.0], [10.0]]) + torch.tensor([[5.0], [0.0], [-5.0]])
    probs = m.next_token_probs(rows, top_k=4)  # rows of other scales and offsets: each its own 4th largest
    counts = [int(n) for n in (probs > 0).sum(-1)] if isinstance(probs, torch.Tensor) else None
    return None if counts == [4, 4, 4] else (
        f"with top_k 4 on logits (3, 12) whose rows differ in scale and offset, the rows keep {shown(counts)} tokens, "
        "expected 4 each")


def _probs_greedy(m):
    probs = m.next_token_probs(torch.tensor([[0.5, 2.0, 2.0, -1.0]]), temperature=0)
    want = torch.tensor([[0.0, 1.0, 0.0, 0.0]])
    d = differs(probs, want)
    return d and f"temperature 0 on logits [0.5, 2, 2, -1], the probabilities and [0, 1, 0, 0]: {d}"


def _probs_top_p(m):
    probs = torch.tensor([[0.15, 0.5, 0.05, 0.3]])  # unsorted: the most likely tokens are 1 and 3
    got = m.next_token_probs(probs.log(), top_p=0.7)
    d = differs(got, torch.tensor([[0.0, 0.625, 0.0, 0.375]]), atol=1e-5)
    return d and f"probabilities [0.15, 0.5, 0.05, 0.3] and top_p 0.7 (keep 0.5 and 0.3, renormalized): {d}"


def _probs_top_k_then_top_p(m):
    probs = torch.tensor([[0.4, 0.35, 0.25]])
    got = m.next_token_probs(probs.log(), top_k=2, top_p=0.5)  # after top_k: 0.533, 0.467; 0.533 already reaches 0.5
    d = differs(got, torch.tensor([[1.0, 0.0, 0.0]]), atol=1e-5)
    return d and ("probabilities [0.4, 0.35, 0.25] with top_k 2 then top_p 0.5 (renormalized after top_k to "
                  f"[0.533, 0.467]: the first alone reaches 0.5), the result and [1, 0, 0]: {d}")


def _probs_filter_nothing(m):
    logits = randn(86, 2, 12, scale=2.0)  # a vocabulary of 12
    for kw, what in ((dict(top_k=12), "top_k 12, the vocabulary's size"), (dict(top_k=50), "top_k 50 > the "
                     "vocabulary's 12"), (dict(top_p=1.0), "top_p 1"), (dict(top_k=50, top_p=1.0), "top_k 50 and "
                     "top_p 1")):
        found = at_edge(f"on logits (2, 12) at temperature 0.8, {what} against no filter",
                        lambda: m.next_token_probs(logits, temperature=0.8, **kw),
                        lambda: m.next_token_probs(logits, temperature=0.8))
        if found:
            return found
    return None


def _probs_temperature(m):
    logits = randn(87, 2, 10, scale=2.0)
    for kw in (dict(), dict(top_k=4), dict(top_p=0.6), dict(top_k=6, top_p=0.8)):
        for t in (0.5, 2.0):
            d = differs(m.next_token_probs(logits, temperature=t, **kw), m.next_token_probs(logits / t, **kw),
                        atol=1e-5)
            if d:
                extra = ", ".join(f"{k}={v:g}" for k, v in kw.items())
                return (f"on logits (2, 10){', ' + extra if extra else ''}, temperature {t:g} and the same filter "
                        f"on logits / {t:g} at temperature 1: {d}")
    return None


def _probs_top_k_ties(m):
    logits = torch.tensor([[1.0, 3.0, 2.0, 3.0, 2.0, 0.5], [2.0, 2.0, 2.0, 1.0, 0.0, 2.0]])
    probs = m.next_token_probs(logits, top_k=2)
    kept = [[int(i) for i in (row > 0).nonzero().flatten()] for row in probs] if type(probs) is torch.Tensor else None
    return None if kept == [[1, 3], [0, 1, 2, 5]] else (
        f"top_k 2 on logits [1, 3, 2, 3, 2, 0.5] and [2, 2, 2, 1, 0, 2] keeps tokens {shown(kept)}, expected "
        "[1, 3] and every token tied with the 2nd largest, [0, 1, 2, 5]")


PROBS_PROPERTIES = (
    keeps_inputs("next_token_probs", lambda: (randn(114, 2, 10), 0.5, 3, 0.9), "on logits (2, 10), temperature 0.5, "
                 "top_k 3, top_p 0.9"),
    Property("the temperature divides the logits before every filter: temperature T gives what logits / T give at "
             "temperature 1", _probs_temperature,
             example="z = torch.randn(2, 10)\nprint(minilm.next_token_probs(z, temperature=2.0, top_p=0.6)\n"
                     "      - minilm.next_token_probs(z / 2.0, top_p=0.6))  # zeros",
             idea="divide the logits by the temperature once, first, then filter (top_k, top_p) and take one "
                  "softmax: top_p's cumulative sums use the tempered probabilities"),
    Property("top_k keeps every logit tied with the k-th largest", _probs_top_k_ties,
             example="print(minilm.next_token_probs(torch.tensor([2.0, 2.0, 2.0, 1.0]), top_k=2))  # three kept",
             idea="compare each logit with the k-th largest value (drop those strictly below it) rather than "
                  "keeping topk's k indices, which breaks ties arbitrarily"),
    Property("top_p keeps the most likely tokens until they reach p, in the logits' own order", _probs_top_p,
             example="p = torch.tensor([[0.15, 0.5, 0.05, 0.3]])\n"
                     "print(minilm.next_token_probs(p.log(), top_p=0.7))  # [0, 0.625, 0, 0.375]",
             idea="sort the probabilities, drop a token when the tokens before it already reach top_p, then put "
                  "the choice back in vocabulary order (scatter by the sort's indices)"),
    Property("top_k applies first, then top_p on the kept tokens renormalized", _probs_top_k_then_top_p,
             example="p = torch.tensor([[0.4, 0.35, 0.25]])\n"
                     "print(minilm.next_token_probs(p.log(), top_k=2, top_p=0.5))  # [1, 0, 0]",
             idea="drop the logits below the k-th largest first; compute the probabilities for top_p from what is "
                  "left (a softmax after the -inf), so its cumulative sums are over the kept tokens only"),
    Property("each row is a distribution summing to 1, whatever the temperature, top_k and top_p, and the logits "
             "stay as they were", _probs_rows,
             example="logits = 3 * torch.randn(3, 9)\n"
                     "print(minilm.next_token_probs(logits, top_k=3, top_p=0.6).sum(-1))",
             idea="divide a copy of the logits by the temperature, set the dropped tokens to -inf, then one softmax "
                  "over the last dim"),
    Property("top_k at or beyond the vocabulary's size, or top_p 1, drops no token: the same distribution as no "
             "filter", _probs_filter_nothing,
             example="logits = torch.randn(2, 12)\n"
                     "print(minilm.next_token_probs(logits, top_k=50) - minilm.next_token_probs(logits))  # zeros",
             idea="top_k ≥ the vocabulary keeps every token: skip the filter then (torch.topk raises for k beyond "
                  "the last dim's size); with top_p 1 only tokens after the cumulative sum reached 1 may go"),
    Property("top_k keeps exactly the k largest logits of each row", _probs_top_k,
             example="print(minilm.next_token_probs(torch.tensor([[0.1, 2.0, -1.0, 3.0, 0.5, 1.5]]), top_k=2))",
             idea="find each row's k-th largest logit (torch.topk(..., dim=-1).values[..., -1:]) and drop every logit "
                  "of that row below it"),
    Property("temperature 0 puts probability 1 on the first largest logit", _probs_greedy,
             example="print(minilm.next_token_probs(torch.tensor([[0.5, 2.0, 2.0, -1.0]]), temperature=0))",
             idea="greedy is argmax (the first on ties): a one-hot row, with no division by the temperature"),
)

spec("11.1", properties=PROBS_PROPERTIES,
     collect=_probs_collect, cases=_probs_cases, invariant=_probs_invariant,
     outputs={"probs": "next_token_probs"},
     mistakes={"top_p_drops_crossing": "you dropped the token whose cumulative probability crosses top_p. Keep the "
                                       "smallest set whose probabilities sum to at least top_p: drop a token only when "
                                       "the tokens more likely than it already reach top_p"},
     passed="greedy, temperature, top-k with ties and top-p at its crossing token, row by row, in float32")

# ---------------------------------------------------------------- 11.2: generate


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


def _generate_collect(m, c):
    model = ToyLM(c["table"], c["ctx"])
    g = gen(c["gen_seed"]) if "gen_seed" in c else None
    prompt = c["prompt"].tolist() if c.get("as_list") else c["prompt"]
    return {"ids": m.generate(model, prompt, c["n"], use_cache=False, generator=g, **c["kw"])}


def _first_difference(got: list, want: list) -> int:
    return next((i for i, (a, b) in enumerate(zip(got, want)) if a != b), min(len(got), len(want)))


def _generate_invariant(got, c) -> Problem | None:
    ids, prompt = got["ids"], c["prompt"].tolist()
    if type(ids) is not torch.Tensor or ids.ndim != 1 or ids.dtype != torch.long:
        return Problem(f"generate must return a 1-D LongTensor of token ids, got "
                       f"{ids.dtype if type(ids) is torch.Tensor else type(ids).__name__}")
    if ids[: len(prompt)].tolist() != prompt:
        return Problem("the output must start with the prompt")
    return None


def _explain_generate(key: str, got: torch.Tensor, want: torch.Tensor) -> str | None:
    if got.ndim != 1 or want.ndim != 1:
        return None
    step = _first_difference(got.tolist(), want.tolist())
    return (f"your tokens differ from the expected ones at position {step} of {len(want)} (each step: "
            "torch.multinomial(next_token_probs(the last position's logits over at most context_length tokens, "
            "temperature, top_k, top_p), 1, generator=generator), or the argmax at temperature 0; with eos_token_id, "
            "stop right after emitting it. check('11.1') first: generate uses your next_token_probs)")


class _Watched(ToyLM):
    """ToyLM that records each call: the token ids it was fed, and whether it ran in training mode and with
    autograd on."""

    def __init__(self, table: torch.Tensor, context_length: int):
        super().__init__(table, context_length)
        self.seen: list[list[int]] = []
        self.modes: list[tuple[bool, bool]] = []

    def forward(self, token_ids: torch.Tensor, kv_cache: list[_Window] | None = None) -> torch.Tensor:
        self.seen.append(token_ids.reshape(-1).tolist())
        self.modes.append((self.training, torch.is_grad_enabled()))
        return super().forward(token_ids, kv_cache)


class _Fixed(nn.Module):
    """A stand-in model whose next-token logits are the same whatever it is fed."""

    def __init__(self, logits: list[float], context_length: int = 8):
        super().__init__()
        self.logits, self.context_length = nn.Parameter(torch.tensor(logits), requires_grad=False), context_length

    def make_kv_cache(self) -> list[_Window]:
        return [_Window()]

    def forward(self, token_ids: torch.Tensor, kv_cache: list[_Window] | None = None) -> torch.Tensor:
        return self.logits.expand(1, token_ids.shape[-1], -1).clone()


def _table(seed: int = 30, vocab: int = 23) -> torch.Tensor:
    return randn(seed, vocab, vocab, scale=2.0)


def _ids(out) -> list | None:
    """generate's output as a list of ints, or None when it is no 1-D integer tensor."""
    if type(out) is not torch.Tensor or out.ndim != 1 or out.is_floating_point():
        return None
    return out.tolist()


def _generate_no_new_tokens(m):
    prompt = torch.tensor([3, 14, 15, 9, 2])
    for use_cache in (False, True):
        found = at_edge(f"generate(model, [3, 14, 15, 9, 2], max_new_tokens=0, use_cache={use_cache}) and the "
                        "prompt", lambda: m.generate(ToyLM(randn(0, 23, 23), 12), prompt, 0, temperature=0.0,
                                                     use_cache=use_cache), prompt, atol=0, rtol=0)
        if found:
            return found
    return None


def _generate_eos(m):
    chain = 8.0 * torch.roll(torch.eye(8), 1, dims=1)  # greedy: token i is followed by i + 1 (mod 8)
    for prompt, eos, want in (([5], 0, [5, 6, 7, 0]), ([0, 5], 0, [0, 5, 6, 7, 0]), ([2], 4, [2, 3, 4])):
        got = _ids(m.generate(ToyLM(chain, 12), prompt, 10, temperature=0.0, eos_token_id=eos, use_cache=False))
        if got != want:
            return (f"on a model where token i is followed by i + 1 (mod 8), greedy from prompt {prompt} with "
                    f"eos_token_id={eos} and max_new_tokens=10 gives {shown(got)}, expected {want}")
    return None


def _generate_greedy(m):
    table, prompt = _table(), [3, 14, 15]
    g = gen(5)
    state = g.get_state()
    got = _ids(m.generate(ToyLM(table, 12), prompt, 6, temperature=0.0, use_cache=False, generator=g))
    if got is None:
        return "generate must return a 1-D tensor of token ids"
    model = ToyLM(table, 12)
    for t in range(len(prompt), min(len(got), 9)):
        with torch.no_grad():
            logits = model(torch.tensor([got[:t]]))[0, -1]
        if got[t] != int(logits.argmax()):
            return (f"greedy from prompt [3, 14, 15], 6 new tokens (9 < context_length 12): new token {t - 3} is "
                    f"{got[t]}, but the logits at the last position of the {t} tokens before it peak at token "
                    f"{int(logits.argmax())}")
    if not torch.equal(g.get_state(), state):
        return "greedy (temperature 0) drew from the generator: the argmax needs no draw"
    return None


def _generate_window(m):
    model, prompt = _Watched(_table(31), 6), [3, 14, 15, 9]
    got = _ids(m.generate(model, prompt, 5, temperature=0.0, use_cache=False))
    if got is None:
        return "generate must return a 1-D tensor of token ids"
    for step, fed in enumerate(model.seen):
        want = got[:len(prompt) + step][-6:]
        if fed != want:
            return (f"with use_cache=False, context_length 6 and prompt [3, 14, 15, 9], step {step} fed the model "
                    f"{shown(fed)}, expected the last min(6, {len(prompt) + step}) ids so far, {shown(want)}")
    return None


def _generate_length(m):
    for prompt, n, kw in (([3, 14], 1, dict(temperature=0.0)), ([3, 14], 7, dict(temperature=0.0)),
                          (list(range(15)), 4, dict(temperature=0.0)), ([3], 9, dict(temperature=1.0))):
        got = _ids(m.generate(ToyLM(_table(), 12), prompt, n, use_cache=False, generator=gen(1), **kw))
        if got is None or len(got) != len(prompt) + n or got[:len(prompt)] != prompt:
            what = "no 1-D integer tensor" if got is None else f"{len(got)} ids" + (
                "" if got[:len(prompt)] == prompt else " not starting with the prompt")
            return (f"with a {len(prompt)}-token prompt, max_new_tokens={n} and no eos_token_id, generate returned "
                    f"{what}, expected the prompt then {n} new {'id' if n == 1 else 'ids'} ({len(prompt) + n} in all)")
    return None


def _generate_seeded(m):
    runs = []
    with torch.random.fork_rng(devices=[]):
        for seed in (0, 1):
            torch.manual_seed(seed)  # the global RNG differs, the generator is the same
            runs.append(_ids(m.generate(ToyLM(_table(), 12), [3, 14], 10, temperature=1.5, use_cache=False,
                                        generator=gen(9))))
    if runs[0] != runs[1]:
        return (f"temperature 1.5, each run with a fresh generator seeded 9, after torch.manual_seed(0) and then "
                f"torch.manual_seed(1): the runs gave {shown(runs[0])} and {shown(runs[1])}")
    return None


def _generate_draws(m):
    logits = [0.0, 4.0, 1.0, -1.0]  # top_k 2 keeps tokens 1 and 3 apart by 3; at temperature 2 token 1 has σ(1.5)
    got = _ids(m.generate(_Fixed(logits), [1], 600, temperature=2.0, top_k=2, use_cache=False, generator=gen(3)))
    if got is None or len(got) != 601:
        return "generate must return the prompt then 600 new ids"
    new = torch.tensor(got[1:])
    outside = sorted(set(new.tolist()) - {1, 2})
    if outside:
        return (f"on a model whose logits are always [0, 4, 1, -1], temperature 2 and top_k 2, it picked token "
                f"{outside[0]}, which top_k 2 drops (only tokens 1 and 2 may come)")
    share = (new == 1).double().mean().item()
    if abs(share - 0.8176) > 0.065:
        return (f"on a model whose logits are always [0, 4, 1, -1], temperature 2 and top_k 2, token 1 came "
                f"{share:.0%} of 600 times, expected about 82% (softmax([4, 1] / 2)); 68% would be the temperature "
                "applied twice, 95% not at all")
    got = _ids(m.generate(_Fixed(logits), [1], 20, top_p=0.5, use_cache=False, generator=gen(3)))
    if got is None or set(got[1:]) != {1}:
        return (f"on a model whose logits are always [0, 4, 1, -1] (token 1 has probability 0.94), top_p 0.5 "
                f"picked {shown(got and sorted(set(got[1:])))}, expected token 1 only")
    return None


def _generate_eval_no_grad(m):
    model = _Watched(_table(), 12)
    model.train()
    m.generate(model, [3, 14], 3, temperature=0.0, use_cache=False)
    for step, (training, grad) in enumerate(model.modes):
        if training or grad:
            return (f"the model's call {step} ran with model.training={training} and autograd "
                    f"{'on' if grad else 'off'}, expected eval mode and torch.no_grad()")
    return None


GENERATE_PROPERTIES = (
    Property("max_new_tokens 0 returns the prompt alone", _generate_no_new_tokens,
             example="print(minilm.generate(model, [3, 14, 15], 0))  # tensor([3, 14, 15])",
             idea="loop max_new_tokens times and append each new token to the ids, starting from the prompt: zero "
                  "times leaves the prompt (a torch.stack or torch.cat of the new tokens alone raises on none)"),
    Property("greedy (temperature 0) picks the argmax of the logits at the last position, and draws nothing",
             _generate_greedy,
             example="ids = minilm.generate(model, [3, 14, 15], 6, temperature=0)\n"
                     "print(ids[3], model(ids[None, :3])[0, -1].argmax())  # equal",
             idea="the model returns logits of shape (1, seq, vocab): the next token comes from logits[0, -1] (the "
                  "last position, after the whole context), and at temperature 0 it is their argmax, with no "
                  "torch.multinomial"),
    Property("generation stops right after emitting eos_token_id, which is kept; any id counts, 0 too, and an eos "
             "in the prompt stops nothing", _generate_eos,
             example="# on a model where token i is followed by i + 1 (mod 8):\n"
                     "print(minilm.generate(model, [5], 10, temperature=0, eos_token_id=0))  # [5, 6, 7, 0]",
             idea="after appending each new token, break if eos_token_id is not None and that token equals it: "
                  "test `is not None` (0 is a token id too), and look at the new token only, not the whole ids"),
    Property("without a cache each step feeds the model the last context_length ids so far (all of them while "
             "fewer)", _generate_window,
             example="# with model.context_length 6 and 8 ids so far, the model is fed ids[-6:]",
             idea="crop from the end, ids[-context_length:], at every step: the newest tokens are what the next "
                  "one depends on; the first ids, or one token fewer, are another context"),
    Property("without eos the output is the prompt followed by exactly max_new_tokens new ids", _generate_length,
             example="print(len(minilm.generate(model, [3, 14], 7)))  # 9",
             idea="run the loop max_new_tokens times, counting new tokens only (not the prompt's), and return the "
                  "prompt with every new token appended"),
    Property("the generator alone decides the draws: the same generator seed gives the same tokens, whatever the "
             "global RNG", _generate_seeded,
             example="torch.manual_seed(0)\na = minilm.generate(model, [3], 10, generator=torch.Generator()."
                     "manual_seed(9))\ntorch.manual_seed(1)\nb = minilm.generate(model, [3], 10, generator=torch."
                     "Generator().manual_seed(9))\nprint(torch.equal(a, b))  # True",
             idea="pass generator=generator to torch.multinomial, and draw nothing else from the global RNG"),
    Property("each new token is drawn from next_token_probs(the last logits, temperature, top_k, top_p)",
             _generate_draws,
             example="# a model whose logits are always [0, 4, 1, -1]: at temperature 2, top_k 2,\n"
                     "# token 1 comes about 82% of the time and tokens 0 and 3 never",
             idea="pass the raw logits of the last position with temperature, top_k and top_p to your "
                  "next_token_probs (it divides by the temperature itself), then torch.multinomial(probs, 1, "
                  "generator=generator)"),
    Property("generate runs the model in eval mode and without autograd", _generate_eval_no_grad,
             example="model.train()\nminilm.generate(model, [3, 14], 3)\nprint(model.training)  # False",
             idea="call model.eval() before the loop and run it inside `with torch.no_grad():`: dropout stays off "
                  "and no graph is kept across the steps"),
)


def _generate_cases():
    vocab, ctx, prompt = 23, 12, torch.tensor([3, 14, 15, 9, 2])
    table = randn(0, vocab, vocab, scale=2.0)
    chain = randn(1, vocab, vocab) + 8.0 * torch.roll(torch.eye(vocab), 1, dims=1)  # token i → i + 1
    return [dict(table=table, ctx=ctx, prompt=prompt, n=15, kw=dict(temperature=0.0),
                 what="greedy, 15 new tokens, past context_length 12"),
            dict(table=table, ctx=ctx, prompt=prompt, n=15, kw=dict(temperature=0.0), as_list=True,
                 what="greedy, a prompt given as a Python list"),
            dict(table=table, ctx=ctx, prompt=prompt, n=20, gen_seed=7, kw=dict(temperature=0.9, top_k=6),
                 what="temperature 0.9, top_k 6, 20 tokens"),
            dict(table=table, ctx=ctx, prompt=prompt, n=20, gen_seed=7, kw=dict(temperature=1.3),
                 what="temperature 1.3, 20 tokens"),
            dict(table=table, ctx=ctx, prompt=prompt, n=8, gen_seed=4, kw=dict(top_p=1e-6), what="top_p 1e-6 (greedy)"),
            dict(table=chain, ctx=ctx, prompt=torch.tensor([2]), n=10, kw=dict(temperature=0.0, eos_token_id=6),
                 what="eos_token_id 6 (generation must stop right after it)"),
            dict(table=table, ctx=ctx, prompt=torch.arange(14) % vocab, n=4, kw=dict(temperature=0.0),
                 what="a 14-token prompt, longer than context_length 12: the first step too sees its last 12 only")]


# No top_p but 1e-6 (greedy for any top_p): 11.2's points depend on the loop, not on Task 11.1's top_p.
spec("11.2", properties=GENERATE_PROPERTIES, collect=_generate_collect, cases=_generate_cases,
     invariant=_generate_invariant, explain=_explain_generate,
     outputs={"ids": "generate"},
     passed="greedy past context_length, sampling with your filter and the given generator, eos (no cache)")

# ---------------------------------------------------------------- 11.3: the KV cache

ATTENTION = "minilm/attention.py, MultiHeadSelfAttention.forward with a cache"
MODEL = "minilm/model.py, TransformerLM.forward with a cache"


def _kv_collect(m, c):
    # 1. KVCache itself (minilm/generation.py).
    cache = m.KVCache()
    out = {"len0": len(cache)}
    cache.update(c["k1"], c["v1"])
    k, v = cache.update(c["k2"], c["v2"])
    out |= {"k": k, "v": v, "len": len(cache)}
    # 2. The cache path of MultiHeadSelfAttention.forward: chunks fed one after another, token_positions=None.
    d, heads, ctx = c["attn_config"]
    attn = m.MultiHeadSelfAttention(d, heads, ctx, 10000.0)
    load_state(attn, c["attn_state"])
    x, start, chunks, kv, lens = c["x"], 0, [], m.KVCache(), []
    with torch.no_grad():
        for n in c["chunks"]:
            chunks.append(attn(x[..., start : start + n, :], kv_cache=kv))
            lens.append(len(kv))
            start += n
    out |= {"attn_cached": torch.cat(chunks, dim=-2), "attn_lens": lens}
    # 2b. The same chunks with explicit token_positions: (seq,) ones that do not start at 0, and each
    # batch row's own (batch, seq). The cached keys keep the positions they were rotated at.
    for key, positions in (("attn_positions", c["positions"]), ("attn_row_positions", c["row_positions"])):
        start, chunks, kv = 0, [], m.KVCache()
        with torch.no_grad():
            for n in c["chunks"]:
                chunks.append(attn(x[..., start : start + n, :], positions[..., start : start + n], kv_cache=kv))
                start += n
        out[key] = torch.cat(chunks, dim=-2)
    # 3. The model hands each layer its cache and continues the positions (minilm/model.py, block.py).
    lm = m.TransformerLM(*c["config"])
    load_state(lm, c["state"])
    ids = c["ids"]
    with torch.no_grad():
        full = lm(ids)  # (batch, seq, vocab): all positions at once, no cache
        kv = lm.make_kv_cache()
        steps = [lm(ids[:, : c["prefill"]], kv_cache=kv)]
        out["prefill_lens"] = [len(layer) for layer in kv]
        steps += [lm(ids[:, t : t + 1], kv_cache=kv) for t in range(c["prefill"], ids.shape[1])]
    out |= {"full": full, "cached": torch.cat(steps, dim=1), "layer_lens": [len(layer) for layer in kv]}
    # 4. generate's use_cache=True path: the prompt once, then one token per step (the same tokens as
    # without the cache: the reference's), past context_length too.
    out["generated"] = m.generate(lm, ids[0, :3], c["n"], temperature=0.0, use_cache=True)
    out["toy_generated"] = m.generate(ToyLM(c["toy_table"], c["toy_ctx"]), c["toy_prompt"], c["n"], temperature=0.0,
                                      use_cache=True)
    toy = ToyLM(c["toy_table"], c["toy_ctx"])
    m.generate(toy, c["toy_prompt"], 6, temperature=0.0, use_cache=True)  # prompt + 6 ≤ toy_ctx: no fresh cache
    out["toy_fed"] = toy.fed
    return out


def _kv_invariant(got, c) -> Problem | None:
    n1, n2 = c["k1"].shape[-2], c["k2"].shape[-2]
    seq, prompt = c["ids"].shape[1], len(c["toy_prompt"])
    fed = [prompt] + [1] * 5
    return first(
        None if got["len0"] == 0
                 else Problem(f"minilm/generation.py: a new KVCache must have len 0, got {shown(got['len0'])}"),
        None if got["len"] == n1 + n2 else Problem(
            f"minilm/generation.py: after caching {n1} + {n2} positions len(cache) must be {n1 + n2}, got "
            f"{shown(got['len'])}"),
        None if got["attn_lens"][0] == c["chunks"][0] else Problem(
            f"{ATTENTION}: after a {c['chunks'][0]}-token call the cache holds {shown(got['attn_lens'][0])} "
            "positions, not "
            f"{c['chunks'][0]}. Pass k and v, after RoPE, through k, v = kv_cache.update(k, v) and attend over what it "
            "returns"),
        None if all(n == c["prefill"] for n in got["prefill_lens"]) else Problem(
            f"{MODEL}: after a {c['prefill']}-token prompt every layer's cache must hold {c['prefill']} positions, got "
            f"{shown(got['prefill_lens'])}: give layer i kv_cache[i] (TransformerBlock hands it to attn)"),
        None if all(n == seq for n in got["layer_lens"]) else Problem(
            f"{MODEL}: after {seq} tokens every layer's cache must hold {seq} positions, got "
            f"{shown(got['layer_lens'])}"),
        None if got["toy_fed"] == fed else Problem(
            f"minilm/generation.py, generate with use_cache=True: a {prompt}-token prompt and 6 new tokens (all "
            f"within context_length) fed the model {shown(got['toy_fed'])} tokens per call, expected {fed}: the prompt "
            "once into "
            "model.make_kv_cache(), then only the newest token with that cache"))


CACHE_PATH = {
    "prefill_not_causal": "the prefill (many tokens into an empty cache) attends without the causal mask. With a "
                          "cache the mask is (queries, keys) and query i sees keys 0 … keys − queries + i",
    "cache_mask_not_offset": "the mask is not offset: with a cache there are more keys than queries, and query i "
                             "sees keys 0 … keys − queries + i (tril with diagonal = keys − queries)",
    "cache_position_zero": "the new tokens were rotated as if at position 0: with a cache, the positions are "
                           "start … start + seq − 1 with start = len(kv_cache), the tokens already cached",

    "cache_keys_before_rope": "keys must be cached after RoPE, rotated at their own positions: yours are rotated "
                              "again at 0 … keys − 1 on every call, right only for the default positions. Rotate "
                              "this call's k at token_positions, then k, v = kv_cache.update(k, v), and attend over "
                              "what it returns as it is",
}


def _kv_updates(n: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """n (k, v) pairs of shape (2, 3, new, 4): new = 3, 2, 1, …; every tensor distinct."""
    return [(randn(150 + 2 * i, 2, 3, max(3 - i, 1), 4), randn(151 + 2 * i, 2, 3, max(3 - i, 1), 4)) for i in range(n)]


def _kv_returns_what_it_was_given(m):
    (k1, v1), (k2, v2) = _kv_updates(2)
    k3, v3 = randn(160, 2, 3, 150, 4), randn(161, 2, 3, 150, 4)  # more new positions than were cached, or fit
    given = ((k1, v1), (k2, v2), (k3, v3))
    cache = m.KVCache()
    for step, (k, v) in enumerate(given):
        got_k, got_v = cache.update(k, v)
        want_k = torch.cat([kk for kk, _ in given[: step + 1]], dim=-2)
        want_v = torch.cat([vv for _, vv in given[: step + 1]], dim=-2)
        for name, got, want, other in (("keys", got_k, want_k, want_v), ("values", got_v, want_v, want_k)):
            d = differs(got, want)
            if d:
                swapped = differs(got, other) is None
                also = f" (they are the {'values' if name == 'keys' else 'keys'})" if swapped else ""
                return (f"after update {step + 1} of 3 (3 new positions, then 2, then 150), the {name} it returns "
                        f"and all the {name} given so far: {d}{also}")
    return None


def _kv_keeps_dtype(m):
    for dtype in (torch.bfloat16, torch.float64):
        cache = m.KVCache()
        for k, v in _kv_updates(2):
            got = cache.update(k.to(dtype), v.to(dtype))
        kinds = [str(t.dtype)[6:] if type(t) is torch.Tensor else type(t).__name__ for t in got]
        if kinds != [str(dtype)[6:]] * 2:
            return f"after two updates with {str(dtype)[6:]} keys and values, update returned {kinds}"
    return None


def _kv_caches_apart(m):
    (k1, v1), (k2, v2), (k3, v3), (k4, v4) = _kv_updates(4)
    a, b = m.KVCache(), m.KVCache()
    a.update(k1, v1)
    b.update(k2, v2)
    a.update(k3, v3)
    got_k, _ = b.update(k4, v4)
    d = differs(got_k, torch.cat((k2, k4), dim=-2))
    return d and f"with two caches updated in turn, cache b's keys and b's own keys k2, k4: {d}"


def _first_off(got: torch.Tensor, want: torch.Tensor, atol: float = 1e-4) -> int | None:
    """The first position (dim -2) where got and want differ, or None."""
    if type(got) is not torch.Tensor or got.shape != want.shape:
        return 0
    off = ((got - want).abs() > atol).flatten(0, -3).any(0).any(-1) if got.ndim > 2 else \
        ((got - want).abs() > atol).any(-1)
    return int(off.nonzero()[0]) if off.any() else None


def _attention_cache_path(m):
    attn = m.MultiHeadSelfAttention(16, 2, 32, 10000.0)
    load_state(attn, weights(42, attention_shapes(16)))
    x, chunks = randn(43, 2, 10, 16), (5, 3, 1, 1)
    with torch.no_grad():
        full = attn(x)
        cache, start, parts = m.KVCache(), 0, []
        for n in chunks:
            parts.append(attn(x[..., start:start + n, :], kv_cache=cache))
            start += n
        at = _first_off(torch.cat(parts, dim=-2), full)
    if at is None:
        return None
    which = "the prefill (5 tokens into an empty cache)" if at < 5 else f"the chunk that holds position {at}"
    return (f"x (2, 10, 16) fed in chunks of 5, 3, 1 and 1 tokens through one KVCache and in one call: the outputs "
            f"first differ at position {at}, in {which}")


def _model_cache_path(m):
    with torch.random.fork_rng(devices=[]):
        lm = m.TransformerLM(53, 12, 16, 2, 2, 24, 10000.0)
    load_state(lm, weights(44, lm_shapes(53, 16, 2, 24)))
    ids = torch.randint(0, 53, (1, 10), generator=gen(45))
    with torch.no_grad():
        full = lm(ids)
        cache = lm.make_kv_cache()
        steps = [lm(ids[:, :6], kv_cache=cache)] + [lm(ids[:, t:t + 1], kv_cache=cache) for t in range(6, 10)]
        at = _first_off(torch.cat(steps, dim=1), full)
    return None if at is None else (
        f"a 6-token prompt then 4 single tokens through make_kv_cache(), against one forward over the 10 tokens: "
        f"the logits first differ at position {at}" + (" (the prompt)" if at < 6 else ""))


KV_PROPERTIES = (
    Property("update returns every key and value given so far, in order: the cached ones, then the new",
             _kv_returns_what_it_was_given,
             example="cache = minilm.KVCache()\nk1, v1, k2, v2 = (torch.randn(1, 2, n, 4) for n in (3, 3, 1, 1))\n"
                     "cache.update(k1, v1)\nk, v = cache.update(k2, v2)\n"
                     "print((k - torch.cat((k1, k2), -2)).abs().max(), (v - torch.cat((v1, v2), -2)).abs().max())",
             idea="keep the keys and the values in two buffers of their own, append each update's k to the keys "
                  "and its v to the values along the sequence dim (-2), and return both"),
    Property("the keys and values it returns have the dtype they were given in (a bfloat16 model's cache holds "
             "bfloat16)", _kv_keeps_dtype,
             example="cache = minilm.KVCache()\nk = torch.randn(1, 2, 3, 4, dtype=torch.bfloat16)\n"
                     "print(cache.update(k, k)[0].dtype)  # bfloat16",
             idea="allocate the buffers from the first keys and values (torch.empty(..., dtype=k.dtype, "
                  "device=k.device), or k.new_empty): torch.empty alone takes float32 on the CPU"),
    Property("two caches keep their own keys and values (one per layer)", _kv_caches_apart,
             example="a, b = minilm.KVCache(), minilm.KVCache()\n"
                     "a.update(torch.ones(1, 1, 2, 4), torch.ones(1, 1, 2, 4))\nprint(len(b))  # 0",
             idea="create the buffers in __init__ (self.k = None), not as class attributes, which every cache "
                  "shares"),
    Property("attention fed through a cache chunk by chunk gives what one call over every token gives",
             _attention_cache_path,
             example="attn = minilm.MultiHeadSelfAttention(16, 2, 32, 10000.0)\nx = torch.randn(1, 10, 16)\n"
                     "cache = minilm.KVCache()\n"
                     "y = torch.cat([attn(x[:, :5], kv_cache=cache), attn(x[:, 5:], kv_cache=cache)], 1)\n"
                     "print((y - attn(x)).abs().max())  # ~0",
             idea="start the positions at len(kv_cache) (read before the update), rotate q and k there, pass k and "
                  "v through kv_cache.update, and mask with shape (queries, keys): query i sees keys 0 … keys − "
                  "queries + i"),
    Property("the model fed a prompt, then one token at a time through its caches, gives the logits of one full "
             "forward", _model_cache_path,
             example="lm = minilm.TransformerLM(53, 12, 16, 2, 2, 24, 10000.0); ids = torch.randint(0, 53, (1, 8))\n"
                     "cache = lm.make_kv_cache()\n"
                     "y = torch.cat([lm(ids[:, :5], kv_cache=cache), lm(ids[:, 5:], kv_cache=cache)], 1)\n"
                     "print((y - lm(ids)).abs().max())  # ~0",
             idea="TransformerLM.forward hands layer i its own cache, kv_cache[i], and starts the positions at "
                  "len(kv_cache[0]), the tokens already cached"),
)


def _kv_cases():
    return [dict(k1=randn(1, 1, 2, 3, 4), v1=randn(2, 1, 2, 3, 4), k2=randn(3, 1, 2, 1, 4), v2=randn(4, 1, 2, 1, 4),
                 attn_config=(16, 2, 32), attn_state=weights(41, attention_shapes(16)), x=randn(6, 2, 10, 16),
                 chunks=[5, 3, 1, 1], positions=torch.arange(10, 20),
                 row_positions=torch.stack((torch.arange(3, 13), torch.arange(17, 27))),
                 config=[53, 12, 16, 2, 2, 24, 10000.0], state=weights(40, lm_shapes(53, 16, 2, 24)),
                 ids=torch.randint(0, 53, (1, 10), generator=gen(5)), prefill=6, n=15,
                 toy_table=randn(0, 23, 23, scale=2.0), toy_ctx=12, toy_prompt=[3, 14, 15, 9, 2],
                 what="a 6-token prompt, then 4 single tokens through the cache")]


spec("11.3", properties=KV_PROPERTIES, collect=_kv_collect, cases=_kv_cases, invariant=_kv_invariant, atol=1e-4,
     outputs={"k": "minilm/generation.py, KVCache: the keys returned by the second update (the cached ones, then "
                   "the new)",
              "v": "minilm/generation.py, KVCache: the values returned by the second update",
              "attn_cached": f"{ATTENTION}: chunks of 5, 3, 1 and 1 tokens, token_positions=None",
              "attn_positions": f"{ATTENTION}: the same chunks with token_positions 10 … 19 (shape (10,))",
              "attn_row_positions": f"{ATTENTION}: the same chunks with each batch row's own token_positions, "
                                    "3 … 12 and 17 … 26 (shape (2, 10))",
              "full": "the logits of a full forward (your TransformerLM, Task 8.1)",
              "cached": f"{MODEL}: a prompt then single tokens, vs one full forward",
              "generated": "minilm/generation.py, generate with use_cache=True on a small TransformerLM (feed the "
                           "prompt into make_kv_cache(), then only the newest token, and start a fresh cache when it "
                           "is full)",
              "toy_generated": "minilm/generation.py, generate with use_cache=True on the check's stand-in model"},
     mistakes=CACHE_PATH,
     passed="KVCache, attention's cache path (positions, offset mask), the model's and generate's: all match no cache")
