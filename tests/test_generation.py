import pytest
import torch
from helpers import assert_close, randn, seeds
from hypothesis import given
from hypothesis import strategies as st

import minilm

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


# ---------------------------------------------------------------- 11.1 the sampling filter


@pytest.mark.task("11.1")
def test_next_token_probs_greedy_and_temperature_match_torch():
    logits = randn((3, VOCAB), seed=1, scale=2.0)
    logits[1, 7] = logits[1, 30] = logits[1].max() + 1  # two maxima: greedy takes the first
    greedy = minilm.next_token_probs(logits, temperature=0.0)
    assert greedy.dtype == torch.float32
    assert torch.equal(greedy, torch.nn.functional.one_hot(logits.argmax(-1), VOCAB).float())
    assert greedy[1, 7] == 1
    for t in (0.5, 1.0, 1.7):
        assert_close(minilm.next_token_probs(logits, temperature=t), torch.softmax(logits / t, -1),
                     what=f"next_token_probs at temperature {t} (softmax(logits / T))")


@pytest.mark.task("11.1")
def test_top_k_keeps_the_k_largest_and_their_ties():
    logits = torch.tensor([0.5, 3.0, 2.0, 3.0, 2.0, 1.0, -1.0])
    probs = minilm.next_token_probs(logits, top_k=3)  # the 3rd largest, 2.0, ties with another 2.0
    kept = logits >= 2.0
    assert_close(probs, torch.softmax(logits.masked_fill(~kept, float("-inf")), -1),
                 what="top_k=3 with a tie at the 3rd largest (all tied tokens kept)")
    assert_close(minilm.next_token_probs(logits, top_k=100), torch.softmax(logits, -1),
                 what="top_k larger than the vocabulary keeps every token")


@pytest.mark.task("11.1")
@given(seed=seeds, top_p=st.floats(0.05, 0.95), temperature=st.floats(0.3, 2.0), batch=st.integers(1, 3))
def test_top_p_keeps_the_smallest_set_reaching_p(seed, top_p, temperature, batch):
    logits = randn((batch, VOCAB), seed=seed, scale=3.0)
    full = torch.softmax(logits.double() / temperature, -1)
    probs = minilm.next_token_probs(logits, temperature=temperature, top_p=top_p)
    for row in range(batch):
        kept = probs[row] > 0
        sorted_full = full[row].sort(descending=True).values
        n = int(kept.sum())
        # The kept tokens are the n most likely ones, renormalized ...
        assert torch.equal(kept, full[row] >= sorted_full[n - 1]), "top_p must keep the most likely tokens"
        assert_close(probs[row], full[row] * kept / full[row][kept].sum(), atol=1e-6, what="top_p renormalized")
        # ... and n is the smallest count whose mass reaches top_p: the crossing token is kept.
        mass = sorted_full.cumsum(0)
        assert mass[n - 1] >= top_p - 1e-6, (f"top_p={top_p:.3f} kept {n} tokens with mass {mass[n - 1]:.4f} < top_p: "
                                             "the token whose cumulative probability crosses top_p must be kept")
        assert n == 1 or mass[n - 2] < top_p + 1e-6, f"top_p={top_p:.3f} kept more tokens than the smallest set"


@pytest.mark.task("11.1")
def test_top_p_applies_to_what_top_k_left_and_keeps_the_most_likely():
    logits = torch.tensor([2.0, 1.9, 1.8, -3.0, -3.5])
    after_k = torch.softmax(logits[:3], -1)  # about 0.37, 0.33, 0.30
    probs = minilm.next_token_probs(logits, top_k=3, top_p=0.5)
    assert_close(probs, torch.cat((after_k[:2] / after_k[:2].sum(), torch.zeros(3))),
                 what="top_k=3 then top_p=0.5 over the renormalized top 3 (crossing token kept)")
    assert torch.equal(minilm.next_token_probs(logits, top_p=1e-9), torch.eye(5)[0]), "a tiny top_p is greedy"


@pytest.mark.task("11.1")
def test_next_token_probs_leaves_its_input_alone_and_computes_in_float32():
    logits = randn((2, 5, VOCAB), seed=3).half()
    before = logits.clone()
    probs = minilm.next_token_probs(logits, temperature=0.8, top_k=7, top_p=0.9)
    assert torch.equal(logits, before)
    assert probs.dtype == torch.float32 and probs.shape == logits.shape
    assert_close(probs.sum(-1), torch.ones(2, 5), what="each row of probabilities sums to 1")


