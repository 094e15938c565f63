"""Pictures for notebook 09 (tokenization and data): GPT-2 tokens drawn as colored spans over
real text, BPE merges replayed step by step, the compression of a trained BPE against GPT-2's,
token statistics of Tiny Shakespeare, and a batch (x, y) from get_batch.

Everything here reads the tokenizer through tiktoken's public API (encode, decode_single_token_bytes,
encode_single_token), so it is deterministic: the same text always gives the same pictures.
"""

from __future__ import annotations

import contextlib
import html
import os
import tempfile
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure
from matplotlib.patches import FancyArrowPatch, Rectangle

import minilm.course.viz  # noqa: F401  (the course's shared matplotlib style)
from minilm.course import corpus

# Pastel backgrounds for neighbouring tokens (a token never has the color of the one before it).
SPAN_COLORS = ("#ffd6a5", "#caffbf", "#9bf6ff", "#bdb2ff", "#ffc6ff", "#fdffb6", "#a0c4ff", "#ffadad")


# ---------------------------------------------------------------- tokens as text


def token_text(token_bytes: bytes) -> str:
    """A token's bytes as printable text: spaces as ·, newlines as ↵, and bytes that are only part
    of a UTF-8 character (BPE splits rare characters into bytes) as ⟨hex⟩."""
    try:
        text = token_bytes.decode("utf-8")
    except UnicodeDecodeError:
        return "⟨" + " ".join(f"{b:02x}" for b in token_bytes) + "⟩"
    return text.replace(" ", "·").replace("\n", "↵").replace("\t", "⇥")


def tokens_of(enc, text: str) -> list[tuple[int, bytes]]:
    """(id, bytes) of every token of `text` under the tokenizer `enc` (tiktoken Encoding)."""
    return [(i, enc.decode_single_token_bytes(i)) for i in enc.encode_ordinary(text)]


def token_spans_html(enc, texts: Sequence[str], labels: Sequence[str] | None = None) -> str:
    """HTML: each text drawn as colored token spans (hover a span for its id), with its count of
    characters and tokens. Spaces show as ·, newlines as ↵, partial UTF-8 bytes as ⟨hex⟩."""
    rows = []
    for n, text in enumerate(texts):
        spans = []
        for k, (token_id, token_bytes) in enumerate(tokens_of(enc, text)):
            color = SPAN_COLORS[k % len(SPAN_COLORS)]
            spans.append(f'<span title="id {token_id}" style="background:{color};padding:1px 0;'
                         f'margin-right:1px;border-radius:3px">{html.escape(token_text(token_bytes))}</span>')
        label = html.escape(labels[n]) if labels else f"{len(text)} chars → {len(spans)} tokens"
        rows.append(f'<tr><td style="text-align:left;color:#555;white-space:nowrap;padding-right:12px">{label}</td>'
                    f'<td style="text-align:left;font-family:monospace;font-size:13px;line-height:1.9">'
                    f'{"".join(spans)}</td></tr>')
    return '<table style="border-collapse:collapse">' + "".join(rows) + "</table>"


def show_tokens(enc, texts: Sequence[str], labels: Sequence[str] | None = None):
    """The HTML of token_spans_html as an object that Jupyter displays (the cell's last line)."""
    from IPython.display import HTML

    return HTML(token_spans_html(enc, texts, labels))


# ---------------------------------------------------------------- BPE, replayed


def bpe_merges(enc, chunk: str) -> list[list[bytes]]:
    """Replay byte-pair encoding on one pre-tokenized chunk (e.g. " Shakespeare").

    Start from the chunk's UTF-8 bytes; at every step merge the adjacent pair whose
    concatenation is the token with the lowest rank (GPT-2 learned its merges in rank order,
    and a token's id is its rank); stop when no adjacent pair forms a token. Returns the parts
    after every step, from the single bytes to the final tokens."""
    parts = [bytes([b]) for b in chunk.encode("utf-8")]
    steps = [parts]
    while len(parts) > 1:
        best = None  # (rank, position)
        for i in range(len(parts) - 1):
            try:
                rank = enc.encode_single_token(parts[i] + parts[i + 1])
            except KeyError:
                continue
            if best is None or rank < best[0]:
                best = (rank, i)
        if best is None:
            break
        i = best[1]
        parts = parts[:i] + [parts[i] + parts[i + 1]] + parts[i + 2:]
        steps.append(parts)
    return steps


