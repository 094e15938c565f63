"""The training command's flags (build_parser) and the checks that reject a bad configuration
before any work starts (validate), with the files a run writes in --out-dir."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from minilm.course import corpus
from minilm.course.cli import Parser
from minilm.course.recipe import FFNS, OPTIMIZERS, SCHEDULES, Recipe
from minilm.course.train import __doc__ as USAGE
from minilm.course.train.plan import DEFAULT_SIZE, parse_duration

CONFIG_FILE, CHECKPOINT_FILE, VOCAB_FILE = "config.json", "checkpoint.pt", "vocab.npy"
RESULT_FILE = "result.json"  # the final figures, for scripts (the benchmarks' time-to-quality race)
# Options that fix the model's shape (the data fixes the vocabulary): --resume refuses other values.
MODEL_KEYS = ("data", "tokenizer", "full_vocab", "vocab_size", "d_model", "num_layers", "num_heads", "d_ff",
              "context_length", "rope_theta", "ffn", "qk_norm", "optimizer", "lr_width")
# What a run's config.json lacks when it was written before the option existed.
SAVED_BEFORE = {"tokenizer": "gpt2", "lr_width": 0}
# The recipe `minilm train` uses unless told otherwise, chosen by the measurements in docs/training.md
# ("The recipe"): AdamW with the warmup–stable–decay schedule. Muon won per step at d_model 128 but its
# Newton–Schulz makes a CPU step about 1.3× longer, and at equal time (400 Muon steps against 600)
# it lost; the switches that stayed within the seed noise are off. While Task 14.4 is unwritten the
# schedule falls back to the cosine (unwritten_tasks).
# The matrices' rate scales with the width (--lr-width 128, muP-style): --lr was tuned at d_model 128, and
# with one rate for every width the best rate moved about as 1/d_model (docs/training.md, "The rate
# across widths"); with AdamW alone, since Muon and the decay groups build their own groups.
DEFAULT_RECIPE = Recipe(schedule="wsd", lr_width=128)
RECIPE_FLAGS = tuple(Recipe.__dataclass_fields__)


def _on(flag: bool) -> str:
    return "on" if flag else "off"


def _unwritten(probe) -> str | None:
    """The stub's message if `probe()` reaches a task the student has not written yet."""
    try:
        probe()
    except NotImplementedError as e:
        return str(e).splitlines()[0]
    return None


def unwritten_tasks(args: argparse.Namespace, given: set[str], parser: argparse.ArgumentParser) -> list[str]:
    """A recipe setting that needs a task of notebook 14 the student has not written yet: refused
    when given on the command line; when it comes from the default recipe, the course's earlier
    setting instead (AdamW, cosine, no switch), said in one line each."""
    import torch

    import minilm

    def groups():
        model = torch.nn.Module()
        model.lm_head = torch.nn.Linear(2, 2, bias=False)  # release: not a task (a head for the probe to sort)
        minilm.parameter_groups(model)

    def muon():
        p = torch.nn.Parameter(torch.ones(2, 2))
        p.grad = torch.ones(2, 2)
        minilm.Muon([p]).step()
        groups()

    probes = {"optimizer": (args.optimizer == "muon", muon),
              "decay_groups": (args.decay_groups, groups),
              "schedule": (args.schedule == "wsd", lambda: minilm.lr_wsd_schedule(0.5, 1.0, 0.1, 0.1, 0.2)),
              "softcap": (args.softcap > 0, lambda: minilm.softcap(torch.zeros(1), 1.0)),
              "ffn": (args.ffn == "relu2", lambda: minilm.ReLUSquaredFFN(2, 3)(torch.zeros(2))),
              "dropout": (args.dropout > 0, lambda: minilm.dropout(torch.ones(2), 0.1, True))}
    notes = []
    for key, (used, probe) in probes.items():
        todo = _unwritten(probe) if used else None
        if todo is None:
            continue
        flag = f"--{key.replace('_', '-')}"
        if key in given:
            parser.error(f"{flag} {getattr(args, key)} needs your code: {todo}")
        earlier = getattr(Recipe(), key)
        setattr(args, key, earlier)
        notes.append(f"recipe: {flag} {earlier} instead of the default's, which needs your code ({todo})")
    return notes

