"""Byte-level BPE in pure Python, token for token identical to Hugging Face `tokenizers`.

Runs unchanged in CPython and in Pyodide: only the standard library (`re`, `codecs`,
`heapq`), no numpy, no `regex` module.

The pipeline is the one `tokenizers` runs for a byte-level BPE model:

1. Added/special tokens written in the text are cut out first (leftmost-longest match,
   exact and case-sensitive), tokens with ``normalized: false`` before those with
   ``normalized: true``; ``lstrip``/``rstrip``/``single_word`` follow `tokenizers`.
2. Each remaining segment is pre-tokenized: the optional ``Digits`` step isolates every
   numeric character, then the GPT-2 pattern
   ``'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+``
   splits the pieces.  Both steps are folded into one Python ``re`` pattern.
3. Every pre-token's UTF-8 bytes are mapped to GPT-2's byte alphabet and merged with the
   BPE merges, lowest rank first and leftmost first among equal ranks (the order of
   `tokenizers`' ``Word::merge_all``).  Results are cached per pre-token.

The pre-tokenizer is chatlens.pretokenizer; the character classes it uses, measured against
`tokenizers`, are chatlens.unicode_classes.
"""

from __future__ import annotations

import codecs
import heapq
import re
from bisect import bisect_right
from itertools import accumulate

from . import pretokenizer
from .errors import ModelFormatError
from .unicode_classes import SPACES, char_class

__all__ = ["Tokenizer", "IncrementalDecoder"]

# --- GPT-2's byte alphabet ------------------------------------------------------------------

