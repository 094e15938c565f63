"""Grade submissions: every point decided outside the submission's processes (instructors).

    minilm grade alice/ bob.zip https://github.com/org/carol.git --out grades/
    minilm grade subs/* --notebooks 01_linear 03_rmsnorm --tasks 1.1 3.1 --jobs 4
    minilm grade subs/* --shard 2/8 --out shard-2/ && minilm grade --merge grades/ shard-*/

A submission is a directory, a .zip or a git URL holding a `minilm` package (at the top or one
folder down). Only its exercise modules are used. For each submission, in a sandbox of its own
(see solutions/grading/sandbox.py) holding a fresh copy of the course's provided files and its
modules, and nothing else:
  1. the worker runs each task's code on the notebook's inputs and on hidden inputs drawn from
     a seed chosen now, and writes the outputs as plain tensors;
  2. this process (which never imports a submission) computes the reference's outputs on the
     same inputs and compares, with the worker dead;
  3. nbval runs each graded notebook in which a task can still earn its points. A task earns its points
when its code keeps the course's from-scratch rules, its outputs match on every input, and its
notebook check cells reproduce their stored lines. nbval's report can cost points, never earn
them. Grades and feedback are written here, from trusted text only.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import dataclasses
import hashlib
import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from minilm.course import tasks
from minilm.course.cells import cell_position, check_cells
from minilm.course.cli import Parser, summary
from solutions.grading import judge, leaderboard, lms, notebooks, reports, sandbox, shards, submissions
from solutions.grading.results import SKIPPED, CellResult, StudentGrade, TaskGrade
from solutions.grading.submissions import GradeError, Submission, SubmissionError, given_name, resolve

PROG = "minilm grade"
COURSE = tasks.ROOT
DATA_VARS = ("TIKTOKEN_CACHE_DIR", "MINILM_TINYSHAKESPEARE")  # offline copies the notebooks may read


@dataclasses.dataclass
class Plan:
    notebooks: dict[str, bytes]  # stem → pristine notebook
    cells: dict[str, dict[int, list[str]]]  # stem → check cell → graded task ids
    task_ids: list[str]
    box: sandbox.Sandbox
    hidden: bool
    cell_timeout: float
    task_timeout: float  # one task's run on the grader's inputs, in the worker
    timeout: float
    workers: int
    scratch: Path
    seed: int | None = None  # fixed hidden seed (tests); None: a fresh secret per submission

    @property
    def max_points(self) -> int:
        return sum(tasks.get(t).points for t in self.task_ids)


def make_plan(args, box: sandbox.Sandbox, scratch: Path) -> tuple[Plan, list[str]]:
    notes = []
    wanted = [tasks.get(t).id for t in args.tasks] if args.tasks else None
    if args.notebooks is None and wanted:
        paths = sorted({COURSE / tasks.get(t).notebook for t in wanted})
    else:
        paths = notebooks.select(args.notebooks)
    missing = [p for p in paths if not p.exists()]
    if missing or not paths:
        what = missing[0].relative_to(COURSE) if missing else "notebooks/ is empty"
        raise GradeError(f"no notebook to grade: {what}")
    stems = {p.stem for p in paths}
    if wanted is None:
        wanted = [t.id for t in tasks.TASKS if Path(t.notebook).stem in stems]
        absent = [t.id for t in tasks.TASKS if Path(t.notebook).stem not in stems]
        if absent and not args.notebooks:
            notes.append(f"not graded (their notebooks do not exist yet): tasks {', '.join(absent)}")
    try:
        nbs = {p.stem: notebooks.pristine_notebook(p) for p in paths}
    except notebooks.NotebookError as e:
        raise GradeError(str(e)) from None
    cells = {}
    for stem, data in nbs.items():
        by_cell = check_cells(json.loads(data))
        cells[stem] = {i: [t for t in ids if t in wanted] for i, ids in by_cell.items() if set(ids) & set(wanted)}
    covered = {t for by_cell in cells.values() for ids in by_cell.values() for t in ids}
    unchecked = [t for t in wanted if t not in covered]
    if unchecked:
        raise GradeError(f"no check cell for task(s) {', '.join(unchecked)} in the notebooks graded "
                         f"({', '.join(sorted(stems))}): add the task's notebook with --notebooks")
    task_timeout = args.task_timeout if args.task_timeout is not None else args.cell_timeout
    return Plan(nbs, cells, wanted, box, not args.no_hidden, args.cell_timeout, task_timeout, args.timeout, 1, scratch,
                args.seed), notes


# ---------------------------------------------------------------- one submission


def _ignore(directory, names):
    skip = {"__pycache__", ".ipynb_checkpoints", ".pytest_cache", ".hypothesis"}
    if Path(directory).resolve() == tasks.PACKAGE_DIR:
        skip |= {f"{m}.py" for m in tasks.EXERCISE_MODULES}
    return [n for n in names if n in skip or n.endswith(".pyc")]


def copy_package(sub: Submission, ws: Path) -> None:
    """The course's provided package, pristine, with the submission's exercise modules."""
    shutil.copytree(tasks.PACKAGE_DIR, ws / "minilm", ignore=_ignore)
    for module, data in sub.modules.items():
        (ws / "minilm" / f"{module}.py").write_bytes(data)


def build_workspace(plan: Plan, sub: Submission, ws: Path, cases: dict) -> None:
    """A fresh workspace made here from the course's pristine files, never reused: the provided
    modules, the submission's exercise modules, the graded notebooks and the probe inputs."""
    import torch

    copy_package(sub, ws)
    (ws / "notebooks").mkdir()
    for f in (COURSE / "notebooks").iterdir():  # sanitize.cfg and anything else the notebooks read
        if f.is_file() and f.suffix != ".ipynb":
            shutil.copy2(f, ws / "notebooks" / f.name)
    for stem, data in plan.notebooks.items():
        (ws / "notebooks" / f"{stem}.ipynb").write_bytes(data)
    for name in ("conftest.py", "pyproject.toml"):
        if (COURSE / name).exists():
            shutil.copy2(COURSE / name, ws / name)
    torch.save(cases, ws / "cases.pt")


