import pytest
import torch

import minilm
from helpers import assert_close

VOCAB, CONTEXT = 41, 10


def _lm(seed=0):
    torch.manual_seed(seed)
    return minilm.TransformerLM(VOCAB, CONTEXT, d_model=16, num_layers=2, num_heads=2, d_ff=24)


def _greedy_reference(model, prompt, n):
    ids = list(prompt)
    with torch.no_grad():
        for _ in range(n):
            ids.append(int(model(torch.tensor([ids[-CONTEXT:]]))[0, -1].argmax()))
    return ids


# ---------------------------------------------------------------- 11.2 KV cache


@pytest.mark.task("11.2")
def test_kv_cache_appends_along_the_sequence_dim():
    cache = minilm.KVCache()
    assert len(cache) == 0
    k1, v1 = torch.randn(2, 3, 4, 8), torch.randn(2, 3, 4, 8)
    k2, v2 = torch.randn(2, 3, 1, 8), torch.randn(2, 3, 1, 8)
    cache.update(k1, v1)
    k, v = cache.update(k2, v2)
    assert torch.equal(k, torch.cat((k1, k2), -2)) and torch.equal(v, torch.cat((v1, v2), -2))
    assert len(cache) == 5


@pytest.mark.task("11.2")
@pytest.mark.parametrize("chunks", [[1] * 10, [4, 1, 1, 1, 3], [10]])
def test_cached_logits_match_a_full_forward(chunks):
    model = _lm(1)
    ids = torch.randint(0, VOCAB, (2, 10), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        want = model(ids)  # all positions at once, no cache
        cache, got, start = model.make_kv_cache(), [], 0
        for n in chunks:
            got.append(model(ids[:, start : start + n], kv_cache=cache))
            start += n
    assert_close(torch.cat(got, dim=1), want, atol=1e-5, what="logits computed through the KV cache")
    assert all(len(c) == 10 for c in cache)


# ---------------------------------------------------------------- 11.1 generate


@pytest.mark.task("11.1")
@pytest.mark.parametrize("n_new", [3, 25], ids=["within context", "past context_length"])
def test_greedy_with_and_without_cache_match_the_reference(n_new):
    model, prompt = _lm(0), [5, 17, 3, 8]
    want = _greedy_reference(model, prompt, n_new)
    cached = minilm.generate(model, torch.tensor(prompt), n_new, temperature=0.0, use_cache=True)
    uncached = minilm.generate(model, prompt, n_new, temperature=0.0, use_cache=False)
    assert cached.dtype == torch.long and cached.ndim == 1
    assert uncached.tolist() == want
    assert cached.tolist() == want


@pytest.mark.task("11.1")
def test_generate_accepts_a_prompt_longer_than_the_context():
    model = _lm(0)
    prompt = list(range(1, 2 * CONTEXT + 1))
    out = minilm.generate(model, prompt, 4, temperature=0.0)
    assert out.tolist() == _greedy_reference(model, prompt, 4)


@pytest.mark.task("11.1")
def test_sampling_is_reproducible_with_a_generator_and_matches_multinomial():
    model, prompt = _lm(3), [1, 2, 3]
    runs = [minilm.generate(model, prompt, 8, temperature=1.3, generator=torch.Generator().manual_seed(7))
            for _ in range(2)]
    assert torch.equal(runs[0], runs[1])
    g, ids = torch.Generator().manual_seed(7), list(prompt)
    with torch.no_grad():
        for _ in range(8):
            probs = torch.softmax(model(torch.tensor([ids[-CONTEXT:]]))[0, -1] / 1.3, -1)
            ids.append(int(torch.multinomial(probs, 1, generator=g)))
    assert runs[0].tolist() == ids


@pytest.mark.task("11.1")
def test_top_k_and_top_p_only_emit_allowed_tokens():
    model, prompt = _lm(4), [9, 9, 1]
    with torch.no_grad():
        logits = model(torch.tensor([prompt]))[0, -1]
    allowed_k = set(logits.topk(3).indices.tolist())
    probs, order = torch.softmax(logits, -1).sort(descending=True)
    allowed_p = set(order[: int((probs.cumsum(-1) < 0.6).sum()) + 1].tolist())
    for seed in range(30):
        g = torch.Generator().manual_seed(seed)
        assert minilm.generate(model, prompt, 1, top_k=3, generator=g)[-1].item() in allowed_k
        g = torch.Generator().manual_seed(seed)
        assert minilm.generate(model, prompt, 1, top_p=0.6, generator=g)[-1].item() in allowed_p
    assert minilm.generate(model, prompt, 1, top_k=1)[-1].item() == logits.argmax().item()


@pytest.mark.task("11.1")
def test_stops_after_eos():
    model, prompt = _lm(0), [5, 17, 3, 8]
    want = _greedy_reference(model, prompt, 12)
    eos = want[len(prompt) + 3]
    out = minilm.generate(model, prompt, 12, temperature=0.0, eos_token_id=eos)
    assert out.tolist() == want[: want.index(eos, len(prompt)) + 1]


@pytest.mark.task("11.1")
def test_generate_leaves_the_model_in_eval_mode_without_grad():
    model = _lm(0)
    out = minilm.generate(model, [1, 2], 2, temperature=0.0)
    assert not model.training and not out.requires_grad


@pytest.mark.task("11.1")
@pytest.mark.parametrize("bad, error", [(dict(temperature=-1.0), "temperature"), (dict(top_k=0), "top_k"),
                                        (dict(top_p=1.5), "top_p"), (dict(max_new_tokens=-1), "max_new_tokens")])
def test_generate_rejects_bad_arguments(bad, error):
    args = dict(max_new_tokens=2) | bad
    with pytest.raises(ValueError, match=error):
        minilm.generate(_lm(0), [1, 2], **args)
