"""Write minilm/course/expected.pt: the reference's outputs on every check's fixed inputs, and the
outputs of every mistake a check names (instructors only: never in the student edition).

    minilm expected            # regenerate minilm/course/expected.pt (run after changing a check or the reference)
    minilm expected --check    # exit 1 if the stored file differs from a fresh one
    minilm expected --task 10.4 --task 11.3   # regenerate only those checks' entries, keep the rest as stored

The checks (minilm/course/checks*.py) decide what is stored: each check runs in recording mode
(`minilm.course.checks.record`) with `minilm` resolved to the reference, and every output it would
compare is kept under its probe's name. A check names mistakes by label; each label is then
recorded the same way with that mistake patched into the reference: a mutant of the same
name, or a variant of that task (VARIANTS: mistakes the checks name that the suite is not run
on). Both live in solutions/mistakes/, a module per notebook group. A label with neither is an
error.

The file holds data only (tensors, str, dicts), loaded with torch.load(weights_only=True), so
the student edition carries no code that computes a task's result.
"""

from __future__ import annotations

import os
import sys

import torch

from minilm.course import checks, tasks
from minilm.course.cli import Parser, summary
from solutions import mistakes

PATH = checks.EXPECTED_PATH
FORMAT = 1


def filtered_probs(logits: torch.Tensor, temperature: float = 1.0, top_k: int | None = None,
                   top_p: float | None = None) -> torch.Tensor:
    """The distribution generate draws from, by the sampling rules' definition (for the viz's
    stored pictures): greedy at temperature 0, else softmax(logits / T), top-k, then top-p."""
    logits = logits.double()
    if temperature == 0:
        return torch.nn.functional.one_hot(logits.argmax(), logits.numel()).double()
    logits = logits / temperature
    if top_k is not None and top_k < logits.numel():
        logits = logits.masked_fill(logits < logits.topk(top_k).values[-1], float("-inf"))
    if top_p is not None:
        probs = torch.softmax(logits, -1)
        order = probs.argsort(descending=True)
        mass_before = probs[order].cumsum(0) - probs[order]  # mass of the tokens more likely than each
        keep = torch.zeros_like(probs, dtype=torch.bool)
        keep[order] = mass_before < top_p
        logits = logits.masked_fill(~keep, float("-inf"))
    return torch.softmax(logits, -1)


def viz_data() -> dict:
    """Data the pictures show: the exact sampling distributions of minilm/course/viz/generation.py."""
    from minilm.course.viz import generation as vg

    return {"sampling": {vg.setting_key(**s): filtered_probs(vg.EXAMPLE_LOGITS, **s) for s in vg.SAMPLING_SETTINGS}}


# ---------------------------------------------------------------- the mistakes the checks name


# The mistakes the checks name that the suite is not run on: each group's variants in solutions/mistakes/.
VARIANTS: list[dict] = mistakes.variants()


def variant(task: str, label: str) -> dict | None:
    """The mistake a check of `task` names `label`: a variant of that task, else the mutant of that name."""
    for v in VARIANTS:
        if v["task"] == task and v["name"] == label:
            return v
    for m in mistakes.all_mutants():
        if m["name"] == label and not m["broken"]:
            return m
    return None


# ---------------------------------------------------------------- generating and comparing


def _close(a, b) -> bool:
    if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)) or a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.is_floating_point():
        a, b = a.double(), b.double()
        if not torch.equal(torch.isnan(a), torch.isnan(b)):
            return False
        fin = ~torch.isnan(a)
        return torch.allclose(a[fin], b[fin], atol=1e-6, rtol=1e-5, equal_nan=False)
    return torch.equal(a, b)


# How far a stored float output may drift from a fresh one before the file counts as stale: a
# whole forward in float32 is not bit-stable across CPUs, BLAS kernels and thread counts, and the
# subtlest mutant must still be caught (the measurements: docs/contributing.md, "Measured").
DRIFT = 1e-5


def _same_up_to_float32_drift(a, b) -> bool:
    """Equal shapes, dtypes and non-finite positions, and finite values within DRIFT of b's scale."""
    if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)) or a.shape != b.shape or a.dtype != b.dtype:
        return False
    if not a.is_floating_point():
        return torch.equal(a, b)
    a, b = a.double(), b.double()
    fin = torch.isfinite(b)
    if not torch.equal(fin, torch.isfinite(a)) or not torch.equal(a[~fin].nan_to_num(), b[~fin].nan_to_num()):
        return False
    if not fin.any():
        return True
    scale = b[fin].abs().max().item()
    return (a[fin] - b[fin]).abs().max().item() <= DRIFT * scale + 1e-7


