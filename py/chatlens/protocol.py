"""The contract between the page's worker and chatlens.worker, written once.

Each request's arguments are a dataclass here: its fields, their types, their defaults (from
chatlens.defaults) and a line of doc each. chatlens.worker reads every request through `parse`,
which refuses a missing, unknown or mistyped argument with a plain sentence; the page's side is
written from the same classes (`javascript()`: JSDoc typedefs and the list of requests, in
site/js/worker/protocol.gen.mjs, which tests/test_worker.py keeps current; `describe()`: the
same as data, in build.json). One casing on the wire: Python's, snake_case.

What the requests answer is documented with the answers' own types: chatlens.record.TurnRecord
(preview, a chat reply), chatlens.complete.continuation (a plain-text continuation), and for
the rest in REQUESTS below. A failure answers the exception's type, message and, where the
error has them, its numbers (`data`: WindowError's needed, window, reserve and pieces).
"""

import types
import typing
from dataclasses import MISSING, dataclass, field, fields

from . import defaults, usercode
from .errors import ChatlensError


def doc(text, default=MISSING, factory=MISSING):
    """A field with its line of doc (what the generated typedefs say)."""
    if factory is not MISSING:
        return field(default_factory=factory, metadata={"doc": text})
    return field(default=default, metadata={"doc": text})


@dataclass(frozen=True)
class Empty:
    """No arguments."""


@dataclass(frozen=True)
class Load:
    """Read a model source's text side: tokenizer, chat template, config."""
    path: str = doc("the model's files in the worker's file system: a .gguf file or a Hugging Face folder")


@dataclass(frozen=True)
class Turn:
    """A chat turn: the conversation, the window it must fit, the system prompt."""
    messages: list = doc("[{role, content}, ...]: the history, then the new user message last")
    window: int = doc("the context window, in tokens", defaults.DEFAULT_WINDOW)
    reserve: int = doc("tokens kept free in the window for the reply", defaults.REPLY_LIMIT)
    max_tokens: int | None = doc("the reply limit (default: the reserve)", None)
    preset: str | None = doc("a system prompt preset (chatlens.presets), or none", None)
    custom: str | None = doc("the custom preset's text", None)
    system: str | None = doc("the system prompt as text (null: the template's default)", None)
    special_in_text: bool = doc("special tokens written in a message are read as tokens (false: as characters)", True)
    top_k: int | None = doc("candidates a reply token records (chat: default 0, none; predict: default the site's)",
                            None)


@dataclass(frozen=True)
class Text:
    """Plain text to continue, with no template."""
    text: str = doc("the text, tokenized as it is (special tokens written in it matched)")
    max_tokens: int = doc("new tokens at most", defaults.REPLY_LIMIT)
    top_k: int = doc("candidates each new token records (0: none)", 0)


# The prompt ids a NumPy step of a page's reply reads: Pyodide's NumPy (no BLAS) reads 10 to 30
# tokens a second, so a chunk takes a second or two: the page's progress moves that often and a
# stop answers within it. A larger chunk saves little (the prefill's cost is per token).
READ_CHUNK = 16


@dataclass(frozen=True)
class Start:
    """Start a reply the page pulls (one `step` a token)."""
    kind: str = doc("chat (a Turn's reply), text (a Text's continuation) or predict (a Turn's first token)")
    args: dict = doc("the arguments of that kind: a Turn, or a Text")
    depth: int = doc("GPU steps to keep in flight", defaults.IN_FLIGHT)
    chunk: int = doc("the most prompt ids one NumPy step reads, so the page's progress moves and a stop falls "
                     "between chunks (0: the backend's own; a GPU step reads the program's chunk)", READ_CHUNK)


@dataclass(frozen=True)
class Step:
    """The next step of the reply being pulled; on the GPU, with the oldest run's bytes as an extra argument."""
    depth: int | None = doc("GPU steps to keep in flight (default: as started)", None)


@dataclass(frozen=True)
class CountStep:
    """The next slices of the count being pulled."""
    ms: int | float = doc("how long this step may count, in milliseconds, before it answers", 20)


@dataclass(frozen=True)
class GpuProgram:
    """Build the GPU program of the forward pass for this source and adapter."""
    n_ctx: int = doc("the context the program's KV cache holds")
    features: list = doc("the adapter's features", factory=list)
    limits: dict = doc("the adapter's limits, by WebGPU's names", factory=dict)


