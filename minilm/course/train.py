"""Train a small Transformer language model on Tiny Shakespeare (or any UTF-8 text file).

    minilm train                                  # --budget 3m: measures this machine, sizes the model, ends on time
    minilm train --budget 10m                     # any wall-clock budget (90s, 1h, 1m30s; at least 30s)
    minilm train --steps 2000 --d-model 256       # a fixed number of steps instead; --help for every option
    minilm train --steps 2000 --resume            # continue the run in --out-dir after an interruption
    torchrun --nproc_per_node 2 -m minilm.course.train             # data-parallel (DDP) on 2 processes

It trains with YOUR exercise code: minilm.TransformerLM, get_batch, cross_entropy,
clip_grad_norm, lr_cosine_schedule, AdamW, save/load_checkpoint and generate (with
MINILM_IMPL=solutions it uses the reference instead). It prints the unigram baseline (the
loss of a model that ignores context), the validation loss every --eval-interval steps, the
final one in nats per token and in bits per byte (comparable across tokenizers), and a
sample of generated text at the end. The latest checkpoint is out_dir/checkpoint.pt; unless
--full-vocab, out_dir/vocab.npy maps the model's token ids to GPT-2's.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

import minilm
from minilm.course import corpus
from minilm.course.vocab import Vocabulary

CONFIG_FILE, CHECKPOINT_FILE, VOCAB_FILE = "config.json", "checkpoint.pt", "vocab.npy"
RESULT_FILE = "result.json"  # the final figures, for scripts (the benchmarks' time-to-quality race)
# Options that fix the model's shape (the data fixes the vocabulary): --resume refuses other values.
MODEL_KEYS = ("data", "full_vocab", "vocab_size", "d_model", "num_layers", "num_heads", "d_ff", "context_length", "rope_theta")

DEFAULT_BUDGET = "3m"
# The default vocabulary: the first 2,048 tokens of the training split's, in GPT-2's merge order.
# 150 s of training at d_model 128 on one core reached 2.202 bits per byte with 2,048 tokens, 2.208
# with 1,024 and 2.228 with 4,096; all 12,806 reached 2.370 beside a 2,048 run's 2.209 under the
# same load (the README): a smaller output layer buys more steps.
DEFAULT_VOCAB_SIZE = 2048
MIN_BUDGET_S = 30.0


def parse_duration(text: str) -> float | None:
    """'90s', '3m', '1.5h', '1m30s' or a bare number of seconds → seconds; None if it is not one."""
    text = str(text).strip().lower()
    parts = re.findall(r"(\d+(?:\.\d*)?|\.\d+)\s*([hms]?)", text)
    if not parts or re.sub(r"(\d+(?:\.\d*)?|\.\d+)\s*([hms]?)", "", text).strip():
        return None
    if len(parts) > 1 and any(unit == "" for _, unit in parts):
        return None
    return sum(float(number) * {"h": 3600, "m": 60, "s": 1, "": 1}[unit] for number, unit in parts)


def format_duration(seconds: float) -> str:
    seconds = round(seconds)
    if seconds < 60:
        return f"{seconds} s"
    return f"{seconds // 60} min" + (f" {seconds % 60} s" if seconds % 60 else "")


def build_parser(prog: str = "minilm train") -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=prog, description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    g = p.add_argument_group("data")
    g.add_argument("--data", default="tinyshakespeare",
                   help="'tinyshakespeare' (downloaded once; MINILM_TINYSHAKESPEARE=path uses a local copy) "
                        "or the path of a UTF-8 .txt file")
    g.add_argument("--val-fraction", type=float, default=0.1, help="the last fraction of the tokens, held out")
    g.add_argument("--vocab-size", type=int, default=DEFAULT_VOCAB_SIZE,
                   help="the model's vocabulary, built from the training split alone: the first N of its GPT-2 "
                        "tokens in GPT-2's merge order (the 256 bytes first, then the earliest merges; every "
                        "piece a token is merged from comes before it); 0 keeps all of them (12,806 for Tiny "
                        "Shakespeare). Text is encoded with GPT-2's BPE limited to these tokens: what they lack "
                        "is spelled in smaller pieces, never dropped")
    g.add_argument("--full-vocab", action="store_true",
                   help="use all 50,257 GPT-2 ids instead (ignores --vocab-size)")
    g = p.add_argument_group("model (default: the size --budget chooses; with --steps, "
                             + ", ".join(f"{k} {v}" for k, v in DEFAULT_SIZE.items()) + ")")
    g.add_argument("--context-length", type=int, default=64)
    g.add_argument("--d-model", type=int, default=None)
    g.add_argument("--num-layers", type=int, default=None)
    g.add_argument("--num-heads", type=int, default=None)
    g.add_argument("--d-ff", type=int, default=None, help="SwiGLU hidden size (about 8/3 d_model)")
    g.add_argument("--rope-theta", type=float, default=10000.0)
    g = p.add_argument_group("optimization")
    g.add_argument("--batch-size", type=int, default=16, help="sequences per step (per process under torchrun)")
    g.add_argument("--budget", default=None,
                   help=f"wall-clock time for the whole run, data to sample, e.g. 90s, 3m, 1h (at least "
                        f"{MIN_BUDGET_S:.0f}s): measures this machine, then chooses the model size and the steps "
                        f"(default {DEFAULT_BUDGET} when --steps is not given)")
    g.add_argument("--steps", type=int, default=None, help="optimizer steps in total, however long they take "
                                                            "(instead of --budget)")
    g.add_argument("--lr", type=float, default=3e-3, help="peak learning rate, reached after --warmup steps")
    g.add_argument("--min-lr", type=float, default=3e-4, help="learning rate at the end of the cosine decay")
    g.add_argument("--warmup", type=int, default=30, help="linear warmup steps")
    g.add_argument("--weight-decay", type=float, default=0.1)
    g.add_argument("--beta1", type=float, default=0.9)
    g.add_argument("--beta2", type=float, default=0.95)
    g.add_argument("--clip", type=float, default=1.0, help="max global gradient norm")
    g = p.add_argument_group("run")
    g.add_argument("--eval-interval", type=int, default=None,
                   help="steps between validation losses (default: 100 with --steps, 6 per run with --budget)")
    g.add_argument("--eval-tokens", type=int, default=8192,
                   help="validation tokens per periodic evaluation (the final one uses the whole set)")
    g.add_argument("--checkpoint-interval", type=int, default=None,
                   help="steps between checkpoints (default: 250 with --steps, 3 per run with --budget)")
    g.add_argument("--out-dir", default=None,
                   help="checkpoint, config and encoded data go here (default: $MINILM_DATA_DIR or "
                        "~/.cache/minilm, then runs/minilm)")
    g.add_argument("--resume", action="store_true", help="continue from out_dir/checkpoint.pt")
    g.add_argument("--seed", type=int, default=1337)
    g.add_argument("--device", default="cpu", help="cpu, cuda, cuda:1, mps …")
    g.add_argument("--compile", action="store_true", default=None,
                   help="train through torch.compile (a minute or so to compile, then faster steps); "
                        "falls back to eager, saying why, where it is unavailable. Default: with --budget, "
                        "on when the budget is long enough for it to pay off; with --steps, off")
    g.add_argument("--no-compile", dest="compile", action="store_false", help="never torch.compile")
    g.add_argument("--prompt", default=None, help="the start of the final sample (default: the data's first line)")
    g.add_argument("--sample-tokens", type=int, default=120, help="length of the final sample (0: none)")
    g.add_argument("--check-sync", action="store_true",
                   help="at the end, verify that every process holds identical parameters (for tests)")
    return p


def validate(args: argparse.Namespace, parser: argparse.ArgumentParser) -> None:
    """Reject a bad configuration before any work starts (parser.error exits with status 2)."""
    if args.out_dir is None:
        args.out_dir = str(corpus.data_dir() / "runs" / "minilm")
    if args.budget is not None and args.steps is not None:
        parser.error(f"--budget {args.budget} and --steps {args.steps}: pick one (a budget chooses the steps; "
                     f"--steps trains that many, however long it takes)")
    if args.budget is not None and args.resume:
        parser.error("--resume continues a run to --steps (the total); a --budget always starts a new run")
    saved = {}
    config = Path(args.out_dir) / CONFIG_FILE
    if args.resume and config.is_file():
        saved = json.loads(config.read_text())
        for key in ("d_model", "num_layers", "num_heads", "d_ff", "steps"):  # what the run chose, unless given
            if getattr(args, key) is None and saved.get(key) is not None:
                setattr(args, key, saved[key])
    if args.resume and args.steps is None:
        parser.error(f"--resume: give --steps, the total to reach (no {config} says how many)")
    if args.budget is None and args.steps is None:
        args.budget = DEFAULT_BUDGET
    args.budget_s = None
    if args.budget is not None:
        args.budget_s = parse_duration(args.budget)
        if args.budget_s is None:
            parser.error(f"--budget: expected a duration such as 90s, 3m, 1h or 1m30s, got {args.budget!r}")
        if args.budget_s <= 0:
            parser.error(f"--budget must be a positive duration such as 90s, 3m or 1h, got {args.budget}")
        if args.budget_s < MIN_BUDGET_S:
            parser.error(f"--budget {args.budget} is too short to train anything: loading the data, measuring "
                         f"this machine, the final evaluation and the sample need most of "
                         f"{MIN_BUDGET_S:.0f} s; give at least --budget {MIN_BUDGET_S:.0f}s")
    sizes = ("d_model", "num_layers", "num_heads", "d_ff")
    # A budget chooses the model size unless any of it is given; the rest then comes from DEFAULT_SIZE.
    args.size_chosen_by_budget = args.budget_s is not None and all(getattr(args, k) is None for k in sizes)
    if not args.size_chosen_by_budget:
        for key in sizes:
            if getattr(args, key) is None:
                setattr(args, key, DEFAULT_SIZE[key])
    if args.budget_s is None:
        args.eval_interval = args.eval_interval or 100
        args.checkpoint_interval = args.checkpoint_interval or 250
        args.compile = bool(args.compile)
    for name in ("context_length", "d_model", "num_layers", "num_heads", "d_ff", "batch_size", "steps",
                 "eval_interval", "eval_tokens", "checkpoint_interval"):
        value = getattr(args, name)
        if value is not None and value <= 0:
            parser.error(f"--{name.replace('_', '-')} must be a positive integer, got {value}")
    for name in ("warmup", "sample_tokens"):
        if getattr(args, name) < 0:
            parser.error(f"--{name.replace('_', '-')} must be >= 0, got {getattr(args, name)}")
    if args.size_chosen_by_budget:
        pass  # the ladder's sizes are valid (tests/test_train.py checks them)
    elif args.d_model % args.num_heads:
        parser.error(f"--d-model must be divisible by --num-heads, got d_model={args.d_model} "
                     f"and num_heads={args.num_heads}")
    elif (args.d_model // args.num_heads) % 2:
        parser.error(f"RoPE needs an even head size d_model/num_heads, got {args.d_model}/{args.num_heads}"
                     f"={args.d_model // args.num_heads}")
    if not args.lr > 0 or not 0 <= args.min_lr <= args.lr:
        parser.error(f"need --lr > 0 and 0 <= --min-lr <= --lr, got lr={args.lr} and min_lr={args.min_lr}")
    if args.steps is not None and args.warmup >= args.steps:
        parser.error(f"--warmup must be smaller than --steps, got warmup={args.warmup} and steps={args.steps}")
    if args.weight_decay < 0 or not args.clip > 0 or not args.rope_theta > 0:
        parser.error("need --weight-decay >= 0, --clip > 0 and --rope-theta > 0")
    if not (0 <= args.beta1 < 1 and 0 <= args.beta2 < 1):
        parser.error(f"--beta1 and --beta2 must lie in [0, 1), got {args.beta1} and {args.beta2}")
    if not args.full_vocab and args.vocab_size != 0 and args.vocab_size < 256:
        parser.error(f"--vocab-size must be 0 (all of the training split's tokens) or at least 256 (the single "
                     f"bytes, so that any text can be spelled), got {args.vocab_size}")
    if not 0 < args.val_fraction < 1:
        parser.error(f"--val-fraction must lie in (0, 1), got {args.val_fraction}")
    if args.data != "tinyshakespeare" and not Path(args.data).is_file():
        parser.error(f"--data: no such file: {args.data} (give a UTF-8 .txt file or 'tinyshakespeare')")
    if args.resume and not (Path(args.out_dir) / CHECKPOINT_FILE).is_file():
        parser.error(f"--resume: no checkpoint at {Path(args.out_dir) / CHECKPOINT_FILE}")
    if saved:
        changed = [k for k in MODEL_KEYS if saved.get(k) != getattr(args, k)]
        if changed:
            parser.error("--resume: the checkpoint's model has different " + ", ".join(
                f"{k} ({saved.get(k)} there, {getattr(args, k)} now)" for k in changed))


# ---------------------------------------------------------------- distributed helpers


class Dist:
    """The process group under torchrun (WORLD_SIZE > 1), or a no-op stand-in for one process."""

    def __init__(self, device: str):
        self.world_size = int(os.environ.get("WORLD_SIZE", "1"))
        self.rank = int(os.environ.get("RANK", "0"))
        self.enabled = self.world_size > 1
        if self.enabled:
            import torch.distributed as dist

            backend = "nccl" if device.startswith("cuda") else "gloo"
            dist.init_process_group(backend)
            self.dist = dist

    @property
    def main(self) -> bool:
        return self.rank == 0

    def barrier(self) -> None:
        if self.enabled:
            self.dist.barrier()

    def mean(self, value: float) -> float:
        """The mean over processes of a float."""
        if not self.enabled:
            return value
        t = torch.tensor([value], dtype=torch.float64)
        self.dist.all_reduce(t)
        return t.item() / self.world_size

    def from_main(self, value: float) -> float:
        """Rank 0's value of a float on every rank (plans made from it then agree)."""
        if not self.enabled:
            return value
        t = torch.tensor([value], dtype=torch.float64)
        self.dist.broadcast(t, src=0)
        return t.item()

    def sum(self, t: torch.Tensor) -> torch.Tensor:
        if self.enabled:
            t = t.clone()
            self.dist.all_reduce(t)
        return t

    def close(self) -> None:
        if self.enabled:
            self.dist.destroy_process_group()


