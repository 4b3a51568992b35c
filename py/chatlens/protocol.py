"""The contract between the page, its worker and chatlens.worker: which request takes and answers
which type, written once.

The types themselves, each request's arguments and each answer with a line of doc a field, are
chatlens.contract's (imported here, so protocol.Turn names the same class). This module holds the
tables: Python's requests (REQUESTS: name -> (arguments, answer)) and the page<->worker messages
(requests, signals, events, the answer envelope: PAGE_REQUESTS, SIGNALS, EVENTS, Answer).
chatlens.worker reads every request through `parse`, which refuses a missing, unknown or mistyped
argument with a plain sentence, and answers through `to_json`; the page reads what it needs of
the same tables (`javascript()`: the requests, the messages and the fields of each type a page
request takes, in site/js/worker/protocol.gen.mjs, which tests/test_worker.py keeps current;
`describe()`: every type's fields and docs as data, in build.json), and
tests/page/messages.test.mjs fails when the worker's or the connection's code uses a type not
named here.

One casing rule: every name on the wire between the page, its worker and Python (request,
signal and event types, arguments, answers, events' fields) is snake_case, as Python writes it.
The page's API (window.chatlens) takes JavaScript's camelCase; site/js/page/protocol.mjs alone
converts between the two. A failure answers the exception's type, message and, where the error
has them, its numbers (`data`: WindowError's needed, window, reserve and pieces).
"""

import json
import types
import typing
from dataclasses import MISSING, asdict, dataclass, fields, is_dataclass

from .contract import (
    AttentionFigures, BackendInfo, Branch, Branched, Cause, Caused, CausePiece, CellEnd, CellToken, Compare,
    Compared, ComparePrompt, Continuation, Counted, doc, Empty, GpuProgram, GpuProgramAnswer, GpuRun, Inspect,
    Inspected, LabSource, Load, LoadBase, Loaded, Measure, MODELS, Prediction, PullAnswer, PythonRun, READ_CHUNK,
    Render, Rendered, Reply, RunPython, Stage, Start, Step, Stopped, TemplateInfo, Text, Token, Tokenize, Tokenized,
    Turn, UseGpu, UseNumpy,
)
from .check import (
    Checked, CheckProgram, CheckProgramAnswer, CheckRead, CheckResult, CheckWeights, CheckWeightsAnswer,
    CheckWeightsRead,
)
from .errors import ChatlensError
from .jobs import KINDS
from .record import TurnRecord


def to_json(answer):
    """An answer as JSON-able data: the one serialiser of every answer (its fields, nested answers
    included; the GPU program, plain data already, as it is)."""
    return asdict(answer) if is_dataclass(answer) else answer


# Each request: its arguments, and what it answers.
REQUESTS = {
    "load": (Load, Loaded),
    "load_base": (LoadBase, Loaded),
    "preview": (Turn, TurnRecord),
    "use_numpy": (UseNumpy, BackendInfo),
    "gpu_program": (GpuProgram, GpuProgramAnswer),
    "use_gpu": (UseGpu, BackendInfo),
    "check_program": (CheckProgram, CheckProgramAnswer),
    "check_read": (CheckRead, CheckResult),
    "check_weights": (CheckWeights, CheckWeightsAnswer),
    "check_weights_read": (CheckWeightsRead, Checked),
    "start": (Start, PullAnswer),
    "step": (Step, PullAnswer),
    "stop": (Empty, PullAnswer),
    "run": (Turn, TurnRecord),
    "predict": (Turn, Prediction),
    "complete": (Text, Continuation),
    "tokenize": (Tokenize, Tokenized),
    "render": (Render, Rendered),
    "chat_template": (Empty, TemplateInfo),
    "lab_source": (Empty, LabSource),
    "run_python": (RunPython, PythonRun),
}


# -- the page <-> worker messages (site/js/page/connection.mjs <-> site/js/worker/worker.mjs) -----
# Page -> worker: a request {id, type, args}, answered once by the envelope below, in order one at
# a time when it needs the model's steps, at once when it needs only the tokenizer and template;
# or a signal {type, args}, handled at once, even while a request runs, never answered.
# Worker -> page: the answer envelope, and events (a request's, carrying its `id`, or the
# worker's own).