# What every submission's run needs, imported once in an empty workspace before any is graded.
PREFLIGHT = "import torch, einops, jaxtyping, numpy, nbval, minilm.course.validate, minilm.course.sandboxed.worker"


def preflight_key(box: sandbox.Sandbox) -> str | None:
    """What the preflight's verdict depends on: the sandbox, its limits and its Python (the docker image's id;
    else the interpreter, and the folders this one imports from, whose times change when a package is added or
    removed), and the grader's and the sandboxed side's code. None: the preflight runs (no image to name, or an
    interpreter other than the grader's own, whose folders this process does not see)."""
    if box.kind != "docker" and os.path.abspath(box.python) != sandbox.python():
        return None
    if box.kind == "docker":
        r = subprocess.run(["docker", "image", "inspect", "-f", "{{.Id}}", sandbox.IMAGE], capture_output=True,
                           text=True, timeout=60)
        if r.returncode != 0:
            return None
        python = [r.stdout.strip()]
    else:
        exe = sandbox.python()  # as started, not resolved: a venv's python links to its base interpreter
        # The course's own folder is left out: where it lies does not change what the sandbox's Python can import
        # (each workspace gets a copy of its files, whose code is hashed below), and Gradescope's runs each unpack
        # it somewhere new.
        python = [exe, os.stat(exe).st_mtime_ns, *((p, os.stat(p).st_mtime_ns) for p in sys.path
                                                   if os.path.isdir(p) and Path(p).resolve() != COURSE.resolve())]
    code = sorted([*(COURSE / "solutions" / "grading").glob("*.py"), *(tasks.PACKAGE_DIR / "course" / "sandboxed").glob(
        "*.py"), tasks.PACKAGE_DIR / "course" / "validate.py"])
    h = hashlib.sha256(json.dumps([box.kind, box.memory_mb, box.tmp_mb, python], default=str).encode())
    for path in code:
        h.update(path.read_bytes())
    return h.hexdigest()[:32]


def _preflight_stamp(key: str | None) -> Path | None:
    try:
        cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    except (RuntimeError, KeyError):  # no home to keep a cache in: the preflight runs every time
        return None
    return cache / "minilm" / "preflight" / key if key else None


