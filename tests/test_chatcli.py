"""The chat commands, run as a user runs them: `python -m chatlens render|run|chat` with stdin pipes.

A few tests run each command in a process of its own (run_cli: a new interpreter, real pipes);
the others run the same command line in pytest's process (cli_in_process), the model loaded once."""

import argparse
import datetime
import json
from pathlib import Path

import pytest

from chatlens import defaults, presets
from chatlens.host import chatcli
from chatlens.record import TurnRecord
from chatlens.source import load_text_side

from conftest import cli_in_process as chatlens, run_cli
from test_window import LESSON, REPLY_2

RECORD_KEYS = set(TurnRecord.__dataclass_fields__)


@pytest.fixture(scope="module")
def text(gguf_path):
    return load_text_side(gguf_path)


def test_render(gguf_path, text):
    out = run_cli("render", stdin=json.dumps(LESSON), model=gguf_path)
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)
    want = text.template.render(LESSON, add_generation_prompt=True)
    assert got == {"text": want, "ids": text.tokenizer.encode(want)}
    assert len(got["ids"]) == 102 and got["text"].endswith("<|im_start|>assistant\n")

    out = run_cli("render", "--no-generation-prompt", stdin=json.dumps(LESSON), model=gguf_path)
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
    out = run_cli("run", "--window", "128", "--max-tokens", "32", stdin=json.dumps({"messages": LESSON}),
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
    out = run_cli("chat", "--max-tokens", "8", stdin="\n".join(lines) + "\n", model=gguf_path)
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
    assert chatcli.record(argparse.Namespace(model=str(gguf_path), out=str(out), backend="numpy", base_model=None)) == 0
    doc = json.loads(out.read_text(encoding="utf-8"))
    from chatlens.host import fetch

    assert doc["model"] == {"file": fetch.FILENAME, "sha256": fetch.SHA256, "source": f"PyPI {fetch.PACKAGE}"}
    assert doc["date"] == datetime.date.today().isoformat() and doc["reply_limit"] == 4
    (conv,) = doc["conversations"]
    assert (conv["preset"], conv["window"]) == ("date", 256)
    assert conv["system"] == presets.system_for("date") and len(conv["turns"]) == 1
    assert conv["turns"][0]["max_tokens"] == 4 and RECORD_KEYS <= set(conv["turns"][0])


# -- render with a template, tools, documents, a continued message and the assistant mask, against transformers ---

TEMPLATES = Path(__file__).parent / "templates"
TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "The weather in a city",
                                           "parameters": {"type": "object", "required": ["city"],
                                                          "properties": {"city": {"type": "string"}}}}}]
DOCUMENTS = [{"title": "Paris", "text": "Paris is the capital of France."}]
CHAT = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi! My name is Priya."},
        {"role": "assistant", "content": "Hello, Priya!"}, {"role": "user", "content": "What is my name?"}]


@pytest.fixture(scope="module")
def hf_smol(gguf_path):
    """transformers' fast tokenizer over the GGUF's vocabulary, with the special tokens the GGUF names."""
    transformers = pytest.importorskip("transformers")
    tokenizers = pytest.importorskip("tokenizers")
    from chatlens.gguf import read_metadata
    from chatlens.host.export import tokenizer_json_from_gguf

    meta = read_metadata(gguf_path)
    tok = tokenizers.Tokenizer.from_str(json.dumps(tokenizer_json_from_gguf(meta)))
    return transformers.PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<|im_start|>",
                                                eos_token="<|im_end|>", unk_token="<|endoftext|>",
                                                pad_token="<|im_end|>")


def reference(hf, template, messages, **kwargs):
    hf.chat_template = template
    masked = kwargs.pop("return_assistant_tokens_mask", False)
    text = hf.apply_chat_template(messages, tokenize=False, **kwargs)
    if masked:
        out = hf.apply_chat_template(messages, tokenize=True, return_dict=True, return_assistant_tokens_mask=True,
                                     **kwargs)
        return {"text": text, "ids": list(out["input_ids"]), "assistant_mask": list(out["assistant_masks"])}
    return {"text": text, "ids": hf(text, add_special_tokens=False)["input_ids"]}


