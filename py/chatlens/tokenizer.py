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

Character classes.  Python's ``re`` has no ``\\p{L}``/``\\p{N}``, and its ``\\s`` and
``unicodedata`` differ from what `tokenizers` uses: the wheel's Oniguruma regex knows
Unicode 16 (about 9,400 letters and numbers that CPython 3.11's Unicode 14 calls
unassigned), its ``\\s`` is the White_Space property (so U+001C..U+001F are *not* spaces,
although ``str.isspace()`` says they are), and the ``Digits`` step uses Rust's
``char::is_numeric`` (Nd, Nl, No) with Rust's own, newer tables (they already count
U+11DE0..U+11DE9 and U+16FF4..U+16FF6, which the regex does not).  To be exact on every
Python (CPython 3.11, Pyodide's 3.12/3.13 with other Unicode versions) the classes are
spelled out below as code point ranges, measured code point by code point against
`tokenizers` 0.23.3 (``pre_tokenize_str`` on probes such as ``"a" + c``).  For every
code point that the running Python's ``unicodedata`` knows, they agree with its general
categories (L*, N*); ``tests/test_tokenizer.py`` checks both facts.
"""

from __future__ import annotations

import codecs
import heapq
import re
from itertools import accumulate

from .errors import ModelFormatError

__all__ = ["Tokenizer", "IncrementalDecoder", "tokenizer_json_from_gguf"]

# --- character classes, as `tokenizers` 0.23.3 sees them (hex ranges, inclusive) ---------
# _LETTER_RANGES: \p{L} of its regex; _NUMBER_RANGES: \p{N}; _SPACE_RANGES: \s;
# _NUMERIC_RANGES: Rust char::is_numeric, used by the Digits pre-tokenizer.

_LETTER_RANGES = (
    "41-5A 61-7A AA B5 BA C0-D6 D8-F6 F8-2C1 2C6-2D1 2E0-2E4 2EC 2EE 370-374 376-377 37A-37D 37F 386 "
    "388-38A 38C 38E-3A1 3A3-3F5 3F7-481 48A-52F 531-556 559 560-588 5D0-5EA 5EF-5F2 620-64A 66E-66F "
    "671-6D3 6D5 6E5-6E6 6EE-6EF 6FA-6FC 6FF 710 712-72F 74D-7A5 7B1 7CA-7EA 7F4-7F5 7FA 800-815 81A "
    "824 828 840-858 860-86A 870-887 889-88E 8A0-8C9 904-939 93D 950 958-961 971-980 985-98C 98F-990 "
    "993-9A8 9AA-9B0 9B2 9B6-9B9 9BD 9CE 9DC-9DD 9DF-9E1 9F0-9F1 9FC A05-A0A A0F-A10 A13-A28 A2A-A30 "
    "A32-A33 A35-A36 A38-A39 A59-A5C A5E A72-A74 A85-A8D A8F-A91 A93-AA8 AAA-AB0 AB2-AB3 AB5-AB9 ABD "
    "AD0 AE0-AE1 AF9 B05-B0C B0F-B10 B13-B28 B2A-B30 B32-B33 B35-B39 B3D B5C-B5D B5F-B61 B71 B83 "
    "B85-B8A B8E-B90 B92-B95 B99-B9A B9C B9E-B9F BA3-BA4 BA8-BAA BAE-BB9 BD0 C05-C0C C0E-C10 C12-C28 "
    "C2A-C39 C3D C58-C5A C5D C60-C61 C80 C85-C8C C8E-C90 C92-CA8 CAA-CB3 CB5-CB9 CBD CDD-CDE CE0-CE1 "
    "CF1-CF2 D04-D0C D0E-D10 D12-D3A D3D D4E D54-D56 D5F-D61 D7A-D7F D85-D96 D9A-DB1 DB3-DBB DBD "
    "DC0-DC6 E01-E30 E32-E33 E40-E46 E81-E82 E84 E86-E8A E8C-EA3 EA5 EA7-EB0 EB2-EB3 EBD EC0-EC4 EC6 "
    "EDC-EDF F00 F40-F47 F49-F6C F88-F8C 1000-102A 103F 1050-1055 105A-105D 1061 1065-1066 106E-1070 "
    "1075-1081 108E 10A0-10C5 10C7 10CD 10D0-10FA 10FC-1248 124A-124D 1250-1256 1258 125A-125D "
    "1260-1288 128A-128D 1290-12B0 12B2-12B5 12B8-12BE 12C0 12C2-12C5 12C8-12D6 12D8-1310 1312-1315 "
    "1318-135A 1380-138F 13A0-13F5 13F8-13FD 1401-166C 166F-167F 1681-169A 16A0-16EA 16F1-16F8 "
    "1700-1711 171F-1731 1740-1751 1760-176C 176E-1770 1780-17B3 17D7 17DC 1820-1878 1880-1884 "
    "1887-18A8 18AA 18B0-18F5 1900-191E 1950-196D 1970-1974 1980-19AB 19B0-19C9 1A00-1A16 1A20-1A54 "
    "1AA7 1B05-1B33 1B45-1B4C 1B83-1BA0 1BAE-1BAF 1BBA-1BE5 1C00-1C23 1C4D-1C4F 1C5A-1C7D 1C80-1C8A "
    "1C90-1CBA 1CBD-1CBF 1CE9-1CEC 1CEE-1CF3 1CF5-1CF6 1CFA 1D00-1DBF 1E00-1F15 1F18-1F1D 1F20-1F45 "
    "1F48-1F4D 1F50-1F57 1F59 1F5B 1F5D 1F5F-1F7D 1F80-1FB4 1FB6-1FBC 1FBE 1FC2-1FC4 1FC6-1FCC "
    "1FD0-1FD3 1FD6-1FDB 1FE0-1FEC 1FF2-1FF4 1FF6-1FFC 2071 207F 2090-209C 2102 2107 210A-2113 2115 "
    "2119-211D 2124 2126 2128 212A-212D 212F-2139 213C-213F 2145-2149 214E 2183-2184 2C00-2CE4 "
    "2CEB-2CEE 2CF2-2CF3 2D00-2D25 2D27 2D2D 2D30-2D67 2D6F 2D80-2D96 2DA0-2DA6 2DA8-2DAE 2DB0-2DB6 "
    "2DB8-2DBE 2DC0-2DC6 2DC8-2DCE 2DD0-2DD6 2DD8-2DDE 2E2F 3005-3006 3031-3035 303B-303C 3041-3096 "
    "309D-309F 30A1-30FA 30FC-30FF 3105-312F 3131-318E 31A0-31BF 31F0-31FF 3400-4DBF 4E00-A48C "
    "A4D0-A4FD A500-A60C A610-A61F A62A-A62B A640-A66E A67F-A69D A6A0-A6E5 A717-A71F A722-A788 "
    "A78B-A7CD A7D0-A7D1 A7D3 A7D5-A7DC A7F2-A801 A803-A805 A807-A80A A80C-A822 A840-A873 A882-A8B3 "
    "A8F2-A8F7 A8FB A8FD-A8FE A90A-A925 A930-A946 A960-A97C A984-A9B2 A9CF A9E0-A9E4 A9E6-A9EF "
    "A9FA-A9FE AA00-AA28 AA40-AA42 AA44-AA4B AA60-AA76 AA7A AA7E-AAAF AAB1 AAB5-AAB6 AAB9-AABD AAC0 "
    "AAC2 AADB-AADD AAE0-AAEA AAF2-AAF4 AB01-AB06 AB09-AB0E AB11-AB16 AB20-AB26 AB28-AB2E AB30-AB5A "
    "AB5C-AB69 AB70-ABE2 AC00-D7A3 D7B0-D7C6 D7CB-D7FB F900-FA6D FA70-FAD9 FB00-FB06 FB13-FB17 FB1D "
    "FB1F-FB28 FB2A-FB36 FB38-FB3C FB3E FB40-FB41 FB43-FB44 FB46-FBB1 FBD3-FD3D FD50-FD8F FD92-FDC7 "
    "FDF0-FDFB FE70-FE74 FE76-FEFC FF21-FF3A FF41-FF5A FF66-FFBE FFC2-FFC7 FFCA-FFCF FFD2-FFD7 "
    "FFDA-FFDC 10000-1000B 1000D-10026 10028-1003A 1003C-1003D 1003F-1004D 10050-1005D 10080-100FA "
    "10280-1029C 102A0-102D0 10300-1031F 1032D-10340 10342-10349 10350-10375 10380-1039D 103A0-103C3 "
    "103C8-103CF 10400-1049D 104B0-104D3 104D8-104FB 10500-10527 10530-10563 10570-1057A 1057C-1058A "
    "1058C-10592 10594-10595 10597-105A1 105A3-105B1 105B3-105B9 105BB-105BC 105C0-105F3 10600-10736 "
    "10740-10755 10760-10767 10780-10785 10787-107B0 107B2-107BA 10800-10805 10808 1080A-10835 "
    "10837-10838 1083C 1083F-10855 10860-10876 10880-1089E 108E0-108F2 108F4-108F5 10900-10915 "
    "10920-10939 10980-109B7 109BE-109BF 10A00 10A10-10A13 10A15-10A17 10A19-10A35 10A60-10A7C "
    "10A80-10A9C 10AC0-10AC7 10AC9-10AE4 10B00-10B35 10B40-10B55 10B60-10B72 10B80-10B91 10C00-10C48 "
    "10C80-10CB2 10CC0-10CF2 10D00-10D23 10D4A-10D65 10D6F-10D85 10E80-10EA9 10EB0-10EB1 10EC2-10EC4 "
    "10F00-10F1C 10F27 10F30-10F45 10F70-10F81 10FB0-10FC4 10FE0-10FF6 11003-11037 11071-11072 11075 "
    "11083-110AF 110D0-110E8 11103-11126 11144 11147 11150-11172 11176 11183-111B2 111C1-111C4 111DA "
    "111DC 11200-11211 11213-1122B 1123F-11240 11280-11286 11288 1128A-1128D 1128F-1129D 1129F-112A8 "
    "112B0-112DE 11305-1130C 1130F-11310 11313-11328 1132A-11330 11332-11333 11335-11339 1133D 11350 "
    "1135D-11361 11380-11389 1138B 1138E 11390-113B5 113B7 113D1 113D3 11400-11434 11447-1144A "
    "1145F-11461 11480-114AF 114C4-114C5 114C7 11580-115AE 115D8-115DB 11600-1162F 11644 11680-116AA "
    "116B8 11700-1171A 11740-11746 11800-1182B 118A0-118DF 118FF-11906 11909 1190C-11913 11915-11916 "
    "11918-1192F 1193F 11941 119A0-119A7 119AA-119D0 119E1 119E3 11A00 11A0B-11A32 11A3A 11A50 "
    "11A5C-11A89 11A9D 11AB0-11AF8 11BC0-11BE0 11C00-11C08 11C0A-11C2E 11C40 11C72-11C8F 11D00-11D06 "
    "11D08-11D09 11D0B-11D30 11D46 11D60-11D65 11D67-11D68 11D6A-11D89 11D98 11EE0-11EF2 11F02 "
    "11F04-11F10 11F12-11F33 11FB0 12000-12399 12480-12543 12F90-12FF0 13000-1342F 13441-13446 "
    "13460-143FA 14400-14646 16100-1611D 16800-16A38 16A40-16A5E 16A70-16ABE 16AD0-16AED 16B00-16B2F "
    "16B40-16B43 16B63-16B77 16B7D-16B8F 16D40-16D6C 16E40-16E7F 16F00-16F4A 16F50 16F93-16F9F "
    "16FE0-16FE1 16FE3 17000-187F7 18800-18CD5 18CFF-18D08 1AFF0-1AFF3 1AFF5-1AFFB 1AFFD-1AFFE "
    "1B000-1B122 1B132 1B150-1B152 1B155 1B164-1B167 1B170-1B2FB 1BC00-1BC6A 1BC70-1BC7C 1BC80-1BC88 "
    "1BC90-1BC99 1D400-1D454 1D456-1D49C 1D49E-1D49F 1D4A2 1D4A5-1D4A6 1D4A9-1D4AC 1D4AE-1D4B9 1D4BB "
    "1D4BD-1D4C3 1D4C5-1D505 1D507-1D50A 1D50D-1D514 1D516-1D51C 1D51E-1D539 1D53B-1D53E 1D540-1D544 "
    "1D546 1D54A-1D550 1D552-1D6A5 1D6A8-1D6C0 1D6C2-1D6DA 1D6DC-1D6FA 1D6FC-1D714 1D716-1D734 "
    "1D736-1D74E 1D750-1D76E 1D770-1D788 1D78A-1D7A8 1D7AA-1D7C2 1D7C4-1D7CB 1DF00-1DF1E 1DF25-1DF2A "
    "1E030-1E06D 1E100-1E12C 1E137-1E13D 1E14E 1E290-1E2AD 1E2C0-1E2EB 1E4D0-1E4EB 1E5D0-1E5ED 1E5F0 "
    "1E7E0-1E7E6 1E7E8-1E7EB 1E7ED-1E7EE 1E7F0-1E7FE 1E800-1E8C4 1E900-1E943 1E94B 1EE00-1EE03 "
    "1EE05-1EE1F 1EE21-1EE22 1EE24 1EE27 1EE29-1EE32 1EE34-1EE37 1EE39 1EE3B 1EE42 1EE47 1EE49 1EE4B "
    "1EE4D-1EE4F 1EE51-1EE52 1EE54 1EE57 1EE59 1EE5B 1EE5D 1EE5F 1EE61-1EE62 1EE64 1EE67-1EE6A "
    "1EE6C-1EE72 1EE74-1EE77 1EE79-1EE7C 1EE7E 1EE80-1EE89 1EE8B-1EE9B 1EEA1-1EEA3 1EEA5-1EEA9 "
    "1EEAB-1EEBB 20000-2A6DF 2A700-2B739 2B740-2B81D 2B820-2CEA1 2CEB0-2EBE0 2EBF0-2EE5D 2F800-2FA1D "
    "30000-3134A 31350-323AF "
)

_NUMBER_RANGES = (
    "30-39 B2-B3 B9 BC-BE 660-669 6F0-6F9 7C0-7C9 966-96F 9E6-9EF 9F4-9F9 A66-A6F AE6-AEF B66-B6F "
    "B72-B77 BE6-BF2 C66-C6F C78-C7E CE6-CEF D58-D5E D66-D78 DE6-DEF E50-E59 ED0-ED9 F20-F33 "
    "1040-1049 1090-1099 1369-137C 16EE-16F0 17E0-17E9 17F0-17F9 1810-1819 1946-194F 19D0-19DA "
    "1A80-1A89 1A90-1A99 1B50-1B59 1BB0-1BB9 1C40-1C49 1C50-1C59 2070 2074-2079 2080-2089 2150-2182 "
    "2185-2189 2460-249B 24EA-24FF 2776-2793 2CFD 3007 3021-3029 3038-303A 3192-3195 3220-3229 "
    "3248-324F 3251-325F 3280-3289 32B1-32BF A620-A629 A6E6-A6EF A830-A835 A8D0-A8D9 A900-A909 "
    "A9D0-A9D9 A9F0-A9F9 AA50-AA59 ABF0-ABF9 FF10-FF19 10107-10133 10140-10178 1018A-1018B "
    "102E1-102FB 10320-10323 10341 1034A 103D1-103D5 104A0-104A9 10858-1085F 10879-1087F 108A7-108AF "
    "108FB-108FF 10916-1091B 109BC-109BD 109C0-109CF 109D2-109FF 10A40-10A48 10A7D-10A7E 10A9D-10A9F "
    "10AEB-10AEF 10B58-10B5F 10B78-10B7F 10BA9-10BAF 10CFA-10CFF 10D30-10D39 10D40-10D49 10E60-10E7E "
    "10F1D-10F26 10F51-10F54 10FC5-10FCB 11052-1106F 110F0-110F9 11136-1113F 111D0-111D9 111E1-111F4 "
    "112F0-112F9 11450-11459 114D0-114D9 11650-11659 116C0-116C9 116D0-116E3 11730-1173B 118E0-118F2 "
    "11950-11959 11BF0-11BF9 11C50-11C6C 11D50-11D59 11DA0-11DA9 11F50-11F59 11FC0-11FD4 12400-1246E "
    "16130-16139 16A60-16A69 16AC0-16AC9 16B50-16B59 16B5B-16B61 16D70-16D79 16E80-16E96 1CCF0-1CCF9 "
    "1D2C0-1D2D3 1D2E0-1D2F3 1D360-1D378 1D7CE-1D7FF 1E140-1E149 1E2F0-1E2F9 1E4F0-1E4F9 1E5F1-1E5FA "
    "1E8C7-1E8CF 1E950-1E959 1EC71-1ECAB 1ECAD-1ECAF 1ECB1-1ECB4 1ED01-1ED2D 1ED2F-1ED3D 1F100-1F10C "
    "1FBF0-1FBF9 "
)

_SPACE_RANGES = (
    "9-D 20 85 A0 1680 2000-200A 2028-2029 202F 205F 3000 "
)

# Rust's is_numeric follows newer Unicode data than the regex: the same ranges plus 13 code points.
_NUMERIC_RANGES = _NUMBER_RANGES + "11DE0-11DE9 16FF4-16FF6 "


def _parse_ranges(spec: str) -> list[tuple[int, int]]:
    out = []
    for part in spec.split():
        a, _, b = part.partition("-")
        out.append((int(a, 16), int(b or a, 16)))
    return sorted(out)


def _subtract(ranges, minus):
    """Code point ranges in `ranges` but not in `minus` (both sorted, disjoint)."""
    out = []
    for a, b in ranges:
        for c, d in minus:
            if d < a or c > b:
                continue
            if c > a:
                out.append((a, c - 1))
            a = d + 1
            if a > b:
                break
        if a <= b:
            out.append((a, b))
    return out


def _intersect(ranges, other):
    out = []
    for a, b in ranges:
        for c, d in other:
            lo, hi = max(a, c), min(b, d)
            if lo <= hi:
                out.append((lo, hi))
    return out


def _union(*range_lists):
    out = []
    for a, b in sorted(r for rl in range_lists for r in rl):
        if out and a <= out[-1][1] + 1:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


def _cls(ranges, negate=False) -> str:
    """A regex character class for the ranges (written with \\U escapes)."""
    body = "".join("\\U%08x" % a if a == b else "\\U%08x-\\U%08x" % (a, b) for a, b in ranges)
    return ("[^" if negate else "[") + body + "]"


LETTERS = _parse_ranges(_LETTER_RANGES)
NUMBERS = _parse_ranges(_NUMBER_RANGES)
SPACES = _parse_ranges(_SPACE_RANGES)
NUMERIC = _parse_ranges(_NUMERIC_RANGES)

_PATTERNS: dict = {}


def _pretokenizer_pattern(digits: str | None, use_regex: bool) -> re.Pattern:
    """One `re` pattern whose matches are exactly the pre-tokens `tokenizers` produces.

    digits: None (no Digits step), "individual" or "contiguous" (Digits(individual_digits)).
    The Digits step cuts the text into pieces and the GPT-2 regex runs inside each piece;
    folding both into one pattern means: numeric characters are matched first, the other
    classes exclude them, and the lookahead of ``\\s+(?!\\S)`` also accepts a numeric
    character (a piece ends there).
    """
    key = (digits, use_regex)
    pat = _PATTERNS.get(key)
    if pat is not None:
        return pat
    D = NUMERIC if digits else []
    alts = []
    if digits == "individual":
        alts.append(_cls(D))
    elif digits == "contiguous" and not use_regex:
        alts.append(_cls(D) + "+")
    elif digits == "contiguous":
        # inside a run of numeric characters the GPT-2 regex still splits \p{N} from the rest
        dn = _intersect(D, NUMBERS)
        rest = _subtract(_subtract(D, NUMBERS), _union(LETTERS, SPACES))
        alts += [_cls(r) + "+" for r in (dn, rest) if r]
    if use_regex:
        L = _subtract(LETTERS, D)
        N = _subtract(NUMBERS, D)
        S = _subtract(SPACES, D)
        alts += ["'s", "'t", "'re", "'ve", "'m", "'ll", "'d"]
        if L:
            alts.append(" ?" + _cls(L) + "+")
        if N:
            alts.append(" ?" + _cls(N) + "+")
        alts.append(" ?" + _cls(_union(SPACES, LETTERS, NUMBERS, D), negate=True) + "+")
        alts.append(_cls(S) + "+(?!" + _cls(_union(SPACES, D), negate=True) + ")")
        alts.append(_cls(S) + "+")
    elif D:
        alts.append(_cls(D, negate=True) + "+")
    else:
        alts.append("(?s:.+)")
    pat = _PATTERNS[key] = re.compile("|".join(alts))
    return pat


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
_SPACE_CLASS = _cls(SPACES)
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
        self._pattern = _pretokenizer_pattern(digits, use_regex)
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
        digits, use_regex = _parse_pre_tokenizer(data.get("pre_tokenizer"), src)
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
        tokens, types, merges, digits = _gguf_parts(metadata)
        vocab = {t: i for i, t in enumerate(tokens)}
        added = [_Added(i, tokens[i], special=types[i] == _CONTROL, normalized=False)
                 for i in range(len(tokens)) if types[i] in (_CONTROL, _USER_DEFINED)]

        def tid(key):
            v = metadata.get(key)
            return v if isinstance(v, int) and 0 <= v < len(tokens) else None

        return cls(vocab=vocab, merges=merges, added=added, digits=digits, use_regex=True,
                   bos_token_id=tid("tokenizer.ggml.bos_token_id"), eos_token_id=tid("tokenizer.ggml.eos_token_id"),
                   source="GGUF")

    # --- encoding -------------------------------------------------------------------------

    def _segments(self, text: str) -> list:
        """(start, end, id) for added tokens and (start, end, None) for the text between."""
        segs = [(0, len(text), None)]
        for matcher in self._matchers:
            out = []
            for s in segs:
                if s[2] is None and s[0] < s[1]:
                    matcher.split(text, s[0], s[1], out)
                else:
                    out.append(s)
            segs = out
        return segs

    def encode(self, text: str) -> list[int]:
        """Token ids for text; added/special tokens written in it are matched first.  Nothing
        is added around the text."""
        out = []
        extend = out.extend
        cache = self._cache
        findall = self._pattern.findall
        for start, end, tid in (self._segments(text) if self._matchers else ((0, len(text), None),)):
            if tid is not None:
                out.append(tid)
                continue
            for word in findall(text, start, end):
                ids = cache.get(word)
                if ids is None:
                    ids = self._encode_word(word)
                extend(ids)
        return out

    def encode_with_offsets(self, text: str) -> tuple[list[int], list[tuple[int, int]]]:
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
        for start, end, tid in (self._segments(text) if self._matchers else ((0, len(text), None),)):
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
        for i in range(n - 1):
            v = ranks.get(sym[i] << shift | sym[i + 1])
            if v is not None:
                heap.append((v, i))
        heapq.heapify(heap)
        pop, push = heapq.heappop, heapq.heappush
        while heap:
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


def _parse_pre_tokenizer(cfg, src) -> tuple[str | None, bool]:
    """(digits, use_regex) for a ByteLevel pre-tokenizer, optionally preceded by Digits."""
    steps = cfg.get("pretokenizers") if isinstance(cfg, dict) and cfg.get("type") == "Sequence" else [cfg]
    steps = list(steps or ())
    digits = None
    if len(steps) == 2 and isinstance(steps[0], dict) and steps[0].get("type") == "Digits":
        digits = "individual" if steps[0].get("individual_digits") else "contiguous"
        steps = steps[1:]
    if len(steps) != 1 or not isinstance(steps[0], dict) or steps[0].get("type") != "ByteLevel":
        raise ModelFormatError(f"{src}: pre_tokenizer {cfg!r:.200} is not supported "
                               "(only ByteLevel, optionally after Digits)")
    bl = steps[0]
    if bl.get("add_prefix_space", True):
        raise ModelFormatError(f"{src}: ByteLevel with add_prefix_space=true is not supported")
    return digits, bool(bl.get("use_regex", True))


# --- GGUF ---------------------------------------------------------------------------------

_NORMAL, _UNKNOWN, _CONTROL, _USER_DEFINED, _UNUSED, _BYTE = 1, 2, 3, 4, 5, 6
_GGUF_PRE = {"smollm": "individual", "gpt2": None, "default": None}


def _gguf_parts(metadata: dict):
    model = metadata.get("tokenizer.ggml.model")
    if model != "gpt2":
        raise ModelFormatError(f"GGUF: tokenizer.ggml.model {model!r} is not supported (only gpt2, byte-level BPE)")
    pre = metadata.get("tokenizer.ggml.pre", "default")
    if pre not in _GGUF_PRE:
        raise ModelFormatError(f"GGUF: tokenizer.ggml.pre {pre!r} is not supported (smollm, gpt2, default)")
    tokens = metadata.get("tokenizer.ggml.tokens")
    if not isinstance(tokens, list) or not tokens:
        raise ModelFormatError("GGUF: tokenizer.ggml.tokens is missing")
    types = metadata.get("tokenizer.ggml.token_type") or [_NORMAL] * len(tokens)
    if len(types) != len(tokens):
        raise ModelFormatError("GGUF: tokenizer.ggml.token_type and tokenizer.ggml.tokens differ in length")
    raw = metadata.get("tokenizer.ggml.merges") or []
    merges = [m.split(" ") for m in raw]
    if any(len(m) != 2 for m in merges):
        merges = []
        for m in raw:
            k = m.find(" ", 1)                  # as llama.cpp splits a merge
            if k < 0:
                raise ModelFormatError(f"GGUF: bad merge {m!r}")
            merges.append((m[:k], m[k + 1:]))
    return tokens, types, merges, _GGUF_PRE[pre]


def tokenizer_json_from_gguf(metadata: dict) -> dict:
    """A complete Hugging Face tokenizer.json (as a dict) for GGUF tokenizer metadata, loadable
    with `tokenizers.Tokenizer.from_str(json.dumps(d))` and with `Tokenizer.from_json`."""
    tokens, types, merges, digits = _gguf_parts(metadata)
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
    if digits:
        pre = {"type": "Sequence", "pretokenizers": [
            {"type": "Digits", "individual_digits": digits == "individual"}, byte_level]}
    else:
        pre = byte_level
    added = [{"id": i, "content": tokens[i], "single_word": False, "lstrip": False, "rstrip": False,
              "normalized": False, "special": types[i] == _CONTROL}
             for i in range(len(tokens)) if types[i] in (_CONTROL, _USER_DEFINED)]
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": None,
        "pre_tokenizer": pre,
        "post_processor": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False, "use_regex": True},
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        "model": {
            "type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
            "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
            "vocab": {t: i for i, t in enumerate(tokens)},
            "merges": [[a, b] for a, b in merges],
        },
    }
