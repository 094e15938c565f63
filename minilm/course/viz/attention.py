"""Pictures, hand-wired heads and the attention explorer for notebooks/06_attention.ipynb
(provided: not an exercise).

MultiHeadSelfAttention returns its output, not its attention weights, so `attention_weights`
recomputes each head's queries and keys from your module's own q_proj, k_proj and rope and asks
your scaled_dot_product_attention for the weights (attention over an identity matrix of values
is the weights themselves). Nothing here computes attention itself.
"""

from __future__ import annotations

import html
import math
import os

import ipywidgets as widgets
import matplotlib.pyplot as plt
import numpy as np
import torch
from matplotlib.figure import Figure
from torch import nn

import minilm
from minilm.course import corpus, vocab
from minilm.course.checks import CannotShow
from minilm.course.viz import picture

# ---------------------------------------------------------------- why 1/sqrt(d_k)


def plot_score_scaling(d_ks: tuple[int, ...] = (4, 16, 64, 256, 1024), num_samples: int = 2000,
                       num_keys: int = 16) -> Figure:
    """Left: the std of q·k for random unit-variance q, k grows like sqrt(d_k); divided by sqrt(d_k)
    it stays 1. Right: softmax over 16 such scores at d_k=1024, unscaled (one-hot) vs scaled."""
    torch.manual_seed(0)
    raw, scaled = [], []
    for d in d_ks:
        s = (torch.randn(num_samples, d) * torch.randn(num_samples, d)).sum(-1)  # q·k, (samples,)
        raw.append(s.std().item())
        scaled.append((s / math.sqrt(d)).std().item())
    fig, (ax0, ax1) = plt.subplots(1, 2, figsize=(11, 3.8))
    ax0.plot(d_ks, raw, "o-", label="std of q·k")
    ax0.plot(d_ks, [math.sqrt(d) for d in d_ks], "k--", lw=1, label="sqrt(d_k)")
    ax0.plot(d_ks, scaled, "o-", label="std of q·k / sqrt(d_k)")
    ax0.set(xscale="log", yscale="log", title="Scores grow with d_k unless scaled", xlabel="d_k",
            ylabel="standard deviation")
    ax0.legend()
    d = d_ks[-1]
    scores = (torch.randn(num_keys, d) * torch.randn(num_keys, d)).sum(-1)  # one query, num_keys keys
    keys = np.arange(num_keys)
    # Random scores: a picture of saturation, not Task 6.1.
    plain = torch.softmax(scores, -1).numpy()  # release: not a task (a picture)
    scaled = torch.softmax(scores / math.sqrt(d), -1).numpy()  # release: not a task (a picture)
    ax1.bar(keys - 0.2, plain, width=0.4, label="softmax(q·k)")
    ax1.bar(keys + 0.2, scaled, width=0.4, label="softmax(q·k / sqrt(d_k))")
    ax1.set(title=f"Unscaled scores saturate the softmax (d_k={d})", xlabel="key", ylabel="attention weight")
    ax1.legend()
    fig.tight_layout()
    return fig


# ---------------------------------------------------------------- attention maps


def causal_mask(seq: int) -> torch.Tensor:
    """(seq, seq) bool, True = may attend: query t sees keys 0 … t."""
    return torch.ones(seq, seq, dtype=torch.bool).tril()


def _shown(task: str, what: str, e: Exception) -> CannotShow:
    text = " ".join(f"{type(e).__name__}: {e}".split())
    return CannotShow(f"Task {task}: {what} raised {text[:160]}; check(\"{task}\") says what to fix")


