"""Grading on Gradescope: the grader's result as Gradescope's results.json (instructors).

The autograder bundle (`minilm export gradescope OUT.zip`) runs this through its
`run_autograder`, after checking the bundle against its manifest:

    python -m solutions.grading.gradescope --root /autograder [--submission DIR] [--results DIR] [-- GRADER ARGS…]

1. The submission (`<root>/submission`) is copied into a fresh workspace of its own; a folder
   with nothing in it is refused with one line.
2. The grader (`minilm grade`) grades that copy, with its own sandbox for the
   student's code inside Gradescope's container (the container is the outer wall): bubblewrap
   where the container allows namespaces, else `setpriv`, an unprivileged uid of its own, to
   which the course folder (root's alone) is closed; the report says which.
3. Its grades.json becomes `<root>/results/results.json`, written whole or not at all.

Visibility. Each task is two tests, so nothing decided on a hidden input shows before grades
are published:
- "Task ID …: notebook inputs, rules, check cells" (0 points, always visible): passed or
  failed on what the student can see and run themselves, with the grader's line for it;
- "Task ID …: graded" (the task's points, `after_published`): the points, the grader's line
  (for a hidden input only "on an input the notebook does not show (shape …, dtype …)"), the
  named mistake, the rules broken and the check cells that failed.
Gradescope hides the total while any test is unpublished. Feedback is the grader's own text
only: no test source, no expected values, nothing the submission printed.

Extra grader arguments (e.g. `--tasks 1.1 1.2` for a quick trial) come after `--` or from
MINILM_GRADE_ARGS.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from minilm.course import tasks
from solutions.grading import leaderboard, reports
from solutions.grading.results import StudentGrade, TaskGrade

PROG = "python -m solutions.grading.gradescope"
VISIBLE, AFTER_PUBLISHED = "visible", "after_published"
MAX_OUTPUT_CHARS = 4000


class AutograderError(Exception):
    """A problem that stops this run with one line and no results.json."""


VISIBLE_PASSED = "passed: the notebook's inputs, the from-scratch rules and the check cells"


def _title(task_id: str) -> str:
    return f"Task {task_id}: {tasks.get(task_id).title}"


def tests_for(task_id: str, r: TaskGrade) -> list[dict]:
    """The two Gradescope tests of one task (see the module's docstring)."""
    seen_ok = reports.visible_ok(r)
    earned = r.full
    visible = {"name": f"{_title(task_id)}: notebook inputs, rules, check cells", "score": 0, "max_score": 0,
               "status": "passed" if seen_ok else "failed",
               "output": (VISIBLE_PASSED if seen_ok
                          else "\n".join(reports.task_lines(r, hidden=False)))[:MAX_OUTPUT_CHARS],
               "visibility": VISIBLE}
    graded = {"name": f"{_title(task_id)}: graded", "score": r.points, "max_score": r.max,
              "status": "passed" if earned else "failed",
              "output": "\n".join([f"{r.points}/{r.max} points", *([r.message] if earned else
                                                                         reports.task_lines(r,
                                                                                            hidden=True))])[:MAX_OUTPUT_CHARS],
              "visibility": AFTER_PUBLISHED}
    return [visible, graded]


def results_json(grades: dict, seconds: float | None = None, board: list[leaderboard.Row] | None = None) -> dict:
    """Gradescope's results.json for the one student in a grader's grades.json; with the grader's leaderboard
    (--leaderboard), its row as Gradescope's `leaderboard` (points never depend on it), or one line saying why
    there is none."""
    students = grades.get("students") or []
    if len(students) != 1:
        raise AutograderError(f"the grader reported {len(students)} submissions where one was graded")
    r = StudentGrade.from_json(students[0])
    tests = [t for task_id, tr in r.tasks.items() for t in tests_for(task_id, tr)]
    lines = reports.caveat(r)
    lines.append(f"minilm: {len(r.tasks)} task(s) graded, {r.max} points in all. Each task's "
                 "first test is what you can check yourself; its points, which count hidden inputs "
                 "as well, appear when grades are published.")
    if r.notes or r.problems:
        lines += ["", "About your files:", *[f"- {p}" for p in r.notes + r.problems]]
    row = board[0] if board else None
    if row is not None and row.bits_per_byte is None:
        lines += ["", f"Leaderboard: no entry: {row.why}"]
    out = {"score": r.total, "output": "\n".join(lines)[:MAX_OUTPUT_CHARS], "visibility": VISIBLE,
           "stdout_visibility": "hidden", "tests": tests}
    if seconds is not None:
        out["execution_time"] = round(seconds)
    if row is not None and row.bits_per_byte is not None:
        out["leaderboard"] = leaderboard.gradescope_entries(row)
    return out


# ---------------------------------------------------------------- the run


def has_files(folder: Path) -> bool:
    return any(p.is_file() or p.is_symlink() for p in folder.rglob("*"))


def stage(submission: Path, dest: Path) -> Path:
    """Copy the submission into `dest`/submission. Exercise modules uploaded loose (linear.py,
    … at the top, no minilm/ folder) are put into minilm/. Links are copied as links: the
    grader refuses to follow them."""
    if not submission.is_dir():
        raise AutograderError(f"the submission folder {submission} does not exist")
    if not has_files(submission):
        raise AutograderError(f"the submission folder {submission} is empty: nothing to grade")
    target = dest / "submission"
    names = {f"{m}.py" for m in tasks.EXERCISE_MODULES}
    packaged = any(submission.glob("minilm/*.py")) or any(submission.glob("*/minilm/*.py"))
    loose = [p for p in submission.iterdir() if p.name in names]
    if loose and not packaged:
        (target / "minilm").mkdir(parents=True)
        for p in loose:
            shutil.copy2(p, target / "minilm" / p.name, follow_symlinks=False)
    else:
        shutil.copytree(submission, target, symlinks=True)
    return target


def _writable(results: Path) -> None:
    try:
        results.mkdir(parents=True, exist_ok=True)
        probe = results / f".write-test-{os.getpid()}"
        probe.write_text("")
        probe.unlink()
    except OSError as e:
        raise AutograderError(f"cannot write results to {results} ({e.strerror or e})") from None


def write_results(results: Path, doc: dict) -> Path:
    """results.json, whole or not at all."""
    path, tmp = results / "results.json", None
    try:
        fd, name = tempfile.mkstemp(prefix=".results-", dir=results)
        tmp = Path(name)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(doc, f, indent=1, ensure_ascii=False)
        os.replace(tmp, path)
    except OSError as e:
        if tmp is not None:
            tmp.unlink(missing_ok=True)
        raise AutograderError(f"cannot write {path} ({e.strerror or e})") from None
    return path


def run(root: Path, submission: Path, results: Path, grader_args: list[str]) -> dict:
    t0 = time.monotonic()
    _writable(results)
    scratch = Path(tempfile.mkdtemp(prefix="minilm-gradescope-"))
    try:
        sub = stage(submission, scratch)
        out = scratch / "out"
        env = {**os.environ, "PYTHONPATH": str(tasks.ROOT)}
        env.pop("MINILM_IMPL", None)
        cmd = [sys.executable, "-m", "solutions.grading", str(sub), "--out", str(out), *grader_args]
        print("autograder: " + " ".join(shlex.quote(c) for c in cmd), flush=True)
        proc = subprocess.run(cmd, cwd=tasks.ROOT, env=env, stderr=subprocess.PIPE, text=True)
        sys.stderr.write(proc.stderr)
        if proc.returncode != 0:
            last = (proc.stderr.strip().splitlines() or [f"exit status {proc.returncode}"])[-1]
            raise AutograderError(f"the grader failed: {last[:300]}")
        try:
            grades = json.loads((out / "grades.json").read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            raise AutograderError(f"the grader wrote no readable grades.json ({e})") from None
        doc = results_json(grades, time.monotonic() - t0, leaderboard.read(out))
        write_results(results, doc)
        return doc
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    extra: list[str] = []
    if "--" in argv:
        i = argv.index("--")
        argv, extra = argv[:i], argv[i + 1:]
    p = argparse.ArgumentParser(prog=PROG, description=__doc__.splitlines()[0])
    p.add_argument("--root", type=Path, default=Path(os.environ.get("MINILM_AUTOGRADER_ROOT", "/autograder")),
                   help="laid out like /autograder: submission/ and results/ (default: $MINILM_AUTOGRADER_ROOT or "
                        "/autograder)")
    p.add_argument("--submission", type=Path, help="the student's files (default: ROOT/submission)")
    p.add_argument("--results", type=Path, help="where results.json goes (default: ROOT/results)")
    args = p.parse_args(argv)
    grader_args = shlex.split(os.environ.get("MINILM_GRADE_ARGS", "")) + extra
    try:
        doc = run(args.root, args.submission or args.root / "submission", args.results or args.root / "results",
                  grader_args)
    except AutograderError as e:
        print(f"autograder: {e}", file=sys.stderr)
        return 2
    print(f"autograder: {doc['score']} points; wrote {(args.results or args.root / 'results') / 'results.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
