"""chatlens.worker, the module the page's worker calls, fed exactly the JSON the page sends.

The page's API (site/js/page/api.mjs) turns a call such as chatlens.preview({preset, messages}) into
the worker's request with `toWire()` (site/js/page/protocol.mjs); these tests run that same function in Node to make the
request, then call the module as the worker does: call(name, json, ...callbacks) -> json.
"""

import json
import subprocess
import time
from pathlib import Path

import pytest

from chatlens import defaults, worker
from chatlens.cache import common_prefix
from chatlens.chat import ChatSession, preview
from chatlens.record import TurnRecord
from chatlens.source import load_model, load_text_side

from conftest import ROOT, load_once

SETTINGS = defaults.for_page()


def greedy_ids(model, ids, n):
    """The model's first n greedy ids after `ids` (NumPy, a backend of its own): a reply's exact ids."""
    backend = model.backend(len(ids) + n)
    step = backend.prefill(ids)
    out = [step.id]
    while len(out) < n:
        step = backend.decode(step.id)
        out.append(step.id)
    return out


def page_request(api_args: dict) -> str:
    """The worker request the page makes for chatlens.preview(api_args) / chatlens.run(api_args)."""
    script = ("import('./site/js/page/protocol.mjs').then(({toWire}) => process.stdout.write(JSON.stringify("
              "toWire('preview', JSON.parse(process.argv[1]), JSON.parse(process.argv[2])))))")
    done = subprocess.run(["node", "-e", script, json.dumps(api_args), json.dumps(SETTINGS)], cwd=ROOT,
                          capture_output=True, text=True, check=True)
    return done.stdout


def answer(name, args_json, *callbacks):
    out = json.loads(worker.call(name, args_json, *callbacks))
    if not out["ok"]:
        raise AssertionError(f"{out['error']['name']}: {out['error']['message']}")
    return out["result"]


def error_of(name, args_json, *callbacks):
    out = json.loads(worker.call(name, args_json, *callbacks))
    assert out["ok"] is False
    return out["error"]["name"], out["error"]["message"]


@pytest.fixture(scope="module")
def loaded(gguf_path):
    info = answer("load", json.dumps({"path": str(gguf_path)}))
    assert info == {"eos_token": "<|im_end|>", "n_ctx": 8192, "vocab_size": 49152, "source": str(gguf_path)}
    return load_text_side(gguf_path)


HISTORY = [{"role": "user", "content": "Hi! My name is Priya."}, {"role": "assistant", "content": "Hello Priya!"},
           {"role": "user", "content": "What is my name?"}]


def test_a_preview_is_the_turn_record_the_cli_computes(loaded):
    request = page_request({"preset": "pirate", "messages": HISTORY, "window": 256})
    assert json.loads(request) == {"messages": HISTORY, "preset": "pirate", "window": 256,
                                   "reserve": defaults.REPLY_LIMIT, "max_tokens": defaults.REPLY_LIMIT}
    got = answer("preview", request)
    from chatlens.presets import system_for

    want = preview(loaded.tokenizer, loaded.template, system=system_for("pirate"), messages=HISTORY, window=256,
                   preset="pirate", context=loaded.config.n_ctx)
    assert got == want.to_json()
    assert TurnRecord.from_json(got) == want


def test_blank_custom_text_is_the_templates_default_in_the_page_too(loaded):
    default = answer("preview", page_request({"messages": HISTORY}))
    for api_args in ({"preset": "custom", "custom": "   ", "messages": HISTORY},
                     {"system": "", "messages": HISTORY}, {"system": None, "messages": HISTORY}):
        rec = answer("preview", page_request(api_args))
        assert rec["prompt_text"] == default["prompt_text"] and rec["system"] is None, api_args
    assert default["window"] == defaults.DEFAULT_WINDOW
    rec = answer("preview", page_request({"system": "Be brief.", "messages": HISTORY}))
    assert rec["system"] == "Be brief." and rec["preset"] == "custom"


