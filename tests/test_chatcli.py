"""The chat commands, run as a user runs them: `python -m chatlens render|run|chat` with stdin pipes."""

import argparse
import datetime
import json

import pytest

from chatlens import presets
from chatlens.host import chatcli
from chatlens.record import TurnRecord
from chatlens.source import load_text_side

from conftest import run_cli as chatlens
from test_window import LESSON, REPLY_2

RECORD_KEYS = set(TurnRecord.__dataclass_fields__)


@pytest.fixture(scope="module")
def text(gguf_path):
    return load_text_side(gguf_path)


def test_render(gguf_path, text):
    out = chatlens("render", stdin=json.dumps(LESSON), model=gguf_path)
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)
    want = text.template.render(LESSON, add_generation_prompt=True)
    assert got == {"text": want, "ids": text.tokenizer.encode(want)}
    assert len(got["ids"]) == 102 and got["text"].endswith("<|im_start|>assistant\n")

    out = chatlens("render", "--no-generation-prompt", stdin=json.dumps(LESSON), model=gguf_path)
    got = json.loads(out.stdout)
    assert got["text"] == text.template.render(LESSON) and len(got["ids"]) == 98


def test_render_trims_nothing(gguf_path):
    long = [{"role": "user", "content": "Tell me about sleep. " * 2000}]
    got = json.loads(chatlens("render", stdin=json.dumps(long), model=gguf_path).stdout)
    assert len(got["ids"]) > 10000 and got["text"].count("Tell me about sleep.") == 2000


def test_render_bad_input(gguf_path):
    out = chatlens("render", stdin="not json", model=gguf_path)
    assert out.returncode == 1 and "not valid JSON" in out.stderr
    out = chatlens("render", stdin='{"role": "user"}', model=gguf_path)
    assert out.returncode == 1 and "array" in out.stderr


def test_run_lesson_window(gguf_path):
    """The lesson's conversation in a 128-token window with 32 kept for the reply."""
    out = chatlens("run", "--window", "128", "--max-tokens", "32", stdin=json.dumps({"messages": LESSON}),
                   model=gguf_path)
    assert out.returncode == 0, out.stderr
    rec = json.loads(out.stdout)
    assert set(rec) == RECORD_KEYS and rec["backend"] == "numpy"
    assert (rec["used"], rec["free"], rec["reserve"], rec["window"]) == (71, 25, 32, 128)
    assert [(d["message_index"], d["count"]) for d in rec["dropped_messages"]] == [(0, 13), (1, 18)]
    assert REPLY_2 in rec["prompt_text"]  # earlier assistant messages are history as given
    assert (rec["reused_tokens"], rec["computed_tokens"]) == (0, 71)
    assert rec["stop_reason"] in ("end_turn", "max_tokens") and 0 < len(rec["reply_ids"]) <= 32
    assert rec["system"] is None and rec["preset"] is None
    assert rec["timings"]["prefill_ms"] > 0


def test_run_system_and_preset(gguf_path):
    msgs = {"messages": [{"role": "system", "content": "Be kind."}, {"role": "user", "content": "Hi!"}]}
    out = chatlens("run", "--max-tokens", "2", "--window", "128", stdin=json.dumps(msgs), model=gguf_path)
    rec = json.loads(out.stdout)
    assert rec["system"] == "Be kind." and rec["pieces"][0]["message_index"] == 0
    assert rec["stop_reason"] == "max_tokens" and len(rec["reply_ids"]) == 2
    out = chatlens("run", "--max-tokens", "1", "--preset", "date", stdin=json.dumps(msgs), model=gguf_path)
    rec = json.loads(out.stdout)
    assert rec["preset"] == "date" and "Today's date is" in rec["system"] and "Be kind." not in rec["prompt_text"]
    assert presets.format_date(datetime.date.today()) in rec["system"]
    assert f"chatlens: system prompt: date: {rec['system']!r}" in out.stderr


@pytest.mark.parametrize("blank", ["", "   "])
def test_run_with_blank_system_text_uses_the_templates_default(gguf_path, blank):
    """The one rule (chatlens.presets.normalize): blank custom text is the template's default,
    as in the page; an empty system message sent inside the messages is still rendered."""
    msgs = {"messages": [{"role": "user", "content": "Hi!"}]}
    out = chatlens("run", "--max-tokens", "1", "--system", blank, stdin=json.dumps(msgs), model=gguf_path)
    assert out.returncode == 0, out.stderr
    rec = json.loads(out.stdout)
    default = chatlens("run", "--max-tokens", "1", stdin=json.dumps(msgs), model=gguf_path)
    assert rec["prompt_text"] == json.loads(default.stdout)["prompt_text"]
    assert rec["system"] is None and rec["preset"] == "none" and rec["pieces"][0]["kind"] == "default_system"
    assert "chatlens: system prompt: the template's default" in out.stderr
    explicit = {"messages": [{"role": "system", "content": ""}, {"role": "user", "content": "Hi!"}]}
    rec = json.loads(chatlens("run", "--max-tokens", "1", stdin=json.dumps(explicit), model=gguf_path).stdout)
    assert rec["prompt_text"].startswith("<|im_start|>system\n<|im_end|>") and rec["system"] == ""


