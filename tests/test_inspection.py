"""An inspection (chatlens.inspection): where one token looked, and how the choice after it formed
through the layers, on every backend, against transformers.

Fidelity: the attention weights equal transformers' eager attention (`output_attentions=True`) on
the same weights within 1e-4; the logit lens is within 1e-3 of transformers' own on each decoder
layer's output (forward hooks on model.model.layers[i], then model.model.norm, lm_head and a
softmax); the last layer's best id is the chosen id, and the id an ordinary step chooses there.
The tiny seeded model (tests/test_backend.py's) runs on every backend (the GPU's through wgpu-py
on lavapipe: slow, by conftest's `make` rule); the real model runs NumPy on a chat prompt and
the GPU once, on a short one. The cache is reused (an inspection of position P over a cache
holding ids[:P] computes one token) and holds ids[:P + 1] afterwards.
"""

import struct

import numpy as np
import pytest

from chatlens.backend import ranked
from chatlens.cache import PromptCache
from chatlens.errors import ChatlensError
from chatlens.inspection import (LENS_TOP_K_MAX, Inspecting, Inspection, by_piece, figures, mean_weights, reaches,
                                 settles, step_position, strongest_heads, wordless)
from chatlens.pull import greedy
from test_backend import BACKENDS, PROMPT, TINY, WEIGHTS

ATTENTION_TOL = 1e-4
LENS_TOL = 1e-3
K = 5


@pytest.fixture(params=sorted(BACKENDS))
def make(request):
    return BACKENDS[request.param]


@pytest.fixture(scope="module")
def tiny_reference():
    """transformers' Llama on the tiny model's weights (a second, not the real model's `reference`)."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from chatlens.host.reference import reference_model

    return reference_model(TINY, WEIGHTS.items())


def hf_inspection(ref, ids, position):
    """transformers' own view of ids[position]: eager attention weights (layers, heads, P + 1), the
    lens as softmax(lm_head(norm(layer output))) in float64 (layers, vocab), and the head's logits."""
    import torch

    outputs = []
    hooks = [layer.register_forward_hook(lambda m, i, o: outputs.append(o[0] if isinstance(o, tuple) else o))
             for layer in ref.model.layers]
    was = ref.config._attn_implementation
    ref.set_attn_implementation("eager")
    try:
        with torch.no_grad():
            out = ref(torch.tensor([list(ids[:position + 1])]), output_attentions=True)
            lens = ref.lm_head(ref.model.norm(torch.stack([o[0, position] for o in outputs])))
    finally:
        for h in hooks:
            h.remove()
        ref.set_attn_implementation(was)
    attention = np.stack([a[0, :, position].numpy() for a in out.attentions])
    return attention, torch.softmax(lens.double(), dim=-1).numpy(), out.logits[0, position].numpy()


def assert_matches_transformers(got: Inspection, ref, ids, position, k=K):
    attention, lens, logits = hf_inspection(ref, ids, position)
    assert np.shape(got.attention) == attention.shape
    np.testing.assert_allclose(got.attention, attention, rtol=0, atol=ATTENTION_TOL)
    np.testing.assert_allclose(np.sum(got.attention, axis=-1), 1.0, rtol=0, atol=1e-5)
    assert len(got.lens) == len(lens)
    for row, want in zip(got.lens, lens):
        top = [i for i, _ in row]
        probs = [p for _, p in row]
        assert len(row) == k and probs == sorted(probs, reverse=True)
        np.testing.assert_allclose(probs, want[top], rtol=0, atol=LENS_TOL)
        kth = np.sort(want)[-k]
        assert all(want[i] >= kth - LENS_TOL for i in top)  # transformers' top k, up to ties within the tolerance
    best, second = np.sort(logits)[-2:][::-1]
    if best - second > 1e-3:  # not a near-tie: every implementation must agree
        assert got.chosen_id == got.lens[-1][0][0] == int(np.argmax(logits))
    assert got.query_id == ids[position] and got.position == position


