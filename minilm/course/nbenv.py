"""The environment that notebooks run in under nbval and when their outputs are regenerated
(provided). Both must match, or stored outputs would differ from fresh ones."""

from __future__ import annotations

from minilm.course.tasks import ROOT


def kernel_env() -> dict[str, str]:
    """Progress bars and deprecation warnings off (they never belong in stored outputs) and,
    on offline course machines that keep local copies in ../shared, tiktoken's gpt2 files and
    Tiny Shakespeare from there. On a student's machine both download once, automatically."""
    env = {"TQDM_DISABLE": "1", "PYTHONWARNINGS": "ignore::DeprecationWarning"}
    shared = ROOT.parent / "shared"
    if (shared / "tiktoken").is_dir():
        env["TIKTOKEN_CACHE_DIR"] = str(shared / "tiktoken")
    if (shared / "data" / "tinyshakespeare.txt").is_file():
        env["MINILM_TINYSHAKESPEARE"] = str(shared / "data" / "tinyshakespeare.txt")
    return env