def format_merges(steps: list[list[bytes]]) -> str:
    """The merge steps of bpe_merges as text lines, parts separated by |."""
    return "\n".join(f"{k:2d}: " + "|".join(token_text(p) for p in parts) for k, parts in enumerate(steps))


def compression_table(vocab: dict[int, bytes], held_out: str, sizes: Sequence[int]) -> dict[str, list[float]]:
    """Bytes per token of `held_out` at each vocabulary size in `sizes`: under the BPE `vocab`
    (train_bpe's) cut to its first `size` tokens, and under GPT-2's first `size` tokens. Cutting
    a BPE's vocabulary after its first k merges gives the BPE that k merges would have learned,
    so one training run serves every size. Also "gpt2 (all)": GPT-2's full tokenizer."""
    sizes = list(sizes)
    if max(sizes) > len(vocab):
        raise ValueError(f"compression_table: the largest size {max(sizes)} is more than the {len(vocab)} tokens "
                         "of vocab")
    ours = [corpus.bytes_per_token(corpus.bpe_tokenizer({i: vocab[i] for i in range(n)}), held_out) for n in sizes]
    gpt2 = [corpus.bytes_per_token(corpus.gpt2_prefix_tokenizer(n), held_out) for n in sizes]
    return {"sizes": sizes, "ours": ours, "gpt2": gpt2,
            "gpt2 (all)": corpus.bytes_per_token(corpus.tokenizer(), held_out)}


def plot_compression(table: dict[str, list[float]]) -> Figure:
    """Bytes per token against vocabulary size (compression_table's result): the BPE trained on
    Tiny Shakespeare, GPT-2's first merges, and GPT-2's full 50,257 tokens as a dashed line."""
    sizes = table["sizes"]
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.plot(sizes, table["ours"], "o-", color="C0", label="BPE trained on Tiny Shakespeare (yours)")
    ax.plot(sizes, table["gpt2"], "s-", color="C1", label="GPT-2 cut to its first merges")
    ax.axhline(table["gpt2 (all)"], color="C1", ls="--", lw=1, label="GPT-2, all 50,257 tokens")
    ax.set_xscale("log", base=2)
    ax.set_xticks(sizes, [f"{n:,}" for n in sizes])
    ax.set(title="Compression of held-out Tiny Shakespeare", xlabel="vocabulary size (256 bytes + merges)",
           ylabel="bytes per token (higher = shorter)")
    ax.legend()
    fig.tight_layout()
    return fig


# ---------------------------------------------------------------- corpus statistics


def words_and_tokens(enc, text: str) -> tuple[np.ndarray, np.ndarray]:
    """Tokens per whitespace-separated word of `text` (each word encoded with its leading space,
    as it appears mid-sentence) and the character lengths of all the tokens of `text`."""
    cache: dict[str, int] = {}
    per_word = []
    for word in text.split():
        if word not in cache:
            cache[word] = len(enc.encode_ordinary(" " + word))
        per_word.append(cache[word])
    token_chars = [len(b) for _, b in tokens_of(enc, text)]
    return np.asarray(per_word), np.asarray(token_chars)


def plot_token_stats(enc, text: str, tokens: np.ndarray) -> Figure:
    """Three panels about the corpus: tokens per word, bytes per token, and the token
    frequencies by rank on log–log axes (Zipf's law)."""
    per_word, token_chars = words_and_tokens(enc, text)
    counts = np.sort(np.bincount(np.asarray(tokens, dtype=np.int64)))[::-1]
    counts = counts[counts > 0]
    fig, (ax1, ax2, ax3) = plt.subplots(1, 3, figsize=(12, 3.6))
    k = np.arange(1, 7)
    share = [(per_word == i).mean() if i < 6 else (per_word >= 6).mean() for i in k]
    ax1.bar([str(i) for i in k[:-1]] + ["6+"], 100 * np.asarray(share), color="C0")
    ax1.set(title=f"Tokens per word (mean {per_word.mean():.2f})", xlabel="GPT-2 tokens in the word",
            ylabel="% of words")
    m = np.arange(1, 11)
    ax2.bar([str(i) for i in m[:-1]] + ["10+"],
            100 * np.asarray([(token_chars == i).mean() if i < 10 else (token_chars >= 10).mean() for i in m]),
            color="C2")
    ax2.set(title=f"Bytes per token (mean {token_chars.mean():.2f})", xlabel="bytes in the token",
            ylabel="% of tokens")
    rank = np.arange(1, len(counts) + 1)
    ax3.loglog(rank, counts, color="C3", label="Tiny Shakespeare")
    ax3.loglog(rank, counts[0] / rank, "k--", lw=1, label=r"Zipf: $\propto 1/\mathrm{rank}$")
    ax3.set(title=f"Token frequencies ({len(counts):,} distinct tokens)", xlabel="rank", ylabel="count")
    ax3.legend()
    fig.tight_layout()
    return fig