def render_json(gguf_path, *args, messages=CHAT):
    out = chatlens("render", *args, stdin=json.dumps(messages), model=gguf_path)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_render_a_template_file_with_its_assistant_mask(gguf_path, hf_smol):
    template = TEMPLATES / "qwen2.5-training.jinja"
    got = render_json(gguf_path, "--template", str(template), "--assistant-mask")
    want = reference(hf_smol, template.read_text(), CHAT, add_generation_prompt=True,
                     return_assistant_tokens_mask=True)
    assert got == want and 0 < sum(got["assistant_mask"]) < len(got["ids"])


def test_render_tools_and_documents(gguf_path, hf_smol, tmp_path):
    (tmp_path / "tools.json").write_text(json.dumps(TOOLS))
    (tmp_path / "documents.json").write_text(json.dumps(DOCUMENTS))
    template = TEMPLATES / "command-r7b-tool_use.jinja"
    got = render_json(gguf_path, "--template", str(template), "--tools", str(tmp_path / "tools.json"),
                      "--documents", str(tmp_path / "documents.json"))
    assert got == reference(hf_smol, template.read_text(), CHAT, tools=TOOLS, documents=DOCUMENTS,
                            add_generation_prompt=True)
    assert "get_weather" in got["text"] and "Paris is the capital of France." in got["text"]


def test_render_continues_the_final_message(gguf_path, hf_smol, text):
    messages = CHAT[:2] + [{"role": "assistant", "content": "Hello, Pri"}]
    got = render_json(gguf_path, "--continue-final-message", messages=messages)
    assert got == reference(hf_smol, text.template.source, messages, continue_final_message=True)
    assert got["text"].endswith("<|im_start|>assistant\nHello, Pri")


def test_render_the_models_template_marks_nothing(gguf_path, hf_smol, text):
    out = chatlens("render", "--assistant-mask", stdin=json.dumps(CHAT), model=gguf_path)
    assert json.loads(out.stdout) == reference(hf_smol, text.template.source, CHAT, add_generation_prompt=True,
                                               return_assistant_tokens_mask=True)
    assert "no {% generation %} blocks" in out.stderr


def test_render_errors(gguf_path, tmp_path):
    broken = tmp_path / "broken.jinja"
    broken.write_text("{% for m in messages %}\n{{ m.content }}\n{% if %}\n{% endfor %}")
    out = chatlens("render", "--template", str(broken), stdin=json.dumps(CHAT), model=gguf_path)
    assert out.returncode == 1 and out.stdout == ""
    assert out.stderr.startswith("chatlens: chat template syntax error (line 3): ") and "Traceback" not in out.stderr
    escape = tmp_path / "escape.jinja"
    escape.write_text("{{ messages.__class__.__mro__ }}")
    out = chatlens("render", "--template", str(escape), stdin=json.dumps(CHAT), model=gguf_path)
    assert out.returncode == 1 and "tried to reach '__class__' of a list, which the sandbox forbids" in out.stderr
    out = chatlens("render", "--continue-final-message", "--assistant-mask", stdin=json.dumps(CHAT), model=gguf_path)
    assert out.returncode == 1 and "cannot be combined" in out.stderr
    out = chatlens("render", "--tools", str(tmp_path / "missing.json"), stdin=json.dumps(CHAT), model=gguf_path)
    assert out.returncode == 1 and "--tools" in out.stderr and "cannot be read" in out.stderr
    (tmp_path / "tools.json").write_text('{"name": "get_weather"}')
    out = chatlens("render", "--tools", str(tmp_path / "tools.json"), stdin=json.dumps(CHAT), model=gguf_path)
    assert out.returncode == 1 and "tools must be a list of JSON schemas (dicts), not dict" in out.stderr


# -- bad input in the chat commands ----------------------------------------------------------------------------------


@pytest.mark.parametrize("blank", ["", "   ", "\n\t \u3000"])
def test_run_refuses_a_blank_new_message(gguf_path, blank):
    msgs = {"messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"},
                         {"role": "user", "content": blank}]}
    out = chatlens("run", stdin=json.dumps(msgs), model=gguf_path)
    assert out.returncode == 1 and out.stdout == ""
    assert out.stderr.strip() == "chatlens: the new user message is empty: there is nothing to send"


