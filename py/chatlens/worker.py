"""What the page's worker calls: plain JSON in, plain JSON out, one error channel.

site/js/worker/ imports this module in Pyodide and calls `call(name, args_json, ...extra)`, which
answers {"ok": true, "result": ...} or {"ok": false, "error": {"name", "message", "data"}}: the
Python exception's type and message (and its numbers where it has them: a WindowError's), which
the page raises as an Error of that name. The requests, their arguments (validated here from
those types) and their answers are chatlens.protocol's: the contract, written once.

Jobs. The page's JavaScript pulls one job at a time: `start(kind)` (chatlens.jobs.KINDS, a
class each), then `step` until the answer's done is set (or `stop`); each answer is a
protocol.PullAnswer. A chat's start answers the turn's record before any step, so a send is one
request. On the GPU the page submits a reply's runs and gives each one's bytes to `step`, oldest
first; with NumPy, `step` computes the next step itself; a count's step counts for a few
milliseconds. Between two steps the worker answers previews and the text side's requests. A new
`start` ends the job before (stopped). `run`, `predict` and `complete` pull a job to its end
here (NumPy: the tests' way in); run and complete take on_token(id, text, token) and
should_stop() as extra arguments.

Two models. `load` reads the instruct model's text side, `load_base` the base model's beside it
(refused when its tokenizer differs: chatlens.compare); `use_numpy`, `gpu_program` and `use_gpu`
take `model` (instruct or base), each model its own backend and cache. A compare job
(chatlens.compare.plan) answers what both models read in its start, then pulls the four replies
in the plan's order, each from an empty cache over its model's backend; each answer names the
model whose runs it plans, and each token its reply's model and layout.

The history is the page's: each request carries the whole conversation, and the cache reuses
whatever prefix it still holds, so a new worker (after a crash) only recomputes.
"""

import json
import traceback
from importlib import resources

from . import defaults, jobs, presets, protocol
from .cache import PromptCache
from .chat import check_window
from .compare import check_same_tokenizer
from .complete import tokenized
from .contract import PULL_MS
from .device import emulated
from .errors import ChatlensError, TemplateError, WindowError
from .pace import Pace
from .pull import greedy
from .record import token_lists
from .source import load_model, load_text_side
from .template import ChatTemplate, assistant_mask
from .turn import preview
from .usercode import run_code
from .window import counting

# Names the render sets itself: as template variables they would collide with its own arguments
_RENDER_ARGUMENTS = ("messages", "tools", "documents", "add_generation_prompt", "continue_final_message",
                     "template_name")


WRITTEN = 16  # replies whose candidates a side keeps


class _Side:
    """One model's weights: how to make its backend, the cache over it, and the candidates of the
    replies it wrote. Each model has its own (the GPU: its own program and executor), so both stay
    loaded at once."""

    def __init__(self):
        self.new_backend = None  # n_ctx -> Backend, once weights are there
        self.capacity = None  # the most tokens a backend from new_backend can hold
        self.cache = None  # a PromptCache over the current backend
        self.program = None  # the GPU program last built (gpu_program), for use_gpu
        # (prompt ids, reply ids) -> each reply step's candidates, as this backend wrote the reply:
        # a cause of it reads its figures with every piece read from them (chatlens.cause.own_rows)
        self.written = {}

    def wrote(self, prompt_ids, reply_ids, top_k):
        """Keep a reply's candidates (the last WRITTEN replies'), where it has them for every id."""
        if prompt_ids and reply_ids and top_k and len(top_k) == len(reply_ids):
            self.written[(tuple(prompt_ids), tuple(reply_ids))] = top_k
            while len(self.written) > WRITTEN:
                del self.written[next(iter(self.written))]


