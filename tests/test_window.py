"""Fitting the window and the pieces of a prompt: the lesson's arithmetic, edge cases, any template.

These need only the text side (tokenizer and template from the GGUF's metadata), no weights.

The lesson's counts with SmolLM2's template and tokenizer: the default system piece 21
tokens, the generation header 4, "What is my name?" 10, the Priya turn 13 + 18, the sleep
turn 13 + 23; 102 tokens for the whole prompt, 71 after dropping the first turn. The lesson
does not give its assistant replies, only their counts. The two replies below were written by
hand and shortened word by word until our tokenizer gave their pieces
(`<|im_start|>assistant\\n{reply}<|im_end|>\\n`) exactly 18 and 23 tokens; the expected numbers
are the lesson's, the counts come from our tokenizer (itself tested against Hugging Face's).
"""

import copy
import json
import os
import random
import subprocess
import sys

import pytest

from chatlens import window
from chatlens.chat import preview
from chatlens.errors import ChatlensError, WindowError
from chatlens.source import load_text_side

from conftest import ROOT

REPLY_1 = "Hello, Priya! How can I help you today?"  # piece of 18 tokens
REPLY_2 = "Go to bed and wake up at the same time every day, even on weekends."  # piece of 23 tokens

LESSON = [
    {"role": "user", "content": "Hi! My name is Priya."},
    {"role": "assistant", "content": REPLY_1},
    {"role": "user", "content": "Give me one tip for sleeping better."},
    {"role": "assistant", "content": REPLY_2},
    {"role": "user", "content": "What is my name?"},
]


@pytest.fixture(scope="module")
def text(gguf_path):
    return load_text_side(gguf_path)


def fit(text, messages, window_, reserve=96, system=None):
    return window.fit(text.tokenizer, text.template, system=system, messages=messages, window=window_, reserve=reserve)


def counts(f):
    return [(p["kind"], p["count"]) for p in f.pieces]


def overflow_pieces(f, kinds=None):
    """What WindowError's data says of each of a fitted prompt's pieces (of `kinds`, or all): the
    record's kind, label and count."""
    return [{"kind": p["kind"], "label": p["label"], "count": p["count"]} for p in f.pieces
            if kinds is None or p["kind"] in kinds]


def check_pieces(text, f):
    """Pieces are contiguous, cover every token, and their texts make up the prompt."""
    assert f.ids == text.tokenizer.encode(f.text)
    pos = 0
    for p in f.pieces:
        assert p["start"] == pos and p["end"] >= p["start"] and p["count"] == p["end"] - p["start"]
        pos = p["end"]
    assert pos == len(f.ids)
    assert "".join(p["text"] for p in f.pieces) == f.text


def test_lesson_counts_whole_conversation(text):
    f = fit(text, LESSON, 1024, reserve=32)
    assert counts(f) == [("default_system", 21), ("user", 13), ("assistant", 18), ("user", 13), ("assistant", 23),
                         ("new", 10), ("header", 4)]
    assert len(f.ids) == 102 and f.dropped == [] and f.system is None
    assert [p["message_index"] for p in f.pieces] == [None, 0, 1, 2, 3, 4, None]
    assert [p["label"] for p in f.pieces] == ["system (template default)", "turn 1 · user", "turn 1 · assistant",
                                              "turn 2 · user", "turn 2 · assistant", "new message", "generation header"]
    assert f.pieces[0]["text"].startswith("<|im_start|>system\nYou are a helpful AI assistant named SmolLM")
    assert f.pieces[-1]["text"] == "<|im_start|>assistant\n"
    check_pieces(text, f)


def test_lesson_drop_one_turn(text):
    # 128-token window, 32 reserved: 102 > 96, so the oldest turn goes and 71 tokens remain.
    f = fit(text, LESSON, 128, reserve=32)
    assert len(f.ids) == 71
    assert counts(f) == [("default_system", 21), ("user", 13), ("assistant", 23), ("new", 10), ("header", 4)]
    assert [(d["message_index"], d["role"], d["count"]) for d in f.dropped] == [(0, "user", 13), (1, "assistant", 18)]
    assert f.dropped[0]["content"] == "Hi! My name is Priya."
    assert f.kept == [2, 3, 4]
    assert f.pieces[1]["label"] == "turn 2 · user"  # turns keep their numbers after a drop
    check_pieces(text, f)