def preflight(box: sandbox.Sandbox, scratch: Path) -> None:
    """Stop before grading a batch into zeros when the sandbox's Python cannot run the course. Once it could,
    the same sandbox and Python (preflight_key) are not asked again: it costs seconds in every run."""
    stamp = _preflight_stamp(preflight_key(box))
    if stamp is not None and stamp.is_file():
        return
    _preflight(box, scratch)
    if stamp is not None:
        try:
            stamp.parent.mkdir(parents=True, exist_ok=True)
            stamp.touch()
        except OSError:  # a read-only cache folder: the next run asks again
            pass


def _preflight(box: sandbox.Sandbox, scratch: Path) -> None:
    home = scratch / "preflight"
    ws, out = home / "ws", home / "out"
    ws.mkdir(parents=True)
    out.mkdir()
    shutil.copytree(tasks.PACKAGE_DIR, ws / "minilm", ignore=_ignore)
    box.prepare(ws, out, 0)
    log = home / "log"
    run = sandbox.run(box, ("-c", PREFLIGHT), ws, out, box.env({}, ws, out), 0, timeout=300, log=log)
    if run.returncode != 0:
        lines = [ln for ln in log.read_text(errors="replace").splitlines() if ln.strip()]
        missing = next((ln for ln in reversed(lines) if "Error" in ln), lines[-1] if lines else "no output")
        what = "torch" if "torch" in missing else "the course"
        raise GradeError(f"the sandbox's Python ({box.kind}: {sandbox.IMAGE if box.kind == 'docker' else box.python}) "
                         f"cannot import {what}: {missing.strip()[:300]}"
                         + (" (ran over 300 s)" if run.returncode is None else ""))


def lost_tasks(verdicts: dict[str, judge.TaskResult], rules: dict[str, list[str]]) -> set[str]:
    """The tasks that have lost their points before nbval runs: nbval can only cost points, so their
    check cells are not run (a hanging task's would each cost the cell's whole time limit). A task has
    lost them once it broke a rule or failed on the notebook's own inputs; a failure on a hidden input
    does not count here, as skipping would then tell it before grades are published."""
    return {t for t, v in verdicts.items() if rules.get(t) or not (v.ok or v.hidden)}


def notebooks_to_run(cells: dict[str, dict[int, list[str]]], verdicts: dict[str, judge.TaskResult],
                     rules: dict[str, list[str]]) -> list[str]:
    """A notebook none of whose graded tasks can still earn their points is not run (lost_tasks)."""
    lost = lost_tasks(verdicts, rules)
    return [stem for stem, by_cell in cells.items() if any(set(ids) - lost for ids in by_cell.values())]


