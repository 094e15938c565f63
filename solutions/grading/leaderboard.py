"""A verified leaderboard: the student's own code trains the model in the sandbox, and the trusted side measures it.

    minilm grade subs/* --leaderboard                       # leaderboard.csv beside grades.csv
    minilm grade sub/ --leaderboard --leaderboard-train "--steps 200"

1. In the submission's sandbox, `minilm train` (the course's loop with the student's modules) runs with the given
   training arguments (default `--budget 3m`), a fixed seed, one thread and no torch.compile, and writes its
   checkpoint into its results folder. What it prints, its result.json and any other file it writes are never read.
2. With every sandboxed process dead, the checkpoint (a regular file, size-capped) is copied out and handed to
   `python -m solutions.grading.leaderboard`, a process that imports the reference (MINILM_IMPL=solutions) and
   the course's own provided code, never the submission: it builds the validation split itself from the trusted
   text, loads the weights as data (`torch.load(weights_only=True)`, then the reference TransformerLM's
   `load_state_dict(strict=True)`: CS336's state-dict names) and computes bits per byte as `minilm train` does,
   plus this machine's speed (the reference's training steps per second at that size, one thread).
3. The figure is accepted only as a finite float in (0, MAX_BPB]. A submission that cannot train gets no row, and
   one line saying why, in the grader's own words. Points never depend on it.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import json
import math
import os
import shlex
import stat
import subprocess
import sys
import time
from pathlib import Path

from minilm.course import tasks

SEED = 1337
DEFAULT_TRAIN = "--budget 3m"
MAX_BPB = 16.0  # a byte is 8 bits; twice that is no language model, whatever the vocabulary
MAX_CHECKPOINT_BYTES = 256 * 2**20
EVAL_SECONDS, EVAL_MEMORY_MB = 900, 4096
# Flags the leaderboard sets itself: a run may not choose where it writes, its seed, its device or compiling.
RESERVED = ("--out-dir", "--seed", "--device", "--compile", "--no-compile", "--resume", "--data", "--tokenizer")
SIZE = ("d_model", "num_layers", "num_heads", "d_ff")


class LeaderboardError(Exception):
    """Why a submission has no row, in the grader's own words."""


@dataclasses.dataclass
class Row:
    student: str
    bits_per_byte: float | None = None
    tokens_per_s: float | None = None  # this machine's speed: the reference's training tokens per second, 1 thread
    why: str = ""  # set when there is no row


def train_args(text: str) -> list[str]:
    """--leaderboard-train's words, refused with one line where they set what the leaderboard sets itself."""
    words = shlex.split(text)
    taken = [w for w in words if w.split("=", 1)[0] in RESERVED]
    if taken:
        raise ValueError(f"--leaderboard-train: expected training flags such as --budget 3m or --steps 200, got "
                         f"{taken[0]}, which the leaderboard sets itself")
    from minilm.course.train.options import build_parser, validate

    parser = build_parser("--leaderboard-train")
    parser.error = lambda message: (_ for _ in ()).throw(ValueError(f"--leaderboard-train: {message}"))
    validate(parser.parse_args(words), parser)
    return words


def sandboxed_command(words: list[str], inside_out: str) -> tuple[str, ...]:
    return ("-m", "minilm.course.train", *words, "--seed", str(SEED), "--out-dir", inside_out, "--no-compile",
            "--sample-tokens", "0", "--device", "cpu")


