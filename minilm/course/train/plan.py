"""--budget: parse the duration, measure this machine, then choose the model size, the steps and
torch.compile so that the whole run ends on time; and the hardware note, what other budgets buy."""

from __future__ import annotations

import os
import re
import sys
import time
from dataclasses import dataclass

import numpy as np
import torch

import minilm
from minilm.course.train.dist import Dist


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
# The rule (see plan_budget), from the sweep in docs/training.md (vocabulary 2,048). At the steps
# one core reaches in 3 minutes the best size, d_model 128, saw 1.26 tokens per non-embedding
# parameter and the next larger one 0.27; at the steps two idle cores reach, d_model 128 again
# (2.17) against d_model 192 (0.48). A threshold between 0.48 and 1.26 chooses both; 0.8 is near
# the middle. At 1 minute d_model 96 (1.36) and 128 (0.38) tied within 0.01 bits per byte.
TOKENS_PER_PARAMETER = 0.8
# The cap (see plan_budget), from the re-sweep in docs/training.md (fixed step counts, one thread):
# on Tiny Shakespeare (416,607 training tokens at vocabulary 2,048) more time does not buy a
# bigger model. d_model 192 (0.19 training tokens per non-embedding parameter) at 2,000 steps
# (4.9 epochs) scored 2.182 bits per byte, d_model 128 (0.46) at the same steps, half the
# compute, 2.180; and d_model 192 at a 10-minute budget (~8 epochs) 2.224, worse than
# d_model 128 at 3 minutes (2.192). A cap between 0.19 and 0.46 keeps d_model 128; 0.3 is near
# the middle (geometric). Larger texts lift it: 650,000 training tokens allow d_model 192, 1.1M 256.
DATA_TOKENS_PER_PARAMETER = 0.3
# Without regularization a budget trains at most PLAIN_EPOCHS passes over the training split:
# d_model 128 scored 2.200 at 2.7 epochs, 2.180 at 4.9 and 2.201 at 7.4 (the re-sweep); d_model 192
# 2.182 at 4.9 and 2.224 at ~8. Past it, when the flags leave them to the budget, the plan switches
# on LEVERS (with them d_model 128 scored 2.132 at 7.4 epochs, one seed) and trains up to
# MAX_EPOCHS passes, ending early only past that: Muennighoff et al. (2023) found repeated tokens
# losing most of their value past about 16 epochs, and here d_model 128 with the levers scored 2.100
# at 16 passes against 2.137 at 32 (one seed each; weight decay 1.0 on top: 2.170). docs/training.md.
PLAIN_EPOCHS = 5.0
LEVERS = {"dropout": 0.1, "reshuffle": True}
MAX_EPOCHS = 16.0
# A run that reached MAX_EPOCHS with time left (measured when it ends, at the pace it trained) spends it on
# distillation (notebook 16): up to MAX_TEACHERS − 1 more runs like it from other seeds, then one more, the
# student, on the runs' averaged logits with your distillation_loss (Task 16.2) at notebook 16's T and α;
# it keeps the student or the first run, whichever scores lower on the validation split. Notebook 16
# measured an ensemble of 3 at −0.21 and the model distilled from it at −0.14 against one run (3 seeds).
# Teachers are added only while the student still gets as many steps as the first run: at 30 minutes a
# student of 4 teachers that reached 56% of them scored 2.103 bits per byte, no better than one run.
MAX_TEACHERS = 4
DISTILL_T, DISTILL_ALPHA = 2.0, 0.5
# Where not even one teacher and a whole student fit, a student of one teacher when this share of its
# steps does: at 10 minutes students of 55%, 61% and 62% of a run scored within 0.012 bits per byte of
# their teacher (the last one kept, below a weak first run), so the time is used, at about a tie.
STUDENT_SHARE = 0.5
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
END_S = 2.5  # the last checkpoint, the report and loss.png (matplotlib: 1 s), besides the final evaluation and sample


def teachers_that_fit(left_s: float, run_s: float, compile_s: float, teacher_s: float) -> tuple[int, float]:
    """How many teacher runs distillation takes in `left_s` seconds, and the time it will need: as many as
    fit (up to MAX_TEACHERS) beside a student as long as a run; else one, when STUDENT_SHARE of its student
    fits; else none. A run takes run_s, each new model compiles for compile_s, and each teacher adds
    teacher_s to the student's run (its forward pass at every step)."""
    def needed_s(k: int, share: float = 1.0) -> float:  # k − 1 more runs, then `share` of a student with k teachers
        return (k - 1) * (run_s + compile_s) + compile_s + share * (run_s + k * teacher_s)

    teachers = max((k for k in range(1, MAX_TEACHERS + 1) if needed_s(k) <= left_s), default=0)
    if teachers:
        return teachers, needed_s(teachers)
    return (1 if needed_s(1, STUDENT_SHARE) <= left_s else 0), needed_s(1, STUDENT_SHARE)


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
    if not sys.platform.startswith("linux"):
        return 0.0
    try:
        with open("/proc/self/stat", encoding="ascii") as f:
            start_ticks = int(f.read().rsplit(")", 1)[1].split()[19])  # field 22, starttime
        with open("/proc/uptime", encoding="ascii") as f:
            uptime_s = float(f.read().split()[0])
        return max(0.0, uptime_s - start_ticks / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError, AttributeError):
        return 0.0