def test_chat_never_sends_whitespace(gguf_path):
    lines = ["   ", "\t", "\u3000\u2003", "Hi!", " ", "/show"]
    out = chatlens("chat", "--max-tokens", "2", stdin="\n".join(lines) + "\n", model=gguf_path)
    assert out.returncode == 0, out.stderr
    show = out.stdout.split("--- what the model read", 1)[1]
    assert show.count("[new message") == 1 and "[turn" not in show  # one message was sent: "Hi!"


def test_a_message_that_cannot_fit_says_every_count(gguf_path):
    long = "Tell me about sleep. " * 60
    out = chatlens("run", "--window", "256", "--system", "Be brief.",
                   stdin=json.dumps({"messages": [{"role": "user", "content": long}]}), model=gguf_path)
    assert out.returncode == 1 and out.stdout == ""
    message = out.stderr.strip().splitlines()[-1]
    assert message.startswith("chatlens: the new message needs ") and " and the system prompt " in message
    assert "but a window of 256 tokens with 96 kept free for the reply leaves 160." in message
    lines = ["Hi!", long, "/show"]
    out = chatlens("chat", "--max-tokens", "2", "--window", "64", stdin="\n".join(lines) + "\n", model=gguf_path)
    assert "chatlens: the new message needs " in out.stderr and "leaves 62." in out.stderr
    show = out.stdout.split("--- what the model read", 1)[1]
    assert "Hi!" in show and "sleep" not in show  # the turn before is what /show still shows


# -- settings and messages are refused before the weights load ------------------------------------------


def _refused_before_loading(monkeypatch, capsys, argv, stdin=""):
    """`python -m chatlens ARGV` in this process, with loading the model made a failure: the exit
    status and stderr of a command that must refuse its input first."""
    import io
    import sys

    from chatlens.host import cli

    def must_not_load(*a, **k):
        raise AssertionError("the model was loaded before the input was checked")

    monkeypatch.setattr(chatcli, "open_model", must_not_load)
    monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
    code = cli.main(argv)
    return code, capsys.readouterr().err


@pytest.mark.parametrize("command", ["chat", "run"])
@pytest.mark.parametrize("window", ["0", "96", "100000"])
def test_a_bad_window_is_refused_before_the_model_loads(gguf_path, text, monkeypatch, capsys, command, window):
    from chatlens.chat import check_window
    from chatlens.errors import WindowError

    with pytest.raises(WindowError) as rule:  # the chat's one rule, against the model's own context
        check_window(int(window), defaults.REPLY_LIMIT, text.config.n_ctx)
    stdin = json.dumps({"messages": [{"role": "user", "content": "Hi"}]})
    code, err = _refused_before_loading(monkeypatch, capsys, [command, "--window", window, "--model", str(gguf_path)], stdin)
    assert code == 1 and err == f"chatlens: {rule.value}\n"
    assert "loading the model" not in err


@pytest.mark.parametrize("role", ["bot", "assistant", "system"])
def test_run_names_the_role_it_refuses(gguf_path, monkeypatch, capsys, role):
    stdin = json.dumps({"messages": [{"role": "user", "content": "Hi"}, {"role": role, "content": "Hello"}]})
    code, err = _refused_before_loading(monkeypatch, capsys, ["run", "--model", str(gguf_path)], stdin)
    assert code == 1 and err == f"chatlens: the last message must be the new user message, not {role!r}\n"


def test_the_readmes_complete_example_feeds_the_pages_plain_text():
    """The README's `... | python3 -m chatlens complete` line pipes exactly the text plain-text
    mode starts from (no newline after it), so its result is the page's."""
    import re
    import subprocess

    root = Path(__file__).resolve().parent.parent
    line = next(l for l in (root / "README.md").read_text().splitlines() if "-m chatlens complete" in l and "|" in l)
    producer = line.split(" | python3 -m chatlens complete", 1)[0]
    fed = subprocess.run(["bash", "-c", producer], capture_output=True, text=True, check=True).stdout
    page = re.search(r'export const LESSON_TEXT = "([^"]*)";', (root / "site/js/views/lessonfigures.mjs").read_text())[1]
    assert fed == page


