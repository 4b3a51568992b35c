"""Which piece a reply needed (chatlens.cause): each piece knocked out and removed, against
transformers.

Fidelity: a knockout equals transformers' eager attention given a 4D additive mask in which the
reply's positions (from the last prompt token on) may not read the piece's; a removal equals
transformers on the prompt rendered again without the piece, its ids those of
`apply_chat_template`; the probabilities within 1e-3, the log-probability of the reply so far
within 1e-2 (a sum over its tokens). The tiny seeded model runs on every backend in
milliseconds; the real model runs NumPy on the lesson's Pirate turn. Afterwards the cache holds
what it held before, and the next step is what it would have been.
"""

import json
import math

import numpy as np
import pytest

from chatlens.cache import PromptCache
from chatlens.cause import Causing, Piece, pieces_of, read_of, removed_prompt
from chatlens.errors import ChatlensError
from test_backend import BACKENDS, PROMPT, TINY, WEIGHTS

P_TOL = 1e-3
LOGPROB_TOL = 1e-2


@pytest.fixture(params=sorted(BACKENDS))
def make(request):
    return BACKENDS[request.param]


@pytest.fixture(scope="module")
def tiny_reference():
    pytest.importorskip("torch")
    from chatlens.host.reference import reference_model

    return reference_model(TINY, WEIGHTS.items())


def hf_logprobs(ref, ids, hidden=None, q0=None):
    """transformers' log-softmax at every position of ids (float64), eager attention; hidden = (a, b):
    positions q0.. may not read keys a..b-1 (a 4D additive mask over the causal one)."""
    import torch

    n = len(ids)
    mask = torch.zeros(n, n)
    mask[torch.triu(torch.ones(n, n, dtype=torch.bool), 1)] = torch.finfo(torch.float32).min
    if hidden is not None:
        mask[q0:, hidden[0]:hidden[1]] = torch.finfo(torch.float32).min
    was = ref.config._attn_implementation
    ref.set_attn_implementation("eager")
    try:
        with torch.no_grad():
            logits = ref(torch.tensor([list(ids)]), attention_mask=mask[None, None]).logits[0]
    finally:
        ref.set_attn_implementation(was)
    return torch.log_softmax(logits.double(), dim=-1).numpy()


def hf_measure(ref, prompt, reply, step, chosen, hidden=None):
    """{p, top_id, top_p, reply_logprob} of reply[:step] then `chosen` after `prompt`, as Cause measures it."""
    ids = list(prompt) + list(reply[:step]) + [chosen]
    lp = hf_logprobs(ref, ids, hidden, len(prompt) - 1)
    rows = range(len(prompt) - 1, len(ids) - 1)
    last = lp[len(ids) - 2]
    return {"p": math.exp(last[chosen]), "top_id": int(np.argmax(last)), "top_p": math.exp(last.max()),
            "reply_logprob": float(sum(lp[r][ids[r + 1]] for r in rows))}


def assert_measure(got, want, near_tie=1e-3):
    assert got["p"] == pytest.approx(want["p"], abs=P_TOL)
    assert got["top_p"] == pytest.approx(want["top_p"], abs=P_TOL)
    assert got["reply_logprob"] == pytest.approx(want["reply_logprob"], abs=LOGPROB_TOL)
    if got["top_id"] != want["top_id"]:  # only at a near-tie of the two best
        assert abs(got["top_p"] - want["top_p"]) < near_tie


def pulled(job):
    while not job.done:
        job.pull()
    return job.result


# -- the tiny model: every backend, every measure ------------------------------------------------------
REPLY = [33, 200, 7, 91, 12]
SPANS = {"a:0": (0, 4), "b:0": (4, 8), "c:0": (8, len(PROMPT))}


