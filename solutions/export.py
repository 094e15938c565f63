"""Export the course's grading to where grades go now (instructors).

    minilm export gradescope minilm-autograder.zip   # Gradescope's autograder bundle
    minilm export verify minilm-autograder.zip       # check a bundle before uploading it
    minilm export classroom50 autograders/minilm     # Classroom 50's autograder.py

- **gradescope**: a zip with `setup.sh` (CPU PyTorch, bubblewrap, setpriv, the course installed),
  `run_autograder`, `autograder.py`, `MANIFEST.json` and `course/`: the course with the
  reference and the grader's hidden inputs (solutions/). The grader runs as it does here,
  with its own sandbox for the student's code inside Gradescope's container, and its result
  becomes results.json (solutions/grading/gradescope.py says how, and what students see when).
  The zip is written whole or not at all, and read back against its manifest.
- **classroom50**: a folder holding one `autograder.py` for Classroom 50
  (CLASSROOM/autograders/ASSIGNMENT/). It runs the visible checks (`minilm check`)
  in the student's repository and writes Classroom 50's result.json with one test per task.
  Classroom 50 publishes autograder bundles where students can read them, so it holds no
  reference and no hidden inputs (checked before it is written), and its scores are the
  visible checks', run in the student's own repository: their code could forge them. The
  grade that counts comes from Gradescope or `minilm grade`.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shlex
import shutil
import stat
import sys
import tempfile
import zipfile
from pathlib import Path

from minilm.course import tasks
from minilm.course.cli import Parser, summary
from solutions import make_stubs, release
from solutions.grading import leaderboard

ROOT = tasks.ROOT
TORCH = release.TORCH
CPU_INDEX = release.CPU_TORCH
COURSE_DIR = "course"
MANIFEST = "MANIFEST.json"
ROOT_FILES = ("setup.sh", "run_autograder", "autograder.py", MANIFEST)
EXECUTABLE = ("setup.sh", "run_autograder", "autograder.py")
SKIP_PARTS = {"__pycache__", ".ipynb_checkpoints", ".pytest_cache", ".hypothesis", "tests"}


class ExportError(Exception):
    pass


# ---------------------------------------------------------------- Gradescope


SETUP_SH = f"""#!/usr/bin/env bash
# minilm's Gradescope autograder: setup.sh, run once as root when Gradescope builds the image.
# Installs bubblewrap (the grader sandboxes each submission inside Gradescope's container) and
# setpriv (util-linux: where the container forbids namespaces, it drops the submission's code to
# an unprivileged uid instead, and the course folder, readable by root only, is closed to it;
# libseccomp2 for its network filter),
# CPU-only PyTorch ({TORCH}, from PyTorch's CPU index: no multi-GB CUDA build), the course
# with its test dependencies (editable, so the grader finds its notebooks and solutions/),
# and the offline copies of the GPT-2 tokenizer and Tiny Shakespeare that notebooks read
# (the sandbox has no network).
set -euo pipefail
SOURCE="$(cd "$(dirname "${{BASH_SOURCE[0]}}")" && pwd)"
VENV="${{MINILM_VENV:-/autograder/venv}}"

export DEBIAN_FRONTEND=noninteractive
apt-get update
apt-get install -y --no-install-recommends bubblewrap util-linux libseccomp2 python3 python3-venv python3-pip \\
    ca-certificates

python3 -m venv "$VENV"
"$VENV/bin/python" -m pip install --upgrade pip
"$VENV/bin/python" -m pip install "{TORCH}" --index-url {CPU_INDEX}
"$VENV/bin/python" -m pip install -e "$SOURCE/{COURSE_DIR}[dev]"

mkdir -p "$SOURCE/data/tiktoken"
cd "$SOURCE/{COURSE_DIR}"
TIKTOKEN_CACHE_DIR="$SOURCE/data/tiktoken" "$VENV/bin/python" -c \\
  "from minilm.course import corpus; corpus.tokenizer(); corpus.download_tinyshakespeare('$SOURCE/data')"