@dataclass(frozen=True)
class UseGpu:
    """Compute replies with the program gpu_program built; the page's executor runs its steps."""
    name: str = doc("the adapter's name, for the record's backend", "adapter")


@dataclass(frozen=True)
class Tokenize:
    """The text's tokens, with no template."""
    text: str = doc("the text")


@dataclass(frozen=True)
class Render:
    """A chat template rendered as transformers' apply_chat_template renders it."""
    # messages, tools and documents are checked by the template, with transformers' own words
    messages: object = doc("[{role, content, ...}, ...]")
    template: str | None = doc("Jinja source (default: the model's template)", None)
    tools: object = doc("tool definitions passed to the template", None)
    documents: object = doc("documents passed to the template", None)
    add_generation_prompt: bool | None = doc("end with the assistant's header (default: true, false when continuing)",
                                             None)
    continue_final_message: bool | str = doc("continue the last message (or the named field of it)", False)
    variables: dict | None = doc("extra template variables", None)
    assistant_mask: bool = doc("also mark the tokens inside {% generation %} blocks", False)


@dataclass(frozen=True)
class RunPython:
    """A learner's Python, run with count_tokens(text) among its globals."""
    code: str = doc("the program")
    seconds: int | float = doc("its time limit", usercode.DEFAULT_SECONDS)
    results: list = doc("names whose values to return", factory=list)


# Each request: its arguments, and what it answers.
REQUESTS = {
    "load": (Load, '{"eos_token", "n_ctx", "vocab_size", "source"}: the text side is ready'),
    "preview": (Turn, "the TurnRecord (chatlens.record) of what the model would read, with the reuse the cache would give"),
    "use_numpy": (Empty, '{"backend", "n_ctx"}: replies compute with NumPy (the weights in the file system)'),
    "gpu_program": (GpuProgram, "the GPU program (chatlens.gpu.program's plain data)"),
    "use_gpu": (UseGpu, '{"backend", "n_ctx"}'),
    "start": (Start, "a pull's answer (chatlens.worker: tokens, runs, read, prompt, in_flight, done)"),
    "step": (Step, "a pull's answer"),
    "stop": (Empty, "a pull's answer, done: the reply ends with stop_reason \"stopped\""),
    "count": (Turn, '{"read", "of", "done"}: start counting exactly what the system prompt and the new message need '
                    '(characters read of all; done: null, or WindowError\'s data counted exactly: needed, window, '
                    'reserve, pieces, at_least false, and its sentence as message); ends a count already running'),
    "count_step": (CountStep, '{"read", "of", "done"}: the count goes on'),
    "count_stop": (Empty, '{"stopped"}: the count running (if any) ends unanswered'),
    "run": (Turn, "the TurnRecord with its reply, pulled to its end here (NumPy)"),
    "predict": (Turn, '{"top_k", "top_k_tokens", "top_k_bytes", "used", "reused_tokens", "backend"}, pulled here (NumPy)'),
    "complete": (Text, "chatlens.complete.continuation's data, pulled here (NumPy)"),
    "tokenize": (Tokenize, '{"prompt_ids", "prompt_tokens", "prompt_vocab", "prompt_bytes", "special_ids"}'),
    "render": (Render, '{"text", "ids", "tokens", "vocab", "bytes", "special_ids", "assistant_mask"?}'),
    "chat_template": (Empty, '{"source", "names", "special_tokens"}: the model\'s chat template'),
    "lab_source": (Empty, '{"name", "source"}: the lab\'s hand-written Python (chatlens/by_hand.py)'),
    "run_python": (RunPython, '{"stdout", "stderr", "error", "timed_out", "results"} (chatlens.usercode)'),
}
KINDS = {"chat": Turn, "text": Text, "predict": Turn}  # start's kinds and their arguments
GENERATED = "site/js/worker/protocol.gen.mjs"  # javascript()'s file, in the checkout


