"""What the page's worker calls: plain JSON in, plain JSON out, one error channel.

site/js/worker/ imports this module in Pyodide and calls `call(name, args_json, ...extra)`, which
answers {"ok": true, "result": ...} or {"ok": false, "error": {"name", "message", "data"}}: the
Python exception's type and message (and its numbers where it has them: a WindowError's), which
the page raises as an Error of that name. The requests, their arguments (validated here from
those types) and their answers are chatlens.protocol's: the contract, written once.

Jobs. The page's JavaScript pulls one job at a time: `start(kind)` (chat, text, predict, count
or compare), then `step` until the answer's done is set (or `stop`); each answer is a
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

import dataclasses
import json
import time

from . import defaults, presets, protocol
from .cache import PromptCache
from .chat import preview, reply_of
from .errors import ChatlensError, TemplateError, WindowError
from .source import load_text_side
from .window import counting

# Names the render sets itself: as template variables they would collide with its own arguments
_RENDER_ARGUMENTS = ("messages", "tools", "documents", "add_generation_prompt", "continue_final_message",
                     "template_name")


class _Side:
    """One model's weights: how to make its backend, and the cache over it. Each model has its
    own (the GPU: its own program and executor), so both stay loaded at once."""

    def __init__(self):
        self.new_backend = None  # n_ctx -> Backend, once weights are there
        self.capacity = None  # the most tokens a backend from new_backend can hold
        self.cache = None  # a PromptCache over the current backend
        self.program = None  # the GPU program last built (gpu_program), for use_gpu


class _Worker:
    def __init__(self):
        self.path = None
        self.text = None  # chatlens.source.TextSide
        self.base_path = None
        self.base_text = None  # the base model's TextSide, its tokenizer checked to be the instruct's
        self.sides = {model: _Side() for model in protocol.MODELS}
        self.job = None  # the job being pulled (a _Reply, a _Count or a _Compare), if any

    def load(self, a: protocol.Load):
        self.path = a.path
        self.text = load_text_side(self.path)
        self.job = None
        self.sides["instruct"] = _Side()
        cfg = self.text.config
        return {"eos_token": self.text.eos_token, "n_ctx": cfg.n_ctx, "vocab_size": cfg.vocab_size,
                "source": self.path}

    def load_base(self, a: protocol.LoadBase):
        from .compare import check_same_tokenizer

        self._loaded()
        text = load_text_side(a.path)
        check_same_tokenizer(self.text.tokenizer, text.tokenizer)  # the comparison needs the same ids
        if self.job is not None:
            self.stop(None)
        self.base_path, self.base_text = a.path, text
        self.sides["base"] = _Side()
        cfg = text.config
        return {"eos_token": text.eos_token, "n_ctx": cfg.n_ctx, "vocab_size": cfg.vocab_size, "source": a.path}

    def _path_of(self, model):
        if model not in protocol.MODELS:
            raise ChatlensError(f"model must be {' or '.join(protocol.MODELS)}, not {model!r}")
        if model == "base":
            if self.base_text is None:
                raise ChatlensError("the base model is not loaded yet: load_base reads it first")
            return self.base_path
        return self._loaded()

    def use_numpy(self, a: protocol.UseNumpy):
        from .source import load_model

        model = load_model(self._path_of(a.model))
        self._use(a.model, model.backend, model.config.n_ctx)
        return {"backend": "numpy", "n_ctx": model.config.n_ctx}

    def gpu_program(self, a: protocol.GpuProgram):
        from .gpu import build_program, weight_plan

        side = self.sides[a.model] if a.model in self.sides else None
        path = self._path_of(a.model)
        side.program = build_program(weight_plan(path), a.n_ctx, a.features, a.limits)
        return side.program

    def use_gpu(self, a: protocol.UseGpu):
        from .gpu.backend import WebGPUBackend

        self._path_of(a.model)
        side = self.sides[a.model]
        if side.program is None:
            raise ChatlensError("use_gpu needs the program gpu_program built")
        name = a.name
        # One backend: its cache lives in the GPU's buffers, which the page's executor holds.
        backend = WebGPUBackend(side.program, None, name=f"webgpu: {name}")
        self._use(a.model, lambda n_ctx: backend, side.program["meta"]["n_ctx"])
        return {"backend": backend.name, "n_ctx": backend.capacity}

    def _use(self, model, new_backend, capacity):
        self.job = None
        side = self.sides[model]
        side.new_backend, side.capacity, side.cache = new_backend, capacity, None

    def preview(self, a):
        return self._record(a).to_json()

    # -- the job the page pulls (see the module's docstring) -----------------------------------
    def start(self, a: protocol.Start):
        if a.kind not in protocol.KINDS:
            raise ChatlensError(f"kind must be {', '.join(protocol.KINDS)}, not {a.kind!r}")
        if a.chunk < 0:
            raise ChatlensError(f"chunk must be 0 (the backend's own) or more prompt ids, not {a.chunk}")
        r = protocol.parse(protocol.KINDS[a.kind], a.args)
        if self.job is not None:
            self.stop(None)
        self._loaded()
        self.job = getattr(self, f"_{a.kind}_job")(r, a.depth, a.chunk)
        return self._answered(self.job.answer([], a.depth))

    def _chat_job(self, r: protocol.Turn, depth, chunk):
        tok, eos = self.text.tokenizer, self.text.eos_id
        record = self._record(r)
        top_k = _top_k(r.top_k, 0)
        cache = self._cache_for(record.window, f"a window of {record.window} tokens")
        shown = record.to_json()  # before the reply: what the page draws before any token

        def finish(reused, gen):
            done = reply_of(record, tok, eos, reused, gen, cache.backend.name, top_k)
            # Stopped while the prompt was read: the model read only what it fed, not the rest.
            done.computed_tokens = min(done.computed_tokens, gen.prefill_tokens)
            return done.to_json()

        return _Reply(self.text, cache, record.prompt_ids, record.max_tokens, top_k, depth, finish, chunk, shown)

    def _predict_job(self, r: protocol.Turn, depth, chunk):
        from .chat import candidate_tokens
        from .record import candidate_bytes

        tok = self.text.tokenizer
        record = self._record(r)
        top_k = _top_k(r.top_k, defaults.TOP_K) or defaults.TOP_K
        cache = self._cache_for(record.window, f"a window of {record.window} tokens")

        def finish(reused, gen):
            cache.truncate(reused)  # a look-ahead: the reuse a preview and a send report stays
            best = gen.top_k[0] if gen.top_k else []
            return {"top_k": best, "top_k_tokens": candidate_tokens(tok, [best])[0] if best else [],
                    "top_k_bytes": candidate_bytes(tok, [best])[0] if best else [],
                    "used": record.used, "reused_tokens": reused, "backend": cache.backend.name}

        return _Reply(self.text, cache, record.prompt_ids, 1, top_k, depth, finish, chunk)

    def _text_job(self, r: protocol.Text, depth, chunk):
        from .complete import continuation, prepared

        tok, eos = self.text.tokenizer, self.text.eos_id
        top_k = _top_k(r.top_k, 0)
        n = len(tok.encode(r.text)) + r.max_tokens
        cache = self._cache_for(n, f"the text and {r.max_tokens} new tokens ({n} tokens)")
        data = prepared(tok, cache, r.text, r.max_tokens)

        def finish(reused, gen):
            return continuation(tok, eos, data, reused, gen, cache.backend.name, top_k)

        return _Reply(self.text, cache, data["prompt_ids"], r.max_tokens, top_k, depth, finish, chunk)

    def _compare_job(self, r: protocol.Compare, depth, chunk):
        from .compare import plan

        if self.base_text is None:
            raise ChatlensError("the comparison needs the base model, which is not loaded: download it first")
        missing = [m for m in protocol.MODELS if self.sides[m].new_backend is None]
        if missing:
            raise ChatlensError(f"the comparison needs the {' and the '.join(missing)} model's weights, which are not "
                                "loaded yet")
        p = plan(self.text, self.base_text, r.text, max_tokens=r.max_tokens, top_k=r.top_k)
        for m in protocol.MODELS:
            self._cache_for(p.capacity, f"the comparison's {p.capacity} tokens", m)
        return _Compare(self, p, depth, chunk)

    def _count_job(self, r: protocol.Turn, depth, chunk):
        """Count exactly what a Turn's system prompt and new message need (the figures a bound
        could only put a floor under), a time-sliced step at a time."""
        preset, system = self._turn(r)
        steps = counting(self.text.tokenizer, self.text.template, system=system, messages=r.messages,
                         window=r.window, reserve=r.reserve, special_in_text=r.special_in_text)
        job = _Count(steps, self.text.config.n_ctx)
        job.advance(None, protocol.Step().ms)  # a short count is done in its start's answer
        return job

    def step(self, a: protocol.Step, raw=None):
        job = self._active()
        try:
            chosen = job.advance(raw, a.ms)
        except BaseException:
            self.job = None
            raise
        return self._answered(job.answer(chosen, a.depth))

    def stop(self, a: protocol.Empty | None):
        job = self._active()
        job.stop()
        return self._answered(job.answer([], None))

    def _answered(self, out):
        out.setdefault("prompt", None)
        out.setdefault("model", "instruct")
        out.setdefault("cell", None)
        if out["done"] is not None:
            self.job = None
        return out

    def _active(self):
        if self.job is None:
            raise ChatlensError("no job is running: start one first")
        return self.job

    def _pulled(self, kind, a, on_token=None, should_stop=None):
        """A job pulled here to its end (NumPy): the page's steps, should_stop() asked between them.
        The prompt is read in the backend's own chunks, as the command line reads it."""
        out = self.start(protocol.Start(kind=kind, args=dataclasses.asdict(a), chunk=0))
        first = True
        while True:
            for t in out["tokens"]:
                if on_token is not None:
                    on_token(t["id"], t["text"], t["token"])
            if out["done"] is not None:
                return out["done"]
            stop = not first and should_stop is not None and should_stop()
            out = self.stop(None) if stop else self.step(protocol.Step())
            first = False

    def run(self, a: protocol.Turn, on_token=None, should_stop=None):
        return self._pulled("chat", a, on_token, should_stop)

    def predict(self, a: protocol.Turn):
        return self._pulled("predict", a)

    def complete(self, a: protocol.Text, on_token=None, should_stop=None):
        return self._pulled("text", a, on_token, should_stop)

    def tokenize(self, a):
        from .complete import tokenized

        self._loaded()
        return tokenized(self.text.tokenizer, a.text)

    def chat_template(self, a):
        self._loaded()
        t = self.text.template
        return {"source": t.source, "names": sorted(t.templates) if t.templates else None,
                "special_tokens": dict(t.special_tokens)}

    def lab_source(self, a):
        from importlib import resources

        return {"name": "by_hand.py", "source": resources.files(__package__).joinpath("by_hand.py").read_text("utf-8")}

    def run_python(self, a: protocol.RunPython):
        from .usercode import run_code

        self._loaded()
        tok = self.text.tokenizer
        if not all(isinstance(n, str) for n in a.results):
            raise ChatlensError("results must be a list of names")
        try:
            return run_code(a.code, seconds=a.seconds, results=a.results,
                            names={"count_tokens": lambda text: len(tok.encode(str(text)))})
        except ValueError as e:
            raise ChatlensError(str(e)) from None

    def _cache_for(self, n: int, what: str, model="instruct") -> PromptCache:
        """The cache over `model`'s loaded backend, one that holds at least n tokens."""
        side = self.sides[model]
        if side.new_backend is None:
            raise ChatlensError(f"the {'base ' if model == 'base' else ''}model's weights are not loaded yet: "
                                "replies need them")
        if n > side.capacity:
            raise ChatlensError(f"{what} is larger than the {side.capacity} the loaded backend was built for")
        if side.cache is None or n > side.cache.capacity:
            side.cache = PromptCache(side.new_backend(n))
        return side.cache

    def render(self, a: protocol.Render):
        from .record import token_lists
        from .template import ChatTemplate, assistant_mask

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
        if a.assistant_mask:
            if continue_final:
                raise TemplateError("continue_final_message is not compatible with return_assistant_tokens_mask.")
            rendered = template.render_with_spans(a.messages, **options)
            ids, offsets = tok.encode_with_offsets(rendered.text)
            out = {"text": rendered.text, "ids": ids, "assistant_mask": assistant_mask(offsets, rendered.generation_spans)}
        else:
            text = template.render(a.messages, continue_final_message=continue_final, **options)
            out = {"text": text, "ids": tok.encode(text)}
        out.update(token_lists(tok, out["ids"]))  # as the turn record's: the page lays tokens on the text
        out["special_ids"] = tok.specials_in(out["ids"])
        return out

    def _loaded(self):
        if self.text is None:
            raise ChatlensError("no model source is loaded yet")
        return self.path

    def _turn(self, a: protocol.Turn):
        """A Turn checked as a preview checks it: (its preset, its system text)."""
        self._loaded()
        if not all(isinstance(m, dict) for m in a.messages):
            raise ChatlensError("messages must be a list of {role, content} objects")
        if a.window > self.text.config.n_ctx:
            raise WindowError(f"a window of {a.window} tokens is longer than the model's context of "
                              f"{self.text.config.n_ctx}")
        preset, custom = presets.normalize(a.preset, a.custom if a.custom is not None else a.system)
        return preset, presets.system_for(preset, custom)

    def _record(self, a: protocol.Turn):
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


