"""The chat commands: `render`, `run`, `chat` and `record` (dispatched by chatlens.host.cli).

- render: a JSON array of messages on stdin -> {"text": ..., "ids": [...]}: the template's
  output and its token ids, nothing trimmed; --template, --tools, --documents,
  --continue-final-message and --assistant-mask as in transformers' apply_chat_template.
- run: {"messages": [...]} on stdin (the last is the new user message; earlier ones are the
  history as given) -> the turn record (JSON) on stdout.
- chat: an interactive chat that streams replies; works with stdin as a pipe.
- record: the lesson's five-message conversation for each preset and window -> site/recorded.json,
  and the comparison of the lesson's prompts -> site/recorded-compare.json: the instruct half from
  the model recorded, the base half only from the real base model (--base-model; without it the
  base's cells say so, in the lesson's own words).
"""

import datetime
import json
import sys
from pathlib import Path

from .. import defaults, presets
from ..errors import ChatlensError
from .fetch import resolve_model
from .models import open_model

LESSON_MESSAGES = [
    "Hi! My name is Priya.",
    "Give me one tip for sleeping better.",
    "What is my name?",
    "Who are you?",
    "What year is it?",
]
RECORD_PRESETS = list(presets.PRESETS)
RECORD_WINDOWS = list(defaults.WINDOWS)
RECORD_REPLY_LIMIT = defaults.REPLY_LIMIT


def _read_json_stdin():
    data = sys.stdin.read()
    try:
        return json.loads(data)
    except ValueError as e:
        raise ChatlensError(f"stdin is not valid JSON: {e}") from None


