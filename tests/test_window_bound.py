"""A message too long for the window is answered from a bound, before it is tokenized: the bound
(chatlens.window.min_tokens) never exceeds the real count, for SmolLM2's tokenizer and texts
made to be hard for it (long runs, characters it cannot spell, special tokens, emoji)."""

import random

import pytest

from chatlens import window
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


def test_a_long_message_that_fits_is_still_counted_exactly(text):
    long = "Tell me the whole story of the printing press. " * 120  # the bound cannot rule it out
    assert window.too_long(text.tokenizer, long, 8192, 96) is None
    f = window.fit(text.tokenizer, text.template, system=None, messages=[{"role": "user", "content": long}],
                   window=8192, reserve=96)
    assert len(f.ids) == len(text.tokenizer.encode(f.text))