def parameter_checksum(model: torch.nn.Module) -> torch.Tensor:
    """Two float64 numbers that change with any parameter: Σ p and Σ p·(index+1)."""
    flat = torch.cat([p.detach().double().flatten() for p in model.parameters()])
    return torch.stack((flat.sum(), (flat * torch.arange(1, flat.numel() + 1, dtype=torch.float64)).sum()))


def check_sync(model: torch.nn.Module, dist: Dist) -> None:
    if not dist.enabled:
        return
    mine = parameter_checksum(model)
    gathered = [torch.zeros_like(mine) for _ in range(dist.world_size)]
    dist.dist.all_gather(gathered, mine)
    if any(not torch.equal(g, gathered[0]) for g in gathered):
        raise RuntimeError(f"--check-sync: the replicas' parameters differ: {[g.tolist() for g in gathered]}")
    if dist.main:
        print(f"check-sync: all {dist.world_size} replicas hold identical parameters")


# ---------------------------------------------------------------- training


def evaluate_sums(model, tokens: np.ndarray, context_length: int, batch_size: int = 32,
                  max_tokens: int | None = None, dist: Dist | None = None, device="cpu") -> tuple[float, int]:
    """(total nats, n): the summed cross-entropy (minilm.cross_entropy) of predicting tokens[1 : n + 1]
    from what precedes them, in non-overlapping windows of context_length, so every evaluation
    sees the same text. All of tokens[1:] (a shorter last window included) when max_tokens is
    None, else only the first max(1, max_tokens // context_length) windows. Under DDP (dist given
    and enabled) the ranks split the windows and the sums are added up over them."""
    rank, world_size = (dist.rank, dist.world_size) if dist is not None else (0, 1)
    n_targets = len(tokens) - 1
    n_windows = -(-n_targets // context_length)  # the last one may be shorter
    if max_tokens is not None:
        n_windows = min(n_windows, max(1, max_tokens // context_length))
        n_targets = min(n_targets, n_windows * context_length)
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
    model.train(was_training)
    if dist is not None:
        total = dist.sum(total)
    return total[0].item(), int(total[1].item())


def evaluate(model, tokens: np.ndarray, context_length: int, batch_size: int = 32, max_tokens: int | None = None,
             dist: Dist | None = None, device="cpu") -> float:
    """Mean cross-entropy in nats per token over the windows of evaluate_sums; notebook 10 uses
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


def prepare(args, dist: Dist) -> tuple[np.ndarray, np.ndarray, Path]:
    """Encode the data once (rank 0; the others wait) and memory-map it. Returns GPT-2 ids."""
    text_path = corpus.download_tinyshakespeare() if args.data == "tinyshakespeare" and dist.main else None
    if args.data != "tinyshakespeare":
        text_path = Path(args.data)
    data_dir = Path(args.out_dir) / "data"
    if dist.main:
        corpus.prepare_dataset(text_path, data_dir, args.val_fraction)
    dist.barrier()
    train = corpus.load_tokens(data_dir / "train.npy")
    val = corpus.load_tokens(data_dir / "val.npy")
    for name, tokens in (("training", train), ("validation", val)):
        if len(tokens) <= args.context_length:
            raise SystemExit(f"minilm train: error: the {name} split has {len(tokens)} tokens, "
                             f"not more than --context-length={args.context_length}; use a shorter context "
                             f"or more text")
    return train, val, text_path


def compile_or_eager(fn, trial):
    """torch.compile(fn) if it compiles and runs here, else fn itself and the reason in one line.

    trial(f) calls f once, so that compiling happens (and fails, on a machine without a C++
    compiler or on an unsupported platform) now rather than in the middle of a run.
    """
    try:
        compiled = torch.compile(fn)
        trial(compiled)
        return compiled, None
    except Exception as e:  # noqa: BLE001 - any failure to compile means: run eagerly
        first_line = (str(e).strip().splitlines() or [""])[0][:200]
        return fn, f"{type(e).__name__}: {first_line}"


def save(model, optimizer, iteration: int, out_dir: Path) -> None:
    """Write the checkpoint atomically: an interruption mid-write leaves the previous one intact."""
    path = out_dir / CHECKPOINT_FILE
    tmp = path.with_suffix(".tmp")
    minilm.save_checkpoint(model, optimizer, iteration, tmp)
    os.replace(tmp, path)


# ---------------------------------------------------------------- --budget: measure, then plan


# The sizes --budget chooses from, smallest first. d_ff is 8/3 d_model rounded up to a multiple
# of 64 (notebook 04's rule); every head size is even (RoPE).
LADDER = (
    dict(d_model=64, num_layers=2, num_heads=4, d_ff=192),
    dict(d_model=96, num_layers=2, num_heads=4, d_ff=256),
    dict(d_model=128, num_layers=3, num_heads=4, d_ff=384),
    dict(d_model=192, num_layers=4, num_heads=6, d_ff=512),
    dict(d_model=256, num_layers=4, num_heads=8, d_ff=704),
    dict(d_model=384, num_layers=6, num_heads=6, d_ff=1024),
)
PROBE_SIZES = (0, 4)  # the ladder sizes timed on this machine: the line through them prices the others
DEFAULT_SIZE = LADDER[2]  # with --steps and no sizes given: what --budget 3m chooses on an idle 2-core machine
# The rule (see plan_budget), from the sweep in the README (vocabulary 2,048). At the steps one core
# reaches in 3 minutes the best size, d_model 128, saw 1.26 tokens per non-embedding parameter and
# the next larger one 0.27; at the steps two idle cores reach, d_model 128 again (2.17) against
# d_model 192 (0.48). A threshold between 0.48 and 1.26 chooses both; 0.8 is near the middle. At
# 1 minute d_model 96 (1.36) and 128 (0.38) tied within 0.01 bits per byte.
TOKENS_PER_PARAMETER = 0.8
# An idle 2-core machine (2 threads, the reference, vocabulary 2,048, batch 16 × 64), training
# tokens/s by d_model: 64: 18,685, 96: 18,642, 128: 11,867, 192: 6,296, 256: 4,342, 384: 1,915; the
# line 39 µs + 7.71 ps per FLOP fits them within 12%. Forward-only is assumed a third of a step.
IDLE_2_CORES_TOKENS_PER_S = {64: 18685, 96: 18642, 128: 11867, 192: 6296, 256: 4342, 384: 1915}
# torch.compile of a training step, measured on 2 busy cores with the reference: 39 s to compile,
# then 1.57× faster steps at d_model 128 (41 s, 1.85× at d_model 256). Assumed: COMPILE_S and
# COMPILE_SPEEDUP, with room for a slower machine and a cold cache. Compiling pays off when
# (t − COMPILE_S) · COMPILE_SPEEDUP > t, t the training time.
COMPILE_S, COMPILE_SPEEDUP = 60.0, 1.5
COMPILE_PAYS_OFF_S = COMPILE_S * COMPILE_SPEEDUP / (COMPILE_SPEEDUP - 1)
SAFETY = 0.97  # plan to finish 3% early: startup before main() and a busy machine's jitter
END_S = 1.5  # the last checkpoint and the report, besides the final evaluation and the sample


def size_params(size: dict, vocab_size: int) -> tuple[int, int]:
    """(all parameters, non-embedding ones) of TransformerLM at `size` (the untied output layer
    is a matmul, so it counts as non-embedding)."""
    d, layers, d_ff = size["d_model"], size["num_layers"], size["d_ff"]
    per_layer = 4 * d * d + 3 * d * d_ff + 2 * d
    non_embedding = layers * per_layer + d + d * vocab_size
    return non_embedding + vocab_size * d, non_embedding


def flops_per_token(size: dict, vocab_size: int, context_length: int) -> float:
    """Training FLOPs per token: 6 per non-embedding parameter (forward 2, backward 4), plus the
    attention scores and their weighted sum (causal: half the context on average)."""
    _, non_embedding = size_params(size, vocab_size)
    return 6 * non_embedding + 6 * size["num_layers"] * context_length * size["d_model"]


@dataclass
class Speed:
    """This machine's seconds per token ≈ overhead + per_flop · FLOPs per token, for a training
    step and for a forward pass alone (evaluation), fitted to two measured sizes."""

    overhead: float
    per_flop: float
    forward_overhead: float
    forward_per_flop: float
    measured_s: float = 0.0  # how long measuring took

    def train_s_per_token(self, flops: float) -> float:
        return self.overhead + self.per_flop * flops

    def forward_s_per_token(self, flops: float) -> float:
        return self.forward_overhead + self.forward_per_flop * flops


IDLE_2_CORES = Speed(39.4e-6, 7.71e-12, 39.4e-6 / 3, 7.71e-12 / 3)


def _fit(points: list[list[float]]) -> tuple[float, float]:
    """(overhead, per_flop) of the line through two (FLOPs, seconds per token) points, both >= 0."""
    (f1, t1), (f2, t2) = points
    per_flop = max((t2 - t1) / (f2 - f1), 0.0)
    return max(t1 - per_flop * f1, 0.0), per_flop


def process_age_s() -> float:
    """Seconds since this process started (Linux, from /proc), so that a budget also covers
    starting Python and importing torch; elsewhere 0, and the budget counts from main()."""
    try:
        with open("/proc/self/stat") as f:
            start_ticks = int(f.read().rsplit(")", 1)[1].split()[19])  # field 22, starttime
        with open("/proc/uptime") as f:
            uptime_s = float(f.read().split()[0])
        return max(0.0, uptime_s - start_ticks / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError, AttributeError):
        return 0.0


def measure_speed(vocab_size: int, context_length: int, batch_size: int, train_tokens: np.ndarray, device,
                  dist: Dist, steps: int = 3, limit_s: float = 5.0) -> Speed:
    """Time a few training steps and forward passes of two ladder sizes with the exercise code:
    one warm-up step each, then the median of up to `steps` steps, fewer once measuring has
    taken limit_s; past limit_s the second size is skipped and the first prices every size
    (no overhead term: it then overrates the cost of larger sizes, so the plan stays small).
    Under DDP every rank measures and the slowest figures count, so every rank makes the same plan.

    On a CPU with several threads it first races one thread against all of them on a forward
    pass and keeps the faster (torch.set_num_threads): on cores busy with other work, threads
    that wait for each other can be several times slower than one (3–5× on 2 shared cores here)."""
    started = time.perf_counter()

    def over() -> bool:
        return time.perf_counter() - started > limit_s

    train_points, forward_points = [], []
    threads = torch.get_num_threads()
    for index in PROBE_SIZES:
        if train_points and over():
            break
        size = LADDER[index]
        torch.manual_seed(0)
        model = minilm.TransformerLM(vocab_size, context_length, rope_theta=10000.0, device=device, **size)
        optimizer = minilm.AdamW(model.parameters(), lr=1e-4)
        x, y = minilm.get_batch(train_tokens, batch_size, context_length, device)

        def step() -> float:
            t = time.perf_counter()
            loss = minilm.cross_entropy(model(x), y)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            minilm.clip_grad_norm(model.parameters(), 1.0)
            optimizer.step()
            loss.item()  # waits for an asynchronous device
            return time.perf_counter() - t

        def forward() -> float:
            t = time.perf_counter()
            with torch.no_grad():
                model(x).sum().item()
            return time.perf_counter() - t

        race = index == PROBE_SIZES[0] and threads > 1 and device.type == "cpu" and not dist.enabled
        if race:
            torch.set_num_threads(1)
        step()  # warm-up
        if race:
            one = forward()
            torch.set_num_threads(threads)
            many = forward()
            torch.set_num_threads(1 if one < many else threads)
        times = [step()]
        while len(times) < steps and not over():
            times.append(step())
        flops = flops_per_token(size, vocab_size, context_length)
        tokens = batch_size * context_length
        train_points.append([flops, float(np.median(times)) / tokens])
        forward_points.append([flops, forward() / tokens])
    figures = torch.tensor([p[1] for p in train_points + forward_points], dtype=torch.float64)
    if dist.enabled:
        dist.dist.all_reduce(figures, op=dist.dist.ReduceOp.MAX)
    for point, value in zip(train_points + forward_points, figures.tolist()):
        point[1] = value
    fit = _fit if len(train_points) == 2 else (lambda points: (0.0, points[0][1] / points[0][0]))
    return Speed(*fit(train_points), *fit(forward_points), measured_s=time.perf_counter() - started)


@dataclass
class Plan:
    size: dict
    chosen: bool  # by the rule (False: given on the command line)
    train_s: float  # seconds for the training loop (compiling included)
    reserve_s: float  # seconds kept for the final evaluation, the sample and the report
    compile: bool
    compile_note: str
    tokens_per_s: float  # estimated, all processes together, eager
    steps: int  # estimated steps before the deadline


def plan_budget(left_s: float, speed: Speed, vocab_size: int, context_length: int, batch_size: int,
                n_val: int, sample_tokens: int, world_size: int = 1, size: dict | None = None,
                compile_flag: bool | None = None) -> Plan:
    """The run that fits in `left_s` seconds on this machine.

    Time: the final evaluation (n_val tokens forward), the sample (sample_tokens forwards of up
    to a context each) and END_S are kept back; the rest trains. torch.compile is on when the
    training time is at least COMPILE_PAYS_OFF_S (unless compile_flag says otherwise).

    Size (the rule): the largest ladder size whose run processes at least TOKENS_PER_PARAMETER
    tokens per non-embedding parameter in the training time, at this machine's speed (the
    smallest size if none does). Bigger models learn more per token, smaller ones see more tokens
    per second; the sweep in the README (fixed budgets, every size, one machine) found the best
    bits per byte about where that ratio is TOKENS_PER_PARAMETER.
    """
    def forward(s: dict) -> float:
        return speed.forward_s_per_token(flops_per_token(s, vocab_size, context_length))

    def plan(s: dict, chosen: bool) -> Plan:
        reserve_s = 1.3 * n_val * forward(s) + sample_tokens * (context_length * forward(s) + 0.01) + END_S
        train_s = max(left_s - reserve_s, 0.0)
        if compile_flag is None:
            use_compile = train_s >= COMPILE_PAYS_OFF_S
            note = (f"auto: on, it pays off from about {format_duration(COMPILE_PAYS_OFF_S)} of training"
                    if use_compile else f"auto: off, compiling (about {COMPILE_S:.0f} s) pays off only from about "
                                        f"{format_duration(COMPILE_PAYS_OFF_S)} of training")
        else:
            use_compile, note = compile_flag, ("--compile" if compile_flag else "--no-compile")
        effective_s = max((train_s - COMPILE_S) * COMPILE_SPEEDUP if use_compile else train_s, 0.0)
        tokens_per_s = world_size / speed.train_s_per_token(flops_per_token(s, vocab_size, context_length))
        steps = max(1, int(effective_s * tokens_per_s // (batch_size * context_length * world_size)))
        return Plan(size=dict(s), chosen=chosen, train_s=train_s, reserve_s=reserve_s, compile=use_compile,
                    compile_note=note, tokens_per_s=tokens_per_s, steps=steps)

    if size is not None:
        return plan(size, chosen=False)
    plans = [plan(s, chosen=True) for s in LADDER]
    fits = [p for p in plans
            if p.steps * batch_size * context_length * world_size
            >= TOKENS_PER_PARAMETER * size_params(p.size, vocab_size)[1]]
    return fits[-1] if fits else plans[0]


def hardware_note(speed: Speed, vocab_size: int, context_length: int, batch_size: int, n_val: int,
                  sample_tokens: int, world_size: int = 1) -> list[str]:
    """What this machine trains per second at each ladder size, and what 3, 10 and 30 minutes buy."""
    rates = ", ".join(f"{s['d_model']}: {world_size / speed.train_s_per_token(flops_per_token(s, vocab_size, context_length)):,.0f}"
                      for s in LADDER)
    lines = [f"this machine now (slower while busy), training tokens per second by d_model: {rates}"]
    for minutes in (3, 10, 30):
        p = plan_budget(minutes * 60 * SAFETY, speed, vocab_size, context_length, batch_size, n_val, sample_tokens,
                        world_size)
        lines.append(f"  --budget {minutes}m would train d_model {p.size['d_model']}, {p.size['num_layers']} layers "
                     f"for ~{p.steps:,} steps ({p.steps * batch_size * context_length * world_size / 1e6:.1f}M tokens"
                     + (", compiled)" if p.compile else ")"))
    lines.append("  on a GPU: --device cuda (on a Mac: --device mps; MPS results can differ from the CPU's, "
                 "so compare on one device)")
    return lines


# ---------------------------------------------------------------- training


def main(argv: list[str] | None = None, prog: str = "minilm train") -> int:
    clock_start = time.perf_counter() - process_age_s()  # a --budget counts from the start of the process
    parser = build_parser(prog)
    args = parser.parse_args(argv)
    validate(args, parser)
    dist = Dist(args.device)
    out_dir = Path(args.out_dir)
    try:
        if dist.enabled:  # share the CPU cores between the processes instead of oversubscribing them
            torch.set_num_threads(max(1, (os.cpu_count() or 1) // dist.world_size))
        if dist.main:
            out_dir.mkdir(parents=True, exist_ok=True)
        train_tokens, val_tokens, _ = prepare(args, dist)
        enc = corpus.tokenizer()
        device = torch.device(args.device)
        n_train_gpt2, n_val_gpt2 = len(train_tokens), len(val_tokens)
        vocab = (Vocabulary(None, enc) if args.full_vocab
                 else Vocabulary.from_training(train_tokens, enc, args.vocab_size))
        if not args.full_vocab:  # re-encoded copies in memory (Tiny Shakespeare: under 1 MB)
            # Both splits' text is re-encoded with the vocabulary's own BPE: with all of the training
            # split's tokens the training split comes out as GPT-2 split it, and a word the training
            # split lacks is spelled in smaller pieces, never dropped.
            train_tokens = vocab.encode(enc.decode(np.asarray(train_tokens, dtype=np.int64).tolist()))
            val_tokens = vocab.encode(enc.decode(np.asarray(val_tokens, dtype=np.int64).tolist()))
            if dist.main:  # beside the checkpoint: the model's id i is GPT-2 id vocab.npy[i]
                np.save(out_dir / VOCAB_FILE, vocab.gpt2_ids)
        # Bits per byte: the validation text's bytes are those of the tokens predicted, tokens[1:].
        token_bytes = vocab.byte_lengths()
        val_bytes = np.cumsum(token_bytes[np.asarray(val_tokens[1:], dtype=np.int64)])  # bytes of the first n targets

        def bpb(nats: float, n: int) -> float:
            return bits_per_byte(nats, int(val_bytes[n - 1]))

        # The loss of the best model that ignores context, on the same validation tokens.
        baseline_nats = unigram_nats(train_tokens, val_tokens[1:], vocab.size)
        baseline, baseline_bpb = baseline_nats / (len(val_tokens) - 1), bpb(baseline_nats, len(val_tokens) - 1)
        n_periodic = min(len(val_tokens) - 1, max(1, args.eval_tokens // args.context_length) * args.context_length)

        plan = None
        if args.budget_s is not None:
            speed = measure_speed(vocab.size, args.context_length, args.batch_size, train_tokens, device, dist,
                                  limit_s=0.04 * args.budget_s)
            fixed = None if args.size_chosen_by_budget else {k: getattr(args, k) for k in DEFAULT_SIZE}
            left_s = dist.from_main(args.budget_s * SAFETY - (time.perf_counter() - clock_start))
            plan = plan_budget(left_s, speed, vocab.size, args.context_length, args.batch_size, len(val_tokens),
                               args.sample_tokens, dist.world_size, fixed, args.compile)
            for key, value in plan.size.items():
                setattr(args, key, value)
            args.compile = plan.compile
            args.steps = plan.steps  # the estimate; the clock decides
            args.eval_interval = args.eval_interval or max(1, plan.steps // 6)
            args.checkpoint_interval = args.checkpoint_interval or max(1, plan.steps // 3)
            args.warmup = min(args.warmup, plan.steps // 10)

        torch.manual_seed(args.seed)  # the same initial weights on every rank
        model = minilm.TransformerLM(vocab.size, args.context_length, args.d_model, args.num_layers,
                                     args.num_heads, args.d_ff, args.rope_theta, device=device)
        optimizer = minilm.AdamW(model.parameters(), lr=args.lr, betas=(args.beta1, args.beta2),
                                 weight_decay=args.weight_decay)
        start = 0
        if args.resume:
            start = minilm.load_checkpoint(out_dir / CHECKPOINT_FILE, model, optimizer)
        train_model = model
        if dist.enabled:
            from torch.nn.parallel import DistributedDataParallel

            # DDP averages the gradients over the processes during backward().
            train_model = DistributedDataParallel(model)

        def training_loss(x, y):
            return minilm.cross_entropy(train_model(x), y)  # logits (batch, context, vocab)

        if dist.main:
            n_params = sum(p.numel() for p in model.parameters())
            (out_dir / CONFIG_FILE).write_text(json.dumps(vars(args), indent=1))
            print(f"implementation: {minilm.implementation()} | processes: {dist.world_size} | device: {device} "
                  f"| threads: {torch.get_num_threads()}")
            if args.full_vocab:
                print(f"data: {len(train_tokens):,} training and {len(val_tokens):,} validation tokens (GPT-2 BPE); "
                      f"vocabulary: all {enc.n_vocab:,} GPT-2 tokens (--full-vocab)")
            else:
                which = (f"the first {vocab.size:,} in GPT-2's merge order (--vocab-size)"
                         if args.vocab_size and vocab.size == args.vocab_size else "all of them")
                print(f"vocabulary: {vocab.size:,} of GPT-2's {enc.n_vocab:,} tokens, from the training split alone: "
                      f"of its tokens, the pieces they are merged from and the 256 bytes, {which}")
                print(f"data: {n_train_gpt2:,} training and {n_val_gpt2:,} validation GPT-2 tokens, re-encoded with "
                      f"that vocabulary as {len(train_tokens):,} and {len(val_tokens):,} tokens (what it lacks is "
                      f"spelled in smaller pieces; no unknown token)")
            if plan is not None:
                print(f"budget {format_duration(args.budget_s)} for the whole run: measured this machine in "
                      f"{speed.measured_s:.1f} s (fastest with {torch.get_num_threads()} of {os.cpu_count()} "
                      f"threads); " + ("the rule chose" if plan.chosen else "given:") + " "
                      + ", ".join(f"{k} {v}" for k, v in plan.size.items()) + f" (rule: the largest size that "
                      f"sees ≥ {TOKENS_PER_PARAMETER:g} tokens per non-embedding parameter in the time)")
                print(f"plan: ~{plan.tokens_per_s * (COMPILE_SPEEDUP if plan.compile else 1):,.0f} tokens/s, "
                      f"~{plan.steps:,} steps in {plan.train_s:.0f} s, stopping by the clock; "
                      f"{plan.reserve_s:.0f} s kept for the final evaluation and the sample")
                for line in hardware_note(speed, vocab.size, args.context_length, args.batch_size, len(val_tokens),
                                          args.sample_tokens, dist.world_size):
                    print(line)
            print(f"model: {n_params / 1e6:.2f}M parameters | "
                  + (f"~{args.steps} steps" if plan else f"{args.steps} steps")
                  + f" of {args.batch_size * dist.world_size} × {args.context_length} tokens")
            print(f"unigram baseline (the training split's token frequencies, add-one smoothed, scored on the "
                  f"validation tokens): {baseline:.3f} nats per token = {baseline_bpb:.3f} bits per byte")
            print(f"validation every {args.eval_interval} steps: the same first {n_periodic:,} of "
                  f"{len(val_tokens) - 1:,} validation tokens each time (a subset estimate; the final one uses all)")
            if start:
                print(f"resuming from {out_dir / CHECKPOINT_FILE} at step {start}")

        if args.compile:
            dummy = torch.zeros(args.batch_size, args.context_length, dtype=torch.long, device=device)
            compile_started = time.perf_counter()
            training_loss, why_not = compile_or_eager(training_loss, lambda f: f(dummy, dummy).backward())
            optimizer.zero_grad(set_to_none=True)
            if dist.main:
                note = f" ({plan.compile_note})" if plan is not None else ""
                print("torch.compile: " + (f"unavailable, training eagerly ({why_not})" if why_not else
                                           f"on{note}, compiling took {time.perf_counter() - compile_started:.0f} s"))
        elif plan is not None and dist.main:
            print(f"torch.compile: off ({plan.compile_note})")

        # Different batches on every rank (and after a resume), reproducible from the seed.
        torch.manual_seed(args.seed + 1 + dist.rank + 7919 * start)
        from tqdm.auto import tqdm

        bar = tqdm(initial=start, total=args.steps, disable=not dist.main, dynamic_ncols=True, mininterval=1.0)
        started, first_loss, loss_value = time.time(), None, float("nan")
        loop_start = time.perf_counter()
        deadline = clock_start + args.budget_s * SAFETY - plan.reserve_s if plan is not None else None
        it = start
        while True:
            if plan is None:
                if it >= args.steps:
                    break
                lr = minilm.lr_cosine_schedule(it, args.lr, args.min_lr, args.warmup, args.steps)
            else:
                # The schedule follows the clock: the fraction of the training time gone, in planned steps.
                # Every rank uses rank 0's clock, so the replicas keep the same learning rate.
                gone = torch.tensor([(time.perf_counter() - loop_start) / max(deadline - loop_start, 1e-9)],
                                    dtype=torch.float64)
                if dist.enabled:
                    dist.dist.broadcast(gone, src=0)
                if gone.item() >= 1.0:
                    break
                lr = minilm.lr_cosine_schedule(min(int(gone.item() * args.steps), args.steps), args.lr, args.min_lr,
                                               args.warmup, args.steps)
            for group in optimizer.param_groups:
                group["lr"] = lr
            x, y = minilm.get_batch(train_tokens, args.batch_size, args.context_length, device)
            loss = training_loss(x, y)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            grad_norm = minilm.clip_grad_norm(model.parameters(), args.clip)
            optimizer.step()

            loss_value = dist.mean(loss.item())
            if not math.isfinite(loss_value):
                raise RuntimeError(f"step {it}: the training loss is {loss_value}; try a smaller --lr")
            first_loss = loss_value if first_loss is None else first_loss
            bar.update(1)
            bar.set_postfix(loss=f"{loss_value:.3f}", lr=f"{lr:.2e}", gnorm=f"{float(grad_norm):.2f}", refresh=False)
            it += 1
            step = it
            if plan is not None and it % 10 == 0 and gone.item() > 0.05:
                # The clock decides the step count: the bar's total follows the pace so far.
                bar.total = max(it + 1, round(start + (it - start) / gone.item()))
            if step % args.eval_interval == 0 and (plan is not None or step < args.steps):
                nats, n = evaluate_sums(model, val_tokens, args.context_length, args.batch_size, args.eval_tokens,
                                        dist, device)
                if dist.main:
                    bar.write(f"step {step:5d} | train loss {loss_value:.3f} | val loss {nats / n:.3f} "
                              f"({bpb(nats, n):.3f} bits per byte, first {n:,} tokens) | {time.time() - started:.0f} s")
            if dist.main and step % args.checkpoint_interval == 0:
                save(model, optimizer, step, out_dir)
        bar.close()
        final_step = it
        if dist.main and (final_step != start or not (out_dir / CHECKPOINT_FILE).exists()):
            save(model, optimizer, final_step, out_dir)
            if plan is not None:  # what the run did, for a --resume
                (out_dir / CONFIG_FILE).write_text(json.dumps(dict(vars(args), steps=final_step), indent=1))

        final_tokens = None  # all of them
        if plan is not None:
            # On a machine slower now than when it was measured, score only what still fits (a subset,
            # and the report says so) rather than overrun the budget.
            per_token = 1.3 * speed.forward_s_per_token(flops_per_token(plan.size, vocab.size, args.context_length))
            others_s = plan.reserve_s - len(val_tokens) * per_token  # the sample and the end
            # Half of the ±10% tolerance: a last step past the deadline is no reason to cut the evaluation.
            left_s = clock_start + args.budget_s * (SAFETY + 0.05) - time.perf_counter() - others_s
            left_s = dist.from_main(left_s)
            if left_s < len(val_tokens) * per_token:
                final_tokens = max(args.context_length, int(left_s / per_token))
        val_nats, n_val = evaluate_sums(model, val_tokens, args.context_length, args.batch_size, final_tokens, dist,
                                        device)
        val, val_bpb = val_nats / n_val, bpb(val_nats, n_val)
        if args.check_sync:
            check_sync(model, dist)
        if dist.main:
            if first_loss is None and plan is not None:
                print(f"no time was left to train: this machine is too busy or slow for --budget {args.budget} "
                      f"now (measuring it took {speed.measured_s:.0f} s); give a longer budget")
            elif first_loss is None:
                print(f"nothing to train: the checkpoint is already at step {start} of --steps {args.steps}")
            else:
                print(f"first training loss: {first_loss:.3f} | last training loss: {loss_value:.3f}")
            print(f"evaluated: the weights after the last step, {final_step} (saved in "
                  f"{out_dir / CHECKPOINT_FILE}), on "
                  + (f"all {n_val:,} validation tokens" if n_val == len(val_tokens) - 1 else
                     f"the first {n_val:,} of {len(val_tokens) - 1:,} validation tokens (a subset: the budget left "
                     f"no time for all)") + f" ({int(val_bytes[n_val - 1]):,} bytes)")
            print(f"final validation loss: {val:.3f} nats per token = {val_bpb:.3f} bits per byte "
                  f"| unigram baseline: {baseline:.3f} nats per token = {baseline_bpb:.3f} bits per byte")
            print(f"training took {time.time() - started:.0f} s ({final_step - start} steps); "
                  f"checkpoint: {out_dir / CHECKPOINT_FILE}")
            sample_tokens = args.sample_tokens
            if plan is not None and sample_tokens:  # as for the evaluation: what still fits
                per_sample_token = args.context_length * per_token + 0.01
                left_s = clock_start + args.budget_s * (SAFETY + 0.05) - time.perf_counter() - END_S
                sample_tokens = min(sample_tokens, max(0, int(left_s / per_sample_token)))
                if sample_tokens < args.sample_tokens:
                    print(f"sample: {sample_tokens} of --sample-tokens {args.sample_tokens} tokens, what the budget "
                          f"has time left for")
            if sample_tokens:
                if args.prompt is None:
                    prompt_ids = np.asarray(val_tokens[:8], dtype=np.int64).tolist()
                else:
                    prompt_ids = vocab.encode(args.prompt).tolist() or [0]
                ids = minilm.generate(model, prompt_ids, sample_tokens, temperature=0.8, top_k=50,
                                      generator=torch.Generator(device=device).manual_seed(args.seed))
                print("sample:\n" + enc.decode(vocab.to_gpt2(ids.tolist())))
            wall_s = time.perf_counter() - clock_start
            if plan is not None:
                print(f"the whole run took {wall_s:.0f} s of the {args.budget_s:.0f} s budget")
            (out_dir / RESULT_FILE).write_text(json.dumps(dict(
                budget_s=args.budget_s, wall_s=wall_s, steps=final_step, compile=bool(args.compile),
                threads=torch.get_num_threads(), processes=dist.world_size, vocab_size=vocab.size,
                size={k: getattr(args, k) for k in DEFAULT_SIZE}, parameters=n_params,
                batch_size=args.batch_size, context_length=args.context_length,
                val_nats=val_nats, val_tokens=n_val, val_bytes=int(val_bytes[n_val - 1]),
                val_skipped_bytes=int(token_bytes[int(val_tokens[0])]),  # the first token: context only
                nats_per_token=val, bits_per_byte=val_bpb, baseline_nats_per_token=baseline,
                baseline_bits_per_byte=baseline_bpb), indent=1) + "\n")
    finally:
        dist.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
