"""The Python side of tests/page/attention.test.mjs: attention arrays, and what chatlens.inspection
computes from them, as JSON on stdout. The node test computes the same with the page's
site/js/views/attention.mjs and asks for equal numbers.

look_back, the page's "heads that read furthest back", is chatlens.inspection's: Python owns the
rule, and the page's is checked against it.

Run: python3 tests/page/inspect_reference.py  (the node test runs it; no NumPy needed)
"""

import json
import math
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "py"))

from chatlens.inspection import by_piece, look_back, mean_weights, top_positions  # noqa: E402

def softmax(xs):
    m = max(xs)
    e = [math.exp(x - m) for x in xs]
    s = math.fsum(e)
    return [v / s for v in e]


def rows_like_a_model(rng, layers, heads, n):
    """Rows shaped as the model's are: most weight on the first token and the last few, a few heads
    that put most of theirs on one earlier position."""
    out = []
    for _ in range(layers):
        hs = []
        for _ in range(heads):
            logits = [rng.gauss(0, 1) for _ in range(n)]
            logits[0] += rng.uniform(1, 5)  # the first token, where heads park weight
            for j in range(max(0, n - 3), n):
                logits[j] += rng.uniform(0, 3)
            if rng.random() < 0.2:
                logits[rng.randrange(1, n)] += 8  # a head that reads one position
            hs.append(softmax(logits))
        out.append(hs)
    return out


def pieces_of(sizes, kinds):
    out, at = [], 0
    for size, kind in zip(sizes, kinds):
        out.append({"kind": kind, "label": kind.replace("_", " "), "start": at, "end": at + size})
        at += size
    return out


def case(name, attention, pieces):
    layers = len(attention)
    picks = [None, 0, layers - 1]
    out = {"name": name, "attention": attention, "pieces": pieces, "mean": {}, "by_piece": {}, "top": {}, "back": {}}
    for layer in picks:
        key = "all" if layer is None else str(layer)
        out["mean"][key] = mean_weights(attention, layer)
        for skip in (False, True):
            k = f"{key}/{'skip' if skip else 'keep'}"
            out["by_piece"][k] = by_piece(attention, pieces, layer=layer, skip_first=skip)
            out["top"][k] = top_positions(attention, 10, layer=layer, skip_first=skip)
        out["back"][key] = look_back(attention, 6, layer=layer)
    return out


def main():
    rng = random.Random(34)
    kinds = ["default_system", "user", "assistant", "new", "header"]
    cases = [
        # a model's shape (30 layers, 9 heads) at a reply's third step: the prompt, then 2 reply tokens
        case("model-shaped", rows_like_a_model(rng, 30, 9, 62), pieces_of([21, 13, 12, 10, 4], kinds)),
        # a reply's first step: the query is the prompt's last token, no reply so far
        case("first step", rows_like_a_model(rng, 4, 3, 35), pieces_of([21, 10, 4], ["system", "new", "header"])),
        # equal weights everywhere: the orders fall to the tie rules (lower position, layer, head)
        case("ties", [[[1 / 12] * 12 for _ in range(3)] for _ in range(2)], pieces_of([5, 3, 4], ["system", "new", "header"])),
        # sums whose plain left-to-right rounding differs from the correctly rounded one
        case("rounding", [[[0.1] * 10], [[0.7, 1e-16, 0.1, 0.1, 0.1 - 1e-16] + [0.0] * 5]],
             pieces_of([2, 5, 3], ["system", "new", "header"])),
    ]
    sums = [[0.1] * 10, [1e-16, 1, 1e16], [0.7, 1e-16, 0.1, 0.1, 0.1 - 1e-16], [], [-0.1] * 3 + [0.3],
            [rng.random() * 10 ** rng.randint(-20, 5) for _ in range(200)]]
    json.dump({"cases": cases, "fsum": [[xs, math.fsum(xs)] for xs in sums]}, sys.stdout)


if __name__ == "__main__":
    main()