@dataclass(frozen=True)
class Init:
    """Boot the worker: Pyodide, chatlens, the text side of the model source."""
    source: dict = doc("the model source (site/js/page/source.mjs)")
    build: dict = doc("build.json")
    backend: str = doc("auto, webgpu or numpy")
    lock: str | None = doc("a Web Lock the worker holds while it lives (connection.mjs)", None)
    hide_jspi: bool = doc("tests: hide JSPI before Python starts, as a browser without it would", False)
    one_model_on_gpu: bool = doc("tests: the GPU has room for one model's weights only, as a small one may (the "
                              "comparison then puts one model on it at a time)", False)
    kept: dict | None = doc("the known-answer checks' results the page kept, by key (page/check.mjs): one for this "
                            "adapter and build is used, not run again", None)
    check_override: bool = doc("developers (?gpu-check=ignore): compute on a GPU that failed its check, its backend "
                               "labelled unchecked on every figure", False)


@dataclass(frozen=True)
class Booted:
    """init's answer."""
    source: dict = doc("the model source")
    info: dict = doc("load's answer (Loaded)")
    pyodide: str = doc("Pyodide's version")
    stored: dict | None = doc("the store's status of the source, or null")
    snapshot: str = doc('"restored", "saved" or "none": how Python started')
    device: dict = doc("{backend, why, adapter, emulated}: what was chosen to compute replies (emulated: a CPU "
                       "emulation of a GPU, chatlens.device)")


@dataclass(frozen=True)
class ModelInfo:
    """What computes replies (attach's answer, the model event): or {error, offer} when the weights failed."""
    backend: str = doc("as BackendInfo's")
    n_ctx: int = doc("the most tokens its cache holds")
    kind: str = doc('"webgpu" or "numpy"')
    why: str = doc("why that backend")
    model: str = doc("instruct or base: whose weights these are", "instruct")
    note: str | None = doc("a sentence when the two models cannot both be on the device (one at a time then)", None)
    check: dict | None = doc("on the GPU: the known-answer check that let it compute (a CheckResult, the weights' "
                             "check among its checks when their reference was known)", None)
    dispatches_per_token: int | None = doc("on the GPU: the dispatches a decode token runs (decode and head)", None)


@dataclass(frozen=True)
class AttachBase:
    """Put the base model beside the instruct: its text side read (refused when its tokenizer
    differs) and its weights on the same device, from the store only once it holds the whole model."""
    source: dict = doc("the base model's source, as the page resolves it (page/downloads.mjs baseSource())")


@dataclass(frozen=True)
class DebugInfo:
    """debug's answer (scripts/bench_browser.py)."""
    wasm_heap: int | None = doc("Python's wasm memory, in bytes")
    last_reply: dict | None = doc("where the last job's time went in the worker: python_ms, submit_ms, wait_ms, "
                                  "pulls (calls into Python), most_in_flight")


@dataclass(frozen=True)
class CheckEvent:
    """A known-answer check's result, run now or used as kept (page/check.mjs keeps it)."""
    key: str = doc("what it is kept under: the build's check key, the adapter's, and for a weights check the file's "
                   "sha256")
    result: dict = doc("a CheckResult (a weights check's: a Checked)")


@dataclass(frozen=True)
class StopSignal:
    """Stop the job of request `id`: a reply ends at its next pull (stop_reason "stopped"); a count
    rejects with an AbortError."""
    id: int = doc("the request's id")


@dataclass(frozen=True)
class StatusEvent:
    """The worker's state."""
    state: str = doc("booting | loading | text (previews work; replies need the weights) | weights | ready | error")
    detail: str = doc("a sentence")


@dataclass(frozen=True)
class ModelEvent:
    """What computes a model's replies now, or why nothing does."""
    computes: dict = doc("a ModelInfo (its `model` the model key), or {error, offer} (offer: \"webgpu\" when a "
                         "software GPU passed over could)")


@dataclass(frozen=True)
class RecordEvent:
    """A chat request's turn record, before any of its tokens (PullAnswer's record)."""
    id: int = doc("the request's id")
    record: dict = doc("the TurnRecord the reply will fill")