def test_run_errors(gguf_path):
    out = chatlens("run", "--preset", "shakespeare", stdin='{"messages": []}', model=gguf_path)
    assert out.returncode == 1 and "unknown preset" in out.stderr
    msgs = {"messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"}]}
    out = chatlens("run", stdin=json.dumps(msgs), model=gguf_path)
    assert out.returncode == 1 and "new user message" in out.stderr
    out = chatlens("run", "--window", "100", "--max-tokens", "96", stdin=json.dumps({"messages": LESSON}),
                   model=gguf_path)
    assert out.returncode == 1 and "alone need 35 tokens" in out.stderr and out.stdout == ""


def test_chat_through_a_pipe(gguf_path):
    lines = ["Hi! My name is Priya.", "/show", "/window 300", "/preset pirate", "/preset shakespeare", "/bogus",
             "/window x", "/help", "/clear", "/show", "/exit", "/show", "Never sent."]
    out = chatlens("chat", "--max-tokens", "8", stdin="\n".join(lines) + "\n", model=gguf_path)
    assert out.returncode == 0, out.stderr
    stdout = out.stdout
    reply = stdout.split("\n", 1)[0]
    assert reply and "<|im_end|>" not in reply
    show = stdout.split("--- what the model read: 38 tokens ---\n", 1)[1]
    assert show.startswith("[system (template default) · 21 tokens]\n<|im_start|>system\nYou are a helpful")
    assert "[new message · 13 tokens]\n<|im_start|>user\nHi! My name is Priya.<|im_end|>" in show
    assert "[generation header · 4 tokens]\n<|im_start|>assistant" in show
    assert "window 1024 = 38 used + 8 reserved for the reply + 978 free" in show
    assert "reused from the cache: 0 tokens; computed: 38 tokens" in show and "dropped: nothing" in show
    assert f"stop: max_tokens): {reply!r}" in show  # what streamed is the reply recorded
    assert "(window: 300 tokens)" in stdout and "(system prompt: pirate: " in stdout
    assert "(new conversation)\n(no turn yet)\n" in stdout and "/quit, /exit" in stdout
    assert stdout.count("--- what the model read") == 1  # nothing after /exit
    assert "unknown preset" in out.stderr and "unknown command /bogus" in out.stderr
    assert "usage: /window N" in out.stderr


def test_chat_ends_at_end_of_input_and_reports_window_errors(gguf_path):
    lines = ["/window 9000", "/window 100", "/window 40", "Hi!", "/show", "Tell me about sleep. " * 20, "/show"]
    out = chatlens("chat", "--max-tokens", "4", "--system", "Be brief.", stdin="\n".join(lines) + "\n", model=gguf_path)
    assert out.returncode == 0, out.stderr
    assert "longer than the model's context of 8192" in out.stderr
    assert "alone need" in out.stderr  # the long message did not fit; the chat went on
    shows = out.stdout.split("--- what the model read")
    assert len(shows) == 3 and shows[1] == shows[2]  # the failed turn changed nothing
    assert "[system · " in shows[1] and "Be brief." in shows[1] and "window 40 = " in shows[1]


def test_record_command(gguf_path, tmp_path, monkeypatch):
    """`record` itself, shrunk to one short conversation (the full run takes minutes)."""
    monkeypatch.setattr(chatcli, "RECORD_PRESETS", ["date"])
    monkeypatch.setattr(chatcli, "RECORD_WINDOWS", [256])
    monkeypatch.setattr(chatcli, "LESSON_MESSAGES", ["What year is it?"])
    monkeypatch.setattr(chatcli, "RECORD_REPLY_LIMIT", 4)
    out = tmp_path / "recorded.json"
    assert chatcli.record(argparse.Namespace(model=str(gguf_path), out=str(out), backend="numpy")) == 0
    doc = json.loads(out.read_text(encoding="utf-8"))
    from chatlens.host import fetch

    assert doc["model"] == {"file": fetch.FILENAME, "sha256": fetch.SHA256, "source": f"PyPI {fetch.PACKAGE}"}
    assert doc["date"] == datetime.date.today().isoformat() and doc["reply_limit"] == 4
    (conv,) = doc["conversations"]
    assert (conv["preset"], conv["window"]) == ("date", 256)
    assert conv["system"] == presets.system_for("date") and len(conv["turns"]) == 1
    assert conv["turns"][0]["max_tokens"] == 4 and RECORD_KEYS <= set(conv["turns"][0])
