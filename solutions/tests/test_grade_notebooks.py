"""The grader on the notebooks that read data (09-11) and on 06: the reference earns every point in the
sandbox; the third red team's shortcuts on 6.x and 10.x are refused on exactly their tasks."""

from __future__ import annotations

import json

import pytest

from minilm.course import tasks
from solutions.tests.grading_helpers import (
    needs_bwrap,
    prepend,
    reference,
    replace_region,
    run_grade,
    submission,
)


def third_red_team_later_tasks() -> dict[str, str]:
    """The classes the third red team used on 6.1, 6.2, 10.1, 10.2 and 10.4, every output right:
    a softmax through cross_entropy, F.scaled_dot_product_attention behind a rebound `self`,
    logcumsumexp for the log-sum-exp, the torch module fished out of einops' private backends, and
    torch.optim reached through an attribute of an object the scan cannot follow."""
    attention = replace_region(replace_region(reference("attention"), "6.1",
        "F = torch.nn.functional\nreturn torch.exp(-F.cross_entropy(x.movedim(dim, -1).reshape(-1, x.shape[dim]), "
        "torch.zeros(x.numel() // x.shape[dim], dtype=torch.long), reduction='none')).reshape(x.shape)"),
        "6.2", "self = torch.nn.functional\nreturn self.scaled_dot_product_attention(q, k, v, attn_mask=mask)")
    training = replace_region(replace_region(replace_region(reference("training"), "10.1",
        "lse = torch.logcumsumexp(logits, -1)[..., -1]\n"
        "return (lse - logits.gather(-1, targets[..., None])[..., 0]).mean()"),
        "10.2", "backend = einops._backends.get_backend(parameters)\n"
                "return backend.torch.nn.utils.clip_grad_norm_(parameters, max_norm)"),
        "10.4", "self.inner = self.param_groups[0]['params'][0].optim.AdamW(self.param_groups)\nreturn "
                "self.inner.step()")
    return {"attention": attention, "training": prepend(training, "import einops\n")}


# 10.2's shortcut reaches einops' private backends: the lint refuses the private name, which costs every task
# of training.py (10.3 among them). And a task is judged by all the code it runs: the multi-head attention and
# the models (6.3, 7.1, 8.1, 13.5, 13.6) run 6.2's shortcut.
LATER_SHORTCUTS = {"6.1", "6.2", "10.1", "10.2", "10.3", "10.4"} | {"6.3", "7.1", "8.1", "13.5", "13.6"}


@needs_bwrap
@pytest.mark.slow
def test_the_data_notebooks_earn_every_point_in_the_sandbox(tmp_path):
    # The reference earns every point of 06 and of 09-11, which read the tokenizer's files and Tiny Shakespeare
    # offline, from the local copies the grader binds read-only into the sandbox (TIKTOKEN_CACHE_DIR,
    # MINILM_TINYSHAKESPEARE). The red team's shortcuts on these tasks are refused by the same rule in the check
    # cells (below); test_grade.py shows the grader's verdicts are the check cells'.
    every = {m: reference(m) for m in tasks.EXERCISE_MODULES}
    honest = submission(tmp_path / "subs", "reference", **every)
    r = run_grade(str(honest), "--notebooks", "06", "09", "10", "11", "--jobs", "2", "--out", str(tmp_path / "out"))
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    (got,) = json.loads((tmp_path / "out" / "grades.json").read_text(encoding="utf-8"))["students"]
    graded = [t for t in tasks.TASKS if t.notebook[10:12] in ("06", "09", "10", "11")]
    assert got["total"] == got["max"] == sum(t.points for t in graded), got["tasks"]


def test_the_reference_passes_the_rule_the_red_teams_later_shortcuts_break(tmp_path):
    # The same rule in the check cells, without a sandbox (so on every machine): each shortcut, and each task that
    # runs one, is refused; the reference beside them is not.
    from solutions.tests.test_rule import run_checks

    attacker = third_red_team_later_tasks()
    ids = sorted(LATER_SHORTCUTS, key=lambda t: tuple(map(int, t.split("."))))
    got = run_checks({"attacker": {"files": attacker, "tasks": ids}, "reference": {"files": {}, "tasks": ids}},
                     tmp_path)
    refused = {t for t, (status, line) in got["attacker"].items() if line.startswith(f"✗ Task {t}: ")}
    assert refused == LATER_SHORTCUTS, got["attacker"]
    assert all(status == "pass" for status, _ in got["reference"].values()), got["reference"]