class _Worker:
    """The requests (each a method named as the request, answering its protocol type) and what a
    job's start takes from its host (chatlens.jobs): text, base_text, record_of, has_weights,
    cache_for, counting, written."""

    def __init__(self):
        self.path = None
        self.text = None  # chatlens.source.TextSide
        self.base_path = None
        self.base_text = None  # the base model's TextSide, its tokenizer checked to be the instruct's
        self.sides = {model: _Side() for model in protocol.MODELS}
        self.job = None  # the job being pulled (chatlens.jobs), if any
        self.checking = None  # the known-answer check's (program meta, runs), between check_program and check_read
        self.checking_weights = None  # (backend, run) between check_weights and check_weights_read

    def load(self, a: protocol.Load) -> protocol.Loaded:
        self.path = a.path
        self.text = load_text_side(self.path)
        self.job = None
        self.sides["instruct"] = _Side()
        return self._loaded_answer(self.text, a.path)

    def load_base(self, a: protocol.LoadBase) -> protocol.Loaded:
        self._loaded()
        text = load_text_side(a.path)
        check_same_tokenizer(self.text.tokenizer, text.tokenizer)  # the comparison needs the same ids
        if self.job is not None:
            self.stop(None)
        self.base_path, self.base_text = a.path, text
        self.sides["base"] = _Side()
        return self._loaded_answer(text, a.path)

    @staticmethod
    def _loaded_answer(text, path):
        cfg = text.config
        return protocol.Loaded(eos_token=text.eos_token, n_ctx=cfg.n_ctx, vocab_size=cfg.vocab_size, source=path)

    def _path_of(self, model):
        if model not in protocol.MODELS:
            raise ChatlensError(f"model must be {' or '.join(protocol.MODELS)}, not {model!r}")
        if model == "base":
            if self.base_text is None:
                raise ChatlensError("the base model is not loaded yet: load_base reads it first")
            return self.base_path
        return self._loaded()

    def use_numpy(self, a: protocol.UseNumpy) -> protocol.BackendInfo:
        model = load_model(self._path_of(a.model))
        self._use(a.model, model.backend, model.config.n_ctx)
        return protocol.BackendInfo(backend="numpy", n_ctx=model.config.n_ctx)

    def gpu_program(self, a: protocol.GpuProgram) -> dict:
        from .gpu import build_program, weight_plan  # the GPU program's modules: on the GPU path only

        path = self._path_of(a.model)
        side = self.sides[a.model]
        side.program = _faulty(build_program(weight_plan(path), a.n_ctx, a.features, a.limits, gemm=_gemm_for(a.info)),
                               a.fault)
        return side.program

    # -- the known-answer check (chatlens.check; site/js/worker/check.mjs runs it) --------------
    def check_program(self, a: protocol.CheckProgram) -> protocol.CheckProgramAnswer:
        from . import check
        from .gpu import build_program

        program = _faulty(build_program(check.plan(), check.N_CTX, a.features, a.limits, check.CHUNK,
                                        gemm=_gemm_for(a.info)), a.fault)
        self.checking = (program["meta"], check.plan_of(program))
        return protocol.CheckProgramAnswer(program=program, runs=[r.to_json() for r in self.checking[1]],
                                           spec=check.spec())

    def check_read(self, a: protocol.CheckRead, raws=None) -> protocol.CheckResult:
        from . import check

        if self.checking is None:
            raise ChatlensError("check_read reads the runs check_program planned: build it first")
        meta, runs = self.checking
        raws = [r.to_bytes() if hasattr(r, "to_bytes") else bytes(r) for r in (raws or [])]
        if len(raws) != len(runs):
            raise ChatlensError(f"check_read takes the bytes of {len(runs)} runs, not {len(raws)}")
        return check.compare(a.reference, meta, runs, raws, adapter=a.adapter, fault=meta.get("fault"))

    def check_weights(self, a: protocol.CheckWeights) -> protocol.CheckWeightsAnswer:
        from .check import WEIGHTS_TOP_K
        from .gpu.backend import WebGPUBackend

        self._path_of(a.model)
        side = self.sides[a.model]
        if side.program is None:
            raise ChatlensError("check_weights runs on the program gpu_program built")
        ids = [int(i) for i in a.reference["ids"]]
        if self.text.tokenizer.encode(a.reference.get("text") or "") != ids:
            raise ChatlensError("the weights reference's ids are not this tokenizer's reading of its text")
        # A backend of its own over the same buffers: the model's cache starts empty after it
        # (use_gpu), so what these runs leave in it is overwritten by the first prompt.
        gpu = WebGPUBackend(side.program, None)
        runs = [gpu.plan(ids[at:at + gpu.chunk], WEIGHTS_TOP_K, chooses=at + gpu.chunk >= len(ids))
                for at in range(0, len(ids), gpu.chunk)]
        self.checking_weights = (gpu, runs[-1])
        return protocol.CheckWeightsAnswer(runs=[r.to_json() for r in runs])

    def check_weights_read(self, a: protocol.CheckWeightsRead, raw=None):
        from . import check

        if self.checking_weights is None:
            raise ChatlensError("check_weights_read reads the run check_weights planned")
        gpu, run = self.checking_weights
        step = gpu.read(run, raw.to_bytes() if hasattr(raw, "to_bytes") else bytes(raw))
        return check.weights_entry(a.reference, step.top_k, step.log_z)

    def use_gpu(self, a: protocol.UseGpu) -> protocol.BackendInfo:
        from .gpu.backend import WebGPUBackend  # on the GPU path only

        self._path_of(a.model)
        side = self.sides[a.model]
        if side.program is None:
            raise ChatlensError("use_gpu needs the program gpu_program built")
        # One backend: its cache lives in the GPU's buffers, which the page's executor holds.
        backend = WebGPUBackend(side.program, None, name=f"webgpu: {a.name}")
        self._use(a.model, lambda n_ctx: backend, side.program["meta"]["n_ctx"])
        return protocol.BackendInfo(backend=backend.name, n_ctx=backend.capacity)

    def _use(self, model, new_backend, capacity):
        self.job = None
        side = self.sides[model]
        side.new_backend, side.capacity, side.cache, side.written = new_backend, capacity, None, {}

    def preview(self, a: protocol.Turn):
        return self.record_of(a)

    # -- the job the page pulls (see the module's docstring) -----------------------------------
    def start(self, a: protocol.Start) -> protocol.PullAnswer:
        if a.kind not in jobs.KINDS:
            raise ChatlensError(f"kind must be {', '.join(jobs.KINDS)}, not {a.kind!r}")
        if a.chunk < 0:
            raise ChatlensError(f"chunk must be 0 (the backend's own) or more prompt ids, not {a.chunk}")
        job = jobs.KINDS[a.kind]
        request = protocol.parse(job.takes, a.args)
        if self.job is not None:
            self.stop(None)
        self._loaded()
        self.job = job.start(self, request, depth=a.depth, chunk=a.chunk)
        return self._answered(self.job.answer([], a.depth))

    def step(self, a: protocol.Step, raw=None) -> protocol.PullAnswer:
        job = self._active()
        try:
            tokens = job.pull(raw.to_bytes() if hasattr(raw, "to_bytes") else raw, a.ms)
        except BaseException:
            self.job = None
            raise
        return self._answered(job.answer(tokens, a.depth))

    def stop(self, a: protocol.Empty | None) -> protocol.PullAnswer:
        job = self._active()
        job.stop()
        return self._answered(job.answer([], None))

    def _answered(self, out: protocol.PullAnswer) -> protocol.PullAnswer:
        if out.done is not None:
            self._ended(self.job, out.done)
            self.job = None
        return out

    def _ended(self, job, done):
        """A reply written (a chat turn's, a branch's, plain text's): its candidates kept."""
        if getattr(job, "writes", False):
            self.sides[getattr(job, "model", "instruct")].wrote(getattr(done, "prompt_ids", None),
                                                                 getattr(done, "reply_ids", None),
                                                                 getattr(done, "top_k", None))

    def written(self, model, prompt_ids, reply_ids):
        """The candidates of a reply this model wrote here after these prompt ids, or None."""
        return self.sides[model].written.get((tuple(prompt_ids), tuple(reply_ids)))

    def _active(self):
        if self.job is None:
            raise ChatlensError("no job is running: start one first")
        return self.job

    def _pulled(self, kind, request, on_token=None, should_stop=None):
        """A job pulled here to its end (NumPy: the tests' way in), as the page pulls it, with
        chatlens.pull.greedy. The prompt is read in the backend's own chunks, as the command line
        reads it; on_token(id, text, token) as each id is chosen."""
        self._loaded()
        if self.job is not None:
            self.stop(None)
        job = jobs.KINDS[kind].start(self, request, depth=defaults.IN_FLIGHT, chunk=0)
        self.job = job
        try:
            each = on_token and (lambda t: on_token(t.id, t.text, t.token))
            done = greedy(job, on_token=each, should_stop=should_stop)
            self._ended(job, done)
            return done
        finally:
            if self.job is job:
                self.job = None

    def run(self, a: protocol.Turn, on_token=None, should_stop=None):
        return self._pulled("run", a, on_token, should_stop)

    def predict(self, a: protocol.Turn) -> protocol.Prediction:
        return self._pulled("predict", a)

    def complete(self, a: protocol.Text, on_token=None, should_stop=None) -> protocol.Continuation:
        return self._pulled("complete", a, on_token, should_stop)

    def tokenize(self, a: protocol.Tokenize) -> protocol.Tokenized:
        self._loaded()
        return tokenized(self.text.tokenizer, a.text)

    def chat_template(self, a) -> protocol.TemplateInfo:
        self._loaded()
        t = self.text.template
        return protocol.TemplateInfo(source=t.source, names=sorted(t.templates) if t.templates else None,
                                     special_tokens=dict(t.special_tokens))

    def lab_source(self, a) -> protocol.LabSource:
        source = resources.files(__package__).joinpath("by_hand.py").read_text("utf-8")
        return protocol.LabSource(name="by_hand.py", source=source)

    def run_python(self, a: protocol.RunPython) -> protocol.PythonRun:
        self._loaded()
        tok = self.text.tokenizer
        if not all(isinstance(n, str) for n in a.results):
            raise ChatlensError("results must be a list of names")
        try:
            return protocol.PythonRun(**run_code(a.code, seconds=a.seconds, results=a.results,
                                                 names={"count_tokens": lambda text: len(tok.encode(str(text)))}))
        except ValueError as e:
            raise ChatlensError(str(e)) from None

    def has_weights(self, model) -> bool:
        """Whether `model`'s weights are loaded (replies can be computed with it)."""
        return self.sides[model].new_backend is not None

    def cache_for(self, n: int, what: str, model="instruct") -> PromptCache:
        """The cache over `model`'s loaded backend, one that holds at least n tokens."""
        side = self.sides[model]
        if side.new_backend is None:
            raise ChatlensError(f"the {'base ' if model == 'base' else ''}model's weights are not loaded yet: "
                                "replies need them")
        if n > side.capacity:
            raise ChatlensError(f"{what} is larger than the {side.capacity} the loaded backend was built for")
        if side.cache is not None and n > side.cache.capacity and hasattr(side.cache.backend, "grow"):
            side.cache.backend.grow(n)  # NumPy: what the cache holds stays, for the next turn
        elif side.cache is None or n > side.cache.capacity:
            backend = side.new_backend(n)
            # NumPy's passes and reads of the lab's jobs sized by their time, so that a stop waits at
            # most about one (chatlens.pace)
            paced = PULL_MS and not getattr(backend, "planned", False)
            side.cache = PromptCache(backend, pace=Pace(PULL_MS) if paced else None)
        return side.cache

    def render(self, a: protocol.Render) -> protocol.Rendered:
        self._loaded()
        template = self.text.template
        source = a.template
        if source is not None:
            # the model's special tokens (bos_token, eos_token, ...) stay the template's variables
            template = ChatTemplate(source, special_tokens=template.special_tokens, clock=template.clock)
        continue_final = a.continue_final_message
        add_generation_prompt = not continue_final if a.add_generation_prompt is None else a.add_generation_prompt
        variables = a.variables or {}
        for name in variables:
            if name in _RENDER_ARGUMENTS:
                raise TemplateError(f"variables: {name!r} is set by the render itself; send it as its own argument")
        options = {"add_generation_prompt": add_generation_prompt, "tools": a.tools, "documents": a.documents,
                   **variables}
        tok = self.text.tokenizer
        mask = None
        if a.assistant_mask:
            if continue_final:
                raise TemplateError("continue_final_message is not compatible with return_assistant_tokens_mask.")
            rendered = template.render_with_spans(a.messages, **options)
            text = rendered.text
            ids, offsets = tok.encode_with_offsets(text)
            mask = assistant_mask(offsets, rendered.generation_spans)
        else:
            text = template.render(a.messages, continue_final_message=continue_final, **options)
            ids = tok.encode(text)
        # as the turn record's: the page lays tokens on the text
        return protocol.Rendered(text=text, **token_lists(tok, ids), special_ids=tok.specials_in(ids),
                                 assistant_mask=mask)

    def _loaded(self):
        if self.text is None:
            raise ChatlensError("no model source is loaded yet")
        return self.path

    def _turn(self, a: protocol.Turn):
        """A Turn checked as a preview checks it: (its preset, its system text). The messages are
        checked where they are read (chatlens.window.check_messages)."""
        self._loaded()
        check_window(a.window, a.reserve, self.text.config.n_ctx)
        preset, custom = presets.normalize(a.preset, a.custom if a.custom is not None else a.system)
        return preset, presets.system_for(preset, custom)

    def record_of(self, a: protocol.Turn):
        """The turn record a preview answers: what the model would read, and what the instruct
        model's cache would reuse of it."""
        preset, system = self._turn(a)
        max_tokens = a.reserve if a.max_tokens is None else a.max_tokens
        try:
            record = preview(self.text.tokenizer, self.text.template, system=system,
                             messages=a.messages, window=a.window, reserve=a.reserve, preset=preset,
                             max_tokens=max_tokens, special_in_text=a.special_in_text,
                             context=self.text.config.n_ctx)
        except WindowError as e:
            if e.data is not None:  # the overflow's window is drawn as a record's: beside the model's context
                e.data["context"] = self.text.config.n_ctx
            raise
        cache = self.sides["instruct"].cache
        if cache is not None:
            record.reused_tokens = cache.reusable(record.prompt_ids)
            record.computed_tokens = record.used - record.reused_tokens
        return record

    def counting(self, a: protocol.Turn):
        """The steps of an exact count of what a Turn's system prompt and new message need."""
        _, system = self._turn(a)
        return counting(self.text.tokenizer, self.text.template, system=system, messages=a.messages,
                        window=a.window, reserve=a.reserve, special_in_text=a.special_in_text)