def _copy_regular(path: Path, dest: Path, cap: int) -> None:
    """`path` copied to `dest` if it is a regular file (no link) of at most `cap` bytes, else LeaderboardError."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        raise LeaderboardError(f"the training run wrote no {path.name}") from None
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode) or st.st_size > cap:
            raise LeaderboardError(f"the training run's {path.name} is not a file of at most {cap // 2**20} MB")
        dest.write_bytes(f.read(cap + 1)[:cap])


def measure(run_dir: Path, words: list[str], scratch: Path) -> Row:
    """The trusted side: bits per byte of the checkpoint in `run_dir` (the dead sandbox's results folder), by the
    reference in a process of its own. LeaderboardError where there is no figure to trust."""
    mine = scratch / "leaderboard-eval"
    mine.mkdir(parents=True)
    _copy_regular(run_dir / "checkpoint.pt", mine / "checkpoint.pt", MAX_CHECKPOINT_BYTES)
    if "--budget" in " ".join(words):  # the plan chose the size: config.json says which, checked below
        _copy_regular(run_dir / "config.json", mine / "config.json", 2**20)
    env = {**os.environ, "MINILM_IMPL": "solutions", "PYTHONPATH": str(tasks.ROOT), "OMP_NUM_THREADS": "1",
           "MKL_NUM_THREADS": "1", "TQDM_DISABLE": "1"}

    def limit():
        import resource

        resource.setrlimit(resource.RLIMIT_AS, (EVAL_MEMORY_MB * 2**20,) * 2)

    try:
        r = subprocess.run([sys.executable, "-m", "solutions.grading.leaderboard", str(mine), json.dumps(words)],
                           capture_output=True, text=True, encoding="utf-8", timeout=EVAL_SECONDS, cwd=tasks.ROOT,
                           env=env, preexec_fn=limit if os.name == "posix" else None)
    except subprocess.TimeoutExpired:
        raise LeaderboardError(f"evaluating the checkpoint took over {EVAL_SECONDS} s") from None
    lines = r.stdout.strip().splitlines()
    try:
        doc = json.loads(lines[-1]) if lines else {}
    except ValueError:
        doc = {}
    if r.returncode != 0 or not isinstance(doc, dict):
        raise LeaderboardError("the reference could not evaluate the checkpoint")
    if "problem" in doc:
        raise LeaderboardError(str(doc["problem"])[:300])
    bpb, speed = doc.get("bits_per_byte"), doc.get("tokens_per_s")
    if not (isinstance(bpb, float) and math.isfinite(bpb) and 0 < bpb <= MAX_BPB):
        raise LeaderboardError(f"the checkpoint's bits per byte is not a number in (0, {MAX_BPB:g}]: {bpb!r}")
    if not (isinstance(speed, float) and math.isfinite(speed) and speed > 0):
        raise LeaderboardError("this machine's speed could not be measured")
    return Row("", bpb, speed)


def one(box, sub, home: Path, words: list[str], slot: int, timeout: float, build) -> Row:
    """Train `sub` in the sandbox `box` (`build(ws)`: a fresh workspace of the course with its modules), then
    measure it here. Never raises: a submission without a figure gets its reason."""
    from solutions.grading import sandbox

    ws, out = home / "ws", home / "out"
    try:
        ws.mkdir(parents=True)
        out.mkdir()
        build(ws)
        box.prepare(ws, out, slot)
        inside_out = str(out) if box.same_paths else sandbox.OUT
        env = box.env({"MINILM_IMPL": "minilm", "TQDM_DISABLE": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
                       "PYTHONWARNINGS": "ignore"}, ws, out)
        run = sandbox.run(box, sandboxed_command(words, inside_out), ws, out, env, slot, timeout=timeout,
                          log=home / "train.log")
        if run.wrote_too_much:
            raise LeaderboardError(f"the training run wrote over {sandbox.WRITE_MAX_BYTES // 2**20} MB")
        if run.returncode is None:
            raise LeaderboardError(f"the training run took over {timeout:g} s")
        if run.returncode != 0:
            raise LeaderboardError(f"`minilm train` with your code stopped with exit status {run.returncode} (run "
                                   f"`minilm train {' '.join(words)}` yourself to see why)")
        row = measure(out, words, home)
        row.student = sub.name
        return row
    except LeaderboardError as e:
        return Row(sub.name, why=str(e))
    except Exception as e:  # noqa: BLE001 - the leaderboard never stops the grading
        return Row(sub.name, why=f"the leaderboard failed on this submission ({type(e).__name__})")


def write(out: Path, rows: list[Row]) -> None:
    """leaderboard.csv (student, bits_per_byte, tokens_per_s, why) and leaderboard.json, the same rows."""
    with open(out / "leaderboard.csv", "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["student", "bits_per_byte", "tokens_per_s", "why_no_row"])
        for r in rows:
            w.writerow([r.student, "" if r.bits_per_byte is None else f"{r.bits_per_byte:.4f}",
                        "" if r.tokens_per_s is None else f"{r.tokens_per_s:.0f}", r.why])
    (out / "leaderboard.json").write_text(json.dumps([dataclasses.asdict(r) for r in rows], indent=1),
                                          encoding="utf-8")


def read(out: Path) -> list[Row] | None:
    try:
        return [Row(**r) for r in json.loads((out / "leaderboard.json").read_text(encoding="utf-8"))]
    except FileNotFoundError:
        return None


def gradescope_entries(row: Row) -> list[dict]:
    """Gradescope's results.json `leaderboard`: bits per byte (lower is better), the machine's speed beside it."""
    return [{"name": "bits per byte", "value": round(row.bits_per_byte, 4), "order": "asc"},
            {"name": "machine speed (reference tokens/s)", "value": round(row.tokens_per_s), "order": "desc"}]


# ---------------------------------------------------------------- the trusted evaluation (its own process)


def _problem(text: str) -> int:
    print(json.dumps({"problem": text}))
    return 0


def evaluate(folder: Path, words: list[str]) -> int:
    """Runs with MINILM_IMPL=solutions: every model function is the reference's, the data are the course's."""
    import torch

    from minilm.course.train import run as train_run
    from minilm.course.train.dist import Dist
    from minilm.course.train.metrics import evaluate_sums
    from minilm.course.train.options import build_parser, validate

    assert os.environ.get("MINILM_IMPL") == "solutions"
    torch.set_num_threads(1)
    parser = build_parser("leaderboard")
    args = parser.parse_args([*words, "--seed", str(SEED), "--out-dir", str(folder / "run"), "--no-compile"])
    validate(args, parser)
    train_run.validate_eval_and_tokenizer(args, parser)
    if args.budget_s is not None:  # the size the plan chose, as numbers in range: the weights must fit it exactly
        try:
            saved = json.loads((folder / "config.json").read_text(encoding="utf-8"))
            size = {k: saved[k] for k in SIZE}
        except (OSError, ValueError, KeyError, TypeError):
            return _problem("the training run's config.json does not say the model's size")
        if not all(type(v) is int and 1 <= v <= 8192 for v in size.values()) or size["d_model"] % size["num_heads"]:
            return _problem("the training run's config.json gives no valid model size")
        vars(args).update(size)
    dist = Dist("cpu")
    (folder / "run").mkdir()
    data = train_run.load_data(args, dist, folder / "run")
    model, _, _ = train_run.new_model(args, data.vocab.size, train_run.recipe_of(args), torch.device("cpu"))
    try:
        checkpoint = torch.load(folder / "checkpoint.pt", map_location="cpu", weights_only=True)
        state = checkpoint["model"] if isinstance(checkpoint, dict) and "model" in checkpoint else checkpoint
        model.load_state_dict(state, strict=True)
    except Exception as e:  # noqa: BLE001 - anything but the reference's names and shapes
        return _problem("the checkpoint's weights do not fit the reference model (CS336's state-dict names and "
                        f"shapes for d_model {args.d_model}, {args.num_layers} layers): {type(e).__name__}")
    model.eval()
    with torch.no_grad():
        nats, n = evaluate_sums(model, data.val, args.context_length, args.batch_size, None, dist, torch.device("cpu"))
    bpb = float(data.bpb(nats, n))
    # This machine's speed: the reference's training steps at this size, one thread, best of three.
    model.train()
    x = torch.randint(0, data.vocab.size, (args.batch_size, args.context_length))
    best = math.inf
    for _ in range(3):
        t0 = time.perf_counter()
        logits = model(x)
        torch.nn.functional.cross_entropy(logits.flatten(0, 1), x.flatten()).backward()
        best = min(best, time.perf_counter() - t0)
    print(json.dumps({"bits_per_byte": bpb, "tokens_per_s": args.batch_size * args.context_length / best}))
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m solutions.grading.leaderboard",
                                description="the trusted evaluation of a checkpoint (run by the grader)")
    p.add_argument("folder", type=Path)
    p.add_argument("words", help="the training arguments, as a JSON list")
    args = p.parse_args(argv)
    return evaluate(args.folder, json.loads(args.words))


if __name__ == "__main__":
    sys.exit(main())
