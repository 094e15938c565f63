"""One class graded in shards, on many machines, then merged into one run's outputs (instructors).

    minilm grade subs/* --shard 2/8 --out shard-2/     # on each machine, K = 1 … 8
    minilm grade --merge grades/ shard-*/              # then once: grades.csv, grades.json, feedback/

A submission's shard is a stable hash of its name (sha256, not Python's salted hash), so every
machine given the same class in any order grades the same share. Each shard's folder holds its
grades and `shard.json`: the run it belongs to (the course's version and a digest of its code and
notebooks, the hidden inputs' seed policy, the tasks and notebooks, the sandbox, the class) and
its index and students. --merge refuses, in one line and before writing anything, shards of
different runs, a shard given twice or missing, and a student in two shards or in none.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

from minilm.course import tasks
from minilm.course.cli import version
from solutions.grading.results import StudentGrade

MANIFEST = "shard.json"
FORMAT = "minilm-shard 1"
_SHARD = re.compile(r"(\d+)/(\d+)")
# What a run is: shards that differ in any of these are not one run's shares (the order in which --merge names them).
RUN_FIELDS = ("course_version", "course_digest", "seed_policy", "tasks", "notebooks", "sandbox", "class")


class ShardError(Exception):
    """A bad --shard or --merge: one line, nothing written."""


def parse(text: str) -> tuple[int, int]:
    """`K/N` as (K, N), 1 ≤ K ≤ N."""
    m = _SHARD.fullmatch(text.strip())
    if not m:
        raise ShardError(f"--shard: expected K/N such as 2/8 (shard K of N, counted from 1), got {text!r}")
    k, n = int(m[1]), int(m[2])
    if n < 1 or not 1 <= k <= n:
        raise ShardError(f"--shard: shard {k} of {n} is out of range: K goes from 1 to N, and N ≥ 1")
    return k, n


def shard_of(name: str, n: int) -> int:
    """The shard (1 … n) a submission's name falls in: the same on every machine and in any order."""
    return int.from_bytes(hashlib.sha256(name.encode("utf-8")).digest()[:8], "big") % n + 1


def course_digest() -> str:
    """A digest of what decides a grade: the course's code (the provided package, the reference, the grader,
    the hidden inputs) and its notebooks. Shards graded from two checkouts that differ in any of it differ here."""
    h = hashlib.sha256()
    root = tasks.ROOT
    files = [*(root / "minilm").rglob("*.py"), *(root / "solutions").rglob("*.py"), *(root / "notebooks").glob("*")]
    for path in sorted(p for p in files if p.is_file() and "__pycache__" not in p.parts and "tests" not in
                       p.relative_to(root).parts):
        h.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes())
    return h.hexdigest()[:16]


def seed_policy(hidden: bool, seed: int | None) -> str:
    if not hidden:
        return "none (--no-hidden)"
    return "a fresh secret per submission" if seed is None else f"fixed seed {seed}"


def manifest(k: int, n: int, plan, class_names: list[str], students: list[str]) -> dict:
    run = {"course_version": version(), "course_digest": course_digest(),
           "seed_policy": seed_policy(plan.hidden, plan.seed), "tasks": list(plan.task_ids),
           "notebooks": list(plan.notebooks), "sandbox": plan.box.kind, "class": list(class_names)}
    return {"format": FORMAT, "shard": f"{k}/{n}", "run": run, "students": list(students)}


def write_manifest(out: Path, doc: dict) -> None:
    (out / MANIFEST).write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


def _describe(field: str, value) -> str:
    if field == "class":
        return f"a class of {len(value)}"
    return ", ".join(map(str, value)) if isinstance(value, list) else str(value)


