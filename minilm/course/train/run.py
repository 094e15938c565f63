"""`minilm train`: main and its stages, in the order it runs them: load the data, plan (a --budget),
build the model, report, compile, train, evaluate, report; with the helpers they share."""

from __future__ import annotations

import argparse
import dataclasses
import io
import json
import math
import os
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

import minilm
from minilm.course import corpus
from minilm.course import recipe as recipes
from minilm.course.train.dist import Dist, check_sync
from minilm.course.train.metrics import (
    bits_per_byte,
    evaluate_sliding_sums,
    evaluate_sums,
    forward_tokens,
    scored_targets,
    unigram_nats,
)
from minilm.course.train.options import (
    CHECKPOINT_FILE,
    CONFIG_FILE,
    RESULT_FILE,
    VOCAB_FILE,
    build_parser,
    default_warmup,
    recipe_of,
    validate,
    validate_eval_and_tokenizer,
)
from minilm.course.train.own_tokenizer import MERGES_FILE, OwnVocabulary, probe
from minilm.course.train.plan import (
    COMPILE_SPEEDUP,
    DATA_TOKENS_PER_PARAMETER,
    DEFAULT_SIZE,
    DISTILL_ALPHA,
    DISTILL_T,
    END_S,
    LEVERS,
    MAX_EPOCHS,
    PLAIN_EPOCHS,
    SAFETY,
    STUDENT_SHARE,
    TOKENS_PER_PARAMETER,
    Plan,
    Speed,
    fastest_threads,
    flops_per_token,
    format_duration,
    hardware_note,
    measure_speed,
    plan_budget,
    process_age_s,
    teachers_that_fit,
)
from minilm.course.train.record import METRICS_FILE, PLOT_FILE, MetricsLog, log_interval, plot_losses
from minilm.course.vocab import Vocabulary


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


@dataclass
class Data:
    """The two splits as model ids, their vocabulary, and what bits per byte divides by."""

    train: np.ndarray
    val: np.ndarray
    vocab: Vocabulary
    enc: object  # GPT-2's tokenizer
    n_train_gpt2: int  # the splits' lengths in GPT-2 tokens, before re-encoding
    n_val_gpt2: int
    token_bytes: np.ndarray  # (vocab.size,) the UTF-8 bytes each model id stands for
    val_bytes: np.ndarray  # val_bytes[n - 1]: the bytes of the first n validation targets
    baseline: float  # the unigram baseline on the validation tokens, nats per token
    baseline_bpb: float

    def bpb(self, nats: float, n: int) -> float:
        return bits_per_byte(nats, int(self.val_bytes[n - 1]))


@dataclass
class Run:
    """What main's stages share; the plan and the speed it was made from only with a --budget."""

    args: argparse.Namespace
    dist: Dist
    device: torch.device
    out_dir: Path
    clock_start: float  # when the process started, by time.perf_counter(): a --budget counts from it
    data: Data
    plan: Plan | None = None
    speed: Speed | None = None
    recipe: recipes.Recipe = recipes.Recipe()
    notes: tuple[str, ...] = ()  # what the recipe's optimizer trains with what
    threads_note: str = ""  # with --steps: how the thread count was chosen
    log: MetricsLog | None = None  # metrics.jsonl (rank 0)
    compile_s: float = 0.0  # how long compiling the training step took (0: eager)


@dataclass
class Trained:
    """What the training loop did."""

    start: int  # the step it started from (a --resume's checkpoint, else 0)
    final_step: int
    first_loss: float | None  # None when it took no step
    last_loss: float
    started: float  # time.time() when the loop started


def load_data(args, dist: Dist, out_dir: Path) -> Data:
    """The splits re-encoded with the training split's vocabulary (GPT-2's own with --full-vocab),
    the vocabulary saved beside the checkpoint, and the unigram baseline."""
    train_tokens, val_tokens, _ = prepare(args, dist)
    enc = corpus.tokenizer()
    n_train_gpt2, n_val_gpt2 = len(train_tokens), len(val_tokens)
    if args.tokenizer == "mine":  # the student's BPE, learned from the training split's text alone
        train_text, val_text = (enc.decode(np.asarray(t, dtype=np.int64).tolist()) for t in (train_tokens, val_tokens))
        vocab = OwnVocabulary.build(train_text, args.vocab_size, out_dir, dist.main, dist.barrier)
        train_tokens, val_tokens = vocab.encode(train_text), vocab.encode(val_text)
    else:
        vocab = (Vocabulary(None, enc) if args.full_vocab
                 else Vocabulary.from_training(train_tokens, enc, args.vocab_size))
    if not args.full_vocab and args.tokenizer == "gpt2":  # re-encoded copies in memory (Tiny Shakespeare: under 1 MB)
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
    # The loss of the best model that ignores context, on the same validation tokens.
    baseline_nats = unigram_nats(train_tokens, val_tokens[1:], vocab.size)
    n_val = len(val_tokens) - 1
    return Data(train_tokens, val_tokens, vocab, enc, n_train_gpt2, n_val_gpt2, token_bytes, val_bytes,
                baseline=baseline_nats / n_val, baseline_bpb=bits_per_byte(baseline_nats, int(val_bytes[n_val - 1])))


