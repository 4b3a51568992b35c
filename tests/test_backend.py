"""The backend contract, on a tiny seeded random Llama: what every backend must do, in milliseconds.

A backend holds the KV cache and chooses the next id itself (chatlens.backend). Every backend
(NumPy here; the GPU backends add themselves to BACKENDS) must: choose the argmax of the
logits, the lowest id among equal maxima; give the same steps whether a prompt is prefilled at
once or fed token by token; continue after a truncation exactly as a fresh run does; report
top-k best first. The NumPy backend's logits are the reference for the others.
"""

import numpy as np
import pytest

from chatlens.backend import Backend, Step
from chatlens.cache import PromptCache
from chatlens.config import ModelConfig
from chatlens.errors import ChatlensError
from chatlens.model import NumpyBackend
from chatlens.pull import Pull, greedy

TINY = ModelConfig(n_layers=2, dim=64, n_heads=4, n_kv_heads=2, head_dim=16, ffn_dim=96, vocab_size=320,
                   n_ctx=64, rope_base=5000.0, norm_eps=1e-6, tied_output=False)


def tiny_weights(cfg=TINY, seed=0) -> dict:
    """Random weights under Hugging Face names, scaled so activations stay in a sane range."""
    rng = np.random.default_rng(seed)

    def w(*shape):
        return (rng.standard_normal(shape) / np.sqrt(shape[-1])).astype(np.float32)

    q, kv = cfg.n_heads * cfg.head_dim, cfg.n_kv_heads * cfg.head_dim
    out = {"model.embed_tokens.weight": w(cfg.vocab_size, cfg.dim),
           "model.norm.weight": (1 + 0.1 * rng.standard_normal(cfg.dim)).astype(np.float32),
           "lm_head.weight": w(cfg.vocab_size, cfg.dim) * 4}
    for i in range(cfg.n_layers):
        p = f"model.layers.{i}."
        out.update({
            p + "input_layernorm.weight": (1 + 0.1 * rng.standard_normal(cfg.dim)).astype(np.float32),
            p + "post_attention_layernorm.weight": (1 + 0.1 * rng.standard_normal(cfg.dim)).astype(np.float32),
            p + "self_attn.q_proj.weight": w(q, cfg.dim), p + "self_attn.k_proj.weight": w(kv, cfg.dim),
            p + "self_attn.v_proj.weight": w(kv, cfg.dim), p + "self_attn.o_proj.weight": w(cfg.dim, q),
            p + "mlp.gate_proj.weight": w(cfg.ffn_dim, cfg.dim), p + "mlp.up_proj.weight": w(cfg.ffn_dim, cfg.dim),
            p + "mlp.down_proj.weight": w(cfg.dim, cfg.ffn_dim),
        })
    return out


WEIGHTS = tiny_weights()
PROMPT = [5, 17, 290, 3, 3, 41, 100, 7, 250, 19, 64]


def numpy_backend(n_ctx, weights=WEIGHTS):
    return NumpyBackend(TINY, weights, n_ctx)


def webgpu_backend(n_ctx, weights=WEIGHTS):
    from chatlens.host.native_gpu import open_arrays

    return open_arrays(TINY, weights, n_ctx)


# Each entry: name -> make(n_ctx, weights) giving a fresh backend over the tiny model.
BACKENDS = {"numpy": numpy_backend, "webgpu": webgpu_backend}


@pytest.fixture(params=sorted(BACKENDS))
def make(request):
    return BACKENDS[request.param]


def logits_of(backend):
    """The last step's logits, read back from the backend (tests only: not the seam)."""
    return np.asarray(backend.last_logits(), dtype=np.float32)


def reference_steps(ids):
    """The NumPy backend's logits after each id of `ids`, fed one at a time."""
    ref = numpy_backend(len(ids))
    out = []
    for i in ids:
        ref.decode(i)
        out.append(logits_of(ref).copy())
    return out


def test_is_a_backend(make):
    b = make(16)
    assert isinstance(b, Backend) and b.capacity == 16 and b.length == 0 and b.name


