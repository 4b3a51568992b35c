"""What the page's worker calls: plain JSON in, plain JSON out, one error channel.

site/js/worker/ imports this module in Pyodide and calls `call(name, args_json, ...)`, which
answers {"ok": true, "result": ...} or {"ok": false, "error": {"name": ..., "message": ...}}:
the Python exception's type and message, which the page raises as an Error of that name. The
requests (`args` is what the page sends, as JSON):

  load         {"path": FS path of the model's files (a GGUF, or a Hugging Face folder)}
               -> {"eos_token", "n_ctx", "vocab_size", "source"}: the text side is ready
  preview      {"messages": [{role, content}, ...], "window": N, "reserve": N, "maxTokens"?: N,
                and the system prompt as "preset" (+ "custom" text) or as "system" (text, or null
                for the template's default); "specialInText"?: false reads special tokens written
                in the messages as their characters}
               -> the chatlens.record.TurnRecord of what the model would read, with the reuse that
               running it now would get from the cache
  use_numpy    {} -> {"backend": "numpy"}: the weights are read from `path` (the whole files in
               the worker's file system) into NumPy arrays; the next `run` computes with them
  gpu_program  {"n_ctx", "features", "limits"} -> the GPU program of the forward pass
               (chatlens.gpu.program) for this source, built for the adapter; only the tensors'
               headers need to be in the file system, the worker's JS uploads the bytes
  use_gpu      {"name"?: the adapter's name} -> {"backend", "n_ctx"}: the next reply computes on
               the GPU with that program; the worker's JavaScript runs its steps
               (site/js/gpu/executor.mjs), Python never waits for it
  start        a reply the page pulls, one call a step (see "Replies" below):
               {"kind": "chat", the same as preview, "topK"?: K} a chat reply: its answer is the
                  TurnRecord with the reply (K > 0 fills top_k and top_k_tokens: each reply
                  token's K best candidates as [id, logit, probability])
               {"kind": "text", "text", "maxTokens"?: N (default the reply limit), "topK"?: K} the
                  greedy continuation of plain text (chatlens.complete.continuation's data)
               {"kind": "predict", the same as preview, "topK"?: K (default defaults.TOP_K)} the K
                  most likely first tokens of the reply: {"top_k": [[id, logit, probability], ...],
                  "top_k_tokens", "used", "reused_tokens", "backend"}; the cache is left as it
                  was, so the reuse a preview and a send report is unchanged
               and "depth"?: N, the GPU steps to keep in flight (default 2) -> a pull's answer
  step         {"depth"?: N} and, on the GPU, the bytes the oldest run read back (an extra
               argument) -> a pull's answer
  stop         {} -> a pull's answer, done: the reply ends now with stop_reason "stopped" (the
               steps in flight are discarded, the cache keeps what was accepted)
  run, predict, complete   start's chat, predict and text, pulled here to the end (NumPy: the
               tests' way in). run and complete take extra arguments: on_token(id, text, piece)
               for each reply id, should_stop() asked between steps
  tokenize     {"text"} -> {"prompt_ids", "prompt_tokens", "prompt_vocab", "special_ids"}: the
               text's tokens without any template (special tokens written in it matched)
  chat_template {} -> {"source": the model's chat template (the default one of several), "names":
               the named templates or null, "special_tokens": the template variables it names}
  lab_source   {} -> {"name", "source"}: the lab's hand-written template and window code
               (chatlens/by_hand.py, as the installed package holds it)
  run_python   {"code", "seconds"?: the time limit (default 3), "results"?: [names]} -> the code
               run as __main__ with `count_tokens(text)` (the model's tokenizer) among its globals
               (chatlens.usercode.run_code: stdout, stderr, error, timed_out, results)
  render       {"messages": [...], "template"?: Jinja text (default: the model's), "tools"?: [...],
                "documents"?: [...], "add_generation_prompt"?: bool (default true, false when
                continuing), "continue_final_message"?: bool or the field to continue,
                "variables"?: {name: value} (extra template variables), "assistant_mask"?: bool}
               -> {"text", "ids", "tokens" (each id's text), "vocab" (each id's token as the
               vocabulary writes it), "special_ids", and with assistant_mask
               "assistant_mask" (1 for each token inside a {% generation %} block)}: for a template
               workbench, what transformers' apply_chat_template gives; a template that fails is a
               TemplateError (a syntax error names its line)

Replies. The page's JavaScript pulls a reply: `start`, then `step` until the answer is done (or
`stop`). Each answer is {"tokens": [{"id", "text", "piece"}, ...] (the ids chosen by that step:
text is what each adds to the reply, decoded incrementally so no character is ever split; piece
its token as the vocabulary writes it; a last one with id -1 may end a character), "runs": [the
GPU runs to submit now, in order: {"sequences", "params" (the step buffer's u32 words),
"readback", "tokens", "chooses"}], "read" and "prompt" (prompt tokens read so far, of all),
"in_flight" (runs submitted whose bytes are not given yet), "done": null, or the request's
answer once the reply has ended}. On the GPU the page submits the runs and gives each one's
bytes to `step`, oldest first; with NumPy, `step` computes the next step itself. Between two
pulls the worker answers previews and the text side's requests. One reply at a time: `start`
ends the one before (stopped).

The history is the page's: each request carries the whole conversation, and the cache reuses
whatever prefix it still holds, so a new worker (after a crash) only recomputes.
"""