class _Reply:
    """A reply being pulled: its loop (chatlens.pull.Pull over the worker's cache), the decoder
    that streams its text, and its answer once done."""

    def __init__(self, text_side, cache, prompt_ids, max_tokens, top_k, depth, finish, chunk=0, record=None):
        from .pull import Pull  # NumPy's: not needed before the weights

        self.tokenizer, self.eos_id = text_side.tokenizer, text_side.eos_id
        self.reused = cache.reusable(prompt_ids)
        cache.truncate(self.reused)
        self.pull = Pull(cache, prompt_ids[self.reused:], eos_id=self.eos_id, max_new_tokens=max_tokens,
                         top_k=top_k, depth=depth, chunk=0 if cache.planned else chunk)
        self.depth = depth
        self.finish = finish  # (reused, Generation) -> the request's answer
        self.record = record  # a chat's TurnRecord before the reply: start's answer carries it
        self.decoder = self.tokenizer.incremental_decoder()

    def advance(self, raw, ms) -> list:
        """The next step: the ids it chose. On the GPU, `raw` is the oldest run's bytes."""
        if self.pull.planned:
            if raw is None:
                raise ChatlensError("a GPU reply's step needs the bytes its oldest run read back")
            return self.pull.give(raw.to_bytes() if hasattr(raw, "to_bytes") else bytes(raw))
        return self.pull.pull()

    def stop(self):
        self.pull.stop()

    def answer(self, chosen, depth) -> dict:
        pull, tok = self.pull, self.tokenizer
        depth = self.depth if depth is None else depth
        tokens = [{"id": c.id, "text": "" if c.id == self.eos_id else self.decoder.add(c.id),
                   "token": tok.token_text(c.id), "bytes": tok.token_bytes(c.id).hex()} for c in chosen]
        runs = [r.to_json() for r in pull.runs(depth)] if pull.planned and not pull.done else []
        record, self.record = self.record, None  # the first answer's only
        done = None
        if pull.done:
            tail = self.decoder.flush()
            if tail:  # the end of a character the last ids left incomplete
                tokens.append({"id": -1, "text": tail, "token": "", "bytes": ""})
            done = self.finish(self.reused, pull.generation)
        return {"tokens": tokens, "runs": runs, "read": pull.prompt_read, "of": pull.prompt_tokens,
                "in_flight": pull.in_flight, "record": record, "done": done}


