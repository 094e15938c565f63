"""benchmarks/: the yardstick model computes what the reference computes, and the smoke run
(--quick at toy sizes) reports every part. No timing is asserted here: figures come from
`python -m benchmarks`."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys

import pytest
import torch

from benchmarks import __main__ as bench
from benchmarks.builtins_model import BuiltinsLM
from minilm.course import tasks
from minilm.course.exercises import lm_parameter_count, lm_state_dict_keys
from minilm.course.train.plan import parse_duration

ROOT = tasks.ROOT


def test_builtins_model_matches_the_reference_given_the_same_weights():
    from solutions.model import TransformerLM

    cfg = dict(vocab_size=97, context_length=32, d_model=48, num_layers=2, num_heads=4, d_ff=128, rope_theta=500.0)
    torch.manual_seed(0)
    reference = TransformerLM(**cfg)
    builtins = BuiltinsLM(**cfg)
    assert set(builtins.state_dict()) == set(reference.state_dict()) == set(lm_state_dict_keys(2))
    builtins.load_state_dict(reference.state_dict())
    ids = torch.randint(0, 97, (3, 32))
    torch.testing.assert_close(builtins(ids), reference(ids), atol=1e-5, rtol=1e-4)
    # Gradients too: the benchmark times backward passes.
    builtins(ids).square().mean().backward()
    reference(ids).square().mean().backward()
    for (name, p), q in zip(reference.named_parameters(), builtins.parameters()):
        torch.testing.assert_close(q.grad, p.grad, atol=1e-5, rtol=1e-3, msg=lambda m: f"{name}: {m}")


@pytest.fixture(scope="module")
def smoke(tmp_path_factory):
    out = tmp_path_factory.mktemp("bench") / "results.json"
    env = {k: v for k, v in os.environ.items() if k != "MINILM_IMPL"}
    proc = subprocess.run([sys.executable, "-m", "benchmarks", "--smoke", "--json", str(out)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return json.loads(out.read_text(encoding="utf-8")), proc.stdout


@pytest.mark.slow  # the smoke run: a minute or two
def test_smoke_training_rows(smoke):
    results, stdout = smoke
    rows = results["training"]
    assert {(r["size"], r["mode"]) for r in rows} == {(s, m) for s in ("seed", "d512") for m in ("eager", "compiled")}
    for r in rows:
        if "skipped" in r:  # --quick and --smoke compile nothing (tests/test_train.py does); the full run says why not
            assert r["mode"] == "compiled" and r["skipped"].startswith("not compiled in --quick")
            continue
        cfg = r["config"]
        # Non-embedding parameters, counted from the architecture alone.
        expected = lm_parameter_count(cfg["vocab_size"], cfg["d_model"], cfg["num_layers"], cfg["d_ff"]) \
            - cfg["vocab_size"] * cfg["d_model"]
        assert r["non_embedding_params"] == expected
        assert r["reference_tokens_per_s"] > 0 and r["builtins_tokens_per_s"] > 0
        assert math.isclose(r["ratio"], r["reference_tokens_per_s"] / r["builtins_tokens_per_s"])
        rate = r["matmul_gflops"] * 1e9
        assert math.isclose(r["mfu_reference"], 6 * expected * r["reference_tokens_per_s"] / rate)
        assert math.isclose(r["mfu_builtins"], 6 * expected * r["builtins_tokens_per_s"] / rate)
    # The throughput target is on compiled steps only (≥ 0.9× the built-ins); eager has none.
    by_what = {row["what"]: row for row in results["targets"]}
    for r in rows:
        name = f"training {r['size']} {r['mode']}: reference ÷ built-ins"
        if r["mode"] == "eager" or "skipped" in r:
            assert name not in by_what
        else:
            assert by_what[name]["met"] == (r["ratio"] >= 0.9) and by_what[name]["target"] == "≥ 0.9×"
    assert "training d512 eager: reference MFU" not in by_what, "eager MFU is reported without a target too"
    assert "Training step" in stdout and "Targets" in stdout


@pytest.mark.slow  # the smoke run: a minute or two
def test_smoke_generation_rows(smoke):
    rows = smoke[0]["generation"]
    assert [r["new_tokens"] for r in rows] == bench.SMOKE.generation_tokens
    for r in rows:
        assert r["same_tokens"], "greedy generation must give the same tokens with and without the cache"
        assert math.isclose(r["speedup"], r["cached_tokens_per_s"] / r["uncached_tokens_per_s"])


@pytest.mark.slow  # the smoke run: a minute or two
def test_smoke_tooling_and_targets(smoke):
    results, stdout = smoke
    t = results["tooling"]
    assert t["notebooks"] and t["nbval_s"] > 0 and t["grade_s"] > 0
    earned, out_of = map(int, t["grade_points"].split("/"))
    assert earned == out_of > 0, "the reference must earn every point of the notebooks graded"
    assert t["import_s"] > 0 and t["import_and_torch_s"] > 0 and t["status_s"] > 0
    by_what = {row["what"]: row for row in results["targets"]}
    # The KV cache's target is at 512 new tokens, which --smoke does not generate: no target row for it.
    assert max(bench.SMOKE.generation_tokens) < 512 and not any(w.startswith("KV-cache") for w in by_what)
    assert by_what["grading one submission"]["met"] == (t["grade_s"] <= 150)
    # Which import is faster is a figure of the benchmark (a busy machine can stall either), not
    # asserted here; that `import minilm` leaves torch unloaded is test_course_plumbing's import test.
    assert by_what["import minilm (torch loaded on first use)"]["met"] == (t["import_s"] < t["import_and_torch_s"])
    fb = t["feedback"]
    assert fb["tasks"] and all(fb[k][i] > 0 for k in ("check", "test") for i in fb["tasks"])
    assert "pytest_task" not in fb  # --smoke, like --quick, leaves out the old command (and the warm-up run)
    worst_test = max(fb["test"].values())
    assert by_what[f"minilm test ID (slowest of {', '.join(fb['tasks'])})"]["met"] == (worst_test <= 10)
    assert by_what["minilm status (every task done)"]["met"] == (fb["status"] <= 5) and t["status_s"] == fb["status"]
    assert "A student's feedback loop" in stdout and f"minilm check {fb['tasks'][0]}" in stdout
    for row in results["targets"]:
        assert ("met" if row["met"] else "MISSED") in stdout


@pytest.mark.slow  # the smoke run: a minute or two
def test_smoke_time_to_quality(smoke):
    """The course's runs and nanoGPT's CPU recipe are scored on the same validation bytes; every
    figure follows from the sums written beside it."""
    results, stdout = smoke
    q = results["quality"]
    course, char, same = q["course"], q["char"], q["same_time"]
    assert q["budget"] == bench.QUICK_QUALITY_BUDGET and course["budget_s"] == parse_duration(q["budget"])
    assert "long" not in q and "old" not in q
    assert char["iters"] == q["char_iters"] == char["steps"] > 0 and char["budget_s"] is None
    assert char["recipe"]["warmup"] == bench.SMOKE.char_warmup, "the toy run's warmup reaches the char model"
    assert course["val_bytes"] == char["val_bytes"] > 0, "the char model is scored on the course run's bytes"
    # A budget run scores every validation byte unless its budget left no time (a loaded machine),
    # and its row then says on how many: the figures are never silently compared on different bytes.
    assert same["val_bytes"] <= course["val_bytes"]
    assert (same["val_bytes"] == course["val_bytes"]) == (f"on its first {same['val_bytes']:,} bytes" not in stdout)
    for r in (course, char, same):
        assert r["steps"] > 0 and r["wall_s"] > 0 and r["process_s"] >= r["wall_s"]
        assert math.isclose(r["bits_per_byte"], r["val_nats"] / math.log(2) / r["val_bytes"])
    assert math.isclose(course["nats_per_token"], course["val_nats"] / course["val_tokens"])
    assert math.isclose(char["nats_per_byte"], char["val_nats"] / char["val_bytes"])
    assert char["recipe"]["num_layers"] == 4 and char["recipe"]["d_model"] == 128 and char["recipe"]["batch_size"] == 12
    assert same["budget"] == f"{max(round(bench.MIN_BUDGET_S), round(char['process_s']))}s"
    assert math.isclose(q["ratio"], course["bits_per_byte"] / char["bits_per_byte"])
    assert math.isclose(q["reduction"], 1 - same["bits_per_byte"] / char["bits_per_byte"])
    by_what = {row["what"]: row for row in results["targets"]}
    assert by_what["time to quality: minilm train --budget 30s, bits per byte"]["met"] == \
        (course["bits_per_byte"] <= 2.10)
    assert by_what["time to quality: fewer bits per byte than nanoGPT's CPU recipe in its wall time "
                   f"({same['budget']})"]["met"] == (q["reduction"] >= 0.25)
    assert "Time to quality" in stdout and f"{course['bits_per_byte']:.3f}" in stdout
    # Both scored again on the same targets in windows sliding by half their context.
    for r in (course, char):
        assert r["eval_stride"] == 32
        assert math.isclose(r["sliding_bits_per_byte"], r["sliding_nats"] / math.log(2) / r["val_bytes"])
        assert f"{r['sliding_bits_per_byte']:.3f} (stride 32)" in stdout
    # The sliding figure's target compares the same runs as the plain one's: the default in the char model's time.
    assert math.isclose(q["sliding_reduction"], 1 - same["sliding_bits_per_byte"] / char["sliding_bits_per_byte"])
