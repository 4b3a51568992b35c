"""Why this token: each step's best candidates with their probabilities, from every backend.

A step asked for top-k carries the softmax's normalizer (Step.log_z), computed where the logits
are: NumPy in float64, the GPU as a max and a sum of exponentials beside its top-k pass. On the
tiny seeded model (tests/test_backend.py's) both backends' probabilities must equal NumPy's
softmax of the reference logits within 1e-5; on the real model the record's top_k (what `run
--top-k`, `/show` and the page show) must equal transformers' softmax within 1e-3 (float32 on
the same weights) on three chats, near-tie marks included.
"""

import json
import re

import numpy as np
import pytest

from chatlens import defaults
from chatlens.backend import log_z_of, ranked
from chatlens.chat import ChatSession
from chatlens.host.why import is_near_tie
from conftest import cli_in_process
from test_backend import BACKENDS, PROMPT, numpy_backend

PROB_TOL = 1e-5  # tiny model: logits agree to 1e-4 at most, probabilities far closer
REAL_TOL = 1e-3  # the real model against transformers, as the logits


def softmax64(logits):
    x = np.asarray(logits, dtype=np.float64)
    e = np.exp(x - x.max())
    return e / e.sum()


@pytest.fixture(params=sorted(BACKENDS))
def make(request):
    return BACKENDS[request.param]


@pytest.mark.parametrize("k", [10, 64, 320])  # within the GPU's top-k, its limit, past it (the whole vocabulary)
def test_probabilities_equal_numpy_softmax_of_the_reference_logits(make, k):
    backend = make(len(PROMPT) + 1)
    ref = numpy_backend(len(PROMPT) + 1)
    steps = [lambda: (backend.prefill(PROMPT, top_k=k), ref.prefill(PROMPT)),
             lambda: (backend.decode(PROMPT[0], top_k=k), ref.decode(PROMPT[0]))]
    for take in steps:  # a prefill, then a decode
        step, ref_step = take()
        want = softmax64(ref.last_logits())
        got = ranked(step)
        assert len(got) == k and got[0][0] == step.id == ref_step.id
        np.testing.assert_allclose([p for _, _, p in got], want[[i for i, _, _ in got]], atol=PROB_TOL, rtol=0)
        assert step.log_z == pytest.approx(log_z_of(ref.last_logits()), abs=1e-4)
        if k == 320:  # the whole vocabulary: the probabilities are a distribution
            assert sum(p for _, _, p in got) == pytest.approx(1.0, abs=PROB_TOL)


def test_without_top_k_a_step_has_no_candidates_and_the_gpu_runs_no_top_k_pass():
    """Off costs nothing: the argmax step reads back 4 bytes and dispatches no top-k kernel."""
    gpu = BACKENDS["webgpu"](len(PROMPT) + 1)
    seen = []
    submit = gpu.executor.submit
    gpu.executor.submit = lambda sequences, params=b"", readback=None: (seen.append((list(sequences), readback)),
                                                                         submit(sequences, params, readback))[1]
    step = gpu.prefill(PROMPT)
    assert step.top_k == () and step.log_z is None
    assert all("top_k" not in seqs for seqs, _ in seen) and seen[-1][1] == "id"
    step = gpu.decode(step.id, top_k=5)
    assert seen[-1] == (["decode", "head", "top_k"], "top_k") and step.log_z is not None
    numpy_step = numpy_backend(4).prefill(PROMPT[:3])
    assert numpy_step.top_k == () and numpy_step.log_z is None


# -- the real model, against transformers ---------------------------------------------------------------------------

CHATS = [
    [{"role": "user", "content": "What is the capital of France?"}],
    [{"role": "system", "content": "You are a pirate."}, {"role": "user", "content": "Who are you?"}],
    [{"role": "user", "content": "Hi! My name is Priya."}, {"role": "assistant", "content": "Hello Priya!"},
     {"role": "user", "content": "What is my name?"}],
]
K = 10
STEPS = 4


def reference_steps(reference, prompt_ids, reply_ids):
    """transformers' logits (float64 copies) for the step before each reply id, fed our ids."""
    import torch

    with torch.inference_mode():
        logits = reference(torch.tensor([prompt_ids + reply_ids[:-1]])).logits[0].numpy()
    return [logits[len(prompt_ids) - 1 + n].astype(np.float64) for n in range(len(reply_ids))]


