"""Plain text against the template (`python -m chatlens complete`, the worker's `complete`).

The lesson's experiment, against transformers (float32, on the same dequantized weights): "What
is the capital of France?" as plain text makes <|im_end|> the most likely next token; the same
words as a user message inside the template make a word of an answer the most likely. The text's
ids are HF tokenizers' for the same text (special tokens written in it are tokens).
"""

import json

import numpy as np
import pytest

from chatlens import worker
from conftest import cli_in_process, run_cli

FRANCE = "What is the capital of France?"
TOL = 1e-3


@pytest.fixture(scope="module")
def hf_tokenizer(tokenizer_json):
    tokenizers = pytest.importorskip("tokenizers")
    return tokenizers.Tokenizer.from_file(str(tokenizer_json))


def next_token_probabilities(reference, ids):
    import torch

    with torch.inference_mode():
        logits = reference(torch.tensor([ids])).logits[0, -1].numpy().astype(np.float64)
    e = np.exp(logits - logits.max())
    return e / e.sum()


def assert_ranked_like_the_reference(candidates, probs):
    """The candidates are the reference's best len(candidates), in its order: none is missing (every id left out is
    no likelier than the last one in) and none is out of place (each is at least as likely as the next), up to
    2 * TOL, what the two sides' probabilities may each be off by."""
    ids = [i for i, _, _ in candidates]
    assert len(set(ids)) == len(ids)
    for a, b in zip(ids, ids[1:]):
        assert probs[a] >= probs[b] - 2 * TOL, (a, b)
    left_out = np.ones(len(probs), bool)
    left_out[ids] = False
    assert probs[left_out].max() <= probs[ids].min() + 2 * TOL, int(np.flatnonzero(left_out)[probs[left_out].argmax()])


def complete_cli(text, *args, model, run=cli_in_process):
    """`python -m chatlens complete ARGS` with `text` on stdin: its JSON (run_cli: in a process of its own)."""
    done = run("complete", *args, stdin=text, model=model)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_the_capital_of_france_as_plain_text_ends_the_message(gguf_path, model, reference, hf_tokenizer):
    out = complete_cli(FRANCE, "--top-k", "10", "--max-new-tokens", "4", model=gguf_path, run=run_cli)
    assert out["prompt_ids"] == hf_tokenizer.encode(FRANCE, add_special_tokens=False).ids
    probs = next_token_probabilities(reference, out["prompt_ids"])
    first = out["top_k"][0]
    assert first[0][0] == model.eos_id == int(np.argmax(probs))  # <|im_end|> leads
    assert out["top_k_tokens"][0][0] == "<|im_end|>"
    np.testing.assert_allclose([p for _, _, p in first], probs[[i for i, _, _ in first]], atol=TOL, rtol=0)
    assert len(first) == 10
    assert_ranked_like_the_reference(first, probs)
    # greedy takes it: the continuation is over at once
    assert out["reply_ids"] == [model.eos_id] and out["reply_text"] == "" and out["stop_reason"] == "end_turn"


def test_the_same_words_inside_the_template_get_an_answer(model, reference, numpy_worker):
    text = model.template.render([{"role": "user", "content": FRANCE}], add_generation_prompt=True)
    out = worker_complete(text, top_k=10, max_tokens=1)
    ids = out["prompt_ids"]
    assert ids == model.tokenizer.encode(text)  # the template's text, its special tokens matched
    probs = next_token_probabilities(reference, ids)
    first = out["top_k"][0]
    assert first[0][0] == int(np.argmax(probs)) and first[0][0] not in model.tokenizer.special_ids
    assert out["top_k_tokens"][0][0].strip().isalpha()  # a word of an answer ("The")
    np.testing.assert_allclose([p for _, _, p in first], probs[[i for i, _, _ in first]], atol=TOL, rtol=0)
    assert len(first) == 10
    assert_ranked_like_the_reference(first, probs)


@pytest.fixture(scope="module")
def numpy_worker(gguf_path):
    """chatlens.worker as the page's worker has it once the weights are in NumPy."""
    for name, args in (("load", {"path": str(gguf_path)}), ("use_numpy", {})):
        assert json.loads(worker.call(name, json.dumps(args)))["ok"]


def worker_complete(text, top_k, max_tokens):
    """The worker's `complete` request, as the page sends it."""
    streamed = []
    out = json.loads(worker.call("complete", json.dumps({"text": text, "top_k": top_k, "max_tokens": max_tokens}),
                                 lambda i, t, tok: streamed.append((i, t))))
    assert out["ok"], out
    result = out["result"]
    assert [i for i, _ in streamed if i >= 0] == result["reply_ids"]
    assert "".join(t for _, t in streamed) == result["reply_text"]
    return result


def test_the_worker_continues_plain_text_as_the_cli_does(gguf_path, numpy_worker):
    text = "The three primary colours are"
    cli = complete_cli(text, "--top-k", "3", "--max-new-tokens", "5", model=gguf_path)
    page = worker_complete(text, top_k=3, max_tokens=5)
    assert page["reply_ids"] == cli["reply_ids"] and page["reply_text"] == cli["reply_text"]
    assert page["stop_reason"] == cli["stop_reason"]
    assert [[c[0] for c in s] for s in page["top_k"]] == [[c[0] for c in s] for s in cli["top_k"]]
    np.testing.assert_allclose([[c[2] for c in s] for s in page["top_k"]], [[c[2] for c in s] for s in cli["top_k"]],
                               atol=1e-6, rtol=0)
    assert cli["stop_reason"] == "max_tokens" and len(cli["reply_ids"]) == 5
    assert complete_cli(text, "--max-new-tokens", "1", model=gguf_path)["top_k"] is None


