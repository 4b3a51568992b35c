"""Another choice at one step of a reply (chatlens.jobs.BranchJob): the reply's ids up to the step,
the id taken by hand, then greedy again, reusing the cache the reply left.

What must hold: a branch's ids are what greedy decoding gives on prompt_ids + reply_ids[:step] +
[id] from scratch (up to the first near-tie: the branch reads one token against the cache, the
reference the whole sequence, so sums run in another order); the cache is reused (the prompt and
the reply up to the step, one token computed); bad input is a sentence. The tiny random model
(tests/tiny_model.py) runs the mechanism; the real model runs it through the command line,
against `python -m chatlens generate` on the same ids.
"""

import json

import pytest

from chatlens import defaults, protocol, worker
from chatlens.cache import PromptCache
from chatlens.chat import ChatSession
from chatlens.errors import ChatlensError
from chatlens.jobs import BranchJob
from chatlens.pull import Pull, greedy
from chatlens.record import candidate_tokens
from chatlens.source import load_model
from conftest import cli_in_process, run_cli
from tiny_model import write_tiny_model

GAP = defaults.NEAR_TIE_GAP
MESSAGES = [{"role": "user", "content": "Tell me about lighthouses."}]


@pytest.fixture(scope="module")
def tiny(hf_dir, tmp_path_factory):
    return load_model(write_tiny_model(tmp_path_factory.mktemp("tiny-branch") / "model", hf_dir))


def reference(model, ids, n):
    """Greedy ids on `ids` from an empty cache, each with the gap between its step's two best logits."""
    gen = greedy(Pull(model.backend(len(ids) + n), ids, eos_id=model.eos_id, max_new_tokens=n, top_k=2))
    return gen.ids, [row[0][1] - row[1][1] for row in gen.top_k]


def equal_up_to_a_near_tie(ours, theirs, gaps):
    """How many leading ids agree; they must agree up to the first step whose top two logits are
    closer than GAP (where float rounding may legitimately choose the other)."""
    n = 0
    for a, b, gap in zip(ours, theirs, gaps):
        if gap < GAP:
            return n
        assert a == b, f"step {n}: {a} against {b} (gap {gap:.4f})"
        n += 1
    assert len(ours) == len(theirs)
    return n


def call(name, args):
    """A request to the page's worker module, read through the contract as `call` reads it."""
    return worker.HANDLERS[name](protocol.parse(protocol.REQUESTS[name][0], args))


def test_a_branch_is_greedy_decoding_from_the_id_taken_and_reuses_the_cache(tiny):
    session = ChatSession(tiny, max_tokens=8)
    record = session.send("Tell me about lighthouses.", top_k=3)
    step = 2
    other = record.top_k[step][1][0]  # the step's second candidate: what the model nearly chose
    held = list(session.cache.ids)
    assert held == record.prompt_ids + record.reply_ids[:-1]  # the reply is the cache's

    b = session.branch(step, other, top_k=3)
    assert b.reply_ids[:step + 1] == record.reply_ids[:step] + [other] and b.branched_from == record.reply_ids
    assert (b.reused_tokens, b.computed_tokens) == (len(record.prompt_ids) + step, 1)  # only the id taken is read
    assert len(b.reply_ids) <= 8 and len(b.top_k) == len(b.reply_ids)  # a reply: a row a reply id
    assert b.top_k[:step + 1] == record.top_k[:step + 1]  # the reply's own up to the step replaced, then the branch's
    assert b.top_k_tokens == candidate_tokens(tiny.tokenizer, b.top_k)
    theirs, gaps = reference(tiny, record.prompt_ids + b.reply_ids[:step + 1], 8 - step - 1)
    assert equal_up_to_a_near_tie(b.reply_ids[step + 1:], theirs, gaps) >= 3
    assert [row[0][0] for row in b.top_k[step + 1:]] == b.reply_ids[step + 1:]  # each own row chose its id
    assert b.reply_text == tiny.tokenizer.decode([i for i in b.reply_ids if i != tiny.eos_id])
    assert b.reply_tokens == [tiny.tokenizer.token_text(i) for i in b.reply_ids]
    assert b.reply_vocab == [tiny.tokenizer.id_to_token(i) for i in b.reply_ids]
    assert session.history[-1]["content"] == record.reply_text  # nothing kept yet


