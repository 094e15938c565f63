"""minilm: build a modern decoder-only Transformer language model, one function at a time.

`import minilm` gives the student's code in this package. With the environment variable
MINILM_IMPL=solutions it gives the reference implementation instead (instructors use this
to produce the notebooks' stored outputs and to run the test suite). Names are resolved
lazily, on first use, so importing minilm is cheap and never imports torch by itself.
"""

from __future__ import annotations

import importlib
import os
import sys
import types

from minilm.course.tasks import EXPORTS

IMPLEMENTATIONS = ("minilm", "solutions")

__all__ = sorted(EXPORTS)


def implementation() -> str:
    """Which package `minilm.<name>` resolves to: "minilm" (the student's) or "solutions"."""
    impl = os.environ.get("MINILM_IMPL", "").strip() or "minilm"
    if impl not in IMPLEMENTATIONS:
        raise ValueError(
            f"MINILM_IMPL must be unset, 'minilm' (your code) or 'solutions' (the reference), "
            f"got {impl!r}"
        )
    return impl


implementation()  # fail at import, before any work, on a bad value

# `python -m minilm` (the same program as the `minilm` command) keeps working while
# minilm/ itself holds only the student's files: its __main__ lives in minilm/course/entry.
__path__.append(os.path.join(os.path.dirname(__file__), "course", "entry"))


def exercise_module(module: str):
    """The exercise module `module` (e.g. "rmsnorm") of the selected implementation."""
    if implementation() == "solutions":
        try:
            return importlib.import_module(f"solutions.{module}")
        except ModuleNotFoundError as e:
            if e.name != "solutions":
                raise
            raise ImportError(
                "MINILM_IMPL=solutions, but the solutions package is not installed here "
                "(the student edition does not ship it). Unset MINILM_IMPL to run your own code."
            ) from None
    return importlib.import_module(f"minilm.{module}")


class _Minilm(types.ModuleType):
    """`minilm.linear` is the function, even after the submodule minilm/linear.py is imported
    (which makes Python set a module attribute of the same name). Exported names are resolved
    on every access, so the switch, and tests that patch the reference, always apply."""

    def __getattribute__(self, name: str):
        if name in EXPORTS:
            return getattr(exercise_module(EXPORTS[name]), name)
        return super().__getattribute__(name)


sys.modules[__name__].__class__ = _Minilm


def __dir__():
    return sorted(set(globals()) | set(EXPORTS))