def logits_after(make, ids, n_ctx=32):
    b = make(n_ctx)
    step = b.prefill(ids, top_k=K)
    return step, np.asarray(b.last_logits(), np.float32)


# -- fidelity ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("position", [0, 6, len(PROMPT) - 1])
def test_equals_transformers_eager_attention_and_its_lens(make, tiny_reference, position):
    cache = PromptCache(make(32))
    got = greedy(Inspecting(cache, PROMPT, position, K))
    assert_matches_transformers(got, tiny_reference, PROMPT, position)


def test_the_last_layer_is_the_step_s_own_distribution(make):
    """The last layer's lens is "why this token": the very ids and probabilities of the ordinary
    decode step over the same cache, and its chosen id (NumPy: the head's own logits; the GPU: the
    head's matvec on the same values, and the same top-k kernel)."""
    position = 8
    cache = PromptCache(make(32))
    cache.prefill(PROMPT[:position])
    got = greedy(Inspecting(cache, PROMPT, position, K))
    ordinary = make(32)
    ordinary.prefill(PROMPT[:position])
    step = ordinary.decode(PROMPT[position], top_k=K)
    want = ranked(step)
    assert got.chosen_id == step.id == want[0][0]
    assert got.lens[-1] == [[i, p] for i, _, p in want]


# -- the cache -------------------------------------------------------------------------------------
class Fed:
    """Counts the tokens a backend is asked to compute, by each way in."""

    def __init__(self, backend):
        self.calls = []
        for name in ("prefill", "plan", "inspect", "plan_inspect"):
            if hasattr(backend, name):
                setattr(backend, name, self._counted(name, getattr(backend, name)))

    def _counted(self, name, call):
        def counted(ids, *args, **kwargs):
            self.calls.append((name, len(ids) if isinstance(ids, (list, tuple)) else 1))
            return call(ids, *args, **kwargs)
        return counted


def test_the_cache_is_reused_and_holds_the_position_after(make):
    """A cache holding ids[:P] computes exactly the token at P, and then holds ids[:P + 1]; reading
    on from there equals a fresh run (the inspected token's keys and values are the step's)."""
    position = 7
    cache = PromptCache(make(32))
    cache.prefill(PROMPT[:position])
    fed = Fed(cache.backend)
    assert cache.backend.length == position
    got = greedy(Inspecting(cache, PROMPT, position, K))
    assert fed.calls == [("plan_inspect" if cache.planned else "inspect", 1)]
    assert cache.ids == PROMPT[:position + 1] and cache.backend.length == position + 1
    assert got.lens[-1][0][0] == got.chosen_id
    rest = cache.prefill(PROMPT[position + 1:])
    fresh, fresh_logits = logits_after(make, PROMPT)
    assert rest.id == fresh.id
    np.testing.assert_allclose(np.asarray(cache.backend.last_logits(), np.float32), fresh_logits, rtol=0, atol=1e-4)