chmod -R a+rX "$SOURCE/data"  # the notebooks read it, as the sandbox's uid
chmod 700 "$SOURCE/{COURSE_DIR}"
bwrap --version
setpriv --version
"""

RUN_AUTOGRADER = """#!/usr/bin/env bash
# minilm's Gradescope autograder: Gradescope copies this to /autograder/run_autograder and runs
# it once per submission. Everything is configurable, so it also runs without root at a
# temporary root laid out like /autograder (source/, submission/, results/):
#   MINILM_AUTOGRADER_ROOT  the root (default /autograder)
#   MINILM_AUTOGRADER_SOURCE  the unpacked bundle (default $ROOT/source)
#   MINILM_PYTHON           the Python that setup.sh installed into (default $ROOT/venv/bin/python)
#   MINILM_GRADE_ARGS       extra grader arguments, e.g. "--tasks 1.1 1.2" (or pass them after --); unset, the
#                           bundle's own (`minilm export gradescope --leaderboard` sets them)
set -euo pipefail
bundle_args=@GRADE_ARGS@
export MINILM_GRADE_ARGS="${MINILM_GRADE_ARGS-$bundle_args}"
ROOT="${MINILM_AUTOGRADER_ROOT:-/autograder}"
SOURCE="${MINILM_AUTOGRADER_SOURCE:-$ROOT/source}"
PYTHON="${MINILM_PYTHON:-$ROOT/venv/bin/python}"
if [ ! -x "$PYTHON" ]; then PYTHON="$(command -v python3)"; fi
exec "$PYTHON" "$SOURCE/autograder.py" --root "$ROOT" "$@"
"""

AUTOGRADER_PY = '''#!/usr/bin/env python3
"""minilm's Gradescope autograder (run by run_autograder): check this bundle against its
manifest, then grade the submission with the course's grader (solutions/grading/gradescope.py).

