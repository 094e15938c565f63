"""pytest setup shared by tests/, solutions/tests/ and the nbval run over notebooks/.

    python -m pytest --impl solutions      # everything, against the reference
    python -m pytest --task 3.1            # one task: its tests, and its notebook up to its last cell
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent

# pytester runs the suite in-process against known-mistake variants (solutions/tests/test_mistakes.py);
# the course's own plugins (minilm/course/plugins/) name notebook cells, select --task and order the suite.
pytest_plugins = ["pytester", "minilm.course.plugins.cells", "minilm.course.plugins.task_selection",
                  "minilm.course.plugins.order"]


def pytest_addoption(parser):
    parser.getgroup("minilm").addoption(
        "--impl",
        choices=("minilm", "solutions"),
        default=None,
        help="whose code `import minilm` runs: minilm (yours, the default) or solutions (the reference)",
    )


def pytest_configure(config):
    impl = config.getoption("--impl")
    if impl:
        os.environ["MINILM_IMPL"] = impl  # read lazily by minilm, and inherited by nbval's kernels
    # Stored notebook outputs never hold progress bars or warnings' temp paths.
    # The same kernel environment the stored outputs were made in (solutions/notebooks.py):
    # progress bars off and, on offline course machines, the local tiktoken and data copies.
    from minilm.course.nbenv import kernel_env

    for key, value in kernel_env().items():
        if key != "MINILM_IMPL":
            os.environ.setdefault(key, value)
    # nbval's kernels start in notebooks/, where `import minilm` would go through pip's editable
    # install: that is whichever checkout ran `pip install -e .` last, not necessarily this one.
    # This checkout first on the path, for them and every command a test starts. (The grader
    # builds its sandboxes' environments from scratch, so a submission still imports its own.)
    paths = os.environ.get("PYTHONPATH", "").split(os.pathsep)
    if str(ROOT) not in paths:
        os.environ["PYTHONPATH"] = os.pathsep.join([str(ROOT), *[p for p in paths if p]])
    # nbval, when installed: notebooks given to pytest are run in this Python and their outputs
    # compared with the stored ones (what graders do), through the committed sanitize rules.
    opt = config.option
    if hasattr(opt, "nbval") and not opt.nbval_lax:
        opt.nbval = True
        opt.nbval_current_env = True
        if opt.nbval_sanitize_with is None:
            opt.nbval_sanitize_with = str(ROOT / "notebooks" / "sanitize.cfg")
        if opt.nbval_cell_timeout == 2000:  # nbval's default: far too long for a course cell
            opt.nbval_cell_timeout = 300


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """A test that hit a stub fails with the stub's one line, not a traceback into torch."""
    if call.when == "teardown":
        # No "git apply .hypothesis/patches/…" suggestions: the course's tests are not the student's to patch.
        item.__dict__.pop("_hypothesis_failing_examples", None)
    outcome = yield
    report = outcome.get_result()
    if call.excinfo is None or report.passed:
        return
    from minilm.course.checks import todo_message

    exc = call.excinfo.value
    todo = todo_message(exc)
    if todo is None and isinstance(exc, pytest.fail.Exception) and (
            " is not implemented yet: " in str(exc) or re.match(r"Task [\d.]+: your ", str(exc))):
        todo = str(exc)  # tests/conftest.py fails a stub's (or a rule breaker's) tests up front with this line
    if todo is not None:
        report.longrepr = todo