def test_the_chosen_id_is_the_argmax_of_the_reference_logits(make):
    b = make(len(PROMPT))
    step = b.prefill(PROMPT)
    ref = reference_steps(PROMPT)[-1]
    assert isinstance(step, Step) and step.id == int(np.argmax(ref)) and step.top_k == ()
    np.testing.assert_allclose(logits_of(b), ref, atol=1e-4, rtol=0)
    assert b.length == len(PROMPT)


def test_prefill_equals_token_by_token_decode(make):
    at_once = make(len(PROMPT))
    step = at_once.prefill(PROMPT)
    one_by_one = make(len(PROMPT))
    for i in PROMPT:
        last = one_by_one.decode(i)
    assert last.id == step.id
    np.testing.assert_allclose(logits_of(one_by_one), logits_of(at_once), atol=1e-4, rtol=0)


def test_truncate_then_continue_equals_a_fresh_run(make):
    b = make(32)
    b.prefill(PROMPT)
    b.truncate(4)
    assert b.length == 4
    step = b.prefill([9, 8, 7])
    fresh = make(32)
    want = fresh.prefill(PROMPT[:4] + [9, 8, 7])
    assert step.id == want.id
    np.testing.assert_allclose(logits_of(b), logits_of(fresh), atol=1e-4, rtol=0)
    b.truncate(100)  # more than it holds keeps everything
    assert b.length == 7
    b.reset()
    assert b.length == 0 and b.prefill(PROMPT).id == make(len(PROMPT)).prefill(PROMPT).id


def test_top_k_is_best_first_and_agrees_with_the_logits(make):
    b = make(len(PROMPT) + 1)
    step = b.prefill(PROMPT, top_k=10)
    logits = reference_steps(PROMPT)[-1]
    assert len(step.top_k) == 10 and step.top_k[0][0] == step.id
    assert [i for i, _ in step.top_k] == list(np.argsort(-logits, kind="stable")[:10])
    np.testing.assert_allclose([v for _, v in step.top_k], logits[[i for i, _ in step.top_k]], atol=1e-4, rtol=0)
    assert b.decode(step.id, top_k=0).top_k == ()


def test_ties_go_to_the_lowest_id(make):
    """With an output layer of zeros every logit is 0: the argmax is id 0, and top-k lists ids in order."""
    flat = dict(WEIGHTS, **{"lm_head.weight": np.zeros_like(WEIGHTS["lm_head.weight"])})
    b = make(8, flat)
    step = b.prefill([4, 2], top_k=5)
    assert step.id == 0 and step.top_k == tuple((i, 0.0) for i in range(5))


def test_the_cache_capacity_is_enforced(make):
    b = make(8)
    with pytest.raises(ChatlensError, match="holds 8 tokens"):
        b.prefill(list(range(9)))
    b.reset()
    b.prefill(list(range(8)))
    with pytest.raises(ChatlensError):
        b.decode(3)
    with pytest.raises(ChatlensError):
        make(8).prefill([])


# -- the loop and the cache over any backend ---------------------------------------------------------
def test_greedy_feeds_back_every_id_but_the_last(make):
    b = make(32)
    seen = []
    gen = greedy(Pull(b, PROMPT, eos_id=-1, max_new_tokens=5), on_token=lambda chosen: seen.append(chosen.id))
    assert gen.stop_reason == "max_tokens" and gen.ids == seen and len(seen) == 5
    assert b.length == len(PROMPT) + 4
    ref = make(32)
    ids = [ref.prefill(PROMPT).id]
    for _ in range(4):
        ids.append(ref.decode(ids[-1]).id)
    assert gen.ids == ids


def test_greedy_stops_at_end_of_turn_and_on_request(make):
    first = make(32).prefill(PROMPT).id
    gen = greedy(Pull(make(32), PROMPT, eos_id=first, max_new_tokens=5))
    assert (gen.ids, gen.stop_reason) == ([first], "end_turn")
    asked = iter([False, True])
    gen = greedy(Pull(make(32), PROMPT, eos_id=-1, max_new_tokens=5), should_stop=lambda: next(asked))
    assert gen.stop_reason == "stopped" and len(gen.ids) == 2
    gen = greedy(Pull(make(32), PROMPT, eos_id=-1, max_new_tokens=3, top_k=4))
    assert len(gen.top_k) == 3 and all(len(t) == 4 for t in gen.top_k)


