"""A character-level GPT from PyTorch's own modules: the baseline of the time-to-quality benchmark.

    python -m benchmarks.charlm --iters 2000 --data-dir RUN/data --val-bytes N --json out.json
    python -m benchmarks.charlm --budget 3m --data-dir RUN/data --val-bytes N --json out.json

nanoGPT's CPU recipe for Shakespeare-char (its README's `--device=cpu` command on
config/train_shakespeare_char.py): 4 layers, 4 heads, width 128, context 64, batch 12, dropout
0, no biases, 2,000 iterations, AdamW at 1e-3 (betas 0.9, 0.99, weight decay 0.1 on the 2-D
parameters) with 100 warmup steps and a cosine decay to 1e-4 at iteration 2,000, gradients
clipped at 1. The model is GPT-2's shape: learned position embeddings, pre-norm blocks
(nn.TransformerEncoderLayer: LayerNorm, multi-head attention, a GELU MLP 4× wide), a final
LayerNorm and an output layer tied to the embedding; N(0, 0.02) weights, the residual output
projections at 0.02/√(2 · layers). --iters N runs that recipe for N iterations however long it
takes (the benchmark's baseline: 2,000); --budget instead stops by the clock, its cosine
following the fraction of the training time gone. --warmup shortens the warmup, for toy runs
(`python -m benchmarks --smoke`) that would otherwise spend 100 iterations warming up.

Its characters are bytes (256 ids), so any text can be encoded and a character is a byte of Tiny
Shakespeare (ASCII). It trains on the bytes of the training split `minilm train` prepared in
--data-dir and is scored on --val-bytes bytes of the validation split's text after --skip-bytes: the bytes
`minilm train` scored (all but its first token's), so the two bits per byte are of the same text. Like `minilm train
--budget`, it stops by the clock: the budget counts from the start of the process and covers training
and the final evaluation, and the learning rate's cosine follows the fraction of the training
time gone.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

RECIPE = dict(num_layers=4, num_heads=4, d_model=128, context_length=64, batch_size=12, lr=1e-3, min_lr=1e-4,
              warmup=100, betas=(0.9, 0.99), weight_decay=0.1, clip=1.0, iters=2000)


class CharGPT(nn.Module):
    def __init__(self, vocab_size: int = 256, context_length: int = 64, d_model: int = 128, num_layers: int = 4,
                 num_heads: int = 4):
        super().__init__()
        self.context_length = context_length
        self.token_embeddings = nn.Embedding(vocab_size, d_model)
        self.position_embeddings = nn.Embedding(context_length, d_model)
        layer = nn.TransformerEncoderLayer(d_model, num_heads, 4 * d_model, dropout=0.0, activation="gelu",
                                           batch_first=True, norm_first=True, bias=False)
        self.blocks = nn.TransformerEncoder(layer, num_layers, enable_nested_tensor=False)
        self.ln_final = nn.LayerNorm(d_model, bias=False)
        self.lm_head = nn.Linear(d_model, vocab_size, bias=False)
        self.lm_head.weight = self.token_embeddings.weight  # tied, as in GPT-2
        for name, p in self.named_parameters():  # GPT-2's initialization: N(0, 0.02) matrices
            if p.dim() >= 2:  # … and the residual projections at 0.02/√(2 · layers), as nanoGPT
                residual = name.endswith(("self_attn.out_proj.weight", "linear2.weight"))
                nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * num_layers) if residual else 0.02)

    def forward(self, ids: Tensor) -> Tensor:
        t = ids.shape[-1]
        x = self.token_embeddings(ids) + self.position_embeddings(torch.arange(t, device=ids.device))
        mask = nn.Transformer.generate_square_subsequent_mask(t, device=ids.device)
        x = self.blocks(x, mask=mask, is_causal=True)
        return self.lm_head(self.ln_final(x))


def optimizer_for(model: nn.Module) -> torch.optim.AdamW:
    """AdamW with weight decay on the matrices only (not on LayerNorm weights and biases)."""
    params = [p for p in model.parameters() if p.requires_grad]
    decay = [p for p in params if p.dim() >= 2]
    no_decay = [p for p in params if p.dim() < 2]
    return torch.optim.AdamW([{"params": decay, "weight_decay": RECIPE["weight_decay"]},
                              {"params": no_decay, "weight_decay": 0.0}], lr=RECIPE["lr"], betas=RECIPE["betas"])


def lr_at(step: int, gone: float | None, iters: int | None = None, warmup: int = RECIPE["warmup"]) -> float:
    """Linear warmup over the first `warmup` steps, then a cosine from lr to min_lr: with
    `iters`, nanoGPT's get_lr (warmup (it + 1)/(warmup + 1), the cosine from the warmup's end to
    iteration `iters`); else over the fraction `gone` of the training time."""
    if iters is not None:
        if step < warmup:
            return RECIPE["lr"] * (step + 1) / (warmup + 1)
        gone = min((step - warmup) / (iters - warmup), 1.0)
    elif step < warmup:
        return RECIPE["lr"] * (step + 1) / warmup
    cosine = 0.5 * (1 + math.cos(math.pi * min(gone, 1.0)))
    return RECIPE["min_lr"] + cosine * (RECIPE["lr"] - RECIPE["min_lr"])


@torch.no_grad()
def evaluate_bytes(model: CharGPT, ids: np.ndarray, batch_size: int = 32) -> tuple[float, int]:
    """(total nats, n) of predicting ids[1:] in non-overlapping windows of the context (the last one
    shorter): the windows of minilm.course.train.metrics.evaluate_sums."""
    t = model.context_length
    n_targets = len(ids) - 1
    starts = list(range(0, n_targets, t))
    full = [s for s in starts if s + t <= n_targets]
    batches = [full[i : i + batch_size] for i in range(0, len(full), batch_size)]
    batches += [[s] for s in starts if s + t > n_targets]
    total = 0.0
    model.eval()
    for batch in batches:
        length = min(t, n_targets - batch[0])
        windows = torch.from_numpy(np.stack([ids[s : s + length + 1] for s in batch]).astype(np.int64))
        logits = model(windows[:, :-1])
        total += F.cross_entropy(logits.flatten(0, 1), windows[:, 1:].flatten(), reduction="sum").item()
    model.train()
    return total, n_targets


@torch.no_grad()
def evaluate_bytes_sliding(model: CharGPT, ids: np.ndarray, stride: int, batch_size: int = 32) -> tuple[float, int]:
    """(total nats, n) of the same targets in windows sliding by `stride`, each scored once: the
    windows of minilm.course.train.metrics.evaluate_sliding_sums (`minilm train`'s second figure)."""
    from minilm.course.train.metrics import sliding_windows

    groups: dict[tuple[int, int], list[int]] = {}
    for start, length, scored in sliding_windows(len(ids) - 1, model.context_length, stride):
        groups.setdefault((length, scored), []).append(start)
    total = 0.0
    model.eval()
    for (length, scored), starts in groups.items():
        for i in range(0, len(starts), batch_size):
            windows = torch.from_numpy(np.stack([ids[s : s + length + 1] for s in starts[i : i + batch_size]])
                                       .astype(np.int64))
            logits = model(windows[:, :-1])[:, -scored:]
            total += F.cross_entropy(logits.flatten(0, 1), windows[:, -scored:].flatten(), reduction="sum").item()
    model.train()
    return total, len(ids) - 1


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.charlm", description=__doc__.splitlines()[0])
    what = parser.add_mutually_exclusive_group(required=True)
    what.add_argument("--budget", help="wall-clock time for the run, e.g. 90s, 3m")
    what.add_argument("--iters", type=int, help="train this many iterations however long they take (nanoGPT: 2000)")
    parser.add_argument("--data-dir", type=Path, required=True, help="train.npy and val.npy of `minilm train`")
    parser.add_argument("--val-bytes", type=int, required=True, help="score this many validation bytes …")
    parser.add_argument("--skip-bytes", type=int, default=None,
                        help="… after this many (default: the last --val-bytes bytes)")
    parser.add_argument("--json", type=Path, required=True, help="write the figures here")
    parser.add_argument("--warmup", type=int, default=RECIPE["warmup"], help="warmup iterations (nanoGPT: 100)")
    parser.add_argument("--seed", type=int, default=1337)
    return parser


def load_bytes(args: argparse.Namespace, parser: argparse.ArgumentParser) -> tuple[np.ndarray, np.ndarray]:
    """The training split's bytes, and the validation bytes to score (one byte of context first)."""
    from minilm.course import corpus

    enc = corpus.tokenizer()
    train_bytes = enc.decode_bytes(np.asarray(corpus.load_tokens(args.data_dir / "train.npy"), dtype=np.int64).tolist())
    val_bytes = enc.decode_bytes(np.asarray(corpus.load_tokens(args.data_dir / "val.npy"), dtype=np.int64).tolist())
    skip = len(val_bytes) - args.val_bytes if args.skip_bytes is None else args.skip_bytes
    if not (args.val_bytes > 0 and 0 < skip and skip + args.val_bytes <= len(val_bytes)):
        parser.error(f"need --val-bytes > 0 and 0 < --skip-bytes, with both within the {len(val_bytes):,} validation "
                     f"bytes; got {args.val_bytes} and {skip}")
    return (np.frombuffer(train_bytes, dtype=np.uint8),
            np.frombuffer(val_bytes, dtype=np.uint8)[skip - 1 : skip + args.val_bytes])


def stepper(model: CharGPT, data: torch.Tensor):
    """step(lr) -> loss: one AdamW step of nanoGPT's recipe on a random batch of `data` (byte ids)."""
    optimizer = optimizer_for(model)
    b, t = RECIPE["batch_size"], RECIPE["context_length"]

    def step(lr: float) -> float:
        for group in optimizer.param_groups:
            group["lr"] = lr
        starts = torch.randint(0, len(data) - t, (b,))
        windows = torch.stack([data[s : s + t + 1] for s in starts.tolist()])
        loss = F.cross_entropy(model(windows[:, :-1]).flatten(0, 1), windows[:, 1:].flatten())
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), RECIPE["clip"])
        optimizer.step()
        return loss.item()

    return step