def test_exactly_full_and_one_over(text):
    f = fit(text, LESSON, 102 + 32, reserve=32)
    assert len(f.ids) == 102 and f.dropped == []
    rec = preview(text.tokenizer, text.template, system=None, messages=LESSON, window=134, reserve=32)
    assert (rec.used, rec.free) == (102, 0)
    f = fit(text, LESSON, 102 + 31, reserve=32)
    assert len(f.ids) == 71 and len(f.dropped) == 2


def test_drop_everything_but_system_and_new(text):
    f = fit(text, LESSON, 35 + 32, reserve=32)  # 21 + 10 + 4
    assert len(f.ids) == 35 and [d["message_index"] for d in f.dropped] == [0, 1, 2, 3]
    assert [d["count"] for d in f.dropped] == [13, 18, 13, 23]
    assert counts(f) == [("default_system", 21), ("new", 10), ("header", 4)]


def test_nothing_left_to_drop(text):
    before = copy.deepcopy(LESSON)
    with pytest.raises(WindowError) as e:
        fit(text, LESSON, 34 + 32, reserve=32)
    msg = str(e.value)
    # The lesson's counts: the new message 10, the default system prompt 21, the generation header 4
    assert msg.startswith("the new message needs 10 tokens and the template's default system prompt 21: with the "
                          "4-token reply header, the system prompt and the new message alone need 35 tokens ")
    assert "(system (template default) 21, new message 10, generation header 4)" in msg
    assert "but a window of 66 tokens with 32 kept free for the reply leaves 34" in msg
    assert msg.endswith("Every earlier turn is dropped already: shorten the message or choose a larger window")
    assert LESSON == before  # the conversation is left untouched
    # the page draws the overflow from the data: each piece with the kind the record gives it
    assert e.value.data["pieces"] == overflow_pieces(fit(text, LESSON, 35 + 32, reserve=32))
    assert [p["kind"] for p in e.value.data["pieces"]] == ["default_system", "new", "header"]
    with pytest.raises(WindowError):
        fit(text, LESSON[-1:], 60, reserve=32)
    with pytest.raises(WindowError):  # the reserve alone fills the window
        fit(text, LESSON, 32, reserve=32)


def test_long_new_message(text):
    long = {"role": "user", "content": "Tell me about sleep. " * 200}
    with pytest.raises(WindowError, match="alone need"):
        fit(text, LESSON[:-1] + [long], 1024)
    f = fit(text, LESSON[:-1] + [long], 4096)
    assert f.dropped == [] and f.pieces[-2]["kind"] == "new" and f.pieces[-2]["count"] > 800


def test_a_message_too_long_for_the_window_names_every_count(text):
    """The error a learner sees: the message's tokens, the system prompt's, the reply reserve and the window, each
    as the pieces of the same conversation count them in a window large enough to hold it."""
    msgs = LESSON[:-1] + [{"role": "user", "content": "Tell me about sleep. " * 60}]
    whole = fit(text, msgs, 4096, system="Be brief.")
    counts = {p["kind"]: p["count"] for p in whole.pieces if p["kind"] in ("system", "new", "header")}
    total = sum(counts.values())
    assert total > 160
    before = copy.deepcopy(msgs)
    with pytest.raises(WindowError) as e:
        fit(text, msgs, 256, system="Be brief.")
    assert str(e.value).startswith(
        f"the new message needs {counts['new']} tokens and the system prompt {counts['system']}: with the "
        f"{counts['header']}-token reply header, the system prompt and the new message alone need {total} tokens ")
    assert "but a window of 256 tokens with 96 kept free for the reply leaves 160." in str(e.value)
    assert e.value.data["pieces"] == overflow_pieces(whole, ("system", "new", "header"))
    assert msgs == before


def test_too_long_without_any_system_prompt():
    msgs = [{"role": "user", "content": "a long message"}]
    with pytest.raises(WindowError) as e:
        window.fit(FakeTokenizer(), BosOnlyTemplate(), system=None, messages=msgs, window=20, reserve=5)
    new, header = len("<s>[user:a long message]"), len("[A:")  # one token a character; the BOS goes with the message
    assert str(e.value).startswith(f"the new message needs {new} tokens: with the {header}-token reply header, the "
                                   f"prompt would alone need {new + header} tokens (new message {new}, generation "
                                   f"header {header})")
    fitted = window.fit(FakeTokenizer(), BosOnlyTemplate(), system=None, messages=msgs, window=100, reserve=5)
    assert e.value.data["pieces"] == overflow_pieces(fitted)
    assert [p["kind"] for p in e.value.data["pieces"]] == ["new", "header"]