@pytest.mark.parametrize("held", ["longer", "other"])
def test_a_cache_holding_more_or_other_ids_is_cut_to_the_common_prefix(make, held):
    """A cache past the position (a reply written after it) is inspected in place, with nothing
    recomputed but the query, and keeps what it held after it (regrown: the next reply reuses
    it); one that parts from ids at 3 keeps 3 and prefills the rest before the position, pulled a
    chunk at a time. Either way the inspection is a fresh cache's, and so is what follows it."""
    position = 9
    cache = PromptCache(make(32))
    cache.prefill(PROMPT[:position + 2] if held == "longer" else PROMPT[:3] + [1, 2, 3, 4])
    fed = Fed(cache.backend)
    job = Inspecting(cache, PROMPT, position, top_k=K)
    assert job.reused == (position if held == "longer" else 3)
    assert job.prompt_tokens == position - job.reused and job.prompt_read == 0
    while not job.done:
        assert job.pull() == []
    assert job.prompt_read == job.prompt_tokens
    computed = sum(n for _, n in fed.calls)
    assert computed == 1 + position - job.reused
    held_after = PROMPT[:position + 2] if held == "longer" else PROMPT[:position + 1]
    assert cache.ids == held_after and cache.backend.length == len(held_after)
    follow = PROMPT + [5]
    rest = cache.prefill(follow[len(held_after):])  # the cache it leaves is a fresh one's
    fresh_step, fresh_logits = logits_after(make, follow)
    assert rest.id == fresh_step.id
    np.testing.assert_allclose(np.asarray(cache.backend.last_logits(), np.float32), fresh_logits, rtol=0, atol=1e-4)
    fresh = greedy(Inspecting(PromptCache(make(32)), PROMPT, position, K))
    np.testing.assert_allclose(job.result.attention, fresh.attention, rtol=0, atol=1e-5)
    assert [[i for i, _ in row] for row in job.result.lens] == [[i for i, _ in row] for row in fresh.lens]
    np.testing.assert_allclose([[p for _, p in row] for row in job.result.lens],
                               [[p for _, p in row] for row in fresh.lens], rtol=0, atol=1e-5)


@pytest.mark.slow
def test_a_host_that_submits_the_runs_itself_gets_the_same_inspection():
    """The browser's way (the worker submits each run from its JSON and hands Python the bytes):
    runs() and give(raw) over a GPU whose executor Python does not call, one run at a time (the
    prefill chunks the cache lacks, then one inspect run with one readback)."""
    position = 9
    gpu = BACKENDS["webgpu"](32)
    executor, gpu.executor = gpu.executor, None  # as in the browser: Python never submits
    cache = PromptCache(gpu)
    job = Inspecting(cache, PROMPT, position, top_k=K)
    seen = []
    while not job.done:
        (run,) = job.runs()
        assert job.runs() == [] and job.in_flight == 1  # one at a time: none more until its bytes come
        r = run.to_json()
        seen.append((r["sequences"], r["readback"]))
        raw = executor.run(r["sequences"], struct.pack(f"<{len(r['params'])}I", *r["params"]), r["readback"])
        assert job.give(raw) == []
    short = gpu.meta["short"]
    inspect_seq = short["inspect"] if short else "inspect"
    assert seen[-1] == ([inspect_seq, "lens"], "inspection") and all(rb is None for _, rb in seen[:-1])
    gpu.executor = executor
    fresh = greedy(Inspecting(PromptCache(BACKENDS["numpy"](32)), PROMPT, position, K))
    assert job.result.chosen_id == fresh.chosen_id and cache.ids == PROMPT[:position + 1]
    np.testing.assert_allclose(job.result.attention, fresh.attention, rtol=0, atol=1e-5)


def test_stopping_undoes_what_was_planned(make):
    position = 9
    cache = PromptCache(make(32))
    job = Inspecting(cache, PROMPT, position, top_k=K)
    if cache.planned:
        job.runs()
    else:
        job.pull()  # the prefill before the position, computed: kept
    job.stop()
    assert job.done and job.result is None and job.runs() == [] and job.pull() == []
    assert cache.backend.length == len(cache.ids) and cache.ids == PROMPT[:len(cache.ids)]


def test_a_failed_step_ends_the_job_and_empties_the_cache(make):
    """What a backend holds after a call that failed part-way is unknown: the cache empties
    (PromptCache's rule), and the job is done with no result."""
    cache = PromptCache(make(32))
    cache.prefill(PROMPT[:5])

    def broken(*args):
        raise RuntimeError("device lost")

    setattr(cache.backend, "plan_inspect" if cache.planned else "inspect", broken)
    job = Inspecting(cache, PROMPT, 5, top_k=K)
    with pytest.raises(RuntimeError, match="device lost"):
        job.pull()
    assert job.done and job.result is None and job.pull() == []
    assert cache.ids == [] and cache.backend.length == 0


