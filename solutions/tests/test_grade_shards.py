"""Sharded grading (solutions/grading/shards.py): `minilm grade --shard K/N` on separate processes, joined by
`minilm grade --merge`, writes what one whole run writes; every bad shard or merge is one line and writes nothing."""

from __future__ import annotations

import json
import random
import subprocess
import sys
import time
from pathlib import Path

import pytest

from minilm.course import tasks
from solutions.grading import cli, shards
from solutions.grading.results import StudentGrade, TaskGrade
from solutions.tests.grading_helpers import ROOT, needs_bwrap, reference, replace_region, run_grade, submission

ARGS = ["--tasks", "1.1", "--seed", "7", "--jobs", "1", "--cell-timeout", "60"]
# ada, bob → shard 3 of 3; cyd → 2; fay → 1 (shards.shard_of), so each shard grades someone.
CLASS = {"ada": "reference", "bob": "stubs", "cyd": "float32", "fay": "reference"}


def test_a_submissions_shard_depends_on_its_name_alone():
    names = [f"student{i:03d}" for i in range(300)]
    for n in (1, 3, 8):
        first = {name: shards.shard_of(name, n) for name in names}
        shuffled = names[:]
        random.Random(0).shuffle(shuffled)
        assert {name: shards.shard_of(name, n) for name in shuffled} == first
        assert set(first.values()) == set(range(1, n + 1))
    assert [shards.shard_of(name, 3) for name in CLASS] == [3, 3, 2, 1]  # sha256: the same on every machine


@pytest.mark.parametrize("text, why", [("2", "expected K/N such as 2/8"), ("a/b", "expected K/N such as 2/8"),
                                       ("0/3", "shard 0 of 3 is out of range"), ("4/3", "shard 4 of 3 is out of range"),
                                       ("1/0", "shard 1 of 0 is out of range")])