def fastest_threads(forward, threads: int, rounds: int = 3) -> int:
    """One thread or `threads`, whichever runs forward() faster on this CPU now, by the best of up to
    `rounds` timed calls each, alternating (it stops once one is twice as fast as the other); torch
    is left set to the winner. On cores busy with other work, threads that wait for each other can
    be several times slower than one: 3–5× on 2 shared cores here, 10–20× at a load of 5."""
    times: dict[int, list[float]] = {1: [], threads: []}
    for _ in range(rounds):
        for n, measured in times.items():
            torch.set_num_threads(n)
            measured.append(forward())
        one, many = min(times[1]), min(times[threads])
        if max(one, many) > 2 * min(one, many):
            break
    best = 1 if one < many else threads
    torch.set_num_threads(best)
    return best


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
            one = minilm.train(lambda inputs, targets: minilm.cross_entropy(model(inputs), targets),
                               model.parameters(), optimizer, lambda step: (x, y), lambda step: 1e-4)
            next(one).loss.item()  # one step of your loop; .item() waits for an asynchronous device
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
            fastest_threads(forward, threads)
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
    unused_s: float = 0.0  # seconds of the budget left unused: the epoch cap reached before the deadline
    levers: bool = False  # past PLAIN_EPOCHS: LEVERS switched on, up to MAX_EPOCHS


def plan_budget(left_s: float, speed: Speed, vocab_size: int, context_length: int, batch_size: int,
                n_val: int, sample_tokens: int, world_size: int = 1, size: dict | None = None,
                compile_flag: bool | None = None, n_train: int | None = None, levers: bool = False) -> Plan:
    """The run that fits in `left_s` seconds on this machine.

    Time: the final evaluation (n_val tokens forward), the sample (sample_tokens forwards of up
    to a context each) and END_S are kept back; the rest trains. torch.compile is on when the
    training time is at least COMPILE_PAYS_OFF_S (unless compile_flag says otherwise).

    Size (the rule): the largest ladder size whose run processes at least TOKENS_PER_PARAMETER
    tokens per non-embedding parameter in the training time, at this machine's speed (the
    smallest size if none does). Bigger models learn more per token, smaller ones see more tokens
    per second; the sweep in docs/training.md (fixed budgets, every size, one machine) found the
    best bits per byte about where that ratio is TOKENS_PER_PARAMETER.

    The cap (with n_train, the training split's tokens): only sizes with at least
    DATA_TOKENS_PER_PARAMETER training tokens per non-embedding parameter are candidates (the
    smallest always is). Past that, a bigger model re-reads too little text too many times and
    overfits: data-limited, not compute-limited (the re-sweep in docs/training.md). And the run
    trains at most PLAIN_EPOCHS passes over the n_train tokens, or with `levers` (the flags leave
    dropout and reshuffling to the plan) MAX_EPOCHS with LEVERS switched on past PLAIN_EPOCHS: when
    the time would buy more, the plan trains less (train_s shrinks, unused_s says by how much) and
    the run ends early.
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
        def passes(epochs: float) -> int:
            return max(1, int(epochs * n_train // (batch_size * context_length * world_size))) if n_train else steps
        past_plain = steps > passes(PLAIN_EPOCHS)
        cap = MAX_EPOCHS if past_plain and levers else PLAIN_EPOCHS
        unused_s = 0.0
        if steps > passes(cap):  # the text runs out first: train `cap` epochs, compiled only if that is faster
            eager_s = passes(cap) * batch_size * context_length * world_size / tokens_per_s
            compiled_s = COMPILE_S + eager_s / COMPILE_SPEEDUP
            if compile_flag is None and use_compile and compiled_s >= eager_s:
                use_compile, note = False, f"auto: off, {cap:g} epochs are too short for compiling to pay off"
            needed_s = compiled_s if use_compile else eager_s
            steps, unused_s, train_s = passes(cap), train_s - needed_s, needed_s
        return Plan(size=dict(s), chosen=chosen, train_s=train_s, reserve_s=reserve_s, compile=use_compile,
                    compile_note=note, tokens_per_s=tokens_per_s, steps=steps, unused_s=unused_s,
                    levers=past_plain and levers)

    if size is not None:
        return plan(size, chosen=False)
    sizes = [s for s in LADDER
             if n_train is None or n_train >= DATA_TOKENS_PER_PARAMETER * size_params(s, vocab_size)[1]]
    plans = [plan(s, chosen=True) for s in sizes or LADDER[:1]]
    fits = [p for p in plans
            if p.steps * batch_size * context_length * world_size
            >= TOKENS_PER_PARAMETER * size_params(p.size, vocab_size)[1]]
    return fits[-1] if fits else plans[0]


def hardware_note(speed: Speed, vocab_size: int, context_length: int, batch_size: int, n_val: int,
                  sample_tokens: int, world_size: int = 1, n_train: int | None = None,
                  levers: bool = False) -> list[str]:
    """What this machine trains per second at each ladder size, and what 3, 10 and 30 minutes buy."""
    rates = ", ".join(f"{s['d_model']}: "
                      f"{world_size / speed.train_s_per_token(flops_per_token(s, vocab_size, context_length)):,.0f}"
                      for s in LADDER)
    lines = [f"this machine now (slower while busy), training tokens per second by d_model: {rates}"]
    for minutes in (3, 10, 30):
        p = plan_budget(minutes * 60 * SAFETY, speed, vocab_size, context_length, batch_size, n_val, sample_tokens,
                        world_size, n_train=n_train, levers=levers)
        lines.append(f"  --budget {minutes}m would train d_model {p.size['d_model']}, {p.size['num_layers']} layers "
                     f"for ~{p.steps:,} steps ({p.steps * batch_size * context_length * world_size / 1e6:.1f}M tokens"
                     + (", compiled" if p.compile else "")
                     + (f"; its first run ends ~{p.unused_s:.0f} s early" if p.unused_s > 0 else "") + ")")
    lines.append("  on a GPU: --device cuda (on a Mac: --device mps; MPS results can differ from the CPU's, "
                 "so compare on one device)")
    return lines