@pytest.mark.task("11.1")
@pytest.mark.parametrize("bad, error", [(dict(temperature=-1.0), "temperature"), (dict(top_k=0), "top_k"),
                                        (dict(top_p=0.0), "top_p"), (dict(top_p=1.5), "top_p")])
def test_next_token_probs_rejects_bad_arguments(bad, error):
    with pytest.raises(ValueError, match=error):
        minilm.next_token_probs(torch.zeros(5), **bad)
    with pytest.raises(TypeError, match="floating-point"):
        minilm.next_token_probs(torch.arange(5))


# ---------------------------------------------------------------- 11.2 generate (no cache)


@pytest.mark.task("11.2")
@pytest.mark.parametrize("n_new", [3, 25], ids=["within context", "past context_length"])
def test_greedy_matches_the_argmax_over_the_last_context_length_tokens(n_new):
    model, prompt = _lm(0), [5, 17, 3, 8]
    out = minilm.generate(model, torch.tensor(prompt), n_new, temperature=0.0, use_cache=False)
    assert out.dtype == torch.long and out.ndim == 1
    assert out.tolist() == _greedy_reference(model, prompt, n_new)


@pytest.mark.task("11.2")
def test_generate_accepts_a_prompt_longer_than_the_context():
    model = _lm(0)
    prompt = list(range(1, 2 * CONTEXT + 1))
    out = minilm.generate(model, prompt, 4, temperature=0.0, use_cache=False)
    assert out.tolist() == _greedy_reference(model, prompt, 4)


@pytest.mark.task("11.2")
def test_sampling_is_reproducible_with_a_generator_and_matches_multinomial():
    model, prompt = _lm(3), [1, 2, 3]
    runs = [minilm.generate(model, prompt, 8, temperature=1.3, use_cache=False,
                            generator=torch.Generator().manual_seed(7)) for _ in range(2)]
    assert torch.equal(runs[0], runs[1])
    g, ids = torch.Generator().manual_seed(7), list(prompt)
    with torch.no_grad():
        for _ in range(8):
            probs = torch.softmax(model(torch.tensor([ids[-CONTEXT:]]))[0, -1] / 1.3, -1)
            ids.append(int(torch.multinomial(probs, 1, generator=g)))
    assert runs[0].tolist() == ids


@pytest.mark.task("11.2")
def test_top_k_and_top_p_only_emit_allowed_tokens():
    model, prompt = _lm(4), [9, 9, 1]
    with torch.no_grad():
        logits = model(torch.tensor([prompt]))[0, -1]
    allowed_k = set(logits.topk(3).indices.tolist())
    probs, order = torch.softmax(logits, -1).sort(descending=True)
    allowed_p = set(order[: int((probs.cumsum(-1) < 0.6).sum()) + 1].tolist())
    for seed in range(30):
        g = torch.Generator().manual_seed(seed)
        assert minilm.generate(model, prompt, 1, top_k=3, use_cache=False, generator=g)[-1].item() in allowed_k
        g = torch.Generator().manual_seed(seed)
        assert minilm.generate(model, prompt, 1, top_p=0.6, use_cache=False, generator=g)[-1].item() in allowed_p
    assert minilm.generate(model, prompt, 1, top_k=1, use_cache=False)[-1].item() == logits.argmax().item()


@pytest.mark.task("11.2")
def test_stops_after_eos():
    model, prompt = _lm(0), [5, 17, 3, 8]
    want = _greedy_reference(model, prompt, 12)
    eos = want[len(prompt) + 3]
    out = minilm.generate(model, prompt, 12, temperature=0.0, eos_token_id=eos, use_cache=False)
    assert out.tolist() == want[: want.index(eos, len(prompt)) + 1]


@pytest.mark.task("11.2")
def test_generate_leaves_the_model_in_eval_mode_without_grad():
    model = _lm(0)
    out = minilm.generate(model, [1, 2], 2, temperature=0.0, use_cache=False)
    assert not model.training and not out.requires_grad


@pytest.mark.task("11.2")
@pytest.mark.parametrize("bad, error", [(dict(temperature=-1.0), "temperature"), (dict(top_k=0), "top_k"),
                                        (dict(top_p=1.5), "top_p"), (dict(max_new_tokens=-1), "max_new_tokens")])
