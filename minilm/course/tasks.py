"""The task registry: the one list of exercises that tests, notebooks, the status
command and the grader all read. A task starts with its row here; what it is checked and graded
on is its spec (minilm/course/exercises/), and docs/contributing.md lists every other piece it needs.

It also names each task's part of the "from scratch" rule that minilm/course/rules judges by what
runs: the families of built-ins that may not run while the task runs (`Task.forbidden`, families of
minilm/course/rules/families.py) and what it may call that no task's code may otherwise
(`Task.allowed`: 10.5 opens files)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

COURSE_DIR = Path(__file__).resolve().parent  # minilm/course: the provided code
PACKAGE_DIR = COURSE_DIR.parent  # minilm: the exercise modules
ROOT = PACKAGE_DIR.parent

# A course notebook's name: its number, a letter when one chapter spans two (10, 10b, 10c), "_", its topic.
NOTEBOOK_NAME = re.compile(r"\d\d[a-z]?_\w+\.ipynb$")


def course_notebooks(folder: Path | None = None) -> list[Path]:
    """The course's notebooks in their order (notebooks/ by default), without scratch copies beside them."""
    return sorted(p for p in Path(folder or ROOT / "notebooks").iterdir() if NOTEBOOK_NAME.match(p.name))


@dataclass(frozen=True)
class Task:
    id: str  # "3.1": notebook number . exercise number
    title: str
    function: str  # the contract name students write (a function or a class)
    file: str  # where the stub lives, relative to the project root
    notebook: str  # the notebook that teaches and checks it
    points: int
    # The built-ins this task builds itself or must reuse the student's own version of:
    # (family in minilm/course/rules/families.py FAMILIES, what to do instead).
    forbidden: tuple[tuple[str, str], ...] = ()
    # What this task's code may call beyond what families.ESCAPE_MODULES refuses every other task (10.5 saves files).
    allowed: tuple[str, ...] = ()
    # Further top-level functions the task writes besides `function` (rope's rope_angles and rotate_pairs).
    also: tuple[str, ...] = ()
    # The earlier tasks whose code this task's code (or its check) calls: when this task's check
    # fails while one of them fails its own, the check says to fix that one first. Direct uses
    # only; `prerequisites` follows them through (8.1 uses 7.1, which uses 6.3, … 5.1).
    uses: tuple[str, ...] = ()

    @property
    def module(self) -> str:
        """Module name inside minilm/solutions, e.g. "rmsnorm"."""
        return Path(self.file).stem

    @property
    def marker(self) -> str:
        """The pytest marker argument that selects this task's tests."""
        return self.id

    @property
    def names(self) -> tuple[str, ...]:
        """The top-level names (functions, classes) whose code belongs to this task."""
        return (self.function, *self.also)

    def todo_message(self, where: str | None = None) -> str:
        return f"Task {self.id} is not implemented yet: write {where or self.function} in {self.file}"


def _t(id, title, function, module, notebook, points, *forbidden, allowed=(), also=(), uses=()):
    return Task(id, title, function, f"minilm/{module}.py", f"notebooks/{notebook}.ipynb", points,
                tuple(forbidden), tuple(allowed), tuple(also), tuple(uses))


# The "from scratch" rule of each task: a pair (family in FAMILIES, what to use instead). A task
# may not call the built-in it builds, nor, in later tasks, the built-ins of the pieces the
# student built already (Task 6.3 uses your Linear, not nn.Linear). The sampling filter of Task
# 11.1 may use torch.softmax: building softmax is Task 6.1's lesson, not 11.1's.
_LINEAR = ("linear", "use your Linear (Task 1.2)")
_SILU = ("activation", "use your silu (Task 4.1)")
_SOFTMAX_OWN = ("softmax", "use your softmax (Task 6.1)")

