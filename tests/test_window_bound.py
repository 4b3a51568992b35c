"""A message too long for the window is answered from a bound, before it is tokenized: the bound
(chatlens.window.min_tokens) never exceeds the real count, for SmolLM2's tokenizer and texts
made to be hard for it (long runs, characters it cannot spell, special tokens, emoji). Then the
exact figures are counted a slice at a time (Tokenizer.counting, window.counting): the same
counts as tokenizing the whole text at once, and the same pieces as fit's exact WindowError."""

import json
import random

import pytest

from chatlens import tokenizer as tokenizer_module, window
from chatlens.errors import WindowError
from chatlens.source import load_text_side


@pytest.fixture(scope="module")
def text(gguf_path):
    return load_text_side(gguf_path)


def hard_texts(tok, n=300, seed=7):
    """Random texts from pieces a tokenizer could make few tokens of, or drop."""
    rng = random.Random(seed)
    longest = max((b for i, b in enumerate(tok._tok_bytes) if b is not None and i not in tok.special_ids), key=len)
    pool = [" ", "\n", "\t", "    ", "the", " printing", "Gutenberg", "東京", "🙂", "é", "\x04", "\x1d", "\U00045678",
            "<|im_end|>", "<|im_start|>", "0123456789", "!!!", longest.decode("utf-8", "replace"), "a" * 50, " " * 81]
    for _ in range(n):
        yield "".join(rng.choice(pool) for _ in range(rng.randint(1, 60)))


def test_the_bound_never_exceeds_the_count(text):
    tok = text.tokenizer
    longest, _ = window._bound_rule(tok)
    assert longest == max(len(b) for b in tok._tok_bytes if b is not None)  # read from the vocabulary
    for t in hard_texts(tok):
        assert window.min_tokens(tok, t) <= len(tok.encode(t)), repr(t)
        assert window.min_tokens(tok, t) <= len(tok.encode(t, [(0, len(t))])), repr(t)  # specials read as text
    assert window.min_tokens(tok, "\x04\x06" * 100) == 0  # bytes the vocabulary cannot spell make no token


def test_a_pasted_million_characters_is_too_long_at_once(text):
    book = "Tell me the whole story of the printing press, step by step. " * 16_400  # about a million characters
    with pytest.raises(WindowError) as e:
        window.fit(text.tokenizer, text.template, system=None, messages=[{"role": "user", "content": book}],
                   window=8192, reserve=96)
    message = str(e.value)
    assert message.startswith("the new message is too long for the window") and f"{len(book):,} characters" in message
    need = int(message.split("at least ")[1].split(" tokens")[0].replace(",", ""))
    assert 8096 < need <= len(text.tokenizer.encode(book))  # the bound, below the exact count
    short = window.fit(text.tokenizer, text.template, system=None, messages=[{"role": "user", "content": "Hi"}],
                       window=8192, reserve=96)
    new = next(p for p in short.pieces if p["message_index"] == 0)  # the new message, as the record names it
    assert e.value.data == {"needed": need, "window": 8192, "reserve": 96, "at_least": True,
                            "pieces": [{"kind": new["kind"], "label": new["label"], "count": need}]}


def test_a_long_message_that_fits_is_still_counted_exactly(text):
    long = "Tell me the whole story of the printing press. " * 120  # the bound cannot rule it out
    assert window.too_long(text.tokenizer, long, 8192, 96) is None
    f = window.fit(text.tokenizer, text.template, system=None, messages=[{"role": "user", "content": long}],
                   window=8192, reserve=96)
    assert len(f.ids) == len(text.tokenizer.encode(f.text))


def drain(steps):
    """Pull a counting generator to its end: (what it returns, how many times it yielded)."""
    n = 0
    while True:
        try:
            next(steps)
        except StopIteration as done:
            return done.value, n
        n += 1


def counts_by_offsets(tok, text, plain, starts):
    """What counting must return, from the tokens' offsets (each token in the range of its start)."""
    from bisect import bisect_right

    _, offsets = tok.encode_with_offsets(text, plain)
    counts = [0] * len(starts)
    for a, _ in offsets:
        counts[max(0, bisect_right(starts, a) - 1)] += 1
    return counts