import json

from . import defaults, presets
from .cache import PromptCache
from .chat import preview as preview_record, reply_of
from .errors import ChatlensError, TemplateError
from .source import load_text_side

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

    def load(self, a):
        self.path = _arg(a, "path", str)
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

        self.program = build_program(weight_plan(self._loaded()), _arg(a, "n_ctx", int),
                                     a.get("features") or [], a.get("limits") or {})
        return self.program

    def use_gpu(self, a):
        from .gpu.backend import WebGPUBackend

        if self.program is None:
            raise ChatlensError("use_gpu needs the program gpu_program built")
        name = a.get("name") or "adapter"
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
    def start(self, a):
        if self.reply is not None:
            self.stop({})
        kind = a.get("kind", "chat")
        depth = _arg(a, "depth", int, 2)
        tok, eos = (self.text.tokenizer, self.text.eos_id) if self.text is not None else (None, None)
        if kind in ("chat", "predict"):
            record = self._record(a)
            top_k = _top_k(a, 0) if kind == "chat" else (_top_k(a, defaults.TOP_K) or defaults.TOP_K)
            cache = self._cache_for(record.window, f"a window of {record.window} tokens")
            ids, max_tokens = record.prompt_ids, (record.max_tokens if kind == "chat" else 1)
        elif kind == "text":
            from .complete import prepared

            self._loaded()
            text = _arg(a, "text", str)
            max_tokens = _arg(a, "maxTokens", int, defaults.REPLY_LIMIT)
            top_k = _top_k(a, 0)
            n = len(self.text.tokenizer.encode(text)) + max_tokens
            cache = self._cache_for(n, f"the text and {max_tokens} new tokens ({n} tokens)")
            data = prepared(tok, cache, text, max_tokens)
            ids = data["prompt_ids"]
        else:
            raise ChatlensError(f"kind must be chat, text or predict, not {kind!r}")

        def finish(reused, gen):
            """The request's answer, once the reply has ended."""
            if kind == "chat":
                return reply_of(record, tok, eos, reused, gen, cache.backend.name, top_k).to_json()
            if kind == "text":
                from .complete import continuation

                return continuation(tok, eos, data, reused, gen, cache.backend.name, top_k)
            from .chat import candidate_tokens

            cache.truncate(reused)  # a look-ahead: the reuse a preview and a send report stays
            best = gen.top_k[0] if gen.top_k else []
            return {"top_k": best, "top_k_tokens": candidate_tokens(tok, [best])[0] if best else [],
                    "used": record.used, "reused_tokens": reused, "backend": cache.backend.name}

        self.reply = _Reply(self.text, cache, ids, max_tokens, top_k, depth, finish)
        return self._answered(self.reply, [], depth)

    def step(self, a, raw=None):
        reply = self._active()
        depth = _arg(a, "depth", int, reply.depth)
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

    def stop(self, a):
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

    def _pulled(self, a, on_token=None, should_stop=None):
        """A reply pulled here to its end (NumPy): the page's steps, should_stop() asked between them."""
        out = self.start(a)
        first = True
        while True:
            for t in out["tokens"]:
                if on_token is not None:
                    on_token(t["id"], t["text"], t["piece"])
            if out["done"] is not None:
                return out["done"]
            stop = not first and should_stop is not None and should_stop()
            out = self.stop({}) if stop else self.step({})
            first = False

    def run(self, a, on_token=None, should_stop=None):
        return self._pulled({**a, "kind": "chat"}, on_token, should_stop)

    def predict(self, a):
        return self._pulled({**a, "kind": "predict"})

    def complete(self, a, on_token=None, should_stop=None):
        return self._pulled({**a, "kind": "text"}, on_token, should_stop)

    def tokenize(self, a):
        from .complete import tokenized

        self._loaded()
        return tokenized(self.text.tokenizer, _arg(a, "text", str))

    def chat_template(self, a):
        self._loaded()
        t = self.text.template
        return {"source": t.source, "names": sorted(t.templates) if t.templates else None,
                "special_tokens": dict(t.special_tokens)}

    def lab_source(self, a):
        from importlib import resources

        return {"name": "by_hand.py", "source": resources.files(__package__).joinpath("by_hand.py").read_text("utf-8")}

    def run_python(self, a):
        from .usercode import DEFAULT_SECONDS, run_code

        self._loaded()
        tok = self.text.tokenizer
        seconds = a.get("seconds", DEFAULT_SECONDS)
        if isinstance(seconds, bool) or not isinstance(seconds, (int, float)):
            raise ChatlensError(f"seconds must be a number, not {seconds!r}")
        results = a.get("results") or []
        if not isinstance(results, list) or not all(isinstance(n, str) for n in results):
            raise ChatlensError("results must be a list of names")
        try:
            return run_code(_arg(a, "code", str), seconds=seconds, results=results,
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

    def render(self, a):
        from .template import ChatTemplate, assistant_mask

        self._loaded()
        template = self.text.template
        source = a.get("template")
        if source is not None:
            if not isinstance(source, str):
                raise TemplateError(f"template must be the template's text, not {type(source).__name__}")
            # the model's special tokens (bos_token, eos_token, ...) stay the template's variables
            template = ChatTemplate(source, special_tokens=template.special_tokens, clock=template.clock)
        continue_final = a.get("continue_final_message", False)
        if not isinstance(continue_final, (bool, str)):
            raise TemplateError("continue_final_message must be true, false or the name of the field to continue")
        add_generation_prompt = a.get("add_generation_prompt", not continue_final)
        if not isinstance(add_generation_prompt, bool):
            raise TemplateError("add_generation_prompt must be true or false")
        variables = a.get("variables") or {}
        if not isinstance(variables, dict):
            raise TemplateError("variables must be an object of template variables")
        for name in variables:
            if name in _RENDER_ARGUMENTS:
                raise TemplateError(f"variables: {name!r} is set by the render itself; send it as its own argument")
        options = {"add_generation_prompt": add_generation_prompt, "tools": a.get("tools"),
                   "documents": a.get("documents"), **variables}
        tok = self.text.tokenizer
        if a.get("assistant_mask"):
            if continue_final:
                raise TemplateError("continue_final_message is not compatible with return_assistant_tokens_mask.")
            rendered = template.render_with_spans(a.get("messages"), **options)
            ids, offsets = tok.encode_with_offsets(rendered.text)
            out = {"text": rendered.text, "ids": ids, "assistant_mask": assistant_mask(offsets, rendered.generation_spans)}
        else:
            text = template.render(a.get("messages"), continue_final_message=continue_final, **options)
            out = {"text": text, "ids": tok.encode(text)}
        out["tokens"] = [tok.token_text(i) for i in out["ids"]]
        out["vocab"] = [tok.id_to_token(i) for i in out["ids"]]  # exact bytes: the page lays tokens on the text
        out["special_ids"] = sorted(set(out["ids"]) & tok.special_ids)
        return out

    def _loaded(self):
        if self.text is None:
            raise ChatlensError("no model source is loaded yet")
        return self.path

    def _record(self, a):
        self._loaded()
        messages = a.get("messages")
        if not isinstance(messages, list) or not all(isinstance(m, dict) for m in messages):
            raise ChatlensError("messages must be a list of {role, content} objects")
        window = _arg(a, "window", int, defaults.DEFAULT_WINDOW)
        reserve = _arg(a, "reserve", int, defaults.REPLY_LIMIT)
        max_tokens = _arg(a, "maxTokens", int, reserve)
        if window > self.text.config.n_ctx:
            raise ChatlensError(f"a window of {window} tokens is longer than the model's context of "
                                f"{self.text.config.n_ctx}")
        preset, custom = presets.normalize(a.get("preset"), a.get("custom", a.get("system")))
        special_in_text = a.get("specialInText", True)
        if not isinstance(special_in_text, bool):
            raise ChatlensError(f"specialInText must be true or false, not {special_in_text!r}")
        record = preview_record(self.text.tokenizer, self.text.template, system=presets.system_for(preset, custom),
                                messages=messages, window=window, reserve=reserve, preset=preset,
                                max_tokens=max_tokens, special_in_text=special_in_text)
        if self.cache is not None:
            record.reused_tokens = self.cache.reusable(record.prompt_ids)
            record.computed_tokens = record.used - record.reused_tokens
        return record


class _Reply:
    """A reply being pulled: its loop (chatlens.pull.Pull over the worker's cache), the decoder
    that streams its text, and its answer once done."""

    def __init__(self, text_side, cache, prompt_ids, max_tokens, top_k, depth, finish):
        from .pull import Pull

        self.tokenizer, self.eos_id = text_side.tokenizer, text_side.eos_id
        self.reused = cache.reusable(prompt_ids)
        cache.truncate(self.reused)
        self.pull = Pull(cache, prompt_ids[self.reused:], eos_id=self.eos_id, max_new_tokens=max_tokens,
                         top_k=top_k, depth=depth)
        self.depth = depth
        self.finish = finish  # (reused, Generation) -> the request's answer
        self.decoder = self.tokenizer.incremental_decoder()

    def answer(self, chosen, depth) -> dict:
        pull, tok = self.pull, self.tokenizer
        tokens = [{"id": c.id, "text": "" if c.id == self.eos_id else self.decoder.add(c.id),
                   "piece": tok.token_text(c.id)} for c in chosen]
        runs = [r.to_json() for r in pull.runs(depth)] if pull.planned and not pull.done else []
        done = None
        if pull.done:
            tail = self.decoder.flush()
            if tail:  # the end of a character the last ids left incomplete
                tokens.append({"id": -1, "text": tail, "piece": ""})
            done = self.finish(self.reused, pull.generation)
        return {"tokens": tokens, "runs": runs, "read": pull.prompt_read, "prompt": pull.prompt_tokens,
                "in_flight": pull.in_flight, "done": done}


def _top_k(a, default):
    k = _arg(a, "topK", int, default)
    if k < 0:
        raise ChatlensError(f"topK must be 0 (none) or more candidates, not {k}")
    return k


def _arg(a, name, kind, default=None):
    value = a.get(name, default)
    if value is None and default is None:
        raise ChatlensError(f"the request lacks {name!r}")
    if kind is int:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or int(value) != value:
            raise ChatlensError(f"{name} must be a whole number, not {value!r}")
        return int(value)
    if not isinstance(value, kind):
        raise ChatlensError(f"{name} must be {kind.__name__}, not {value!r}")
    return value


_worker = _Worker()
REQUESTS = {"load": _worker.load, "preview": _worker.preview, "run": _worker.run, "use_numpy": _worker.use_numpy,
            "start": _worker.start, "step": _worker.step, "stop": _worker.stop,
            "gpu_program": _worker.gpu_program, "use_gpu": _worker.use_gpu,
            "render": _worker.render, "predict": _worker.predict, "tokenize": _worker.tokenize,
            "complete": _worker.complete, "lab_source": _worker.lab_source,
            "chat_template": _worker.chat_template, "run_python": _worker.run_python}


def call(name: str, args_json: str, *callbacks) -> str:
    """Answer one request: JSON in, JSON out (see the module's docstring)."""
    try:
        handler = REQUESTS.get(name)
        if handler is None:
            raise ChatlensError(f"unknown request {name!r}")
        args = json.loads(args_json) if args_json else {}
        if not isinstance(args, dict):
            raise ChatlensError("a request's arguments must be an object")
        return json.dumps({"ok": True, "result": handler(args, *callbacks)})
    except Exception as e:  # every failure reaches the page as its type and message
        if not isinstance(e, ChatlensError):
            import traceback

            traceback.print_exc()  # a bug, not bad input: the console gets the traceback
        return json.dumps({"ok": False, "error": {"name": type(e).__name__, "message": str(e) or type(e).__name__}})
