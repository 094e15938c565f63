"""Task 9.2: train_bpe against an independent naive trainer (every pair recounted from the text's
chunks at every merge), hand-worked cases for each rule of the docstring, the contract's
invariants, and bad input."""

from collections import Counter

import pytest
import regex
from hypothesis import given
from hypothesis import strategies as st

import minilm
from minilm.course import corpus


def naive_bpe(text: str, num_merges: int) -> list[tuple[bytes, bytes]]:
    """The docstring read literally: split into chunks, then at every merge count every pair in
    every occurrence of every chunk, take max((count, pair)), and merge it left to right."""
    chunks = [[bytes([b]) for b in c.encode("utf-8")] for c in regex.findall(corpus.GPT2_PATTERN, text)]
    merges = []
    while len(merges) < num_merges:
        counts = Counter(pair for chunk in chunks for pair in zip(chunk, chunk[1:]))
        if not counts:
            break
        best = max(counts, key=lambda pair: (counts[pair], pair))
        merges += [best]
        for k, chunk in enumerate(chunks):
            out, i = [], 0
            while i < len(chunk):
                if chunk[i : i + 2] == list(best):
                    out.append(best[0] + best[1])
                    i += 2
                else:
                    out.append(chunk[i])
                    i += 1
            chunks[k] = out
    return merges


# Texts that exercise every rule: repeated and overlapping letters, spaces and newlines
# (chunk boundaries), contractions, digits, punctuation and multi-byte characters.
texts = st.lists(st.sampled_from(["a", "b", "ab", "aa", "ba", "the", " ", " ", "  ", "\n", "'s", "1", "23", ".",
                                  "!", "é", "🤖"]), min_size=1, max_size=40).map("".join)


@pytest.mark.task("9.2")
@given(text=texts, num_merges=st.integers(0, 25))
def test_matches_a_naive_trainer(text, num_merges):
    vocab, merges = minilm.train_bpe(text, num_merges)
    assert merges == naive_bpe(text, num_merges)


@pytest.mark.task("9.2")
@given(text=texts, num_merges=st.integers(0, 25))
def test_vocab_and_merges_keep_the_contract(text, num_merges):
    vocab, merges = minilm.train_bpe(text, num_merges)
    assert isinstance(vocab, dict) and isinstance(merges, list)
    assert sorted(vocab) == list(range(256 + len(merges)))
    assert all(vocab[i] == bytes([i]) for i in range(256))
    chunks = [c.encode("utf-8") for c in regex.findall(corpus.GPT2_PATTERN, text)]
    for k, (left, right) in enumerate(merges):
        assert vocab[256 + k] == left + right
        known = set(vocab[i] for i in range(256 + k))
        assert left in known and right in known, f"merge {k} joins a token that does not exist yet"
        assert any(left + right in c for c in chunks), f"merge {k} crosses a chunk boundary"
    if len(merges) < num_merges:  # stopped early: every chunk must be one token by now
        assert set(chunks) <= set(vocab.values())
    # With the merges as ranks, tiktoken's encoder gives back the text's exact bytes.
    enc = corpus.bpe_tokenizer(vocab)
    ids = enc.encode_ordinary(text)
    assert enc.decode_bytes(ids) == text.encode("utf-8")
    assert len(ids) <= len(text.encode("utf-8"))


@pytest.mark.task("9.2")
def test_overlapping_pairs_merge_left_to_right():
    # "aaa" holds (a, a) twice and becomes [aa, a]: the next merge is (aa, a), not (a, aa).
    assert minilm.train_bpe("aaa", 5)[1] == [(b"a", b"a"), (b"aa", b"a")]


@pytest.mark.task("9.2")
def test_ties_go_to_the_greatest_pair():
    # "ab" and " ba": (a, b), ( , b) and (b, a) each occur once; (b"b", b"a") is the greatest.
    assert minilm.train_bpe("ab ba", 1)[1] == [(b"b", b"a")]