TASKS: tuple[Task, ...] = (
    _t("1.1", "linear: y = x Wᵀ", "linear", "linear", "01_linear", 2,
       ("linear", "multiply by the transposed weight, x @ weight.T")),
    _t("1.2", "Linear module and its initialization", "Linear", "linear", "01_linear", 3,
       ("linear", "hold the weight in an nn.Parameter and call your linear (Task 1.1)"), uses=("1.1",)),
    _t("2.1", "embedding lookup", "embedding", "embedding", "02_embedding", 2,
       ("embedding", "index the weight's rows, weight[token_ids]")),
    _t("2.2", "Embedding module and its initialization", "Embedding", "embedding", "02_embedding", 3,
       ("embedding", "hold the weight in an nn.Parameter and call your embedding (Task 2.1)"), uses=("2.1",)),
    _t("3.1", "rms_norm", "rms_norm", "rmsnorm", "03_rmsnorm", 2,
       ("norm", "compute x / sqrt(mean(x²) + eps) · weight with pow, mean and rsqrt")),
    _t("3.2", "RMSNorm module", "RMSNorm", "rmsnorm", "03_rmsnorm", 2,
       ("norm", "call your rms_norm (Task 3.1)"), uses=("3.1",)),
    _t("4.1", "SiLU", "silu", "swiglu", "04_swiglu", 1,
       ("activation", "multiply x by torch.sigmoid(x)")),
    _t("4.2", "swiglu", "swiglu", "swiglu", "04_swiglu", 2,
       _SILU, ("linear", "use your linear (Task 1.1)"), uses=("1.1", "4.1")),
    _t("4.3", "SwiGLU module", "SwiGLU", "swiglu", "04_swiglu", 2,
       _SILU, _LINEAR, uses=("1.2", "4.1")),
    _t("5.1", "RoPE: rope_angles, rotate_pairs and rope", "rope", "rope", "05_rope", 3,
       also=("rope_angles", "rotate_pairs")),
    _t("5.2", "RotaryPositionalEmbedding with cached cos/sin", "RotaryPositionalEmbedding", "rope", "05_rope", 3,
       uses=("5.1",)),
    _t("6.1", "stable softmax", "softmax", "attention", "06_attention", 2,
       ("softmax", "build it from exp and sum")),
    _t("6.2", "scaled dot-product attention", "scaled_dot_product_attention", "attention", "06_attention", 3,
       ("attention", "compute softmax(q kᵀ / √d_k) v yourself"), _SOFTMAX_OWN, uses=("6.1",)),
    _t("6.3", "causal multi-head self-attention", "MultiHeadSelfAttention", "attention", "06_attention", 5,
       ("attention", "use your scaled_dot_product_attention (Task 6.2)"), _SOFTMAX_OWN, _LINEAR,
       uses=("1.2", "5.1", "5.2", "6.2")),
    _t("7.1", "pre-norm Transformer block", "TransformerBlock", "block", "07_block", 4,
       ("attention", "use your MultiHeadSelfAttention (Task 6.3)"),
       ("softmax", "use your MultiHeadSelfAttention (Task 6.3)"),
       ("norm", "use your RMSNorm (Task 3.2)"), ("activation", "use your SwiGLU (Task 4.3)"), _LINEAR,
       uses=("3.2", "4.3", "6.3")),
    _t("8.1", "Transformer language model", "TransformerLM", "model", "08_model", 5,
       ("embedding", "use your Embedding (Task 2.2)"), ("attention", "use your TransformerBlock (Task 7.1)"),
       ("softmax", "use your TransformerBlock (Task 7.1)"), ("norm", "use your RMSNorm (Task 3.2)"),
       ("activation", "use your TransformerBlock (Task 7.1)"), _LINEAR, uses=("1.2", "2.2", "3.2", "7.1")),
    _t("9.1", "get_batch", "get_batch", "data", "09_data", 3),
    _t("9.2", "train a byte-level BPE", "train_bpe", "bpe", "09_data", 4),
    _t("9.3", "encode and decode with your BPE", "Tokenizer", "bpe", "09_data", 3),
    _t("10.1", "cross-entropy", "cross_entropy", "training", "10_training", 3,
       ("cross_entropy", "use the max trick, m + log Σ exp(logits − m), minus the target's logit")),
    _t("10.2", "global gradient clipping", "clip_grad_norm", "training", "10_training", 2,
       ("clip", "sum every gradient's squares, take one square root and scale the gradients with mul_")),
    _t("10.3", "cosine learning-rate schedule with warmup", "lr_cosine_schedule", "training", "10_training", 2,
       ("optim", "write the three cases with math.cos")),
    _t("10.4", "AdamW", "AdamW", "training", "10_training", 5,
       ("optim", "update p, m and v yourself (mul_, add_, addcmul_, addcdiv_)")),
    _t("10.5", "checkpoints", "save_checkpoint", "training", "10_training", 2,
       allowed=("torch.serialization", "_io.open", "io.open"), also=("load_checkpoint",)),
    _t("10.6", "the training loop", "train", "training", "10b_train", 4,
       ("clip", "clip with your clip_grad_norm (Task 10.2)"), uses=("10.2",)),
    _t("11.1", "sampling: greedy, temperature, top-k, top-p", "next_token_probs", "generation",
       "11_generation", 3, uses=("6.1",)),
    _t("11.2", "the generation loop", "generate", "generation", "11_generation", 3, uses=("11.1",)),
    _t("11.3", "KV cache and its path through the model", "KVCache", "generation",
       "11_generation", 4, uses=("6.3", "8.1", "11.2")),
    _t("12.1", "int8 quantization per channel or per tensor", "quantize_int8", "quantization",
       "12_quantization", 3, ("quantize", "divide by absmax / 127, round with torch.round and clamp to ±127"),
       also=("dequantize_int8",)),
    _t("12.2", "int8 weights and float scales in a layer", "Int8Linear", "quantization", "12_quantization", 3,
       ("quantize", "use your quantize_int8 and dequantize_int8 (Task 12.1)"),
       ("linear", "call your linear (Task 1.1) on the dequantized weight"), uses=("1.1", "1.2", "12.1")),
    _t("12.3", "quantize every Linear of a model", "quantize_model", "quantization", "12_quantization", 2,
       ("quantize", "use your Int8Linear (Task 12.2)"),
       ("linear", "find your Linear (Task 1.2) modules and use your Int8Linear (Task 12.2)"),
       uses=("1.2", "8.1", "12.2")),
) + (
    # Notebook 13: the 2017 decoder beside today's, built from the pieces above.
    _t("13.1", "LayerNorm, with a bias", "layer_norm", "classic", "13_classic_vs_modern", 2,
       ("norm", "subtract the mean, then divide by sqrt(mean of the squares + eps) with mean, pow and rsqrt"),
       also=("LayerNorm",)),
    _t("13.2", "sinusoidal positions", "sinusoidal_positions", "classic", "13_classic_vs_modern", 2),
    _t("13.3", "GELU, exact (erf) form", "gelu", "classic", "13_classic_vs_modern", 1,
       ("activation", "write 0.5 · x · (1 + erf(x / √2)) with torch.erf")),
    _t("13.4", "GELU feed-forward network", "GeluFFN", "classic", "13_classic_vs_modern", 2,
       ("activation", "use your gelu (Task 13.3)"), _LINEAR, uses=("1.2", "13.3")),
    _t("13.5", "configurable pre-/post-norm block", "ClassicBlock", "classic", "13_classic_vs_modern", 4,
       ("attention", "use your MultiHeadSelfAttention (Task 6.3)"),
       ("softmax", "use your MultiHeadSelfAttention (Task 6.3)"),
       ("norm", "use your RMSNorm (Task 3.2) or LayerNorm (Task 13.1)"),
       ("activation", "use your SwiGLU (Task 4.3) or GeluFFN (Task 13.4)"), _LINEAR,
       uses=("3.2", "4.3", "5.1", "6.3", "13.1", "13.4")),
    _t("13.6", "configurable language model", "ClassicLM", "classic", "13_classic_vs_modern", 4,
       ("embedding", "use your Embedding (Task 2.2)"), ("attention", "use your ClassicBlock (Task 13.5)"),
       ("softmax", "use your ClassicBlock (Task 13.5)"),
       ("norm", "use your RMSNorm (Task 3.2) or LayerNorm (Task 13.1)"),
       ("activation", "use your ClassicBlock (Task 13.5)"), _LINEAR,
       uses=("1.2", "2.2", "3.2", "13.1", "13.2", "13.5")),
) + (
    # Notebook 14: the modern recipe, measured on the course's model.
    _t("14.1", "Newton–Schulz orthogonalization (quintic)", "newton_schulz", "modern", "14_modern_recipe", 2,
       ("optim", "matmuls only: X Xᵀ and the quintic's three terms")),
    _t("14.2", "Muon", "Muon", "modern", "14_modern_recipe", 4,
       ("optim", "update p and the momentum buffer yourself (mul_, add_) and call your newton_schulz (Task 14.1)"),
       uses=("14.1",)),
    _t("14.3", "parameter groups: Muon, AdamW with and without decay", "parameter_groups", "modern",
       "14_modern_recipe", 2, ("optim", "sort model.named_parameters() yourself"), uses=("2.2",)),
    _t("14.4", "warmup–stable–decay learning rate", "lr_wsd_schedule", "modern", "14_modern_recipe", 2,
       ("optim", "write the four cases yourself")),
    _t("14.5", "logit soft-cap", "softcap", "modern", "14_modern_recipe", 1),
    _t("14.6", "ReLU² feed-forward network", "ReLUSquaredFFN", "modern", "14_modern_recipe", 2,
       ("activation", "square torch.relu(x)"), _LINEAR, uses=("1.2",)),
    # Notebook 15: inside the trained model, with the student's own attention.
    _t("15.1", "catch each attention's input with forward pre-hooks", "attention_inputs", "inside", "15_inside", 3,
       uses=("8.1",)),
    _t("15.2", "previous-token and induction scores", "previous_token_score", "inside", "15_inside", 2,
       also=("induction_score",)),
    _t("15.3", "ablate heads with a forward pre-hook", "ablate_heads", "inside", "15_inside", 2, uses=("6.3",)),
    # Notebook 16: past the data limit, regularizing and distilling the student's model.
    _t("16.1", "inverted dropout", "dropout", "datalimit", "16_data_limit", 2,
       ("dropout", "draw the mask with torch.rand and scale the kept entries yourself")),
    _t("16.2", "knowledge-distillation loss", "distillation_loss", "datalimit", "16_data_limit", 3,
       ("softmax", "log-softmax by the max trick yourself, and your cross_entropy (Task 10.1) for the hard part"),
       ("kl_div", "sum p · (log p − log q) over the vocabulary yourself"), uses=("10.1",)),
)