def grade_one(plan: Plan, sub: Submission, slot: int) -> StudentGrade:
    t0 = time.monotonic()
    home = plan.scratch / f"s{slot}"
    # Each sandboxed run gets a results folder of its own: the notebooks' run (which imports the
    # submission again) never sees, let alone rewrites, the worker's outputs.
    ws, out, nb_out = home / "ws", home / "out", home / "nbval-out"
    ws.mkdir(parents=True)
    out.mkdir()
    nb_out.mkdir()
    rules = lint(sub)  # before the workspace: a module that does not parse is graded as the stub
    seed = plan.seed if plan.seed is not None else secrets.randbits(62)
    case_sets = {t: judge.make_cases(t, seed if plan.hidden else None) for t in plan.task_ids}
    build_workspace(plan, sub, ws, {"tasks": plan.task_ids, "cases": {t: c for t, (c, _) in case_sets.items()},
                                    "visible": {t: n for t, (_, n) in case_sets.items()}})
    box = plan.box
    box.prepare(ws, out, slot)
    box.prepare(ws, nb_out, slot)
    extra = {"MINILM_IMPL": "minilm", "TQDM_DISABLE": "1", "PYTHONWARNINGS": "ignore::DeprecationWarning"}
    inside_ws = str(ws) if box.same_paths else sandbox.WS
    problems = []
    per_task = plan.task_timeout
    inside_out = str(out) if box.same_paths else sandbox.OUT
    worker = sandbox.run(box,
                         ("-m", "minilm.course.sandboxed.worker", f"{inside_ws}/cases.pt", inside_out, f"{per_task:g}",
                               *([] if box.unsandboxed else ["--sandboxed"])),
                         ws, out, box.env(extra, ws, out), slot,
                         timeout=min(plan.timeout, 60 + per_task * len(plan.task_ids)), log=home / "worker.log")
    if worker.wrote_too_much:
        problems.append(f"your code wrote over {sandbox.WRITE_MAX_BYTES // 2**20} MB or {sandbox.WRITE_MAX_FILES:,} "
                        "files while the grader's inputs were run: it was stopped")
    elif worker.returncode is None:
        problems.append("your code ran over the time limit while the grader's inputs were run")
    # The worker is dead: judge what it left, as data, before anything else of the submission's runs. A task
    # whose run called a refused built-in was stopped there: the recorder's refusal is its verdict.
    # A refusal on a hidden input (after the notebook's inputs' outputs came back) is a failure there, told only
    # once grades are published, like any other.
    verdicts = {}
    for t in plan.task_ids:
        refusal = judge.load_refusal(out, t)
        on_hidden = refusal is not None and case_sets[t][1] < len(case_sets[t][0]) and (out / f"{t}.pt").is_file()
        if refusal is not None and not on_hidden:
            rules.setdefault(t, []).insert(0, refusal)
            verdicts[t] = judge.TaskResult(t, False, "stopped by the from-scratch rule on the notebook's inputs")
        elif refusal is not None:
            verdicts[t] = judge.TaskResult(t, False, refusal, hidden=True)
        else:
            verdicts[t] = judge.judge_task(t, case_sets[t][0], case_sets[t][1],
                                           judge.load_task_results(out, t, len(case_sets[t][0]), case_sets[t][1]))
    stems = notebooks_to_run(plan.cells, verdicts, rules)
    lost = lost_tasks(verdicts, rules)
    cells = {}
    if stems:
        many = plan.workers > 1 and len(stems) > 1
        xdist = ["-n", str(min(plan.workers, len(stems))), "--dist", "loadscope"] if many else ["-p", "no:xdist"]
        inside_nb_out = str(nb_out) if box.same_paths else sandbox.OUT
        # hypothesis's and jaxtyping's pytest plugins: a second of start-up per submission, unused
        argv = ("-m", "pytest", "-p", "no:cacheprovider", "-p", "no:hypothesispytest", "-p", "no:jaxtyping",
                "-p", "minilm.course.sandboxed.nbval_plugin", "-q", "--color=no",
                *[f"notebooks/{s}.ipynb" for s in stems], f"--nbval-cell-timeout={plan.cell_timeout:g}",
                f"--junitxml={inside_nb_out}/nbval.xml", *xdist)
        # Its plugin leaves out the check cells of the lost tasks (which the submission could run anyway: a cell can
        # only cost points, and a lost task's cells are not read).
        env = box.env({**extra, "MINILM_LOST_TASKS": " ".join(sorted(lost))}, ws, nb_out)
        nbval = sandbox.run(box, argv, ws, nb_out, env, slot,
                            timeout=max(1.0, plan.timeout - worker.seconds), log=home / "nbval.log")
        if nbval.wrote_too_much:
            problems.append(f"the notebooks wrote over {sandbox.WRITE_MAX_BYTES // 2**20} MB or "
                            f"{sandbox.WRITE_MAX_FILES:,} files: they were stopped")
        elif nbval.returncode is None:
            problems.append(f"the notebooks ran over the {plan.timeout:g}-second limit for one submission")
        unlimited = sorted(set(worker.unlimited) | set(nbval.unlimited))
        # Every sandboxed process is dead now: read what they left, as data.
        cells = notebooks.parse_junit(nb_out / "nbval.xml")
    else:
        unlimited = sorted(worker.unlimited)
    nb_json = {stem: json.loads(data) for stem, data in plan.notebooks.items()}
    by_task = {}
    for task_id in plan.task_ids:
        task = tasks.get(task_id)
        verdict = verdicts[task_id]
        mine = [cells.get((stem, i), notebooks.Cell(stem, i, "not run" if stem in stems and set(ids) - lost
                                                    else SKIPPED))
                for stem, by_cell in plan.cells.items() for i, ids in by_cell.items() if task_id in ids]
        broken_rule = rules.get(task_id, [])
        ok = verdict.ok and not broken_rule and all(c.status == "passed" for c in mine)
        by_task[task_id] = TaskGrade(task.points if ok else 0, task.points, verdict.message, verdict.mistake,
                                     verdict.hidden, verdict.ok, broken_rule,
                                     [CellResult(c.notebook, c.number, c.status,
                                                 cell_position(nb_json[c.notebook], c.number))
                                      for c in mine])
    if not plan.hidden:
        problems.append("graded without hidden inputs (--no-hidden): notebook inputs only")
    return StudentGrade(sub.name, sub.source, sum(r.points for r in by_task.values()), plan.max_points, by_task,
                        box.unsandboxed, sub.notes, problems, round(time.monotonic() - t0, 1), box.kind, unlimited)


