"""The lab's hand-written template and window (chatlens/by_hand.py, the lesson's own program) run as
the page runs it, as the main module: what it prints is what transformers' template and
tokenizer give for the turns it keeps, its hand-counted pieces are the tokenizer's counts, and
its loop drops what chatlens' own window drops in the same window with the same reply limit."""

import ast
import contextlib
import io
import json
import runpy
from importlib import resources

import pytest

from chatlens.chat import preview
from chatlens.source import load_text_side

PROGRAM = resources.files("chatlens").joinpath("by_hand.py")


@pytest.fixture(scope="module")
def ran():
    """(its globals, its stdout): the program run as the page's Python runs it."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        result = runpy.run_path(str(PROGRAM), run_name="__main__")
    return result, out.getvalue()


@pytest.fixture(scope="module")
def hf(gguf_path):
    """transformers' fast tokenizer over the GGUF's vocabulary, with the GGUF's chat template."""
    transformers = pytest.importorskip("transformers")
    tokenizers = pytest.importorskip("tokenizers")
    from chatlens.gguf import read_metadata
    from chatlens.host.export import tokenizer_json_from_gguf

    meta = read_metadata(gguf_path)
    tok = tokenizers.Tokenizer.from_str(json.dumps(tokenizer_json_from_gguf(meta)))
    return transformers.PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<|im_start|>", eos_token="<|im_end|>",
                                                unk_token="<|endoftext|>", pad_token="<|im_end|>",
                                                chat_template=meta["tokenizer.chat_template"])


def messages_of(turns, message):
    return [m for user, assistant in turns for m in ({"role": "user", "content": user},
                                                     {"role": "assistant", "content": assistant})] + [
        {"role": "user", "content": message}]


def n_tokens(hf, text):
    return len(hf(text, add_special_tokens=False)["input_ids"])


def test_it_prints_the_templates_text_for_the_turns_it_keeps(ran, hf):
    g, out = ran
    first, printed = out.split("\n", 1)
    want = hf.apply_chat_template(messages_of(g["kept"], g["message"]), tokenize=False, add_generation_prompt=True)
    assert printed == want + "\n"  # print() ends the prompt with one more newline
    dropped = len(g["turns"]) - len(g["kept"])
    assert first == f"{dropped} turn dropped; the prompt is {n_tokens(hf, want)} tokens:"
    assert g["render"](None, g["kept"], g["message"]) == want


def test_its_hand_counts_are_the_tokenizers(ran, hf):
    g = ran[0]
    piece, count = g["piece"], g["count"]
    assert count["system"] == n_tokens(hf, piece("system", g["DEFAULT_SYSTEM"]))
    assert count["header"] == n_tokens(hf, "<|im_start|>assistant\n")
    assert count[g["message"]] == n_tokens(hf, piece("user", g["message"]))
    # each turn's count is written as its user piece's plus its reply's ("13 + 18"): each addend checked
    written = next(n.value for n in ast.walk(ast.parse(PROGRAM.read_text("utf-8")))
                   if isinstance(n, ast.Assign) and getattr(n.targets[0], "id", None) == "count")
    sums = [v for v in written.values if isinstance(v, ast.BinOp)]
    assert len(sums) == len(g["turns"])
    for (user, assistant), expr in zip(g["turns"], sums):
        assert (expr.left.value, expr.right.value) == (n_tokens(hf, piece("user", user)), n_tokens(hf, piece("assistant", assistant)))
        assert count[(user, assistant)] == expr.left.value + expr.right.value
    # special tokens split the text, so the pieces add up to the whole prompt's count
    whole = g["render"](None, g["turns"], g["message"])
    assert count["system"] + sum(count[t] for t in g["turns"]) + count[g["message"]] + count["header"] == n_tokens(hf, whole)


def test_its_loop_drops_what_chatlens_drops(ran, gguf_path):
    g, out = ran
    text = load_text_side(gguf_path)
    record = preview(text.tokenizer, text.template, system=None, messages=messages_of(g["turns"], g["message"]),
                     window=g["window"], reserve=g["reply_limit"])
    assert len(record.dropped_messages) == 2 * (len(g["turns"]) - len(g["kept"]))
    assert record.used == g["used"] and out.split("\n", 1)[1] == record.prompt_text + "\n"