def plan_run(run: Run) -> None:
    """--budget: measure this machine, then fit the run into what is left of the budget; the plan's
    size, steps and compile choice replace the arguments' (intervals and warmup follow the steps)."""
    args, dist, data = run.args, run.dist, run.data
    if dist.main:  # seconds of silence otherwise, before the plan is printed
        print(f"measuring this machine for the {format_duration(args.budget_s)} budget (a few training steps at "
              f"two sizes)…")
    run.speed = speed = measure_speed(data.vocab.size, args.context_length, args.batch_size, data.train, run.device,
                                      dist, limit_s=0.04 * args.budget_s)
    fixed = None if args.size_chosen_by_budget else {k: getattr(args, k) for k in DEFAULT_SIZE}
    left_s = dist.from_main(args.budget_s * SAFETY - (time.perf_counter() - run.clock_start))
    run.plan = plan = plan_budget(left_s, speed, data.vocab.size, args.context_length, args.batch_size,
                                  eval_forward_tokens(args, len(data.val)), args.sample_tokens, dist.world_size,
                                  fixed, args.compile, n_train=len(data.train), levers=args.levers_chosen_by_budget)
    if plan.levers:  # the text runs out before the budget: regularize, and train on (plan.py's LEVERS)
        for key, value in LEVERS.items():
            setattr(args, key, value)
        run.recipe = dataclasses.replace(run.recipe, **LEVERS)
    for key, value in plan.size.items():
        setattr(args, key, value)
    args.compile = plan.compile
    args.steps = plan.steps  # the estimate; the clock decides
    args.eval_interval = args.eval_interval or max(1, plan.steps // 6)
    args.checkpoint_interval = args.checkpoint_interval or max(1, plan.steps // 3)
    args.warmup = default_warmup(plan.steps) if args.warmup is None else min(args.warmup, plan.steps // 10)


def new_model(args, vocab_size: int, recipe: recipes.Recipe, device=None):
    """A run's TransformerLM with its recipe's model switches, and its optimizer, seeded by args.seed:
    what a run trains, and what load_trained loads a checkpoint into. (model, optimizer, notes)."""
    torch.manual_seed(args.seed)  # the same initial weights on every rank
    model = minilm.TransformerLM(vocab_size, args.context_length, args.d_model, args.num_layers,
                                 args.num_heads, args.d_ff, args.rope_theta, device=device)
    recipes.apply(model, recipe, seed=args.seed + 1)  # the same new parameters on every rank
    optimizer, notes = recipes.make_optimizer(model, recipe, args.lr, (args.beta1, args.beta2), args.weight_decay)
    return model, optimizer, notes


def build_model(run: Run):
    """(model, optimizer, the step to start from, the training loss of a batch: through DDP under
    torchrun)."""
    args, dist = run.args, run.dist
    model, optimizer, notes = new_model(args, run.data.vocab.size, run.recipe, run.device)
    run.notes = tuple(notes)
    start = 0
    if args.resume:
        start = minilm.load_checkpoint(run.out_dir / CHECKPOINT_FILE, model, optimizer)
    train_model = model
    if dist.enabled:
        from torch.nn.parallel import DistributedDataParallel

        # DDP averages the gradients over the processes during backward().
        train_model = DistributedDataParallel(model)

    def training_loss(x, y):
        return minilm.cross_entropy(train_model(x), y)  # logits (batch, context, vocab)

    return model, optimizer, start, training_loss


def run_vocabulary(args, out_dir: Path):
    """The vocabulary a run saved beside its checkpoint: merges.json (--tokenizer mine), GPT-2 itself
    (--full-vocab), else vocab.npy (the model's id i is GPT-2 id vocab.npy[i])."""
    enc = corpus.tokenizer()
    if getattr(args, "tokenizer", "gpt2") == "mine":
        return OwnVocabulary.load(out_dir / MERGES_FILE)
    if args.full_vocab:
        return Vocabulary(None, enc)
    return Vocabulary(np.load(out_dir / VOCAB_FILE), enc)


def load_trained(out_dir: str | os.PathLike, device: str = "cpu"):
    """A `minilm train` run from its --out-dir (or its checkpoint.pt): (model, vocabulary). The model is
    built as the run built it (config.json: size, recipe) and given the checkpoint's weights by your
    load_checkpoint, as --resume does, in eval mode; the vocabulary turns text into the model's ids
    (vocab.encode, or viz's model_tokens). The caller's random state is left as it was.

    FileNotFoundError naming what a run directory holds when a file is missing; ValueError when the
    checkpoint does not fit the model config.json and the vocabulary describe."""
    out_dir = Path(out_dir).expanduser()
    if out_dir.name == CHECKPOINT_FILE:
        out_dir = out_dir.parent
    for name in (CONFIG_FILE, CHECKPOINT_FILE):
        if not (out_dir / name).is_file():
            raise FileNotFoundError(f"{out_dir} is not a finished `minilm train` run: it has no {name} (a run's "
                                    f"--out-dir holds {CONFIG_FILE}, {CHECKPOINT_FILE} and {VOCAB_FILE} or "
                                    f"{MERGES_FILE})")
    saved = json.loads((out_dir / CONFIG_FILE).read_text(encoding="utf-8"))
    args = build_parser().parse_args([])  # every flag's default, then what the run used
    vars(args).update(saved)
    for key, value in vars(recipes.Recipe()).items():  # a run from before a switch existed ran without it
        if getattr(args, key, None) is None:
            setattr(args, key, value)
    if not args.full_vocab and args.tokenizer != "mine" and not (out_dir / VOCAB_FILE).is_file():
        raise FileNotFoundError(f"{out_dir} has no {VOCAB_FILE}: the model's ids → GPT-2's, which a run without "
                                f"--full-vocab writes beside its checkpoint")
    vocab = run_vocabulary(args, out_dir)
    with torch.random.fork_rng(devices=[]):
        model, optimizer, _ = new_model(args, vocab.size, recipe_of(args), torch.device(device))
        try:
            minilm.load_checkpoint(out_dir / CHECKPOINT_FILE, model, optimizer)
        except NotImplementedError:
            raise
        except Exception as e:  # noqa: BLE001 - a size mismatch, in one line
            raise ValueError(f"{out_dir / CHECKPOINT_FILE} does not fit the model of its {CONFIG_FILE} with a "
                             f"vocabulary of {vocab.size:,}: " + " ".join(f"{type(e).__name__}: {e}".split())[:300]
                             ) from None
    return model.eval(), vocab


def choose_threads(run: Run, model) -> None:
    """With --steps on a CPU (one process, several threads): one thread or all of them, whichever
    runs the model's forward pass faster here now (a --budget's measurement races them the same
    way). On 2 cores busy with other work, 2 threads made a --steps 10 run take 110 s against 12 s
    with one: its training steps and its final evaluation, which scores every validation token."""
    threads = torch.get_num_threads()
    if run.plan is not None or run.device.type != "cpu" or run.dist.enabled or threads < 2:
        return
    x, _ = minilm.get_batch(run.data.train, run.args.batch_size, run.args.context_length, run.device)

    def forward() -> float:
        started = time.perf_counter()
        with torch.no_grad():
            model(x).sum().item()
        return time.perf_counter() - started

    torch.set_num_threads(1)
    forward()  # warm-up: the first call allocates
    chosen = fastest_threads(forward, threads)
    run.threads_note = f" of {threads} (faster than {threads} here now)" if chosen < threads else ""


def report_start(run: Run, model, start: int) -> None:
    """Rank 0: write the run's config, then say what it trains on, with what, and the baseline to beat."""
    args, dist, data, out_dir = run.args, run.dist, run.data, run.out_dir
    vocab, enc, train_tokens, val_tokens = data.vocab, data.enc, data.train, data.val
    n_params = sum(p.numel() for p in model.parameters())
    (out_dir / CONFIG_FILE).write_text(json.dumps(vars(args), indent=1), encoding="utf-8")
    print(f"implementation: {minilm.implementation()} | processes: {dist.world_size} | device: {run.device} "
          f"| threads: {torch.get_num_threads()}{run.threads_note}")
    if args.tokenizer == "mine":
        print(f"vocabulary: your BPE, {vocab.size:,} tokens (256 bytes, {len(vocab.merges):,} merges learned from the "
              f"training split alone, <|endoftext|>)")
        print(f"data: {data.n_train_gpt2:,} training and {data.n_val_gpt2:,} validation GPT-2 tokens' text, encoded "
              f"with your Tokenizer as {len(train_tokens):,} and {len(val_tokens):,} tokens")
    elif args.full_vocab:
        print(f"data: {len(train_tokens):,} training and {len(val_tokens):,} validation tokens (GPT-2 BPE); "
              f"vocabulary: all {enc.n_vocab:,} GPT-2 tokens (--full-vocab)")
    else:
        which = (f"the first {vocab.size:,} in GPT-2's merge order (--vocab-size)"
                 if args.vocab_size and vocab.size == args.vocab_size else "all of them")
        print(f"vocabulary: {vocab.size:,} of GPT-2's {enc.n_vocab:,} tokens, from the training split alone: "
              f"of its tokens, the pieces they are merged from and the 256 bytes, {which}")
        print(f"data: {data.n_train_gpt2:,} training and {data.n_val_gpt2:,} validation GPT-2 tokens, re-encoded "
              f"with that vocabulary as {len(train_tokens):,} and {len(val_tokens):,} tokens (what it lacks is "
              f"spelled in smaller pieces; no unknown token)")
    if run.plan is not None:
        report_plan(run)
    changes = run.recipe.changes()
    print("recipe: " + (", ".join(f"{k} {v}" for k, v in changes.items()) if changes else
                        "the course's (AdamW, cosine schedule, no switches)"))
    for note in (*getattr(args, "recipe_notes", ()), *run.notes):
        print(note)
    print(f"model: {n_params / 1e6:.2f}M parameters | "
          + (f"~{args.steps} steps" if run.plan else f"{args.steps} steps")
          + f" of {args.batch_size * dist.world_size} × {args.context_length} tokens")
    print(f"unigram baseline (the training split's token frequencies, add-one smoothed, scored on the "
          f"validation tokens): {data.baseline:.3f} nats per token = {data.baseline_bpb:.3f} bits per byte")
    n_periodic = min(len(val_tokens) - 1, max(1, args.eval_tokens // args.context_length) * args.context_length)
    print(f"validation every {args.eval_interval} steps: the same first {n_periodic:,} of "
          f"{len(val_tokens) - 1:,} validation tokens each time (a subset estimate; the final one uses all)")
    every = "every step" if run.log.every == 1 else f"every {run.log.every} steps"
    print(f"metrics: {out_dir / METRICS_FILE} gets a JSON line {every} and at each evaluation; the loss curve, "
          f"{out_dir / PLOT_FILE}, is drawn at the end")
    if start:
        print(f"resuming from {out_dir / CHECKPOINT_FILE} at step {start}"
              + (f" (metrics.jsonl: {len(run.log.records)} records kept, up to it)" if run.log.records else ""))


def report_plan(run: Run) -> None:
    """What the budget bought on this machine, and what other budgets would."""
    args, plan, speed, vocab_size = run.args, run.plan, run.speed, run.data.vocab.size
    print(f"budget {format_duration(args.budget_s)} for the whole run: measured this machine in "
          f"{speed.measured_s:.1f} s (fastest with {torch.get_num_threads()} of {os.cpu_count()} "
          f"threads); " + ("the rule chose" if plan.chosen else "given:") + " "
          + ", ".join(f"{k} {v}" for k, v in plan.size.items()) + f" (rule: the largest size that "
          f"sees ≥ {TOKENS_PER_PARAMETER:g} tokens per non-embedding parameter in the time, among those with "
          f"≥ {DATA_TOKENS_PER_PARAMETER:g} training tokens per non-embedding parameter)")
    print(f"plan: ~{plan.tokens_per_s * (COMPILE_SPEEDUP if plan.compile else 1):,.0f} tokens/s, "
          + (f"{plan.steps:,} steps in about {plan.train_s:.0f} s, stopping at the last step; " if plan.unused_s > 0
             else f"~{plan.steps:,} steps in {plan.train_s:.0f} s, stopping by the clock; ")
          + f"{plan.reserve_s:.0f} s kept for the final evaluation and the sample")
    if plan.levers:
        print(f"past {PLAIN_EPOCHS:g} passes over the training tokens the models here overfit: the plan switches on "
              + ", ".join(f"{k} {v}" for k, v in LEVERS.items()) + " (docs/training.md)")
    if plan.levers and plan.unused_s > 0:
        print(f"past {MAX_EPOCHS:g} passes the time left goes to distillation (notebook 16) when the first run "
              "ends early enough: " + (f"it needs your code ({args.distill_todo})" if args.distill_todo else
                                       "more runs from other seeds, then a student on their averaged logits"))
    if plan.unused_s > 0:
        todo = getattr(args, "levers_todo", None)
        cap, why = ((MAX_EPOCHS, "repeated text loses its value") if plan.levers else
                    (PLAIN_EPOCHS, f"without dropout the models here overfit, and the plan leaves dropout off: it "
                                   f"needs your code ({todo})") if todo else
                    (PLAIN_EPOCHS, "without dropout the models here overfit; --dropout or --reshuffle given"))
        print(f"the {'first run' if plan.levers else 'plan'} ends {plan.unused_s:.0f} s early: {cap:g} passes over "
              f"the training tokens is the most a budget trains ({why}; docs/training.md)")
    for line in hardware_note(speed, vocab_size, args.context_length, args.batch_size,
                              eval_forward_tokens(args, len(run.data.val)), args.sample_tokens, run.dist.world_size,
                              n_train=len(run.data.train), levers=args.levers_chosen_by_budget):
        print(line)


def compile_step(run: Run, training_loss, optimizer):
    """The training loss through torch.compile with --compile (or the plan's choice), compiled now
    on a dummy batch; eager, saying why, where compiling fails."""
    args, dist, plan = run.args, run.dist, run.plan
    if args.compile:
        dummy = torch.zeros(args.batch_size, args.context_length, dtype=torch.long, device=run.device)
        if dist.main:  # a minute or so without a word otherwise
            print("compiling the training step with torch.compile (a minute or so)…")
        compile_started = time.perf_counter()
        # Two tensors, as every real step passes: f(dummy, dummy) would compile for "x is y", and the
        # first step would compile it all again.
        training_loss, why_not = compile_or_eager(training_loss, lambda f: f(dummy, dummy.clone()).backward())
        optimizer.zero_grad(set_to_none=True)
        run.compile_s = time.perf_counter() - compile_started
        if dist.main:
            note = f" ({plan.compile_note})" if plan is not None else ""
            print("torch.compile: " + (f"unavailable, training eagerly ({why_not})" if why_not else
                                       f"on{note}, compiling took {time.perf_counter() - compile_started:.0f} s"))
    elif plan is not None and dist.main:
        print(f"torch.compile: off ({plan.compile_note})")
    return training_loss


def learning_rate(run: Run, it: int, loop_start: float, deadline: float | None) -> tuple[float | None, float]:
    """(step `it`'s learning rate, the fraction of the training time gone: 0 with --steps); the rate
    is None once the run is over, at --steps or at a --budget's deadline."""
    args, dist = run.args, run.dist
    if run.plan is None:
        if it >= args.steps:
            return None, 0.0
        return recipes.scheduled_lr(run.recipe, it / args.steps, it, args.lr, args.min_lr, args.warmup,
                                    args.steps), 0.0
    # The schedule follows the clock: the fraction of the training time gone, in planned steps.
    # Every rank uses rank 0's clock, so the replicas keep the same learning rate.
    gone = torch.tensor([(time.perf_counter() - loop_start) / max(deadline - loop_start, 1e-9)],
                        dtype=torch.float64)
    if dist.enabled:
        dist.dist.broadcast(gone, src=0)
    if run.plan.unused_s > 0:  # the epoch cap ends this run: counted in steps, unless the clock is further
        # on: a machine slower than measured (another job started) still ends its decay by the deadline.
        done = max(it / max(args.steps, 1), gone.item())
        if it >= args.steps or gone.item() >= 1.0:
            return None, done
        return recipes.scheduled_lr(run.recipe, done, min(int(done * args.steps), args.steps), args.lr, args.min_lr,
                                    args.warmup, args.steps), done
    if gone.item() >= 1.0:
        return None, gone.item()
    lr = recipes.scheduled_lr(run.recipe, gone.item(), min(int(gone.item() * args.steps), args.steps), args.lr,
                              args.min_lr, args.warmup, args.steps)
    return lr, gone.item()


def train_loop(run: Run, model, optimizer, training_loss, start: int, until: float | None = None) -> Trained:
    """Train from step `start` to --steps, or with a --budget until the plan's deadline (or `until`, a
    time.perf_counter() deadline), with a validation loss on a subset every --eval-interval steps and a
    checkpoint every --checkpoint-interval."""
    args, dist, plan, data = run.args, run.dist, run.plan, run.data
    # Different batches on every rank (and after a resume), reproducible from the seed.
    torch.manual_seed(args.seed + 1 + dist.rank + 7919 * start)
    from tqdm.auto import tqdm

    bar = tqdm(initial=start, total=args.steps, disable=not dist.main, dynamic_ncols=True, mininterval=1.0)
    started, first_loss, loss_value = time.time(), None, float("nan")
    loop_start = time.perf_counter()
    deadline = until if until is not None else (run.clock_start + args.budget_s * SAFETY - plan.reserve_s
                                                if plan is not None else None)
    epochs = None
    if run.recipe.reshuffle:  # every window once per epoch, in a new order each epoch
        epochs = recipes.EpochBatches(data.train, args.batch_size, args.context_length,
                                      torch.Generator().manual_seed(args.seed + 1 + dist.rank + 7919 * start))

    def batch(step: int):
        if epochs is not None:
            return epochs(run.device)
        return minilm.get_batch(data.train, args.batch_size, args.context_length, run.device)

    gone = 0.0  # the fraction of a --budget's training time gone, as of the last step

    def lr_at(step: int) -> float | None:
        nonlocal gone
        lr, gone = learning_rate(run, step, loop_start, deadline)
        return lr

    it, tokens_per_step = start, args.batch_size * args.context_length * dist.world_size
    val = None  # the last evaluation's figures, for the log line and metrics.jsonl

    def evaluate(step: int) -> float | None:
        nonlocal val
        if plan is None and step >= args.steps:
            return None  # the final evaluation, after the loop, scores the whole validation split
        bar.set_description_str("validation", refresh=True)  # the bar stands still meanwhile
        nats, n = evaluate_sums(model, data.val, args.context_length, args.batch_size, args.eval_tokens,
                                dist, run.device)
        bar.set_description_str("", refresh=False)
        val = dict(val_loss=nats / n, val_bpb=data.bpb(nats, n), val_tokens=n)
        return nats / n

    steps = minilm.train(training_loss, model.parameters(), optimizer, batch, lr_at, args.clip, start,
                         evaluate, args.eval_interval)
    for done in steps:  # your training loop (Task 10.6)
        it = done.step
        loss_value = dist.mean(done.loss.item())
        if not math.isfinite(loss_value):
            raise RuntimeError(f"step {it - 1}: the training loss is {loss_value}; try a smaller --lr")
        first_loss = loss_value if first_loss is None else first_loss
        bar.update(1)
        gnorm = "off" if done.grad_norm is None else f"{done.grad_norm:.2f}"
        bar.set_postfix(loss=f"{loss_value:.3f}", lr=f"{done.lr:.2e}", gnorm=gnorm, refresh=False)
        if plan is not None and it % 10 == 0 and gone > 0.05:
            # The clock decides the step count: the bar's total follows the pace so far.
            bar.total = max(it + 1, round(start + (it - start) / gone))
        evaluated = val if done.val_loss is not None else None
        if evaluated is not None and dist.main:
            bar.write(f"step {it:5d} | train loss {loss_value:.3f} | val loss {evaluated['val_loss']:.3f} "
                      f"({evaluated['val_bpb']:.3f} bits per byte, first {evaluated['val_tokens']:,} tokens) "
                      f"| {time.time() - started:.0f} s")
        checkpoint = it % args.checkpoint_interval == 0
        if dist.main and checkpoint:
            save(model, optimizer, it, run.out_dir)
        if run.log is not None:
            run.log.step(it, loss_value, done.lr, it * tokens_per_step, time.time() - started, evaluated, checkpoint)
    bar.close()
    return Trained(start, it, first_loss, loss_value, started)


def distillation_fits(run: Run, first, trained: Trained) -> tuple[int, float] | None:
    """After a budget's first run ended at MAX_EPOCHS with time left: (teachers, the time left), the teachers
    priced at the pace the first run trained (plan.teachers_that_fit). None when the plan did not switch the
    levers on, Task 16.2 is unwritten, under torchrun, or when not even one teacher fits (said in a line)."""
    args, plan = run.args, run.plan
    if plan is None or not plan.levers or plan.unused_s <= 0 or args.distill_todo or run.dist.enabled:
        return None
    end = run.clock_start + args.budget_s * SAFETY - plan.reserve_s
    steps = trained.final_step - trained.start
    run_s = time.time() - trained.started  # one run of `steps`, as it went: a busy machine's pace included
    x = torch.zeros(args.batch_size, args.context_length, dtype=torch.long, device=run.device)
    with torch.no_grad():
        first(x)  # warm
        timings = []
        for _ in range(5):  # the median: one timing was the whole decision, and one hiccup could flip it
            t = time.perf_counter()
            first(x).sum().item()
            timings.append(time.perf_counter() - t)
    forward_s = statistics.median(timings)
    left_s = end - time.perf_counter()
    # Each new model compiles its step again (as long as the first did: the cache is warm now), and its
    # teachers' forward passes are compiled with it.
    compile_s = run.compile_s if args.compile else 0.0
    if args.compile:
        forward_s /= COMPILE_SPEEDUP
    teachers, needed_s = teachers_that_fit(left_s, run_s, compile_s, steps * forward_s)
    if not teachers:  # not under torchrun (above): this process is the only one
        print(f"the first run ended with {left_s:.0f} s of the budget left, at its pace too little to distil "
              f"({STUDENT_SHARE:.0%} of a student with one teacher needs ~{needed_s:.0f} s): the run ends early")
        return None
    return teachers, left_s


def distil(run: Run, first, first_optimizer, trained: Trained, teachers: int):
    """teachers − 1 more runs like the first, from other seeds, then a student of the same size trained on
    the runs' averaged logits with your distillation_loss (Task 16.2) for as many steps as the first, or until
    the budget's deadline. (the
    model to keep, its optimizer, what its loop did): the student or the first run, whichever scores lower
    on the validation split (the one the final evaluation reports: the figure is the better of two)."""
    args, data, dist = run.args, run.data, run.dist
    end = run.clock_start + args.budget_s * SAFETY - run.plan.reserve_s
    run_s = time.time() - trained.started
    log, run.log = run.log, None  # metrics.jsonl and loss.png keep the first run's curve
    ensemble = [first]

    def phase(k: int, until: float, teachers_of=None):
        run.args = argparse.Namespace(**{**vars(args), "seed": args.seed + 1000 * k,
                                         "checkpoint_interval": 10**9})  # the first run's checkpoint stays
        model, optimizer, _ = new_model(run.args, data.vocab.size, run.recipe, run.device)

        def loss(x, y):
            if teachers_of is None:
                return minilm.cross_entropy(model(x), y)
            with torch.no_grad():
                soft = torch.stack([t(x) for t in teachers_of]).mean(0)  # the ensemble: its logits averaged
            return minilm.distillation_loss(model(x), soft, y, DISTILL_T, DISTILL_ALPHA)

        step = compile_step(run, loss, optimizer) if run.args.compile else loss  # eager: said once already
        done = train_loop(run, model, optimizer, step, 0, until=until)
        run.args = args
        return model, optimizer, done

    for k in range(1, teachers):
        ensemble.append(phase(k, until=min(time.perf_counter() + 1.2 * run_s, end))[0])
    for t in ensemble:
        t.eval()  # soft targets without dropout
    student, student_optimizer, done = phase(teachers, until=end, teachers_of=ensemble)
    run.log = log

    def val_loss(model) -> float:  # the whole split: on its first 8,192 tokens a student 0.003 nats ahead
        nats, n = evaluate_sums(model, data.val, args.context_length, args.batch_size, None, dist, run.device)
        return nats / n  # scored 0.012 bits per byte worse on all of them

    first_loss, student_loss = val_loss(first), val_loss(student)
    keep = student_loss <= first_loss
    if dist.main:
        print(f"distillation: {teachers} run(s) as teachers, then a student on their averaged logits with your "
              f"distillation_loss (T {DISTILL_T:g}, α {DISTILL_ALPHA:g}) for {done.final_step:,} steps: validation "
              f"loss {first_loss:.4f} for the first run, {student_loss:.4f} "
              "for the student: keeping the " + ("student" if keep else "first run"))
    return (student, student_optimizer, done) if keep else (first, first_optimizer, trained)


def eval_forward_tokens(args, n_tokens: int) -> float:
    """Tokens the final evaluation of n_tokens validation tokens runs forward: once in non-overlapping
    windows, and context/stride times in sliding ones."""
    return n_tokens * (1 + args.context_length / args.eval_stride)


@dataclass
class Scores:
    """The final evaluation: the same first n validation targets scored twice, in non-overlapping
    windows (a window's first target has no context, its others half a context on average) and in
    windows sliding by --eval-stride (every target past the first window sees ≥ context − stride)."""

    nats: float
    n: int
    sliding_nats: float
    per_token: float | None  # seconds per forward token the plan assumes (None with --steps)


def final_evaluation(run: Run, model) -> Scores:
    """The last weights on the validation tokens, all of them unless a --budget has no time left for
    all, in non-overlapping windows and in sliding ones."""
    args, dist, plan, val_tokens = run.args, run.dist, run.plan, run.data.val
    final_tokens, per_token = None, None  # all of them
    if plan is not None:
        # On a machine slower now than when it was measured, score only what still fits (a subset,
        # and the report says so) rather than overrun the budget.
        per_token = 1.3 * run.speed.forward_s_per_token(flops_per_token(plan.size, run.data.vocab.size,
                                                                        args.context_length))
        others_s = plan.reserve_s - eval_forward_tokens(args, len(val_tokens)) * per_token  # the sample and the end
        # Half of the ±10% tolerance: a last step past the deadline is no reason to cut the evaluation.
        left_s = run.clock_start + args.budget_s * (SAFETY + 0.05) - time.perf_counter() - others_s
        left_s = dist.from_main(left_s)
        if left_s < eval_forward_tokens(args, len(val_tokens)) * per_token:
            final_tokens = max(args.context_length, int(left_s / per_token / eval_forward_tokens(args, 1)))
    # A bar over the tokens this process runs forward, both passes: minutes on a slow or busy machine.
    from tqdm.auto import tqdm

    n_targets = scored_targets(len(val_tokens), args.context_length, final_tokens)
    total = sum(forward_tokens(len(val_tokens), args.context_length, n, stride, dist.rank, dist.world_size)
                for n, stride in ((final_tokens, None), (n_targets, args.eval_stride)))
    with tqdm(total=total, desc="final evaluation", unit="tok", unit_scale=True, disable=not dist.main,
              dynamic_ncols=True, mininterval=1.0) as bar:
        val_nats, n_val = evaluate_sums(model, val_tokens, args.context_length, args.batch_size, final_tokens, dist,
                                        run.device, progress=bar.update)
        sliding_nats, n_sliding = evaluate_sliding_sums(model, val_tokens, args.context_length, args.eval_stride,
                                                        args.batch_size, n_val, dist, run.device, progress=bar.update)
    assert n_sliding == n_val == n_targets, (n_sliding, n_val, n_targets)  # the same targets, scored once each
    if args.check_sync:
        check_sync(model, dist)
    return Scores(val_nats, n_val, sliding_nats, per_token)


def report_end(run: Run, model, trained: Trained, scores: Scores) -> None:
    """Rank 0: the losses, what was evaluated and how it scored, a sample, the time taken, and
    result.json for scripts."""
    args, data, out_dir = run.args, run.data, run.out_dir
    val_tokens, val_nats, n_val = data.val, scores.nats, scores.n
    val, val_bpb = val_nats / n_val, data.bpb(val_nats, n_val)
    if trained.first_loss is None and run.plan is not None:
        print(f"no time was left to train: this machine is too busy or slow for --budget {args.budget} "
              f"now (measuring it took {run.speed.measured_s:.0f} s); give a longer budget")
    elif trained.first_loss is None:
        print(f"nothing to train: the checkpoint is already at step {trained.start} of --steps {args.steps}")
    else:
        print(f"first training loss: {trained.first_loss:.3f} | last training loss: {trained.last_loss:.3f}")
    print(f"evaluated: the weights after the last step, {trained.final_step} (saved in "
          f"{out_dir / CHECKPOINT_FILE}), on "
          + (f"all {n_val:,} validation tokens" if n_val == len(val_tokens) - 1 else
             f"the first {n_val:,} of {len(val_tokens) - 1:,} validation tokens (a subset: the budget left "
             f"no time for all)") + f" ({int(data.val_bytes[n_val - 1]):,} bytes)")
    print(f"final validation loss: {val:.3f} nats per token = {val_bpb:.3f} bits per byte "
          f"| unigram baseline: {data.baseline:.3f} nats per token = {data.baseline_bpb:.3f} bits per byte")
    print(f"  (in non-overlapping windows of {args.context_length} tokens: the k-th token of a window sees only the "
          f"k − 1 before it, {(args.context_length - 1) / 2:.1f} on average)")
    print(f"  the same tokens in windows sliding by {args.eval_stride} (every token past the first window sees "
          f"≥ {args.context_length - args.eval_stride} earlier tokens): {scores.sliding_nats / n_val:.3f} nats per "
          f"token = {data.bpb(scores.sliding_nats, n_val):.3f} bits per byte")
    print(f"training took {time.time() - trained.started:.0f} s ({trained.final_step - trained.start} steps); "
          f"checkpoint: {out_dir / CHECKPOINT_FILE}")
    print_sample(run, model, scores.per_token)
    run.log.finish(trained.final_step, trained.final_step * args.batch_size * args.context_length
                   * run.dist.world_size, dict(val_loss=val, val_bpb=val_bpb, val_tokens=n_val))
    plot_losses(run.log.records, out_dir / PLOT_FILE, f"minilm train: d_model {args.d_model}, {args.num_layers} "
                f"layer{'s' * (args.num_layers != 1)}, {trained.final_step:,} steps", baseline=data.baseline)
    print(f"metrics: {out_dir / METRICS_FILE} ({len(run.log.records)} records) | loss curve: {out_dir / PLOT_FILE}")
    wall_s = time.perf_counter() - run.clock_start
    if run.plan is not None:
        print(f"the whole run took {wall_s:.0f} s of the {args.budget_s:.0f} s budget")
    write_result(run, model, trained.final_step, scores, wall_s)


def print_sample(run: Run, model, per_token: float | None) -> None:
    """--sample-tokens of generated text, from --prompt (default: the validation split's start);
    with a --budget only as many tokens as its time still allows."""
    args, data = run.args, run.data
    sample_tokens = args.sample_tokens
    if run.plan is not None and sample_tokens:  # as for the evaluation: what still fits
        per_sample_token = args.context_length * per_token + 0.01
        left_s = run.clock_start + args.budget_s * (SAFETY + 0.05) - time.perf_counter() - END_S
        sample_tokens = min(sample_tokens, max(0, int(left_s / per_sample_token)))
        if sample_tokens < args.sample_tokens:
            print(f"sample: {sample_tokens} of --sample-tokens {args.sample_tokens} tokens, what the budget "
                  f"has time left for")
    if sample_tokens:
        if args.prompt is None:
            prompt_ids = np.asarray(data.val[:8], dtype=np.int64).tolist()
        else:
            prompt_ids = data.vocab.encode(args.prompt).tolist() or [0]
        print("sample:")  # before generating it: seconds on a busy machine
        ids = minilm.generate(model, prompt_ids, sample_tokens, temperature=0.8, top_k=50,
                              generator=torch.Generator(device=run.device).manual_seed(args.seed))
        print(data.vocab.decode(ids.tolist()))


def write_result(run: Run, model, final_step: int, scores: Scores, wall_s: float) -> None:
    """out_dir/result.json: the run's final figures, for scripts (the benchmarks' time-to-quality race);
    bits_per_byte is the non-overlapping windows' figure, sliding_bits_per_byte the sliding ones'."""
    args, data, val_nats, n_val = run.args, run.data, scores.nats, scores.n
    (run.out_dir / RESULT_FILE).write_text(json.dumps(dict(
        budget_s=args.budget_s, wall_s=wall_s, steps=final_step, compile=bool(args.compile),
        threads=torch.get_num_threads(), processes=run.dist.world_size, vocab_size=data.vocab.size,
        size={k: getattr(args, k) for k in DEFAULT_SIZE}, parameters=sum(p.numel() for p in model.parameters()),
        batch_size=args.batch_size, context_length=args.context_length, recipe=vars(run.recipe),
        val_nats=val_nats, val_tokens=n_val, val_bytes=int(data.val_bytes[n_val - 1]),
        val_skipped_bytes=int(data.token_bytes[int(data.val[0])]),  # the first token: context only
        nats_per_token=val_nats / n_val, bits_per_byte=data.bpb(val_nats, n_val),
        eval_stride=args.eval_stride, sliding_nats=scores.sliding_nats,
        sliding_nats_per_token=scores.sliding_nats / n_val, sliding_bits_per_byte=data.bpb(scores.sliding_nats, n_val),
        baseline_nats_per_token=data.baseline, baseline_bits_per_byte=data.baseline_bpb), indent=1) + "\n",
        encoding="utf-8")


def main(argv: list[str] | None = None, prog: str = "minilm train") -> int:
    """`minilm train`: set up, plan (with a --budget), train, evaluate, report. Rank 0 prints and
    writes; under torchrun every rank trains."""
    clock_start = time.perf_counter() - process_age_s()  # a --budget counts from the start of the process
    try:  # each line as it is printed, also into a pipe (`| tee`, a notebook's `!minilm train`, CI's log)
        sys.stdout.reconfigure(line_buffering=True)
    except (AttributeError, ValueError, io.UnsupportedOperation):
        pass
    parser = build_parser(prog)
    args = parser.parse_args(argv)
    validate(args, parser)
    validate_eval_and_tokenizer(args, parser)
    if sys.platform == "win32" and args.compile is not False:
        # torch.compile's Inductor needs a C++ toolchain a student's Windows rarely has, and a --budget's plan
        # would count on its speed-up: eager, and said so, is the safe path there.
        print("torch.compile: off on Windows (it needs MSVC and often fails there): training eagerly")
        args.compile = False
    if args.tokenizer == "mine":
        probe()  # a stub or an error in Tasks 9.2–9.3 stops the run here, in one line, before any data
    dist = Dist(args.device)
    out_dir = Path(args.out_dir)
    try:
        if dist.enabled:  # share the CPU cores between the processes instead of oversubscribing them
            torch.set_num_threads(max(1, (os.cpu_count() or 1) // dist.world_size))
        if dist.main:
            out_dir.mkdir(parents=True, exist_ok=True)
        data = load_data(args, dist, out_dir)
        run = Run(args, dist, torch.device(args.device), out_dir, clock_start, data, recipe=recipe_of(args))
        if args.budget_s is not None:
            plan_run(run)
        model, optimizer, start, training_loss = build_model(run)
        choose_threads(run, model)
        if dist.main:
            run.log = MetricsLog(out_dir / METRICS_FILE, start, log_interval(args.steps))
            report_start(run, model, start)
        training_loss = compile_step(run, training_loss, optimizer)
        trained = train_loop(run, model, optimizer, training_loss, start)
        fits = distillation_fits(run, model, trained)
        if fits:
            if dist.main:
                print(f"the first run ended with {fits[1]:.0f} s of the budget left: distilling (notebook 16), "
                      f"{fits[0]} teacher run(s) in all, then a student of the same size on their averaged logits "
                      "(your Task 16.2) for as many steps as the first run, or until the deadline")
            model, optimizer, trained = distil(run, model, optimizer, trained, fits[0])
        final_step = trained.final_step
        if dist.main and (final_step != start or not (out_dir / CHECKPOINT_FILE).exists()):
            save(model, optimizer, final_step, out_dir)
            if run.plan is not None:  # what the run did, for a --resume
                (out_dir / CONFIG_FILE).write_text(json.dumps(dict(vars(args), steps=final_step), indent=1),
                                                   encoding="utf-8")
        scores = final_evaluation(run, model)
        if dist.main:
            report_end(run, model, trained, scores)
        # Every rank leaves together: gloo's threads abort a process ("terminate called without an active
        # exception") whose group is torn down while a peer is still writing its report.
        dist.barrier()
    finally:
        dist.close()
    return 0