LINT_SECONDS, LINT_MEMORY_MB = 60, 2048  # the lint takes well under a second and 100 MB on any honest submission


def lint(sub: Submission) -> dict[str, list[str]]:
    """The from-scratch rule's lint (minilm/course/rules/lint.py) on the submission's source, parsed and never run,
    in a process of its own with limits on its time and memory: what a parse of the student's bytes costs is
    theirs alone. Modules that do not parse are graded as the stub from here on, with a note."""
    sources = {m: data.decode("utf-8") for m, data in sub.modules.items() if m not in sub.broken}

    def limit():
        import resource

        resource.setrlimit(resource.RLIMIT_AS, (LINT_MEMORY_MB * 2**20,) * 2)

    found = None
    try:
        r = subprocess.run([sys.executable, "-m", "minilm.course.rules.lint"], input=json.dumps(sources),
                           capture_output=True, text=True, timeout=LINT_SECONDS, cwd=COURSE,
                           preexec_fn=limit if os.name == "posix" else None)
        found = json.loads(r.stdout) if r.returncode == 0 else None
    except (subprocess.TimeoutExpired, ValueError, OSError):
        pass
    if not isinstance(found, dict) or not isinstance(found.get("tasks"), dict):
        why = (f"could not be read: the from-scratch lint did not finish within {LINT_SECONDS} s and "
               f"{LINT_MEMORY_MB} MB on this code")
        return {t.id: [why] for t in tasks.TASKS if t.module in sources}
    for module, why in dict(found.get("unparsable") or {}).items():
        if module in sources:
            submissions.use_stub(sub, module, f"{str(why)[:200]}: graded as the stub")
    known = {t.id for t in tasks.TASKS}
    return {t: [" ".join(str(m).split())[:300] for m in list(ms)[:3]] for t, ms in found["tasks"].items()
            if t in known and isinstance(ms, list)}


def failed_submission(name: str, source: str, why: str, plan: Plan) -> StudentGrade:
    by_task = {t: TaskGrade(0, tasks.get(t).points, why) for t in plan.task_ids}
    return StudentGrade(name, source, 0, plan.max_points, by_task, plan.box.unsandboxed, [why])


# ---------------------------------------------------------------- command line