def test_long_turn_in_the_middle(text):
    # The oldest turns go first even when a later one is the long one.
    msgs = LESSON[:2] + [{"role": "user", "content": "Say a lot."},
                         {"role": "assistant", "content": "Words and more words. " * 60}] + LESSON[2:]
    whole = fit(text, msgs, 4096)
    long_count = whole.pieces[4]["count"]
    assert long_count > 200
    f = fit(text, msgs, len(whole.ids) + 96 - 1)
    assert [d["message_index"] for d in f.dropped] == [0, 1]
    f = fit(text, msgs, len(whole.ids) + 96 - 32)
    assert [d["message_index"] for d in f.dropped] == [0, 1, 2, 3]
    assert [p["message_index"] for p in f.pieces] == [None, 4, 5, 6, None]


def test_explicit_system_prompt(text):
    f = fit(text, LESSON, 1024, system="You are a pirate.")
    assert f.pieces[0]["kind"] == "system" and f.pieces[0]["message_index"] is None
    assert f.pieces[0]["text"] == "<|im_start|>system\nYou are a pirate.<|im_end|>\n"
    assert f.system == "You are a pirate." and "SmolLM" not in f.text
    # A leading system message is the system prompt; an explicit one replaces it.
    msgs = [{"role": "system", "content": "Be kind."}] + LESSON
    f = fit(text, msgs, 1024)
    assert f.pieces[0]["kind"] == "system" and f.pieces[0]["message_index"] == 0 and f.system == "Be kind."
    assert [p["message_index"] for p in f.pieces[1:]] == [1, 2, 3, 4, 5, None]
    f = fit(text, msgs, 1024, system="Be brief.")
    assert f.system == "Be brief." and "Be kind." not in f.text
    # An empty custom system prompt is a system message too, not the template's default.
    f = fit(text, LESSON, 1024, system="")
    assert f.pieces[0]["kind"] == "system" and "SmolLM" not in f.text


def test_system_is_kept_when_turns_drop(text):
    msgs = [{"role": "system", "content": "Be kind."}] + LESSON
    whole = fit(text, msgs, 4096)
    f = fit(text, msgs, len(whole.ids) + 96 - 1)
    assert f.pieces[0]["kind"] == "system" and [d["message_index"] for d in f.dropped] == [1, 2]


def test_unpaired_leading_assistant_goes_with_first_turn(text):
    msgs = [{"role": "assistant", "content": "Welcome! Ask me anything."}] + LESSON
    whole = fit(text, msgs, 4096)
    assert [p["label"] for p in whole.pieces[1:4]] == ["turn 1 · assistant", "turn 1 · user", "turn 1 · assistant"]
    f = fit(text, msgs, len(whole.ids) + 96 - 1)
    assert [d["message_index"] for d in f.dropped] == [0, 1, 2]


def test_fit_equals_dropping_one_turn_at_a_time(text):
    """The search over how many turns to keep gives what the lesson's loop gives."""
    rng = random.Random(7)
    words = "sleep name Priya tip bed night tea walk book dream light calm".split()
    msgs = []
    for i in range(12):
        msgs.append({"role": "user", "content": " ".join(rng.choices(words, k=rng.randint(1, 12)))})
        msgs.append({"role": "assistant", "content": " ".join(rng.choices(words, k=rng.randint(1, 40)))})
    msgs.append({"role": "user", "content": "What is my name?"})
    tok, tpl = text.tokenizer, text.template
    for w in [40, 60, 100, 150, 200, 333, 500, 800]:
        reserve = 16
        expected = None
        for start in range(0, len(msgs), 2):  # the lesson's loop: drop the oldest turn until it fits
            rendered = tpl.render(msgs[start:], add_generation_prompt=True)
            if len(tok.encode(rendered)) <= w - reserve:
                expected = start
                break
        if expected is None or len(tok.encode(tpl.render(msgs[-1:], add_generation_prompt=True))) > w - reserve:
            with pytest.raises(WindowError):
                fit(text, msgs, w, reserve)
            continue
        f = fit(text, msgs, w, reserve)
        assert [d["message_index"] for d in f.dropped] == list(range(expected)), w
        assert f.text == tpl.render(msgs[expected:], add_generation_prompt=True)
        check_pieces(text, f)


def test_bad_messages(text):
    with pytest.raises(ChatlensError, match="new user message"):
        fit(text, LESSON[:-1], 1024)
    with pytest.raises(ChatlensError):
        fit(text, [], 1024)
    with pytest.raises(ChatlensError, match="role and content"):
        fit(text, [{"role": "user"}], 1024)


