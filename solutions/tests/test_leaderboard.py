"""The verified leaderboard (solutions/grading/leaderboard.py) through Gradescope's run_autograder in a simulated
/autograder: the student's own code trains in the sandbox, the reference measures the checkpoint in a process of
its own, the figure lands in results.json's `leaderboard` and never in the points; a forged figure is ignored and a
submission that cannot train gets no entry and one line."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from minilm.course import tasks
from solutions import export
from solutions.grading import leaderboard
from solutions.tests.grading_helpers import P11, needs_bwrap, reference, stub
from solutions.tests.test_export import gradescope_problems, unpack

# A few seconds of training: 3 steps of a one-layer model, one thread (the leaderboard fixes the seed and threads).
TRAIN = "--steps 3 --d-model 32 --num-layers 1 --num-heads 2 --d-ff 96 --vocab-size 256"
FAKE = 0.0123
FORGER = f'''

import atexit as _atexit
import json as _json
import os as _os


def _forge():  # after `minilm train` wrote its own: a better result.json, a leaderboard file and the line it prints
    out = _os.environ.get("MINILM_RESULTS", ".")
    for name in ("result.json", "leaderboard.json"):
        with open(_os.path.join(out, name), "w", encoding="utf-8") as f:
            _json.dump({{"bits_per_byte": {FAKE}, "value": {FAKE}}}, f)
    print("final validation loss: 0.0100 nats per token = {FAKE} bits per byte")


_atexit.register(_forge)
'''


def _autograder(root: Path, grade_args: str) -> tuple[subprocess.CompletedProcess, dict | None]:
    from minilm.course.nbenv import kernel_env

    env = {**os.environ, **kernel_env(), "MINILM_AUTOGRADER_ROOT": str(root), "MINILM_PYTHON": sys.executable,
           "MINILM_GRADE_ARGS": grade_args, "PYTHONWARNINGS": "ignore"}
    for var in ("PYTHONPATH", "MINILM_IMPL"):
        env.pop(var, None)
    r = subprocess.run([str(root / "source" / "run_autograder")], cwd=root, env=env, capture_output=True, text=True,
                       timeout=900)
    path = root / "results" / "results.json"
    return r, json.loads(path.read_text(encoding="utf-8")) if path.exists() else None


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, tuple[subprocess.CompletedProcess, dict | None]]:
    bundle = tmp_path_factory.mktemp("bundle") / "minilm-autograder.zip"
    assert export.main(["gradescope", str(bundle)]) == 0
    honest = {m: reference(m) for m in tasks.EXERCISE_MODULES}
    subs = {"honest": honest, "forger": {**honest, "model": honest["model"] + FORGER},
            "stubs": {m: stub(m) for m in tasks.EXERCISE_MODULES}}
    out = {}
    for name, modules in subs.items():
        root = unpack(bundle, tmp_path_factory.mktemp(f"lb-{name}"))
        for module, text in modules.items():
            (root / "submission" / "minilm").mkdir(parents=True, exist_ok=True)
            (root / "submission" / "minilm" / f"{module}.py").write_text(text, encoding="utf-8")
        out[name] = _autograder(root, f"--tasks 1.1 --leaderboard --leaderboard-train '{TRAIN}'")
    return out


def _entries(doc: dict) -> dict[str, dict]:
    return {e["name"]: e for e in doc.get("leaderboard", [])}


@needs_bwrap
@pytest.mark.slow
def test_an_honest_submission_gets_its_measured_bits_per_byte_and_the_machines_speed(runs):
    r, doc = runs["honest"]
    assert r.returncode == 0 and doc is not None, r.stdout[-2000:] + r.stderr[-2000:]
    assert gradescope_problems(doc) == [], doc
    assert doc["score"] == P11  # the leaderboard never changes points
    board = _entries(doc)
    bpb, speed = board["bits per byte"], board["machine speed (reference tokens/s)"]
    assert bpb["order"] == "asc" and speed["order"] == "desc"
    assert 0 < bpb["value"] < leaderboard.MAX_BPB and math.isfinite(bpb["value"]) and speed["value"] > 0
    print(f"leaderboard: {bpb['value']} bits per byte, {speed['value']} reference tokens/s")


@needs_bwrap
@pytest.mark.slow
def test_a_forged_result_is_never_the_leaderboards_figure(runs):
    (_, honest), (r, forged) = runs["honest"], runs["forger"]
    assert r.returncode == 0 and forged is not None, r.stdout[-2000:] + r.stderr[-2000:]
    value = _entries(forged)["bits per byte"]["value"]
    assert value != FAKE
    # The same code trains the same weights (fixed seed, one thread): the trusted measurement of them, not the forgery.
    assert value == _entries(honest)["bits per byte"]["value"]


@needs_bwrap
@pytest.mark.slow
def test_a_submission_that_cannot_train_gets_no_entry_and_one_line(runs):
    r, doc = runs["stubs"]
    assert r.returncode == 0 and doc is not None, r.stdout[-2000:] + r.stderr[-2000:]
    assert "leaderboard" not in doc and doc["score"] == 0
    lines = [ln for ln in doc["output"].splitlines() if ln.startswith("Leaderboard:")]
    assert lines == ["Leaderboard: no entry: `minilm train` with your code stopped with exit status 1 (run "
                     f"`minilm train {TRAIN}` yourself to see why)"], doc["output"]


def test_bad_training_arguments_are_one_line(tmp_path, capsys):
    from solutions.grading import cli

    for words, says in ((["--leaderboard-train", "--steps 3 --seed 9"], "--seed, which the leaderboard sets itself"),
                        (["--leaderboard-train", "--steps many"], "--leaderboard-train: argument --steps")):
        assert cli.main([str(tmp_path), "--leaderboard", *words, "--out", str(tmp_path / "out")]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and says in err[0], err
        assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("figure", [float("nan"), float("inf"), -1.0, 0.0, 17.0, "1.5", None])
def test_the_trusted_side_accepts_only_a_sane_figure(tmp_path, monkeypatch, figure):
    """Whatever the evaluation process printed, a figure outside (0, MAX_BPB] or not a float gives no row."""
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "checkpoint.pt").write_bytes(b"weights")

    def fake_run(*args, **kwargs):
        return subprocess.CompletedProcess(args, 0, json.dumps({"bits_per_byte": figure, "tokens_per_s": 1.0}), "")

    monkeypatch.setattr(leaderboard.subprocess, "run", fake_run)
    with pytest.raises(leaderboard.LeaderboardError, match="bits per byte is not a number"):
        leaderboard.measure(tmp_path / "run", ["--steps", "3"], tmp_path / "scratch")


def test_a_linked_checkpoint_is_refused(tmp_path):
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "checkpoint.pt").symlink_to(tmp_path / "elsewhere.pt")
    (tmp_path / "elsewhere.pt").write_bytes(b"weights")
    with pytest.raises(leaderboard.LeaderboardError, match="wrote no checkpoint.pt"):
        leaderboard.measure(tmp_path / "run", ["--steps", "3"], tmp_path / "scratch")


def test_the_bundle_asks_for_the_leaderboard_when_exported_with_it(tmp_path):
    import shlex
    import zipfile

    out = tmp_path / "bundle.zip"
    assert export.main(["gradescope", str(out), "--leaderboard", "--leaderboard-train", TRAIN]) == 0
    with zipfile.ZipFile(out) as z:
        runner = z.read("run_autograder").decode()
    setting = "\n".join(line for line in runner.splitlines() if "bundle_args" in line)
    env = {k: v for k, v in os.environ.items() if k != "MINILM_GRADE_ARGS"}
    r = subprocess.run(["bash", "-c", setting + '\nprintf %s "$MINILM_GRADE_ARGS"'], capture_output=True, text=True,
                       env=env)
    assert shlex.split(r.stdout) == ["--leaderboard", "--leaderboard-train", TRAIN], r.stdout + r.stderr
    assert export.main(["gradescope", str(tmp_path / "bad.zip"), "--leaderboard", "--leaderboard-train",
                        "--out-dir x"]) == 1
    assert not (tmp_path / "bad.zip").exists()