@pytest.mark.parametrize("api_args, name, message", [
    ({"messages": [{"role": "user", "content": "Tell me about sleep. " * 200}], "window": 256}, "WindowError", "alone need"),
    ({"messages": HISTORY, "window": 9000}, "WindowError", "longer than the model's context of 8192"),
    ({"messages": HISTORY, "window": 256.5}, "ChatlensError", "window must be a whole number"),
    ({"messages": HISTORY, "preset": "shakespeare"}, "ChatlensError", "unknown preset"),
    ({"messages": HISTORY[:2]}, "ChatlensError", "new user message"),
])
def test_bad_requests_come_back_as_the_pythons_error_type_and_message(loaded, api_args, name, message):
    got_name, got_message = error_of("preview", page_request(api_args))
    assert got_name == name and message in got_message and "Traceback" not in got_message


def test_a_window_error_carries_its_numbers_to_the_page(loaded):
    """The page draws the overflow from data, never by parsing the sentence."""
    out = json.loads(worker.call("preview", page_request({"messages": [{"role": "user", "content": "Tell me about sleep. " * 60}],
                                                         "window": 256})))
    error = out["error"]
    assert error["name"] == "WindowError"
    data = error["data"]
    assert (data["window"], data["reserve"], data["at_least"]) == (256, defaults.REPLY_LIMIT, False)
    assert data["context"] == loaded.config.n_ctx  # the window is drawn beside the model's whole context
    assert data["needed"] == sum(p["count"] for p in data["pieces"]) > 256 - defaults.REPLY_LIMIT
    assert f"alone need {data['needed']} tokens" in error["message"]
    # a pasted book is answered from a bound before tokenizing: its count is a floor, and says so
    book = json.loads(worker.call("preview", json.dumps({"messages": [{"role": "user", "content": "x" * 1_000_000}],
                                                        "window": 256})))["error"]
    from chatlens.errors import WindowError
    from chatlens.window import fit

    with pytest.raises(WindowError) as bound:  # CPython's fit, from the same bound
        fit(loaded.tokenizer, loaded.template, system=None, messages=[{"role": "user", "content": "x" * 1_000_000}],
            window=256, reserve=defaults.REPLY_LIMIT)
    assert book["name"] == "WindowError" and book["message"] == str(bound.value)
    assert book["data"] == {**bound.value.data, "context": loaded.config.n_ctx} and book["data"]["at_least"] is True



BOOK = "Tell me the whole story of the printing press, step by step. " * 16_400  # about a million characters


def book_request(**api_args):
    """The page's request for a pasted book (too long for a command line: the book goes in after)."""
    request = json.loads(page_request({"messages": [{"role": "user", "content": "the book"}], **api_args}))
    request["messages"][0]["content"] = BOOK
    return json.dumps(request)


def counting(request_json):
    """A `start` of a count job for the Turn `request_json`, as the page's worker sends it."""
    return json.dumps({"kind": "count", "args": json.loads(request_json)})


