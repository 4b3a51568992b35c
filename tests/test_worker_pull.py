"""A reply as the page's worker pulls it from chatlens.worker: `start`, then `step` with each GPU
run's bytes, or `stop`. Here the tests play the worker's JavaScript (site/js/worker/worker.mjs's
`pull`): the runs Python plans go to the native executor (wgpu-py on lavapipe), as the browser's
executor runs them, and their bytes back to `step`. The tiny random Llama with SmolLM2's real
tokenizer and template keeps every step fast; its replies must equal the NumPy path's.
"""

import json
import struct
from collections import deque

import numpy as np
import pytest

from chatlens import worker
from tiny_model import write_tiny_model

pytest.importorskip("wgpu")

MESSAGES = [{"role": "user", "content": "Tell me about lighthouses."}]
REQUEST = {"messages": MESSAGES, "window": 256, "max_tokens": 6, "reserve": 6, "system": "Be brief."}  # a Turn


def call(name, args, *extra):
    out = json.loads(worker.call(name, json.dumps(args), *extra))
    assert out["ok"], out["error"]
    return out["result"]


@pytest.fixture(scope="module")
def tiny(hf_dir, tmp_path_factory):
    return write_tiny_model(tmp_path_factory.mktemp("tiny") / "model", hf_dir)


def on_numpy(folder, request):
    call("load", {"path": str(folder)})
    call("use_numpy", {})
    return call("run", request)


def on_the_gpu(folder):
    """The worker loaded with `folder`'s GPU program, and the executor the page's JS would hold."""
    from chatlens.host import native_gpu as native

    device, info = native.shared_device()
    call("load", {"path": str(folder)})
    program = call("gpu_program", {"n_ctx": 256, "features": info["features"], "limits": info["limits"]})
    read = lambda file, offset, n: (folder / file).read_bytes()[offset:offset + n]
    executor = native.NativeExecutor(device, program, read, info["name"])
    assert call("use_gpu", {"name": info["name"]})["backend"] == f"webgpu: {info['name']}"
    return executor


def test_a_cpu_emulation_gets_the_gemm_that_compiles_fastest_a_real_gpu_the_default(tiny):
    """gpu_program's adapter info: on SwiftShader (a fallback adapter) or llvmpipe, compiling is
    most of the setup, so the prefill GEMM is kernels.EMULATED_GEMM; on a real GPU, kernels.GEMM."""
    from chatlens.gpu import kernels

    call("load", {"path": str(tiny)})
    gemms = lambda info: {p["name"].split("-")[0] for p in call("gpu_program", {"n_ctx": 256, "info": info})["pipelines"]
                          if p["name"].startswith("matmul")}
    assert gemms({"vendor": "google", "description": "SwiftShader device", "fallback": True}) == {kernels.EMULATED_GEMM}
    assert gemms({"vendor": "mesa", "device": "llvmpipe (LLVM 15.0.6, 256 bits)"}) == {kernels.EMULATED_GEMM}
    assert gemms({"vendor": "nvidia", "architecture": "hopper", "fallback": False}) == gemms(None) == {kernels.GEMM}


def pulled(executor, request, stop_after=None, kind="run"):
    """worker.mjs's loop: submit the runs, give the oldest one's bytes, post the tokens."""
    flight, tokens, most = deque(), [], 0
    out = call("start", {"kind": kind, "args": request, "depth": 3})
    while out["done"] is None:
        tokens += [t for t in out["tokens"] if t["id"] >= 0]
        if stop_after is not None and len(tokens) >= stop_after:
            out = call("stop", {})
            break
        for r in out["runs"]:
            flight.append(executor.submit(r["sequences"], struct.pack(f"<{len(r['params'])}I", *r["params"]), r["readback"]))
        most = max(most, len(flight))
        out = call("step", {"depth": 3}, executor.collect(flight.popleft()))
    tokens += [t for t in out["tokens"] if t["id"] >= 0]
    for ticket in flight:
        executor.collect(ticket)  # steps computed past the end: their bytes are not used
    return out["done"], tokens, most