class _Compare:
    """A comparison being pulled (chatlens.compare.plan): the four replies in the plan's order,
    each a _Reply over its model's backend from an empty cache, the tokens tagged with their
    reply's model and layout. A stop ends the reply under way and every one after it."""

    def __init__(self, worker, plan, depth, chunk):
        self.worker, self.plan, self.depth, self.chunk = worker, plan, depth, chunk
        # Every reply stops at the instruct model's end of turn, read with its tokenizer (compare.plan).
        self.reading = _Reading(plan.tokenizer, plan.eos_id)
        self.cells = {}
        self.stopped = False
        self.at = -1
        self.prompt = plan.prompt  # the first answer's only: what both models read, before any step
        self.reply = None
        self._next(depth)

    def _next(self, depth):
        from .compare import cell

        self.at += 1
        if self.at >= len(self.plan.replies):
            self.reply = None
            return
        key, layout, ids = self.plan.replies[self.at]
        cache = self.worker.sides[key].cache
        cache.reset()  # from nothing, as `complete` and `run` read each prompt
        p = self.plan

        def finish(reused, gen, key=key, layout=layout):
            self.cells[key, layout] = cell(p.tokenizer, p.eos_id, reused, gen, cache.backend.name, p.top_k)
            return self.cells[key, layout]

        self.reply = _Reply(self.reading, cache, list(ids), p.max_tokens, p.top_k,
                            self.depth if depth is None else depth, finish, self.chunk)

    @property
    def key(self):
        return self.plan.replies[self.at][:2] if self.reply is not None else None

    def advance(self, raw, ms) -> list:
        return self.reply.advance(raw, ms)

    def stop(self):
        if self.reply is not None:
            self.reply.stop()
        self.stopped = True

    def answer(self, chosen, depth) -> dict:
        key, layout = self.key
        out = self.reply.answer(chosen, depth)
        tokens = [{**t, "model": key, "layout": layout} for t in out["tokens"]]
        prompt, self.prompt = self.prompt, None
        if out["done"] is not None:  # this reply has ended: the next starts in the same answer
            if self.stopped:
                self.reply = None
            else:
                self._next(depth)
            if self.reply is not None:
                nxt = self.answer([], depth)
                nxt["tokens"] = tokens + nxt["tokens"]
                nxt["prompt"] = prompt
                return nxt
            return {"tokens": tokens, "runs": [], "read": out["read"], "of": out["of"], "in_flight": 0,
                    "record": None, "done": self.plan.answer(self.cells), "prompt": prompt, "model": key,
                    "cell": len(self.plan.replies) - 1}
        return {**out, "tokens": tokens, "prompt": prompt, "model": key, "cell": self.at}