@pytest.mark.task("9.2")
def test_pairs_are_weighted_by_how_often_their_chunk_occurs():
    # (x, y) occurs 4 times in two distinct chunks, (a, b) 3 times in three: frequency wins.
    assert minilm.train_bpe("xy xy xy xy ab cab dab", 1)[1] == [(b"x", b"y")]


@pytest.mark.task("9.2")
def test_a_merge_joins_two_adjacent_tokens_only():
    # After (x, a), " xab" is [ , xa, b]: its "ab" straddles two tokens, so the merge (a, b) leaves it
    # alone (a string replace over the joined tokens would make it [ , xab]), and (xa, b) is still there to
    # merge last, the greatest of the pairs that occur once.
    assert minilm.train_bpe("xaxa abab xab", 4)[1] == [(b"x", b"a"), (b"a", b"b"), (b"xa", b"xa"), (b"xa", b"b")]


@pytest.mark.task("9.2")
def test_merges_stay_inside_chunks():
    # Without pre-tokenization "a a a a" would merge (a, " ") as often as (" ", a).
    vocab, merges = minilm.train_bpe("a a a a", 10)
    assert merges == [(b" ", b"a")]  # then every chunk, "a" and " a", is one token: training stops
    assert len(vocab) == 257


@pytest.mark.task("9.2")
def test_bytes_not_characters():
    vocab, merges = minilm.train_bpe("é é é", 1)
    assert merges == [(b"\xc3", b"\xa9")]  # é is two UTF-8 bytes, one token only after a merge


@pytest.mark.task("9.2")
def test_same_text_same_merges():
    text = "the cat sat on the mat; the cat's hat\n" * 3
    assert minilm.train_bpe(text, 20) == minilm.train_bpe(text, 20)


@pytest.mark.task("9.2")
@pytest.mark.parametrize("text, num_merges, error, match", [
    ("", 5, ValueError, "text is empty"),
    ("abc", -1, ValueError, "num_merges must be >= 0, got -1"),
    ("abc", 2.0, TypeError, "num_merges must be an int, got float"),
    ("abc", True, TypeError, "num_merges must be an int, got bool"),
    (b"abc", 2, TypeError, "text must be a str"),
])
def test_bad_input_is_reported(text, num_merges, error, match):
    with pytest.raises(error, match=f"train_bpe: {match}"):
        minilm.train_bpe(text, num_merges)


def test_the_pattern_splits_text_as_tiktoken_gpt2_does():
    """corpus.GPT2_PATTERN (the student's minilm/bpe.py holds the same) gives GPT-2's chunks: GPT-2
    encodes a text as the concatenation of its encodings of these chunks, one by one."""
    import minilm as package

    assert package.exercise_module("bpe").GPT2_PATTERN == corpus.GPT2_PATTERN
    enc = corpus.tokenizer()
    text = ("First Citizen:\nBefore we proceed, hear me speak.\n\n\nIt's 2024; we'll see 12345 cafés   and  "
            "naïve 🤖 THE end   \n  \t x\n")
    chunks = regex.findall(corpus.GPT2_PATTERN, text)
    assert "".join(chunks) == text
    assert [t for c in chunks for t in enc.encode_ordinary(c)] == enc.encode_ordinary(text)
    assert [regex.findall(corpus.GPT2_PATTERN, c) for c in chunks] == [[c] for c in chunks]


def test_gpt2_prefix_tokenizer_is_gpt2_with_fewer_merges():
    full = corpus.tokenizer()
    text = "O Romeo, Romeo! wherefore art thou Romeo?"
    assert corpus.gpt2_prefix_tokenizer(full.eot_token).encode_ordinary(text) == full.encode_ordinary(text)
    small = corpus.gpt2_prefix_tokenizer(256)
    assert len(small.encode_ordinary(text)) == len(text.encode("utf-8"))  # bytes only
    assert corpus.bytes_per_token(corpus.gpt2_prefix_tokenizer(1000), text) > 1
    with pytest.raises(ValueError, match="vocab_size must be an int from 256"):
        corpus.gpt2_prefix_tokenizer(100)
    with pytest.raises(ValueError, match="ids 0–255 must be the 256 single bytes"):
        corpus.bpe_tokenizer({0: b"a"})


