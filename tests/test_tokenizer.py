"""The pure-Python tokenizer against Hugging Face `tokenizers` on the real SmolLM2 vocabulary.

The reference is `tokenizers.Tokenizer` loaded from the tokenizer.json that
`tokenizer_json_from_gguf` writes for the GGUF; the first test checks that this reference
really has SmolLM2's pre-tokenizer (Digits, then ByteLevel).
"""

import json
import random
import time
import unicodedata

import pytest

from chatlens.errors import ModelFormatError
from chatlens.host.export import tokenizer_json_from_gguf
from chatlens.tokenizer import BYTE_TO_CHAR, Tokenizer
from chatlens.unicode_classes import LETTERS, NUMBERS, NUMERIC, SPACES

tokenizers = pytest.importorskip("tokenizers")


# --- fixtures -------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def meta(gguf_path):
    from chatlens.gguf import read_metadata
    return read_metadata(gguf_path)


@pytest.fixture(scope="module")
def tj(meta):
    return tokenizer_json_from_gguf(meta)


@pytest.fixture(scope="module")
def ref(tj):
    return tokenizers.Tokenizer.from_str(json.dumps(tj))


@pytest.fixture(scope="module")
def tok(meta):
    return Tokenizer.from_gguf(meta)


@pytest.fixture(scope="module")
def control_tokens(meta):
    return [t for t, k in zip(meta["tokenizer.ggml.tokens"], meta["tokenizer.ggml.token_type"]) if k == 3]


@pytest.fixture(scope="module")
def corpus(control_tokens):
    return build_corpus(control_tokens)


@pytest.fixture(scope="module")
def missing_bytes(tok):
    """Bytes with no token of their own in SmolLM2's vocabulary: `tokenizers` silently drops
    them (no unk token, no byte fallback), so text using them does not survive a round trip."""
    return {b for b in range(256) if tok.id_of(BYTE_TO_CHAR[b]) is None}


def encodable(text, missing_bytes):
    return not missing_bytes.intersection(text.encode("utf-8"))


def ref_ids(ref, texts):
    return [e.ids for e in ref.encode_batch(texts, add_special_tokens=False)]


# --- the corpus -----------------------------------------------------------------------------

SENTENCES = [
    "The quick brown fox jumps over the lazy dog.",
    "Café crème brûlée, naïve façade, Ångström, señor, smørrebrød, Łódź, İstanbul",
    "Съешь же ещё этих мягких французских булок, да выпей чаю.",
    "Ξεσκεπάζω την ψυχοφθόρα βδελυγμία. Ἐν ἀρχῇ ἦν ὁ λόγος",
    "صِف خَلقَ خَودِ كَمِثلِ الشَمسِ إِذ بَزَغَت — ١٢٣ ٤٥٦",
    "דג סקרן שט בים מאוכזב ולפתע מצא חברה",
    "ऋषियों को सताने वाले दुष्ट राक्षसों के राजा रावण का सर्वनाश करने वाले विष्णुवतार भगवान श्रीराम ०१२३",
    "เป็นมนุษย์สุดประเสริฐเลิศคุณค่า กว่าบรรดาฝูงสัตว์เดรัจฉาน ๑๒๓",
    "我能吞下玻璃而不伤身体。日本語のテキスト、カタカナとひらがな。한국어 문장입니다.",
    "emoji 👍🏽 👨‍👩‍👧‍👦 🏳️‍🌈 🇫🇷🇯🇵 ❤️‍🔥 🧑🏿‍💻 😀😃😄 ✊🏻✊🏼",
    "def f(x):\n    return {'a': [1, 2, 3], \"b\": x ** 2}  # comment\n",
    "for (int i = 0; i < n; ++i) { sum += a[i] * b[i]; }\n\treturn sum;",
    "<div class=\"x\">&nbsp;</div>\n<script>console.log(`${a}`)</script>",
    "SELECT * FROM users WHERE id = 42 AND name LIKE '%o''brien%';",
    "I'm sure you'll see they've done it; she'd say it's John's. I'M SURE YOU'LL, THEY'RE, 'RE 'S",
    "Pi is 3.14159265358979323846264338327950288419716939937510, e is 2.718281828459045",
    "Phone: +1 (555) 123-4567, date 2026-11-29T23:53:00Z, ¼ ½ ¾ ² ³ ⅓ Ⅻ ⑫ ٣ ৩ ๓ 𝟘𝟙𝟚",
    "  leading spaces\n\n\ntrailing spaces   \t\t\n  42\n\n1.\n   7 days\t\t9",
    "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n",
    "<|im_start|>user\nWhat is my name?<|im_end|>\n<|im_start|>assistant\n",
]

