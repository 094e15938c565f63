"""Pictures for notebook 11 (generation): how greedy, temperature, top-k and top-p reshape a
fixed next-token distribution, your generate's samples against those exact distributions, and
the KV cache's speed-up measured side by side.

The exact distributions here are the reference's, stored for the example logits and the
settings the notebook shows (minilm/course/expected.pt, written by the instructors' `python -m
solutions.expected`): nothing here implements sampling. Timing functions return raw seconds
and are only for pictures and ignored cells, never for checks.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

import matplotlib.pyplot as plt
import numpy as np
import torch
from matplotlib.figure import Figure
from torch import nn

import minilm.course.viz  # noqa: F401  (the course's shared matplotlib style)

# A made-up next-token distribution after "To be, or not to": fixed logits, so every picture
# and every printed number from them is deterministic.
EXAMPLE_WORDS = ("be", "die", "live", "sleep", "go", "see", "have", "do", "think", "love", "the", "dream")
EXAMPLE_LOGITS = torch.tensor([4.0, 2.6, 2.2, 1.8, 1.5, 1.2, 1.0, 0.8, 0.5, 0.3, 0.0, -0.5])


# The sampling settings whose exact distributions over EXAMPLE_LOGITS are stored.
SAMPLING_SETTINGS = (dict(temperature=0.0), dict(temperature=0.5), dict(temperature=1.0), dict(temperature=2.0),
                     dict(top_k=3), dict(top_p=0.8))


def setting_key(temperature: float = 1.0, top_k: int | None = None, top_p: float | None = None) -> str:
    top_p_text = "None" if top_p is None else format(float(top_p), "g")
    return f"temperature={float(temperature):g} top_k={top_k} top_p={top_p_text}"


def filtered_probs(logits: torch.Tensor = EXAMPLE_LOGITS, temperature: float = 1.0, top_k: int | None = None,
                   top_p: float | None = None) -> torch.Tensor:
    """The distribution a sampler draws the next token from (float64): temperature 0 is greedy
    (all mass on the argmax); otherwise softmax(logits / temperature) restricted to the top_k
    largest logits, then to the smallest most-likely set whose mass reaches top_p, renormalized.
    Stored from the reference for EXAMPLE_LOGITS and SAMPLING_SETTINGS only."""
    from minilm.course.checks import expected_outputs

    key = setting_key(temperature, top_k, top_p)
    stored = expected_outputs().get("viz", {}).get("sampling", {})
    if not torch.equal(torch.as_tensor(logits).float(), EXAMPLE_LOGITS) or key not in stored:
        raise ValueError(f"filtered_probs: exact distributions are stored for EXAMPLE_LOGITS with the settings "
                         f"{[setting_key(**s) for s in SAMPLING_SETTINGS]} only, not {key}")
    return stored[key].clone()


def plot_sampling_rules(logits: torch.Tensor = EXAMPLE_LOGITS, words: Sequence[str] = EXAMPLE_WORDS,
                        temperatures=(0.0, 0.5, 1.0, 2.0), top_k: int = 3, top_p: float = 0.8) -> Figure:
    """Three panels over the same logits: temperature (greedy = 0), top-k and top-p (with the
    cumulative probability that decides where the nucleus ends)."""
    x = np.arange(len(words))
    full = filtered_probs(logits).numpy()
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.8), sharey=True)
    ax = axes[0]
    for k, t in enumerate(temperatures):
        label = "T = 0 (greedy)" if t == 0 else f"T = {t:g}"
        ax.plot(x, filtered_probs(logits, temperature=t).numpy(), "o-", ms=4, color=f"C{k}", label=label)
    ax.set(title="Temperature: softmax(logits / T)", ylabel="probability of the next token")
    ax = axes[1]
    ax.bar(x, full, color="0.8", label="T = 1, all tokens")
    ax.bar(x, filtered_probs(logits, top_k=top_k).numpy(), width=0.5, color="C2", label=f"top-k, k = {top_k}")
    ax.set(title=f"Top-k: keep the {top_k} largest, renormalize")
    ax = axes[2]
    ax.bar(x, full, color="0.8", label="T = 1, all tokens")
    ax.bar(x, filtered_probs(logits, top_p=top_p).numpy(), width=0.5, color="C4", label=f"top-p, p = {top_p:g}")
    ax.plot(x, np.cumsum(full), "k.-", lw=0.8, ms=3, label="cumulative probability")
    ax.axhline(top_p, color="C4", ls="--", lw=0.8)
    ax.set(title=f"Top-p: smallest set with mass ≥ {top_p:g}")
    for ax in axes:
        ax.set_xticks(x, words, rotation=60, fontsize=8)
        ax.set_xlabel('next token after "To be, or not to"')
        # The top-p panel's cumulative curve fills the upper right: put its legend below it.
        ax.legend(fontsize=7, loc="center right" if ax is axes[2] else "upper right")
    fig.tight_layout()
    return fig


# ---------------------------------------------------------------- the student's sampler, measured


class FixedLogitsLM(nn.Module):
    """A stand-in language model whose next-token logits are always `logits`, whatever the
    input: sampling many tokens from it with generate draws many times from the same distribution."""

    def __init__(self, logits: torch.Tensor, context_length: int = 4):
        super().__init__()
        self.context_length = context_length
        self.logits = nn.Parameter(logits.detach().float().clone(), requires_grad=False)

    def forward(self, token_ids: torch.Tensor, kv_cache=None) -> torch.Tensor:
        return self.logits.expand(*token_ids.shape, -1)  # (batch, seq, vocab)

    def make_kv_cache(self) -> list:
        return []


def sample_frequencies(generate: Callable, logits: torch.Tensor = EXAMPLE_LOGITS, n: int = 2000,
                       seed: int = 0, **sampling) -> np.ndarray:
    """Frequencies of the tokens drawn by `generate` (the student's) in n steps from
    FixedLogitsLM(logits), with the sampling options `sampling` (temperature, top_k, top_p)."""
    model = FixedLogitsLM(logits)
    ids = generate(model, [0], n, use_cache=False, generator=torch.Generator().manual_seed(seed), **sampling)
    return np.bincount(ids[1:].numpy(), minlength=logits.numel()) / n


def plot_samples_vs_exact(settings: dict[str, dict], frequencies: dict[str, np.ndarray],
                          logits: torch.Tensor = EXAMPLE_LOGITS, words: Sequence[str] = EXAMPLE_WORDS,
                          n: int = 2000) -> Figure:
    """One panel per sampling setting: the frequencies of your generate's draws (bars) against
    the exact filtered distribution (dots)."""
    fig, axes = plt.subplots(1, len(settings), figsize=(3.3 * len(settings), 3.4), sharey=True)
    x = np.arange(len(words))
    for k, (ax, (name, kw)) in enumerate(zip(np.atleast_1d(axes), settings.items())):
        ax.bar(x, frequencies[name], color=f"C{k}", alpha=0.6, label=f"your generate ({n:,} draws)")
        ax.plot(x, filtered_probs(logits, **kw).numpy(), "k.", ms=7, label="exact")
        ax.set_xticks(x, words, rotation=60, fontsize=8)
        ax.set(title=name, xlabel="next token")
        ax.legend(fontsize=7, loc="upper right")
    np.atleast_1d(axes)[0].set_ylabel("probability")
    fig.suptitle("Sampling from a fixed distribution: draws of your generate vs the exact probabilities",
                 fontsize=10)
    fig.tight_layout()
    return fig


# ---------------------------------------------------------------- the KV cache, timed


@torch.no_grad()
def kv_cache_timings(model, lengths: Sequence[int], repeats: int = 5, seed: int = 0) -> dict[str, list[float]]:
    """Seconds to compute the next token's logits when the sequence has L tokens, for each L in
    `lengths`, the median of `repeats` runs:
      - "no cache": one forward pass over all L tokens (what generate does without a cache);
      - "KV cache": one forward pass of the newest token, with the other L − 1 in the cache.
    Needs L ≤ model.context_length."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, model.vocab_size, (1, max(lengths)), generator=g)
    model.eval()
    out = {"length": list(lengths), "no cache": [], "KV cache": []}
    for length in lengths:
        full, cached = [], []
        for _ in range(repeats):
            start = time.perf_counter()
            model(ids[:, :length])
            full.append(time.perf_counter() - start)
            cache = model.make_kv_cache()
            model(ids[:, : length - 1], kv_cache=cache)  # fill the cache (not timed)
            start = time.perf_counter()
            model(ids[:, length - 1 : length], kv_cache=cache)
            cached.append(time.perf_counter() - start)
        out["no cache"].append(float(np.median(full)))
        out["KV cache"].append(float(np.median(cached)))
    return out


def plot_kv_timings(timings: dict[str, list[float]]) -> Figure:
    """Left: milliseconds per generated token against the sequence length, with and without the
    cache. Right: the speed-up (no cache / cache)."""
    lengths = np.asarray(timings["length"])
    full, cached = 1e3 * np.asarray(timings["no cache"]), 1e3 * np.asarray(timings["KV cache"])
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 3.6))
    ax1.plot(lengths, full, "o-", color="C3", label="no cache: forward all L tokens")
    ax1.plot(lengths, cached, "o-", color="C0", label="KV cache: forward the newest token")
    ax1.set(title="Time to produce one token", xlabel="sequence length L", ylabel="ms per token")
    ax1.legend(fontsize=8)
    ax2.plot(lengths, full / cached, "o-", color="C2")
    ax2.axhline(1, color="k", lw=0.8, ls=":")
    ax2.set(title="Speed-up of the cache", xlabel="sequence length L", ylabel="no cache / KV cache")
    fig.tight_layout()
    return fig


class BanToken(nn.Module):
    """Wraps a language model so that one token id (e.g. the RARE id of a compact vocabulary) is
    never generated: its logit is set to −inf. Everything else passes through to the model."""

    def __init__(self, model: nn.Module, token_id: int):
        super().__init__()
        self.model, self.token_id = model, token_id
        self.context_length, self.vocab_size = model.context_length, model.vocab_size

    def forward(self, token_ids: torch.Tensor, kv_cache=None) -> torch.Tensor:
        logits = self.model(token_ids, kv_cache=kv_cache)
        logits[..., self.token_id] = float("-inf")
        return logits

    def make_kv_cache(self):
        return self.model.make_kv_cache()
