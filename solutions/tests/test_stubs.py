"""The student stubs are exactly what the generator makes from the reference, and in stub
mode every task's tests fail with that task's not-implemented message."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from minilm.course import tasks
from solutions import make_stubs


def test_stubs_are_in_sync_with_the_reference():
    stale = make_stubs.drifted()
    assert not stale, f"regenerate with `minilm stubs`: {[str(p) for p in stale]}"


def test_generator_replaces_regions_and_keeps_the_rest():
    src = (
        '"""Doc."""\n\nfrom minilm.course.validate import check_tensor\n\n\n'
        "def rms_norm(x, weight, eps=1e-5):\n"
        '    """Spec."""\n'
        '    check_tensor(x, "x", "rms_norm")\n'
        "    # BEGIN SOLUTION 3.1\n"
        "    return x * weight\n"
        "    # END SOLUTION\n"
    )
    out = make_stubs.stub_source(src, "rmsnorm")
    assert "return x * weight" not in out and "BEGIN SOLUTION" not in out
    assert 'raise NotImplementedError("Task 3.1 is not implemented yet: write rms_norm in minilm/rmsnorm.py")' in out
    assert '"""Spec."""' in out and 'check_tensor(x, "x", "rms_norm")' in out
    assert out.startswith('"""Doc."""')


@pytest.mark.parametrize("bad, error", [
    ("    # BEGIN SOLUTION 3.1\n    pass\n", "never closed"),
    ("    # END SOLUTION\n", "without BEGIN"),
    ("    # BEGIN SOLUTION 9.9\n    # END SOLUTION\n", "unknown task"),
    ("    # BEGIN SOLUTION 1.1\n    # END SOLUTION\n", "belongs in minilm/linear.py"),
])
def test_generator_rejects_malformed_markers(bad, error):
    with pytest.raises(ValueError, match=error):
        make_stubs.stub_source("def f():\n" + bad, "rmsnorm")


def test_no_solution_text_in_the_stubs():
    for module in tasks.EXERCISE_MODULES:
        text = (tasks.PACKAGE_DIR / f"{module}.py").read_text(encoding="utf-8")
        assert "BEGIN SOLUTION" not in text and "END SOLUTION" not in text


def test_stub_mode_fails_each_task_with_its_own_message():
    env = {**os.environ, "PYTHONWARNINGS": "ignore", "COLUMNS": "400"}
    env.pop("MINILM_IMPL", None)
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "tests", "--impl", "minilm", "-q", "-rf", "-p", "no:xdist",
         "-p", "no:nbval", "--tb=line", "-m", "task", "-o", "console_output_style=classic"],
        cwd=tasks.ROOT, env=env, capture_output=True, text=True, timeout=900,
    )
    out = result.stdout
    assert "error" not in out.splitlines()[-1], out[-3000:]  # no collection or setup errors
    assert " passed" not in out.splitlines()[-1], "a task's test passed against the stubs:\n" + out[-3000:]
    failures = re.findall(r"^FAILED tests/(\S+?)::(\S+) - (.*)$", out, flags=re.M)
    assert failures, out[-3000:]
    for file, test, message in failures:
        assert message.startswith("Task ") and "is not implemented yet: write " in message, (file, test, message)