def test_a_pasted_book_is_refused_at_once_then_counted_exactly_a_step_at_a_time(loaded):
    """What the page does after a preview answers from the bound: `start` a count of the same
    Turn, then `step` until done, answering other requests between two steps."""
    request = book_request(preset="pirate", window=8192)
    started = time.perf_counter()
    bound = json.loads(worker.call("preview", request))["error"]["data"]
    bound_s = time.perf_counter() - started
    assert bound["at_least"] is True  # the bound's answer: nothing was tokenized

    out, steps, longest = answer("start", counting(request)), 1, 0.0
    while out["done"] is None:
        assert 0 <= out["read"] <= out["of"]
        tokens = answer("tokenize", json.dumps({"text": "Answered between two steps."}))  # the worker is free
        assert tokens["prompt_ids"] == loaded.tokenizer.encode("Answered between two steps.")
        t = time.perf_counter()
        out = answer("step", json.dumps({"ms": 20}))
        longest, steps = max(longest, time.perf_counter() - t), steps + 1
    exact = out["done"]
    assert steps > 5, steps  # a slice at a time, each step's time capped by its `ms`
    print(f"\nbound answered in {bound_s * 1000:.0f} ms; counted in {steps} steps, the longest {longest * 1000:.0f} ms")

    from chatlens.presets import system_for

    prompt = loaded.template.render([{"role": "system", "content": system_for("pirate")},
                                     {"role": "user", "content": BOOK}], add_generation_prompt=True)
    assert exact["needed"] == len(loaded.tokenizer.encode(prompt)) > bound["needed"]
    assert (exact["window"], exact["reserve"], exact["at_least"]) == (8192, defaults.REPLY_LIMIT, False)
    assert exact["context"] == loaded.config.n_ctx
    assert [p["label"] for p in exact["pieces"]] == ["system", "new message", "generation header"]
    assert exact["needed"] == sum(p["count"] for p in exact["pieces"])
    assert f"alone need {exact['needed']} tokens" in exact["message"]
    assert error_of("step", "{}") == ("ChatlensError", "no job is running: start one first")  # done: nothing to step


def test_the_count_a_preview_makes_equals_the_preview_s_own_overflow(loaded):
    """Where the bound cannot tell, the preview counts exactly itself: a count gives the same data."""
    request = page_request({"messages": [{"role": "user", "content": "Tell me about sleep. " * 60}], "window": 256})
    error = json.loads(worker.call("preview", request))["error"]
    out = answer("start", counting(request))
    while out["done"] is None:
        out = answer("step", "{}")
    done = out["done"]
    assert done.pop("message") == error["message"] and done == error["data"]


def counted(loaded, messages, window):
    """The figures CPython's window.counting gives for the same Turn (the template's default system prompt)."""
    from chatlens.window import counting as steps

    job = steps(loaded.tokenizer, loaded.template, system=None, messages=messages, window=window)
    while True:
        try:
            next(job)
        except StopIteration as done:
            return {**done.value, "context": loaded.config.n_ctx}


def test_a_new_count_ends_the_one_before_and_a_stop_ends_it_unanswered(loaded):
    first = book_request(window=8192)
    assert answer("start", counting(first))["done"] is None
    hi = [{"role": "user", "content": "Hi"}]
    second = answer("start", counting(page_request({"messages": hi, "window": 256})))
    for _ in range(100):  # a short count ends in its start's 20 ms, unless the CPU is busy elsewhere
        if second["done"] is not None:
            break
        second = answer("step", "{}")
    assert second["done"] == counted(loaded, hi, 256)  # the short one's figures: the book's count is gone
    assert answer("start", counting(first))["done"] is None
    assert answer("stop", "{}")["done"] == {"stopped": True}
    assert error_of("stop", "{}") == ("ChatlensError", "no job is running: start one first")
    assert error_of("step", "{}") == ("ChatlensError", "no job is running: start one first")
    assert error_of("start", counting(page_request({"messages": HISTORY, "window": 9000})))[0] == "WindowError"

def test_requests_are_read_through_the_protocol(loaded):
    """chatlens.protocol's types: an unknown or mistyped argument is refused with a plain sentence."""
    assert error_of("preview", json.dumps({"messages": HISTORY, "maxTokens": 5})) == (
        "ChatlensError", "unknown argument 'maxTokens': this request takes " + ", ".join(
            ["messages", "window", "reserve", "max_tokens", "preset", "custom", "system", "special_in_text", "top_k"]))
    assert error_of("preview", json.dumps({"messages": HISTORY, "special_in_text": "yes"})) == (
        "ChatlensError", "special_in_text must be boolean, not 'yes'")
    assert error_of("load", "{}") == ("ChatlensError", "the request lacks 'path'")


def test_the_pages_side_of_the_protocol_is_current():
    """site/js/worker/protocol.gen.mjs is written from chatlens.protocol: `python -m chatlens protocol --write`."""
    from chatlens import protocol

    assert (ROOT / protocol.GENERATED).read_text(encoding="utf-8") == protocol.javascript(), \
        "stale: run python -m chatlens protocol --write"