A bundle whose files differ from MANIFEST.json, or miss one, stops here with one line and no
results.json: grading with a damaged grader would give wrong grades."""
import hashlib
import json
import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
COURSE = HERE / "course"


def problem():
    try:
        files = json.loads((HERE / "MANIFEST.json").read_text(encoding="utf-8"))["files"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        return f"MANIFEST.json is missing or unreadable ({type(e).__name__})"
    for rel, digest in sorted(files.items()):
        try:
            data = (HERE / rel).read_bytes()
        except OSError:
            return f"{rel} is missing"
        if hashlib.sha256(data).hexdigest() != digest:
            return f"{rel} differs from MANIFEST.json"
    return None


def main():
    why = problem()
    if why:
        print(f"autograder: the autograder bundle is corrupt: {why}; rebuild it with "
              "`minilm export gradescope`", file=sys.stderr)
        return 2
    data = HERE / "data"
    if (data / "tiktoken").is_dir() and any((data / "tiktoken").iterdir()):
        os.environ.setdefault("TIKTOKEN_CACHE_DIR", str(data / "tiktoken"))
    if (data / "tinyshakespeare.txt").is_file():
        os.environ.setdefault("MINILM_TINYSHAKESPEARE", str(data / "tinyshakespeare.txt"))
    if os.name == "posix" and os.geteuid() == 0:
        os.chmod(COURSE, 0o700)  # the reference and the hidden inputs: root's alone (the setpriv sandbox's uid)
    os.environ["PYTHONPATH"] = str(COURSE)
    os.environ.pop("MINILM_IMPL", None)
    os.chdir(COURSE)
    os.execv(sys.executable, [sys.executable, "-m", "solutions.grading.gradescope", *sys.argv[1:]])


if __name__ == "__main__":
    sys.exit(main())
'''


def course_files() -> dict[str, bytes]:
    """What the bundle's course/ holds: the package, the reference with its hidden inputs and
    mistakes, the notebooks and what installing and nbval need. No tests, no caches."""
    found: dict[str, bytes] = {}
    for top in ("minilm", "solutions"):
        for p in sorted((ROOT / top).rglob("*")):
            rel = p.relative_to(ROOT)
            if p.is_file() and not SKIP_PARTS & set(rel.parts) and p.suffix != ".pyc":
                found[rel.as_posix()] = p.read_bytes()
    for p in sorted((ROOT / "notebooks").iterdir()):
        if p.is_file() and (p.suffix != ".ipynb" or tasks.NOTEBOOK_NAME.match(p.name)):
            found[f"notebooks/{p.name}"] = p.read_bytes()
    for name in ("conftest.py", "pyproject.toml", "README.md"):
        found[name] = (ROOT / name).read_bytes()
    return found


def bundle_files(grade_args: str = "") -> dict[str, bytes]:
    stale = make_stubs.drifted()
    if stale:
        raise ExportError("the stubs in minilm/ differ from the reference: run `minilm stubs` "
                          f"first ({', '.join(p.relative_to(ROOT).as_posix() for p in stale)})")
    if not release.HIDDEN.is_file():
        raise ExportError(f"{release.HIDDEN.relative_to(ROOT)} is missing: the bundle needs the grader's hidden inputs")
    files = {f"{COURSE_DIR}/{rel}": data for rel, data in course_files().items()}
    runner = RUN_AUTOGRADER.replace("@GRADE_ARGS@", shlex.quote(grade_args))
    files |= {"setup.sh": SETUP_SH.encode(), "run_autograder": runner.encode(),
              "autograder.py": AUTOGRADER_PY.encode()}
    manifest = {"course": "minilm", "tasks": {t.id: t.points for t in tasks.TASKS},
                "files": {rel: hashlib.sha256(data).hexdigest() for rel, data in sorted(files.items())}}
    files[MANIFEST] = (json.dumps(manifest, indent=1) + "\n").encode()
    return files


def write_gradescope(out: Path, grade_args: str = "") -> int:
    """Write the bundle to `out` (a temporary file renamed into place), then read it back; `grade_args` are the
    grader arguments its run_autograder passes (MINILM_GRADE_ARGS overrides them)."""
    files = bundle_files(grade_args)
    out = Path(out)
    if out.is_dir():
        raise ExportError(f"{out} is a directory: give the zip's file name")
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        fd, name = tempfile.mkstemp(prefix=f".{out.name}-", suffix=".tmp", dir=out.parent)
    except OSError as e:
        raise ExportError(f"cannot write {out} ({e.strerror or e})") from None
    tmp = Path(name)
    try:
        with os.fdopen(fd, "wb") as f, zipfile.ZipFile(f, "w", zipfile.ZIP_DEFLATED) as z:
            for rel, data in sorted(files.items()):
                info = zipfile.ZipInfo(rel, date_time=(2020, 1, 1, 0, 0, 0))
                info.external_attr = ((0o755 if rel in EXECUTABLE else 0o644) | stat.S_IFREG) << 16
                info.compress_type = zipfile.ZIP_DEFLATED
                z.writestr(info, data)
        verify(tmp)
        tmp.chmod(0o644)
        os.replace(tmp, out)
    except OSError as e:
        raise ExportError(f"cannot write {out} ({e.strerror or e})") from None
    finally:
        tmp.unlink(missing_ok=True)
    return len(files)


def verify(path: Path) -> dict:
    """Check a bundle: a readable zip, the files Gradescope needs at its root, and every file
    as its manifest says. Returns the manifest."""
    path = Path(path)
    try:
        with zipfile.ZipFile(path) as z:
            bad = z.testzip()
            if bad is not None:
                raise ExportError(f"{path.name} is corrupt: {bad} fails its checksum")
            names = set(z.namelist())
            missing = [f for f in ROOT_FILES if f not in names]
            if missing:
                raise ExportError(f"{path.name} is not a minilm autograder bundle: no {', '.join(missing)} at its root")
            manifest = json.loads(z.read(MANIFEST))
            for rel, digest in manifest["files"].items():
                if rel not in names:
                    raise ExportError(f"{path.name} is corrupt: {rel} is missing")
                if hashlib.sha256(z.read(rel)).hexdigest() != digest:
                    raise ExportError(f"{path.name} is corrupt: {rel} differs from {MANIFEST}")
            for rel in EXECUTABLE:
                if not (z.getinfo(rel).external_attr >> 16) & 0o100:
                    raise ExportError(f"{path.name}: {rel} is not executable")
    except ExportError:
        raise
    except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, OSError, ValueError, KeyError, TypeError) as e:
        raise ExportError(f"{path.name} is not a readable autograder bundle "
                          f"({type(e).__name__}: {str(e)[:100]})") from None
    return manifest


# ---------------------------------------------------------------- Classroom 50


CLASSROOM50_PY = '''#!/usr/bin/env python3
"""minilm's Classroom 50 autograder (generated by `minilm export classroom50`).