# -- run, branch and inspect read the page's request on stdin (issue 43, item 7) ------------------------------------


def test_run_honours_every_field_of_the_pages_turn(gguf_path):
    """Each field the page's Turn takes, given on stdin, is read as the page's worker reads it: the
    record before the reply is the worker's preview of the same request, and the reply keeps its
    limit and candidates."""
    from chatlens import protocol, worker

    request = {"messages": [*LESSON[:4], {"role": "user", "content": "Say <|im_end|> once."}], "window": 128,
               "reserve": 40, "max_tokens": 2, "preset": "custom", "custom": "Be kind.", "special_in_text": False,
               "top_k": 3}
    out = chatlens("run", stdin=json.dumps(request), model=gguf_path)
    assert out.returncode == 0, out.stderr
    rec = json.loads(out.stdout)
    page = worker._Worker()
    page.load(protocol.Load(path=str(gguf_path)))
    want = page.preview(protocol.parse(protocol.Turn, request)).to_json()
    for key in ("prompt_ids", "pieces", "dropped_messages", "window", "reserve", "max_tokens", "used", "free", "system",
                "preset", "special_in_text"):
        assert rec[key] == want[key], key
    assert (rec["window"], rec["reserve"], rec["max_tokens"], rec["system"]) == (128, 40, 2, "Be kind.")
    new = next(p for p in rec["pieces"] if p["kind"] == "new")
    assert rec["special_in_text"] is False  # the message's "<|im_end|>" read as characters: one end of turn, its own
    assert rec["prompt_ids"][new["start"]:new["end"]].count(2) == 1
    assert len(rec["reply_ids"]) == 2 and [len(row) for row in rec["top_k"]] == [3, 3]
    assert "chatlens: system prompt: 'Be kind.'" in out.stderr


def test_a_preset_on_stdin_is_read_as_the_flag_reads_it(gguf_path):
    """The issue's case: `{"preset": "pirate", ...} | chatlens inspect` read the template's default
    system prompt without a word; the field now means what --preset means."""
    messages = [{"role": "user", "content": "Who are you?"}]
    by_flag = chatlens("run", "--preset", "pirate", "--max-tokens", "1", stdin=json.dumps({"messages": messages}),
                       model=gguf_path)
    by_field = chatlens("run", stdin=json.dumps({"messages": messages, "preset": "pirate", "max_tokens": 1,
                                                 "reserve": 1}), model=gguf_path)
    assert by_field.returncode == 0, by_field.stderr
    assert json.loads(by_field.stdout)["prompt_ids"] == json.loads(by_flag.stdout)["prompt_ids"]
    assert json.loads(by_field.stdout)["preset"] == "pirate" and "system prompt: pirate:" in by_field.stderr
    inspected = chatlens("inspect", stdin=json.dumps({"messages": messages, "preset": "pirate", "reply_ids": [],
                                                      "step": 0, "top_k": 2}), model=gguf_path)
    assert inspected.returncode == 0, inspected.stderr
    got = json.loads(inspected.stdout)
    assert got["by_piece"][0]["kind"] == "system" and "pirate" in inspected.stderr
    assert got["prompt_ids"] == json.loads(by_flag.stdout)["prompt_ids"] and len(got["lens"][0]) == 2


def test_branch_takes_its_step_and_id_on_stdin_as_the_page_sends_them(gguf_path):
    request = {"messages": [{"role": "user", "content": "What is the capital of France?"}], "reply_ids": [504, 3575, 314],
               "max_tokens": 3}
    by_flags = chatlens("branch", "--step", "1", "--id", "3681", stdin=json.dumps(request), model=gguf_path)
    by_fields = chatlens("branch", stdin=json.dumps({**request, "step": 1, "id": 3681}), model=gguf_path)
    assert by_fields.returncode == 0, by_fields.stderr
    got = json.loads(by_fields.stdout)
    assert got["reply_ids"] == json.loads(by_flags.stdout)["reply_ids"] and got["reply_ids"][:2] == [504, 3681]
    agree = chatlens("branch", "--step", "1", stdin=json.dumps({**request, "step": 1, "id": 3681}), model=gguf_path)
    assert json.loads(agree.stdout)["reply_ids"] == got["reply_ids"]  # a flag that says the same is no conflict