def test_unknown_requests_and_replies_before_the_weights(loaded):
    assert error_of("bogus", "{}") == ("ChatlensError", "unknown request 'bogus'")
    assert error_of("preview", "[1, 2]") == ("ChatlensError", "a request's arguments must be an object")
    name, message = error_of("run", page_request({"messages": HISTORY}))
    assert (name, message) == ("ChatlensError", "the model's weights are not loaded yet: replies need them")


def test_a_run_streams_its_reply_and_reuses_the_cache_like_the_cli(loaded, gguf_path):
    assert answer("use_numpy", "{}") == {"backend": "numpy", "n_ctx": 8192}
    session = ChatSession(load_once(gguf_path), window=256, max_tokens=12, preset="none")
    messages, streamed, held = [], [], []  # held: the ids the worker's cache holds after a turn
    for text in ["Hi! My name is Priya.", "What is my name?"]:
        messages.append({"role": "user", "content": text})
        request = page_request({"preset": "none", "messages": messages, "window": 256, "maxTokens": 12})
        before = answer("preview", request)
        streamed.clear()
        rec = answer("run", request, lambda i, text, token: streamed.append((i, text, token)), lambda: False)
        want = session.send(text).to_json()
        got, expected = dict(rec), dict(want)
        got.pop("timings"), expected.pop("timings")
        assert got == expected  # the same record as the chat session, reuse included
        assert before["reused_tokens"] == rec["reused_tokens"]
        assert [i for i, _, _ in streamed if i >= 0] == rec["reply_ids"]
        assert [t for i, _, t in streamed if i >= 0] == rec["reply_tokens"]
        assert "".join(p for _, p, _ in streamed) == rec["reply_text"]
        assert rec["reused_tokens"] == min(common_prefix(rec["prompt_ids"], held), len(rec["prompt_ids"]) - 1)
        held = rec["prompt_ids"] + rec["reply_ids"][:-1]  # the reply's last id was chosen, never read
        messages.append({"role": "assistant", "content": rec["reply_text"]})
    assert rec["reused_tokens"] > 0 and rec["backend"] == "numpy"


def test_a_stopped_run_keeps_its_partial_reply_and_the_next_turn_reuses_the_cache(loaded, gguf_path):
    answer("use_numpy", "{}")
    model = load_once(gguf_path)
    messages = [{"role": "user", "content": "Tell me a long story about a dragon."}]
    request = page_request({"messages": messages, "window": 256})
    asked = []
    rec = answer("run", request, None, lambda: asked.append(1) or len(asked) >= 3)
    # stopped when asked the third time: the greedy reply's first 3 ids, as far as it got
    assert rec["stop_reason"] == "stopped" and rec["reply_ids"] == greedy_ids(model, rec["prompt_ids"], 3)
    messages += [{"role": "assistant", "content": rec["reply_text"]}, {"role": "user", "content": "Go on."}]
    nxt = answer("run", page_request({"messages": messages, "window": 256, "maxTokens": 2}))
    held = rec["prompt_ids"] + rec["reply_ids"][:-1]  # the partial reply's last id was chosen, never read
    assert nxt["reused_tokens"] == common_prefix(nxt["prompt_ids"], held) >= rec["used"]
    assert nxt["stop_reason"] == "max_tokens" and nxt["reply_ids"] == greedy_ids(model, nxt["prompt_ids"], 2)