class FakeTokenizer:
    """One token a character: enough to check how pieces follow the template's text."""

    def encode_with_offsets(self, text):
        return [ord(c) for c in text], [(i, i + 1) for i in range(len(text))]

    def encode(self, text):
        return self.encode_with_offsets(text)[0]

    def token_text(self, i):
        return chr(i)


class BosTemplate:
    """Writes a BOS before everything and a default system prompt, like many templates."""

    def render(self, messages, add_generation_prompt=False):
        out = "<s>"
        if messages and messages[0]["role"] != "system":
            out += "[SYS default]"
        out += "".join(f"[{m['role']}:{m['content']}]" for m in messages)
        return out + ("[assistant:" if add_generation_prompt else "")


class BosOnlyTemplate(BosTemplate):
    def render(self, messages, add_generation_prompt=False):
        return "<s>" + "".join(f"[{m['role']}:{m['content']}]" for m in messages) + ("[A:" if add_generation_prompt else "")


class ReversedTemplate:
    """Renders the newest message first: prefixes are not prefixes."""

    def render(self, messages, add_generation_prompt=False):
        return "".join(f"[{m['role']}:{m['content']}]" for m in reversed(messages)) + ("[A:" if add_generation_prompt else "")


def test_any_template_default_system_and_bos():
    msgs = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}, {"role": "user", "content": "ok"}]
    f = window.fit(FakeTokenizer(), BosTemplate(), system=None, messages=msgs, window=100, reserve=10)
    assert [(p["kind"], p["text"]) for p in f.pieces] == [
        ("default_system", "<s>[SYS default]"), ("user", "[user:hi]"), ("assistant", "[assistant:yo]"),
        ("new", "[user:ok]"), ("header", "[assistant:")]
    f = window.fit(FakeTokenizer(), BosOnlyTemplate(), system=None, messages=msgs, window=100, reserve=10)
    assert [(p["kind"], p["text"]) for p in f.pieces] == [  # a BOS is no default system prompt
        ("user", "<s>[user:hi]"), ("assistant", "[assistant:yo]"), ("new", "[user:ok]"), ("header", "[A:")]
    f = window.fit(FakeTokenizer(), BosTemplate(), system=None, messages=msgs, window=len("<s>[SYS default][user:ok][assistant:") + 10, reserve=10)
    assert [d["count"] for d in f.dropped] == [len("[user:hi]"), len("[assistant:yo]")]


def test_any_template_falls_back_to_one_piece():
    msgs = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}, {"role": "user", "content": "ok"}]
    f = window.fit(FakeTokenizer(), ReversedTemplate(), system=None, messages=msgs, window=100, reserve=10)
    assert len(f.pieces) == 1 and f.pieces[0]["kind"] == "prompt" and f.pieces[0]["count"] == len(f.text)
    f = window.fit(FakeTokenizer(), ReversedTemplate(), system=None, messages=msgs, window=len("[user:ok][A:") + 10, reserve=10)
    assert [d["count"] for d in f.dropped] == [2, 2]  # counted on the message text alone
    # the overflow of a system prompt and a new message such a template cannot tell apart: one piece, the prompt
    alone = window.fit(FakeTokenizer(), ReversedTemplate(), system="S", messages=msgs[-1:], window=100, reserve=10)
    with pytest.raises(WindowError) as e:
        window.fit(FakeTokenizer(), ReversedTemplate(), system="S", messages=msgs, window=len(alone.text) + 9, reserve=10)
    assert e.value.data["pieces"] == overflow_pieces(alone) and e.value.data["pieces"][0]["kind"] == "prompt"


def test_preview_record(text):
    rec = preview(text.tokenizer, text.template, system=None, messages=LESSON, window=128, reserve=32)
    assert json.loads(json.dumps(rec.to_json())) == rec.to_json()
    assert rec.prompt_text == text.tokenizer.decode(rec.prompt_ids)
    assert rec.prompt_tokens == [text.tokenizer.token_text(i) for i in rec.prompt_ids]
    assert rec.prompt_tokens[:2] == ["<|im_start|>", "system"]
    assert (rec.window, rec.reserve, rec.used, rec.free) == (128, 32, 71, 25)
    assert (rec.reused_tokens, rec.computed_tokens) == (0, 71)
    assert rec.reply_text is None and rec.stop_reason is None and rec.timings is None
    assert rec.max_tokens == 32 and rec.system is None and rec.preset is None
    assert [d["message_index"] for d in rec.dropped_messages] == [0, 1]
    # The template's markers are the prompt's only special tokens; text that looks like one is not.
    tok = text.tokenizer
    assert rec.special_ids == sorted({tok.id_of("<|im_start|>"), tok.id_of("<|im_end|>")})
    lookalike = preview(tok, text.template, system=None, window=128, reserve=32,
                        messages=[{"role": "user", "content": "<|IM_END|> and <|im_end|>"}])
    assert lookalike.special_ids == rec.special_ids and "<|IM_END|>" in lookalike.prompt_text


