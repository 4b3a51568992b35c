"""The pre-tokenizer of a byte-level BPE model as one Python `re` pattern.

`tokenizers` runs an optional ``Digits`` step, then the GPT-2 pattern
``'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+``; both are folded
into one pattern over the measured classes of chatlens.unicode_classes, so the pre-tokens are
exactly the ones `tokenizers` produces, on any Python's Unicode version.
"""

import re

from .errors import ModelFormatError
from .unicode_classes import LETTERS, NUMBERS, NUMERIC, SPACES, char_class, intersect, subtract, union

_PATTERNS: dict = {}


def pattern(digits: str | None, use_regex: bool) -> re.Pattern:
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
        alts.append(char_class(D))
    elif digits == "contiguous" and not use_regex:
        alts.append(char_class(D) + "+")
    elif digits == "contiguous":
        # inside a run of numeric characters the GPT-2 regex still splits \p{N} from the rest
        dn = intersect(D, NUMBERS)
        rest = subtract(subtract(D, NUMBERS), union(LETTERS, SPACES))
        alts += [char_class(r) + "+" for r in (dn, rest) if r]
    if use_regex:
        L = subtract(LETTERS, D)
        N = subtract(NUMBERS, D)
        S = subtract(SPACES, D)
        alts += ["'s", "'t", "'re", "'ve", "'m", "'ll", "'d"]
        if L:
            alts.append(" ?" + char_class(L) + "+")
        if N:
            alts.append(" ?" + char_class(N) + "+")
        alts.append(" ?" + char_class(union(SPACES, LETTERS, NUMBERS, D), negate=True) + "+")
        alts.append(char_class(S) + "+(?!" + char_class(union(SPACES, D), negate=True) + ")")
        alts.append(char_class(S) + "+")
    elif D:
        alts.append(char_class(D, negate=True) + "+")
    else:
        alts.append("(?s:.+)")
    pat = _PATTERNS[key] = re.compile("|".join(alts))
    return pat


def parse_config(cfg, src) -> tuple[str | None, bool]:
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
