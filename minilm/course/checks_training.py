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