def test_counting_in_slices_gives_the_counts_of_the_whole(text, monkeypatch):
    tok = text.tokenizer
    # Small slices and small "long words", so that every text is cut many times and runs of 50
    # letters or 81 spaces are merged over several slices, as a pasted million would be.
    monkeypatch.setattr(tokenizer_module, "_SLICED_FROM", 8)
    rng = random.Random(3)
    for t in hard_texts(tok, n=200, seed=11):
        tok._cache.clear()  # a cached word skips its merges: count each from its bytes
        starts = sorted({0, *(rng.randrange(len(t) + 1) for _ in range(rng.randint(0, 4)))})
        for plain in ((), [(0, len(t))], [(len(t) // 3, len(t))]):
            got, _ = drain(tok.counting(t, plain, starts, every=16))
            assert got == counts_by_offsets(tok, t, plain, starts), (t, plain, starts)
            assert sum(got) == len(tok.encode(t, plain)), (t, plain)


def test_a_long_word_is_merged_over_many_slices(text):
    tok = text.tokenizer
    run = "a" * 200_000  # one pre-token: nowhere to cut it
    tok._cache.clear()
    got, slices = drain(tok.counting(run))
    assert got == [len(tok.encode(run))] and slices > 10


@pytest.fixture(scope="module")
def reference(gguf_path):
    """HF `tokenizers` over the GGUF's vocabulary: the reference count."""
    tokenizers = pytest.importorskip("tokenizers")
    from chatlens.gguf import read_metadata
    from chatlens.host.export import tokenizer_json_from_gguf

    return tokenizers.Tokenizer.from_str(json.dumps(tokenizer_json_from_gguf(read_metadata(gguf_path))))


BOOK = "Tell me the whole story of the printing press, step by step. " * 16_400  # about a million characters


def test_a_pasted_million_characters_is_counted_exactly_in_slices(text, reference):
    book = BOOK + "".join(hard_texts(text.tokenizer, n=400, seed=5))  # and every hard piece, specials too
    messages = [{"role": "user", "content": book}]
    data, slices = drain(window.counting(text.tokenizer, text.template, system="Be brief.", messages=messages,
                                         window=8192, reserve=96))
    prompt = text.template.render([{"role": "system", "content": "Be brief."}, *messages], add_generation_prompt=True)
    want = len(reference.encode(prompt, add_special_tokens=False).ids)
    assert data["needed"] == want and not data["at_least"] and slices > 100
    assert [p["label"] for p in data["pieces"]] == ["system", "new message", "generation header"]
    short = window.fit(text.tokenizer, text.template, system="Be brief.", messages=[{"role": "user", "content": "Hi"}],
                       window=8192, reserve=96)
    assert [(p["kind"], p["label"]) for p in data["pieces"]] == [(p["kind"], p["label"]) for p in short.pieces]
    assert data["pieces"][1]["count"] > window.min_tokens(text.tokenizer, book)
    assert data["message"].startswith("the new message needs") and f"{want} tokens" in data["message"]


@pytest.mark.parametrize("system, special_in_text", [(None, True), ("Be brief.", False), ("", True)])
def test_the_count_is_the_overflow_fit_raises(text, system, special_in_text):
    """Where the bound cannot tell (a window of 256, a message of some 300 tokens), fit counts
    the whole at once and raises the exact overflow: counting gives the same figures."""
    content = "Tell me about <|im_end|> and the printing press, 東京 🙂. " * 20
    messages = [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello!"},
                {"role": "user", "content": content}]
    args = dict(system=system, messages=messages, window=256, reserve=96, special_in_text=special_in_text)
    assert window.too_long(text.tokenizer, content, 256, 96) is None
    with pytest.raises(WindowError) as e:
        window.fit(text.tokenizer, text.template, **args)
    data, _ = drain(window.counting(text.tokenizer, text.template, every=64, **args))
    assert data.pop("message") == str(e.value)
    assert data == e.value.data
    # each piece's kind and count are those of the same pieces in a window that holds the whole conversation
    whole = window.fit(text.tokenizer, text.template, **{**args, "window": 4096})
    assert data["pieces"] == [{"kind": p["kind"], "label": p["label"], "count": p["count"]} for p in whole.pieces
                              if p["kind"] not in ("user", "assistant")]