@pytest.mark.slow  # the GPU runs on wgpu-py's device (lavapipe here)
def test_a_reply_pulled_through_gpu_runs_equals_the_numpy_path(tiny):
    want = on_numpy(tiny, REQUEST)
    executor = on_the_gpu(tiny)
    record, tokens, most = pulled(executor, REQUEST)
    assert record["reply_ids"] == want["reply_ids"] and record["prompt_ids"] == want["prompt_ids"]
    assert [t["id"] for t in tokens] == record["reply_ids"] and record["backend"].startswith("webgpu: ")
    assert most > 1  # the next steps were in flight before each id was read back
    # A second turn reuses what the first left in the cache, as the NumPy path does.
    follow = {**REQUEST, "messages": MESSAGES + [{"role": "assistant", "content": record["reply_text"]},
                                                 {"role": "user", "content": "And ships?"}]}
    again, _, _ = pulled(executor, follow)
    on_numpy(tiny, REQUEST)
    ref = call("run", follow)  # the NumPy path, in the same two turns
    assert again["reply_ids"] == ref["reply_ids"] and again["reused_tokens"] == ref["reused_tokens"] > 0


@pytest.mark.slow  # the GPU runs on wgpu-py's device (lavapipe here)
def test_a_stop_after_the_first_token_keeps_it_and_the_cache_stays_right(tiny):
    executor = on_the_gpu(tiny)
    record, tokens, _ = pulled(executor, REQUEST, stop_after=1)
    assert record["stop_reason"] == "stopped" and record["reply_ids"] == [tokens[0]["id"]]
    # the steps already in flight were discarded: the next turn's reuse is the prompt's
    follow = {**REQUEST, "messages": MESSAGES + [{"role": "assistant", "content": record["reply_text"]},
                                                 {"role": "user", "content": "Go on."}]}
    preview = call("preview", follow)
    again, _, _ = pulled(executor, follow)
    assert again["reused_tokens"] == preview["reused_tokens"] >= len(record["prompt_ids"])


@pytest.mark.slow  # the GPU runs on wgpu-py's device (lavapipe here)
def test_a_prediction_is_pulled_too_and_leaves_the_cache_as_it_was(tiny):
    executor = on_the_gpu(tiny)
    pulled(executor, REQUEST)
    follow = {**REQUEST, "messages": MESSAGES + [{"role": "assistant", "content": "Yes."}, {"role": "user", "content": "Hm?"}]}
    before = call("preview", follow)["reused_tokens"]
    predicted, _, _ = pulled(executor, {**follow, "top_k": 5}, kind="predict")
    assert predicted["reused_tokens"] == before
    assert call("preview", follow)["reused_tokens"] == before
    # the candidates are the NumPy path's, the same ids in the same order, logits and probabilities alike
    on_numpy(tiny, REQUEST)
    want = call("predict", {**follow, "top_k": 5})
    assert [c[0] for c in predicted["top_k"]] == [c[0] for c in want["top_k"]] and len(want["top_k"]) == 5
    assert predicted["top_k_tokens"] == want["top_k_tokens"]
    np.testing.assert_allclose([c[1:] for c in predicted["top_k"]], [c[1:] for c in want["top_k"]], atol=1e-4, rtol=0)


# -- the prompt read a chunk a pull (NumPy), its progress moving ----------------------------------------------------------

STORY = ("The lighthouse keeper counted the ships that passed the rocks each night, wrote their names in a book, "
         "and trimmed the lamp before the storms came in from the sea. ") * 3
LONG_REQUEST = {"messages": [{"role": "user", "content": STORY + "What did the keeper write?"}], "window": 512,
                "max_tokens": 8, "reserve": 8, "system": "Be brief."}  # a prompt of about 120 tokens


def read_by_pulls(request, chunk=None, stop_at=None):
    """The page's loop on NumPy: `start` (with its default chunk unless one is given), then `step`
    until done; each answer's prompt progress, and `stop` once `read` reaches stop_at."""
    args = {"kind": "run", "args": request} if chunk is None else {"kind": "run", "args": request, "chunk": chunk}
    out, seen = call("start", args), []
    while out["done"] is None:
        seen.append((out["read"], out["of"]))
        out = call("stop", {}) if stop_at is not None and out["read"] >= stop_at else call("step", {})
    return out["done"], seen


def test_a_numpy_prompt_is_read_a_chunk_a_pull_so_the_progress_moves_and_the_ids_stay(tiny):
    from chatlens.protocol import READ_CHUNK

    one_shot = on_numpy(tiny, LONG_REQUEST)  # worker.run: the backend's own chunk, the whole prompt in one step
    call("use_numpy", {})  # an empty cache: every prompt id is read again
    record, seen = read_by_pulls(LONG_REQUEST)
    n = len(record["prompt_ids"])
    assert n > 4 * READ_CHUNK
    reads = [read for read, of in seen if read < of]
    assert reads == list(range(0, n, READ_CHUNK))  # the figure moves a chunk a pull, not once at the start
    assert {of for _, of in seen} == {n}
    assert record["reply_ids"] == one_shot["reply_ids"] and record["computed_tokens"] == n