def attention_weights(attn: nn.Module, x: torch.Tensor, positions: torch.Tensor | None = None) -> torch.Tensor:
    """The causal attention weights of every head of your MultiHeadSelfAttention on x (..., seq, d_model):
    (..., heads, seq, seq), recomputed from the parts Task 6.3's contract names, as its forward
    uses them: q = attn.q_proj(x) and k = attn.k_proj(x), head h from rows h·d_k … (h+1)·d_k − 1,
    rotated by attn.rope (when it is not None) at `positions` (default 0 … seq − 1), then your
    scaled_dot_product_attention (Task 6.2) with the causal mask and the identity as values:
    softmax(…) @ I is the weights. Your forward itself is not run, so a module that computes
    attention inline is shown as well as one that calls scaled_dot_product_attention.

    A stub raises its NotImplementedError (`needs` prints its line); anything else that stops the
    recomputation raises CannotShow, one line naming the task to fix."""
    sdpa = minilm.exercise_module("attention").scaled_dot_product_attention
    seq = x.shape[-2]
    if positions is None:
        positions = torch.arange(seq, device=x.device)
    try:
        heads, d_k = int(attn.num_heads), int(attn.d_k)
        with torch.no_grad():
            q, k = (proj(x).unflatten(-1, (heads, d_k)).transpose(-3, -2) for proj in (attn.q_proj, attn.k_proj))
            if attn.rope is not None:  # the positions of every head of a row, as Task 6.3 passes them
                q, k = attn.rope(q, positions.unsqueeze(-2)), attn.rope(k, positions.unsqueeze(-2))
    except NotImplementedError:
        raise
    except Exception as e:  # noqa: BLE001 - whatever the student's module raised, in one line
        raise _shown("6.3", "your MultiHeadSelfAttention's q_proj, k_proj or rope", e) from None
    eye = torch.eye(seq, dtype=q.dtype, device=q.device).expand(*k.shape[:-1], seq)  # values: the identity
    try:
        with torch.no_grad():
            weights = sdpa(q, k, eye, causal_mask(seq).to(q.device))
    except NotImplementedError:
        raise
    except Exception as e:  # noqa: BLE001
        raise _shown("6.2", "your scaled_dot_product_attention", e) from None
    if not isinstance(weights, torch.Tensor) or weights.shape != (*k.shape[:-1], seq):
        got = tuple(weights.shape) if isinstance(weights, torch.Tensor) else type(weights).__name__
        raise CannotShow(f"Task 6.2: your scaled_dot_product_attention returned {got} for values "
                         f"{tuple(eye.shape)}, expected {(*k.shape[:-1], seq)}; check(\"6.2\") says what to fix")
    return weights


def _show_map(ax, weights: torch.Tensor, tokens: list[str] | None = None, title: str = ""):
    """One attention map; the masked (future) upper triangle in gray, hatched."""
    seq = weights.shape[-1]
    w = np.ma.masked_where(~causal_mask(seq).numpy(), weights.detach().numpy())
    ax.set_facecolor("0.88")
    im = ax.imshow(w, cmap="Blues", vmin=0, vmax=1, interpolation="nearest")
    stairs = [(0.5, -0.5), (seq - 0.5, -0.5)] + [xy for r in range(seq - 2, -1, -1)
                                                 for xy in ((r + 1.5, r + 0.5), (r + 0.5, r + 0.5))]
    ax.add_patch(plt.Polygon(stairs, fill=False, hatch="//", edgecolor="0.6", lw=0))  # the masked future
    ax.grid(False)
    ax.set_title(title, fontsize=12)
    _label_tokens(ax, tokens, seq)
    return im


def token_fontsize(seq: int) -> float:
    """Tick labels as large as a row of the map allows: 11 pt up to 16 tokens, 9 pt at 24."""
    return 11.0 if seq <= 16 else max(8.0, 11.0 - (seq - 16) / 4)


def _label_tokens(ax, tokens: list[str] | None, seq: int) -> None:
    if tokens is None:
        ax.set_xlabel("key position", fontsize=11)
        ax.set_ylabel("query position", fontsize=11)
        return
    size = token_fontsize(seq)
    ax.set_xticks(range(seq), tokens, rotation=90, fontsize=size)
    ax.set_yticks(range(seq), tokens, fontsize=size)
    ax.set_xlabel("key (attended to)", fontsize=11)
    ax.set_ylabel("query (attending)", fontsize=11)


def plot_attention_map(weights: torch.Tensor, tokens: list[str] | None = None, title: str = "Attention weights"
                       ) -> Figure:
    """Heatmap of one (queries, keys) attention map; rows sum to 1, the masked future is hatched."""
    fig, ax = plt.subplots(figsize=(5.2, 4.6))
    im = _show_map(ax, weights, tokens, title)
    fig.colorbar(im, ax=ax, label="weight", fraction=0.046)
    fig.tight_layout()
    return fig