BY_ID: dict[str, Task] = {t.id: t for t in TASKS}

# Every public name that `import minilm` exposes, and the exercise module that defines it: each
# task's function and the further names it writes (rope_angles, load_checkpoint, …), so the checks
# and the grader can call them.
EXPORTS: dict[str, str] = {name: t.module for t in TASKS for name in t.names}
# Notebook 13: ClassicConfig is provided, beside the tasks that build from it.
EXPORTS["ClassicConfig"] = "classic"
# Notebook 10b: what the training loop yields.
EXPORTS["Step"] = "training"
# Notebook 14: the provided constants and helpers beside its tasks.
EXPORTS["NS_COEFFICIENTS"] = "modern"
EXPORTS["matched_relu2_d_ff"] = "modern"

EXERCISE_MODULES: tuple[str, ...] = tuple(dict.fromkeys(t.module for t in TASKS))


def get(task_id: str) -> Task:
    try:
        return BY_ID[task_id]
    except KeyError:
        known = ", ".join(BY_ID)
        raise ValueError(f"unknown task id {task_id!r}; the tasks are: {known}") from None


def prerequisites(task_id: str) -> tuple[Task, ...]:
    """The earlier tasks whose code `task_id`'s code runs, directly or through others, in course order."""
    seen: set[str] = set()
    todo = list(get(task_id).uses)
    while todo:
        t = todo.pop()
        if t not in seen:
            seen.add(t)
            todo += BY_ID[t].uses
    return tuple(t for t in TASKS if t.id in seen)


def for_notebook(notebook: str) -> tuple[Task, ...]:
    """Tasks taught in a notebook, given its file name or stem (e.g. "03_rmsnorm")."""
    stem = Path(notebook).stem
    return tuple(t for t in TASKS if Path(t.notebook).stem == stem)