def parse(cls, args):
    """`args` (the request's JSON object) as a `cls`, or ChatlensError saying what is wrong."""
    if not isinstance(args, dict):
        raise ChatlensError("a request's arguments must be an object")
    known = {f.name: f for f in fields(cls)}
    unknown = sorted(set(args) - set(known))
    if unknown:
        raise ChatlensError(f"unknown argument{'s' if len(unknown) > 1 else ''} {', '.join(map(repr, unknown))}: "
                            f"this request takes {', '.join(known) or 'none'}")
    hints = typing.get_type_hints(cls)
    values = {}
    for name, f in known.items():
        if name not in args:
            if f.default is MISSING and f.default_factory is MISSING:
                raise ChatlensError(f"the request lacks {name!r}")
            continue
        values[name] = _checked(name, args[name], hints[name])
    return cls(**values)


def _checked(name, value, kind):
    options = typing.get_args(kind) if isinstance(kind, types.UnionType) else (kind,)
    if value is None and type(None) in options:
        return None
    for option in options:
        if option is object:
            return value
        if option is int and not isinstance(value, bool) and isinstance(value, (int, float)) and int(value) == value:
            return int(value)
        if option is float and not isinstance(value, bool) and isinstance(value, (int, float)):
            return value
        if option in (str, bool, list, dict) and isinstance(value, option):
            return value
    if int in options and float not in options:
        raise ChatlensError(f"{name} must be a whole number, not {value!r}")
    words = " or ".join(_JS[o] for o in options if o is not type(None))
    raise ChatlensError(f"{name} must be {words}, not {value!r}")


# -- the page's side ------------------------------------------------------------------------------

_JS = {str: "string", int: "number", float: "number", bool: "boolean", list: "Array", dict: "object",
       type(None): "null", object: "*"}


def _js_type(kind) -> str:
    options = typing.get_args(kind) if isinstance(kind, types.UnionType) else (kind,)
    return "|".join(dict.fromkeys(_JS[o] for o in options))


def _default(f):
    if f.default_factory is not MISSING:
        return f.default_factory()
    return None if f.default is MISSING else f.default


def describe() -> dict:
    """The requests as data (build.json's "protocol"): each one's arguments' type and its fields."""
    types_ = {}
    for cls, _ in REQUESTS.values():
        hints = typing.get_type_hints(cls)
        types_[cls.__name__] = [{"name": f.name, "type": _js_type(hints[f.name]), "doc": f.metadata.get("doc", ""),
                                 "required": f.default is MISSING and f.default_factory is MISSING,
                                 "default": _default(f)} for f in fields(cls)]
    return {"requests": {name: cls.__name__ for name, (cls, _) in REQUESTS.items()},
            "kinds": {kind: cls.__name__ for kind, cls in KINDS.items()}, "types": types_}


def javascript() -> str:
    """site/js/worker/protocol.gen.mjs: the typedefs and the list of requests, for the page."""
    import json

    d = describe()
    out = ["// Generated from py/chatlens/protocol.py by `python -m chatlens protocol --write`: do not edit.",
           "// The worker's requests (chatlens.worker), their arguments and what they answer. On the wire",
           "// every name is snake_case, as Python writes it.", ""]
    done = set()
    for name, (cls, answer) in REQUESTS.items():
        if cls.__name__ in done:
            continue
        done.add(cls.__name__)
        out.append("/**")
        out.append(f" * {cls.__doc__.strip()}")
        out.append(f" * @typedef {{object}} {cls.__name__}")
        for f in d["types"][cls.__name__]:
            label = f["name"] if f["required"] else f"[{f['name']}={json.dumps(f['default'])}]"
            out.append(f" * @property {{{f['type']}}} {label} {f['doc']}")
        out.append(" */")
        out.append("")
    out.append("/** Each request's arguments (a typedef above) and what it answers. */")
    out.append("export const REQUESTS = {")
    for name, (cls, answer) in REQUESTS.items():
        out.append(f"  {name}: {{ args: {json.dumps(cls.__name__)}, answers: {json.dumps(answer)} }},")
    out.append("};")
    out.append("")
    out.append("/** start's kinds: the arguments each takes. */")
    out.append(f"export const KINDS = {json.dumps(d['kinds'])};")
    out.append("")
    out.append("/** Each arguments type's fields, in order. */")
    out.append("export const FIELDS = {")
    for t, fs in d["types"].items():
        out.append(f"  {t}: {json.dumps([f['name'] for f in fs])},")
    out.append("};")
    return "\n".join(out) + "\n"