def read(folders: list[Path]) -> tuple[list[str], dict, list[StudentGrade]]:
    """The shards' folders, checked to be every share of one run, each once: (the class in its order, the
    grades.json header, every student's grade in the class's order). Raises ShardError naming the problem."""
    if not folders:
        raise ShardError("--merge: expected the output folders of every shard after OUT, got none")
    shards = []
    for folder in folders:
        try:
            doc = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
            grades = json.loads((folder / "grades.json").read_text(encoding="utf-8"))
        except FileNotFoundError as e:
            raise ShardError(f"--merge: {folder} is not a shard's output (no {Path(e.filename).name}): grade it "
                             "with --shard K/N") from None
        except (OSError, ValueError) as e:
            raise ShardError(f"--merge: {folder}: cannot read its {MANIFEST} or grades.json ({e})") from None
        if not isinstance(doc, dict) or doc.get("format") != FORMAT:
            raise ShardError(f"--merge: {folder}/{MANIFEST} is not a {FORMAT} manifest")
        try:
            k, n = parse(str(doc.get("shard")))
        except ShardError as e:
            raise ShardError(f"--merge: {folder}/{MANIFEST}: {e}") from None
        shards.append((folder, k, n, doc, grades))
    first_folder, _, n, first, _ = shards[0]
    for folder, _, n_here, doc, _ in shards[1:]:
        if n_here != n:
            raise ShardError(f"--merge: shards from different runs: {first_folder} is one of {n} shards, {folder} "
                             f"one of {n_here}")
        for field in RUN_FIELDS:
            a, b = first["run"].get(field), doc["run"].get(field)
            if (sorted(a) if field == "class" else a) != (sorted(b) if field == "class" else b):
                raise ShardError(f"--merge: shards from different runs: {field.replace('_', ' ')} "
                                 f"{_describe(field, a)} in {first_folder}, {_describe(field, b)} in {folder}")
    by_k: dict[int, Path] = {}
    for folder, k, _, _, _ in shards:
        if k in by_k:
            raise ShardError(f"--merge: shard {k}/{n} is given twice: {by_k[k]} and {folder}")
        by_k[k] = folder
    missing = [f"{k}/{n}" for k in range(1, n + 1) if k not in by_k]
    if missing:
        raise ShardError(f"--merge: {n} shards expected, got {len(shards)}: missing {', '.join(missing)}")
    where: dict[str, Path] = {}
    results: dict[str, StudentGrade] = {}
    header = None
    for folder, k, _, doc, grades in sorted(shards, key=lambda s: s[1]):
        graded = [s.get("student") for s in grades.get("students", [])]
        if graded != list(doc.get("students", [])):
            raise ShardError(f"--merge: {folder}: its grades.json and {MANIFEST} name different students")
        for s in grades["students"]:
            name = s["student"]
            if name in where:
                raise ShardError(f"--merge: student {name} is in two shards: {where[name]} and {folder}")
            where[name] = folder
            results[name] = StudentGrade.from_json(s)
        here = {key: v for key, v in grades.items() if key != "students"}
        if header is not None and here != header:
            raise ShardError(f"--merge: shards from different runs: {folder}'s grades.json says otherwise of the run "
                             f"than {by_k[1]}'s")
        header = here
    for name, folder in where.items():  # a manifest edited by hand, or a shard of another class
        k = next(k for k, f in by_k.items() if f == folder)
        if shard_of(name, n) != k:
            raise ShardError(f"--merge: student {name} in {folder} belongs to shard {shard_of(name, n)}/{n}, "
                             f"not {k}/{n}")
    class_names = list(shards[[s[1] for s in shards].index(1)][3]["run"]["class"])
    absent = [name for name in class_names if name not in results]
    if absent:
        raise ShardError(f"--merge: student(s) {', '.join(absent[:5])}{' …' if len(absent) > 5 else ''} of the class "
                         "are in no shard")
    extra = [name for name in results if name not in class_names]
    if extra:
        raise ShardError(f"--merge: student(s) {', '.join(extra[:5])} are not in the class the shards recorded")
    return class_names, header, [results[name] for name in class_names]
