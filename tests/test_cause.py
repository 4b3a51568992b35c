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
from chatlens.cause import Causing
from chatlens.pieces import Piece, turn_pieces
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
    """transformers' log-softmax at every position of ids (float64), eager attention; hidden =
    ((a, b), ...): positions q0.. may not read those keys (a 4D additive mask over the causal one)."""
    import torch

    n = len(ids)
    mask = torch.zeros(n, n)
    mask[torch.triu(torch.ones(n, n, dtype=torch.bool), 1)] = torch.finfo(torch.float32).min
    for a, b in hidden or ():
        mask[q0:, a:b] = torch.finfo(torch.float32).min
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
    left out, the third (which holds the last prompt token) cut to its last id; and the first two
    together (their keys hidden at once, neither rendered)."""
    a, b, c = SPANS.values()
    removed = {"a:0": [9, 9] + PROMPT[4:], "b:0": PROMPT[:4] + PROMPT[8:], "c:0": PROMPT[:8] + PROMPT[-1:]}
    return [*(Piece(name, name[0], name, (span,), tuple(removed[name])) for name, span in SPANS.items()),
            Piece("a:0+c:0", "together", "a and c", (a, c), tuple(PROMPT[4:8] + PROMPT[-1:]))]


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
        assert_measure(m["knocked"], hf_measure(tiny_reference, PROMPT, REPLY, step, chosen, piece.hidden))
        assert_measure(m["removed"], hf_measure(tiny_reference, piece.removed_ids, REPLY, step, chosen))
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
    """A page's NumPy reads a few ids a pull (its chunk): the figures are the same, up to float32
    rounding of a chunk's products against the whole's (about 1e-6)."""
    whole = pulled(Causing(PromptCache(BACKENDS["numpy"](40)), PROMPT, REPLY, tiny_pieces(), step=4))
    cache = PromptCache(BACKENDS["numpy"](40))
    cache.prefill(PROMPT + REPLY)
    parts = pulled(Causing(cache, PROMPT, REPLY, tiny_pieces(), step=4, chunk=2))
    assert cache.ids == PROMPT + REPLY  # put back in one copy, not fed again a chunk at a time on top of it
    for name in whole.measures:
        for what in ("knocked", "removed"):
            for key in ("p", "top_p", "reply_logprob"):
                assert parts.measures[name][what][key] == pytest.approx(whole.measures[name][what][key], rel=1e-5, abs=1e-5)


def test_numpy_s_batch_reads_each_pass_from_its_own_start():
    """NumPy runs whole passes at once (chatlens.passes), each starting no later than the one before:
    a knockout from the reply's first position, then removals from where their prompts differ. Each
    reads only what the cache held, so its rows are score()'s run in turn after a truncate (up to
    float32 rounding of products over more rows), and the cache then holds the last pass's ids."""
    q0, ids = len(PROMPT) - 1, PROMPT + REPLY
    without_b, without_a = PROMPT[8:] + REPLY, [9, 9] + PROMPT[4:] + REPLY  # tiny_pieces' removals, from 4 and 0
    runs = [(q0, ids[q0:], 0, 5, ((4, 8),)),
            (4, without_b, len(PROMPT[8:]) - 1, 5, None),
            (0, without_a, len(PROMPT) - 3, 5, None)]
    one = BACKENDS["numpy"](40)
    one.prefill(ids)
    want = []
    for start, run_ids, score_from, next_id, hidden in runs:
        one.truncate(start)
        want.append(one.score(run_ids, score_from=score_from, next_id=next_id, hidden=hidden))
    cache = PromptCache(BACKENDS["numpy"](40))
    cache.prefill(ids)
    got = cache.score_many(runs)
    assert [len(rows) for rows in got] == [len(REPLY) + 1] * 3
    for mine, theirs in zip(got, want):
        assert [r[2] for r in mine] == [r[2] for r in theirs]  # the best ids
        np.testing.assert_allclose([r[:2] for r in mine], [r[:2] for r in theirs], rtol=1e-5, atol=1e-5)
    assert cache.ids == without_a and cache.backend.length == one.length == len(without_a)
    np.testing.assert_allclose(cache.backend.k_cache[..., :one.length], one.k_cache[..., :one.length], atol=1e-5)
    with pytest.raises(ChatlensError, match="each no later than the one before"):
        cache.score_many([(0, ids[:4], 0, 5, None), (2, ids[2:6], 0, 5, None)])