def _gemm_for(info):
    """The prefill GEMM of a program for this adapter: on a CPU emulation (chatlens.device.emulated)
    the one whose tiles compile fastest, since compiling is most of the setup there."""
    from .gpu import kernels

    return kernels.EMULATED_GEMM if emulated(info) else None


def _faulty(program, fault):
    """The program with chatlens.gpu.fault's fault when a faulty test build asks (build --gpu-fault)."""
    if not fault:
        return program
    from .gpu import fault as faults

    return faults.perturb(program)


_worker = _Worker()
# Each request the contract describes (protocol.REQUESTS) is the worker's method of that name.
HANDLERS = {name: getattr(_worker, name) for name in protocol.REQUESTS}


def call(name: str, args_json: str, *extra) -> str:
    """Answer one request: JSON in, JSON out (see the module's docstring)."""
    try:
        handler = HANDLERS.get(name)
        if handler is None:
            raise ChatlensError(f"unknown request {name!r}")
        args = json.loads(args_json) if args_json else {}
        kind = protocol.REQUESTS[name][0]
        try:
            parsed = protocol.parse(kind, args)
        except ChatlensError as e:  # a render's arguments are the template's: its kind of error
            raise (TemplateError(str(e)) if name == "render" else e) from None
        return json.dumps({"ok": True, "result": protocol.to_json(handler(parsed, *extra))})
    except Exception as e:  # every failure reaches the page as its type, message and data
        if not isinstance(e, ChatlensError):
            traceback.print_exc()  # a bug, not bad input: the console gets the traceback
        error = {"name": type(e).__name__, "message": str(e) or type(e).__name__}
        if getattr(e, "data", None) is not None:
            error["data"] = e.data
        return json.dumps({"ok": False, "error": error})