def plot_head_grid(weights: torch.Tensor, tokens: list[str] | None = None, titles: list[str] | None = None,
                   suptitle: str = "Attention weights per head") -> Figure:
    """A grid of per-head attention maps, weights (heads, seq, seq), axes labelled with the tokens."""
    heads = weights.shape[0]
    cols = min(heads, 2)
    rows = math.ceil(heads / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.9 * cols, 4.6 * rows), squeeze=False, layout="constrained")
    for h, ax in enumerate(axes.flat):
        if h >= heads:
            ax.axis("off")
            continue
        im = _show_map(ax, weights[h], tokens, titles[h] if titles else f"head {h}")
    fig.colorbar(im, ax=axes, label="weight", fraction=0.03)
    fig.suptitle(suptitle, fontsize=13)
    return fig


# ---------------------------------------------------------------- real text, hand-wired heads


def gpt2_tokens(text: str, max_tokens: int = 24) -> tuple[torch.Tensor, list[str]]:
    """Token ids (seq,) of text under tiktoken's gpt2 encoding, and each token's text (· = space)."""
    ids, labels = vocab.model_tokens(text, corpus.tokenizer(), max_tokens=max_tokens)
    return torch.tensor(ids), labels


CODE_DIMS = 8  # features 1 … 8 of a token: its identity code (what the same-token head matches)


class TokenFeatures(nn.Module):
    """A fixed stand-in for a trained embedding: feature 0 is a constant 1 (so heads can build
    position-only queries), features 1 … 8 a unit-norm code per token id, the rest random.
    The same token always gets the same vector."""

    def __init__(self, d_model: int = 64):
        super().__init__()
        self.d_model = d_model

    def forward(self, ids: torch.Tensor) -> torch.Tensor:  # (seq,) → (seq, d_model)
        rows = []
        for i in ids.tolist():
            g = torch.Generator().manual_seed(int(i))
            v = torch.randn(self.d_model, generator=g) / math.sqrt(self.d_model)
            v[0] = 1.0
            code = torch.randn(CODE_DIMS, generator=g)
            v[1:1 + CODE_DIMS] = code / code.norm()
            rows.append(v)
        return torch.stack(rows)


def _rotated(u: torch.Tensor, theta: float, position: int) -> torch.Tensor:
    """R_position u: u (d_k,) rotated by your rope (Task 5.1) at `position`."""
    return minilm.exercise_module("rope").rope(u[None], torch.tensor([position]), theta)[0]


HAND_WIRED = ["head 0: previous token", "head 1: same token", "head 2: recent tokens", "head 3: random init"]


def hand_wire(attn: nn.Module, theta: float = 10000.0) -> nn.Module:
    """Load a crafted state_dict into a MultiHeadSelfAttention (d_k=16, ≥ 4 heads) fed by TokenFeatures:

    head 0, previous token: q = s·u and k = s·R_1 u read the constant feature, so after RoPE
        ⟨R_m q, R_n k⟩ = s²⟨u, R_(n+1−m) u⟩, largest at n = m − 1 (u lives in the fast pairs 0-2).
    head 1, same token: q = k = s·(token code) in the slow pairs 4-7, which barely rotate over a
        few dozen positions, so the score is s²⟨code_m, code_n⟩: content, not position.
    head 2, recent tokens: like head 0 with k = s·u in slow-ish pairs 2-3: a broad, decaying window.
    head 3 keeps its random initialization.
    """
    d_k = attn.d_k
    assert d_k == 16 and attn.num_heads >= 4, "hand_wire expects d_k=16 and at least 4 heads"
    sd = {k: v.clone() for k, v in attn.state_dict().items()}
    if {"q_proj.weight", "k_proj.weight"} - set(sd):
        raise CannotShow("Task 6.3: your MultiHeadSelfAttention's state_dict has no q_proj.weight or k_proj.weight "
                         "to wire; check(\"6.3\") says what to fix")
    wq, wk = sd["q_proj.weight"], sd["k_proj.weight"]  # (d_model, d_model): rows h·d_k … are head h
    wq[: 3 * d_k], wk[: 3 * d_k] = 0.0, 0.0

    def pairs(*idx):  # a d_k vector with (1, 0) in the given pairs
        u = torch.zeros(d_k)
        u[[2 * i for i in idx]] = 1.0
        return u

    u, s = pairs(0, 1, 2), 6.0
    wq[0:d_k, 0], wk[0:d_k, 0] = s * u, s * _rotated(u, theta, 1)  # head 0
    s = 7.0
    for j in range(CODE_DIMS):  # head 1: code dim j → head dim 8 + j (pairs 4 … 7)
        wq[d_k + 8 + j, 1 + j] = wk[d_k + 8 + j, 1 + j] = s
    u, s = pairs(2, 3), 6.0
    wq[2 * d_k: 3 * d_k, 0], wk[2 * d_k: 3 * d_k, 0] = s * u, s * u  # head 2
    try:
        attn.load_state_dict(sd)
    except Exception as e:  # noqa: BLE001 - the student's module, in one line
        raise _shown("6.3", "loading the hand-wired state_dict into your MultiHeadSelfAttention", e) from None
    return attn