Classroom 50 runs this in the student's repository checkout. It runs the course's visible
checks (`minilm check`), the same ones the notebooks' check cells run, and writes
result.json (classroom50/result/v1) with one test per task, release-body.md, and status and
summary to $GITHUB_OUTPUT. Points come from the task list below, not from the repository.

These are the visible checks only: no reference, no hidden inputs (Classroom 50 bundles are
readable by students), and they run the student's code in the same process, so a student
could forge them. The grade that counts comes from the course's grader (Gradescope, or
`minilm grade`).

    MINILM_TASKS="1.1 1.2"    check only these tasks (default: all below)
    MINILM_SKIP_INSTALL=1     do not install PyTorch and the course when they are missing
"""
import datetime
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

TASKS = __TASKS__  # id -> [title, points]: the course's task registry when this was exported
TORCH = __TORCH__
CPU_INDEX = __CPU_INDEX__
SCHEMA = "classroom50/result/v1"


def now():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def env(name, default):
    return os.environ.get(name, "").strip() or default


def install(repo):
    probe = subprocess.run([sys.executable, "-c", "import torch, einops, jaxtyping, numpy"], cwd=repo,
                           capture_output=True)
    if probe.returncode == 0 or os.environ.get("MINILM_SKIP_INSTALL") == "1":
        return
    pip = [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    subprocess.run([*pip, TORCH, "--index-url", CPU_INDEX], check=True)
    subprocess.run([*pip, "-e", "."], cwd=repo, check=True)


def verdicts(repo, ids):
    """The checks' verdicts by task id, and a line when they did not finish."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "verdicts.json"
        run_env = {**os.environ, "PYTHONPATH": str(repo), "TQDM_DISABLE": "1"}
        run_env.pop("MINILM_IMPL", None)
        try:
            proc = subprocess.run([sys.executable, "-m", "minilm", "check", *ids, "--json-out", str(out)], cwd=repo,
                                  env=run_env, timeout=float(env("MINILM_CHECK_TIMEOUT", "1800")))
            code = proc.returncode
        except subprocess.TimeoutExpired:
            return {}, "the checks ran over their time limit"
        try:
            rows = json.loads(out.read_text(encoding="utf-8"))
            found = {r["task"]: r for r in rows if isinstance(r, dict) and isinstance(r.get("task"), str)}
        except (OSError, ValueError, TypeError, KeyError):
            return {}, f"the checks did not finish (exit status {code})"
    return found, None


