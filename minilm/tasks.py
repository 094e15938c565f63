"""The task registry: the one list of exercises that tests, notebooks, the status
command and the grader all read. Add a task here and nowhere else."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
ROOT = PACKAGE_DIR.parent


@dataclass(frozen=True)
class Task:
    id: str  # "3.1": notebook number . exercise number
    title: str
    function: str  # the contract name students write (a function or a class)
    file: str  # where the stub lives, relative to the project root
    notebook: str  # the notebook that teaches and checks it
    points: int

    @property
    def module(self) -> str:
        """Module name inside minilm/solutions, e.g. "rmsnorm"."""
        return Path(self.file).stem

    @property
    def marker(self) -> str:
        """The pytest marker argument that selects this task's tests."""
        return self.id

    def todo_message(self, where: str | None = None) -> str:
        return f"Task {self.id} is not implemented yet: write {where or self.function} in {self.file}"


def _t(id, title, function, module, notebook, points):
    return Task(id, title, function, f"minilm/{module}.py", f"notebooks/{notebook}.ipynb", points)


TASKS: tuple[Task, ...] = (
    _t("1.1", "linear: y = x Wᵀ", "linear", "linear", "01_linear", 2),
    _t("1.2", "Linear module and its initialization", "Linear", "linear", "01_linear", 3),
    _t("2.1", "embedding lookup", "embedding", "embedding", "02_embedding", 2),
    _t("2.2", "Embedding module and its initialization", "Embedding", "embedding", "02_embedding", 3),
    _t("3.1", "rms_norm", "rms_norm", "rmsnorm", "03_rmsnorm", 2),
    _t("3.2", "RMSNorm module", "RMSNorm", "rmsnorm", "03_rmsnorm", 2),
    _t("4.1", "SiLU", "silu", "swiglu", "04_swiglu", 1),
    _t("4.2", "swiglu", "swiglu", "swiglu", "04_swiglu", 2),
    _t("4.3", "SwiGLU module", "SwiGLU", "swiglu", "04_swiglu", 2),
    _t("5.1", "rope: rotate adjacent pairs", "rope", "rope", "05_rope", 3),
    _t("5.2", "RotaryPositionalEmbedding with cached cos/sin", "RotaryPositionalEmbedding", "rope", "05_rope", 3),
    _t("6.1", "stable softmax", "softmax", "attention", "06_attention", 2),
    _t("6.2", "scaled dot-product attention", "scaled_dot_product_attention", "attention", "06_attention", 3),
    _t("6.3", "causal multi-head self-attention", "MultiHeadSelfAttention", "attention", "06_attention", 5),
    _t("7.1", "pre-norm Transformer block", "TransformerBlock", "block", "07_block", 4),
    _t("8.1", "Transformer language model", "TransformerLM", "model", "08_model", 5),
    _t("9.1", "get_batch", "get_batch", "data", "09_data", 3),
    _t("10.1", "cross-entropy", "cross_entropy", "training", "10_training", 3),
    _t("10.2", "global gradient clipping", "clip_grad_norm", "training", "10_training", 2),
    _t("10.3", "cosine learning-rate schedule with warmup", "lr_cosine_schedule", "training", "10_training", 2),
    _t("10.4", "AdamW", "AdamW", "training", "10_training", 5),
    _t("10.5", "checkpoints", "save_checkpoint", "training", "10_training", 2),
    _t("11.1", "generate: greedy, temperature, top-k, top-p", "generate", "generation", "11_generation", 4),
    _t("11.2", "KV cache", "KVCache", "generation", "11_generation", 4),
)

BY_ID: dict[str, Task] = {t.id: t for t in TASKS}

# Every public name that `import minilm` exposes, and the exercise module that defines it.
# Names that are not tasks themselves (load_checkpoint, its partner) ride along with their module.
EXPORTS: dict[str, str] = {t.function: t.module for t in TASKS} | {"load_checkpoint": "training"}

EXERCISE_MODULES: tuple[str, ...] = tuple(dict.fromkeys(t.module for t in TASKS))


def get(task_id: str) -> Task:
    try:
        return BY_ID[task_id]
    except KeyError:
        known = ", ".join(BY_ID)
        raise ValueError(f"unknown task id {task_id!r}; the tasks are: {known}") from None


def for_notebook(notebook: str) -> tuple[Task, ...]:
    """Tasks taught in a notebook, given its file name or stem (e.g. "03_rmsnorm")."""
    stem = Path(notebook).stem
    return tuple(t for t in TASKS if Path(t.notebook).stem == stem)