def hand_wired_attention(d_model: int = 64, num_heads: int = 4, max_seq_len: int = 64, theta: float = 10000.0
                         ) -> nn.Module:
    """Your MultiHeadSelfAttention with heads 0-2 hand-wired (see hand_wire), head 3 random."""
    return hand_wire(minilm.MultiHeadSelfAttention(d_model, num_heads, max_seq_len, theta), theta)


# ---------------------------------------------------------------- the explorer


class AttentionLayer(nn.Module):
    """x + attn(x): an attention-only residual layer (no norm, no MLP)."""

    def __init__(self, attn: nn.Module):
        super().__init__()
        self.attn = attn

    def forward(self, x, token_positions=None):
        return x + self.attn(x, token_positions)


class AttentionStack(nn.Module):
    """A small attention-only model: TokenFeatures, then layers of AttentionLayer. Shaped like
    TransformerLM (token_embeddings, layers[i].attn) so the explorer reads both the same way."""

    def __init__(self, num_layers: int = 2, d_model: int = 64, num_heads: int = 4, max_seq_len: int = 64,
                 theta: float = 10000.0, hand_wired: bool = True):
        super().__init__()
        self.token_embeddings = TokenFeatures(d_model)
        self.layers = nn.ModuleList(
            AttentionLayer(minilm.MultiHeadSelfAttention(d_model, num_heads, max_seq_len, theta))
            for _ in range(num_layers)
        )
        if hand_wired:
            hand_wire(self.layers[0].attn, theta)


@torch.no_grad()
def layer_attention(model: nn.Module, ids: torch.Tensor, layer: int) -> torch.Tensor:
    """Attention weights (heads, seq, seq) of model.layers[layer] on token ids (seq,): run the layers
    before it, then recompute its weights from its input (after its ln1, if it has one)."""
    positions = torch.arange(len(ids))
    task = "6.3" if isinstance(model, AttentionStack) else "8.1"  # an AttentionStack runs only your attention
    try:
        x = model.token_embeddings(ids)
        for block in model.layers[:layer]:
            x = block(x, positions)
        block = model.layers[layer]
        h = block.ln1(x) if hasattr(block, "ln1") else x
    except NotImplementedError:
        raise
    except Exception as e:  # noqa: BLE001 - the student's model, in one line
        raise _shown(task, f"running the layers before layer {layer}", e) from None
    return attention_weights(block.attn, h, positions)


DEFAULT_TEXT = "The cat sat on the mat. The dog sat on the cat."


def vocab_size_of(model: nn.Module) -> int | None:
    """The number of token ids `model` reads: its vocab_size (TransformerLM), else the rows of its
    token_embeddings' weight; None for a model that reads any id (AttentionStack's TokenFeatures)."""
    size = getattr(model, "vocab_size", None)
    if size is None:
        weight = getattr(getattr(model, "token_embeddings", None), "weight", None)
        size = weight.shape[0] if isinstance(weight, torch.Tensor) and weight.dim() == 2 else None
    return None if size is None else int(size)