# -- bad input ---------------------------------------------------------------------------------------
def test_bad_input_is_a_plain_sentence_and_leaves_the_cache_alone(make):
    cache = PromptCache(make(16))
    cache.prefill(PROMPT[:4])
    vocab = TINY.vocab_size
    cases = [
        (PROMPT, len(PROMPT), K, "position 11 is out of range: the ids hold 11 tokens, positions 0 to 10"),
        (PROMPT, -1, K, "position -1 is out of range"),
        ([], 0, K, "needs at least one token id"),
        (PROMPT[:3] + [vocab] + PROMPT[3:], 5, K, f"token id {vocab} at position 3 is outside the vocabulary"),
        ([-1] + PROMPT, 2, K, "token id -1 at position 0 is outside the vocabulary"),
        (PROMPT, 3, 0, f"the logit lens lists 1 to {LENS_TOP_K_MAX} candidates a layer, not 0"),
        (PROMPT, 3, LENS_TOP_K_MAX + 1, "the logit lens lists 1 to"),
        (PROMPT * 2, 16, K, "position 16 needs 17 tokens of KV cache; it holds 16"),
        (PROMPT, "x", K, "as whole numbers"),
    ]
    for ids, position, k, message in cases:
        with pytest.raises(ChatlensError, match=message.replace("(", r"\(")):
            greedy(Inspecting(cache, ids, position, k))
        assert cache.ids == PROMPT[:4] and cache.backend.length == 4
    # an id past the position is not read: refusing it would refuse a reply the inspection never reaches
    assert greedy(Inspecting(cache, PROMPT[:5] + [vocab], 4, K)).query_id == PROMPT[4]


def test_the_gpu_path_needs_no_numpy():
    """In the browser the GPU path runs without NumPy: block it, plan an inspection over a program
    built in pure Python (no executor: the host submits), and read bytes laid out as the program
    documents its `inspection` readback (each layer's K_MAX (id, logit) pairs and (max, sum of exp),
    then the attention weights (layers, heads, keys) packed for the step's keys)."""
    import json
    import os
    import subprocess
    import sys

    from conftest import ROOT

    tensors = {name: {"file": name, "offset": 0, "nbytes": 4 * int(np.prod(a.shape)), "dtype": "F32",
                      "shape": list(a.shape)} for name, a in WEIGHTS.items()}
    plan = {"source": "arrays", "rope": "hf", "config": TINY.to_dict(), "tensors": tensors}
    code = """
import json, math, struct, sys
sys.modules['numpy'] = None
from chatlens.cache import PromptCache
from chatlens.gpu import build_program, checked_plan, WebGPUBackend
from chatlens.inspection import Inspecting, by_piece
program = build_program(checked_plan(json.loads(sys.argv[1])), 16)
cache = PromptCache(WebGPUBackend(program))
meta = program["meta"]["inspect"]
job = Inspecting(cache, [5, 6, 7, 8, 9], 3, top_k=2)
(chunk,) = job.runs()
job.give(b"")
(run,) = job.runs()
raw = bytearray(program["readbacks"]["inspection"]["size"])
row = 8 * (meta["top_k_max"] + 1)
for layer in range(meta["layers"]):
    struct.pack_into("<IfIf", raw, layer * row, 10 + layer, 2.0, 3, 1.0)
    struct.pack_into("<ff", raw, layer * row + row - 8, 2.0, 4.0)
n = meta["layers"] * meta["heads"] * 4
struct.pack_into(f"<{n}f", raw, meta["attention_at"], *range(n))  # weight j: layer, head and key in order
job.give(bytes(raw))
print(json.dumps([job.result.to_json(), cache.ids, run.to_json()["sequences"], chunk.to_json()["readback"],
                  by_piece(job.result.attention, [{"kind": "system", "label": "s", "start": 0, "end": 2}])]))
"""
    out = subprocess.run([sys.executable, "-c", code, json.dumps(plan)], capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(ROOT / "py")})
    assert out.returncode == 0, out.stderr
    got, ids, sequences, chunk_readback, pieces = json.loads(out.stdout)
    assert ids == [5, 6, 7, 8] and sequences == ["inspect", "lens"] and chunk_readback is None
    assert got["position"] == 3 and got["query_id"] == 8 and got["chosen_id"] == 10 + TINY.n_layers - 1
    for layer, row in enumerate(got["lens"]):  # p = exp(logit - log(sum exp)), log_z = max + log(sum)
        assert row == [[10 + layer, pytest.approx(0.25)], [3, pytest.approx(np.exp(-1.0) / 4)]]
    heads = TINY.n_heads
    assert got["attention"] == [[[(layer * heads + h) * 4 + key for key in range(4)] for h in range(heads)]
                                for layer in range(TINY.n_layers)]
    assert [p["kind"] for p in pieces] == ["system", "reply"]