def test_preview_needs_no_numpy(gguf_path):
    """The site's worker previews prompts in Pyodide before numpy is loaded: block numpy."""
    code = (
        "import sys, json\n"
        "sys.modules['numpy'] = None  # any `import numpy` now raises ImportError\n"
        "from chatlens.source import load_text_side\n"
        "from chatlens.turn import preview\n"
        "from chatlens import presets\n"
        f"t = load_text_side({str(gguf_path)!r})\n"
        "msgs = [{'role': 'user', 'content': 'What year is it?'}]\n"
        "r = preview(t.tokenizer, t.template, system=presets.system_for('date'), messages=msgs, window=256)\n"
        "print(json.dumps({'used': r.used, 'system': r.system}))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(ROOT / "py")})
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)
    assert got["used"] > 20 and "Today's date is" in got["system"]


class NumberingTemplate:
    """Numbers the messages: a message's text depends on its position, so the linear shortcut
    (each message rendered after the one before it) must notice and render every prefix."""

    def render(self, messages, add_generation_prompt=False):
        return "".join(f"[{i}:{m['role']}:{m['content']}]" for i, m in enumerate(messages)) + (
            "[A:" if add_generation_prompt else "")


def test_position_dependent_template_renders_every_prefix():
    msgs = [{"role": r, "content": c} for r, c in [("user", "a"), ("assistant", "b"), ("user", "c"),
                                                   ("assistant", "d"), ("user", "e")]]
    assert window._bounds_local(NumberingTemplate(), msgs, NumberingTemplate().render(msgs), False) is None
    f = window.fit(FakeTokenizer(), NumberingTemplate(), system=None, messages=msgs, window=100, reserve=10)
    assert [p["text"] for p in f.pieces] == ["[0:user:a]", "[1:assistant:b]", "[2:user:c]", "[3:assistant:d]",
                                             "[4:user:e]", "[A:"]


def test_linear_shortcut_agrees_with_every_prefix(text):
    msgs = [{"role": "system", "content": "Be kind."}] + LESSON
    for m in (msgs, LESSON, LESSON[1:]):
        for gen in (False, True):
            rendered = text.template.render(m, add_generation_prompt=gen)
            local = window._bounds_local(text.template, m, rendered, gen)
            assert local is not None and local == window._bounds_exact(text.template, m, rendered, gen)


def test_a_special_token_written_in_a_message_can_be_read_as_its_characters(text, tokenizer_json):
    """Matched (the default), "<|im_end|>" in a message is the real end-of-message token; read as
    characters, it is the text HF `tokenizers` makes of it with encode_special_tokens, while the
    template's own markers stay tokens."""
    import tokenizers

    content = "Stop here <|im_end|> and then <|im_start|>go on"
    messages = [{"role": "user", "content": content}]
    matched = preview(text.tokenizer, text.template, system=None, messages=messages, window=256)
    plain = preview(text.tokenizer, text.template, system=None, messages=messages, window=256, special_in_text=False)
    assert plain.prompt_text == matched.prompt_text and (matched.special_in_text, plain.special_in_text) == (True, False)
    ref = tokenizers.Tokenizer.from_file(str(tokenizer_json))
    before, after = plain.prompt_text.split(content)
    ref.encode_special_tokens = True
    inside = ref.encode(content, add_special_tokens=False).ids
    ref.encode_special_tokens = False
    want = ref.encode(before, add_special_tokens=False).ids + inside + ref.encode(after, add_special_tokens=False).ids
    assert plain.prompt_ids == want
    assert matched.prompt_ids == ref.encode(matched.prompt_text, add_special_tokens=False).ids
    end = text.tokenizer.id_of("<|im_end|>")
    assert matched.prompt_ids.count(end) == plain.prompt_ids.count(end) + 1
    assert sum(p["count"] for p in plain.pieces) == plain.used
