"""An inspection: where one token looked, and how the choice after it formed through the layers.

For `ids` (a prompt and the reply so far) and a query `position` P, with the cache holding
ids[:P] (reused, never recomputed; a part it lacks is prefilled as any prompt is), ids[P] is fed
as one more token, and what the model did with it is kept: `Inspection`. Afterwards the cache
holds ids[:P + 1]: the inspected token's keys and values are cached as any step's are. A cache
that held ids[:P + 1] and more before (the reply after the inspected step) holds all of it
again: the step rewrote only the query's own slot, with the same token (equal values; up to
float rounding where the token was first read in a prefill chunk), and the rest is regrown
(PromptCache.regrow), so an inspection costs the next reply nothing.

Issue 34's step S (the step that chose reply id S) is the query at P = len(prompt_ids) + S - 1
(`step_position`), and its `chosen_id` is reply id S (up to a near-tie, see Inspection).

Who computes it (one job for both, `Inspecting`):
- NumPy: model.NumpyBackend.inspect runs the forward pass for the token keeping each layer's
  attention weights and each block's output; the logit lens is computed here (`numpy_lens`).
- the GPU program: gpu.WebGPUBackend.plan_inspect makes one run ("inspect" then "lens" sequences)
  that writes the attention weights, keeps each block's output and runs the lens on the GPU;
  read_inspect reads its one readback (the lens as K (id, logit) pairs and a normalizer a layer).

API (all ids and positions are ints; the cache is a chatlens.cache.PromptCache):
    Inspecting(cache, ids, position, top_k=TOP_K, *, lens=True)
        the inspection as a job a host pulls (chatlens.pulled's protocol: pull, or runs and give
        on a GPU whose host submits the runs; stop; done, result: the Inspection, None once
        stopped or failed; prompt_read / prompt_tokens: the prefill's progress)
    step_position(prompt_len, reply_len, step) -> int
    mean_weights(attention, layer=None) -> [float]
    by_piece(attention, pieces, *, layer=None, skip_first=False) -> [{kind, label, start, end, share}]
    reaches(attention, *, recent=RECENT, top=3, wordless=()) -> [{layer, head, weight, reach, distance,
        reads, rests}]: how far back each head's weight lies, and whether it rests on a wordless token
    figures(attention, pieces, *, layer=None, top=10, back=6) -> {layer, mean, shares,
        shares_skip_first, top, top_skip_first, look_back, parked}: all a view draws, for one choice of
        layers (the page selects among them and computes nothing)
    settles(lens, chosen_id) -> layer or None: where the lens settles on the chosen id
    strongest_heads(attention, pieces, wordless=()) -> [{kind, label, layer, head, position, weight}]

Bad input (a position outside ids, an id outside the vocabulary, a lens of no candidates or more
than LENS_TOP_K_MAX, a position past the cache's capacity) is a ChatlensError, raised before the
cache is touched. Pure Python but for numpy_lens (NumPy imported there): the browser's GPU path
imports this module without NumPy.
"""

import heapq
import math
from dataclasses import asdict, dataclass

from .cache import common_prefix
from .errors import ChatlensError
from .pace import sized
from .pulled import Stepper

TOP_K = 5  # the lens's candidates a layer, by default (issue 34 shows the top 5)
LENS_TOP_K_MAX = 64  # the most a layer lists: what the GPU's top-k holds (gpu/program.py TOP_K_MAX)
# reaches leaves out the query and the RECENT - 1 positions before it: most heads read the last
# few tokens, which says nothing about where the reply's words came from
RECENT = 4
# A head whose weight beyond the first token and the last few lies, at least this much of it, on
# one token that holds no word (a space, punctuation, a special token) is ranked apart (parked):
# on the Today's date turn five of the six heads that reached furthest back rested 66-91% of it on
# one space of the date, which says nothing about the year it wrote.
REST = 0.5


@dataclass
class Inspection:
    """One position inspected: what the query token there read, and what each layer would choose.

    Layers and heads are 0-based here and in every list below (the model's layers 0..n_layers-1;
    query heads 0..n_heads-1, head h reading KV head h // (n_heads / n_kv_heads) as the model's
    grouped-query attention does). A page that labels them from 1 adds 1.

      position    P: where the query sits; ids[:P] were cached before it, ids[P] was fed
      query_id    ids[P], the token whose step this is
      chosen_id   the argmax of the last layer's logits (the lowest id among equal maxima): the id
                  greedy decoding writes after ids[P]. NumPy takes it from the head's own logits,
                  the GPU from the head's own matvec on the same values, so it is the id the
                  reply chose at this step on the same backend
      attention   attention[layer][head]: the query's softmax weights over positions 0..P (P + 1
                  floats, summing to 1): where that head of that layer read from
      lens        lens[layer]: the logit lens of the residual stream after block `layer` (the
                  final RMSNorm and the output layer applied to it, softmax over the whole
                  vocabulary): the top K as [id, probability], best first, equal logits by lower
                  id. The last layer's is the step's own distribution ("why this token"), its
                  first id chosen_id
    """
    position: int
    query_id: int
    chosen_id: int
    attention: list
    lens: list

    def to_json(self) -> dict:
        return asdict(self)