def test_generate_rejects_bad_arguments(bad, error):
    args = dict(max_new_tokens=2) | bad
    with pytest.raises(ValueError, match=error):
        minilm.generate(_lm(0), [1, 2], **args)


# ---------------------------------------------------------------- 11.3 the KV cache


@pytest.mark.task("11.3")
def test_kv_cache_appends_along_the_sequence_dim():
    cache = minilm.KVCache()
    assert len(cache) == 0
    k1, v1 = torch.randn(2, 3, 4, 8), torch.randn(2, 3, 4, 8)
    k2, v2 = torch.randn(2, 3, 1, 8), torch.randn(2, 3, 1, 8)
    cache.update(k1, v1)
    k, v = cache.update(k2, v2)
    assert torch.equal(k, torch.cat((k1, k2), -2)) and torch.equal(v, torch.cat((v1, v2), -2))
    assert len(cache) == 5


@pytest.mark.task("11.3")
@pytest.mark.parametrize("chunks", [[1] * 10, [4, 1, 1, 1, 3], [10]])
def test_attention_through_the_cache_matches_no_cache(chunks):
    # token_positions=None: positions continue from len(cache); the mask is offset by the cached keys.
    torch.manual_seed(5)
    attn = minilm.MultiHeadSelfAttention(16, 2, CONTEXT, 10000.0)
    x = torch.randn(2, 10, 16, generator=torch.Generator().manual_seed(6))
    with torch.no_grad():
        want = attn(x)
        cache, got, start = minilm.KVCache(), [], 0
        for n in chunks:
            got.append(attn(x[:, start : start + n], kv_cache=cache))
            start += n
    assert len(cache) == 10, "MultiHeadSelfAttention.forward must pass k and v through kv_cache.update"
    assert_close(torch.cat(got, dim=1), want, atol=1e-5,
                 what=f"MultiHeadSelfAttention (minilm/attention.py) fed in chunks {chunks} through a KVCache")


@pytest.mark.task("11.3")
@pytest.mark.parametrize("rows", [False, True], ids=["positions 10-19", "per-row positions"])
@pytest.mark.parametrize("chunks", [[1] * 10, [4, 1, 1, 1, 3]])
def test_attention_through_the_cache_with_token_positions(chunks, rows):
    # Explicit token_positions with a cache: each key keeps the rotation of its own position, so the keys
    # are cached after RoPE (not cached raw and the whole cache rotated at 0 … keys − 1 on every call).
    torch.manual_seed(5)
    attn = minilm.MultiHeadSelfAttention(16, 2, 32, 10000.0)
    x = torch.randn(2, 10, 16, generator=torch.Generator().manual_seed(6))
    positions = torch.stack((torch.arange(3, 13), torch.arange(17, 27))) if rows else torch.arange(10, 20)
    with torch.no_grad():
        want = attn(x, positions)
        cache, got, start = minilm.KVCache(), [], 0
        for n in chunks:
            got.append(attn(x[:, start : start + n], positions[..., start : start + n], kv_cache=cache))
            start += n
    assert_close(torch.cat(got, dim=1), want, atol=1e-5, what=(
        f"MultiHeadSelfAttention fed in chunks {chunks} through a KVCache with token_positions "
        f"{'(2, 10), each row its own' if rows else '10 … 19'}: keys must be cached after RoPE, rotated at their "
        "own positions"))


@pytest.mark.task("11.3")
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


@pytest.mark.task("11.3")
def test_the_model_refuses_more_than_its_context_with_a_cache():
    model = _lm(1)
    cache = model.make_kv_cache()
    with torch.no_grad():
        model(torch.zeros(1, CONTEXT - 1, dtype=torch.long), kv_cache=cache)
        with pytest.raises(ValueError, match="context_length"):
            model(torch.zeros(1, 2, dtype=torch.long), kv_cache=cache)


@pytest.mark.task("11.3")
@pytest.mark.parametrize("n_new", [3, 25], ids=["within context", "past context_length"])
def test_greedy_with_the_cache_matches_without(n_new):
    model, prompt = _lm(0), [5, 17, 3, 8]
    want = _greedy_reference(model, prompt, n_new)
    assert minilm.generate(model, torch.tensor(prompt), n_new, temperature=0.0, use_cache=True).tolist() == want