def test_a_bad_shard_is_one_line_and_writes_nothing(tmp_path, capsys, text, why):
    out = tmp_path / "out"
    assert cli.main([str(tmp_path), "--shard", text, "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and why in err[0], err
    assert not out.exists()


def _class(root: Path) -> list[Path]:
    float32 = replace_region(reference("linear"), "1.1", "return x.float() @ weight.float().T")
    made = {"reference": {"linear": reference("linear")}, "stubs": {}, "float32": {"linear": float32}}
    return [submission(root, name, **made[kind]) for name, kind in CLASS.items()]


def _roster(path: Path) -> Path:
    path.write_text("submission,lms_id,name\n" + "".join(f"{n},{i},{n.title()}\n" for i, n in enumerate(CLASS)),
                    encoding="utf-8")
    return path


def _outputs(out: Path) -> dict[str, bytes]:
    """Every file a run writes, as bytes; grades.json with each submission's grading time (its only duration) set
    to 0: the one figure that differs between two runs of the same class."""
    files = {p.relative_to(out).as_posix(): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}
    doc = json.loads(files["grades.json"])
    for s in doc["students"]:
        s["seconds"] = 0
    files["grades.json"] = json.dumps(doc, indent=1, ensure_ascii=False).encode()
    return files


@needs_bwrap
@pytest.mark.slow
def test_three_shards_in_separate_processes_merge_into_the_whole_runs_outputs(tmp_path):
    subs = _class(tmp_path / "subs")
    roster = _roster(tmp_path / "roster.csv")
    lms = ["--lms", "canvas", "--roster", str(roster)]
    t0 = time.monotonic()
    whole = run_grade(*map(str, subs), "--out", str(tmp_path / "whole"), *ARGS, *lms)
    whole_s = time.monotonic() - t0
    assert whole.returncode == 0, whole.stdout + whole.stderr
    t0 = time.monotonic()
    procs = []  # three processes at once, as three machines would run them. Shards 2 and 3 are given the class in
    for k in (1, 2, 3):  # other orders (their shares stay); the merge lists it in the order shard 1 was given it.
        order = list(map(str, subs))
        if k > 1:
            random.Random(k).shuffle(order)
        procs.append(subprocess.Popen([sys.executable, "-m", "solutions.grading", *order, "--shard", f"{k}/3",
                                       "--out", str(tmp_path / f"shard-{k}"), *ARGS, *lms], cwd=ROOT,
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    for p in procs:
        log = p.communicate(timeout=900)[0]
        assert p.returncode == 0, log
    shards_s = time.monotonic() - t0
    manifest = json.loads((tmp_path / "shard-3" / shards.MANIFEST).read_text(encoding="utf-8"))
    assert manifest["shard"] == "3/3" and manifest["students"] == ["ada", "bob"]
    assert manifest["run"]["tasks"] == ["1.1"] and manifest["run"]["seed_policy"] == "fixed seed 7"
    assert not (tmp_path / "shard-3" / "gradebook-canvas.csv").exists()  # --merge writes the gradebook
    merged = run_grade("--merge", str(tmp_path / "merged"), *(str(tmp_path / f"shard-{k}") for k in (2, 3, 1)), *lms)
    assert merged.returncode == 0, merged.stdout + merged.stderr
    whole_files, merged_files = _outputs(tmp_path / "whole"), _outputs(tmp_path / "merged")
    assert sorted(merged_files) == sorted(whole_files) == ["feedback/ada.md", "feedback/bob.md", "feedback/cyd.md",
                                                           "feedback/fay.md", "gradebook-canvas.csv", "grades.csv",
                                                           "grades.json"]
    for name in whole_files:
        assert merged_files[name] == whole_files[name], name
    points = {s["student"]: s["total"] for s in json.loads(whole_files["grades.json"])["students"]}
    assert points == {"ada": tasks.get("1.1").points, "bob": 0, "cyd": 0, "fay": tasks.get("1.1").points}
    print(f"whole run {whole_s:.1f} s; three shards at once {shards_s:.1f} s")


# ---------------------------------------------------------------- --merge's refusals, on shards made here


def _fake_shard(folder: Path, k: int, n: int, students: list[str], *, cls=("ada", "bob", "cyd", "fay"), **run) -> Path:
    """A shard's output as `--shard k/n` writes it, without grading (the merge reads only data)."""
    folder.mkdir(parents=True)
    grades = [StudentGrade(s, f"subs/{s}", 1, 1, {"1.1": TaskGrade(1, 1, "matches")}).to_json() for s in students]
    header = {"max": 1, "tasks": {"1.1": 1}, "notebooks": ["01_linear"], "sandbox": "bwrap", "isolation": "…",
              "hidden_inputs": True}
    (folder / "grades.json").write_text(json.dumps({**header, "students": grades}), encoding="utf-8")
    ident = {"course_version": "0.1.0", "course_digest": "d", "seed_policy": "a fresh secret per submission",
             "tasks": ["1.1"], "notebooks": ["01_linear"], "sandbox": "bwrap", "class": list(cls), **run}
    (folder / shards.MANIFEST).write_text(json.dumps({"format": shards.FORMAT, "shard": f"{k}/{n}", "run": ident,
                                                      "students": students}), encoding="utf-8")
    return folder


def _three(tmp_path: Path, **changed) -> list[Path]:
    """The class's three shards; `changed` (shard number → run fields) alters one shard's run."""
    share = {1: ["fay"], 2: ["cyd"], 3: ["ada", "bob"]}
    return [_fake_shard(tmp_path / f"s{k}", k, 3, share[k], **changed.get(f"s{k}", {})) for k in (1, 2, 3)]


def _merge(tmp_path, capsys, folders) -> tuple[int, list[str]]:
    out = tmp_path / "merged"
    rc = cli.main(["--merge", str(out), *map(str, folders)])
    err = capsys.readouterr().err.strip().splitlines()
    if rc != 0:
        assert not out.exists(), "a refused merge wrote its folder"
    return rc, err


def test_fake_shards_merge(tmp_path, capsys):
    rc, err = _merge(tmp_path, capsys, _three(tmp_path))
    assert rc == 0, err
    doc = json.loads((tmp_path / "merged" / "grades.json").read_text(encoding="utf-8"))
    assert [s["student"] for s in doc["students"]] == ["ada", "bob", "cyd", "fay"]  # the class's order


@pytest.mark.parametrize("field, value, says", [
    ("course_version", "0.2.0", "course version 0.1.0 in"),
    ("course_digest", "e", "course digest d in"),
    ("seed_policy", "fixed seed 7", "seed policy a fresh secret per submission in"),
    ("tasks", ["1.1", "1.2"], "tasks 1.1 in"),
    ("class", ["ada", "bob", "cyd", "fay", "gus"], "class a class of 4 in"),
])
def test_shards_of_different_runs_are_refused(tmp_path, capsys, field, value, says):
    rc, err = _merge(tmp_path, capsys, _three(tmp_path, s2={field: value}))
    assert rc == 2 and len(err) == 1 and "shards from different runs" in err[0] and says in err[0], err


def test_a_student_in_two_shards_is_refused(tmp_path, capsys):
    folders = _three(tmp_path)
    twice = _fake_shard(tmp_path / "again", 2, 3, ["cyd"])
    rc, err = _merge(tmp_path, capsys, [folders[0], folders[2], twice, folders[1]])
    assert rc == 2 and len(err) == 1 and "shard 2/3 is given twice" in err[0], err
    forged = _fake_shard(tmp_path / "forged", 2, 3, ["cyd", "ada"])  # ada's shard is 3/3
    rc, err = _merge(tmp_path, capsys, [folders[0], forged, folders[2]])
    assert rc == 2 and len(err) == 1 and "student ada is in two shards" in err[0], err


def test_a_missing_shard_or_student_is_refused(tmp_path, capsys):
    folders = _three(tmp_path)
    rc, err = _merge(tmp_path, capsys, folders[:2])
    assert rc == 2 and err == ["grade: --merge: 3 shards expected, got 2: missing 3/3"], err
    short = _fake_shard(tmp_path / "short", 3, 3, ["ada"])  # bob graded nowhere
    rc, err = _merge(tmp_path, capsys, [*folders[:2], short])
    assert rc == 2 and len(err) == 1 and "student(s) bob of the class are in no shard" in err[0], err
    rc, err = _merge(tmp_path, capsys, [*folders[:2], tmp_path / "subs"])
    assert rc == 2 and len(err) == 1 and "is not a shard's output (no shard.json)" in err[0], err
    rc, err = _merge(tmp_path, capsys, [])
    assert rc == 2 and len(err) == 1 and "expected the output folders of every shard" in err[0], err