class AttentionExplorer:
    """A text box and layer/head sliders beside one head's attention map over the text's tokens, as
    the model reads them: its own tokenizer turns the text into its ids (vocab.model_tokens).

    The map is shown at its natural size (SIZE, in CSS pixels) from a PNG of twice as many pixels
    (viz/picture.py), the controls in a column at its left: about 560 × 880 pixels in all.

    Attributes: text, layer, head (widgets), note (the tokens' count and tokenizer), model, tokenizer,
    vocab_size, fig, ax, im (the map's AxesImage), weights (the shown map, (seq, seq)), ids and tokens
    (the text's ids and their labels), image (the rendered PNG), widget (display this).
    """

    SIZE = (558, 504)  # the map's width and height in CSS pixels
    CONTROLS = "300px"  # the width of the column of controls

    def __init__(self, model: nn.Module | None = None, text: str = DEFAULT_TEXT, max_tokens: int = 24,
                 tokenizer=None):
        model = model if model is not None else AttentionStack()
        layers = getattr(model, "layers", None)
        if not (isinstance(model, nn.Module) and hasattr(model, "token_embeddings") and layers is not None
                and len(layers) and hasattr(layers[0], "attn")):
            raise TypeError(f"attention_explorer: expected a TransformerLM or an AttentionStack (token_embeddings and "
                            f"layers[i].attn), got {type(model).__name__}")
        self.model = model.eval()
        self.vocab_size = vocab_size_of(model)
        self.tokenizer = tokenizer if tokenizer is not None else vocab.default_tokenizer(self.vocab_size)
        context = getattr(model, "context_length", None)
        self.max_tokens = min(max_tokens, int(context)) if context else max_tokens
        first = layers[0].attn
        wide = widgets.Layout(width="100%")
        self.text = widgets.Textarea(value=text, description="text", rows=4, layout=wide)
        self.layer = widgets.IntSlider(value=0, min=0, max=len(layers) - 1, description="layer", layout=wide)
        self.head = widgets.IntSlider(value=0, min=0, max=first.num_heads - 1, description="head", layout=wide)
        self.note = widgets.HTML()
        self.fig = picture.figure(*self.SIZE, layout="constrained")  # bare Figure: never auto-shown
        self.ax = self.fig.subplots()
        self.im = None
        self.image = picture.image(self.fig)
        self.update()  # a text the model cannot read fails here, before any widget is shown
        for w in (self.text, self.layer, self.head):
            w.observe(lambda _: self.update(), names="value")
        controls = widgets.VBox([self.text, self.layer, self.head, self.note],
                                layout=widgets.Layout(width=self.CONTROLS, flex="0 0 auto"))
        # Side by side; in a cell too narrow for both, the map moves below the controls.
        self.widget = widgets.HBox([controls, self.image],
                                   layout=widgets.Layout(align_items="flex-start", flex_flow="row wrap"))

    def update(self) -> None:
        self.ids, self.tokens = vocab.model_tokens(self.text.value, self.tokenizer, self.vocab_size, self.max_tokens)
        self.weights = layer_attention(self.model, torch.tensor(self.ids), self.layer.value)[self.head.value]
        self.ax.clear()
        self.im = _show_map(self.ax, self.weights, self.tokens, f"layer {self.layer.value}, head {self.head.value}")
        self.image.value = picture.png(self.fig)
        vocabulary = "reads any id" if self.vocab_size is None else f"vocabulary {self.vocab_size:,}"
        self.note.value = (f'<div style="line-height: 1.4; font-size: 90%">{len(self.ids)} tokens (at most '
                           f"{self.max_tokens}) by {html.escape(vocab.tokenizer_name(self.tokenizer))}; the model: "
                           f"{vocabulary}</div>")


def attention_explorer(model: nn.Module | None = None, text: str = DEFAULT_TEXT, tokenizer=None,
                       checkpoint: str | os.PathLike | None = None, max_tokens: int = 24) -> AttentionExplorer:
    """An attention explorer over `model`; display its `.widget`.

    model: a TransformerLM, or by default a 2-layer AttentionStack of your MultiHeadSelfAttention
        (layer 0 hand-wired, layer 1 random).
    tokenizer: the model's own (anything with encode and decode): notebook 10b's `data`, a run's
        vocabulary. By default GPT-2's, cut to the model's vocabulary if that is smaller
        (vocab.default_tokenizer): right for an untrained model such as notebook 08's seed model.
    checkpoint: instead of model and tokenizer, a `minilm train` run's --out-dir (or its
        checkpoint.pt): its model and vocabulary (minilm.course.train.run.load_trained).

    ValueError when the text's ids do not fit the model's vocabulary (the wrong tokenizer)."""
    if checkpoint is not None:
        if model is not None or tokenizer is not None:
            raise ValueError("attention_explorer: give a checkpoint (a `minilm train` run's directory) or a model "
                             "and its tokenizer, not both")
        from minilm.course.train.run import load_trained

        model, tokenizer = load_trained(checkpoint)
    return AttentionExplorer(model, text, max_tokens, tokenizer)