def test_the_worker_module_needs_no_numpy_until_the_weights(gguf_path, loaded):
    """In the browser, previews run before NumPy is loaded: block it and preview."""
    import os
    import sys

    code = ("import sys, json\nsys.modules['numpy'] = None\nfrom chatlens import worker\n"
            f"print(worker.call('load', json.dumps({{'path': {str(gguf_path)!r}}})))\n"
            "print(worker.call('preview', json.dumps({'messages': [{'role': 'user', 'content': 'Hi'}], 'window': 256})))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(Path(ROOT) / "py")})
    assert out.returncode == 0, out.stderr
    load, rec = (json.loads(line) for line in out.stdout.splitlines())
    assert load == {"ok": True, "result": {"eos_token": "<|im_end|>", "n_ctx": 8192, "vocab_size": 49152,
                                           "source": str(gguf_path)}}
    want = preview(loaded.tokenizer, loaded.template, system=None, messages=[{"role": "user", "content": "Hi"}],
                   window=256, context=loaded.config.n_ctx)
    assert rec == {"ok": True, "result": want.to_json()}


# -- render: the template workbench's request, against transformers' apply_chat_template ------------------------------

WORKBENCH_TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "The weather in a city",
    "parameters": {"type": "object", "required": ["city"], "properties": {"city": {"type": "string"}}}}}]


@pytest.fixture(scope="module")
def hf_smol(loaded):
    """transformers' fast tokenizer over the same vocabulary, with the special tokens the GGUF names."""
    transformers = pytest.importorskip("transformers")
    tokenizers = pytest.importorskip("tokenizers")
    from chatlens.host.export import tokenizer_json_from_gguf

    tok = tokenizers.Tokenizer.from_str(json.dumps(tokenizer_json_from_gguf(loaded.metadata)))
    return transformers.PreTrainedTokenizerFast(tokenizer_object=tok, **loaded.template.special_tokens)


def test_render_requests_give_what_transformers_gives(loaded, hf_smol):
    tok = loaded.tokenizer
    qwen = (Path(ROOT) / "tests" / "templates" / "qwen2.5-training.jinja").read_text(encoding="utf-8")
    requests = [  # the JSON the workbench sends, and the arguments transformers takes for it
        ({"messages": HISTORY}, {"add_generation_prompt": True}),
        ({"messages": HISTORY, "add_generation_prompt": False}, {}),
        ({"messages": HISTORY + [{"role": "assistant", "content": "Your name is"}], "continue_final_message": True},
         {"continue_final_message": True}),
        ({"messages": HISTORY, "template": qwen, "tools": WORKBENCH_TOOLS, "assistant_mask": True},
         {"chat_template": qwen, "tools": WORKBENCH_TOOLS, "add_generation_prompt": True,
          "return_assistant_tokens_mask": True}),
        ({"messages": HISTORY, "template": "{{ greeting }} {{ bos_token }}{{ messages[-1].content }}",
          "variables": {"greeting": "Ahoy", "bos_token": "<s>"}},
         {"chat_template": "{{ greeting }} {{ bos_token }}{{ messages[-1].content }}", "greeting": "Ahoy",
          "bos_token": "<s>", "add_generation_prompt": True}),
    ]
    hf_smol.chat_template = loaded.template.source
    for request, kwargs in requests:
        got = answer("render", json.dumps(request))
        masked = kwargs.pop("return_assistant_tokens_mask", False)
        text = hf_smol.apply_chat_template(request["messages"], tokenize=False, **kwargs)
        assert got["text"] == text
        assert got["ids"] == hf_smol(text, add_special_tokens=False)["input_ids"]
        assert got["tokens"] == [tok.token_text(i) for i in got["ids"]]
        assert got["special_ids"] == sorted(set(got["ids"]) & tok.special_ids)
        if masked:
            out = hf_smol.apply_chat_template(request["messages"], tokenize=True, return_dict=True,
                                              return_assistant_tokens_mask=True, **kwargs)
            assert got["assistant_mask"] == list(out["assistant_masks"]) and 1 in got["assistant_mask"]
        else:
            assert got["assistant_mask"] is None  # asked for only with assistant_mask