@pytest.mark.task("9.2")
def test_compression_grows_with_the_merges_and_is_plotted():
    import matplotlib.pyplot as plt

    from minilm.course.viz import data as viz

    text = "First Citizen:\nBefore we proceed any further, hear me speak.\n\nAll:\nSpeak, speak.\n" * 20
    vocab, _ = minilm.train_bpe(text, 60)
    sizes = [256, 266, 276, len(vocab)]  # the text's few distinct chunks allow fewer than 60 merges
    table = viz.compression_table(vocab, "First Citizen:\nSpeak, hear me.\n", sizes=sizes)
    assert table["ours"][0] == table["gpt2"][0] == 1.0  # bytes only
    assert table["ours"] == sorted(table["ours"]) and table["ours"][-1] > 1.5
    fig = viz.plot_compression(table)
    ax = fig.axes[0]
    assert ax.get_title() and ax.get_xlabel() and ax.get_ylabel() and len(ax.get_legend().get_texts()) == 3
    plt.close(fig)
    with pytest.raises(ValueError, match=f"more than the {len(vocab)} tokens"):
        viz.compression_table(vocab, text, sizes=[len(vocab) + 1])


# ---------------------------------------------------------------- Task 9.3: encode and decode

EOT = "<|endoftext|>"


def _vocab(merges):
    return {i: t for i, t in enumerate([bytes([b]) for b in range(256)] + [a + b for a, b in merges])}


def _tiktoken_oracle(vocab, special_tokens=()):
    """tiktoken's encoder on the same merges (ranks = ids) with GPT-2's pattern: the independent oracle."""
    import tiktoken

    ranks = {token: i for i, token in sorted(vocab.items(), reverse=True)}
    specials = {t: max(vocab) + 1 + k for k, t in enumerate(special_tokens)}
    return tiktoken.Encoding("oracle", pat_str=corpus.GPT2_PATTERN, mergeable_ranks=ranks, special_tokens=specials)


@pytest.mark.task("9.3")
def test_merges_apply_by_rank_not_frequency_nor_length():
    merges = [(b"b", b"c"), (b"a", b"b"), (b"a", b"a"), (b"ab", b"ab"), (b"a", b"bc"), (b"aa", b"a")]
    tok = minilm.Tokenizer(_vocab(merges), merges)
    # "ababc": (b, c) is learned first, then (a, b) twice: [ab, abc]; not [abab, c] (the frequent pair
    # (a, b) first, or the longest token from the left).
    assert tok.encode("ababc") == [257, 260]
    assert tok.encode("aaab") == [258, 257]  # (a, a) once, from the left: [aa, ab], not [aaa, b]


@pytest.mark.task("9.3")
def test_special_tokens_stay_whole_and_get_their_ids():
    merges = [(b" ", b"a"), (b"<", b"|")]
    vocab = _vocab(merges)
    vocab[258] = b"<|pad|>"
    tok = minilm.Tokenizer(vocab, merges, [EOT, EOT + EOT, "<|pad|>"])
    eot, double, pad = 259, 260, 258  # a new special token: after the largest id; one already in vocab: its id
    assert tok.encode("a<|endoftext|><|endoftext|> a<|endoftext|><|pad|>") == [97, double, 256, eot, pad]
    assert tok.encode(EOT + EOT + EOT) == [double, eot]  # the longest first, from the left
    assert tok.decode([97, double, pad]) == "a" + EOT + EOT + "<|pad|>"
    plain = minilm.Tokenizer(vocab, merges)  # without special tokens, "<|" is just text
    assert plain.encode("<|a") == [257, 97]