class _Reading:
    """What a _Reply reads a reply with: a tokenizer and the end-of-turn id that stops it."""

    def __init__(self, tokenizer, eos_id):
        self.tokenizer, self.eos_id = tokenizer, eos_id


class _Count:
    """A count being pulled (chatlens.window.counting): each step counts slices for at most `ms`."""

    def __init__(self, steps, context):
        self.steps, self.context = steps, context
        self.at = next(steps)  # (characters read, of all): nothing is counted yet
        self.done = None

    def advance(self, raw, ms) -> list:
        # Slices are fine-grained; a step takes as many as fit its time, so that the page's other
        # requests wait at most about that long whatever the machine's speed.
        deadline = time.perf_counter() + ms / 1000
        try:
            while True:
                self.at = next(self.steps)
                if time.perf_counter() >= deadline:
                    break
        except StopIteration as end:
            self.at = (self.at[1], self.at[1])
            self.done = {**end.value, "context": self.context}
        return []

    def stop(self):
        self.steps.close()
        self.done = {"stopped": True}

    def answer(self, chosen, depth) -> dict:
        read, of = self.at
        return {"tokens": [], "runs": [], "read": read, "of": of, "in_flight": 0, "record": None, "done": self.done}


def _top_k(k, default):
    k = default if k is None else k
    if k < 0:
        raise ChatlensError(f"top_k must be 0 (none) or more candidates, not {k}")
    return k