def main():
    repo = Path.cwd()
    ids = env("MINILM_TASKS", " ".join(TASKS)).split()
    unknown = [t for t in ids if t not in TASKS]
    if unknown:
        print(f"autograder: unknown task(s) in MINILM_TASKS: {', '.join(unknown)}", file=sys.stderr)
        return 2
    try:
        install(repo)
    except (OSError, subprocess.CalledProcessError) as e:
        print(f"autograder: installing PyTorch and the course failed ({e})", file=sys.stderr)
        return 1
    found, problem = verdicts(repo, ids)
    tests = []
    for task_id in ids:
        title, points = TASKS[task_id]
        v = found.get(task_id)
        passed = bool(v) and v.get("status") == "pass"
        line = str(v.get("line", "")) if v else (problem or "no verdict for this task")
        tests.append({"test-name": f"Task {task_id}: {title}", "passed": passed, "score": points if passed else 0,
                      "max-score": points, "output": line[:1000]})
    score, max_score = sum(t["score"] for t in tests), sum(t["max-score"] for t in tests)
    owner = env("OWNER", env("USERNAME", env("GITHUB_ACTOR", "student")))
    commit = env("COMMIT_URL", env("GITHUB_SHA", "local"))
    result = {
        "schema": SCHEMA, "classroom": env("CLASSROOM", "minilm"), "assignment": env("ASSIGNMENT", "minilm"),
        "assignment_type": env("ASSIGNMENT_TYPE", "individual"), "owner": owner,
        "submission": env("SUBMISSION_TAG", "submit/local"), "commit": commit,
        "release": env("RELEASE_URL", commit), "review": env("REVIEW_URL", commit),
        "datetime": now(), "score": score, "max-score": max_score, "tests": tests,
    }
    Path("result.json").write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\\n", encoding="utf-8")
    rows = [f"| {t['test-name']} | {t['score']}/{t['max-score']} | {'PASS' if t['passed'] else 'FAIL'} |"
            for t in tests]
    body = [f"### minilm visible checks: {score}/{max_score}", "",
            "These are the checks in your repository; your grade is decided by your instructor's grader, "
            "on hidden inputs as well.", "", "| task | points | result |", "|---|---|---|", *rows]
    failing = [f"- {t['output']}" for t in tests if not t["passed"]]
    if failing:
        body += ["", "Not passing yet:", "", *failing]
    Path("release-body.md").write_text("\\n".join(body) + "\\n", encoding="utf-8")
    summary = f"minilm visible checks: {score}/{max_score} points"
    output = os.environ.get("GITHUB_OUTPUT")
    if output:
        with open(output, "a", encoding="utf-8") as f:
            f.write(f"status={'success' if score == max_score else 'failure'}\\n")
            f.write(f"summary={summary}\\n")
    print(f"autograder: {summary}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
'''


def classroom50_autograder() -> str:
    table = {t.id: [t.title, t.points] for t in tasks.TASKS}
    return (CLASSROOM50_PY.replace("__TASKS__", json.dumps(table, ensure_ascii=False))
            .replace("__TORCH__", repr(TORCH)).replace("__CPU_INDEX__", repr(CPU_INDEX)))


def write_classroom50(out: Path) -> Path:
    out = Path(out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise ExportError(f"{out} exists and is not an empty folder")
    text = classroom50_autograder()
    staging = Path(tempfile.mkdtemp(prefix=".classroom50-", dir=out.parent if out.parent.exists() else None))
    try:
        (staging / "autograder.py").write_text(text, encoding="utf-8")
        (staging / "autograder.py").chmod(0o755)
        staging.chmod(0o755)
        problems = release.leaks(staging, probe=False)  # one script, no provided modules to probe
        if problems:
            raise ExportError("the Classroom 50 autograder would leak:\n  " + "\n  ".join(problems[:20]))
        out.parent.mkdir(parents=True, exist_ok=True)
        if out.exists():
            out.rmdir()
        shutil.move(str(staging), out)
    except OSError as e:
        raise ExportError(f"cannot write {out} ({e.strerror or e})") from None
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return out / "autograder.py"


# ---------------------------------------------------------------- command line


def main(argv: list[str] | None = None, prog: str = "minilm export") -> int:
    parser = Parser(prog=prog, description=summary(__doc__),
                    formatter_class=argparse.RawDescriptionHelpFormatter,
                    epilog="\n".join(__doc__.splitlines()[2:5]))
    sub = parser.add_subparsers(dest="target", required=True)
    gs = sub.add_parser("gradescope", help="Gradescope's autograder bundle (a zip)")
    gs.add_argument("out", type=Path)
    gs.add_argument("--leaderboard", action="store_true",
                    help="also fill results.json's leaderboard: the student's code trains in the sandbox, the "
                         "reference measures its bits per byte (never points)")
    gs.add_argument("--leaderboard-train", default=leaderboard.DEFAULT_TRAIN, metavar="ARGS",
                    help=f"with --leaderboard: `minilm train`'s arguments (default: {leaderboard.DEFAULT_TRAIN})")
    sub.add_parser("verify", help="check a Gradescope bundle").add_argument("bundle", type=Path)
    sub.add_parser("classroom50", help="Classroom 50's autograder.py (a folder)").add_argument("out", type=Path)
    args = parser.parse_args(argv)
    try:
        if args.target == "gradescope":
            grade_args = ""
            if args.leaderboard:
                try:
                    leaderboard.train_args(args.leaderboard_train)
                except ValueError as e:
                    raise ExportError(str(e)) from None
                grade_args = shlex.join(["--leaderboard", "--leaderboard-train", args.leaderboard_train])
            n = write_gradescope(args.out, grade_args)
            print(f"export: wrote {args.out} ({n} files; upload it as the assignment's autograder)")
        elif args.target == "verify":
            manifest = verify(args.bundle)
            print(f"export: {args.bundle} is a whole minilm bundle ({len(manifest['files'])} files, "
                  f"{len(manifest['tasks'])} tasks)")
        else:
            path = write_classroom50(args.out)
            print(f"export: wrote {path} (the visible checks only; "
                  "put the folder at CLASSROOM/autograders/ASSIGNMENT/)")
    except ExportError as e:
        print(f"export: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