def test_the_reply_s_own_candidates_give_the_figures_with_every_piece_read_a_pass_fewer():
    """The page wrote the reply and kept each step's candidates: the figures with every piece read
    are those steps' own (up to float32 rounding of a decode step against a pass), and no pass
    computes them again. Candidates that lack a reply id cannot give them: the pass runs."""
    def cause(reply_top_k):
        cache = PromptCache(BACKENDS["numpy"](40))
        _, gen = cache.generate(PROMPT, eos_id=-1, max_new_tokens=5, top_k=5)
        job, doing = Causing(cache, PROMPT, gen.ids, tiny_pieces(), step=4, reply_top_k=reply_top_k(gen)), []
        while not job.done:
            job.pull()
            doing.append(job.doing)
        return gen, job.result, doing

    gen, computed, computing = cause(lambda gen: None)
    _, read, reading = cause(lambda gen: gen.top_k)
    # NumPy's batch: every pass but the cache put back; reading, the step's own pass not in it
    assert "the step with every piece read, each piece knocked out, and each piece removed (9 passes at once)" in computing
    assert "each piece knocked out and each piece removed (8 passes at once)" in reading
    assert read.computed_tokens == computed.computed_tokens - 5  # the step's 5 reply positions, not read again
    for key in ("p", "top_p", "reply_logprob"):
        assert getattr(read, key) == pytest.approx(getattr(computed, key), rel=1e-5, abs=1e-5)
    assert [t["top_id"] for t in read.tokens] == [t["top_id"] for t in computed.tokens] == gen.ids
    np.testing.assert_allclose([t["p"] for t in read.tokens], [t["p"] for t in computed.tokens], rtol=1e-5, atol=1e-6)
    for name, m in computed.measures.items():  # the counterfactuals are the same passes as before
        for what in ("knocked", "removed"):
            assert read.measures[name][what]["reply_logprob"] == pytest.approx(m[what]["reply_logprob"], rel=1e-5, abs=1e-5)
    _, lacking, _ = cause(lambda gen: [[c for c in step if c[0] != gen.ids[2]] for step in gen.top_k])
    assert lacking.computed_tokens == computed.computed_tokens and lacking.p == computed.p


def test_stopping_leaves_only_the_model_s_own_keys(make):
    cache = PromptCache(make(40))
    cache.prefill(PROMPT + REPLY)
    job = Causing(cache, PROMPT, REPLY, tiny_pieces(), step=3, chunk=2)  # 2 ids a pull: no batch
    for _ in range(4):  # the inspection, the baseline's two pulls, and a knockout under way
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


# -- the real model: the lesson's turns, NumPy against transformers --------------------------------------
PIRATE = "You are a pirate. Answer every message the way a pirate talks, arr!"


@pytest.fixture(scope="module")
def hf_chat(gguf_path):
    """transformers' fast tokenizer over the GGUF's vocabulary, with its chat template: the removals' reference."""
    transformers = pytest.importorskip("transformers")
    tokenizers = pytest.importorskip("tokenizers")
    from chatlens.gguf import read_metadata
    from chatlens.host.export import tokenizer_json_from_gguf

    meta = read_metadata(gguf_path)
    tok = tokenizers.Tokenizer.from_str(json.dumps(tokenizer_json_from_gguf(meta)))
    return transformers.PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<|im_start|>", eos_token="<|im_end|>",
                                                unk_token="<|endoftext|>", pad_token="<|im_end|>",
                                                chat_template=meta["tokenizer.chat_template"])


def hf_ids(hf, messages, add_generation_prompt=True):
    text = hf.apply_chat_template(messages, tokenize=False, add_generation_prompt=add_generation_prompt)
    return hf(text, add_special_tokens=False)["input_ids"]


def turn(model, messages, *, system, window, reserve, max_tokens):
    """A turn's record and greedy reply over a cache that holds them afterwards, as a chat leaves it."""
    from chatlens.chat import preview

    record = preview(model.tokenizer, model.template, system=system, messages=messages, window=window,
                     reserve=reserve)
    cache = PromptCache(model.backend(n_ctx=window))
    _, gen = cache.generate(record.prompt_ids, eos_id=model.eos_id, max_new_tokens=max_tokens)
    return record, gen.ids, cache


def every_piece(model, record, messages, names=None):
    return turn_pieces(model.tokenizer, model.template, record, messages, names)