def test_a_kept_branch_is_the_reply_later_turns_read_and_can_be_branched_again(tiny):
    session = ChatSession(tiny, max_tokens=6)
    first = session.send("Hi there", top_k=2)
    b = session.branch(0, first.top_k[0][1][0])
    kept = session.keep()
    assert kept.reply_ids == b.reply_ids and kept.reply_text == b.reply_text and kept.reply_vocab == b.reply_vocab
    assert kept.branched == {"step": 0, "id": b.id, "reply_ids": first.reply_ids}
    assert kept.top_k is None  # the branch's own candidates were not asked for
    assert (kept.reused_tokens, kept.timings) == (first.reused_tokens, first.timings)  # the turn's own figures stay
    assert session.history[-1] == {"role": "assistant", "content": b.reply_text}
    nxt = session.preview("And then?")
    assert b.reply_text in nxt.prompt_text and first.reply_text not in nxt.prompt_text
    again = session.branch(1, 5)  # a branch of the branch
    assert again.branched_from == b.reply_ids and again.reply_ids[:2] == [b.reply_ids[0], 5]
    with pytest.raises(ChatlensError, match="no branch to keep"):
        ChatSession(tiny).keep()


def test_an_id_that_ends_the_turn_ends_the_branch_with_nothing_computed(tiny):
    cache = PromptCache(tiny.backend(256))
    prompt = tiny.tokenizer.encode("<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n")
    b = greedy(BranchJob(tiny, cache, prompt, [10, 11, 12], step=1, id=tiny.eos_id, max_tokens=8))
    assert b.reply_ids == [10, tiny.eos_id] and b.stop_reason == "end_turn" and b.reply_text == tiny.tokenizer.decode([10])
    assert b.backend is None and b.computed_tokens == 0 and cache.ids == []
    capped = greedy(BranchJob(tiny, cache, prompt, [10, 11, 12], step=2, id=40, max_tokens=3))
    assert capped.reply_ids == [10, 11, 40] and capped.stop_reason == "max_tokens"
    rows = [[[10, 2.0, 0.6], [20, 1.0, 0.4]], [[11, 2.0, 0.6], [21, 1.0, 0.4]], [[12, 2.0, 0.6], [22, 1.0, 0.4]]]
    given = greedy(BranchJob(tiny, cache, prompt, [10, 11, 12], step=1, id=21, max_tokens=2, top_k=2, reply_top_k=rows))
    assert given.top_k == rows[:2]  # nothing of its own: the reply's rows up to the step replaced
    unknown = greedy(BranchJob(tiny, cache, prompt, [10, 11, 12], step=1, id=21, max_tokens=3, top_k=2))
    assert unknown.top_k[:2] == [None, None] and len(unknown.top_k) == 3  # the reply's not given: null rows there
    assert unknown.top_k_tokens[:2] == [None, None] and unknown.top_k[2][0][0] == unknown.reply_ids[2]


def test_bad_input_is_a_sentence(tiny):
    cache = PromptCache(tiny.backend(64))
    prompt, reply = [1, 2, 3], [4, 5]
    for kwargs, said in [({"step": 2, "id": 7}, "step 2 is not a step of this reply, which chose 2 tokens"),
                         ({"step": -1, "id": 7}, "step -1 is not a step"),
                         ({"step": 0, "id": 49152}, "id 49152 is not a token: the vocabulary's ids are 0 to 49151"),
                         ({"step": 1, "id": 7, "max_tokens": 1}, "max_tokens 1 leaves no room")]:
        with pytest.raises(ChatlensError, match=said):
            BranchJob(tiny, cache, prompt, reply, **{"max_tokens": 8, **kwargs})
    with pytest.raises(ChatlensError, match="no reply to branch yet"):
        ChatSession(tiny).branch(0, 7)


def test_the_worker_pulls_a_branch_as_the_page_does(tiny):
    """The worker's branch job (start kind "branch"): the tokens streamed are the branch's own, after
    the id taken; a missing reply, a step past it and an unknown id are refused in a sentence."""
    call("load", {"path": str(tiny.path)})
    call("use_numpy", {})
    turn = {"messages": MESSAGES, "window": 256, "max_tokens": 6, "top_k": 2}
    record = call("run", turn)
    args = {**turn, "reply_ids": record.reply_ids, "step": 1, "id": 99}
    out = call("start", {"kind": "branch", "args": args})
    streamed = []
    while out.done is None:
        streamed += [t.id for t in out.tokens if t.id >= 0]
        out = call("step", {})
    streamed += [t.id for t in out.tokens if t.id >= 0]
    b = out.done
    assert streamed == b.reply_ids[2:] and b.reply_ids[:2] == [record.reply_ids[0], 99]
    assert b.reused_tokens == len(record.prompt_ids) + 1
    want = BranchJob(tiny, PromptCache(tiny.backend(256)), record.prompt_ids, record.reply_ids, step=1, id=99,
                     max_tokens=6, top_k=2)
    assert greedy(want).reply_ids == b.reply_ids
    for bad, said in [({"reply_ids": None}, "needs the reply it branches from"), ({"step": 6}, "not a step of this reply"),
                      ({"id": -3}, "not a token")]:
        with pytest.raises(ChatlensError, match=said):
            call("start", {"kind": "branch", "args": {**args, **bad}})