def generate(task_ids: list[str] | None = None) -> dict:
    """Every check recorded on the reference (or only `task_ids`'), and every mistake it names, as plain data."""
    previous = os.environ.get("MINILM_IMPL")
    os.environ["MINILM_IMPL"] = "solutions"
    try:
        out = {}
        for task_id in task_ids or checks.registered():
            rec = checks.record(task_id)
            if rec.stopped is not None:
                raise RuntimeError(f"Task {task_id}'s check stopped on the reference: {rec.stopped}")
            want = {k: v for k, v in rec.outputs.items() if isinstance(v, torch.Tensor)}
            wanted_by: dict[str, list[str]] = {}
            for key, labels in rec.labels.items():
                for label in labels:
                    wanted_by.setdefault(label, []).append(key)
            mistake_outputs = {}
            for label, keys in sorted(wanted_by.items()):
                v = variant(task_id, label)
                if v is None:
                    raise RuntimeError(f"Task {task_id}'s check names the mistake {label!r}, which is neither a "
                                       "mutant nor a variant of this task in solutions/mistakes/")
                with mistakes.applied(v):
                    got = checks.record(task_id).outputs
                kept = {k: got[k] for k in keys
                        if isinstance(got.get(k), torch.Tensor) and not _close(got[k], want.get(k))}
                if kept:
                    mistake_outputs[label] = kept
            out[task_id] = {"want": want, "mistakes": mistake_outputs}
        return {"format": FORMAT, "torch": torch.__version__.split("+")[0], "tasks": out, "viz": viz_data()}
    finally:
        if previous is None:
            os.environ.pop("MINILM_IMPL", None)
        else:
            os.environ["MINILM_IMPL"] = previous


def differences(fresh: dict, stored: dict) -> list[str]:
    """Where two expectation files disagree (keys, shapes, dtypes, or values beyond float32's drift)."""
    problems = []
    va, vb = fresh.get("viz", {}).get("sampling", {}), stored.get("viz", {}).get("sampling", {})
    for key in sorted(set(va) | set(vb)):
        if key not in va or key not in vb or not _same_up_to_float32_drift(va[key], vb[key]):
            problems.append(f"viz sampling {key!r}: differs or missing")
    a, b = fresh.get("tasks", {}), stored.get("tasks", {})
    for task_id in sorted(set(a) | set(b)):
        if task_id not in a or task_id not in b:
            problems.append(f"Task {task_id}: only in the {'fresh' if task_id in a else 'stored'} outputs")
            continue
        pairs = [("want", a[task_id]["want"], b[task_id]["want"])]
        ma, mb = a[task_id]["mistakes"], b[task_id]["mistakes"]
        for label in sorted(set(ma) | set(mb)):
            pairs.append((f"mistake {label}", ma.get(label, {}), mb.get(label, {})))
        for what, x, y in pairs:
            for key in sorted(set(x) | set(y)):
                if key not in x or key not in y:
                    problems.append(f"Task {task_id} {what} {key!r}: only in the {'fresh' if key in x else 'stored'} "
                                    "outputs")
                elif not _same_up_to_float32_drift(x[key], y[key]):
                    problems.append(f"Task {task_id} {what} {key!r}: differs")
    return problems


def load() -> dict:
    return torch.load(PATH, weights_only=True, map_location="cpu")


def main(argv: list[str] | None = None, prog: str = "minilm expected") -> int:
    parser = Parser(prog=prog, description=summary(__doc__))
    parser.add_argument("--check", action="store_true", help="compare the stored file with a fresh one; write nothing")
    parser.add_argument("--task", action="append", metavar="ID",
                        help="regenerate only this task's check (repeatable); the other tasks' stored outputs stay "
                             "as they are, so float drift elsewhere does not rewrite them")
    args = parser.parse_args(argv)
    if args.task:
        unknown = sorted(set(args.task) - set(checks.registered()))
        if unknown:
            parser.error(f"no check for task {', '.join(unknown)}")
        if not PATH.is_file():
            parser.error(f"--task updates the stored file, and {PATH} is missing: run without --task")
        stored, part = load(), generate(args.task)
        fresh = {**stored, "tasks": {**stored["tasks"], **part["tasks"]}}
    else:
        fresh = generate()
    if args.check:
        problems = differences(fresh, load()) if PATH.is_file() else [f"{PATH} is missing"]
        for p in problems:
            print(p, file=sys.stderr)
        return 1 if problems else 0
    if PATH.is_file() and not differences(fresh, load()):
        # Rewriting would only record float drift, a diff in git for nothing.
        print(f"expected: {PATH.relative_to(tasks.ROOT)} unchanged (the fresh outputs match it)")
        return 0
    torch.save(fresh, PATH)
    checks._EXPECTED = None
    n = sum(len(t["want"]) for t in fresh["tasks"].values())
    m = sum(len(o) for t in fresh["tasks"].values() for o in t["mistakes"].values())
    print(f"expected: wrote {PATH.relative_to(tasks.ROOT)} ({PATH.stat().st_size / 1024:.0f} kB): {n} outputs of "
          f"{len(fresh['tasks'])} checks, {m} of named mistakes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