@pytest.mark.parametrize("argv, stdin, said", [
    (["run"], {"reply_ids": []},
     'stdin\'s "reply_ids" is not a field run reads: it reads messages, window, reserve, max_tokens, preset, custom, '
     "system, special_in_text, top_k (the page's Turn request)"),
    (["inspect"], {"prest": "pirate", "id": 3},
     "stdin's \"prest\", \"id\" are not fields inspect reads: it reads messages, window, reserve, max_tokens, preset, "
     "custom, system, special_in_text, reply_ids, step, model, layout, top_k (the page's Inspect request)"),
    (["run", "--preset", "brief"], {"preset": "pirate"},
     '--preset "brief" and stdin\'s "preset": "pirate" disagree: give the system prompt in one of them'),
    (["inspect", "--system", "Be kind."], {"preset": "date"},
     '--system "Be kind." and stdin\'s "preset": "date" disagree: give the system prompt in one of them'),
    (["run", "--window", "128"], {"window": 256}, '--window 128 and stdin\'s "window": 256 disagree: give one of them'),
    (["branch", "--step", "1", "--id", "5"], {"id": 6}, '--id 5 and stdin\'s "id": 6 disagree: give one of them'),
    (["inspect", "--layout", "plain"], {"layout": "template"},
     '--layout "plain" and stdin\'s "layout": "template" disagree: give one of them'),
    (["inspect", "--base-model", "BASE"], {"model": "instruct"},
     '--base-model and stdin\'s "model": "instruct" disagree: give one of them'),
    (["inspect"], {"model": "base"}, 'stdin\'s "model": "base" needs the base model\'s files: give --base-model PATH'),
    (["inspect"], {"model": "other"}, 'stdin\'s "model" must be one of instruct, base, not "other"'),
    (["inspect"], {"layout": "chat"}, 'stdin\'s "layout" must be one of plain, template, not "chat"'),
    (["branch", "--id", "5"], {}, 'branch needs --step or stdin\'s "step"'),
    (["run"], {"preset": "shakespeare"}, "unknown preset 'shakespeare': choose one of none, pirate, brief, date, custom"),
    (["run"], {"window": "wide"}, "stdin's window must be a whole number, not 'wide'"),
    (["run"], {"messages": None}, 'stdin\'s "messages" must be a JSON array of message objects'),
])
def test_a_field_the_request_does_not_take_or_a_flag_that_disagrees_is_a_sentence(gguf_path, monkeypatch, capsys,
                                                                                   argv, stdin, said):
    request = {"messages": [{"role": "user", "content": "Hi"}], **stdin}
    code, err = _refused_before_loading(monkeypatch, capsys, [*argv, "--model", str(gguf_path)], json.dumps(request))
    assert code == 1 and err == f"chatlens: {said}\n"


def test_the_docs_name_the_copy_the_page_computes_with_and_the_flag_that_gives_it(monkeypatch):
    """Served locally the page computes with the bf16 folder `serve` exports from the GGUF, while the
    command line reads the GGUF itself (issue 43, item 6): docs/fidelity.md and docs/command-line.md
    name that folder where `serve` keeps it, as the `--model` that gives the command line the same copy."""
    from chatlens.host import fetch, mirror

    monkeypatch.delenv("CHATLENS_HOME", raising=False)
    folder = mirror.export_folder()
    assert folder.parent.parent == fetch.home() == Path.home() / ".cache" / "chatlens"
    flag = f"--model ~/.cache/chatlens/hf/{folder.name}"
    docs = Path(__file__).resolve().parent.parent / "docs"
    for name in ("fidelity.md", "command-line.md"):
        text = " ".join((docs / name).read_text(encoding="utf-8").split())
        assert flag in text, name
    fidelity = (docs / "fidelity.md").read_text(encoding="utf-8")
    assert f"$CHATLENS_HOME/hf/{folder.name}/" in fidelity and f"$CHATLENS_HOME/{fetch.FILENAME}" in fidelity