def test_the_pirate_s_name_needs_the_system_prompt_as_transformers_says(model, reference, hf_chat):
    """Pirate, "Who are you?": its "ye" of "Aye" (step 1), first " Captain" (step 4) and the second,
    the name's ("... name is Captain", step 8), every piece knocked out and removed, against
    transformers; each removal's ids are apply_chat_template's."""
    messages = [{"role": "user", "content": "Who are you?"}]
    record, reply, cache = turn(model, messages, system=PIRATE, window=256, reserve=96, max_tokens=10)
    pieces = every_piece(model, record, messages)
    assert [p.name for p in pieces] == ["system:0", "new:0", "header:0"]
    full = [{"role": "system", "content": PIRATE}] + messages
    assert record.prompt_ids == hf_ids(hf_chat, full)
    removals = {"system:0": hf_ids(hf_chat, messages), "new:0": hf_ids(hf_chat, full[:1]),
                "header:0": hf_ids(hf_chat, full, add_generation_prompt=False)}
    for p in pieces:
        assert list(p.removed_ids) == removals[p.name], p.name
    assert "You are a helpful AI assistant named SmolLM" in pieces[0].removed_what  # says what stands in
    held = list(cache.ids)
    for step in (1, 4, 8):
        got = pulled(Causing(cache, record.prompt_ids, reply, pieces, step=step))
        assert got.chosen_id == reply[step]
        assert_measure(vars(got), hf_measure(reference, record.prompt_ids, reply, step, reply[step]))
        for p in pieces:
            m = got.measures[p.name]
            assert_measure(m["knocked"], hf_measure(reference, record.prompt_ids, reply, step, reply[step],
                                                    p.hidden))
            assert_measure(m["removed"], hf_measure(reference, p.removed_ids, reply, step, reply[step]))
        m = got.measures["system:0"]
        if step < 8:  # the name's first words need the system prompt: without it, or not read, far less likely
            assert m["knocked"]["p"] < got.p / 10 and m["removed"]["p"] < got.p / 10
        else:  # "... name is Captain": not read, it holds; removed, it falls (the reply's words carry it)
            assert m["knocked"]["p"] > got.p / 2 > m["removed"]["p"]
        assert cache.ids == held


def test_a_dropped_turn_put_back_is_the_whole_conversation_as_transformers_reads_it(model, reference, hf_chat):
    """The lesson's window of 128 with 32 kept free drops the turn with the name: put back, the
    prompt is the whole conversation's render, and its figures are transformers'."""
    messages = [{"role": "user", "content": "Hi! My name is Priya."},
                {"role": "assistant", "content": "Hello, Priya! How can I help you today?"},
                {"role": "user", "content": "Give me one tip for sleeping better."},
                {"role": "assistant", "content": "Go to bed and wake up at the same time every day, even on weekends."},
                {"role": "user", "content": "What is my name?"}]
    record, reply, cache = turn(model, messages, system=None, window=128, reserve=32, max_tokens=6)
    assert [d["message_index"] for d in record.dropped_messages] == [0, 1]
    pieces = every_piece(model, record, messages)
    names = [p.name for p in pieces]
    assert names == ["default_system:0", "user:0", "assistant:0", "new:0", "header:0", "dropped:0"]
    back = pieces[-1]
    assert back.knocked_why and list(back.removed_ids) == hf_ids(hf_chat, messages)
    assert pieces[0].removed_why and "cannot be left out" in pieces[0].removed_why
    # a kept turn goes whole, as trimming drops it (its user and assistant pieces render the same
    # prompt), and the dropped one stays dropped
    assert list(pieces[1].removed_ids) == list(pieces[2].removed_ids) == hf_ids(hf_chat, messages[4:])
    got = pulled(Causing(cache, record.prompt_ids, reply, [back, pieces[1]], step=len(reply) - 2))
    step = len(reply) - 2
    assert_measure(got.measures["dropped:0"]["removed"], hf_measure(reference, back.removed_ids, reply, step, reply[step]))
    assert got.measures["dropped:0"]["knocked"] is None
    assert_measure(got.measures["user:0"]["knocked"], hf_measure(reference, record.prompt_ids, reply, step, reply[step],
                                                                 pieces[1].hidden))


def test_real_model_gpu_equals_transformers(model, reference, hf_chat, real_gpu):
    """The GPU program natively (lavapipe: a run of the real model takes seconds), once: the Pirate's
    "ye", its system prompt knocked out and removed, against transformers; the cache then holds
    what it held (read again on the GPU)."""
    import time

    messages = [{"role": "user", "content": "Who are you?"}]
    record, reply, _ = turn(model, messages, system=PIRATE, window=160, reserve=96, max_tokens=3)
    [system] = every_piece(model, record, messages, ["system:0"])
    cache = PromptCache(real_gpu())
    started = time.perf_counter()
    got = pulled(Causing(cache, record.prompt_ids, reply, [system], step=1))
    print(f"the GPU's cause on lavapipe: {time.perf_counter() - started:.1f} s")
    assert got.chosen_id == reply[1]
    assert_measure(vars(got), hf_measure(reference, record.prompt_ids, reply, 1, reply[1]))
    m = got.measures["system:0"]
    assert_measure(m["knocked"], hf_measure(reference, record.prompt_ids, reply, 1, reply[1], system.hidden))
    assert_measure(m["removed"], hf_measure(reference, system.removed_ids, reply, 1, reply[1]))
    # every reply token's figures too (the token strip's), each position against transformers'
    from test_needs import hf_tokens
    for tokens, prompt, hidden in ((got.tokens, record.prompt_ids, None), (m["knocked"]["tokens"], record.prompt_ids, system.hidden),
                                   (m["removed"]["tokens"], system.removed_ids, None)):
        assert [t["p"] for t in tokens] == pytest.approx(hf_tokens(reference, prompt, reply, 1, reply[1], hidden), abs=P_TOL)
    assert cache.ids == record.prompt_ids + reply[:1]  # the inspection's, read again after the removal