def session_record(model, messages, k=K, steps=STEPS):
    system = messages[0]["content"] if messages[0]["role"] == "system" else None
    history = messages[1:-1] if system is not None else messages[:-1]
    session = ChatSession(model, window=256, max_tokens=steps, system=system, history=history)
    return session.send(messages[-1]["content"], top_k=k)


def same_candidates(ours, theirs_logits, tol):
    """Our candidates are transformers' best, in its order, except where two of them are equal
    within the logits' tolerance (float rounding may then order them either way)."""
    want = np.argsort(-theirs_logits, kind="stable")[:len(ours)]
    for rank, (i, _, _) in enumerate(ours):
        if i != want[rank]:
            assert abs(theirs_logits[i] - theirs_logits[want[rank]]) < 2 * tol, (rank, i, int(want[rank]))


@pytest.mark.parametrize("index", range(len(CHATS)))
def test_the_records_top_k_equals_transformers(model, reference, index):
    rec = session_record(model, CHATS[index])
    assert len(rec.top_k) == len(rec.reply_ids) == len(rec.top_k_tokens)
    for n, (step, theirs) in enumerate(zip(rec.top_k, reference_steps(reference, rec.prompt_ids, rec.reply_ids))):
        assert len(step) == K and step[0][0] == rec.reply_ids[n]
        assert rec.top_k_tokens[n] == [model.tokenizer.token_text(i) for i, _, _ in step]
        same_candidates(step, theirs, REAL_TOL)
        probs = softmax64(theirs)
        np.testing.assert_allclose([p for _, _, p in step], probs[[i for i, _, _ in step]], atol=REAL_TOL, rtol=0)
        np.testing.assert_allclose([v for _, v, _ in step], theirs[[i for i, _, _ in step]], atol=REAL_TOL, rtol=0)
        # A near-tie mark is the reference's own verdict wherever the reference is not itself on the edge
        gap = float(np.sort(theirs)[-1] - np.sort(theirs)[-2])
        if abs(gap - defaults.NEAR_TIE_GAP) > 2 * REAL_TOL:
            assert is_near_tie(step) == (gap < defaults.NEAR_TIE_GAP)


def test_run_top_k_on_the_command_line_is_the_sessions_record(model, gguf_path):
    messages = CHATS[0]
    done = cli_in_process("run", "--window", "256", "--max-tokens", "3", "--top-k", "5",
                          stdin=json.dumps({"messages": messages}), model=gguf_path)
    assert done.returncode == 0, done.stderr
    cli = json.loads(done.stdout)
    ours = session_record(model, messages, k=5, steps=3)
    assert cli["reply_ids"] == ours.reply_ids
    assert [[c[0] for c in s] for s in cli["top_k"]] == [[c[0] for c in s] for s in ours.top_k]
    np.testing.assert_allclose([[c[2] for c in s] for s in cli["top_k"]], [[c[2] for c in s] for s in ours.top_k],
                               atol=1e-6, rtol=0)
    assert cli["top_k_tokens"] == ours.top_k_tokens
    without = cli_in_process("run", "--window", "256", "--max-tokens", "1", stdin=json.dumps({"messages": messages}),
                             model=gguf_path)
    assert json.loads(without.stdout)["top_k"] is None


def test_chat_show_lists_the_candidates_and_topk_changes_them(gguf_path, model):
    done = cli_in_process("chat", "--window", "256", "--max-tokens", "2", "--top-k", "3",
                          stdin="What is the capital of France?\n/show\n/topk 0\nThanks\n/show\n/topk x\n", model=gguf_path)
    assert done.returncode == 0, done.stderr
    first, second = done.stdout.split("--- what the model read")[1:3]
    ours = session_record(model, CHATS[0], k=3, steps=2)
    quoted = r"'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\""  # a token as repr() writes it
    rows = re.findall(rf"^([ *])\s*(\d+)\s+({quoted})  (.+)$", first.split("--- why each token")[1], re.M)
    assert [int(r[1]) for r in rows] == list(range(len(ours.reply_ids)))
    for (mark, _, token, cands), step, texts in zip(rows, ours.top_k, ours.top_k_tokens):
        assert eval(token) == texts[0] and cands.startswith(f"{texts[0]!r} {100 * step[0][2]:.1f}%")
        assert (mark == "*") == is_near_tie(step)
    assert "why each token" not in second  # /topk 0 turned it off
    assert "(top-k: off)" in done.stdout and "usage: /topk K" in done.stderr