DEFAULT_BUDGET = "3m"
# The default vocabulary: the first 2,048 tokens of the training split's, in GPT-2's merge order.
# 150 s of training at d_model 128 on one core reached 2.202 bits per byte with 2,048 tokens, 2.208
# with 1,024 and 2.228 with 4,096; all 12,806 reached 2.370 beside a 2,048 run's 2.209 under the
# same load (docs/training.md): a smaller output layer buys more steps.
DEFAULT_VOCAB_SIZE = 2048
MIN_BUDGET_S = 30.0
# The warmup when --warmup is not given: a tenth of the run, at most 30 steps (what docs/training.md's
# sweeps used at 600 steps and more), so that a 10-step run warms up for 1 step instead of being refused.
MAX_DEFAULT_WARMUP = 30


def default_warmup(steps: int) -> int:
    """The warmup of a run of `steps` steps when --warmup is not given: min(30, steps // 10)."""
    return min(MAX_DEFAULT_WARMUP, steps // 10)


class _Help(argparse.HelpFormatter):
    """`minilm train --help`: each flag's help beside it where it fits, followed by its default when
    the flag takes a value and the help does not say the default itself; nothing for a default of
    None (that help says what decides it: the budget, --steps, the recipe) or for on/off switches."""

    def __init__(self, prog: str):
        super().__init__(prog, max_help_position=26)

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if ("default" in text or action.default is None or isinstance(action.default, bool)
                or action.default is argparse.SUPPRESS or action.nargs == 0 or not action.option_strings):
            return text
        return text + " (default: %(default)s)"


def build_parser(prog: str = "minilm train") -> argparse.ArgumentParser:
    p = Parser(prog=prog, description=USAGE.split("\n\n")[0], formatter_class=_Help,
               usage="%(prog)s [--budget TIME | --steps N] [options]",
               epilog="Data-parallel: torchrun --nproc_per_node 2 -m minilm.course.train [options]. The budget rule, "
                      "the recipe and what each file in --out-dir holds: docs/training.md.")
    by_budget = "chosen by --budget"
    g = p.add_argument_group(f"how long (default: --budget {DEFAULT_BUDGET})")
    g.add_argument("--budget", default=None, metavar="TIME",
                   help=f"wall-clock time for the whole run, e.g. 90s, 3m, 1h (≥ {MIN_BUDGET_S:.0f}s); it sizes "
                        f"the model and the steps")
    g.add_argument("--steps", type=int, default=None, metavar="N",
                   help="train N optimizer steps, however long they take (instead of --budget)")
    g.add_argument("--resume", action="store_true",
                   help="continue the run in --out-dir to --steps in total")
    g = p.add_argument_group("data")
    g.add_argument("--data", default="tinyshakespeare", metavar="TEXT",
                   help="tinyshakespeare (the default; MINILM_TINYSHAKESPEARE=PATH: a local copy) or a UTF-8 "
                        ".txt file")
    g.add_argument("--vocab-size", type=int, default=DEFAULT_VOCAB_SIZE, metavar="N",
                   help="the first N GPT-2 tokens of the training split, in merge order; 0: all")
    g.add_argument("--full-vocab", action="store_true", help="all 50,257 GPT-2 tokens (ignores --vocab-size)")
    g.add_argument("--tokenizer", choices=("gpt2", "mine"), default="gpt2",
                   help="mine: your BPE (Tasks 9.2, 9.3)")
    g = p.add_argument_group("model", f"Default: {by_budget}; with --steps, "
                             + ", ".join(f"{k} {v}" for k, v in DEFAULT_SIZE.items()) + ".")
    for flag, what in (("d_model", "width"), ("num_layers", "Transformer blocks"), ("num_heads", "attention heads"),
                       ("d_ff", "SwiGLU hidden size, about 8/3 d_model")):
        g.add_argument(f"--{flag.replace('_', '-')}", type=int, default=None, metavar="N", help=what)
    g.add_argument("--context-length", type=int, default=64, metavar="N", help="tokens per sequence")
    g = p.add_argument_group("optimization")
    g.add_argument("--batch-size", type=int, default=16, metavar="N",
                   help="sequences per step and process")
    g.add_argument("--lr", type=float, default=3e-3, help="peak learning rate (the matrices' at d_model --lr-width)")
    g.add_argument("--min-lr", type=float, default=3e-4, metavar="LR", help="the final learning rate")
    g.add_argument("--warmup", type=int, default=None, metavar="N",
                   help=f"warmup steps (default: a tenth of the run, ≤ {MAX_DEFAULT_WARMUP})")
    g.add_argument("--weight-decay", type=float, default=0.1, metavar="W", help="AdamW's weight decay")
    g.add_argument("--clip", type=float, default=1.0, metavar="NORM", help="largest gradient norm")
    _add_recipe_flags(p)
    g = p.add_argument_group("output")
    g.add_argument("--out-dir", default=None, metavar="DIR",
                   help="the checkpoint, metrics.jsonl and loss.png (default: runs/minilm in $MINILM_DATA_DIR or "
                        "~/.cache/minilm)")
    g.add_argument("--eval-interval", type=int, default=None, metavar="N",
                   help="steps between validation losses (default: 100; with --budget, 6 per run)")
    g.add_argument("--checkpoint-interval", type=int, default=None, metavar="N",
                   help="steps between checkpoints (default: 250; with --budget, 3 per run)")
    g.add_argument("--sample-tokens", type=int, default=120, metavar="N", help="the final sample's length; 0: none")
    g.add_argument("--prompt", default=None, metavar="TEXT",
                   help="the sample's start (default: the validation text's first tokens)")
    g.add_argument("--device", default="cpu", metavar="DEV", help="cpu, cuda, mps …")
    g.add_argument("--compile", action=argparse.BooleanOptionalAction, default=None,
                   help="torch.compile: slower start, faster steps (default: on when a --budget pays for it, "
                        "else off)")
    g.add_argument("--seed", type=int, default=1337, metavar="N", help="random seed")
    g = p.add_argument_group("advanced (rarely needed)")
    g.add_argument("--eval-tokens", type=int, default=8192, metavar="N",
                   help="tokens per periodic validation")
    g.add_argument("--eval-stride", type=int, default=None, metavar="N",
                   help="the final evaluation's sliding windows move by N tokens (default and largest: context/2)")
    g.add_argument("--val-fraction", type=float, default=0.1, metavar="F",
                   help="held-out fraction, at the text's end")
    g.add_argument("--rope-theta", type=float, default=10000.0, metavar="THETA", help="RoPE's base")
    g.add_argument("--beta1", type=float, default=0.9, metavar="B", help="AdamW's β1")
    g.add_argument("--beta2", type=float, default=0.95, metavar="B", help="AdamW's β2")
    # For tests/test_train.py's DDP test: at the end, check that every process holds the same parameters.
    g.add_argument("--check-sync", action="store_true", help=argparse.SUPPRESS)
    return p


def _add_recipe_flags(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("recipe (notebook 14; defaults: what docs/training.md measured best)")
    d = DEFAULT_RECIPE
    g.add_argument("--optimizer", default=None, metavar="{" + ",".join(OPTIMIZERS) + "}",
                   help=f"muon: Muon (Task 14.2) for hidden matrices (default: {d.optimizer})")
    g.add_argument("--muon-lr", type=float, default=None, metavar="LR",
                   help=f"Muon's peak learning rate (default: {d.muon_lr:g})")
    g.add_argument("--schedule", default=None, metavar="{" + ",".join(SCHEDULES) + "}",
                   help=f"wsd: warmup–stable–decay (Task 14.4); cosine (10.3) (default: {d.schedule}, the cosine "
                        "until 14.4 is written)")
    g.add_argument("--decay-frac", type=float, default=None, metavar="F",
                   help=f"wsd's share of the run to decay (default: {d.decay_frac:g})")
    g.add_argument("--decay-groups", action=argparse.BooleanOptionalAction, default=None,
                   help=f"no weight decay on gains and embeddings (Task 14.3) (default: {_on(d.decay_groups)})")
    g.add_argument("--zero-init", action=argparse.BooleanOptionalAction, default=None,
                   help=f"residual projections start at zero (default: {_on(d.zero_init)})")
    g.add_argument("--qk-norm", action=argparse.BooleanOptionalAction, default=None,
                   help=f"RMS-norm each head's queries, keys (default: {_on(d.qk_norm)})")
    g.add_argument("--softcap", type=float, default=None, metavar="CAP",
                   help=f"logits → CAP·tanh(logits/CAP) (Task 14.5); 0: off (default: {d.softcap:g})")
    g.add_argument("--ffn", default=None, metavar="{" + ",".join(FFNS) + "}",
                   help=f"relu2: ReLU² (Task 14.6) (default: {d.ffn})")
    g.add_argument("--dropout", type=float, default=None, metavar="P",
                   help=f"residual dropout (default: {d.dropout:g})")
    g.add_argument("--reshuffle", action=argparse.BooleanOptionalAction, default=None,
                   help=f"each training window once per epoch, in shuffled order, not drawn at random (default: "
                        f"{_on(d.reshuffle)})")
    g.add_argument("--lr-width", type=int, default=None, metavar="N",
                   help=f"the matrices' learning rate × N/d_model (muP-style), so --lr tuned at width N carries "
                        f"over; 0: off (default: {d.lr_width})")


def validate(args: argparse.Namespace, parser: argparse.ArgumentParser) -> None:
    """Reject a bad configuration before any work starts (parser.error exits with status 2)."""
    if args.out_dir is None:
        args.out_dir = str(corpus.data_dir() / "runs" / "minilm")
    config = Path(args.out_dir) / CONFIG_FILE
    if args.resume and args.lr_width is None and config.is_file():  # the optimizer's groups are its checkpoint's
        args.lr_width = json.loads(config.read_text(encoding="utf-8")).get("lr_width", SAVED_BEFORE["lr_width"])
    validate_recipe(args, parser)
    if args.budget is not None and args.steps is not None:
        parser.error(f"--budget {args.budget} and --steps {args.steps}: pick one (a budget chooses the steps; "
                     f"--steps trains that many, however long it takes)")
    if args.budget is not None and args.resume:
        parser.error("--resume continues a run to --steps (the total); a --budget always starts a new run")
    saved = {}
    if args.resume and config.is_file():
        saved = json.loads(config.read_text(encoding="utf-8"))
        for key in ("d_model", "num_layers", "num_heads", "d_ff", "steps"):  # what the run chose, unless given
            if getattr(args, key) is None and saved.get(key) is not None:
                setattr(args, key, saved[key])
    if args.resume and args.steps is None:
        parser.error(f"--resume: give --steps, the total to reach (no {config} says how many)")
    if args.budget is None and args.steps is None:
        args.budget = DEFAULT_BUDGET
    _parse_budget(args, parser)
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
        if getattr(args, name) is not None and getattr(args, name) < 0:
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
    if args.steps is not None and args.warmup is not None and args.warmup >= args.steps:
        parser.error(f"--warmup must be smaller than --steps, got --warmup {args.warmup} and --steps {args.steps}: "
                     f"the warmup is part of the run (leave --warmup out for a tenth of it)")
    if args.warmup is None and args.budget_s is None:  # a --budget's warmup follows its planned steps (plan_run)
        args.warmup = default_warmup(args.steps)
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
        changed = [k for k in MODEL_KEYS if saved.get(k, SAVED_BEFORE.get(k)) != getattr(args, k)]
        if changed:
            parser.error("--resume: the checkpoint's model has different " + ", ".join(
                f"{k} ({saved.get(k)} there, {getattr(args, k)} now)" for k in changed))


def validate_recipe(args: argparse.Namespace, parser: argparse.ArgumentParser) -> None:
    """The recipe's flags (notebook 14): known values, no contradiction, and the default recipe's where not
    given (the earlier setting, said in args.recipe_notes, where it needs a task still unwritten)."""
    for flag, value, valid in (("--optimizer", args.optimizer, OPTIMIZERS), ("--schedule", args.schedule, SCHEDULES),
                               ("--ffn", args.ffn, FFNS)):
        if value is not None and value not in valid:
            parser.error(f"{flag}: unknown value {value!r}; valid values: {', '.join(valid)}")
    given = {k for k in RECIPE_FLAGS if getattr(args, k) is not None}
    # A budget's plan may switch on the data-limited regime's levers unless either is given.
    budget = args.budget is not None or args.steps is None
    args.levers_chosen_by_budget = budget and not {"dropout", "reshuffle"} & given
    for key in RECIPE_FLAGS:  # what was not given comes from the default recipe
        if getattr(args, key) is None:
            setattr(args, key, getattr(DEFAULT_RECIPE, key))
    if "muon_lr" in given and args.optimizer != "muon":
        parser.error(f"--muon-lr {args.muon_lr:g} is Muon's learning rate, but --optimizer is {args.optimizer}: "
                     f"give --optimizer muon, or drop --muon-lr")
    if "decay_frac" in given and args.schedule != "wsd":
        parser.error(f"--decay-frac {args.decay_frac:g} belongs to the wsd schedule, but --schedule is "
                     f"{args.schedule}: give --schedule wsd, or drop --decay-frac")
    args.recipe_notes = unwritten_tasks(args, given, parser)
    # The budget's levers include dropout, the student's (Task 16.1): while it is unwritten the plan keeps the
    # cap of the runs without levers, and says why when it reaches it (report_plan).
    args.levers_todo = None
    if args.levers_chosen_by_budget:
        import torch

        import minilm

        args.levers_todo = _unwritten(lambda: minilm.dropout(torch.ones(2), 0.1, True))
        args.levers_chosen_by_budget = args.levers_todo is None
    # Past the levers' cap the plan distils (plan.py's MAX_TEACHERS) with the student's Task 16.2, once written.
    args.distill_todo = "the levers are off" if not args.levers_chosen_by_budget else _unwritten(
        lambda: minilm.distillation_loss(torch.zeros(1, 2), torch.zeros(1, 2), torch.zeros(1, dtype=torch.long),
                                         1.0, 0.5))
    if not args.muon_lr > 0:
        parser.error(f"--muon-lr must be > 0, got {args.muon_lr}")
    if not 0 < args.decay_frac <= 1:
        parser.error(f"--decay-frac must lie in (0, 1], got {args.decay_frac}")
    if "lr_width" not in given and (args.optimizer != "adamw" or args.decay_groups):
        args.lr_width = 0
    if args.lr_width < 0:
        parser.error(f"--lr-width must be a width (the d_model --lr was tuned at) or 0 (off), got {args.lr_width}")
    if args.lr_width and (args.optimizer != "adamw" or args.decay_groups):
        parser.error(f"--lr-width {args.lr_width} scales AdamW's rates for the whole model; it does not combine "
                     f"with --optimizer muon or --decay-groups: drop one of them")
    if args.softcap < 0 or not 0 <= args.dropout < 1:
        parser.error(f"need --softcap >= 0 (0: off) and 0 <= --dropout < 1, got softcap={args.softcap} and "
                     f"dropout={args.dropout}")


def _parse_budget(args: argparse.Namespace, parser: argparse.ArgumentParser) -> None:
    """args.budget_s: --budget in seconds (None with --steps), refused when it is no duration or too short."""
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


def validate_eval_and_tokenizer(args: argparse.Namespace, parser: argparse.ArgumentParser) -> None:
    """After validate: --eval-stride (default context/2) and --tokenizer mine's vocabulary size."""
    if args.eval_stride is None:
        args.eval_stride = max(1, args.context_length // 2)
    elif not 1 <= args.eval_stride <= max(1, args.context_length // 2):
        parser.error(f"--eval-stride must lie in 1 … context/2 = {max(1, args.context_length // 2)} (so that every "
                     f"token has at least half a context before it), got {args.eval_stride}")
    if args.tokenizer == "mine" and (args.full_vocab or args.vocab_size < 257):
        parser.error(f"--tokenizer mine learns --vocab-size − 257 merges (besides the 256 bytes and <|endoftext|>): "
                     f"give --vocab-size of at least 257 and no --full-vocab, got --vocab-size {args.vocab_size}"
                     + (" and --full-vocab" if args.full_vocab else ""))


def recipe_of(args: argparse.Namespace) -> Recipe:
    """The run's recipe from its (validated) flags."""
    return Recipe(optimizer=args.optimizer, muon_lr=args.muon_lr, schedule=args.schedule, decay_frac=args.decay_frac,
                  decay_groups=args.decay_groups, zero_init=args.zero_init, qk_norm=args.qk_norm,
                  softcap=args.softcap, ffn=args.ffn, dropout=args.dropout, reshuffle=args.reshuffle,
                  lr_width=args.lr_width)