def _write_json(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def _messages(value, what):
    if not isinstance(value, list) or not all(isinstance(m, dict) for m in value):
        raise ChatlensError(f"{what} must be a JSON array of message objects")
    return value


def _system_args(args):
    """(preset, custom system text) from --preset / --system, by presets.normalize: unknown
    names fail before the model loads, and blank --system text is the template's default."""
    return presets.normalize(getattr(args, "preset", None), getattr(args, "system", None))


# -- render ------------------------------------------------------------------------------------
def _read_file(path, what) -> str:
    try:
        return Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise ChatlensError(f"{what} {path}: cannot be read ({e.strerror if isinstance(e, OSError) else e})") from None


def _read_json_file(path, what):
    try:
        return json.loads(_read_file(path, what))
    except ValueError as e:
        raise ChatlensError(f"{what} {path} is not valid JSON: {e}") from None


def render(args) -> int:
    """The template's text for the messages on stdin, its ids, and with --assistant-mask which ids the template
    marks as the assistant's: what transformers' apply_chat_template gives for the same arguments."""
    from ..source import load_text_side
    from ..template import ChatTemplate, assistant_mask, has_generation_tag

    messages = _messages(_read_json_stdin(), "stdin")
    tools = _read_json_file(args.tools, "--tools") if args.tools else None
    documents = _read_json_file(args.documents, "--documents") if args.documents else None
    source = _read_file(args.template, "--template") if args.template else None
    if args.assistant_mask and args.continue_final_message:
        raise ChatlensError("--continue-final-message and --assistant-mask cannot be combined (transformers: "
                            "continue_final_message is not compatible with return_assistant_tokens_mask)")
    text_side = load_text_side(resolve_model(args.model))
    template = text_side.template
    if source is not None:  # the model's special tokens stay the template's variables
        template = ChatTemplate(source, special_tokens=template.special_tokens, clock=template.clock)
    tok = text_side.tokenizer
    options = {"add_generation_prompt": not (args.no_generation_prompt or args.continue_final_message),
               "tools": tools, "documents": documents}
    if not args.assistant_mask:
        text = template.render(messages, continue_final_message=args.continue_final_message, **options)
        _write_json({"text": text, "ids": tok.encode(text)})
        return 0
    rendered = template.render_with_spans(messages, **options)
    if not has_generation_tag(template.select(None, tools)):
        print("chatlens: this template has no {% generation %} blocks, so no token is marked as the assistant's",
              file=sys.stderr)
    ids, offsets = tok.encode_with_offsets(rendered.text)
    _write_json({"text": rendered.text, "ids": ids, "assistant_mask": assistant_mask(offsets, rendered.generation_spans)})
    return 0


# -- run, branch and inspect: the page's requests on stdin ------------------------------------------
# Each of the three reads the request the page sends for the same job (chatlens.protocol: run a
# Turn, branch a Branch, inspect an Inspect): stdin's JSON holds any of its fields, and each flag
# stands for one of them. A flag and a field that disagree are refused in a sentence naming both;
# a field the request does not take is refused too. One function reads it, for any command that
# takes one of these requests (request_on_stdin).
FIELD_FLAGS = {"window": "--window", "max_tokens": "--max-tokens", "top_k": "--top-k", "step": "--step", "id": "--id",
               "layout": "--layout", "pieces": "--piece", "tokens": "--tokens", "knocked": "--knocked"}
SYSTEM_FLAGS = {"preset": "--preset", "system": "--system"}  # the system prompt's flags; stdin: preset, custom, system


def _system_of(fields) -> tuple:
    """(preset, custom text) of a request's preset, custom and system fields, as the page's worker
    reads them (chatlens.worker: custom text, else system text; presets.normalize)."""
    custom = fields.get("custom")
    return presets.normalize(fields.get("preset"), custom if custom is not None else fields.get("system"))


def _flag(flag, value) -> str:
    return f"{flag} {json.dumps(value) if isinstance(value, str) else value}"


def _field(name, value) -> str:
    return f'stdin\'s "{name}": {json.dumps(value)}'


def request_on_stdin(args, request_type):
    """The page's request for this command (chatlens.protocol.Turn, Branch or Inspect) from stdin's
    JSON, an object of the request's fields (or an array of messages, as run has always read),
    and the flags, each of which stands for one field (FIELD_FLAGS, SYSTEM_FLAGS; --base-model for
    "model": "base"; --max-tokens is also the reserve where stdin gives none). Everything is
    checked before the weights load: an unknown field, a flag and a field that disagree, a bad
    preset, the messages, the window and the reply limit. Raises ChatlensError."""
    from dataclasses import MISSING, fields

    from ..chat import check_reply_limit, check_window
    from ..compare import LAYOUTS
    from ..protocol import MODELS, parse
    from ..source import load_config
    from ..window import check_messages

    command, takes = args.command, [f.name for f in fields(request_type)]
    data = _read_json_stdin()
    if isinstance(data, list):
        data = {"messages": data}
    if not isinstance(data, dict):
        raise ChatlensError(f"stdin must be a JSON object of {command}'s fields ({', '.join(takes)}), "
                            "or an array of messages")
    unknown = [json.dumps(k) for k in data if k not in takes]
    if unknown:
        what = f"{unknown[0]} is not a field" if len(unknown) == 1 else f"{', '.join(unknown)} are not fields"
        raise ChatlensError(f"stdin's {what} {command} reads: it reads {', '.join(takes)} "
                            f"(the page's {request_type.__name__} request)")
    data = dict(data)
    for name, flag in FIELD_FLAGS.items():
        value = getattr(args, name, None)
        if value is None or name not in takes:
            continue
        if data.get(name) is not None and data[name] != value:
            raise ChatlensError(f"{_flag(flag, value)} and {_field(name, data[name])} disagree: give one of them")
        data[name] = value
    if getattr(args, "max_tokens", None) is not None and data.get("reserve") is None:
        data["reserve"] = args.max_tokens  # the flag is the reply limit and the reserve kept for it
    flags = {name: getattr(args, name) for name in SYSTEM_FLAGS if getattr(args, name, None) is not None}
    said = {name: data[name] for name in ("preset", "custom", "system") if data.get(name) is not None}
    if flags and said and _system_of(flags) != _system_of(said):
        raise ChatlensError(" and ".join([*(_flag(SYSTEM_FLAGS[k], v) for k, v in flags.items()),
                                          *(_field(k, v) for k, v in said.items())])
                            + " disagree: give the system prompt in one of them")
    if flags and not said:
        data.update(flags)
    _system_of(data)  # an unknown preset is refused first, before the messages are read
    if "model" in takes:  # inspect: the base model's weights are a path, which only the flag gives
        base = getattr(args, "base_model", None) is not None
        asked = data.get("model")
        if asked is not None and asked not in MODELS:
            raise ChatlensError(f"stdin's \"model\" must be one of {', '.join(MODELS)}, not {json.dumps(asked)}")
        if asked == "base" and not base:
            raise ChatlensError('stdin\'s "model": "base" needs the base model\'s files: give --base-model PATH')
        if asked == "instruct" and base:
            raise ChatlensError('--base-model and stdin\'s "model": "instruct" disagree: give one of them')
        if base:
            data["model"] = "base"
    if "messages" not in data:
        raise ChatlensError('stdin has no "messages": the conversation, the new user message last')
    if "replies" in takes:  # a conversation's needs: it may end with its last reply
        check_messages(_messages(data["messages"], 'stdin\'s "messages"') + [{"role": "user", "content": ""}])
    else:
        check_messages(_messages(data["messages"], 'stdin\'s "messages"'))
    for f in fields(request_type):
        if f.default is MISSING and f.default_factory is MISSING and f.name not in data:
            raise ChatlensError(f"{command} needs {FIELD_FLAGS.get(f.name, f.name)} or stdin's \"{f.name}\"")
    try:
        request = parse(request_type, data)
    except ChatlensError as e:
        raise ChatlensError(f"stdin's {e}") from None
    reply_ids = getattr(request, "reply_ids", None)
    if reply_ids is not None and not all(isinstance(i, int) and not isinstance(i, bool) for i in reply_ids):
        raise ChatlensError('stdin\'s "reply_ids" must be a JSON array of token ids')
    if getattr(request, "layout", "template") not in LAYOUTS:
        raise ChatlensError(f"stdin's \"layout\" must be one of {', '.join(LAYOUTS)}, not {json.dumps(request.layout)}")
    check_reply_limit(_reply_limit(request))
    check_window(request.window, request.reserve, load_config(resolve_model(args.model)).n_ctx)
    return request


def _reply_limit(request) -> int:
    """A request's reply limit: max_tokens, else the reserve (the page's rule)."""
    return request.reserve if request.max_tokens is None else request.max_tokens


def read_turn(model, request):
    """What `model` reads of a request (its template layout): the turn record before the reply, as
    the page's preview gives it (chatlens.worker's record_of, with no cache yet). Says on stderr
    which system prompt it reads."""
    from ..chat import preview

    preset, custom = _system_of(vars(request))
    print(f"chatlens: system prompt: {presets.describe(preset, custom)}", file=sys.stderr, flush=True)
    return preview(model.tokenizer, model.template, system=presets.system_for(preset, custom),
                   messages=request.messages, window=request.window, reserve=request.reserve, preset=preset,
                   max_tokens=_reply_limit(request), special_in_text=request.special_in_text,
                   context=model.config.n_ctx)


def _replied(model, cache, record) -> list:
    """The turn's reply computed over `cache` (chatlens.jobs.ChatJob): its ids; the cache then holds it."""
    from ..jobs import ChatJob
    from ..pull import greedy

    return greedy(ChatJob(model, cache, record)).reply_ids


def run(args) -> int:
    """The turn the request on stdin asks for: its record, with the reply (a chatlens.record.TurnRecord)."""
    from ..cache import PromptCache
    from ..jobs import ChatJob
    from ..protocol import Turn
    from ..pull import greedy

    request = request_on_stdin(args, Turn)
    if not request.messages[-1]["content"].strip():
        raise ChatlensError("the new user message is empty: there is nothing to send")
    top_k = _top_k(request.top_k or 0)
    model = open_model(args.model, args.backend)
    record = read_turn(model, request)
    cache = PromptCache(model.backend(n_ctx=record.window))
    _write_json(greedy(ChatJob(model, cache, record, top_k=top_k)).to_json())
    return 0


def branch(args) -> int:
    """A Branch on stdin (run's fields, optional "reply_ids", "step" and "id", or --step and --id;
    without reply_ids the turn's reply is computed first): the reply with `id` taken at `step`,
    continued greedily (chatlens.jobs.BranchJob); the reply limit caps the whole branch. Prints a
    chatlens.protocol.Branched."""
    from ..cache import PromptCache
    from ..jobs import BranchJob
    from ..protocol import Branch, to_json
    from ..pull import greedy

    request = request_on_stdin(args, Branch)
    top_k = _top_k(request.top_k or 0)
    model = open_model(args.model, args.backend)
    record = read_turn(model, request)
    cache = PromptCache(model.backend(n_ctx=record.window))
    reply_ids = request.reply_ids
    if reply_ids is None:  # the turn's reply first: then the cache holds it, and the branch reuses it
        reply_ids = _replied(model, cache, record)
    job = BranchJob(model, cache, record.prompt_ids, reply_ids, step=request.step, id=request.id,
                    max_tokens=record.max_tokens, top_k=top_k, reply_top_k=request.reply_top_k)
    _write_json(to_json(greedy(job)))
    return 0


def inspect(args) -> int:
    """An Inspect on stdin (run's fields, optional "reply_ids", "step", "layout", "model"; without
    reply_ids the turn's reply is computed first): step `step` of the reply inspected
    (chatlens.jobs.InspectJob), its attention over what the model read and its logit lens. Layout
    "plain" (--layout plain) reads the last message as plain text; --base-model ("model": "base")
    computes with the base model, as the comparison's cells read them. Prints a
    chatlens.protocol.Inspected."""
    from ..jobs import InspectJob
    from ..protocol import Inspect, to_json
    from ..pull import greedy

    request = request_on_stdin(args, Inspect)
    instruct, read, reply_ids, cache_for = _a_step(args, request)
    n = len(read.prompt_ids) + len(reply_ids) + 1
    _write_json(to_json(greedy(InspectJob(cache_for(max(n, read.window)), read, reply_ids, instruct.tokenizer,
                                          step=request.step, top_k=request.top_k))))
    return 0


def cause(args) -> int:
    """A Cause on stdin (inspect's fields, and optional "pieces" and "tokens", or --piece KIND:INDEX
    ... and --tokens): which piece of the turn step `step` of its reply needed
    (chatlens.jobs.CauseJob), each piece knocked out and removed. Prints a chatlens.protocol.Caused."""
    from ..cause import cache_needed
    from ..contract import Cause
    from ..jobs import CauseJob
    from ..pieces import turn_pieces
    from ..protocol import to_json
    from ..pull import greedy

    request = request_on_stdin(args, Cause)
    instruct, read, reply_ids, cache_for = _a_step(args, request)
    pieces = turn_pieces(instruct.tokenizer, instruct.template, read, request.messages, request.pieces,
                         plain=request.layout == "plain")
    cache = cache_for(max(cache_needed(len(read.prompt_ids), pieces, request.step), read.window))
    _write_json(to_json(greedy(CauseJob(cache, read, reply_ids, pieces, instruct.tokenizer, step=request.step,
                                        model=request.model, tokens=request.tokens))))
    return 0


def needs(args) -> int:
    """A Needs on stdin (run's fields; optional "replies", "knocked", "pieces", "tokens", or --knocked,
    --piece, --tokens): which turn each reply of the conversation needed (chatlens.jobs.NeedsJob),
    every assistant message a reply measured. Prints a chatlens.protocol.Needed."""
    from ..cache import PromptCache
    from ..contract import Needs
    from ..jobs import NeedsJob
    from ..needs import replies_of
    from ..protocol import to_json
    from ..pull import greedy

    request = request_on_stdin(args, Needs)
    model = open_model(args.model, args.backend)
    replies = replies_of(lambda r: read_turn(model, r), model.tokenizer, model.template, model.eos_id, request)
    cache = PromptCache(model.backend(n_ctx=max(r.cache for r in replies)))
    _write_json(to_json(greedy(NeedsJob(cache, replies, model.tokenizer, knocked=request.knocked,
                                        tokens=request.tokens))))
    return 0


def _a_step(args, request):
    """What an Inspect (or a Cause) of a step reads, and its reply: (the instruct model, the turn's
    record or plain text's read, the reply's ids, cache_for(n) -> a PromptCache of at least n
    tokens over the model that computes). Without reply_ids the reply is computed first: over the
    cache the step then reuses, as the page's turn leaves it; or, for the base model or plain text,
    greedily to the instruct model's end of turn, as the comparison computes a cell."""
    from ..cache import PromptCache
    from ..compare import check_same_tokenizer
    from ..jobs import plain_read
    from ..pull import Pull, greedy

    instruct = open_model(args.model, args.backend)
    model = instruct
    if request.model == "base":
        model = open_model(args.base_model, args.backend)
        check_same_tokenizer(instruct.tokenizer, model.tokenizer)  # the same ids, as the comparison needs
    template = request.layout == "template"
    read = read_turn(instruct, request) if template else plain_read(instruct.tokenizer, request.messages)
    reply_ids, cache = request.reply_ids, None
    if reply_ids is None and model is instruct and template:
        cache = PromptCache(model.backend(n_ctx=read.window))
        reply_ids = _replied(model, cache, read)  # the turn's reply first: the cache holds it, the step reuses it
    elif reply_ids is None:
        limit = _reply_limit(request)
        stepper = model.backend(len(read.prompt_ids) + limit)
        reply_ids = greedy(Pull(stepper, read.prompt_ids, eos_id=instruct.eos_id, max_new_tokens=limit)).ids

    def cache_for(n):
        return cache if cache is not None and cache.capacity >= n else PromptCache(model.backend(n_ctx=n))
    return instruct, read, reply_ids, cache_for


def _checked_limits(args) -> int:
    """chat's --max-tokens and --window by the chat's own rules (chatlens.chat), against the
    model's config alone: a bad setting is refused before the weights load. Returns the window."""
    from ..chat import check_reply_limit, check_window
    from ..source import load_config

    reserve = check_reply_limit(args.max_tokens)
    return check_window(args.window, reserve, load_config(resolve_model(args.model)).n_ctx)


def _top_k(k) -> int:
    """--top-k and /topk: 0 (off) or more candidates a reply token."""
    if k < 0:
        raise ChatlensError("top-k must be 0 (off) or more candidates")
    return k


# -- chat --------------------------------------------------------------------------------------
HELP = """commands:
  /show           what the model read last turn: the text, the counts, dropped turns, reuse
  /window N       set the context window to N tokens
  /preset NAME    system prompt preset: none, pirate, brief, date
  /system TEXT    a custom system prompt
  /topk K         record each reply token's K best candidates (/show lists them); /topk 0 turns it off
  /branch S ID    the last reply with token ID taken at step S (0: its first), continued greedily
  /keep           the branch shown last becomes the last reply (later turns read it)
  /clear          start a new conversation (the cache is emptied)
  /quit, /exit    leave"""


def show_record(rec) -> str:
    """A TurnRecord as text for a terminal: the prompt piece by piece (special tokens as they
    are written), then the counts."""
    out = [f"--- what the model read: {rec.used} tokens ---"]
    for p in rec.pieces:
        out.append(f"[{p['label']} · {p['count']} tokens]")
        out.append(p["text"].rstrip("\n") if p["text"].endswith("\n") else p["text"])
        if p["text"].endswith("\n"):
            out[-1] += "\u21b5"  # the piece ends with a newline: show it
    out.append("--- counts ---")
    out.append(f"window {rec.window} = {rec.used} used + {rec.reserve} reserved for the reply + {rec.free} free")
    if rec.dropped_messages:
        out.append(f"dropped {len(rec.dropped_messages)} messages (oldest first):")
        for d in rec.dropped_messages:
            out.append(f"  message {d['message_index']} · {d['role']} · {d['count']} tokens: {d['content']!r}")
    else:
        out.append("dropped: nothing")
    out.append(f"reused from the cache: {rec.reused_tokens} tokens; computed: {rec.computed_tokens} tokens")
    if rec.reply_ids is not None:
        out.append(f"reply ({len(rec.reply_ids)} tokens, stop: {rec.stop_reason}): {rec.reply_text!r}")
        t = rec.timings
        if t:
            out.append(f"prefill {t['prefill_ms']:.0f} ms ({t['prefill_tok_s'] or 0:.0f} tokens/s), "
                       f"decode {t['decode_ms']:.0f} ms ({t['decode_tok_s'] or 0:.1f} tokens/s) on {rec.backend}")
    if rec.top_k:
        from .why import show_top_k

        out.extend(show_top_k(rec.reply_tokens, rec.top_k, rec.top_k_tokens))
    return "\n".join(out)


def chat(args) -> int:
    from ..chat import ChatSession

    preset, system = _system_args(args)
    interactive = sys.stdin.isatty()
    _checked_limits(args)
    print("chatlens: loading the model ...", file=sys.stderr, flush=True)
    model = open_model(args.model, args.backend)
    session = ChatSession(model, window=args.window, max_tokens=args.max_tokens, preset=preset, system=system)
    print(f"chatlens: {model.name}, window {session.window} tokens, reply limit {session.max_tokens}, "
          f"system prompt: {session.describe_system()}. /help lists the commands.", file=sys.stderr, flush=True)
    top_k = _top_k(args.top_k)
    tok = model.tokenizer

    while True:
        try:
            line = input("> ") if interactive else sys.stdin.readline()
        except EOFError:
            break
        except KeyboardInterrupt:
            print()
            return 130
        if not interactive and line == "":
            break
        line = line.strip()
        if not line:  # nothing but whitespace (any Unicode space) is never sent as a message
            continue
        if line.startswith("/"):
            cmd, _, rest = line.partition(" ")
            rest = rest.strip()
            try:
                if cmd in ("/quit", "/exit"):
                    break
                elif cmd == "/help":
                    print(HELP)
                elif cmd == "/clear":
                    session.clear()
                    print("(new conversation)")
                elif cmd == "/show":
                    print(show_record(session.last_record) if session.last_record else "(no turn yet)")
                elif cmd == "/window":
                    try:
                        n = int(rest)
                    except ValueError:
                        raise ChatlensError("usage: /window N (tokens)") from None
                    session.set_window(n)
                    print(f"(window: {session.window} tokens)")
                elif cmd == "/preset":
                    if not rest:
                        raise ChatlensError(f"usage: /preset NAME, one of {', '.join(presets.PRESETS)}")
                    session.set_system(preset=rest)
                    print(f"(system prompt: {session.describe_system()})")
                elif cmd == "/system":
                    session.set_system(system=rest)
                    print(f"(system prompt: {session.describe_system()})")
                elif cmd == "/branch":
                    try:
                        step, token = (int(x) for x in rest.split())
                    except ValueError:
                        raise ChatlensError("usage: /branch S ID (the step, 0 for the reply's first, and a token id)") from None
                    b = session.branch(step, token, top_k=top_k)
                    print(f"(step {step}: {tok.token_text(b.branched_from[step])!r} -> {tok.token_text(token)!r}; "
                          f"{b.reused_tokens} tokens reused, {b.computed_tokens} computed; /keep keeps it)")
                    print(b.reply_text)
                elif cmd == "/keep":
                    session.keep()
                    print("(the branch is the last reply now: the next turn reads it)")
                elif cmd == "/topk":
                    try:
                        top_k = _top_k(int(rest))
                    except ValueError:
                        raise ChatlensError("usage: /topk K (candidates a reply token; 0 turns it off)") from None
                    print(f"(top-k: {top_k} candidates a reply token)" if top_k else "(top-k: off)")
                else:
                    raise ChatlensError(f"unknown command {cmd}; /help lists the commands")
            except ChatlensError as e:
                print(f"chatlens: {e}", file=sys.stderr, flush=True)
            continue

        def on_token(t):  # its text is decoded so no character is split (the end of turn writes none)
            if t.text:
                sys.stdout.write(t.text)
                sys.stdout.flush()

        try:
            session.send(line, on_token=on_token, top_k=top_k)
            sys.stdout.write("\n")
            sys.stdout.flush()
        except ChatlensError as e:  # the window, a bad setting: say so and keep chatting
            print(f"\nchatlens: {e}", file=sys.stderr, flush=True)
        except KeyboardInterrupt:
            print("\n(interrupted: the turn is discarded)", flush=True)
    return 0


# -- record ------------------------------------------------------------------------------------
def record_conversation(model, preset, window, day, *, messages=LESSON_MESSAGES, max_tokens=RECORD_REPLY_LIMIT):
    """One recorded conversation: `messages` sent in turn to a fresh session."""
    from ..chat import ChatSession

    session = ChatSession(model, window=window, max_tokens=max_tokens, preset=preset, clock=lambda: day)
    turns = [session.send(text).to_json() for text in messages]
    return {"preset": preset, "system": session.system_now(), "window": window, "turns": turns}


# The comparison's recorded prompts (chatlens.compare): the lesson's two examples and one more of its messages.
COMPARE_PROMPTS = ["What is the capital of France?", "Who are you?", "Give me one tip for sleeping better."]

# Where the base model's half cannot be recorded (the Hub's pinned base not at hand), each base cell
# says so and quotes the lesson's own account of what the base model does there: the lesson's
# words, attributed, never a reply of this project's.
LESSON_SOURCE = "“How a chat assistant works”, the lesson this site teaches"
LESSON_ON_BASE = {
    "plain": "A base model has one skill: continuing text the way documents continue.",
    "template": ("To the base model the tags are rare tokens in a strange document, and it continues the document as best "
                 "it can. On none of the examples does it write <|im_end|>, so it runs until the lab stops it at 48 tokens."),
}


def _not_recorded(layout) -> dict:
    """A base cell of the recorded comparison when the real base model was not at hand."""
    from .. import hub

    return {"recorded": False,
            "why": (f"Not recorded: the base model's replies are recorded only from the real base model ({hub.BASE.repo} at "
                    f"revision {hub.BASE.revision[:8]}), which was not at hand where this file was made. Download it "
                    "here (the model box) to run the comparison yourself."),
            "lesson": {"quote": LESSON_ON_BASE[layout], "source": LESSON_SOURCE}}


def _instruct_half(instruct, text, limits):
    """The instruct model's two replies of the comparison of `text` (chatlens.compare's plan and
    job, its base half left out): a Compared whose base cells never ran."""
    from dataclasses import replace

    from ..cache import PromptCache
    from ..compare import plan
    from ..jobs import CompareJob
    from ..pull import greedy

    p = plan(instruct, instruct, text, **limits)  # the same ids both would read; only the instruct's computed
    p = replace(p, replies=tuple(r for r in p.replies if r[0] == "instruct"))
    return greedy(CompareJob(p, {"instruct": PromptCache(instruct.backend(p.capacity))}))


def recorded_comparisons(instruct, base, instruct_label: dict, base_label: dict | None, day,
                         prompts=COMPARE_PROMPTS) -> dict:
    """The comparison of each prompt (chatlens.compare at the lab's cap and top-k), labelled with
    which weights produced each side: what site/recorded-compare.json holds. base None: the
    instruct half only, each base cell a `_not_recorded` one."""
    from ..protocol import to_json
    from .compare import compared

    limits = {"max_tokens": defaults.COMPARE_LIMIT, "top_k": defaults.COMPARE_TOP_K}
    out = []
    for text in prompts:
        if base is not None:
            out.append(to_json(compared(instruct, base, text, **limits)))
            continue
        half = to_json(_instruct_half(instruct, text, limits))
        half["base"] = {layout: _not_recorded(layout) for layout in half["base"]}
        out.append(half)
    return {
        "about": "The base model beside the instruct model on the same ids, plain text and the chat template, "
                 "recorded with greedy decoding: chatlens.compare's answer for each prompt"
                 + ("." if base is not None else "; the base model's half only where the real base model was at hand."),
        "models": {"instruct": instruct_label, "base": base_label or {"recorded": False}},
        "date": day.isoformat(),
        **limits,
        "prompts": list(prompts),
        "comparisons": out,
    }


def _real_base(path):
    """The base model given to record, or ChatlensError unless it is the Hub's pinned file: the
    page shows the recording before any download, as what the real base model writes."""
    from .. import hub
    from .mirror import BaseWeights

    base = BaseWeights.at(path)
    if not base.original:
        raise ChatlensError(f"{base.about}. The comparison is recorded only from the real base model ({hub.BASE.repo}, "
                            "its pinned model.safetensors), so nothing was recorded")
    return base, {"file": base.weights.name, "repo": hub.BASE.repo, "revision": hub.BASE.revision,
                  "sha256": base.sha256, "source": base.about, "stand_in": False}


def record(args) -> int:
    from . import fetch
    from .build import Checkout

    out = Path(args.out) if args.out else Checkout.at().recorded
    only = getattr(args, "only", None)
    base, base_label = _real_base(args.base_model) if args.base_model is not None else (None, None)
    model = open_model(args.model)
    day = datetime.date.today()
    sha = model.sha256
    label = {"file": model.name, "sha256": sha,
             "source": f"PyPI {fetch.PACKAGE}" if sha == fetch.SHA256 else str(model.path)}
    if only != "comparison":
        doc = {
            "about": "The lesson's five-message conversation, recorded with greedy decoding for each system "
                     "prompt preset and window size: turn records of exactly what the model read.",
            "model": label,
            "date": day.isoformat(),
            "reply_limit": RECORD_REPLY_LIMIT,
            "messages": LESSON_MESSAGES,
            "conversations": [],
        }
        for preset in RECORD_PRESETS:
            for window in RECORD_WINDOWS:
                print(f"chatlens: recording preset {preset}, window {window} ...", file=sys.stderr, flush=True)
                doc["conversations"].append(record_conversation(model, preset, window, day, messages=LESSON_MESSAGES,
                                                                max_tokens=RECORD_REPLY_LIMIT))
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(doc, ensure_ascii=False, separators=(",", ":")) + "\n", encoding="utf-8")
        print(f"chatlens: wrote {out}", file=sys.stderr)
    if only != "conversations":
        from ..source import load_model

        print("chatlens: recording the comparison" + (" with the base model" if base else " (the instruct half: no real "
              "base model given)") + " ...", file=sys.stderr, flush=True)
        compared = out.with_name(f"{out.stem}-compare.json")  # site/recorded-compare.json beside site/recorded.json
        doc = recorded_comparisons(model, load_model(base.path) if base else None, label, base_label, day)
        compared.parent.mkdir(parents=True, exist_ok=True)
        compared.write_text(json.dumps(doc, ensure_ascii=False, separators=(",", ":")) + "\n", encoding="utf-8")
        print(f"chatlens: wrote {compared}", file=sys.stderr)
    return 0
