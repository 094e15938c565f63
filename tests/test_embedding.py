import pytest
import torch
import torch.nn.functional as F
from helpers import assert_close, leading_shapes, randn, seeds
from hypothesis import given
from hypothesis import strategies as st

import minilm


@pytest.mark.task("2.1")
@given(shape=leading_shapes, vocab=st.integers(1, 50), d=st.integers(1, 8), seed=seeds)
def test_embedding_matches_F_embedding(shape, vocab, d, seed):
    w = randn((vocab, d), seed)
    ids = torch.randint(0, vocab, shape, generator=torch.Generator().manual_seed(seed))
    assert_close(minilm.embedding(ids, w), F.embedding(ids, w))


@pytest.mark.task("2.1")
def test_embedding_gradient_reaches_only_the_rows_used():
    w = randn((10, 4), 0).requires_grad_()
    minilm.embedding(torch.tensor([1, 1, 7]), w).sum().backward()
    counts = torch.zeros(10, 1)
    counts[1], counts[7] = 2, 1
    assert_close(w.grad, counts.expand(10, 4))


@pytest.mark.task("2.2")
def test_Embedding_weight_and_lookup():
    emb = minilm.Embedding(50, 8)
    assert list(emb.state_dict()) == ["weight"] and emb.weight.shape == (50, 8)
    ids = torch.tensor([[0, 49], [3, 3]])
    assert_close(emb(ids), F.embedding(ids, emb.weight))


@pytest.mark.task("2.2")
def test_Embedding_init_is_truncated_standard_normal():
    w = minilm.Embedding(2000, 64).weight.detach().double()
    assert w.abs().max() <= 3.0 + 1e-6
    assert w.std().item() == pytest.approx(0.9866, rel=0.02)
    assert (w.abs() > 2.5).any()