def main(argv: list[str] | None = None) -> int:
    from minilm.course.train.plan import SAFETY, parse_duration, process_age_s

    clock_start = time.perf_counter() - process_age_s()  # like minilm train: from the start of the process
    parser = build_parser()
    args = parser.parse_args(argv)
    budget_s = parse_duration(args.budget) if args.budget is not None else None
    if args.budget is not None and (not budget_s or budget_s <= 0):
        parser.error(f"--budget: expected a positive duration such as 90s or 3m, got {args.budget!r}")
    if args.warmup < 1:
        parser.error(f"--warmup must be at least 1, got {args.warmup}")
    if args.iters is not None and args.iters <= args.warmup:
        parser.error(f"--iters must exceed the {args.warmup} warmup iterations, got {args.iters}")
    train_ids, val_ids = load_bytes(args, parser)

    torch.manual_seed(args.seed)
    model = CharGPT(256, RECIPE["context_length"], RECIPE["d_model"], RECIPE["num_layers"], RECIPE["num_heads"])
    step, t = stepper(model, torch.from_numpy(train_ids.astype(np.int64))), RECIPE["context_length"]

    def timed(fn) -> float:
        start = time.perf_counter()
        fn()
        return time.perf_counter() - start

    # The same choice of threads as `minilm train --budget`: all of them, or one if that is faster here.
    # These steps train too (a warm-up step, then one each way): the clock counts them.
    threads = torch.get_num_threads()
    losses = [step(lr_at(0, 0.0, args.iters, args.warmup))]
    if threads > 1:
        many = timed(lambda: losses.append(step(lr_at(1, 0.0, args.iters, args.warmup))))
        torch.set_num_threads(1)
        one = timed(lambda: losses.append(step(lr_at(2, 0.0, args.iters, args.warmup))))
        torch.set_num_threads(1 if one < many else threads)
    # Keep back the final evaluation: one eval batch forward, timed, scaled to the validation windows.
    rows = max(1, min(32, (len(val_ids) - 1) // t))
    with torch.no_grad():
        probe = torch.from_numpy(val_ids[: rows * t].astype(np.int64)).view(rows, -1)[:, :t]
        model(probe)  # warm-up: the first forward pass is the slowest
        forward_s = min(timed(lambda: model(probe)) for _ in range(2))
    # Both evaluations: non-overlapping windows, then sliding ones (t / stride times the forward passes).
    stride = max(1, t // 2)
    reserve_s = 1.3 * forward_s * math.ceil(args.val_bytes / t / rows) * (1 + t / stride) + 1.0
    loop_start = time.perf_counter()
    if args.iters is not None:  # nanoGPT's recipe: a fixed number of iterations
        while len(losses) < args.iters:
            losses.append(step(lr_at(len(losses), None, args.iters, args.warmup)))
    deadline = clock_start + budget_s * SAFETY - reserve_s if budget_s is not None else loop_start
    while True:
        gone = (time.perf_counter() - loop_start) / max(deadline - loop_start, 1e-9)
        if gone >= 1.0:
            break
        losses.append(step(lr_at(len(losses), gone, warmup=args.warmup)))
    train_s = time.perf_counter() - loop_start
    nats, n = evaluate_bytes(model, val_ids)
    sliding_nats, _ = evaluate_bytes_sliding(model, val_ids, stride)
    wall_s = time.perf_counter() - clock_start
    result = dict(budget_s=budget_s, iters=args.iters, wall_s=wall_s,
                  train_s=train_s, steps=len(losses), threads=torch.get_num_threads(),
                  parameters=sum(p.numel() for p in model.parameters()), recipe=dict(RECIPE, warmup=args.warmup),
                  first_loss=losses[0], last_loss=losses[-1], val_nats=nats, val_bytes=n, nats_per_byte=nats / n,
                  bits_per_byte=nats / math.log(2) / n, eval_stride=stride, sliding_nats=sliding_nats,
                  sliding_bits_per_byte=sliding_nats / math.log(2) / n)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(result, indent=1) + "\n")
    print(f"char baseline: {len(losses)} steps, validation {nats / n:.3f} nats per byte = "
          f"{result['bits_per_byte']:.3f} bits per byte ({result['sliding_bits_per_byte']:.3f} in windows sliding "
          f"by {stride}), {wall_s:.0f} s" + (f" of {budget_s:.0f} s" if budget_s is not None else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