def test_the_prompt_cache_keeps_its_ids_right(make):
    cache = PromptCache(make(48))
    reused, gen = cache.generate(PROMPT, eos_id=-1, max_new_tokens=4)
    assert reused == 0 and cache.ids == PROMPT + gen.ids[:-1] and cache.backend.length == len(cache.ids)
    # The next prompt starts with what the model read and wrote: that prefix is reused.
    follow = PROMPT + gen.ids + [11, 12]
    assert cache.reusable(follow) == len(PROMPT) + 3
    reused, again = cache.generate(follow, eos_id=-1, max_new_tokens=2)
    assert reused == len(PROMPT) + 3
    fresh = PromptCache(make(48)).generate(follow, eos_id=-1, max_new_tokens=2)[1]
    assert again.ids == fresh.ids
    assert cache.reusable(follow[:3]) == 2  # the last prompt id is always computed
    # A failed call leaves the backend's contents unknown: the cache empties.
    with pytest.raises(ChatlensError):
        cache.prefill(list(range(60)))
    assert cache.ids == [] and cache.backend.length == 0


# -- the loop the caller pulls (chatlens.generate.decoding, driven by chatlens.pull.Pull) ---------

def one_at_a_time(make, ids, n):
    """The reference reply: each step computed and read before the next is asked for."""
    b = make(48)
    out = [b.prefill(ids).id]
    while len(out) < n:
        out.append(b.decode(out[-1]).id)
    return out


@pytest.mark.parametrize("depth", [1, 2, 4])
def test_steps_in_flight_give_the_ids_of_one_at_a_time(make, depth):
    want = one_at_a_time(make, PROMPT, 6)
    cache = PromptCache(make(48))
    pull = Pull(cache, PROMPT, eos_id=-1, max_new_tokens=6, depth=depth)
    got = []
    while not pull.done:
        got += [c.id for c in pull.pull()]
        assert pull.in_flight <= depth
    assert got == want == pull.generation.ids and pull.generation.stop_reason == "max_tokens"
    # the steps planned past the limit were never planned; the cache holds what was fed
    assert cache.ids == PROMPT + want[:-1] and cache.backend.length == len(cache.ids)


def test_a_step_computed_past_the_end_of_turn_is_discarded(make):
    want = one_at_a_time(make, PROMPT, 6)
    eos = want[2]
    cache = PromptCache(make(48))
    gen = greedy(Pull(cache, PROMPT, eos_id=eos, max_new_tokens=6))
    assert gen.ids == want[:want.index(eos) + 1] and gen.stop_reason == "end_turn"
    assert cache.backend.length == len(cache.ids) == len(PROMPT) + len(gen.ids) - 1
    # the next turn reuses all of it, and continues as a fresh run would
    follow, held = PROMPT + gen.ids + [9, 8], len(cache.ids)
    reused, again = cache.generate(follow, eos_id=-1, max_new_tokens=3)
    assert reused == held and again.ids == one_at_a_time(make, follow, 3)


def test_a_stop_while_the_prompt_is_read_ends_between_chunks(make):
    backend = make(48)
    backend.chunk = 4  # PROMPT (11 ids) is read in 3 chunks
    cache = PromptCache(backend)
    pull = Pull(cache, PROMPT, eos_id=-1, max_new_tokens=5, depth=3)
    assert pull.pull() == [] and pull.prefilling and pull.prompt_read == 4
    pull.stop()
    gen = pull.generation
    assert (gen.ids, gen.stop_reason, gen.prefill_tokens) == ([], "stopped", 4)
    assert cache.ids == PROMPT[:4] and backend.length == 4
    reused, rest = cache.generate(PROMPT, eos_id=-1, max_new_tokens=3)
    assert reused == 4 and rest.ids == one_at_a_time(make, PROMPT, 3)


def test_a_stop_after_the_first_token_leaves_exactly_that_token(make):
    cache = PromptCache(make(48))
    pull = Pull(cache, PROMPT, eos_id=-1, max_new_tokens=5, depth=3)
    first = pull.pull()
    assert len(first) == 1 and pull.in_flight <= 2  # on the GPU the next step is already computing
    pull.stop()
    assert pull.generation.ids == [first[0].id] and pull.generation.stop_reason == "stopped"
    assert cache.ids == PROMPT and cache.backend.length == len(PROMPT)