def test_step_positions():
    """Issue 34's step S chose reply id S: its query is the token before it, len(prompt) + S - 1."""
    assert step_position(30, 4, 0) == 29 and step_position(30, 4, 3) == 32
    assert step_position(30, 4, 4) == 33  # the step after the reply so far: the next id's
    for prompt_len, reply_len, step, message in ((30, 4, 5, "step 5 is out of range: the reply has 4 tokens"),
                                                 (30, 4, -1, "step -1 is out of range"),
                                                 (0, 0, 0, "a prompt of at least one token")):
        with pytest.raises(ChatlensError, match=message):
            step_position(prompt_len, reply_len, step)


# -- shares of what was read ----------------------------------------------------------------------
def weights_for(layers=3, heads=4, n=15, seed=0):
    rng = np.random.default_rng(seed)
    w = rng.random((layers, heads, n)) ** 4
    return w / w.sum(axis=-1, keepdims=True)


PIECES = [{"kind": "system", "label": "system prompt", "start": 0, "end": 4, "count": 4},
          {"kind": "user", "label": "turn 1", "start": 4, "end": 9, "count": 5},
          {"kind": "header", "label": "generation header", "start": 9, "end": 12, "count": 3}]


@pytest.mark.parametrize("layer", [None, 0, 2])
@pytest.mark.parametrize("skip_first", [False, True])
def test_by_piece_sums_the_mean_weights_over_each_piece_and_the_reply_so_far(layer, skip_first):
    w = weights_for()
    got = by_piece(w.tolist(), PIECES, layer=layer, skip_first=skip_first)
    mean = (w if layer is None else w[[layer]]).mean(axis=(0, 1))
    np.testing.assert_allclose(mean_weights(w.tolist(), layer), mean, rtol=0, atol=1e-12)
    if skip_first:
        mean = np.concatenate([[0.0], mean[1:]]) / mean[1:].sum()
    spans = [(0, 4), (4, 9), (9, 12), (12, 15)]
    assert [(g["start"], g["end"]) for g in got] == spans
    assert [g["kind"] for g in got] == ["system", "user", "header", "reply"]
    np.testing.assert_allclose([g["share"] for g in got], [mean[a:b].sum() for a, b in spans], rtol=0, atol=1e-12)
    assert sum(g["share"] for g in got) == pytest.approx(1.0, abs=1e-12)


def test_by_piece_within_the_prompt_has_no_reply_and_cuts_the_last_piece():
    """The first reply token's step reads the prompt only (its query is the header's last token)."""
    w = weights_for(n=11)
    got = by_piece(w.tolist(), PIECES)
    assert [(g["kind"], g["start"], g["end"]) for g in got] == [("system", 0, 4), ("user", 4, 9), ("header", 9, 11)]
    assert sum(g["share"] for g in got) == pytest.approx(1.0, abs=1e-12)


def test_top_positions_and_a_layer_out_of_range():
    w = weights_for()
    mean = w.mean(axis=(0, 1))
    got = figures(w.tolist(), PIECES, top=4)
    assert [j for j, _ in got["top"]] == list(np.argsort(-mean, kind="stable")[:4])
    assert all(j != 0 for j, _ in figures(w.tolist(), PIECES, top=15)["top_skip_first"])
    with pytest.raises(ChatlensError, match="layer 3 is out of range: the model has layers 0 to 2"):
        by_piece(w.tolist(), PIECES, layer=3)