def parser(prog: str = PROG) -> argparse.ArgumentParser:
    p = Parser(prog=prog, description=summary(__doc__),
               formatter_class=argparse.RawDescriptionHelpFormatter,
               epilog="\n".join(__doc__.splitlines()[2:4]))
    p.add_argument("submissions", nargs="*", metavar="SUBMISSION", help="directories, .zip files or git URLs")
    p.add_argument("--out", type=Path, default=Path("grades"), help="where grades.csv, grades.json and feedback/ go")
    p.add_argument("--notebooks", nargs="+", metavar="NAME",
                   help="grade only these notebooks (names or number prefixes)")
    p.add_argument("--tasks", nargs="+", metavar="ID", help="grade only these tasks")
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="CPU cores to use (default: all)")
    p.add_argument("--workers", type=int, help="nbval workers per submission (default: from --jobs)")
    p.add_argument("--cell-timeout", type=float, default=300, help="seconds per notebook cell")
    p.add_argument("--task-timeout", type=float,
                   help="seconds per task on the grader's inputs (default: --cell-timeout); a hang costs this once")
    p.add_argument("--timeout", type=float, default=3600, help="seconds per submission, all in all")
    p.add_argument("--memory-mb", type=int, default=4096, help="address-space limit per sandboxed process")
    p.add_argument("--sandbox", choices=("auto", "bwrap", "docker", "setpriv"), default="auto",
                   help="how to isolate each submission (default: bwrap where it works, else docker, else, as root, "
                        "setpriv: an unprivileged uid without namespaces)")
    p.add_argument("--no-sandbox", action="store_true",
                   help="run submissions without a sandbox (only for code you trust; every report says UNSANDBOXED)")
    p.add_argument("--no-hidden", action="store_true", help="only the notebook's inputs, no hidden ones")
    p.add_argument("--allow-ssh", action="store_true", help="also fetch git submissions over ssh (default: https only)")
    p.add_argument("--require-all", action="store_true", help="exit 1 unless every graded task earned its points")
    p.add_argument("--keep", action="store_true", help="keep the workspaces and logs (printed at the end)")
    p.add_argument("--lms", choices=lms.LMS, help="also write gradebook-<LMS>.csv for an LMS import (needs --roster)")
    p.add_argument("--roster", type=Path, metavar="CSV",
                   help="with --lms: a CSV with columns submission,lms_id (and optionally name, section, sis_id, "
                        "sis_login)")
    p.add_argument("--shard", metavar="K/N",
                   help="grade only shard K of N: the submissions whose names hash to K (the same share on every "
                        "machine, in any order); OUT gets shard.json for --merge")
    p.add_argument("--merge", type=Path, metavar="OUT",
                   help="join the output folders of every --shard K/N run (given as SUBMISSION…) into OUT: the "
                        "grades.csv, grades.json, feedback/ (and, with --lms, gradebook) one whole run writes")
    p.add_argument("--leaderboard", action="store_true",
                   help="also train each submission's model with its own code in the sandbox and write its bits per "
                        "byte, measured by the reference, to leaderboard.csv (never points)")
    p.add_argument("--leaderboard-train", default=leaderboard.DEFAULT_TRAIN, metavar="ARGS",
                   help=f"with --leaderboard: `minilm train`'s arguments (default: {leaderboard.DEFAULT_TRAIN}; the "
                        "seed, one thread and no compiling are fixed)")
    p.add_argument("--seed", type=int, help=argparse.SUPPRESS)  # tests: a fixed hidden seed
    return p


def main(argv: list[str] | None = None, prog: str = PROG) -> int:
    args = parser(prog).parse_args(argv)
    if args.merge is not None:
        return merge(args)
    if not args.submissions:
        parser(prog).error("give at least one submission (a directory, a .zip or a git URL)")
    try:
        args.shard = shards.parse(args.shard) if args.shard is not None else None
    except shards.ShardError as e:
        print(f"grade: {e}", file=sys.stderr)
        return 2
    for t in args.tasks or []:
        try:
            tasks.get(t)
        except ValueError as e:
            parser(prog).error(str(e))
    check_lms_args(args, prog)
    if args.leaderboard:
        try:
            args.leaderboard_train = leaderboard.train_args(args.leaderboard_train)
        except ValueError as e:
            print(f"grade: {e}", file=sys.stderr)
            return 2
    if not judge.reference_available():
        print("grade: grading needs the reference implementation (solutions/), which only the instructor's "
              "edition has. To see where you stand, run `minilm status`.", file=sys.stderr)
        return 2
    try:
        box = sandbox.Sandbox("none" if args.no_sandbox else sandbox.choose(args.sandbox),
                              {v: os.environ[v] for v in DATA_VARS if os.environ.get(v)
                               and os.path.exists(os.environ[v])},
                              args.memory_mb)
    except sandbox.SandboxUnavailable as e:
        print(f"grade: {e}", file=sys.stderr)
        return 2
    scratch = Path(tempfile.mkdtemp(prefix="minilm-grade-"))
    os.chmod(scratch, 0o711)  # the sandbox's uids reach their own folders, and list none
    try:
        return _grade_all(args, box, scratch)
    except GradeError as e:
        print(f"grade: {e}", file=sys.stderr)
        return 2
    finally:
        if args.keep:
            print(f"workspaces and logs kept in {scratch}")
        else:
            shutil.rmtree(scratch, ignore_errors=True)


def check_lms_args(args, prog: str) -> None:
    if (args.lms is None) != (args.roster is None):
        parser(prog).error("--lms and --roster go together: --lms canvas|moodle --roster ROSTER.csv")


def read_roster(args) -> list[lms.Student] | None:
    try:  # a bad roster is one line before any grading, and nothing is written
        return lms.read_roster(args.roster) if args.lms else None
    except lms.RosterError as e:
        raise GradeError(str(e)) from None