def _bytes_to_unicode() -> list[str]:
    bs = list(range(0x21, 0x7F)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    table = [""] * 256
    for b, c in zip(bs, cs):
        table[b] = chr(c)
    return table


BYTE_TO_CHAR = _bytes_to_unicode()

_NO_MERGE = 1 << 62          # larger than any packed (rank, id) value
_HEAP_FROM = 56              # words with more symbols than this use the heap merge loop
_SLICED_FROM = 1 << 15       # pre-tokens longer than this are merged over several of counting's slices
_CACHE_LIMIT = 100_000       # pre-tokens cached before the cache is cleared


# str.translate table taking the byte alphabet to latin-1 chars; chars below 256 that are
# not in the alphabet go to a char latin-1 cannot encode, so the encode step rejects them.
_TO_LATIN1 = {ord(c): b for b, c in enumerate(BYTE_TO_CHAR)}
for _b in range(256):
    _TO_LATIN1.setdefault(_b, 0x10FFFF)


def _token_to_bytes(token: str) -> bytes:
    """A vocab token's raw bytes: each char through GPT-2's byte alphabet (as the ByteLevel
    decoder does); a token with a char outside that alphabet decodes to its UTF-8 text."""
    try:
        return token.translate(_TO_LATIN1).encode("latin-1")
    except UnicodeEncodeError:
        return token.encode("utf-8")


class _Added:
    __slots__ = ("id", "content", "special", "normalized", "lstrip", "rstrip", "single_word")

    def __init__(self, id, content, special=False, normalized=None, lstrip=False, rstrip=False,
                 single_word=False):
        self.id = id
        self.content = content
        self.special = bool(special)
        self.normalized = (not special) if normalized is None else bool(normalized)
        self.lstrip = bool(lstrip)
        self.rstrip = bool(rstrip)
        self.single_word = bool(single_word)


# `tokenizers` uses Rust regex's \w (Unicode word chars) and \s (White_Space) here; Python's
# \w is the closest the standard library has (it differs only on a few marks/connectors).
_ENDS_WITH_WORD = re.compile(r"\w\Z")
_STARTS_WITH_WORD = re.compile(r"\w")
_SPACE_CLASS = char_class(SPACES)
_LEFTMOST_SPACE_AT_END = re.compile(_SPACE_CLASS + r"*\Z")
_RIGHTMOST_SPACE_AT_START = re.compile(_SPACE_CLASS + "*")


class _Matcher:
    """Finds added tokens in text, leftmost-longest, like `tokenizers`' Aho-Corasick pass."""

    def __init__(self, tokens: list[_Added]):
        tokens = [t for t in tokens if t.content]
        self.by_content = {}
        for t in tokens:
            self.by_content.setdefault(t.content, t)
        # at one start position the longest alternative must be tried first
        contents = sorted(self.by_content, key=len, reverse=True)
        self.pattern = re.compile("|".join(re.escape(c) for c in contents))
        self.simple = not any(t.lstrip or t.rstrip or t.single_word for t in tokens)

    def split(self, text: str, lo: int, hi: int, out: list):
        """Append (start, end, id or None) for text[lo:hi] to out."""
        start_offset = lo
        by_content = self.by_content
        if self.simple:
            for m in self.pattern.finditer(text, lo, hi):
                start, stop = m.span()
                if start_offset < start:
                    out.append((start_offset, start, None))
                out.append((start, stop, by_content[m.group()].id))
                start_offset = stop
        else:
            sentence = text[lo:hi]
            for m in self.pattern.finditer(sentence):
                start, stop = m.span()
                tok = by_content[m.group()]
                if tok.single_word:
                    start_space = start == 0 or not _ENDS_WITH_WORD.search(sentence, 0, start)
                    stop_space = stop == len(sentence) or not _STARTS_WITH_WORD.match(sentence, stop)
                    if not (start_space and stop_space):
                        continue
                if tok.lstrip:
                    new_start = _LEFTMOST_SPACE_AT_END.search(sentence, 0, start).start()
                    start = max(new_start, start_offset - lo)
                if tok.rstrip:
                    stop = _RIGHTMOST_SPACE_AT_START.match(sentence, stop).end()
                if start_offset < lo + start:
                    out.append((start_offset, lo + start, None))
                out.append((lo + start, lo + stop, tok.id))
                start_offset = lo + stop
        if start_offset < hi:
            out.append((start_offset, hi, None))


class IncrementalDecoder:
    """Decodes ids one at a time: `add(id)` returns the text completed by that token and holds
    back an incomplete UTF-8 sequence; `flush()` returns what is left (invalid bytes as U+FFFD)."""

    def __init__(self, tokenizer: "Tokenizer"):
        self._tok = tokenizer
        self._dec = codecs.getincrementaldecoder("utf-8")("replace")

    def add(self, id: int) -> str:
        return self._dec.decode(self._tok.token_bytes(id))

    def flush(self) -> str:
        text = self._dec.decode(b"", True)
        self._dec.reset()
        return text


class Tokenizer:
    """A byte-level BPE tokenizer (GPT-2 family, SmolLM2).  Build it with `from_json` or
    `from_gguf`."""

    vocab_size: int
    bos_token: str | None
    eos_token: str | None
    bos_token_id: int | None
    eos_token_id: int | None
    special_ids: set

    def __init__(self, *, vocab: dict, merges, added: list[_Added] = (), digits: str | None = None,
                 use_regex: bool = True, unk_token: str | None = None, fuse_unk: bool = False,
                 byte_fallback: bool = False, ignore_merges: bool = False,
                 bos_token_id: int | None = None, eos_token_id: int | None = None, source: str = "tokenizer"):
        """vocab: token string -> id (the BPE model's vocab); merges: iterable of (left, right)
        token strings, in rank order.  Use `from_json` / `from_gguf` rather than this."""
        self._vocab = vocab
        added = list(added)
        all_ids = list(vocab.values()) + [t.id for t in added]
        if not all_ids:
            raise ModelFormatError(f"{source}: the vocabulary is empty")
        if not all(type(i) is int for i in all_ids) or min(all_ids) < 0:
            raise ModelFormatError(f"{source}: token ids must be non-negative integers")
        self.vocab_size = max(all_ids) + 1
        self._shift = shift = max(self.vocab_size - 1, 1).bit_length()
        self._mask = (1 << shift) - 1

        # merge ranks: key (left_id << shift | right_id) -> rank << shift | merged_id
        # (packed ints: dict lookups on ints, and min() over ranks compares ranks first)
        merges = merges if isinstance(merges, list) else list(merges)
        lefts = [m[0] for m in merges]
        rights = [m[1] for m in merges]
        get = vocab.get
        ia = list(map(get, lefts))
        ib = list(map(get, rights))
        inew = list(map(get, map(str.__add__, lefts, rights)))
        if None in ia or None in ib or None in inew:
            for a, b, x, y, z in zip(lefts, rights, ia, ib, inew):
                if x is None or y is None or z is None:
                    missing = a if x is None else b if y is None else a + b
                    raise ModelFormatError(
                        f"{source}: merge {a!r} {b!r} uses {missing!r}, which is not in the vocabulary")
        # later duplicates win, as in `tokenizers`' HashMap
        self._ranks = {a << shift | b: r << shift | n for r, a, b, n in zip(range(len(ia)), ia, ib, inew)}

        # raw bytes of every id
        tb = [None] * self.vocab_size
        tokens = list(vocab)
        try:
            # fast path: every token spelled in the byte alphabet (one byte per char)
            data = "".join(tokens).translate(_TO_LATIN1).encode("latin-1")
            ends = list(accumulate(map(len, tokens)))
            for tok_id, start, end in zip(vocab.values(), [0] + ends, ends):
                tb[tok_id] = data[start:end]
        except UnicodeEncodeError:
            for tok, i in vocab.items():
                tb[i] = _token_to_bytes(tok)
        self._added = {}
        for t in added:
            tb[t.id] = t.content.encode("utf-8")
            self._added[t.content] = t.id
        self._tok_bytes = tb
        self._tok_len = [0 if b is None else len(b) for b in tb]
        self.special_ids = {t.id for t in added}

        # the first symbol of each byte
        self._byte_ids = [vocab.get(c) for c in BYTE_TO_CHAR]
        self._all_bytes = all(i is not None for i in self._byte_ids)
        self._unk_id = vocab.get(unk_token) if unk_token is not None else None
        if unk_token is not None and self._unk_id is None:
            raise ModelFormatError(f"{source}: unk_token {unk_token!r} is not in the vocabulary")
        self._fuse_unk = fuse_unk
        self._byte_fallback = byte_fallback
        self._ignore_merges = ignore_merges

        first = [t for t in added if not t.normalized]
        second = [t for t in added if t.normalized]
        self._matchers = [_Matcher(ts) for ts in (first, second) if any(t.content for t in ts)]
        self._pattern = pretokenizer.pattern(digits, use_regex)
        self._cache: dict = {}
        self._span_cache: dict = {}

        def name(i):
            if i is None or not 0 <= i < self.vocab_size or tb[i] is None:
                return None
            return self.id_to_token(i)

        self._id_to_token = None
        self.bos_token_id = bos_token_id
        self.eos_token_id = eos_token_id
        self.bos_token = name(bos_token_id)
        self.eos_token = name(eos_token_id)

    # --- construction ---------------------------------------------------------------------

    @classmethod
    def from_json(cls, data: dict, *, bos_token=None, eos_token=None) -> "Tokenizer":
        """From the content of a Hugging Face tokenizer.json (model type BPE with a ByteLevel
        pre-tokenizer, optionally after Digits).  tokenizer.json names no bos/eos token: pass
        them (strings or {"content": ...}) or put "bos_token"/"eos_token" keys in `data`."""
        src = "tokenizer.json"
        if not isinstance(data, dict) or not isinstance(data.get("model"), dict):
            raise ModelFormatError(f"{src}: no model section")
        model = data["model"]
        if model.get("type", "BPE") != "BPE":
            raise ModelFormatError(f"{src}: model type {model.get('type')!r} is not supported (only BPE)")
        for key in ("continuing_subword_prefix", "end_of_word_suffix"):
            if model.get(key):
                raise ModelFormatError(f"{src}: BPE option {key}={model[key]!r} is not supported")
        if model.get("dropout"):
            raise ModelFormatError(f"{src}: BPE dropout is not supported")
        vocab = model.get("vocab")
        if not isinstance(vocab, dict):
            raise ModelFormatError(f"{src}: model.vocab must be an object")
        merges = []
        for m in model.get("merges") or ():
            if isinstance(m, str):
                parts = m.split(" ")
                if len(parts) != 2:
                    raise ModelFormatError(f"{src}: bad merge {m!r}")
                merges.append((parts[0], parts[1]))
            elif isinstance(m, (list, tuple)) and len(m) == 2:
                merges.append((m[0], m[1]))
            else:
                raise ModelFormatError(f"{src}: bad merge {m!r}")
        if data.get("normalizer") not in (None, {"type": "Sequence", "normalizers": []}):
            raise ModelFormatError(f"{src}: normalizer {data['normalizer'].get('type')!r} is not supported")
        digits, use_regex = pretokenizer.parse_config(data.get("pre_tokenizer"), src)
        # ids as `tokenizers` assigns them when it loads the file: a token already in the
        # vocabulary (or added before) keeps that id, a new one gets the next free id; the
        # "id" written in the file is not used
        added = []
        added_ids: dict = {}
        n_model = len(vocab)
        for t in data.get("added_tokens") or ():
            try:
                content = t["content"]
                if not isinstance(content, str):
                    raise TypeError
                if not content:
                    continue
                i = added_ids.get(content, vocab.get(content))
                if i is None:
                    top = max(added_ids.values(), default=None)
                    i = n_model if top is None or (top < n_model and n_model) else top + 1
                added_ids[content] = i
                added.append(_Added(i, content, t.get("special", False), t.get("normalized"),
                                    t.get("lstrip", False), t.get("rstrip", False), t.get("single_word", False)))
            except (KeyError, TypeError, ValueError):
                raise ModelFormatError(f"{src}: bad added token {t!r}") from None

        def text_of(x):
            return x.get("content") if isinstance(x, dict) else x

        bos = text_of(bos_token if bos_token is not None else data.get("bos_token"))
        eos = text_of(eos_token if eos_token is not None else data.get("eos_token"))

        def lookup(tok):
            if tok is None:
                return None
            i = added_ids.get(tok, vocab.get(tok))
            if i is None:
                raise ModelFormatError(f"{src}: token {tok!r} is not in the vocabulary")
            return i

        return cls(vocab=vocab, merges=merges, added=added, digits=digits, use_regex=use_regex,
                   unk_token=model.get("unk_token"), fuse_unk=bool(model.get("fuse_unk")),
                   byte_fallback=bool(model.get("byte_fallback")), ignore_merges=bool(model.get("ignore_merges")),
                   bos_token_id=lookup(bos), eos_token_id=lookup(eos), source=src)

    @classmethod
    def from_gguf(cls, metadata: dict) -> "Tokenizer":
        """From GGUF metadata (key -> value, arrays as lists) of a `gpt2` (byte-level BPE) model."""
        tokens, types, merges, digits = gguf_parts(metadata)
        vocab = {t: i for i, t in enumerate(tokens)}
        added = [_Added(i, tokens[i], special=types[i] == CONTROL, normalized=False)
                 for i in range(len(tokens)) if types[i] in (CONTROL, USER_DEFINED)]

        def tid(key):
            v = metadata.get(key)
            return v if isinstance(v, int) and 0 <= v < len(tokens) else None

        return cls(vocab=vocab, merges=merges, added=added, digits=digits, use_regex=True,
                   bos_token_id=tid("tokenizer.ggml.bos_token_id"), eos_token_id=tid("tokenizer.ggml.eos_token_id"),
                   source="GGUF")

    # --- encoding -------------------------------------------------------------------------

    def _segments(self, text: str, plain=()) -> list:
        """(start, end, id) for added tokens and (start, end, None) for the text between.
        plain: (start, end) character spans whose added tokens are read as their characters
        (a token that reaches into one is not matched), as `tokenizers` does for the whole
        text with encode_special_tokens."""
        if not self._matchers:
            return [(0, len(text), None)]
        segs = [(0, len(text), None)]
        for matcher in self._matchers:
            out = []
            for s in segs:
                if s[2] is None and s[0] < s[1]:
                    matcher.split(text, s[0], s[1], out)
                else:
                    out.append(s)
            segs = out
        if plain:
            kept = []
            for s in segs:
                if s[2] is not None and any(a < s[1] and s[0] < b for a, b in plain):
                    s = (s[0], s[1], None)
                if s[2] is None and kept and kept[-1][2] is None:
                    s = (kept.pop()[0], s[1], None)  # text next to text is one run for the pre-tokenizer
                kept.append(s)
            segs = kept
        return segs

    def encode(self, text: str, plain=()) -> list[int]:
        """Token ids for text; added/special tokens written in it are matched first, except
        inside the `plain` character spans (see _segments).  Nothing is added around the text."""
        out = []
        extend = out.extend
        cache = self._cache
        findall = self._pattern.findall
        for start, end, tid in self._segments(text, plain):
            if tid is not None:
                out.append(tid)
                continue
            for word in findall(text, start, end):
                ids = cache.get(word)
                if ids is None:
                    ids = self._encode_word(word)
                extend(ids)
        return out

    def encode_with_offsets(self, text: str, plain=()) -> tuple[list[int], list[tuple[int, int]]]:
        """Ids and, for each, the (start, end) character span of text it covers (the same
        offsets `tokenizers` reports).  A token holding only part of a multi-byte character gets
        that character's span, so neighbours can overlap; starts and ends never decrease and
        together the spans cover the text, except characters the vocabulary cannot spell at all
        (a byte with no token, which `tokenizers` drops: SmolLM2 lacks 0x04, 0x06, 0x13, 0x14,
        0x16, 0x1D and the lead bytes of U+40000..U+BFFFF), which lie in no span."""
        ids_out = []
        offs = []
        cache = self._cache
        spans_cache = self._span_cache
        finditer = self._pattern.finditer
        for start, end, tid in self._segments(text, plain):
            if tid is not None:
                ids_out.append(tid)
                offs.append((start, end))
                continue
            for m in finditer(text, start, end):
                word = m.group()
                ids = cache.get(word)
                if ids is None:
                    ids = self._encode_word(word)
                spans = spans_cache.get(word)
                if spans is None:
                    spans = self._word_spans(word, ids)
                ids_out.extend(ids)
                base = m.start()
                offs.extend([(base + a, base + b) for a, b in spans])
        return ids_out, offs

    def counting(self, text: str, plain=(), starts=(0,), every: int = 4096):
        """Count the tokens of encode(text, plain) a slice at a time, never holding their list: a
        generator that yields the characters read so far after each slice of about `every`
        characters, and returns how many tokens start in each range starts[k] <= c < starts[k+1]
        (a token's start as encode_with_offsets reports it; one before starts[0] counts in the
        first). Slices end only between two pre-tokens, which encode tokenizes apart anyway, so the
        counts add up to len(encode(text, plain)) exactly. No pre-token is ever cut: one so long that
        its merges alone take a while (a pasted run of a million letters) is merged over several
        slices instead."""
        starts = list(starts) or [0]
        counts = [0] * len(starts)
        ends = starts[1:] + [float("inf")]
        k, edge = 0, ends[0]  # the range tokens now start in, and where it ends
        cache = self._cache
        spans_cache = self._span_cache
        finditer = self._pattern.finditer
        due = every
        for start, end, tid in self._segments(text, plain):
            if start >= edge:
                k = bisect_right(starts, start) - 1
                edge = ends[k]
            if tid is not None:
                counts[k] += 1
                continue
            for m in finditer(text, start, end):
                a, b = m.span()
                if a >= edge:
                    k = bisect_right(starts, a) - 1
                    edge = ends[k]
                word = m.group()
                ids = cache.get(word)
                if ids is None:
                    if len(word) > _SLICED_FROM:
                        ids = yield from self._encode_word_sliced(word, a)
                    else:
                        ids = self._encode_word(word)
                if b > edge:  # the word reaches past the range's end: each token by its own start
                    spans = spans_cache.get(word) or self._word_spans(word, ids)
                    for s, _ in spans:
                        counts[max(0, bisect_right(starts, a + s) - 1)] += 1
                else:
                    counts[k] += len(ids)
                if b >= due:
                    yield b
                    due = b + every
        return counts

    def _encode_word_sliced(self, word: str, at: int):
        """_encode_word for a very long pre-token, yielding `at` (where it starts) between parts of
        its merges; returns its ids (cached as _encode_word caches them)."""
        if self._ignore_merges:
            return self._encode_word(word)  # no model chatlens reads has this; the plain way, in one part
        data = word.encode("utf-8", "surrogatepass")
        if self._all_bytes:
            syms = [self._byte_ids[b] for b in data]
        elif self._unk_id is not None and self._fuse_unk:
            syms = [s[0] for s in self._symbols_slow(data)]  # one unknown token may span a part's end: in one part
        else:
            syms = []
            for lo in range(0, len(data), _SLICED_FROM):  # each byte its own symbol: the parts' are the whole's
                syms.extend([s[0] for s in self._symbols_slow(data[lo:lo + _SLICED_FROM])])
                yield at
        ids = tuple((yield from self._merging(syms, at)) if len(syms) > 1 else syms)
        if len(self._cache) >= _CACHE_LIMIT:
            self._cache.clear()
        self._cache[word] = ids
        return ids

    def _word_spans(self, word: str, ids) -> tuple:
        """Character spans, relative to the word, of the word's tokens."""
        data = word.encode("utf-8", "surrogatepass")
        tl = self._tok_len
        byte_ids = self._byte_ids
        if self._all_bytes or all(byte_ids[b] is not None for b in data):
            # the tokens are the word's bytes, in order
            bspans = []
            pos = 0
            for i in ids:
                bspans.append((pos, pos + tl[i]))
                pos += tl[i]
        else:
            bspans = self._byte_spans_slow(data, ids)
        if len(data) == len(word):      # one byte per char
            spans = tuple(bspans)
        else:
            char_of = []
            for ci, ch in enumerate(word):
                o = ord(ch)
                char_of.extend([ci] * (1 if o < 0x80 else 2 if o < 0x800 else 3 if o < 0x10000 else 4))
            char_of.append(len(word))
            spans = tuple((char_of[a], char_of[b - 1] + 1) if b > a else (char_of[a], char_of[a])
                          for a, b in bspans)
        if len(self._span_cache) >= _CACHE_LIMIT:
            self._span_cache.clear()
        self._span_cache[word] = spans
        return spans

    def _byte_spans_slow(self, data: bytes, ids) -> list:
        """Byte spans when some bytes have no token: a dropped byte lies in no token's span."""
        tl = self._tok_len
        syms = self._symbols_slow(data)
        spans = []
        k = 0
        for i in ids:
            need = tl[i]
            start = syms[k][1] if k < len(syms) else len(data)
            end = start
            while need > 0 and k < len(syms):
                need -= tl[syms[k][0]]
                end = syms[k][2]
                k += 1
            spans.append((start, end))
        return spans

    def _encode_word(self, word: str) -> tuple:
        data = word.encode("utf-8", "surrogatepass")
        ids = None
        if self._ignore_merges:
            whole = self._vocab.get("".join([BYTE_TO_CHAR[b] for b in data]))
            if whole is not None:
                ids = (whole,)
        if ids is None:
            byte_ids = self._byte_ids
            if self._all_bytes:
                syms = [byte_ids[b] for b in data]
            else:
                syms = [s[0] for s in self._symbols_slow(data)]
            if len(syms) > 1:
                syms = self._merge_heap(syms) if len(syms) > _HEAP_FROM else self._merge_list(syms)
            ids = tuple(syms)
        cache = self._cache
        if len(cache) >= _CACHE_LIMIT:
            cache.clear()
        cache[word] = ids
        return ids

    def _symbols_slow(self, data: bytes) -> list:
        """Initial symbols (id, byte start, byte end) when some byte may have no token.
        `tokenizers` then uses byte fallback (<0xXX> tokens), else the unk token (one for a
        run of them if fuse_unk), else drops the byte."""
        syms = []
        prev_unk = False
        for pos, b in enumerate(data):
            i = self._byte_ids[b]
            if i is None and self._byte_fallback:
                i = self._vocab.get("<0x%02X>" % b)
            if i is not None:
                syms.append((i, pos, pos + 1))
                prev_unk = False
            elif self._unk_id is not None:
                if self._fuse_unk and prev_unk:
                    syms[-1] = (self._unk_id, syms[-1][1], pos + 1)
                else:
                    syms.append((self._unk_id, pos, pos + 1))
                prev_unk = True
        return syms

    def _merge_list(self, ids: list) -> list:
        """Merge the lowest-ranked pair, leftmost first, until none is left (short words)."""
        ranks = self._ranks
        shift = self._shift
        mask = self._mask
        no = _NO_MERGE
        pairs = [ranks.get(a << shift | b, no) for a, b in zip(ids, ids[1:])]
        while True:
            best = min(pairs)
            if best == no:
                return ids
            i = pairs.index(best)
            new = best & mask
            ids[i] = new
            del ids[i + 1]
            del pairs[i]
            if i:
                pairs[i - 1] = ranks.get(ids[i - 1] << shift | new, no)
            if i < len(pairs):
                pairs[i] = ranks.get(new << shift | ids[i + 1], no)
            if not pairs:
                return ids

    def _merge_heap(self, ids: list) -> list:
        """The same merge order with a heap and linked symbols (long words): `Word::merge_all`."""
        try:
            next(self._merging(ids))  # never yields without `at`
        except StopIteration as done:
            return done.value
        raise AssertionError("_merging yielded without being asked to")

    def _merging(self, ids: list, at=None, every: int = 1 << 12):
        """_merge_heap as a generator: given `at`, it yields `at` after every `every` pairs looked up
        or heap entries taken, so a caller can answer other work between parts of one long word's
        merges."""
        left = every if at is not None else -1  # counts down to 0 only when asked to yield
        ranks = self._ranks
        shift = self._shift
        mask = self._mask
        n = len(ids)
        sym = ids[:]
        nxt = list(range(1, n + 1))
        nxt[-1] = -1
        prv = list(range(-1, n - 1))
        alive = [True] * n
        heap = []
        pop, push = heapq.heappop, heapq.heappush
        # Sliced, the heap is built a push at a time: one heapify of a million pairs would be one
        # long part. The entries are distinct, so any heap of them pops them in the same order.
        add = (lambda entry: push(heap, entry)) if at is not None else heap.append
        for i in range(n - 1):
            left -= 1
            if not left:
                yield at
                left = every
            v = ranks.get(sym[i] << shift | sym[i + 1])
            if v is not None:
                add((v, i))
        if at is None:
            heapq.heapify(heap)
        while heap:
            left -= 1
            if not left:
                yield at
                left = every
            v, i = pop(heap)
            if not alive[i]:
                continue
            j = nxt[i]
            if j < 0:
                continue
            cur = ranks.get(sym[i] << shift | sym[j])
            new = v & mask
            if cur is None or cur & mask != new:
                continue                      # an entry made stale by an earlier merge
            sym[i] = new
            alive[j] = False
            k = nxt[j]
            nxt[i] = k
            if k >= 0:
                prv[k] = i
                w = ranks.get(new << shift | sym[k])
                if w is not None:
                    push(heap, (w, i))
            p = prv[i]
            if p >= 0:
                w = ranks.get(sym[p] << shift | new)
                if w is not None:
                    push(heap, (w, p))
        out = []
        i = 0
        while i >= 0:
            out.append(sym[i])
            i = nxt[i]
        return out

    # --- decoding -------------------------------------------------------------------------

    def token_bytes(self, id: int) -> bytes:
        """The raw bytes of one token (an added/special token: its UTF-8 text)."""
        try:
            b = self._tok_bytes[id] if id >= 0 else None
        except (IndexError, TypeError):
            b = None
        if b is None:
            raise ValueError(f"no token has id {id!r}")
        return b

    def token_text(self, id: int) -> str:
        """Display form of one token: its bytes decoded, a partial character shown as U+FFFD."""
        return self.token_bytes(id).decode("utf-8", "replace")

    def decode(self, ids) -> str:
        """The text of ids: their bytes joined, then decoded (invalid UTF-8 as U+FFFD).  Special
        tokens are included as their text."""
        tb = self._tok_bytes
        ids = ids if isinstance(ids, list) else list(ids)
        try:
            data = b"".join([tb[i] for i in ids])
            if ids and min(ids) < 0:
                raise IndexError
        except (IndexError, TypeError):
            for i in ids:
                self.token_bytes(i)         # raises ValueError naming the bad id
            raise
        return data.decode("utf-8", "replace")

    def incremental_decoder(self) -> IncrementalDecoder:
        return IncrementalDecoder(self)

    def specials_in(self, ids) -> list[int]:
        """The distinct special ids among `ids`, sorted: the ones the page draws as chips."""
        return sorted(set(ids) & self.special_ids)

    def identity(self) -> dict:
        """What decides the ids a text becomes, by name: two tokenizers whose identities are equal
        turn every text into the same ids (the end-of-text token each names aside)."""
        added = [sorted((t.content, t.id, t.special, t.normalized, t.lstrip, t.rstrip, t.single_word)
                        for t in m.by_content.values()) for m in self._matchers]
        return {"vocabulary": self._vocab, "merges": self._ranks, "added tokens": added,
                "pre-tokenizer": (self._pattern.pattern, self._pattern.flags)}

    def id_of(self, token: str) -> int | None:
        """The id of a token written as in the vocabulary ("Ġthe", "<|im_end|>"), or None."""
        i = self._added.get(token)
        return i if i is not None else self._vocab.get(token)

    def id_to_token(self, id: int) -> str | None:
        """The vocabulary string of an id ("Ġthe", "<|im_end|>"), or None."""
        if self._id_to_token is None:
            table = [None] * self.vocab_size
            for tok, i in self._vocab.items():
                table[i] = tok
            for tok, i in self._added.items():
                table[i] = tok
            self._id_to_token = table
        return self._id_to_token[id] if isinstance(id, int) and 0 <= id < self.vocab_size else None


# --- GGUF ---------------------------------------------------------------------------------

# GGUF token types (llama.cpp's llama_token_type)
NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE = 1, 2, 3, 4, 5, 6
_GGUF_PRE = {"smollm": "individual", "gpt2": None, "default": None}


def gguf_parts(metadata: dict):
    """(tokens, token types, merges, digits mode) of GGUF tokenizer metadata, checked."""
    model = metadata.get("tokenizer.ggml.model")
    if model != "gpt2":
        raise ModelFormatError(f"GGUF: tokenizer.ggml.model {model!r} is not supported (only gpt2, byte-level BPE)")
    pre = metadata.get("tokenizer.ggml.pre", "default")
    if not isinstance(pre, str) or pre not in _GGUF_PRE:
        raise ModelFormatError(f"GGUF: tokenizer.ggml.pre {pre!r} is not supported (smollm, gpt2, default)")
    tokens = metadata.get("tokenizer.ggml.tokens")
    if not isinstance(tokens, list) or not tokens:
        raise ModelFormatError("GGUF: tokenizer.ggml.tokens is missing")
    # A GGUF's arrays may hold any value type: check each is what a tokenizer reads before building one
    if not all(type(t) is str for t in tokens):
        raise ModelFormatError("GGUF: tokenizer.ggml.tokens must all be strings")
    types = metadata.get("tokenizer.ggml.token_type") or [NORMAL] * len(tokens)
    if not isinstance(types, list) or not all(type(t) is int for t in types):
        raise ModelFormatError("GGUF: tokenizer.ggml.token_type must be a list of whole numbers")
    if len(types) != len(tokens):
        raise ModelFormatError("GGUF: tokenizer.ggml.token_type and tokenizer.ggml.tokens differ in length")
    raw = metadata.get("tokenizer.ggml.merges") or []
    if not isinstance(raw, list) or not all(type(m) is str for m in raw):
        raise ModelFormatError("GGUF: tokenizer.ggml.merges must be a list of strings")
    merges = [m.split(" ") for m in raw]
    if any(len(m) != 2 for m in merges):
        merges = []
        for m in raw:
            k = m.find(" ", 1)                  # as llama.cpp splits a merge
            if k < 0:
                raise ModelFormatError(f"GGUF: bad merge {m!r}")
            merges.append((m[:k], m[k + 1:]))
    return tokens, types, merges, _GGUF_PRE[pre]