def test_look_back_ranks_heads_by_how_far_back_their_weight_lies():
    """reach = each weight times its distance from the query, over positions 1 .. P - RECENT: a head
    that puts half its weight far back outranks one that puts all of it near; the first token and
    the last RECENT positions count for nothing."""
    n = 20  # positions 0..19, the query at 19: positions 1..15 count
    far, near, parked, tie = ([0.0] * n for _ in range(4))
    far[0], far[2] = 0.5, 0.5  # 17 back
    near[14] = 1.0  # 5 back
    parked[0], parked[19] = 0.5, 0.5  # nothing that counts
    tie[2], tie[0] = 0.5, 0.5  # as `far`, a later head
    def look_back(attention, n, layer=None):
        return figures(attention, [], layer=layer, back=n)["look_back"]

    heads = look_back([[near, far], [parked, tie]], 6)
    assert [(h["layer"], h["head"]) for h in heads] == [(0, 1), (1, 1), (0, 0), (1, 0)]
    assert heads[0] == {"layer": 0, "head": 1, "weight": 0.5, "reach": 8.5, "distance": 17.0,
                        "reads": [[2, 0.5], [1, 0.0], [3, 0.0]], "rests": False}
    assert heads[2]["reach"] == 5.0 and heads[3] == {"layer": 1, "head": 0, "weight": 0, "reach": 0, "distance": 0,
                                                     "reads": [[1, 0.0], [2, 0.0], [3, 0.0]], "rests": False}
    assert [(h["layer"], h["head"]) for h in look_back([[near, far], [parked, tie]], 6, layer=1)] == [(1, 1), (1, 0)]


def test_heads_that_rest_on_a_wordless_token_are_ranked_apart():
    """A head that puts at least half its weight (beyond the first token and the last few) on one
    token that holds no word (position 2 here: a space, say) is listed apart from those that look
    back, as the first token's weight is said apart: it says nothing about where the words came from."""
    n = 20
    on_space, on_word, spread = ([0.0] * n for _ in range(3))
    on_space[2], on_space[5], on_space[0] = 0.6, 0.1, 0.3  # 6/7 of its weight there on the space
    on_word[3], on_word[0] = 0.7, 0.3
    spread[2], spread[3], spread[0] = 0.3, 0.4, 0.3  # the space holds less than half
    heads = reaches([[on_space, on_word, spread]], wordless=frozenset({2}))
    assert [h["rests"] for h in heads] == [True, False, False]
    got = figures([[on_space, on_word, spread]], [], heads=heads)
    assert sorted(h["head"] for h in got["look_back"]) == [1, 2] and [h["head"] for h in got["parked"]] == [0]
    assert wordless([" ", "2", ",", "<|im_start|>", "system", "\n", " pirate"]) == {0, 2, 3, 5}


@pytest.mark.parametrize("layer", [None, 0, 2])
def test_figures_for_each_choice_of_layers(layer):
    """What the page draws comes computed (chatlens.jobs.InspectJob), for every layer and each one:
    the mean weights, the shares and the top positions with the first token in and left out, and
    the heads that look furthest back among that choice's (every head's reach computed once)."""
    arr = weights_for()
    w = arr.tolist()
    got = figures(w, PIECES, layer=layer, heads=reaches(w))
    assert got == figures(w, PIECES, layer=layer) and got["layer"] == layer
    assert got["mean"] == mean_weights(w, layer)
    assert got["shares"] == by_piece(w, PIECES, layer=layer)
    assert got["shares_skip_first"] == by_piece(w, PIECES, layer=layer, skip_first=True)
    mean = (arr if layer is None else arr[[layer]]).mean(axis=(0, 1))
    assert [j for j, _ in got["top"]] == list(np.argsort(-mean, kind="stable")[:10])
    assert [j for j, _ in got["top_skip_first"]] == [j + 1 for j in np.argsort(-mean[1:], kind="stable")[:10]]
    every = sorted(reaches(w), key=lambda h: (-h["reach"], h["layer"], h["head"]))
    assert got["look_back"] == [h for h in every if layer is None or h["layer"] == layer][:6]