def step_position(prompt_len: int, reply_len: int, step: int) -> int:
    """The query position of issue 34's step `step`, the step that chose reply id `step` (or, at
    step == reply_len, the step after the reply so far, the next id's): len(prompt) + step - 1."""
    prompt_len, reply_len, step = int(prompt_len), int(reply_len), int(step)
    if prompt_len < 1:
        raise ChatlensError("an inspection needs a prompt of at least one token")
    if not 0 <= step <= reply_len:
        raise ChatlensError(f"step {step} is out of range: the reply has {reply_len} tokens, so steps 0 to {reply_len}")
    return prompt_len + step - 1


class Inspecting(Stepper):
    """One inspection as a job (chatlens.pulled's protocol): the ids the cache lacks before the
    position are prefilled (a chunk a step, choosing nothing), then the inspected token's step.
    See the module's docstring."""

    def __init__(self, cache, ids, position: int, top_k: int = TOP_K, *, lens: bool = True):
        """lens False: NumPy computes the last layer's row of the lens alone (the step's own
        distribution, from the head's logits): what a caller wanting the attention needs
        (chatlens.cause), without 29 more output projections. The GPU's lens costs little."""
        backend = cache.backend
        ids, position, top_k = _checked(backend, cache.capacity, ids, position, top_k)
        super().__init__(cache)
        self.backend = backend
        self.position, self.query_id, self.top_k, self.lens = position, ids[position], top_k, lens
        held = list(cache.ids)
        self.reused = common_prefix(held, ids[:position])
        # A cache that holds the query and more (the reply after the inspected step) keeps it: the
        # step rewrites only the query's own slot, with the same token, and the rest is regrown.
        self.kept = held[position + 1:] if self.reused == position and held[position:position + 1] == ids[position:position + 1] else []
        cache.truncate(self.reused)
        self._ids, self._at = ids, self.reused  # the ids, and the next to prefill
        self.prompt_tokens = position - self.reused  # ids prefilled before the inspected one

    # a step: the next prefill chunk (its ids: at most the cache's chunk, as its pace allows), or
    # None for the inspected token's own
    def _next(self):
        left = self.position - self._at
        if left <= 0:
            return None
        n = sized(getattr(self.cache, "pace", None), left, self.cache.chunk)
        return list(self._ids[self._at:self._at + n])

    def _plan(self, ids):
        if ids is not None:
            return self.cache.plan(ids, 0, chooses=False)
        return self.cache.plan_inspect(self.query_id, self.top_k)

    def _read(self, ids, run, raw):
        if ids is not None:
            self.cache.read(run, raw, ids)
            self._fed(ids)
            return
        attention, lens = self.cache.read_inspect(run, raw, self.query_id)
        self.cache.regrow(self.kept)
        self.result = Inspection(self.position, self.query_id, lens[-1][0][0][0], attention,
                                 [[[int(i), math.exp(logit - log_z)] for i, logit in pairs] for pairs, log_z in lens])

    def _compute(self, ids):
        if ids is not None:
            self.cache.prefill(ids)
            self._fed(ids)
            return
        attention, blocks = self.cache.inspect(self.query_id)
        lens = numpy_lens(self.backend, blocks if self.lens else blocks[-1:], self.top_k)
        self.cache.regrow(self.kept)
        self.result = Inspection(self.position, self.query_id, lens[-1][0][0], attention.tolist(), lens)

    def _fed(self, ids):
        self._at += len(ids)
        self.prompt_read += len(ids)


def numpy_lens(backend, blocks, top_k: int) -> list:
    """The logit lens of a NumpyBackend's block outputs `blocks` (layers, dim): for each layer,
    softmax(lm_head @ rms_norm(block)) over the vocabulary, its top_k as [id, probability], best
    first (chatlens.backend's tie rule). The last layer's logits are the head's own
    (backend.logits, set by its inspect step), so its best id is the step's chosen id exactly."""
    import numpy as np

    from .backend import log_z_of, top_k_of
    from .model import rms_norm

    cfg = backend.cfg
    h = rms_norm(blocks[:-1], backend.final_norm, cfg.norm_eps)  # (layers - 1, dim)
    rows = list(backend.products.linear(h, backend.lm_head)) + [np.asarray(backend.logits)]  # (layers, vocab)
    out = []
    for logits in rows:
        log_z = log_z_of(logits)
        out.append([[i, math.exp(logit - log_z)] for i, logit in _top_k(logits, top_k, top_k_of)])
    return out