@pytest.mark.parametrize("request_args, message", [
    ({"messages": HISTORY, "template": "line 1\n{% for m in messages %}\n{% if %}"}, "syntax error (line 3)"),
    ({"messages": HISTORY, "template": "{{ messages.__class__ }}"},
     "the template tried to reach '__class__' of a list, which the sandbox forbids"),
    ({"messages": HISTORY, "template": "{% for a in range(100000) %}{% for b in range(100000) %}{% endfor %}"
                                       "{% endfor %}"}, "longer than its limit of 2 s"),
    ({"messages": HISTORY, "continue_final_message": True, "assistant_mask": True}, "not compatible"),
    ({"messages": HISTORY, "variables": {"messages": []}}, "'messages' is set by the render itself"),
    ({"messages": HISTORY, "tools": {"name": "get_weather"}}, "tools must be a list of JSON schemas"),
    ({"messages": {"role": "user", "content": "Hi"}}, "put it in a list"),
    ({"messages": []}, "Cannot apply chat template to an empty conversation"),
])
def test_render_requests_that_fail_are_template_errors(loaded, request_args, message):
    name, got = error_of("render", json.dumps(request_args))
    assert name == "TemplateError" and message in got and "Traceback" not in got


# -- the comparison: both models held, four replies pulled as one job ------------------------------------------------
def ask(w, name, args=None, *extra):
    """A request to a worker of the test's own, read and answered through the contract as `call` does."""
    from chatlens import protocol

    return protocol.to_json(getattr(w, name)(protocol.parse(protocol.REQUESTS[name][0], args or {}), *extra))


@pytest.fixture(scope="module")
def two_tiny(tmp_path_factory):
    """Two tiny models with the real tokenizer: the instruct's files, and the stand-in base's."""
    from standin_base import instruct_folder, standin_base
    from tiny_model import write_tiny_model

    root = tmp_path_factory.mktemp("tiny-worker-compare")
    return (write_tiny_model(root / "instruct", instruct_folder(), seed=0),
            write_tiny_model(root / "base", standin_base(), seed=1))


def both_loaded(two_tiny):
    w = worker._Worker()
    ask(w, "load", {"path": str(two_tiny[0])})
    ask(w, "load_base", {"path": str(two_tiny[1])})
    ask(w, "use_numpy", {})
    ask(w, "use_numpy", {"model": "base"})
    return w


def pulled_compare(w, args, stop_after=None, ended=None):
    """A compare job pulled as the page pulls it: (start's answer, the tokens, done); `ended`, a
    list, gets each reply's end as the answers say it, with the tokens before it."""
    out = first = ask(w, "start", {"kind": "compare", "args": args})
    tokens, steps = [], 0
    while True:
        tokens += out["tokens"]
        if ended is not None:
            ended += [(len(tokens), c) for c in out["ended"]]
        if out["done"] is not None:
            return first, tokens, out["done"]
        steps += 1
        out = ask(w, "stop") if stop_after is not None and steps > stop_after else ask(w, "step")


FRANCE = "What is the capital of France?"