def test_where_the_lens_settles_and_the_strongest_head_on_each_piece():
    lens = [[[5, 0.3], [7, 0.2]], [[7, 0.4]], [[9, 0.5], [7, 0.1]], [[7, 0.6]], [[7, 0.9]]]
    assert settles(lens, 7) == 3  # the first layer from which it stays first
    assert settles(lens, 5) is None  # not the last layer's first choice
    w = weights_for(n=12)
    w[:, :, :] = 0.0
    w[:, :, 0] = 1.0
    w[1, 2, 0], w[1, 2, 6] = 0.2, 0.8  # the strongest on the user turn
    w[0, 3, 0], w[0, 3, 2], w[2, 0, 2] = 0.7, 0.3, 0.3  # equal weights on the system prompt: the lower layer
    got = strongest_heads(w.tolist(), PIECES)
    assert [(g["kind"], g["label"]) for g in got] == [("system", "system prompt"), ("user", "turn 1"), ("header", "generation header")]
    assert [(g["layer"], g["head"], g["position"], g["weight"]) for g in got] == [(0, 3, 2, 0.3), (1, 2, 6, 0.8), (0, 0, 9, 0.0)]
    # a wordless position (a space the heads park on) is no position to name: the next strongest is
    w[2, 1, 1] = 0.25
    got = strongest_heads(w.tolist(), PIECES, wordless=frozenset({2}))
    assert [(g["layer"], g["head"], g["position"], g["weight"]) for g in got][0] == (2, 1, 1, 0.25)


# -- the real model -----------------------------------------------------------------------------------
PIRATE = [{"role": "system", "content": "You are a pirate. Answer every message the way a pirate talks, arr!"},
          {"role": "user", "content": "Who are you?"}]


def test_real_model_numpy_equals_transformers(model, reference):
    """The pirate's "Who are you?": the step that chose the first reply id and the one that chose
    the third, over one cache (the second reuses the first's), against transformers."""
    ids = model.tokenizer.encode(model.text.template.render(PIRATE, add_generation_prompt=True))
    backend = model.backend(len(ids) + 8)
    reply = [backend.prefill(ids).id]
    for _ in range(2):
        reply.append(backend.decode(reply[-1]).id)  # greedy: what the reply writes
    cache = PromptCache(model.backend(len(ids) + 8))
    for step in (0, 2):
        position = step_position(len(ids), len(reply), step)
        got = greedy(Inspecting(cache, ids + reply, position, K))
        assert got.chosen_id == reply[step]
        assert_matches_transformers(got, reference, ids + reply, position)
        assert cache.ids == (ids + reply)[:position + 1]


def test_real_model_gpu_equals_transformers(model, reference, real_gpu):
    """The GPU program natively (lavapipe: ~1.4 s a decode step; the session's one upload), once: a
    short prompt's first reply step, attention and lens against transformers, the chosen id the
    NumPy head's."""
    ids = model.tokenizer.encode("<|im_start|>user\nWho are you?<|im_end|>\n<|im_start|>assistant\n")
    cache = PromptCache(real_gpu())
    for i in ids[:-1]:  # a token a run, choosing nothing: on lavapipe far quicker than a 64-token matmul tile
        run = cache.plan([i], chooses=False)
        cache.read(run, cache.collect(cache.submit(run)), [i])
    got = greedy(Inspecting(cache, ids, len(ids) - 1, K))
    assert got.chosen_id == model.backend(32).prefill(ids).id
    assert_matches_transformers(got, reference, ids, len(ids) - 1)