@dataclass(frozen=True)
class PromptEvent:
    """A compare request's prompt (PullAnswer's prompt), before any of its tokens."""
    id: int = doc("the request's id")
    prompt: dict = doc("what both models read (Compared's prompt)")


@dataclass(frozen=True)
class TokenEvent:
    """A reply id, as it is chosen."""
    id: int = doc("the request's id (the token's own id is token.id)")
    token: dict = doc("a Token (a compare request's: a CellToken)")


@dataclass(frozen=True)
class CellEndEvent:
    """One of a compare request's replies ended (a CellEnd of PullAnswer's ended), before the answer."""
    id: int = doc("the request's id")
    cell: dict = doc("a CellEnd: {model, layout, stop_reason}")


@dataclass(frozen=True)
class ProgressEvent:
    """The prompt of request `id` read so far."""
    id: int = doc("the request's id")
    read: int = doc("tokens read (a count: characters)")
    of: int = doc("of all")
    ms: float = doc("since the job started")
    parts: int = doc("on the GPU: parts done so far of the step that reads the next chunk (gpu/executor.mjs runs a "
                     "long step in parts on a slow GPU)", 0)
    parts_of: int = doc("that step's parts in all (0: no step in parts)", 0)
    covers: int = doc("the prompt tokens that step reads (0: no step in parts)", 0)
    doing: str | None = doc("a cause: what it computes now, in words (PullAnswer's doing)", None)
    stage: dict | None = doc("a cause or needs: how far it is (PullAnswer's stage: a Stage)", None)


@dataclass(frozen=True)
class Answer:
    """The answer to request `id`: {id, ok: true, result} or {id, ok: false, error, name, data}."""
    id: int = doc("the request's id")
    ok: bool = doc("whether it succeeded")
    result: object = doc("the request's answer (ok)", None)
    error: str | None = doc("the error's message (not ok)", None)
    name: str | None = doc("the error's name: the Python exception's type (WindowError, ...)", None)
    data: object = doc("the error's numbers where it has them (WindowError's needed, window, reserve, pieces)", None)


# Page -> worker requests: the arguments and the answer. The worker's own, the text side's (passed
# to Python as they are), then each job's: chatlens.jobs.KINDS, whose classes declare the request
# that starts them, their arguments and their answer.
PAGE_REQUESTS = {
    "init": (Init, Booted),
    "attach": (Empty, ModelInfo),
    "attach_base": (AttachBase, ModelInfo),
    "debug": (Empty, DebugInfo),
    "check": (Empty, CheckResult),
    "preview": (Turn, TurnRecord),
    "render": (Render, Rendered),
    "tokenize": (Tokenize, Tokenized),
    "chat_template": (Empty, TemplateInfo),
    "lab_source": (Empty, LabSource),
    "run_python": (RunPython, PythonRun),
    **{job.request: (job.takes, job.answers) for job in KINDS.values()},
}
SIGNALS = {"stop": StopSignal, "lose_gpu": Empty}  # lose_gpu (tests): the GPU device goes, as a driver reset takes it
EVENTS = {"status": StatusEvent, "model": ModelEvent, "check": CheckEvent, "record": RecordEvent, "prompt": PromptEvent,
          "token": TokenEvent, "cell_end": CellEndEvent, "progress": ProgressEvent}
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
    return "|".join(dict.fromkeys(o.__name__ if is_dataclass(o) else _JS[o] for o in options))


def _default(f):
    if f.default_factory is not MISSING:
        return f.default_factory()
    return None if f.default is MISSING else f.default


def _all_types():
    """Every class of the contract, each once, in the order the tables name them."""
    out = {}
    for args, answer in [*REQUESTS.values(), *PAGE_REQUESTS.values()]:
        out.setdefault(args.__name__, args)
        out.setdefault(answer.__name__, answer)
    for cls in [Reply, ComparePrompt, Token, CellToken, CellEnd, GpuRun, Stopped, Branch, Branched, Inspect,
                Inspected, AttentionFigures, Cause, Caused, CausePiece, Measure, Stage, *SIGNALS.values(), *EVENTS.values(),
                Answer]:
        out.setdefault(cls.__name__, cls)
    return out