def test_the_real_model_read_in_chunks_chooses_transformers_greedy_ids(gguf_path, model, reference):
    from test_model import compare_greedy, reference_greedy

    call("load", {"path": str(gguf_path)})
    call("use_numpy", {})
    record, seen = read_by_pulls(LONG_REQUEST)
    assert len(seen) > 4  # read in chunks
    theirs, gaps = reference_greedy(reference, record["prompt_ids"], LONG_REQUEST["max_tokens"], model.eos_id)
    assert compare_greedy(record["reply_ids"], theirs, gaps) >= 4


def test_a_stop_while_the_prompt_is_read_says_what_was_read_and_the_cache_holds_it(tiny):
    from chatlens.protocol import READ_CHUNK

    call("load", {"path": str(tiny)})
    call("use_numpy", {})
    record, seen = read_by_pulls(LONG_REQUEST, stop_at=2 * READ_CHUNK)
    assert record["stop_reason"] == "stopped" and record["reply_ids"] == []
    assert seen[-1][0] == record["computed_tokens"] == 2 * READ_CHUNK < record["used"]
    # the next send of the same turn reuses exactly what was read
    assert call("preview", LONG_REQUEST)["reused_tokens"] == 2 * READ_CHUNK
    again, _ = read_by_pulls(LONG_REQUEST)
    assert again["reused_tokens"] == 2 * READ_CHUNK and again["computed_tokens"] == again["used"] - 2 * READ_CHUNK


# -- a send is one request: start answers the turn's record before any step -------------------------------------------

def test_a_chat_start_answers_the_turns_record_before_any_step_as_a_preview_would(tiny):
    first = on_numpy(tiny, REQUEST)  # the cache holds a turn: the record states what it reuses
    follow = {**REQUEST, "messages": MESSAGES + [{"role": "assistant", "content": first["reply_text"]},
                                                 {"role": "user", "content": "And ships?"}]}
    preview = call("preview", follow)
    out = call("start", {"kind": "run", "args": follow})
    assert out["record"] == preview and preview["reused_tokens"] > 0 and out["tokens"] == []
    steps = []
    while out["done"] is None:
        out = call("step", {})
        steps.append(out)
    assert [s["record"] for s in steps] == [None] * len(steps)  # the start's answer only
    done = out["done"]
    # the reply fills the record it announced: the prompt's half is the same
    assert {k: done[k] for k in ("prompt_ids", "pieces", "window", "used", "reused_tokens", "dropped_messages")} == \
        {k: preview[k] for k in ("prompt_ids", "pieces", "window", "used", "reused_tokens", "dropped_messages")}
    # the other kinds announce none
    assert call("start", {"kind": "predict", "args": follow})["record"] is None
    call("stop", {})
    assert call("start", {"kind": "complete", "args": {"text": "Hello", "max_tokens": 2}})["record"] is None
    call("stop", {})


def test_a_turn_that_does_not_fit_is_refused_by_start_before_any_token(tiny):
    on_numpy(tiny, REQUEST)
    long = {**REQUEST, "messages": [{"role": "user", "content": STORY * 4}]}
    out = json.loads(worker.call("start", json.dumps({"kind": "run", "args": long})))
    preview = json.loads(worker.call("preview", json.dumps(long)))
    assert not out["ok"] and out["error"] == preview["error"] and out["error"]["name"] == "WindowError"
    assert json.loads(worker.call("step", "{}"))["error"]["message"] == "no job is running: start one first"


def test_one_job_at_a_time_a_replys_start_ends_a_running_count(tiny):
    """A count is a job like a reply: Python pulls one at a time, and a newer start ends the one before."""
    want = on_numpy(tiny, REQUEST)
    call("use_numpy", {})  # an empty cache, as the reply above had
    book = {**REQUEST, "window": 2048, "messages": [{"role": "user", "content": STORY * 400}]}
    counting = call("start", {"kind": "count", "args": book})
    assert counting["done"] is None and 0 < counting["read"] < counting["of"]
    out = call("start", {"kind": "run", "args": REQUEST})  # the count is gone: the steps are the reply's
    while out["done"] is None:
        out = call("step", {})
    assert out["done"]["reply_ids"] == want["reply_ids"]