def test_a_compare_job_answers_the_prompt_first_then_the_four_replies_compare_gives(two_tiny):
    from chatlens.compare import LAYOUTS, MODELS
    from chatlens.host.compare import compared
    from chatlens.protocol import to_json

    w = both_loaded(two_tiny)
    ended = []
    first, tokens, done = pulled_compare(w, {"text": FRANCE, "max_tokens": 4, "top_k": 3}, ended=ended)
    want = to_json(compared(load_model(two_tiny[0]), load_model(two_tiny[1]), FRANCE, max_tokens=4, top_k=3))
    assert first["prompt"] == want["prompt"] and first["tokens"] == [] and first["done"] is None
    assert done["prompt"] == want["prompt"]
    for key in MODELS:
        for layout in LAYOUTS:
            got, ref = done[key][layout], want[key][layout]
            assert got["reply_ids"] == ref["reply_ids"] and got["stop_reason"] == ref["stop_reason"], (key, layout)
            assert got["reply_text"] == ref["reply_text"]
            # the page reads the prompt a chunk at a time (protocol.READ_CHUNK): the same ids, sums in another order
            assert len(got["top_k"]) == len(ref["top_k"]) == len(got["reply_ids"])  # each step's candidates
            for step, ref_step in zip(got["top_k"], ref["top_k"]):
                assert [r[0] for r in step] == [r[0] for r in ref_step]
                for (_, logit, prob), (_, ref_logit, ref_prob) in zip(step, ref_step):
                    assert abs(logit - ref_logit) < 1e-3 and abs(prob - ref_prob) < 1e-4, (key, layout)
            streamed = [t["id"] for t in tokens if (t["model"], t["layout"]) == (key, layout) and t["id"] >= 0]
            assert streamed == got["reply_ids"], (key, layout)
    # in the plan's order: every token of a reply before the next reply's
    order = [(t["model"], t["layout"]) for t in tokens]
    assert order == sorted(order, key=[(k, l) for k in MODELS for l in LAYOUTS].index)
    # each reply's end is said as it ends, with its stop reason, once all of its tokens have come
    cells = [(k, l) for k in MODELS for l in LAYOUTS]
    assert [(c["model"], c["layout"], c["stop_reason"]) for _, c in ended] == [(k, l, done[k][l]["stop_reason"]) for k, l in cells]
    for at, c in ended:
        assert tokens[at - 1]["model"] == c["model"] and tokens[at - 1]["layout"] == c["layout"]


def test_a_stopped_compare_stops_the_reply_under_way_and_every_one_after(two_tiny):
    w = both_loaded(two_tiny)
    _, tokens, done = pulled_compare(w, {"text": FRANCE, "max_tokens": 8, "top_k": 0}, stop_after=3)
    assert done["instruct"]["plain"]["stop_reason"] == "stopped"
    for key, layout in [("instruct", "template"), ("base", "plain"), ("base", "template")]:
        assert done[key][layout]["stop_reason"] == "stopped" and done[key][layout]["reply_ids"] == []
    assert w.job is None
    # the chat goes on after it: the instruct's cache was the comparison's, and is read again
    rec = ask(w, "run", {"messages": [{"role": "user", "content": "Hi"}], "window": 256, "max_tokens": 2})
    assert rec["reused_tokens"] == 0 and rec["stop_reason"] == "max_tokens"
    assert rec["reply_ids"] == greedy_ids(load_model(two_tiny[0]), rec["prompt_ids"], 2)


def test_a_compare_needs_both_models_and_says_which_is_missing(two_tiny):
    from chatlens.errors import ChatlensError

    w = worker._Worker()
    ask(w, "load", {"path": str(two_tiny[0])})
    ask(w, "use_numpy", {})
    with pytest.raises(ChatlensError, match="needs the base model, which is not loaded"):
        ask(w, "start", {"kind": "compare", "args": {"text": FRANCE}})
    ask(w, "load_base", {"path": str(two_tiny[1])})
    with pytest.raises(ChatlensError, match="needs the base model's weights"):
        ask(w, "start", {"kind": "compare", "args": {"text": FRANCE}})
    w2 = worker._Worker()
    ask(w2, "load", {"path": str(two_tiny[0])})
    ask(w2, "load_base", {"path": str(two_tiny[1])})
    ask(w2, "use_numpy", {"model": "base"})
    with pytest.raises(ChatlensError, match="needs the instruct model's weights"):
        ask(w2, "start", {"kind": "compare", "args": {"text": FRANCE}})
    with pytest.raises(ChatlensError, match="model must be instruct or base"):
        ask(w2, "use_numpy", {"model": "other"})


def test_a_base_with_another_tokenizer_is_refused_with_the_sentence(two_tiny, tmp_path):
    from chatlens.compare import TokenizerMismatchError
    from standin_base import mismatched_tokenizer

    w = worker._Worker()
    ask(w, "load", {"path": str(two_tiny[0])})
    other = mismatched_tokenizer(tmp_path / "other")
    with pytest.raises(TokenizerMismatchError, match="needs both models to read exactly the same ids"):
        ask(w, "load_base", {"path": str(other)})
    assert w.base_text is None
