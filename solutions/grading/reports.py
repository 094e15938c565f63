"""Grades and feedback, written by the trusted grader only, after every sandbox is gone.

Every line comes from the grader's own templates, its case descriptions and the task registry.
A submission's output never flows in: at most the names of the exceptions it raised and the
first line of a syntax error, each cut short.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

from minilm.course import tasks
from solutions.grading.results import SKIPPED, StudentGrade, TaskGrade

UNSANDBOXED = "UNSANDBOXED: graded without a sandbox (--no-sandbox); these points are not certified."
SETPRIV = ("SANDBOX setpriv: your code ran as an unprivileged user of its own, without namespaces (this machine "
           "forbids them, so no bubblewrap): the reference, the hidden inputs' source, classmates' files and the "
           "network (it could make unix sockets only) were closed to it.")
ISOLATION = {"bwrap": "bubblewrap: own PID and network namespaces, an unprivileged uid", "setpriv": SETPRIV,
             "docker": "Docker: networking off, read-only root, an unprivileged user", "none": UNSANDBOXED}
MAX_FEEDBACK_CHARS = 20_000


def caveat(result: StudentGrade) -> list[str]:
    """The line every report of a weaker isolation starts with: none (UNSANDBOXED) or setpriv."""
    return [UNSANDBOXED] if result.unsandboxed else [SETPRIV] if result.sandbox == "setpriv" else []


def task_lines(r: TaskGrade, hidden: bool = True) -> list[str]:
    """One task's feedback lines, from the grader's own messages: the from-scratch rules it
    broke, the comparison's verdict with the named mistake, the check cells that failed.

    With hidden=False, what a student may see before grades are published: the comparison's
    verdict only when it failed on the notebook's inputs, else "passed" for those, so nothing
    decided on a hidden input shows, neither a failure nor a pass."""
    lines = [f"from scratch: {rule}" for rule in r.rules]
    if not hidden and (r.hidden_failed or r.matched):
        lines.append("the notebook's inputs: passed")
    else:
        lines.append(r.message)
        if r.mistake:
            lines.append(f"recognized mistake: `{r.mistake}`")
    for c in r.cells:
        if c.status not in ("passed", SKIPPED):  # a skipped cell's task failed already: the lines above say why
            # the cell's place among all the notebook's cells, as JupyterLab (and `minilm test`) count it
            where = f"check cell {c.position}" if c.position is not None else f"check cell (code cell {c.number})"
            lines.append(f"`notebooks/{c.notebook}.ipynb`, {where}: {c.status}")
    return lines


def visible_ok(r: TaskGrade) -> bool:
    """Whether a task passed everything a student can see: its rules, the notebook's inputs and
    its check cells (its points may still be lost on a hidden input)."""
    return r.full or (r.hidden_failed and not r.rules and all(c.status == "passed" for c in r.cells))


def feedback(result: StudentGrade) -> str:
    lines = [*caveat(result), ""] if caveat(result) else []
    lines += [f"# minilm grade: {result.student}", "", f"**{result.total} / {result.max} points**", ""]
    lines += ["| task | title | points |", "|---|---|---|"]
    for task_id, r in result.tasks.items():
        mark = "✓" if r.full else "✗"
        lines.append(f"| {task_id} | {tasks.get(task_id).title} | {mark} {r.points}/{r.max} |")
    lines.append("")
    for task_id, r in result.tasks.items():
        if r.full:
            continue
        task = tasks.get(task_id)
        lines += [f"## Task {task_id}: {task.title} (`{task.function}` in `{task.file}`)", ""]
        lines += [f"- {line}" for line in task_lines(r)]
        lines.append("")
    if result.notes or result.problems:
        lines += ["## About your files", "", *[f"- {p}" for p in result.notes + result.problems], ""]
    text = "\n".join(lines)
    if len(text) > MAX_FEEDBACK_CHARS:
        text = text[:MAX_FEEDBACK_CHARS] + "\n\n(feedback cut short)\n"
    return text


def header(plan) -> dict:
    """What grades.json says of the run, beside its students: the same for a whole run and its merged shards."""
    doc = {"max": plan.max_points, "tasks": {t: tasks.get(t).points for t in plan.task_ids},
           "notebooks": list(plan.notebooks), "sandbox": plan.box.kind,
           "isolation": ISOLATION.get(plan.box.kind, plan.box.kind), "hidden_inputs": plan.hidden}
    return {"warning": UNSANDBOXED, **doc} if plan.box.unsandboxed else doc


def write(out: Path, run: dict, results: list[StudentGrade]) -> None:
    """grades.csv, grades.json and feedback/ for the run `run` (header(plan), or a merged shard's)."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "feedback").mkdir(exist_ok=True)
    task_ids = list(run["tasks"])
    with open(out / "grades.csv", "w", newline="", encoding="utf-8") as f:
        if run.get("warning"):
            f.write(f"# {run['warning']}\n")
        w = csv.writer(f)
        w.writerow(["student", "source", *task_ids, "total", "max"])
        for r in results:
            w.writerow([r.student, r.source, *(r.tasks[t].points for t in task_ids), r.total, r.max])
    summary = {**run, "students": [r.to_json() for r in results]}
    (out / "grades.json").write_text(json.dumps(summary, indent=1, ensure_ascii=False), encoding="utf-8")
    for r in results:
        (out / "feedback" / f"{r.student}.md").write_text(feedback(r), encoding="utf-8")