def test_special_tokens_written_in_the_text_are_tokens(numpy_worker, hf_tokenizer):
    text = "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
    tokens = json.loads(worker.call("tokenize", json.dumps({"text": text})))["result"]
    assert tokens["prompt_ids"] == hf_tokenizer.encode(text, add_special_tokens=False).ids
    assert tokens["special_ids"] == sorted({1, 2}) and tokens["prompt_tokens"][0] == "<|im_start|>"


def hf_bytes(hf_tokenizer, ids):
    """Each id's bytes by HF tokenizers' vocabulary and transformers' byte alphabet, as hex."""
    from transformers.convert_slow_tokenizer import bytes_to_unicode

    byte_of = {c: b for b, c in bytes_to_unicode().items()}
    added = {t.content for t in hf_tokenizer.get_added_tokens_decoder().values()}
    out = []
    for i in ids:
        token = hf_tokenizer.id_to_token(i)
        out.append((token.encode("utf-8") if token in added else bytes(byte_of[c] for c in token)).hex())
    return out


def test_tokens_carry_their_bytes_split_characters_too(numpy_worker, hf_tokenizer):
    text = "東京 你好世界 👨‍👩‍👧 שלום<|im_end|>"
    tokens = json.loads(worker.call("tokenize", json.dumps({"text": text})))["result"]
    ids = tokens["prompt_ids"]
    assert ids == hf_tokenizer.encode(text, add_special_tokens=False).ids
    assert tokens["prompt_bytes"] == hf_bytes(hf_tokenizer, ids)
    assert b"".join(bytes.fromhex(h) for h in tokens["prompt_bytes"]) == text.encode("utf-8")
    assert any("\ufffd" in t for t in tokens["prompt_tokens"])  # what the text alone could not tell
    # a continuation's tokens and its candidates carry theirs too
    out = worker_complete(text, top_k=3, max_tokens=2)
    assert out["reply_bytes"] == hf_bytes(hf_tokenizer, out["reply_ids"])
    assert out["top_k_bytes"] == [hf_bytes(hf_tokenizer, [c[0] for c in step]) for step in out["top_k"]]


# Texts whose tokens are plain words, characters split across tokens, a ZWJ sequence, right-to-left
# script, runs of spaces and tabs, and special tokens written in the text.
TEXTS = ["The three primary colours are", "東京 你好世界 👨\u200d👩\u200d👧 שלום", "  two  spaces\n\ttab ",
         "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"]


def hf_lists(hf_tokenizer, ids, prefix=""):
    """The parallel token lists of `ids` as chatlens.record defines them, each from its reference:
    tokens each token's bytes decoded on their own (HF tokenizers' decode of the one id), vocab the
    vocabulary's entry (HF's id_to_token), bytes its bytes as hex (hf_bytes)."""
    return {f"{prefix}ids": list(ids),
            f"{prefix}tokens": [hf_tokenizer.decode([i], skip_special_tokens=False) for i in ids],
            f"{prefix}vocab": [hf_tokenizer.id_to_token(i) for i in ids],
            f"{prefix}bytes": hf_bytes(hf_tokenizer, ids)}


@pytest.mark.parametrize("text", TEXTS + [""])
def test_a_texts_token_lists_are_their_definitions(model, hf_tokenizer, text):
    from chatlens.complete import tokenized
    from chatlens.protocol import to_json

    ids = hf_tokenizer.encode(text, add_special_tokens=False).ids
    special = sorted({i for i, t in hf_tokenizer.get_added_tokens_decoder().items() if t.special} & set(ids))
    want = {**hf_lists(hf_tokenizer, ids, "prompt_"), "special_ids": special}
    assert json.dumps(to_json(tokenized(model.tokenizer, text))) == json.dumps(want)  # the page's JSON, byte for byte


@pytest.mark.parametrize("text", TEXTS)
def test_a_continuations_token_lists_are_their_definitions(model, hf_tokenizer, text):
    from chatlens.cache import PromptCache
    from chatlens.jobs import TextJob
    from chatlens.protocol import to_json
    from chatlens.pull import greedy

    cache = PromptCache(model.backend(n_ctx=64))
    out = to_json(greedy(TextJob(model, cache, text, max_tokens=3, top_k=3)))
    assert list(out) == ["prompt_ids", "prompt_tokens", "prompt_vocab", "prompt_bytes", "special_ids", "reply_ids",
                         "reply_text", "reply_tokens", "reply_vocab", "reply_bytes", "stop_reason", "top_k",
                         "top_k_tokens", "top_k_bytes", "reused_tokens", "computed_tokens", "backend", "timings", "eos_id"]
    assert {k: out[k] for k in list(out)[:4]} == hf_lists(hf_tokenizer, hf_tokenizer.encode(text, add_special_tokens=False).ids,
                                                                 "prompt_")
    assert {k: out[k] for k in ("reply_ids", "reply_tokens", "reply_vocab", "reply_bytes")} == \
        hf_lists(hf_tokenizer, out["reply_ids"], "reply_")
    steps = [hf_lists(hf_tokenizer, [c[0] for c in step]) for step in out["top_k"]]
    assert out["top_k_tokens"] == [s["tokens"] for s in steps] and out["top_k_bytes"] == [s["bytes"] for s in steps]


@pytest.mark.parametrize("args, stdin, message", [
    (["--max-new-tokens", "0"], "Hi", "--max-new-tokens must be at least 1"),
    (["--top-k", "-1"], "Hi", "--top-k must be 0 or more"),
    ([], "", "the text is empty"),
])
def test_bad_input_is_a_clear_error(gguf_path, args, stdin, message):
    done = cli_in_process("complete", *args, stdin=stdin, model=gguf_path)
    assert done.returncode == 1 and message in done.stderr and "Traceback" not in done.stderr
