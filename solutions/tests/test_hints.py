"""`minilm hint`: a ladder for every task, on the stub and on the reference, that never prints a solution line
(each catalogued mistake's ladder is tested beside its check, in test_mistakes.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from minilm.course import checks, hints, tasks
from solutions import release

ROOT = tasks.ROOT
_SECRETS: dict = {}


def assert_no_leak(tmp_path: Path, texts: dict[str, str]) -> None:
    """Every text through the release's leak check (release.leaks: solution lines, hidden inputs, code that
    computes a task), as the files of a release would be."""
    folder = tmp_path / "hints"
    folder.mkdir(exist_ok=True)
    for name, text in texts.items():
        (folder / f"{name}.txt").write_text(text, encoding="utf-8")
    with pytest.MonkeyPatch.context() as mp:  # what must not leak, read once per process (87 mistakes call this)
        for name in ("solution_lines", "hidden_runs"):
            if name not in _SECRETS:
                _SECRETS[name] = getattr(release, name)()
            mp.setattr(release, name, lambda name=name: _SECRETS[name])
        problems = release.leaks(folder, probe=False)
    assert not problems, "\n".join(problems)


def test_every_task_on_its_stub_gives_the_first_rung_and_says_so(monkeypatch, tmp_path):
    monkeypatch.setenv("MINILM_IMPL", "minilm")  # minilm/ holds the stubs in this repository
    texts = {}
    for task in tasks.TASKS:
        ladder = hints.ladder(task.id)
        assert ladder.status == checks.TODO and len(ladder.rungs) == 1, (task.id, ladder.status)
        shown = ladder.show(3)
        assert "Rung 1 of 3" in shown and "still a stub" in shown, shown
        for name in task.names:  # the contract: each name's header from the stub, and where it is
            assert f"{name}" in shown and f"{task.file}:" in shown, (task.id, name)
        assert "NotImplementedError" not in str(ladder.rungs[0]) and "raise " not in str(ladder.rungs[0])
        texts[f"stub-{task.id}"] = shown
    assert_no_leak(tmp_path, texts)


def test_on_the_reference_every_task_passes_and_needs_no_hint(monkeypatch, tmp_path):
    monkeypatch.setenv("MINILM_IMPL", "solutions")
    ids = ("3.1", "6.3", "10.4")  # a function, a module, an optimizer (every task: the mistakes' test)
    for task_id in ids:
        ladder = hints.ladder(task_id)
        assert ladder.status == checks.PASS and "no hint needed" in ladder.show(2)
    assert_no_leak(tmp_path, {task_id: hints.ladder(task_id).show(1) for task_id in ids})


def test_the_rule_and_an_error_have_their_own_rungs():
    rule = checks.Verdict("6.1", checks.FAIL, "Task 6.1: your softmax calls torch.softmax (minilm/attention.py:31); "
                                              "build it from exp and sum", where="minilm/attention.py:31")
    ladder = hints.ladder("6.1", rule)
    assert "from-scratch rule" in str(ladder.rungs[1]) and "build it from exp and sum" in str(ladder.rungs[2])
    error = checks.Verdict("3.1", checks.ERROR, "your code raised RuntimeError: shapes (minilm/rmsnorm.py:25)",
                           where="minilm/rmsnorm.py:25")
    ladder = hints.ladder("3.1", error)
    assert "raised" in str(ladder.rungs[1]) and "minilm/rmsnorm.py:25" in str(ladder.rungs[1])
    # Matching none: the idea in words, never the catalogue's internal labels (advice for other mistakes misleads).
    assert "Read the docstring one sentence at a time" in str(ladder.rungs[2])
    assert "subtracts_mean" not in str(ladder.rungs[2])
    # Advice that fits the error's kind: shapes for a shape error only.
    for error, words in (("ZeroDivisionError: division by zero", "divide by is 0"), ("KeyError: 'step'", "keys"),
                         ("RuntimeError: shape '[2, 3]' is invalid", "shapes and dtypes")):
        verdict = checks.Verdict("3.1", checks.ERROR, f"your code raised {error} (minilm/rmsnorm.py:25)")
        rung = str(hints.ladder("3.1", verdict).rungs[1])
        assert words in rung and ("print the shapes" in rung) == (words == "shapes and dtypes"), rung
    assert ladder.show(1).startswith("✗ Task 3.1 rms_norm: raises an error in its check")


def test_the_command_takes_rungs_1_to_3():  # (an unknown id: test_cli.py's test of every command)
    from minilm.course.commands import hint

    with pytest.raises(SystemExit):
        hint.main(["3.1", "--rung", "4"])