def writable(out: Path, flag: str) -> bool:
    """Make `out` and check it takes a file, or raise GradeError in one line; whether it existed before."""
    existed = out.exists()
    try:  # fail before any grading, with one line, when the results cannot be written
        out.mkdir(parents=True, exist_ok=True)
        probe = out / f".write-test-{os.getpid()}"
        probe.write_text("", encoding="utf-8")
        probe.unlink()
    except OSError as e:
        raise GradeError(f"{flag} {out}: cannot write there ({e.strerror or e})") from None
    return existed


def publish(out: Path, run: dict, ordered: list[StudentGrade], lms_kind: str | None,
            roster: list[lms.Student] | None, board: list[leaderboard.Row] | None = None) -> None:
    """A run's outputs, from a whole run or merged shards alike: grades.csv, grades.json, feedback/ and, with a
    roster, the LMS gradebook; with a leaderboard, leaderboard.csv and .json."""
    reports.write(out, run, ordered)
    print(f"grade: wrote {out / 'grades.csv'}, {out / 'grades.json'} and {out / 'feedback'}/")
    if board is not None:
        leaderboard.write(out, board)
        print(f"grade: wrote {out / 'leaderboard.csv'} ({sum(r.bits_per_byte is not None for r in board)} rows)")
    if roster is not None:
        book = out / f"gradebook-{lms_kind}.csv"
        absent = lms.write(book, lms_kind, list(run["tasks"]), ordered, roster)
        print(f"grade: wrote {book} ({len(roster)} students)")
        if absent:
            print(f"grade: no submission, 0 points: {', '.join(absent)}")


def merge(args) -> int:
    """`--merge OUT SHARD…`: every shard's grades, checked to be one run's shares, written as one run writes them.
    Any problem is one line, before anything is written."""
    check_lms_args(args, PROG)
    if args.shard is not None:
        print("grade: --merge takes the shards' folders; --shard is for grading one of them", file=sys.stderr)
        return 2
    try:
        roster = read_roster(args)
        class_names, run, ordered = shards.read([Path(s) for s in args.submissions])
        boards = [leaderboard.read(Path(s)) for s in args.submissions]
        if any(b is None for b in boards) != all(b is None for b in boards):
            raise GradeError("--merge: some shards have a leaderboard and some have none: grade every shard with "
                             "--leaderboard or none")
        rows = {r.student: r for b in boards for r in b or []}
        board = None if boards[0] is None else [rows[name] for name in class_names if name in rows]
        if roster is not None:
            try:
                lms.check_submissions(roster, class_names, args.roster)
            except lms.RosterError as e:
                raise GradeError(str(e)) from None
        writable(args.merge, "--merge")
    except (shards.ShardError, GradeError) as e:
        print(f"grade: {e}", file=sys.stderr)
        return 2
    publish(args.merge, run, ordered, args.lms, roster, board)
    print(f"grade: merged {len(args.submissions)} shards, {len(ordered)} submissions")
    return 0


def train_for_leaderboard(args, plan: Plan, subs: list[Submission], names: list[str],
                          failed: list[tuple[str, str, str]]) -> list[leaderboard.Row]:
    """Each submission's model trained by its own code in its sandbox, one at a time (its speed is this machine's),
    and measured here by the reference (solutions/grading/leaderboard.py)."""
    from minilm.course.train.options import build_parser, validate

    parsed = build_parser().parse_args(args.leaderboard_train)
    validate(parsed, build_parser())
    timeout = (parsed.budget_s * 1.5 + 300) if parsed.budget_s else plan.timeout
    rows = {name: leaderboard.Row(name, why=why) for name, _, why in failed}
    for i, sub in enumerate(subs):
        row = leaderboard.one(plan.box, sub, plan.scratch / f"leaderboard-{i}", args.leaderboard_train, i, timeout,
                              lambda ws, sub=sub: copy_package(sub, ws))
        rows[sub.name] = row
        print(f"  {sub.name}: " + (f"{row.bits_per_byte:.4f} bits per byte ({row.tokens_per_s:,.0f} reference "
                                   "tokens/s here)" if row.bits_per_byte is not None else f"no leaderboard row: "
                                                                                          f"{row.why}"), flush=True)
    return [rows[name] for name in names]