_worker = _Worker()
REQUESTS = {"load": _worker.load, "load_base": _worker.load_base, "preview": _worker.preview, "run": _worker.run, "use_numpy": _worker.use_numpy,
            "start": _worker.start, "step": _worker.step, "stop": _worker.stop,
            "gpu_program": _worker.gpu_program, "use_gpu": _worker.use_gpu,
            "render": _worker.render, "predict": _worker.predict, "tokenize": _worker.tokenize,
            "complete": _worker.complete, "lab_source": _worker.lab_source,
            "chat_template": _worker.chat_template, "run_python": _worker.run_python}


def call(name: str, args_json: str, *extra) -> str:
    """Answer one request: JSON in, JSON out (see the module's docstring)."""
    try:
        handler = REQUESTS.get(name)
        if handler is None:
            raise ChatlensError(f"unknown request {name!r}")
        args = json.loads(args_json) if args_json else {}
        kind = protocol.REQUESTS[name][0]
        try:
            parsed = protocol.parse(kind, args)
        except ChatlensError as e:  # a render's arguments are the template's: its kind of error
            raise (TemplateError(str(e)) if name == "render" else e) from None
        return json.dumps({"ok": True, "result": handler(parsed, *extra)})
    except Exception as e:  # every failure reaches the page as its type, message and data
        if not isinstance(e, ChatlensError):
            import traceback

            traceback.print_exc()  # a bug, not bad input: the console gets the traceback
        error = {"name": type(e).__name__, "message": str(e) or type(e).__name__}
        if getattr(e, "data", None) is not None:
            error["data"] = e.data
        return json.dumps({"ok": False, "error": error})