@pytest.mark.task("9.3")
def test_chunks_are_never_merged_across():
    merges = [(b"e", b" "), (b"'", b"s"), (b"s", b"t")]
    tok = minilm.Tokenizer(_vocab(merges), merges)
    assert tok.encode("the cat") == [116, 104, 101, 32, 99, 97, 116]  # "e " crosses from "the" to " cat"
    assert tok.encode("it'st") == [105, 116, 257, 116]  # "'s" is a chunk; the pattern never makes "'st"


@pytest.mark.task("9.3")
def test_decode_joins_bytes_before_decoding():
    tok = minilm.Tokenizer(_vocab([]), [])
    ids = list("café 🤖".encode())  # single bytes: é and 🤖 are split across tokens
    assert tok.encode("café 🤖") == ids
    assert tok.decode(ids) == "café 🤖"
    assert tok.decode([0xff, 33]) == "\ufffd!"  # bytes that are no UTF-8 become U+FFFD
    assert tok.decode(ids[:4]) == "caf\ufffd"  # half a character too
    assert tok.decode([]) == "" and tok.encode("") == []


@pytest.mark.task("9.3")
@pytest.mark.parametrize("args, error, match", [
    (({0: "a"}, []), TypeError, "vocab must be a dict of int ids to bytes"),
    ((_vocab([]), [(b"a", b"bc")]), ValueError, r"merges\[0\] .* b'bc' is not a token of vocab"),
    ((_vocab([]), [(b"a", "b")]), TypeError, r"merges\[0\] must be a pair \(bytes, bytes\)"),
    ((_vocab([]), [], EOT), TypeError, "special_tokens must be None or a list of non-empty str"),
])
def test_bad_tokenizer_input_is_reported(args, error, match):
    with pytest.raises(error, match=f"Tokenizer: {match}"):
        minilm.Tokenizer(*args)


@pytest.mark.task("9.3")
def test_bad_encode_and_decode_input_is_reported():
    tok = minilm.Tokenizer(_vocab([]), [])
    with pytest.raises(TypeError, match="Tokenizer.encode: text must be a str"):
        tok.encode(b"abc")
    with pytest.raises(TypeError, match="Tokenizer.decode: ids must be a list of ints"):
        tok.decode("abc")


# Last: the tests above, cheaper, stop a run with -x first.
@pytest.mark.task("9.3")
@given(train=texts, docs=st.lists(texts, min_size=1, max_size=3), num_merges=st.integers(0, 25))
def test_encode_matches_tiktoken_on_the_same_merges(train, docs, num_merges):
    """Merges from the naive trainer above; tiktoken, given them as ranks, encodes the same ids."""
    merges = naive_bpe(train, num_merges)
    vocab = _vocab(merges)
    tok = minilm.Tokenizer(vocab, merges, [EOT])
    text = EOT.join(docs)
    ids = tok.encode(text)
    assert ids == _tiktoken_oracle(vocab, [EOT]).encode(text, allowed_special={EOT})
    assert tok.decode(ids) == text


@pytest.mark.task("9.3")
def test_parity_with_tiktoken_on_a_story_text(story_file):
    """A real text: 60 merges learned from its first half, every line of it encoded as tiktoken does."""
    text = story_file.read_text(encoding="utf-8")
    merges = naive_bpe(text[: len(text) // 2], 60)
    vocab = _vocab(merges)
    tok, oracle = minilm.Tokenizer(vocab, merges, [EOT]), _tiktoken_oracle(vocab, [EOT])
    assert tok.encode(text) == oracle.encode(text, allowed_special={EOT})
    assert tok.decode(tok.encode(text)) == text
    lines = text.splitlines(keepends=True)
    assert list(tok.encode_iterable(lines)) == tok.encode(text)  # provided: reads line by line, same ids
