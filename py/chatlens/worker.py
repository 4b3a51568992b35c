"""What the page's worker calls: plain JSON in, plain JSON out, one error channel.

site/js/worker/ imports this module in Pyodide and calls `call(name, args_json, ...extra)`, which
answers {"ok": true, "result": ...} or {"ok": false, "error": {"name", "message", "data"}}: the
Python exception's type and message (and its numbers where it has them: a WindowError's), which
the page raises as an Error of that name. The requests, their arguments (validated here from
those types) and their answers are chatlens.protocol's: the contract, written once.

Replies. The page's JavaScript pulls a reply: `start`, then `step` until the answer is done (or
`stop`). Each answer is {"tokens": [{"id", "text", "token", "bytes"}, ...] (the ids chosen by that
step: text is what each adds to the reply, decoded incrementally so no character is ever split;
token and bytes the id's token as the record's reply_tokens and reply_bytes write it; a last one
with id -1 and no token may end a character), "runs": [the
GPU runs to submit now, in order: {"sequences", "params" (the step buffer's u32 words),
"readback", "tokens", "chooses"}], "read" and "prompt" (prompt tokens read so far, of all),
"in_flight" (runs submitted whose bytes are not given yet), "done": null, or the request's
answer once the reply has ended}. On the GPU the page submits the runs and gives each one's
bytes to `step`, oldest first; with NumPy, `step` computes the next step itself. Between two
pulls the worker answers previews and the text side's requests. One reply at a time: `start`
ends the one before (stopped). `run`, `predict` and `complete` pull a reply to its end here
(NumPy: the tests' way in); run and complete take on_token(id, text, token) and should_stop()
as extra arguments.

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


class _Worker:
    def __init__(self):
        self.path = None
        self.text = None  # chatlens.source.TextSide
        self.new_backend = None  # n_ctx -> Backend, once weights are there
        self.capacity = None  # the most tokens a backend from new_backend can hold
        self.cache = None  # a PromptCache over the current backend
        self.program = None  # the GPU program last built (gpu_program), for use_gpu
        self.reply = None  # the _Reply being pulled, if any
        self.counting = None  # the count being pulled (chatlens.window.counting), if any
        self.count_at = (0, 0)  # where it is: characters read, of all

    def load(self, a: protocol.Load):
        self.path = a.path
        self.text = load_text_side(self.path)
        self.new_backend = self.capacity = self.cache = self.program = self.reply = None
        cfg = self.text.config
        return {"eos_token": self.text.eos_token, "n_ctx": cfg.n_ctx, "vocab_size": cfg.vocab_size,
                "source": self.path}

    def use_numpy(self, a):
        from .source import load_model

        model = load_model(self._loaded())
        self._use(model.backend, model.config.n_ctx)
        return {"backend": "numpy", "n_ctx": model.config.n_ctx}

    def gpu_program(self, a):
        from .gpu import build_program, weight_plan

        self.program = build_program(weight_plan(self._loaded()), a.n_ctx, a.features, a.limits)
        return self.program

    def use_gpu(self, a: protocol.UseGpu):
        from .gpu.backend import WebGPUBackend

        if self.program is None:
            raise ChatlensError("use_gpu needs the program gpu_program built")
        name = a.name
        # One backend: its cache lives in the GPU's buffers, which the page's executor holds.
        backend = WebGPUBackend(self.program, None, name=f"webgpu: {name}")
        self._use(lambda n_ctx: backend, self.program["meta"]["n_ctx"])
        return {"backend": backend.name, "n_ctx": backend.capacity}

    def _use(self, new_backend, capacity):
        self.reply = None
        self.new_backend, self.capacity, self.cache = new_backend, capacity, None

    def preview(self, a):
        return self._record(a).to_json()

    # -- replies the page pulls (see the module's docstring) -------------------------------------
    def start(self, a: protocol.Start):
        if a.kind not in protocol.KINDS:
            raise ChatlensError(f"kind must be {', '.join(protocol.KINDS)}, not {a.kind!r}")
        kind, depth, chunk = a.kind, a.depth, a.chunk
        r = protocol.parse(protocol.KINDS[kind], a.args)
        if self.reply is not None:
            self.stop(None)
        self._loaded()
        tok, eos = self.text.tokenizer, self.text.eos_id
        if kind in ("chat", "predict"):
            record = self._record(r)
            top_k = _top_k(r.top_k, 0) if kind == "chat" else (_top_k(r.top_k, defaults.TOP_K) or defaults.TOP_K)
            cache = self._cache_for(record.window, f"a window of {record.window} tokens")
            ids, max_tokens = record.prompt_ids, (record.max_tokens if kind == "chat" else 1)
        else:
            from .complete import prepared

            max_tokens, top_k = r.max_tokens, _top_k(r.top_k, 0)
            n = len(tok.encode(r.text)) + max_tokens
            cache = self._cache_for(n, f"the text and {max_tokens} new tokens ({n} tokens)")
            data = prepared(tok, cache, r.text, max_tokens)
            ids = data["prompt_ids"]

        def finish(reused, gen):
            """The request's answer, once the reply has ended."""
            if kind == "chat":
                done = reply_of(record, tok, eos, reused, gen, cache.backend.name, top_k)
                # Stopped while the prompt was read: the model read only what it fed, not the rest.
                done.computed_tokens = min(done.computed_tokens, gen.prefill_tokens)
                return done.to_json()
            if kind == "text":
                from .complete import continuation

                return continuation(tok, eos, data, reused, gen, cache.backend.name, top_k)
            from .chat import candidate_tokens
            from .record import candidate_bytes

            cache.truncate(reused)  # a look-ahead: the reuse a preview and a send report stays
            best = gen.top_k[0] if gen.top_k else []
            return {"top_k": best, "top_k_tokens": candidate_tokens(tok, [best])[0] if best else [],
                    "top_k_bytes": candidate_bytes(tok, [best])[0] if best else [],
                    "used": record.used, "reused_tokens": reused, "backend": cache.backend.name}

        if chunk < 0:
            raise ChatlensError(f"chunk must be 0 (the backend's own) or more prompt ids, not {chunk}")
        self.reply = _Reply(self.text, cache, ids, max_tokens, top_k, depth, finish, chunk=0 if cache.planned else chunk)
        return self._answered(self.reply, [], depth)

    def step(self, a: protocol.Step, raw=None):
        reply = self._active()
        depth = reply.depth if a.depth is None else a.depth
        try:
            if reply.pull.planned:
                if raw is None:
                    raise ChatlensError("a GPU reply's step needs the bytes its oldest run read back")
                chosen = reply.pull.give(raw.to_bytes() if hasattr(raw, "to_bytes") else bytes(raw))
            else:
                chosen = reply.pull.pull()
        except BaseException:
            self.reply = None
            raise
        return self._answered(reply, chosen, depth)

    def stop(self, a: protocol.Empty | None):
        reply = self._active()
        reply.pull.stop()
        return self._answered(reply, [], reply.depth)

    def _answered(self, reply, chosen, depth):
        out = reply.answer(chosen, depth)
        if out["done"] is not None:
            self.reply = None
        return out

    def _active(self):
        if self.reply is None:
            raise ChatlensError("no reply is being written")
        return self.reply

    def _pulled(self, kind, a, on_token=None, should_stop=None):
        """A reply pulled here to its end (NumPy): the page's steps, should_stop() asked between them.
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

    # -- a count the page pulls, like a reply: `count`, then `count_step` until done ---------------
    def count(self, a: protocol.Turn):
        """Start counting exactly what a Turn's system prompt and new message need (the figures a
        bound could only put a floor under); it replaces a count already running."""
        self.count_stop(None)
        preset, system = self._turn(a)
        self.counting = counting(self.text.tokenizer, self.text.template, system=system, messages=a.messages,
                                 window=a.window, reserve=a.reserve, special_in_text=a.special_in_text)
        return self.count_step(protocol.CountStep())

    def count_step(self, a: protocol.CountStep):
        steps = self.counting
        if steps is None:
            raise ChatlensError("no count is running")
        # Slices are fine-grained; a step takes as many as fit its time, so that the page's other
        # requests wait at most about that long whatever the machine's speed.
        deadline = time.perf_counter() + a.ms / 1000
        try:
            while True:
                self.count_at = next(steps)
                if time.perf_counter() >= deadline:
                    read, of = self.count_at
                    return {"read": read, "of": of, "done": None}
        except StopIteration as done:
            self.counting = None
            of = self.count_at[1]
            return {"read": of, "of": of, "done": {**done.value, "context": self.text.config.n_ctx}}
        except BaseException:
            self.counting = None
            raise

    def count_stop(self, a: protocol.Empty | None):
        running, self.counting = self.counting, None
        if running is not None:
            running.close()
        return {"stopped": running is not None}

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

    def _cache_for(self, n: int, what: str) -> PromptCache:
        """The cache over the loaded backend, one that holds at least n tokens."""
        if self.new_backend is None:
            raise ChatlensError("the model's weights are not loaded yet: replies need them")
        if n > self.capacity:
            raise ChatlensError(f"{what} is larger than the {self.capacity} the loaded backend was built for")
        if self.cache is None or n > self.cache.capacity:
            self.cache = PromptCache(self.new_backend(n))
        return self.cache

    def render(self, a: protocol.Render):
        from .record import token_bytes
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
        out["tokens"] = [tok.token_text(i) for i in out["ids"]]
        out["vocab"] = [tok.id_to_token(i) for i in out["ids"]]
        out["bytes"] = token_bytes(tok, out["ids"])  # as the turn record's: the page lays tokens on the text
        out["special_ids"] = sorted(set(out["ids"]) & tok.special_ids)
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
        if self.cache is not None:
            record.reused_tokens = self.cache.reusable(record.prompt_ids)
            record.computed_tokens = record.used - record.reused_tokens
        return record


class _Reply:
    """A reply being pulled: its loop (chatlens.pull.Pull over the worker's cache), the decoder
    that streams its text, and its answer once done."""

    def __init__(self, text_side, cache, prompt_ids, max_tokens, top_k, depth, finish, chunk=0):
        from .pull import Pull

        self.tokenizer, self.eos_id = text_side.tokenizer, text_side.eos_id
        self.reused = cache.reusable(prompt_ids)
        cache.truncate(self.reused)
        self.pull = Pull(cache, prompt_ids[self.reused:], eos_id=self.eos_id, max_new_tokens=max_tokens,
                         top_k=top_k, depth=depth, chunk=chunk)
        self.depth = depth
        self.finish = finish  # (reused, Generation) -> the request's answer
        self.decoder = self.tokenizer.incremental_decoder()

    def answer(self, chosen, depth) -> dict:
        pull, tok = self.pull, self.tokenizer
        tokens = [{"id": c.id, "text": "" if c.id == self.eos_id else self.decoder.add(c.id),
                   "token": tok.token_text(c.id), "bytes": tok.token_bytes(c.id).hex()} for c in chosen]
        runs = [r.to_json() for r in pull.runs(depth)] if pull.planned and not pull.done else []
        done = None
        if pull.done:
            tail = self.decoder.flush()
            if tail:  # the end of a character the last ids left incomplete
                tokens.append({"id": -1, "text": tail, "token": "", "bytes": ""})
            done = self.finish(self.reused, pull.generation)
        return {"tokens": tokens, "runs": runs, "read": pull.prompt_read, "prompt": pull.prompt_tokens,
                "in_flight": pull.in_flight, "done": done}


def _top_k(k, default):
    k = default if k is None else k
    if k < 0:
        raise ChatlensError(f"top_k must be 0 (none) or more candidates, not {k}")
    return k


_worker = _Worker()
REQUESTS = {"load": _worker.load, "preview": _worker.preview, "run": _worker.run, "use_numpy": _worker.use_numpy,
            "start": _worker.start, "step": _worker.step, "stop": _worker.stop,
            "gpu_program": _worker.gpu_program, "use_gpu": _worker.use_gpu,
            "render": _worker.render, "predict": _worker.predict, "tokenize": _worker.tokenize,
            "complete": _worker.complete, "lab_source": _worker.lab_source,
            "chat_template": _worker.chat_template, "run_python": _worker.run_python,
            "count": _worker.count, "count_step": _worker.count_step, "count_stop": _worker.count_stop}


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
