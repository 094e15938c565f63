"""Hidden tests for the data, training and generation tasks 9.1–11.2."""

from __future__ import annotations

import io
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

import minilm

task = pytest.mark.task


# ---------------------------------------------------------------- 9


@task("9.1")
def test_get_batch_windows_and_range():
    data = (np.arange(40, dtype=np.int32) * 7) % 1000  # values ≠ positions
    torch.manual_seed(9)
    x, y = minilm.get_batch(data, 500, 3, "cpu")
    assert x.shape == y.shape == (500, 3) and x.dtype == y.dtype == torch.long
    starts = (x[:, 0] // 7).tolist()
    assert set(starts) == set(range(37)), "starts must cover 0 … len − context_length − 1"
    for row_x, row_y, s in zip(x.tolist(), y.tolist(), starts):
        assert row_x == data[s : s + 3].tolist() and row_y == data[s + 1 : s + 4].tolist()


@task("9.1")
def test_get_batch_reproducible_with_manual_seed(tmp_path):
    path = tmp_path / "tokens.bin"
    np.arange(300, dtype=np.uint16).tofile(path)
    data = np.memmap(path, dtype=np.uint16, mode="r")
    torch.manual_seed(3)
    a = minilm.get_batch(data, 4, 16, "cpu")
    torch.manual_seed(3)
    b = minilm.get_batch(data, 4, 16, "cpu")
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])


# ---------------------------------------------------------------- 10


@task("10.1")
def test_cross_entropy_shapes_and_extremes():
    g = torch.Generator().manual_seed(1001)
    for logits in (torch.randn(3, 2, 5, generator=g, dtype=torch.float64), torch.randn(6, 4, generator=g) * 5e3):
        targets = torch.randint(0, logits.shape[-1], logits.shape[:-1], generator=g)
        got = minilm.cross_entropy(logits, targets)
        want = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))
        assert got.shape == () and torch.isfinite(got)
        torch.testing.assert_close(got.double(), want.double(), rtol=1e-4, atol=1e-4)


@task("10.2")
@pytest.mark.parametrize("max_norm", [1e-2, 1e3])
def test_clip_grad_norm_matches_torch(max_norm):
    g = torch.Generator().manual_seed(1002)
    a = [nn.Parameter(torch.randn(s, generator=g)) for s in ((3, 4), (7,), (2, 2, 2))]
    b = [nn.Parameter(p.detach().clone()) for p in a]
    for p, q in zip(a, b):
        p.grad = torch.randn(p.shape, generator=g)
        q.grad = p.grad.clone()
    extra = nn.Parameter(torch.ones(2))  # no grad: skipped
    got = minilm.clip_grad_norm([*a, extra], max_norm)
    want = torch.nn.utils.clip_grad_norm_(b, max_norm)
    torch.testing.assert_close(torch.as_tensor(got).double(), want.double(), rtol=1e-5, atol=1e-6)
    for p, q in zip(a, b):
        torch.testing.assert_close(p.grad, q.grad, rtol=1e-5, atol=1e-6)


@task("10.3")
def test_lr_schedule_other_settings():
    max_lr, min_lr, warm, cycle = 3.0, 0.25, 7, 30

    def want(it):
        if it < warm:
            return it / warm * max_lr
        if it <= cycle:
            return min_lr + 0.5 * (1 + math.cos(math.pi * (it - warm) / (cycle - warm))) * (max_lr - min_lr)
        return min_lr

    for it in (0, 1, 6, 7, 8, 18, 29, 30, 31, 500):
        assert minilm.lr_cosine_schedule(it, max_lr, min_lr, warm, cycle) == pytest.approx(want(it), rel=1e-9, abs=1e-12)


@task("10.4")
def test_adamw_matches_torch_with_two_groups():
    g = torch.Generator().manual_seed(1004)
    init = [torch.randn(4, 3, generator=g, dtype=torch.float64), torch.randn(5, generator=g, dtype=torch.float64)]
    mine = [nn.Parameter(t.clone()) for t in init]
    ref = [nn.Parameter(t.clone()) for t in init]
    groups = lambda ps: [{"params": [ps[0]], "lr": 0.05, "weight_decay": 0.3},
                         {"params": [ps[1]], "lr": 0.01, "betas": (0.8, 0.95), "eps": 1e-6, "weight_decay": 0.0}]
    opt, want = minilm.AdamW(groups(mine)), torch.optim.AdamW(groups(ref))
    for step in range(6):
        grads = [torch.randn(p.shape, generator=g, dtype=torch.float64) for p in mine]
        for p, q, gr in zip(mine, ref, grads):
            p.grad, q.grad = gr.clone(), gr.clone()
        if step == 3:  # a schedule changing lr between steps
            opt.param_groups[0]["lr"] = want.param_groups[0]["lr"] = 0.002
        opt.step()
        want.step()
    for p, q in zip(mine, ref):
        torch.testing.assert_close(p.detach(), q.detach(), rtol=1e-9, atol=1e-10)