def _grade_all(args, box: sandbox.Sandbox, scratch: Path) -> int:
    plan, notes = make_plan(args, box, scratch)
    roster = read_roster(args)
    out_existed = writable(args.out, "--out")
    names = [given_name(arg) for arg in args.submissions]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:  # before any grading: which of two "bob"s is bob is the instructor's call, not the grader's
        clash = "; ".join(f"{n}: {', '.join(a for a, m in zip(args.submissions, names) if m == n)}" for n in twice)
        raise GradeError(f"two submissions have the same name ({clash}): rename one (a submission is named after "
                         "the folder, file or repository given here)")
    class_names = names
    if args.shard is not None:  # this shard's share, by name: the same on every machine, in any order
        k, n = args.shard
        mine = [i for i, name in enumerate(names) if shards.shard_of(name, n) == k]
        args.submissions, names = [args.submissions[i] for i in mine], [names[i] for i in mine]
    subs, failed = [], []
    for i, (arg, name) in enumerate(zip(args.submissions, names)):
        try:
            sub = resolve(arg, scratch / "fetch" / str(i), allow_ssh=args.allow_ssh)
        except SubmissionError as e:
            sub, why = None, str(e)
        except Exception as e:  # noqa: BLE001 - one submission that cannot be read is its own problem only
            sub, why = None, f"could not be read ({type(e).__name__}: {str(e)[:150]})"
        if sub is None:
            failed.append((name, arg, why))
        else:
            sub.name = name
            subs.append(sub)
    if roster is not None:
        try:
            lms.check_submissions(roster, class_names, args.roster)
        except lms.RosterError as e:
            if not out_existed:
                try:
                    args.out.rmdir()  # the empty folder made above, and only if still empty
                except OSError:
                    pass
            raise GradeError(str(e)) from None
    preflight(box, scratch)
    jobs = max(1, args.jobs)
    concurrent_subs = max(1, min(len(subs), jobs))
    judge.judging_threads = concurrent_subs
    plan.workers = args.workers or max(1, jobs // concurrent_subs)
    box.cpus = float(plan.workers)  # each submission's share of the cores: a CPU hog costs only its own time
    if box.kind == "setpriv":
        print("grade: setpriv: each submission runs as an unprivileged uid of its own, without namespaces: "
              "no network (a seccomp filter allows unix sockets only); any file on this machine that every user "
              "may read, it may read", flush=True)
    if box.unsandboxed:
        print("grade: UNSANDBOXED: submissions run with your own rights (--no-sandbox)", flush=True)
    for note in notes:
        print(f"grade: {note}")
    print(f"grade: {len(args.submissions)} submission(s) on {', '.join(plan.notebooks)}; sandbox: {box.kind}",
          flush=True)
    results = {name: failed_submission(name, src, why, plan) for name, src, why in failed}
    with concurrent.futures.ThreadPoolExecutor(concurrent_subs) as pool:
        futures = {pool.submit(grade_one, plan, s, i): s for i, s in enumerate(subs)}
        for f in concurrent.futures.as_completed(futures):
            s = futures[f]
            try:
                r = f.result()
            except Exception as e:  # noqa: BLE001 - nothing in one submission may stop the batch
                r = failed_submission(s.name, s.source,
                                      f"the grader failed on this submission ({type(e).__name__}: {e})",
                                      plan)
            results[r.student] = r
            print(f"  {r.student}: {r.total}/{r.max} points ({r.seconds:.0f} s)", flush=True)
    ordered = [results[n] for n in names]
    unlimited = sorted({c for r in ordered for c in r.limits_not_applied})
    if unlimited:
        print(f"grade: this machine applied no cgroup limit on {', '.join(unlimited)} (each process keeps its "
              f"{args.memory_mb} MB address-space limit)", flush=True)
    board = train_for_leaderboard(args, plan, subs, names, failed) if args.leaderboard else None
    # A shard's gradebook is --merge's to write: the roster was checked against the whole class above.
    publish(args.out, reports.header(plan), ordered, args.lms, None if args.shard else roster, board)
    if args.shard is not None:
        shards.write_manifest(args.out, shards.manifest(*args.shard, plan, class_names, names))
        print(f"grade: shard {args.shard[0]}/{args.shard[1]}: {len(names)} of {len(class_names)} submissions; "
              f"join every shard with --merge")
    if args.require_all and any(r.total < r.max for r in ordered):
        for r in ordered:
            if r.total < r.max:
                print(reports.feedback(r))
        return 1
    return 0