# ---------------------------------------------------------------- the dataset on disk


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """An exclusive lock on `path` (notebooks may run in parallel and share the data cache)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a", encoding="utf-8") as f:
        try:
            import fcntl
        except ImportError:  # Windows: no flock; notebooks there run one at a time anyway
            yield
            return
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)



def cached_result(path: Path, compute: Callable[[], dict]) -> dict:
    """compute()'s result, saved at `path` the first time (under a lock, written whole or not at all) and
    read back afterwards: the notebooks' training runs, shared by notebooks running side by side."""
    import torch

    path.parent.mkdir(parents=True, exist_ok=True)
    with _locked(path.with_suffix(".lock")):
        if path.exists():
            return torch.load(path, map_location="cpu", weights_only=True)
        result = compute()
        fd, tmp = tempfile.mkstemp(prefix=path.name, suffix=".part", dir=path.parent)
        os.close(fd)
        try:
            torch.save(result, tmp)
            os.replace(tmp, path)
        finally:
            Path(tmp).unlink(missing_ok=True)
        return result

def shakespeare_dataset(out_dir: str | os.PathLike | None = None) -> tuple[Path, Path]:
    """Tiny Shakespeare downloaded (once), encoded with GPT-2 and split (once) into
    out_dir/train.npy and out_dir/val.npy (default out_dir: corpus.data_dir()/tinyshakespeare),
    under a file lock so that notebooks running at the same time never write it twice at once."""
    out_dir = Path(out_dir) if out_dir is not None else corpus.data_dir() / "tinyshakespeare"
    with _locked(out_dir.parent / f".{out_dir.name}.lock"):
        return corpus.prepare_dataset(corpus.download_tinyshakespeare(), out_dir)


# ---------------------------------------------------------------- a batch


def plot_batch(x, y, decode: Callable[[int], str], rows: int = 3, cols: int = 10) -> Figure:
    """Draw the first `rows` sequences of a batch: for each, the inputs x[b] on top and the
    targets y[b] below, first `cols` positions, one token per cell (the same color for the same
    token id). The arrows show that y[b, t] is x[b, t + 1]: the token that comes next."""
    x, y = np.asarray(x)[:rows, :cols], np.asarray(y)[:rows, :cols]
    fig, ax = plt.subplots(figsize=(1.05 * cols + 1.2, 1.25 * rows + 0.6))
    cmap = plt.get_cmap("tab20")
    band = 2.6  # vertical space per sequence: x row, y row and a gap
    for b in range(rows):
        for r, (name, ids) in enumerate((("x", x[b]), ("y", y[b]))):
            top = -(b * band + r * 1.1)
            ax.text(-0.25, top - 0.45, f"{name}[{b}]", ha="right", va="center", fontsize=10,
                    fontweight="bold", color="C0" if name == "x" else "C3")
            for t, token in enumerate(ids.tolist()):
                ax.add_patch(Rectangle((t, top - 0.9), 0.95, 0.9, facecolor=cmap(token % 20), alpha=0.45,
                                       edgecolor="0.4", lw=0.6))
                ax.text(t + 0.475, top - 0.45, decode(token), ha="center", va="center", fontsize=8,
                        family="monospace", clip_on=True)
        for t in range(1, len(x[b])):  # x[b, t] is the target y[b, t - 1]
            top = -b * band
            ax.add_patch(FancyArrowPatch((t + 0.3, top - 0.92), (t - 0.3, top - 1.08), arrowstyle="-|>",
                                         mutation_scale=7, color="0.35", lw=0.7))
    ax.set_xlim(-1.4, cols)
    ax.set_ylim(-(rows - 1) * band - 2.2, 0.15)
    ax.set_xticks(np.arange(cols) + 0.475, [str(t) for t in range(cols)])
    ax.set_yticks([])
    ax.grid(False)
    for side in ("left", "top", "right"):
        ax.spines[side].set_visible(False)
    ax.set(title="A batch from get_batch: each target row y is its input row x shifted left by one",
           xlabel="position t in the window")
    fig.tight_layout()
    return fig
