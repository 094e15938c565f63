"""What a model scores on held-out tokens: the summed and mean cross-entropy in non-overlapping
windows and in sliding ones (every token with at least half a context before it), bits per byte,
and the unigram baseline. The training command reports them and the
plots of notebooks 10b and 11 (minilm/course/viz/training.py) import them, so both measure alike."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import torch

import minilm
from minilm.course.train.dist import Dist


def _plain_windows(n_tokens: int, context_length: int, max_tokens: int | None) -> tuple[int, int]:
    """(targets, windows) of evaluate_sums on n_tokens tokens: all of tokens[1:] (a shorter last
    window included) when max_tokens is None, else only the first max(1, max_tokens // context_length)
    windows."""
    n_targets = n_tokens - 1
    n_windows = -(-n_targets // context_length)  # the last one may be shorter
    if max_tokens is not None:
        n_windows = min(n_windows, max(1, max_tokens // context_length))
        n_targets = min(n_targets, n_windows * context_length)
    return n_targets, n_windows


def scored_targets(n_tokens: int, context_length: int, max_tokens: int | None = None) -> int:
    """The n of evaluate_sums(…, max_tokens) on n_tokens tokens, all processes together."""
    return _plain_windows(n_tokens, context_length, max_tokens)[0]


def forward_tokens(n_tokens: int, context_length: int, max_tokens: int | None = None, stride: int | None = None,
                   rank: int = 0, world_size: int = 1) -> int:
    """The tokens one process runs forward in evaluate_sums (stride None) or evaluate_sliding_sums
    (stride given, max_tokens the targets it scores) on n_tokens tokens: the total their `progress`
    callbacks add up to, for a progress bar."""
    if stride is None:
        n_targets, n_windows = _plain_windows(n_tokens, context_length, max_tokens)
        return sum(min(context_length, n_targets - w * context_length) for w in range(rank, n_windows, world_size))
    n_targets = n_tokens - 1 if max_tokens is None else min(n_tokens - 1, max_tokens)
    return sum(length for _, length, _ in sliding_windows(n_targets, context_length, stride)[rank::world_size])


def evaluate_sums(model, tokens: np.ndarray, context_length: int, batch_size: int = 32,
                  max_tokens: int | None = None, dist: Dist | None = None, device="cpu",
                  progress: Callable[[int], object] | None = None) -> tuple[float, int]:
    """(total nats, n): the summed cross-entropy (minilm.cross_entropy) of predicting tokens[1 : n + 1]
    from what precedes them, in non-overlapping windows of context_length, so every evaluation
    sees the same text. All of tokens[1:] (a shorter last window included) when max_tokens is
    None, else only the first max(1, max_tokens // context_length) windows. Under DDP (dist given
    and enabled) the ranks split the windows and the sums are added up over them. progress(k), if
    given, hears of the k tokens each batch ran forward (forward_tokens: their total)."""
    rank, world_size = (dist.rank, dist.world_size) if dist is not None else (0, 1)
    n_targets, n_windows = _plain_windows(len(tokens), context_length, max_tokens)
    mine = list(range(rank, n_windows, world_size))
    full = [w for w in mine if (w + 1) * context_length <= n_targets]
    batches = [full[i : i + batch_size] for i in range(0, len(full), batch_size)]
    batches += [[w] for w in mine if (w + 1) * context_length > n_targets]  # the short last window, alone
    total = torch.zeros(2, dtype=torch.float64)  # (sum of losses · tokens, tokens)
    was_training = model.training
    model.eval()
    with torch.no_grad():
        for batch in batches:
            length = min(context_length, n_targets - batch[0] * context_length)
            windows = np.stack([np.asarray(tokens[w * context_length : w * context_length + length + 1],
                                           dtype=np.int64) for w in batch])
            windows = torch.from_numpy(windows).to(device)  # (b, length + 1)
            loss = minilm.cross_entropy(model(windows[:, :-1]), windows[:, 1:])
            total += torch.tensor([loss.item() * windows[:, 1:].numel(), windows[:, 1:].numel()], dtype=torch.float64)
            if progress is not None:
                progress(windows[:, :-1].numel())
    model.train(was_training)
    if dist is not None:
        total = dist.sum(total)
    return total[0].item(), int(total[1].item())


def sliding_windows(n_targets: int, context_length: int, stride: int) -> list[tuple[int, int, int]]:
    """The windows of a sliding evaluation of targets 1 … n_targets, as (start, length, scored): the
    window reads tokens[start : start + length] and scores its last `scored` targets. The first window
    scores all of its targets; each next one moves `stride` tokens on and scores only the targets
    no window scored yet, so every target is scored once, and every target past the first window
    sees at least context_length − stride tokens before it (the last window ends at n_targets)."""
    if not 1 <= stride <= context_length:
        raise ValueError(f"sliding_windows: need 1 <= stride <= context_length, got {stride} and {context_length}")
    windows, done = [], 0
    while done < n_targets:
        end = min(done + (context_length if done == 0 else stride), n_targets)
        start = max(0, end - context_length)
        windows.append((start, end - start, end - done))
        done = end
    return windows


def evaluate_sliding_sums(model, tokens: np.ndarray, context_length: int, stride: int | None = None,
                          batch_size: int = 32, max_tokens: int | None = None, dist: Dist | None = None,
                          device="cpu", progress: Callable[[int], object] | None = None) -> tuple[float, int]:
    """(total nats, n) of predicting tokens[1 : n + 1] in windows that slide by `stride` (default
    context_length // 2; see sliding_windows): the same targets as evaluate_sums, each scored once,
    but none with less than context_length − stride tokens of context past the first window, where
    non-overlapping windows give a window's first target none and its others half a context on
    average. It costs about context_length / stride times as many forward passes. max_tokens: only
    the first max_tokens targets (all when None). Under DDP the ranks split the windows. progress(k),
    if given, hears of the k tokens each batch ran forward (forward_tokens with the stride: their total)."""
    stride = stride or max(1, context_length // 2)
    rank, world_size = (dist.rank, dist.world_size) if dist is not None else (0, 1)
    n_targets = len(tokens) - 1 if max_tokens is None else min(len(tokens) - 1, max_tokens)
    mine = sliding_windows(n_targets, context_length, stride)[rank::world_size]
    groups: dict[tuple[int, int], list[int]] = {}  # windows of one (length, scored) go in one batch
    for start, length, scored in mine:
        groups.setdefault((length, scored), []).append(start)
    total = torch.zeros(2, dtype=torch.float64)
    was_training = model.training
    model.eval()
    with torch.no_grad():
        for (length, scored), starts in groups.items():
            for i in range(0, len(starts), batch_size):
                windows = torch.from_numpy(np.stack([np.asarray(tokens[s : s + length + 1], dtype=np.int64)
                                                     for s in starts[i : i + batch_size]])).to(device)
                logits = model(windows[:, :-1])[:, -scored:]
                loss = minilm.cross_entropy(logits, windows[:, -scored:])
                n = windows[:, -scored:].numel()
                total += torch.tensor([loss.item() * n, n], dtype=torch.float64)
                if progress is not None:
                    progress(windows[:, :-1].numel())
    model.train(was_training)
    if dist is not None:
        total = dist.sum(total)
    return total[0].item(), int(total[1].item())


def evaluate(model, tokens: np.ndarray, context_length: int, batch_size: int = 32, max_tokens: int | None = None,
             dist: Dist | None = None, device="cpu") -> float:
    """Mean cross-entropy in nats per token over the windows of evaluate_sums; notebook 10b uses
    it with one process."""
    nats, n = evaluate_sums(model, tokens, context_length, batch_size, max_tokens, dist, device)
    return nats / n


def bits_per_byte(nats: float, n_bytes: int) -> float:
    """Total nats of a text → bits per byte of it: nats ÷ ln 2 ÷ its UTF-8 bytes. Unlike nats per
    token it does not depend on the tokenizer, so models with different tokenizers compare."""
    return nats / math.log(2) / n_bytes


def unigram_nats(train_tokens: np.ndarray, targets: np.ndarray, vocab_size: int) -> float:
    """The total nats on `targets` of the best model that ignores context, fitted on the training
    split: every token gets its training frequency, add-one smoothed over the vocabulary so a
    token the training split lacks costs a finite amount."""
    counts = np.bincount(np.asarray(train_tokens, dtype=np.int64), minlength=vocab_size) + 1.0
    log_p = np.log(counts) - math.log(counts.sum())
    return float(-log_p[np.asarray(targets, dtype=np.int64)].sum())