@task("10.5")
def test_checkpoint_round_trip_through_a_file_object():
    torch.manual_seed(1005)
    model = nn.Sequential(nn.Linear(3, 4), nn.Linear(4, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    model(torch.randn(5, 3)).sum().backward()
    opt.step()
    buffer = io.BytesIO()
    minilm.save_checkpoint(model, opt, 4321, buffer)
    buffer.seek(0)
    model2 = nn.Sequential(nn.Linear(3, 4), nn.Linear(4, 2))
    opt2 = torch.optim.SGD(model2.parameters(), lr=0.1, momentum=0.9)
    assert minilm.load_checkpoint(buffer, model2, opt2) == 4321
    for a, b in zip(model.state_dict().values(), model2.state_dict().values()):
        assert torch.equal(a, b)
    momenta = [s["momentum_buffer"] for s in opt2.state_dict()["state"].values()]
    assert len(momenta) == 4 and all(m is not None for m in momenta)


# ---------------------------------------------------------------- 11


class Bigram(nn.Module):
    """A fixed next-token table: logits depend on the last token only."""

    def __init__(self, vocab=9, context_length=5, seed=1101):
        super().__init__()
        self.context_length = context_length
        self.table = nn.Parameter(torch.randn(vocab, vocab, generator=torch.Generator().manual_seed(seed)) * 3)
        self.seen = []

    def forward(self, ids, kv_cache=None):
        self.seen.append(ids.shape[-1])
        return self.table[ids]

    def make_kv_cache(self):
        return [minilm.KVCache()]


@task("11.1")
def test_generate_greedy_crops_the_context_and_stops_at_eos():
    model = Bigram()
    out = minilm.generate(model, [1, 2, 3, 4, 5, 6, 7], 6, temperature=0.0, use_cache=False)
    want = [1, 2, 3, 4, 5, 6, 7]
    for _ in range(6):
        want.append(int(model.table[want[-1]].argmax()))
    assert out.tolist() == want and out.dtype == torch.long
    assert max(model.seen) <= 5, "the model must never see more than context_length tokens"
    eos = want[8]
    out = minilm.generate(Bigram(), torch.tensor([1, 2, 3, 4, 5, 6, 7]), 6, temperature=0.0, eos_token_id=eos, use_cache=False)
    assert out.tolist() == want[:9]


@task("11.1")
def test_generate_top_k_one_is_greedy_and_sampling_is_seeded():
    model = Bigram(seed=1102)
    greedy = minilm.generate(model, [0], 5, temperature=0.0, use_cache=False)
    top1 = minilm.generate(model, [0], 5, temperature=2.0, top_k=1, use_cache=False)
    assert top1.tolist() == greedy.tolist()
    a = minilm.generate(model, [0], 8, temperature=1.5, top_p=0.9, use_cache=False, generator=torch.Generator().manual_seed(5))
    b = minilm.generate(model, [0], 8, temperature=1.5, top_p=0.9, use_cache=False, generator=torch.Generator().manual_seed(5))
    assert a.tolist() == b.tolist() and len(a) == 9


@task("11.2")
def test_kv_cache_grows_chunk_by_chunk():
    cache = minilm.KVCache()
    g = torch.Generator().manual_seed(1103)
    chunks = [(torch.randn(1, 2, n, 6, generator=g), torch.randn(1, 2, n, 6, generator=g)) for n in (3, 2, 1)]
    seen = 0
    for k_new, v_new in chunks:
        k_all, v_all = cache.update(k_new, v_new)
        seen += k_new.shape[-2]
        assert len(cache) == seen and k_all.shape == (1, 2, seen, 6)
        assert torch.equal(k_all[..., -k_new.shape[-2]:, :], k_new) and torch.equal(v_all[..., -v_new.shape[-2]:, :], v_new)
    assert torch.equal(k_all, torch.cat([k for k, _ in chunks], dim=-2))