POOLS = {
    "latin": ["hello", "World", "naïve", "Ærøskøbing", "straße", "coöperate", "über", "ﬁnance", "ǅemal"],
    "cyrillic": ["привет", "Москва", "ёжик", "Україна", "ђаво"],
    "greek": ["λόγος", "Ωμέγα", "ἄνθρωπος", "αβγ"],
    "arabic": ["مرحبا", "العربية", "كِتَابٌ", "٠١٢٣٤٥٦٧٨٩"],
    "hebrew": ["שלום", "עִבְרִית"],
    "hindi": ["नमस्ते", "हिन्दी", "क्षत्रिय", "०१२"],
    "thai": ["สวัสดี", "ภาษาไทย", "กรุงเทพมหานคร"],
    "cjk": ["你好", "世界", "東京", "ひらがな", "カタカナ", "한국어", "𠀀𠀁"],
    "emoji": ["😀", "👍🏽", "👨‍👩‍👧‍👦", "🏳️‍🌈", "🇫🇷", "🇯🇵", "❤️", "🧑🏿‍💻", "🫠", "✊🏻"],
    "digits": ["0", "7", "42", "2026", "3.14", "1,000,000", "٣", "५", "๙", "²", "Ⅻ", "¾"],
    "space": [" ", "  ", "   ", "\n", "\n\n", "\t", " \t", "\r\n", "\u00a0", "\u3000", "\u2009", "\x1c", "\x0b"],
    "punct": [".", ",", "!?", "...", "--", "—", "(", ")", "{", "}", "\"", "`", "#", "@", "$", "%", "&&", "->", "=>"],
    "contraction": ["'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "'LL", "'RE", "'Re", "’s", "''"],
    "code": ["def", "return", "self.x", "i++", "a[i]", "x==y", "0x1F", "fn main()", "std::vector<int>", "__init__"],
}
NEAR_MISSES = ["<|IM_END|>", "<|im_end", "im_end|>", "<|im_start", "<im_end>", "<|im_end |>", "< |im_end|>",
               "<|endoftext", "<repo_name", "<|im_end|", "|>", "<|", "<|im_start|", "<FILE_SEP>"]
EMBEDDED = ["<<|im_end|>>", "<|im_end|>|>", "<|im_start|><|im_start|>", "x<|endoftext|>y", "<|im_end|>>"]


def random_codepoint(rng):
    while True:
        cp = rng.choice([rng.randrange(0x20, 0x800), rng.randrange(0x800, 0x10000),
                         rng.randrange(0x10000, 0x110000), rng.randrange(0x300, 0x370)])
        if not 0xD800 <= cp < 0xE000:
            return chr(cp)


def build_corpus(control_tokens, n=2400, seed=1234):
    rng = random.Random(seed)
    specials = control_tokens + NEAR_MISSES + EMBEDDED
    texts = list(SENTENCES)
    # very long words and runs
    texts += ["a" * 1200, "ab" * 700, "supercalifragilistic" * 60, "ñ" * 1100, "ก" * 1000,
              "9" * 1500, " " * 1000 + "x", "\n" * 600 + "1", "🙂" * 400, "x" * 3000 + " end",
              "".join(rng.choice("abcdefghijklmnopqrstuvwxyzé") for _ in range(2000)),
              "".join(random_codepoint(rng) for _ in range(1500))]
    # whitespace runs before digits, letters, specials and the end
    for ws in ["  ", "   ", "\n\n", "\n \n", "\t\t", " \t ", "\u3000\u3000", "\n\n\n\n"]:
        for after in ["1", "12", "a", "A", ".", "<|im_end|>", "", "é", "٣"]:
            texts += [ws + after, "x" + ws + after, "1" + ws + after]
    kinds = list(POOLS)
    while len(texts) < n:
        mode = rng.random()
        parts = []
        for _ in range(rng.randint(1, 14)):
            r = rng.random()
            if r < 0.62:
                parts.append(rng.choice(POOLS[rng.choice(kinds)]))
            elif r < 0.70:
                parts.append(rng.choice(specials))
            elif r < 0.80:
                parts.append("".join(random_codepoint(rng) for _ in range(rng.randint(1, 6))))
            elif r < 0.86:
                # combining marks on letters
                parts.append(rng.choice("aeoxnAZ") + "".join(chr(rng.randrange(0x300, 0x370))
                                                            for _ in range(rng.randint(1, 3))))
            elif r < 0.92:
                parts.append(str(rng.randrange(10 ** rng.randint(1, 30))))
            else:
                parts.append(rng.choice(POOLS["space"]) * rng.randint(1, 5))
        sep = "" if mode < 0.3 else " " if mode < 0.8 else rng.choice(POOLS["space"])
        texts.append(sep.join(parts))
    return texts


# --- (1) the reference is SmolLM2's tokenizer ----------------------------------------------------

def test_reference_has_smollm2_pre_tokenizer(ref, tj, tok):
    pre = json.loads(ref.to_str())["pre_tokenizer"]
    assert pre["type"] == "Sequence"
    digits, byte_level = pre["pretokenizers"]
    assert digits == {"type": "Digits", "individual_digits": True}
    assert byte_level["type"] == "ByteLevel" and byte_level["use_regex"] and not byte_level["add_prefix_space"]
    assert json.loads(ref.to_str())["model"]["byte_fallback"] is False
    assert ref.get_vocab_size() == tok.vocab_size == 49152
    # every digit is its own token (model.md)
    assert ref.encode(" 2026").tokens == ["Ġ", "2", "0", "2", "6"]
    assert tok.encode(" 2026") == ref.encode(" 2026").ids == [tok.id_of(t) for t in ["Ġ", "2", "0", "2", "6"]]
    assert [tok.token_text(i) for i in tok.encode("\n\n1.")] == ["\n\n", "1", "."]


def test_special_tokens_and_attributes(tok, ref, control_tokens):
    assert control_tokens[:3] == ["<|endoftext|>", "<|im_start|>", "<|im_end|>"] and len(control_tokens) == 17
    assert (tok.bos_token, tok.bos_token_id, tok.eos_token, tok.eos_token_id) == ("<|im_start|>", 1, "<|im_end|>", 2)
    assert tok.special_ids == set(range(17))
    assert tok.id_of("<|im_end|>") == 2 and tok.id_of("Ġthe") == ref.token_to_id("Ġthe") and tok.id_of("nope!?") is None
    text = "<|im_start|>user\nhi<|im_end|>\n<|endoftext|><repo_name>x"
    ids = tok.encode(text)
    assert ids == ref.encode(text, add_special_tokens=False).ids
    assert ids[0] == 1 and 2 in ids and 0 in ids and tok.id_of("<repo_name>") in ids
    for near in NEAR_MISSES:
        assert not set(tok.encode(near)) & tok.special_ids, near
    for text in EMBEDDED:
        assert tok.encode(text) == ref.encode(text, add_special_tokens=False).ids
        assert set(tok.encode(text)) & tok.special_ids, text
    assert tok.token_bytes(2) == b"<|im_end|>" and tok.token_text(2) == "<|im_end|>"
    assert tok.token_bytes(tok.id_of("Ġthe")) == b" the"
    with pytest.raises(ValueError):
        tok.token_bytes(tok.vocab_size)


# --- the character classes ----------------------------------------------------------------------

def _classes():
    cls = bytearray(0x110000)          # 0 other, 1 letter, 2 number, 3 space
    for value, ranges in ((1, LETTERS), (2, NUMBERS), (3, SPACES)):
        for a, b in ranges:
            assert not any(cls[a:b + 1]), "classes overlap"
            cls[a:b + 1] = bytes([value]) * (b - a + 1)
    numeric = bytearray(0x110000)
    for a, b in NUMERIC:
        numeric[a:b + 1] = b"\1" * (b - a + 1)
    return cls, numeric


def test_class_tables_agree_with_unicodedata():
    """Wherever this Python's unicodedata knows a code point, the tables say what its general
    category says (letters L*, numbers N*; Rust's is_numeric is Nd/Nl/No = N*)."""
    cls, numeric = _classes()
    category = unicodedata.category
    bad = []
    for cp in range(0x110000):
        cat = category(chr(cp))
        if cat == "Cn":
            continue
        want = 1 if cat[0] == "L" else 2 if cat[0] == "N" else 0
        have = cls[cp] if cls[cp] != 3 else 0
        if have != want or bool(numeric[cp]) != (cat[0] == "N"):
            bad.append((hex(cp), cat, cls[cp], numeric[cp]))
    assert not bad, bad[:20]
    # \s of the reference is White_Space: U+001C..U+001F are not spaces although str.isspace() says so
    assert {chr(c) for a, b in SPACES for c in range(a, b + 1)} == {
        c for c in map(chr, range(0x3001)) if c.isspace()} - set("\x1c\x1d\x1e\x1f")


def test_class_tables_agree_with_reference():
    """Probe the reference's pre-tokenizers at every range boundary and at random code points."""
    from tokenizers import pre_tokenizers as P
    byte_level = P.ByteLevel(add_prefix_space=False, use_regex=True)
    digits = P.Digits(individual_digits=True)
    cls, numeric = _classes()
    rng = random.Random(7)
    cps = set(rng.randrange(0x110000) for _ in range(4000))
    for ranges in (LETTERS, NUMBERS, SPACES, NUMERIC):
        for a, b in ranges:
            cps.update((a - 1, a, b, b + 1))
    cps = sorted(cp for cp in cps if 0 <= cp < 0x110000 and not 0xD800 <= cp < 0xE000)
    for cp in cps:
        c = chr(cp)
        got = [len(byte_level.pre_tokenize_str(p + c)) == 1 for p in ("a", "1", "\t", "!")]
        assert got == [cls[cp] == k for k in (1, 2, 3, 0)], (hex(cp), got, cls[cp])
        assert (len(digits.pre_tokenize_str("a" + c + "a")) == 3) == bool(numeric[cp]), hex(cp)


# --- (2) ids identical to the reference; (3) round trip -------------------------------------------

def test_corpus_ids_match_reference(tok, ref, corpus):
    assert len(corpus) >= 2000
    want = ref_ids(ref, corpus)
    mismatches = [(t, w, tok.encode(t)) for t, w in zip(corpus, want) if tok.encode(t) != w]
    assert not mismatches, mismatches[:3]
    assert sum(map(len, want)) > 40_000


def test_corpus_round_trip(tok, ref, corpus, missing_bytes):
    kept = [t for t in corpus if encodable(t, missing_bytes)]
    assert len(kept) > 1800
    for text in kept:
        assert tok.decode(tok.encode(text)) == text
    sample = corpus[::7]
    for text, ids in zip(sample, ref_ids(ref, sample)):
        assert tok.decode(ids) == ref.decode(ids, skip_special_tokens=False)


def test_bytes_missing_from_the_vocabulary_are_dropped_like_the_reference(tok, ref, missing_bytes):
    # C0, C1, F5..FF never occur in UTF-8; the others do: six control characters and the lead
    # bytes of planes 4..11 (U+40000..U+BFFFF, unassigned so far)
    assert missing_bytes == {0x04, 0x06, 0x13, 0x14, 0x16, 0x1D, 0xC0, 0xC1, 0xF1, 0xF2, *range(0xF5, 0x100)}
    text = "a\x04b \U00050000x\x1d"
    ids, offsets = tok.encode_with_offsets(text)
    assert ids == ref.encode(text, add_special_tokens=False).ids
    assert tok.decode(ids) == ref.decode(ids, skip_special_tokens=False) == "ab \ufffd\ufffd\ufffdx"
    # offsets stay true to the text: the dropped bytes lie in no token's span
    assert [tok.token_bytes(i) for i in ids] == [b"a", b"b", b" ", b"\x90", b"\x80", b"\x80", b"x"]
    assert offsets == [(0, 1), (2, 3), (3, 4), (4, 5), (4, 5), (4, 5), (5, 6)]


def test_decode_of_partial_characters_matches_reference(tok, ref):
    ids = tok.encode("日本語 👨‍👩‍👧")
    for k in range(len(ids) + 1):
        assert tok.decode(ids[:k]) == ref.decode(ids[:k], skip_special_tokens=False)
        assert tok.decode(ids[k:]) == ref.decode(ids[k:], skip_special_tokens=False)


def test_merge_loops_agree(tok):
    """Short words use a list scan, long ones a heap; both merge lowest rank, leftmost first."""
    rng = random.Random(3)
    alphabets = ["abcdefghijklmnopqrstuvwxyz", "eeaattnn", "ab", " \t", "的一是不了人", "àéîõü", "0123456789"]
    for _ in range(300):
        text = "".join(rng.choice(rng.choice(alphabets)) for _ in range(rng.randint(2, 400)))
        syms = [tok.id_of(BYTE_TO_CHAR[b]) for b in text.encode("utf-8")]
        assert tok._merge_heap(list(syms)) == tok._merge_list(list(syms))


def test_bad_ids(tok):
    for bad in (-1, tok.vocab_size, 10 ** 9, None):
        with pytest.raises(ValueError):
            tok.decode([5, bad])
        with pytest.raises(ValueError):
            tok.token_text(bad)


# --- (4) tokenizer.json and GGUF give the same tokenizer -------------------------------------------

def test_from_json_equals_from_gguf(tok, tj, corpus):
    js = Tokenizer.from_json(tj)
    assert js.vocab_size == tok.vocab_size and js.special_ids == tok.special_ids
    for text in corpus[::3]:
        assert js.encode(text) == tok.encode(text)
    # merges written as "a b" strings load the same; bos/eos can be named for tokenizer.json
    old_style = dict(tj, model=dict(tj["model"], merges=[" ".join(m) for m in tj["model"]["merges"]]))
    js2 = Tokenizer.from_json(old_style, bos_token="<|im_start|>", eos_token={"content": "<|im_end|>"})
    assert (js2.bos_token_id, js2.eos_token_id, js2.eos_token) == (1, 2, "<|im_end|>")
    assert js2.encode(SENTENCES[-2]) == tok.encode(SENTENCES[-2])


# --- (5) incremental decoding ---------------------------------------------------------------------

def test_incremental_decoder(tok, corpus, missing_bytes):
    texts = [t for t in corpus if any(ord(c) > 0x7F for c in t) and encodable(t, missing_bytes)][:300] + ["日本語のテキスト", "👨‍👩‍👧‍👦🇫🇷", "é" * 50]
    split_seen = 0
    for text in texts:
        ids = tok.encode(text)
        dec = tok.incremental_decoder()
        pieces = [dec.add(i) for i in ids]
        pieces.append(dec.flush())
        assert "".join(pieces) == tok.decode(ids) == text
        assert all("\ufffd" not in p for p in pieces) or "\ufffd" in text
        split_seen += sum(1 for i in ids if "\ufffd" in tok.token_text(i))
    assert split_seen > 50      # tokens holding part of a character were exercised
    # an incomplete character at the end comes out as U+FFFD on flush, like decode
    dec = tok.incremental_decoder()
    ids = tok.encode("日")
    assert len(ids) > 1 and dec.add(ids[0]) == "" and dec.flush() == "\ufffd" == tok.decode(ids[:1])


# --- (6) offsets ----------------------------------------------------------------------------------

def test_offsets_cover_text_in_order(tok, ref, corpus, missing_bytes):
    sample = corpus[::4]
    compared = 0
    for text, enc in zip(sample, ref.encode_batch(sample, add_special_tokens=False)):
        ids, offsets = tok.encode_with_offsets(text)
        assert ids == enc.ids
        if not text:
            assert offsets == []
            continue
        for (s0, e0), (s1, e1) in zip(offsets, offsets[1:]):
            assert s0 <= s1 and e0 <= e1 and s0 < e0, (text, offsets)
        for i, (s, e) in zip(ids, offsets):
            if "\ufffd" not in tok.token_text(i):
                assert text[s:e] == tok.token_text(i)
        if encodable(text, missing_bytes):
            # the reference's character offsets, exactly; they cover the text without gaps
            # (neighbours overlap where a token holds part of a character)
            assert offsets == enc.offsets
            assert offsets[0][0] == 0 and offsets[-1][1] == len(text)
            assert all(s1 <= e0 for (_, e0), (s1, _) in zip(offsets, offsets[1:]))
            compared += 1
        else:
            # only dropped characters are left uncovered (the reference's offsets shift there)
            covered = set()
            for s, e in offsets:
                covered.update(range(s, e))
            assert all(not encodable(text[k], missing_bytes) for k in range(len(text)) if k not in covered)
    assert compared > 450


# --- other tokenizer.json variants, against the reference --------------------------------------------

def _variant(tj, **changes):
    return dict(tj, **changes)          # shallow: nothing here mutates the parts


@pytest.mark.parametrize("pre", [
    {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
    {"type": "Sequence", "pretokenizers": [
        {"type": "Digits", "individual_digits": False},
        {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}]},
    {"type": "Sequence", "pretokenizers": [
        {"type": "Digits", "individual_digits": True},
        {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}]},
], ids=["bytelevel-only", "digits-contiguous", "no-regex"])
def test_other_pre_tokenizers(tj, corpus, pre):
    d = _variant(tj, pre_tokenizer=pre)
    ours = Tokenizer.from_json(d)
    theirs = tokenizers.Tokenizer.from_str(json.dumps(d))
    sample = [t for t in corpus[::5] if len(t) < 500]
    assert [ours.encode(t) for t in sample] == ref_ids(theirs, sample)


def tok_id_in_vocab(tj, token):
    return tj["model"]["vocab"][token]


def test_added_token_options(tj):
    """lstrip / rstrip / single_word / normalized added tokens, as `tokenizers` applies them."""
    added = tj["added_tokens"] + [
        {"id": 49152, "content": "<L>", "lstrip": True, "rstrip": False, "single_word": False,
         "normalized": False, "special": True},
        {"id": 49153, "content": "<R>", "lstrip": False, "rstrip": True, "single_word": False,
         "normalized": False, "special": True},
        {"id": 49154, "content": "cat", "lstrip": False, "rstrip": False, "single_word": True,
         "normalized": False, "special": False},
        {"id": 49155, "content": "dog", "lstrip": False, "rstrip": False, "single_word": False,
         "normalized": True, "special": False},
        {"id": 49156, "content": "<|im_end|>x", "lstrip": False, "rstrip": False, "single_word": False,
         "normalized": True, "special": False},
    ]
    d = _variant(tj, added_tokens=added)
    ours = Tokenizer.from_json(d)
    theirs = tokenizers.Tokenizer.from_str(json.dumps(d))
    texts = ["a  <L>  b", "<L>x", "x <R>   y", "<R>", "cat", "a cat b", "concatenate", "cat_x", "cats", "(cat)",
             "hotdog dog", "<|im_end|>x", "  <L><R>  <L>  ", "\t<L>\n<R>\n", "dog<|im_end|>cat"]
    assert [ours.encode(t) for t in texts] == ref_ids(theirs, texts)
    # like `tokenizers`, a token already in the vocabulary keeps its id; new ones are numbered
    # from the end of the vocabulary whatever id the file gives
    for content in ["<L>", "<R>", "cat", "dog", "<|im_end|>x"]:
        assert ours.id_of(content) == theirs.token_to_id(content)
    assert ours.id_of("cat") == tok_id_in_vocab(tj, "cat") and ours.id_of("<|im_end|>x") == 49154
    assert ours.vocab_size == theirs.get_vocab_size() == 49155
    assert ours.id_of("cat") in ours.special_ids


def test_unsupported_inputs_are_clear_errors(tj, meta):
    with pytest.raises(ModelFormatError):
        Tokenizer.from_json(_variant(tj, model=dict(tj["model"], type="WordPiece")))
    with pytest.raises(ModelFormatError):
        Tokenizer.from_json(_variant(tj, pre_tokenizer={"type": "Whitespace"}))
    with pytest.raises(ModelFormatError):
        Tokenizer.from_json(_variant(tj, normalizer={"type": "NFC"}))
    with pytest.raises(ModelFormatError):
        Tokenizer.from_json(_variant(tj, model=dict(tj["model"], merges=[["Ġ", "zzzz-not-a-token"]])))
    with pytest.raises(ModelFormatError):
        Tokenizer.from_gguf(dict(meta, **{"tokenizer.ggml.model": "llama"}))
    with pytest.raises(ModelFormatError):
        Tokenizer.from_gguf(dict(meta, **{"tokenizer.ggml.pre": "llama3"}))


# --- speed (printed) and the word cache that makes a warm encode fast ---------------------------

def test_encode_speed_and_the_word_cache(meta, corpus):
    """Each distinct word goes through the merges once; encoding the same text again takes every word from the
    cache. The speed is printed, not asserted (a busy machine is not a slow tokenizer)."""
    tok = Tokenizer.from_gguf(meta)                      # a fresh, cold cache
    merged = []
    encode_word = tok._encode_word
    tok._encode_word = lambda word: merged.append(word) or encode_word(word)
    text = "\n".join(corpus[:len(corpus) // 2])
    t0 = time.perf_counter()
    ids = tok.encode(text)
    cold = time.perf_counter() - t0
    assert len(merged) == len(set(merged)) == len(tok._cache) > 1000  # each word merged once, then kept
    merged.clear()
    t0 = time.perf_counter()
    assert tok.encode(text) == ids
    warm = time.perf_counter() - t0
    assert merged == []  # the warm encode merged nothing: every word came from the cache
    print(f"\nencode {len(ids)} tokens: cold {len(ids) / cold:,.0f} tok/s, warm {len(ids) / warm:,.0f} tok/s")