def tiny_pieces():
    """Three pieces of PROMPT, each with a removal: the first replaced by two other ids, the second
    left out, the third (which holds the last prompt token) cut to its last id."""
    out = []
    for name, (a, b) in SPANS.items():
        out.append(Piece(name, name[0], name, a, b))
    out[0].removed_ids = [9, 9] + PROMPT[4:]
    out[1].removed_ids = PROMPT[:4] + PROMPT[8:]
    out[2].removed_ids = PROMPT[:8] + PROMPT[-1:]
    return out


@pytest.mark.parametrize("step", [0, 2, len(REPLY)])
def test_knocked_and_removed_equal_transformers(make, tiny_reference, step):
    cache = PromptCache(make(40))
    cache.prefill(PROMPT + REPLY)  # the turn, as a chat leaves it
    held = list(cache.ids)
    got = pulled(Causing(cache, PROMPT, REPLY, tiny_pieces(), step=step))
    chosen = REPLY[step] if step < len(REPLY) else got.chosen_id
    assert got.chosen_id == chosen and got.position == len(PROMPT) + step - 1
    assert_measure(vars(got), hf_measure(tiny_reference, PROMPT, REPLY, step, chosen))
    for piece in tiny_pieces():
        m = got.measures[piece.name]
        assert_measure(m["knocked"], hf_measure(tiny_reference, PROMPT, REPLY, step, chosen, (piece.start, piece.end)))
        assert_measure(m["removed"], hf_measure(tiny_reference, piece.removed_ids, REPLY, step, chosen))
        assert m["removed"]["prompt_ids"] == piece.removed_ids
    assert cache.ids == held  # the cache holds the turn again: the next turn reuses it


def test_the_cache_is_left_as_it_was_and_the_next_step_unchanged(make):
    ids = PROMPT + REPLY
    before = make(40)
    want = before.prefill(ids, top_k=5)
    cache = PromptCache(make(40))
    cache.prefill(ids[:-1])
    pulled(Causing(cache, PROMPT, REPLY, tiny_pieces(), step=1))
    assert cache.ids == ids[:-1]
    got = cache.prefill(ids[-1:], top_k=5)
    assert got.id == want.id
    np.testing.assert_allclose([l for _, l in got.top_k], [l for _, l in want.top_k], atol=1e-4)


def test_chunked_passes_equal_one_pass():
    """A page's NumPy reads a few ids a pull (its chunk): the figures are the same."""
    whole = pulled(Causing(PromptCache(BACKENDS["numpy"](40)), PROMPT, REPLY, tiny_pieces(), step=4))
    parts = pulled(Causing(PromptCache(BACKENDS["numpy"](40)), PROMPT, REPLY, tiny_pieces(), step=4, chunk=2))
    for name in whole.measures:
        for what in ("knocked", "removed"):
            for key in ("p", "top_p", "reply_logprob"):
                assert parts.measures[name][what][key] == pytest.approx(whole.measures[name][what][key], rel=1e-6, abs=1e-6)


def test_stopping_leaves_only_the_model_s_own_keys(make):
    cache = PromptCache(make(40))
    cache.prefill(PROMPT + REPLY)
    job = Causing(cache, PROMPT, REPLY, tiny_pieces(), step=3)
    for _ in range(4):  # the inspection, the baseline, and a knockout under way
        job.pull()
    job.stop()
    assert job.done and job.result is None
    assert cache.ids == (PROMPT + REPLY)[:len(cache.ids)]


def test_bad_input_is_a_sentence_and_touches_nothing():
    cache = PromptCache(BACKENDS["numpy"](20))
    cache.prefill(PROMPT)
    with pytest.raises(ChatlensError, match="step 9 is out of range"):
        Causing(cache, PROMPT, REPLY, tiny_pieces(), step=9)
    with pytest.raises(ChatlensError, match="need 21 tokens of KV cache; it holds 20"):
        Causing(cache, PROMPT, REPLY + [1, 2, 3, 4, 5], tiny_pieces(), step=10)
    assert cache.ids == PROMPT