def _top_k(logits, k, top_k_of):
    """top_k_of on the few candidates that can be in it (all logits at least the k-th largest:
    ties at the edge included, so the tie rule is top_k_of's), not a sort of the vocabulary."""
    import numpy as np

    if k >= logits.shape[-1]:
        return top_k_of(logits, k)
    edge = np.partition(logits, -k)[-k]
    few = np.flatnonzero(logits >= edge)
    return tuple((int(few[i]), logit) for i, logit in top_k_of(logits[few], k))


def mean_weights(attention, layer: int | None = None) -> list:
    """Each position's attention weight, averaged over the heads of every layer (layer None) or
    of one layer: what a view tints each token by."""
    layers = attention if layer is None else [attention[_layer(attention, layer)]]
    rows = [row for heads in layers for row in heads]
    return [math.fsum(column) / len(rows) for column in zip(*rows)]


def by_piece(attention, pieces, *, layer: int | None = None, skip_first: bool = False) -> list:
    """The mean weights (mean_weights) summed over each piece of the turn record's prompt
    (record.TurnRecord.pieces: kind, label, start, end), then the reply so far (kind "reply",
    positions from the prompt's end up to the query's own) when the query lies past the prompt:
    [{kind, label, start, end, share}], in order. skip_first: position 0 (the first token, where
    most heads park their attention) left out and the shares taken of the rest, so they still sum
    to 1 (its piece's `start` stays as the record has it)."""
    return _shares(mean_weights(attention, layer), pieces, skip_first)


def _spans(pieces, n):
    """The pieces over positions 0..n-1 ({kind, label, start, end}), then the reply so far."""
    spans = [{"kind": p["kind"], "label": p["label"], "start": int(p["start"]), "end": min(int(p["end"]), n)}
             for p in pieces if int(p["start"]) < n]
    prompt_end = max((int(p["end"]) for p in pieces), default=0)
    if n > prompt_end:
        spans.append({"kind": "reply", "label": "reply so far", "start": prompt_end, "end": n})
    return spans


def _shares(weights, pieces, skip_first):
    first = 1 if skip_first else 0
    total = math.fsum(weights[first:]) or 1.0
    return [{**s, "share": math.fsum(weights[max(s["start"], first):s["end"]]) / total}
            for s in _spans(pieces, len(weights))]


def _largest(weights, n, first=0, end=None):
    """[[position, weight], ...]: the n largest of weights[first:end], most first, equal weights by
    lower position."""
    order = heapq.nsmallest(max(int(n), 0), range(first, len(weights) if end is None else end),
                            key=lambda j: (-weights[j], j))
    return [[j, weights[j]] for j in order]


def reaches(attention, *, recent: int = RECENT, top: int = 3, wordless=frozenset()) -> list:
    """How far back each head's weight lies, in (layer, head) order: the signal is in single heads
    (the mean over heads sits on the first token and the last few). For each head, over positions
    1 .. P - recent (the first token and the last `recent` positions left out; P the query's):
    {layer, head, weight (its weight there), reach (each weight times how many positions back from
    P it lies, summed), distance (the mean distance of that weight: reach / weight; 0 with none),
    reads (the `top` positions it reads most there, [[position, weight], ...]), rests (True when at
    least REST of that weight lies on one position of `wordless`: a token that holds no word, such
    as a space, punctuation or a special token, where heads park weight as they do on the first
    token)}. Computed once, then ranked for each choice of layers (figures' look_back and parked)."""
    heads = []
    for l, rows in enumerate(attention):
        for h, row in enumerate(rows):
            p = len(row) - 1
            end = max(1, len(row) - recent)
            weight = math.fsum(row[1:end])
            reach = math.fsum(row[j] * (p - j) for j in range(1, end))
            reads = _largest(row, top, 1, end)
            rests = bool(weight) and bool(reads) and reads[0][0] in wordless and reads[0][1] >= REST * weight
            heads.append({"layer": l, "head": h, "weight": weight, "reach": reach,
                          "distance": reach / weight if weight else 0, "reads": reads, "rests": rests})
    return heads


def _furthest(heads, n, layer, rests=False):
    chosen = [x for x in heads if (layer is None or x["layer"] == layer) and x.get("rests", False) == rests]
    return sorted(chosen, key=lambda x: (-x["reach"], x["layer"], x["head"]))[:max(int(n), 0)]