def _fields(cls):
    hints = typing.get_type_hints(cls)
    # TurnRecord documents its fields in its docstring, once (chatlens.record)
    elsewhere = f"as chatlens.record.{cls.__name__} documents it" if cls is TurnRecord else ""
    return [{"name": f.name, "type": _js_type(hints[f.name]), "doc": f.metadata.get("doc", elsewhere),
             "required": f.default is MISSING and f.default_factory is MISSING, "default": _default(f)}
            for f in fields(cls)]


def page_jobs() -> dict:
    """The page's requests that are jobs, each as its class declares it (chatlens.jobs.Job): its
    kind (start's), and whether it writes a reply, runs in the background, reads a turn's window,
    puts both models on the device."""
    return {job.request: {"kind": kind, "writes": job.writes, "background": job.background, "window": job.window,
                          "both_models": job.both_models} for kind, job in KINDS.items()}


def describe() -> dict:
    """The contract as data (build.json's "protocol"): each request's arguments' type and its
    answer's, the page<->worker messages, and every type's fields."""
    return {"requests": {name: cls.__name__ for name, (cls, _) in REQUESTS.items()},
            "answers": {name: answer.__name__ for name, (_, answer) in REQUESTS.items()},
            "messages": {"requests": {name: [a.__name__, r.__name__] for name, (a, r) in PAGE_REQUESTS.items()},
                         "signals": {name: cls.__name__ for name, cls in SIGNALS.items()},
                         "events": {name: cls.__name__ for name, cls in EVENTS.items()},
                         "answer": Answer.__name__},
            "jobs": page_jobs(),
            "types": {name: _fields(cls) for name, cls in _all_types().items()}}


def javascript() -> str:
    """site/js/worker/protocol.gen.mjs: what the page's code reads of the contract, and no more:
    the requests (Python's and the page's: their argument and answer types' names), the signals
    and events, the jobs as their classes declare them (page_jobs), and the fields of each type a
    page request takes (site/js/page/protocol.mjs puts a request's arguments on the wire from
    them). The types themselves are documented once, in chatlens.contract."""
    d = describe()
    m = d["messages"]
    taken = dict.fromkeys(a for a, _ in m["requests"].values())  # the page's requests' argument types, in order
    out = ["// Generated from py/chatlens/protocol.py by `python -m chatlens protocol --write`: do not edit.",
           "// What the page reads of the contract between the page, its worker and Python: the requests,",
           "// the messages, the jobs, and the fields of each type a page request takes. Every type is",
           "// documented once, in py/chatlens/contract.py. On the wire every name is snake_case, as",
           "// Python writes it.", ""]
    out.append("/** Python's requests (chatlens.worker): each one's argument and answer types. */")
    out.append("export const REQUESTS = {")
    for name, (cls, answer) in REQUESTS.items():
        out.append(f"  {name}: {{ args: {json.dumps(cls.__name__)}, answers: {json.dumps(answer.__name__)} }},")
    out.append("};")
    out.append("")
    out.append("/** The page<->worker messages, by type: requests (page -> worker: [args, answer]), signals")
    out.append(" * (page -> worker, never answered), events (worker -> page) and the answer envelope. */")
    out.append("export const MESSAGES = {")
    out.append("  requests: {")
    for name, (a, r) in m["requests"].items():
        out.append(f"    {name}: {{ args: {json.dumps(a)}, answers: {json.dumps(r)} }},")
    out.append("  },")
    out.append(f"  signals: {json.dumps(m['signals'])},")
    out.append(f"  events: {json.dumps(m['events'])},")
    out.append(f"  answer: {json.dumps(m['answer'])},")
    out.append("};")
    out.append("")
    out.append("/** The page's requests that are jobs (Python pulls them a step at a time), as each job's class")
    out.append(" * declares it (py/chatlens/jobs.py Job): kind, writes, background, window, both_models. */")
    out.append("export const JOBS = {")
    for name, declared in d["jobs"].items():
        out.append(f"  {name}: {json.dumps(declared, separators=(', ', ': '))},")
    out.append("};")
    out.append("")
    out.append("/** The fields of each type a page request takes, in order. */")
    out.append("export const FIELDS = {")
    for t in taken:
        out.append(f"  {t}: {json.dumps([f['name'] for f in d['types'][t]])},")
    out.append("};")
    return "\n".join(out) + "\n"
