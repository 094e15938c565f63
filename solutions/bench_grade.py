"""How much grading one submission costs over simply running the notebooks and the probes.

    python -m solutions.bench_grade                    # all notebooks, 2 cores
    python -m solutions.bench_grade --notebooks 01_linear 03_rmsnorm --repeat 3

Times, side by side on the same machine:
  plain  the instructor's own run: nbval over the notebooks (pytest-xdist, -n CORES) with the
         reference, then the reference on every task's probe inputs, notebook and hidden ones;
  grade  `minilm grade` of a submission made of the reference's modules, --jobs CORES
         (in the sandbox, with the worker's run and the trusted comparison).
and prints both and their ratio (the target is at most 1.5). With --repeat, the runs alternate
and the medians are compared, so a busy machine slows both alike.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from minilm.course import tasks
from minilm.course.nbenv import kernel_env

ROOT = tasks.ROOT
PROBES = ("from minilm.course import tasks; from solutions.grading import judge; "
          "[judge.expected(t, judge.make_cases(t, 1)[0]) for t in {ids!r}]")


def reference_submission(dest: Path) -> Path:
    """A student folder whose exercise modules are the reference's (they import each other
    relatively and import minilm.course.validate, so they work as minilm/<module>.py)."""
    pkg = dest / "reference" / "minilm"
    pkg.mkdir(parents=True)
    for module in tasks.EXERCISE_MODULES:
        shutil.copyfile(ROOT / "solutions" / f"{module}.py", pkg / f"{module}.py")
    return pkg.parent


def sandbox_args() -> list[str]:
    """Grade in the sandbox where one works here, else say so and grade without (timings only)."""
    from solutions.grading import sandbox

    try:
        sandbox.choose("auto")
        return []
    except sandbox.SandboxUnavailable:
        print("bench_grade: no sandbox here (bwrap or docker): timing the grader with --no-sandbox", flush=True)
        return ["--no-sandbox"]


def timed(cmd: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    r = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    if r.returncode != 0:
        sys.exit(f"failed ({r.returncode}): {' '.join(cmd)}\n{r.stdout[-2000:]}\n{r.stderr[-2000:]}")
    return elapsed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m solutions.bench_grade", description=__doc__.splitlines()[0])
    parser.add_argument("--notebooks", nargs="+", metavar="NAME", help="notebook names (default: all)")
    parser.add_argument("--cores", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args(argv)

    all_paths = tasks.course_notebooks()
    paths = [p for p in all_paths if not args.notebooks or any(p.stem.startswith(s) for s in args.notebooks)]
    stems = {p.stem for p in paths}
    graded = [t.id for t in tasks.TASKS if Path(t.notebook).stem in stems]
    env = {**os.environ, **kernel_env(), "PYTHONWARNINGS": "ignore::DeprecationWarning"}
    env.pop("MINILM_IMPL", None)
    ref_env = {**env, "MINILM_IMPL": "solutions"}
    xdist = ["-n", str(args.cores), "--dist", "loadscope"] if args.cores > 1 else []
    plain_nb = [sys.executable, "-m", "pytest", *map(str, paths), *xdist, "-q", "-p", "no:cacheprovider"]
    plain_hidden = [sys.executable, "-c", PROBES.format(ids=graded)]

    with tempfile.TemporaryDirectory(prefix="bench-grade-") as tmp:
        tmp = Path(tmp)
        sub = reference_submission(tmp)
        grade = [sys.executable, "-m", "solutions.grading", str(sub), "--jobs", str(args.cores), "--out",
                 str(tmp / "out"),
                 "--notebooks", *sorted(stems), *sandbox_args()]
        plains, grades = [], []
        for i in range(args.repeat):
            nb, hid = timed(plain_nb, ref_env), timed(plain_hidden, ref_env)
            plains.append(nb + hid)
            grades.append(timed(grade, env))
            result = json.loads((tmp / "out" / "grades.json").read_text(encoding="utf-8"))["students"][0]
            if result["total"] != result["max"]:
                sys.exit(f"the reference earned {result['total']}/{result['max']}: see {tmp / 'out' / 'feedback'}")
            print(f"run {i + 1}: plain {nb:.1f} s notebooks + {hid:.1f} s probes = {nb + hid:.1f} s; "
                  f"grade {grades[-1]:.1f} s", flush=True)
    plain, graded_s = statistics.median(plains), statistics.median(grades)
    print(f"{len(paths)} notebooks, {len(graded)} tasks, {args.cores} cores")
    print(f"plain nbval + probes:       {plain:.1f} s")
    print(f"minilm grade:     {graded_s:.1f} s")
    print(f"ratio: {graded_s / plain:.2f} (target ≤ 1.50)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