def figures(attention, pieces, *, layer: int | None = None, top: int = 10, back: int = 6, heads=None) -> dict:
    """What a view draws of an inspection for one choice of layers (every layer's heads, or one
    layer's), so the page selects and draws and computes nothing: {layer, mean (mean_weights: the
    tint, mean[0] the first token's), shares and shares_skip_first (by_piece with the first token
    in, and left out), top and top_skip_first (the `top` positions with the most mean weight, as
    [position, weight], most first, equal weights by lower position), look_back (the `back` heads
    of that choice with the most reach that do not rest on a wordless token, most first, equal
    reach by lower layer, then head), parked (those that do, ranked apart the same way)}.
    heads: reaches(attention), when computed once for every choice."""
    weights = mean_weights(attention, layer)
    heads = reaches(attention) if heads is None else heads
    return {"layer": layer, "mean": weights,
            "shares": _shares(weights, pieces, False), "shares_skip_first": _shares(weights, pieces, True),
            "top": _largest(weights, top), "top_skip_first": _largest(weights, top, 1),
            "look_back": _furthest(heads, back, layer), "parked": _furthest(heads, back, layer, rests=True)}


def settles(lens, chosen_id) -> int | None:
    """Where the logit lens settles on `chosen_id`: the first layer from which it is every later
    layer's first choice (lens[layer][0][0]), or None when the last layer's first choice is
    another id."""
    at = None
    for layer in range(len(lens) - 1, -1, -1):
        if not lens[layer] or lens[layer][0][0] != chosen_id:
            break
        at = layer
    return at


def wordless(texts) -> frozenset:
    """The positions of `texts` (each token as text) that hold no word: no letter or digit (a
    space, punctuation), or a special token of the template's (<|im_start|>): reaches' `wordless`."""
    return frozenset(j for j, t in enumerate(texts)
                     if (t.startswith("<|") and t.endswith("|>")) or not any(c.isalnum() for c in t))


def strongest_heads(attention, pieces, wordless=frozenset()) -> list:
    """For each piece (by_piece's spans), the single head that put the most weight on one of its
    positions that holds a word (the first token and the `wordless` ones left out, where heads
    park weight): [{kind, label, layer, head, position, weight}] (equal weights: the lower layer,
    then head, then position); a piece with no such position is left out. The lesson names it
    ("block 24 · head 5 put 0.82 on “ pirate”")."""
    out = []
    for s in _spans(pieces, len(attention[0][0])):
        where = [j for j in range(max(1, s["start"]), s["end"]) if j not in wordless]
        if not where:
            continue
        best = max(((row[j], -l, -h, -j) for l, heads in enumerate(attention) for h, row in enumerate(heads)
                    for j in where))
        out.append({"kind": s["kind"], "label": s["label"], "layer": -best[1], "head": -best[2], "position": -best[3],
                    "weight": best[0]})
    return out


def _layer(attention, layer) -> int:
    layer = int(layer)
    if not 0 <= layer < len(attention):
        raise ChatlensError(f"layer {layer} is out of range: the model has layers 0 to {len(attention) - 1}")
    return layer


def _vocab(backend) -> int:
    vocab = getattr(backend, "vocab", None)
    return int(vocab if vocab is not None else backend.cfg.vocab_size)


def _checked(backend, capacity, ids, position, top_k):
    """(ids, position, top_k) as ints, or ChatlensError with a plain sentence."""
    try:
        ids = [int(i) for i in ids]
        position, top_k = int(position), int(top_k)
    except (TypeError, ValueError):
        raise ChatlensError("an inspection takes a list of token ids, a position and top_k as whole numbers") from None
    if not ids:
        raise ChatlensError("an inspection needs at least one token id")
    if not 0 <= position < len(ids):
        raise ChatlensError(f"position {position} is out of range: the ids hold {len(ids)} tokens, "
                            f"positions 0 to {len(ids) - 1}")
    vocab = _vocab(backend)
    for at, i in enumerate(ids[:position + 1]):
        if not 0 <= i < vocab:
            raise ChatlensError(f"token id {i} at position {at} is outside the vocabulary (ids 0 to {vocab - 1})")
    if not 0 < top_k <= LENS_TOP_K_MAX:
        raise ChatlensError(f"the logit lens lists 1 to {LENS_TOP_K_MAX} candidates a layer, not {top_k}")
    if position + 1 > capacity:
        raise ChatlensError(f"position {position} needs {position + 1} tokens of KV cache; it holds {capacity}")
    return ids, position, top_k