def test_chat_branches_with_a_command_and_keeps_the_branch(tiny):
    """`chat`'s /branch S ID shows the branch and what it reused; /keep makes it the reply the next
    turn reads (/show prints it)."""
    done = cli_in_process("chat", "--max-tokens", "5", stdin="Hi there\n/branch 1 99\n/keep\n/show\n/branch 9 1\n",
                          model=tiny.path)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "(step 1: " in out and "tokens reused, 1 computed; /keep keeps it)" in out
    assert "(the branch is the last reply now: the next turn reads it)" in out
    assert "step 9 is not a step of this reply" in done.stderr


@pytest.mark.slow  # the GPU runs on wgpu-py's device (lavapipe here)
def test_a_branch_pulled_through_gpu_runs_equals_the_numpy_path(tiny):
    from test_worker_pull import on_the_gpu, pulled

    turn = {"messages": MESSAGES, "window": 256, "max_tokens": 6, "top_k": 2}
    call("load", {"path": str(tiny.path)})
    call("use_numpy", {})
    record = call("run", turn)
    args = {**turn, "reply_ids": record.reply_ids, "step": 2, "id": 77}
    want = greedy(BranchJob(tiny, PromptCache(tiny.backend(256)), record.prompt_ids, record.reply_ids, step=2, id=77,
                            max_tokens=6, top_k=2))
    executor = on_the_gpu(tiny.path)
    pulled(executor, turn)  # the reply first: the GPU's cache then holds it
    got, tokens, _ = pulled(executor, args, kind="branch")
    assert got["reply_ids"] == want.reply_ids and [t["id"] for t in tokens] == want.reply_ids[3:]
    assert got["reused_tokens"] == len(record.prompt_ids) + 2 and got["backend"].startswith("webgpu: ")
    for ours, theirs in zip(got["top_k"][3:], want.top_k[3:]):
        assert [r[0] for r in ours] == [r[0] for r in theirs]
        assert all(abs(a[2] - b[2]) < 1e-3 for a, b in zip(ours, theirs))


@pytest.mark.slow  # the real model, through the command line
def test_the_command_line_branches_the_real_model_as_generate_continues_the_same_ids(gguf_path):
    request = {"messages": [{"role": "user", "content": "What is the capital of France?"}]}
    done = run_cli("branch", "--step", "1", "--id", "3681", "--max-tokens", "12", "--top-k", "2",
                   stdin=json.dumps(request), model=gguf_path)  # 3681: " city"
    assert done.returncode == 0, done.stderr
    b = json.loads(done.stdout)
    assert set(b) == {"prompt_ids", "branched_from", "step", "id", "reply_ids", "reply_text", "reply_tokens",
                      "reply_vocab", "reply_bytes", "stop_reason", "reused_tokens", "computed_tokens", "top_k",
                      "top_k_tokens", "top_k_bytes", "backend", "timings"}
    assert b["reply_ids"][:2] == [b["branched_from"][0], 3681] and len(b["reply_ids"]) <= 12
    assert (b["reused_tokens"], b["computed_tokens"]) == (len(b["prompt_ids"]) + 1, 1)  # the turn ran first here
    gen = cli_in_process("generate", "--max-new-tokens", str(12 - 2),
                         stdin=json.dumps(b["prompt_ids"] + b["reply_ids"][:2]), model=gguf_path)
    assert gen.returncode == 0, gen.stderr
    want = json.loads(gen.stdout)["ids"]
    assert b["top_k"][:2] == [None, None]  # the reply's own rows were not given: the branch's own after them
    gaps = [row[0][1] - row[1][1] for row in b["top_k"][2:]]
    assert equal_up_to_a_near_tie(b["reply_ids"][2:], want, gaps) >= 4
    # the same branch given the reply's ids: the turn is not run again, the prompt is read whole
    given = cli_in_process("branch", "--step", "1", "--id", "3681", "--max-tokens", "12",
                           stdin=json.dumps({**request, "reply_ids": b["branched_from"]}), model=gguf_path)
    g = json.loads(given.stdout)
    assert g["reply_ids"] == b["reply_ids"] and g["reused_tokens"] == 0
    assert g["computed_tokens"] == len(b["prompt_ids"]) + 2
    bad = cli_in_process("branch", "--step", "40", "--id", "3681", stdin=json.dumps({**request, "reply_ids": [1, 2]}),
                         model=gguf_path)
    assert bad.returncode == 1 and "step 40 is not a step of this reply" in bad.stderr and "Traceback" not in bad.stderr
