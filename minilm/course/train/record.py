"""What a run leaves to read and to look at beside its checkpoint: metrics.jsonl, one JSON object
per logged step, written as the run goes (`tail -f` it), and loss.png, its losses drawn at the end."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

METRICS_FILE, PLOT_FILE = "metrics.jsonl", "loss.png"
MAX_RECORDS = 500  # a run of up to 500 steps logs every step; a longer one every steps/500


def log_interval(steps: int) -> int:
    """Steps between records for a run of `steps` steps: at most about MAX_RECORDS records."""
    return max(1, -(-steps // MAX_RECORDS))


def read_metrics(path: Path) -> list[dict]:
    """The records of a metrics.jsonl (a line cut short by an interrupted write is skipped)."""
    records = []
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return records


class MetricsLog:
    """out_dir/metrics.jsonl, written by rank 0 as the run goes, one JSON object per logged step:

        {"step": 20, "train_loss": 2.913, "lr": 0.003, "tokens": 20480, "elapsed_s": 12.3}

    train_loss: the mean training loss of the steps since the previous record (nats per token);
    lr: the last of them's learning rate; tokens: the training tokens seen so far, all processes
    together; elapsed_s: seconds of training so far (evaluations included; a resumed run's added to
    those before it). A step with an evaluation adds val_loss (nats per token), val_bpb (bits per
    byte) and val_tokens: the periodic evaluations score the first --eval-tokens validation tokens,
    the final one (on the last record) all of them.

    A new run starts the file afresh. A --resume from step `start` keeps the records up to that
    step (the steps after it, logged before an interruption, are trained and logged again) and
    appends to them, its elapsed_s going on from theirs."""

    def __init__(self, path: Path, start: int, every: int):
        self.path, self.every = Path(path), every
        kept = read_metrics(self.path) if start and self.path.is_file() else []
        self.records = [r for r in kept if r.get("step", math.inf) <= start]
        self.elapsed_before = self.records[-1].get("elapsed_s", 0.0) if self.records else 0.0
        self.losses: list[float] = []  # the training losses since the last record
        self.last: dict = {}  # the last step's step, lr, tokens and elapsed_s
        self._rewrite()

    def step(self, step: int, loss: float, lr: float, tokens: int, elapsed_s: float, val: dict | None = None,
             checkpoint: bool = False) -> None:
        """One training step done (elapsed_s: seconds since this run's loop started); a record
        every `every` steps, at every evaluation (val: val_loss, val_bpb, val_tokens) and at every
        checkpoint (where a --resume starts)."""
        self.losses.append(loss)
        self.last = dict(step=step, lr=float(f"{lr:.6g}"), tokens=tokens,
                         elapsed_s=round(self.elapsed_before + elapsed_s, 3))
        if step % self.every == 0 or val is not None or checkpoint:
            self._append(self._pending() | _rounded(val or {}))

    def finish(self, step: int, tokens: int, val: dict) -> None:
        """The final evaluation, on the record of the last step (written now if it was not yet)."""
        val = _rounded(val)
        if self.losses:
            self.records.append(self._pending() | val)
        elif self.records and self.records[-1]["step"] == step:
            self.records[-1].update(val)
        else:  # no step trained and none logged before (a checkpoint older than this log)
            self.records.append(dict(step=step, tokens=tokens, elapsed_s=self.elapsed_before) | val)
        self._rewrite()

    def _pending(self) -> dict:
        record = dict(step=self.last["step"], train_loss=round(sum(self.losses) / len(self.losses), 6),
                      lr=self.last["lr"], tokens=self.last["tokens"], elapsed_s=self.last["elapsed_s"])
        self.losses = []
        return record

    def _append(self, record: dict) -> None:
        self.records.append(record)
        with self.path.open("a", encoding="utf-8") as f:
            f.write(json.dumps(record) + "\n")

    def _rewrite(self) -> None:
        tmp = self.path.with_name(self.path.name + ".tmp")
        tmp.write_text("".join(json.dumps(r) + "\n" for r in self.records), encoding="utf-8")
        os.replace(tmp, self.path)


def _rounded(val: dict) -> dict:
    return {k: round(v, 6) if isinstance(v, float) else v for k, v in val.items()}


def plot_losses(records: list[dict], path: Path, title: str, baseline: float | None = None) -> None:
    """loss.png: the training loss by step, and each validation loss (the periodic ones on their
    subset, the final one on every validation token), with the unigram baseline for scale.
    Drawn with matplotlib's Agg canvas: no display needed, and pyplot's state is left alone."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(7.5, 4.5), dpi=100, layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    train = [(r["step"], r["train_loss"]) for r in records if r.get("train_loss") is not None]
    if train:
        ax.plot(*zip(*train), lw=1.2, label="training loss")
    final_n = records[-1].get("val_tokens") if records else None
    for n in sorted({r["val_tokens"] for r in records if "val_loss" in r}):
        val = [(r["step"], r["val_loss"]) for r in records if r.get("val_tokens") == n and "val_loss" in r]
        which = "the final evaluation's" if n == final_n else "the first"
        ax.plot(*zip(*val), "o-", ms=5, label=f"validation loss ({which} {n:,} tokens)")
    if baseline is not None:
        ax.axhline(baseline, ls="--", lw=1, color="gray", label="unigram baseline")
    ax.set_title(title)
    ax.set_xlabel("step")
    ax.set_ylabel("cross-entropy (nats per token)")
    ax.grid(alpha=0.3)
    ax.legend()
    tmp = Path(path).with_name(Path(path).name + ".tmp")
    fig.savefig(tmp, format="png")
    os.replace(tmp, path)
