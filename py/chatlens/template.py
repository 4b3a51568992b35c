"""Render a model's Jinja chat template exactly as transformers' `apply_chat_template(..., tokenize=False)` does.

This mirrors transformers 5.x (checked against 5.24):

- `transformers/utils/chat_template_utils.py`, `_cached_compile_jinja_template`: the jinja2 environment
  (`ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)` with the `{% generation %}` tag and
  `loopcontrols`), the `raise_exception` and `strftime_now` globals, the `tojson` filter, and the restricted
  `dict` and `namespace` globals.
- same file, `render_jinja_template`: tool and document checks, turning every input into plain JSON-like data,
  the reasoning field aliases, and the `continue_final_message` tag-and-cut rules.
- `transformers/tokenization_utils_base.py`, `PreTrainedTokenizerBase.apply_chat_template`: the empty
  conversation check, dropping keys whose value is None, the `continue_final_message` / `add_generation_prompt`
  conflict, and the template variables `{**special_tokens_map, **kwargs}`; `get_chat_template`: choosing among
  named templates; `__init__`: a list of `{"name", "template"}` becomes a dict of named templates.
- `transformers/integrations/gguf/gguf_tokenizer_mapping.py`, `get_gguf_tokenizer`: the special tokens a GGUF
  names (bos, eos, unk, pad) are looked up in `tokenizer.ggml.tokens`.

Where transformers raises (ValueError, TypeError, jinja2 errors) this module raises `TemplateError` with the
same message. Runs under CPython and Pyodide; needs only jinja2 (numpy is used if present, never required).
"""

from __future__ import annotations

import dataclasses
import json
import sys
from collections.abc import Mapping
from contextvars import ContextVar
from datetime import datetime
from functools import lru_cache
from typing import Any, Callable

import jinja2
import jinja2.exceptions
import jinja2.ext
import jinja2.nodes
import jinja2.utils
from jinja2.sandbox import ImmutableSandboxedEnvironment

from .errors import TemplateError

__all__ = ["ChatTemplate", "SPECIAL_TOKEN_NAMES"]

# tokenization_utils_base.PreTrainedTokenizerBase.SPECIAL_TOKENS_ATTRIBUTES: the named tokens that
# `special_tokens_map` passes to every template.
SPECIAL_TOKEN_NAMES = ("bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token")

# chat_template_utils._REASONING_FIELDS
_REASONING_FIELDS = ("reasoning_content", "thinking", "reasoning")

# render_jinja_template's marker appended to the content that `continue_final_message` continues
_CONTINUE_TAG = "CONTINUE_FINAL_MESSAGE_TAG "

# The clock `strftime_now` reads, set for the duration of one render (compiled templates are shared).
_clock: ContextVar[Callable[[], datetime] | None] = ContextVar("chatlens_template_clock", default=None)


class _RaisedByTemplate(jinja2.exceptions.TemplateError):
    """What `raise_exception(message)` raises: a jinja2 TemplateError, as in transformers, that we can tell apart."""


# ---------------------------------------------------------------------------------------------------------------
# The environment (chat_template_utils._cached_compile_jinja_template)
# ---------------------------------------------------------------------------------------------------------------


class _GenerationTag(jinja2.ext.Extension):
    """`{% generation %}...{% endgeneration %}`: transformers' AssistantTracker, minus the tracking.

    transformers uses the tag only to record where assistant text lies (for `return_assistant_tokens_mask`);
    the rendered text is the body unchanged, which is all this does.
    """

    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return jinja2.nodes.CallBlock(self.call_method("_generation_support"), [], [], body).set_lineno(lineno)

    @jinja2.pass_eval_context
    def _generation_support(self, context, caller):
        return caller()


def _raise_exception(message):
    raise _RaisedByTemplate(message)


def _tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    # Like transformers: no HTML escaping (jinja's own filter escapes <, >, &, '), options passed through.
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def _strftime_now(format):
    clock = _clock.get() or datetime.now
    return clock().strftime(format)


class TemplateDict:
    # A limited `dict` so that templates can't break out through dict's attributes or type-hackery
    def __call__(self, *args, **kwargs):
        return dict(*args, **kwargs)

    def fromkeys(self, *args, **kwargs):
        return dict.fromkeys(*args, **kwargs)


class TemplateNamespace(jinja2.utils.Namespace):
    # Namespaces reject any underscore-prefixed attribute, to keep templates away from CPython internals
    def __init__(*args, **kwargs):
        self, args = args[0], args[1:]
        attrs = dict(*args, **kwargs)
        for name in attrs:
            TemplateNamespace._check_name(name)
        jinja2.utils.Namespace.__init__(self, attrs)

    def __setitem__(self, name, value):
        TemplateNamespace._check_name(name)
        jinja2.utils.Namespace.__setitem__(self, name, value)

    @staticmethod
    def _check_name(name):
        if isinstance(name, str) and name.startswith("_"):
            raise jinja2.exceptions.SecurityError(
                f"Chat templates cannot store underscore-prefixed attributes on a namespace, but got {name!r}. "
                "Please rename the attribute."
            )


def _make_environment() -> ImmutableSandboxedEnvironment:
    env = ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[_GenerationTag, jinja2.ext.loopcontrols]
    )
    env.filters["tojson"] = _tojson
    env.globals["raise_exception"] = _raise_exception
    env.globals["strftime_now"] = _strftime_now
    env.globals["dict"] = TemplateDict()
    env.globals["namespace"] = TemplateNamespace
    return env


@lru_cache(maxsize=64)
def _compile(source: str) -> jinja2.Template:
    """Compile a template once (per text), as transformers' `_compile_jinja_template` does."""
    try:
        return _make_environment().from_string(source)
    except jinja2.exceptions.TemplateSyntaxError as e:
        where = f" (line {e.lineno})" if e.lineno else ""
        raise TemplateError(f"chat template syntax error{where}: {e.message}") from e
    except jinja2.exceptions.TemplateError as e:
        raise TemplateError(f"chat template could not be compiled: {e}") from e


def _template_failure(e: Exception) -> TemplateError:
    """The TemplateError for an exception raised while a template renders."""
    if isinstance(e, _RaisedByTemplate):
        return TemplateError("" if e.message is None else str(e.message))
    if isinstance(e, jinja2.exceptions.SecurityError):
        return TemplateError(f"chat template tried an unsafe operation: {e}")
    if isinstance(e, jinja2.exceptions.TemplateError):  # UndefinedError and the like
        return TemplateError(f"chat template error: {e}")
    return TemplateError(f"chat template failed: {type(e).__name__}: {e}")


# ---------------------------------------------------------------------------------------------------------------
# Inputs (chat_template_utils: _message_objects_to_dicts, _normalize_chat_messages, _plain_template_data,
# _alias_reasoning_fields)
# ---------------------------------------------------------------------------------------------------------------


def _objects_to_dicts(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {key: _objects_to_dicts(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_objects_to_dicts(item) for item in value]
    if isinstance(value, tuple):
        return tuple(_objects_to_dicts(item) for item in value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _objects_to_dicts(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if callable(getattr(value, "model_dump", None)):  # pydantic models, like the OpenAI SDK's messages
        return _objects_to_dicts(value.model_dump())
    return value


def _normalize_messages(conversation: Any) -> list[dict]:
    messages = _objects_to_dicts(getattr(conversation, "messages", conversation))
    normalized = []
    for message in messages:
        if not isinstance(message, dict):
            raise TemplateError(f"Chat messages should be dicts, dataclasses or pydantic models, but got {message!r}.")
        # Keys whose value is None are dropped (APIs send content=None, tool_calls=None; templates handle absence)
        normalized.append({key: value for key, value in message.items() if value is not None})
    return normalized


def _plain(value: Any) -> Any:
    """A fresh copy made of plain JSON-like types; anything else becomes a placeholder like "<ndarray>"."""
    if value is None or type(value) in (str, int, float, bool):
        return value
    if isinstance(value, str):
        return str.__str__(value)
    if isinstance(value, int):
        return int.__int__(value)
    if isinstance(value, float):
        return float.__float__(value)
    if isinstance(value, Mapping):
        return {_plain(key): _plain(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_plain(item) for item in value]
    if isinstance(value, tuple):
        return tuple(_plain(item) for item in value)
    np = sys.modules.get("numpy")  # a numpy scalar can only exist once numpy is imported; never import it here
    if np is not None and isinstance(value, np.generic):
        return _plain(value.item())
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if callable(getattr(value, "model_dump", None)):
        return _plain(value.model_dump())
    return f"<{type(value).__name__}>"


def _alias_reasoning_fields(chat: list) -> list:
    aliased = []
    for message in chat:
        if isinstance(message, dict):
            reasoning = next((message[key] for key in _REASONING_FIELDS if message.get(key) is not None), None)
            if reasoning is not None:
                message = {"thinking": reasoning, **message, "reasoning_content": reasoning}
        aliased.append(message)
    return aliased


def _token_text(value: Any) -> str | None:
    """A special token as a string: tokenizer configs hold strings or AddedToken dicts {"content": ...}."""
    if value is None:
        return None
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping) and isinstance(value.get("content"), str):
        return value["content"]
    content = getattr(value, "content", None)  # a tokenizers.AddedToken
    return content if isinstance(content, str) else None


def _metadata_text(value: Any) -> Any:
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).decode("utf-8")
    return value


# ---------------------------------------------------------------------------------------------------------------
# The template
# ---------------------------------------------------------------------------------------------------------------


class ChatTemplate:
    """A model's chat template (one text, or several named ones) plus the special tokens it can refer to.

    `render(messages, ...)` returns what `tokenizer.apply_chat_template(messages, tokenize=False, ...)` returns
    for a tokenizer with the same template and special tokens.
    """

    def __init__(self, source: str | dict | list, bos_token: str | None = None, eos_token: str | None = None,
                 special_tokens: dict | None = None, clock: Callable[[], datetime] | None = None):
        if isinstance(source, (list, tuple)):
            # tokenizer_config.json's form for several templates: [{"name": ..., "template": ...}, ...]
            try:
                source = {entry["name"]: entry["template"] for entry in source}
            except (TypeError, KeyError) as e:
                raise TemplateError('a list of chat templates must hold {"name": ..., "template": ...} dicts') from e
        if isinstance(source, Mapping):
            if not source:
                raise TemplateError("no chat template: the dict of named templates is empty")
            for name, text in source.items():
                if not isinstance(name, str) or not isinstance(text, str):
                    raise TemplateError(f"chat template {name!r} is not a string")
            self.templates: dict[str, str] | None = dict(source)
            self.source: str = self.templates.get("default", next(iter(self.templates.values())))
        elif isinstance(source, str):
            self.templates = None
            self.source = source
        else:
            raise TemplateError(f"a chat template must be a string, a dict or a list, not {type(source).__name__}")

        tokens: dict[str, str] = {}
        for name, value in (special_tokens or {}).items():
            text = _token_text(value)
            if text is not None:
                tokens[name] = text
        if bos_token is not None:
            tokens["bos_token"] = _token_text(bos_token)
        if eos_token is not None:
            tokens["eos_token"] = _token_text(eos_token)
        # Named special tokens, the template variables transformers' `special_tokens_map` provides
        self.special_tokens: dict[str, str] = {k: v for k, v in tokens.items() if v is not None}
        self.clock = clock
        # Compile the default template now, so that a broken one fails when it is loaded; other named templates
        # compile when first selected (as in transformers, a broken one fails only when used)
        self._compiled: dict[str, jinja2.Template] = {}
        self._compiled_for(self.source)

    @property
    def bos_token(self) -> str | None:
        return self.special_tokens.get("bos_token")

    @property
    def eos_token(self) -> str | None:
        return self.special_tokens.get("eos_token")

    def __repr__(self) -> str:
        names = sorted(self.templates) if self.templates is not None else ["default"]
        return f"ChatTemplate(templates={names}, special_tokens={self.special_tokens})"

    # -- constructors ---------------------------------------------------------------------------------------------

    @classmethod
    def from_tokenizer_config(cls, config: dict, clock: Callable[[], datetime] | None = None) -> "ChatTemplate":
        """From a parsed `tokenizer_config.json`: its `chat_template` and named special tokens.

        Named tokens are the standard ones (bos, eos, unk, sep, pad, cls, mask), any other string `*_token`
        key, and a dict `extra_special_tokens`, as transformers 5 reads them into `special_tokens_map`.
        """
        source = config.get("chat_template")
        if source is None:
            raise TemplateError("the tokenizer config has no chat_template")
        tokens: dict[str, str] = {}
        for name in SPECIAL_TOKEN_NAMES:
            text = _token_text(config.get(name))
            if text is not None:
                tokens[name] = text
        for name, value in config.items():
            if name.endswith("_token") and name not in tokens and name not in SPECIAL_TOKEN_NAMES:
                text = _token_text(value)
                if text is not None:
                    tokens[name] = text
        extra = config.get("extra_special_tokens")
        if isinstance(extra, Mapping):
            for name, value in extra.items():
                text = _token_text(value)
                if text is not None:
                    tokens[name] = text
        return cls(source, special_tokens=tokens, clock=clock)

    @classmethod
    def from_gguf(cls, metadata: dict, tokens: list[str] | None = None,
                  clock: Callable[[], datetime] | None = None) -> "ChatTemplate":
        """From GGUF metadata (key -> value): `tokenizer.chat_template`, plus `tokenizer.chat_template.NAME` for
        named templates (llama.cpp's convention), and the bos/eos/unk/pad tokens whose ids
        `tokenizer.ggml.*_token_id` name, looked up in `tokens` (default: `tokenizer.ggml.tokens`)."""
        default = metadata.get("tokenizer.chat_template")
        prefix = "tokenizer.chat_template."
        named = {key[len(prefix):]: _metadata_text(value) for key, value in metadata.items()
                 if isinstance(key, str) and key.startswith(prefix)}
        if default is None and not named:
            raise TemplateError("the GGUF has no tokenizer.chat_template")
        default = _metadata_text(default)
        if named:
            source: str | dict = {**({"default": default} if default is not None else {}), **named}
        else:
            source = default
        if tokens is None:
            tokens = metadata.get("tokenizer.ggml.tokens")
        special: dict[str, str] = {}
        for name, key in (("bos_token", "bos_token_id"), ("eos_token", "eos_token_id"),
                          ("unk_token", "unknown_token_id"), ("pad_token", "padding_token_id")):
            token_id = metadata.get(f"tokenizer.ggml.{key}")
            if token_id is None or tokens is None:
                continue
            token_id = int(token_id)
            if not 0 <= token_id < len(tokens):
                raise TemplateError(f"tokenizer.ggml.{key} = {token_id} is outside the vocabulary ({len(tokens)})")
            special[name] = _metadata_text(tokens[token_id])
        return cls(source, special_tokens=special, clock=clock)

    # -- rendering ------------------------------------------------------------------------------------------------

    def _compiled_for(self, text: str) -> jinja2.Template:
        compiled = self._compiled.get(text)
        if compiled is None:
            compiled = self._compiled[text] = _compile(text)
        return compiled

    def select(self, template_name: str | None = None, tools: Any = None) -> str:
        """The template text `render` uses (transformers' `get_chat_template`, by name instead of by text)."""
        if self.templates is None:
            if template_name is not None and template_name != "default":
                raise TemplateError(f"this model has a single chat template; there is no template {template_name!r}")
            return self.source
        if template_name is not None:
            if template_name not in self.templates:
                raise TemplateError(f"no chat template named {template_name!r}; "
                                    f"available template names are {sorted(self.templates)}")
            return self.templates[template_name]
        if tools is not None and "tool_use" in self.templates:
            return self.templates["tool_use"]
        if "default" in self.templates:
            return self.templates["default"]
        raise TemplateError(
            "This model has multiple chat templates with no default specified! Please either pass a chat "
            "template or the name of the template you wish to use to the `chat_template` argument. Available "
            f"template names are {sorted(self.templates.keys())}."
        )

    def render(self, messages: list[dict], *, add_generation_prompt: bool = False,
               continue_final_message: bool | str = False, tools=None, documents=None,
               template_name: str | None = None, **extra) -> str:
        """The prompt text for `messages`, as `apply_chat_template(messages, tokenize=False, ...)` renders it.

        `continue_final_message` may also be the name of the field to continue (e.g. "reasoning_content"), as in
        transformers. `extra` keyword arguments become template variables (they override special tokens).
        The messages passed in are never modified.
        """
        # apply_chat_template
        chat_template = self.select(template_name, tools)
        if isinstance(messages, (list, tuple)) and len(messages) == 0:
            raise TemplateError("Cannot apply chat template to an empty conversation. Provide at least one message.")
        chat = _normalize_messages(messages)
        if continue_final_message and add_generation_prompt:
            raise TemplateError(
                "continue_final_message and add_generation_prompt are not compatible. Use continue_final_message "
                "when you want the model to continue the final message, and add_generation_prompt when you want "
                "to add a header that will prompt it to start a new assistant message instead."
            )
        kwargs = {**self.special_tokens, **extra}

        # render_jinja_template
        compiled = self._compiled_for(chat_template)
        if tools is not None:
            for tool in tools:
                if not isinstance(tool, dict):
                    # transformers also converts Python functions to JSON schemas; we take schemas only
                    raise TemplateError("Tools should be JSON schemas (dicts); converting functions to schemas "
                                        f"is not supported here, got {tool!r}")
            tools = list(tools)
        if documents is not None:
            for document in documents:
                if not isinstance(document, dict):
                    raise TemplateError("Documents should be a list of dicts with 'title' and 'text' keys!")
        tools = _plain(tools)
        documents = _plain(documents)
        kwargs = _plain(kwargs)

        chat = _plain(chat)  # a fresh copy: the edits below never touch the caller's messages
        chat = _alias_reasoning_fields(chat)
        final_message = None
        if continue_final_message:
            field = continue_final_message if isinstance(continue_final_message, str) else "content"
            final_message = chat[-1].get(field)
            if final_message is None:
                raise TemplateError(f'continue_final_message is set but the final message has no "{field}" '
                                    "to continue!")
            continue_fields = [field]
            if field in _REASONING_FIELDS:
                continue_fields = [f for f in _REASONING_FIELDS if chat[-1].get(f) == final_message]
            if not any(f in chat_template for f in continue_fields):
                raise TemplateError(f'continue_final_message is set to "{field}" but this is not an accepted '
                                    "field in the chat_template")
            elif isinstance(final_message, (list, tuple)):
                for block in reversed(final_message):
                    if "text" in block:
                        final_message = block["text"]  # the last text block
                        block["text"] = block["text"] + _CONTINUE_TAG
                        break
                else:
                    raise TemplateError("continue_final_message is set but we could not find any text to continue "
                                        "in the final message!")
            else:
                for f in continue_fields:
                    chat[-1][f] = chat[-1][f] + _CONTINUE_TAG

        token = _clock.set(self.clock)
        try:
            rendered = compiled.render(messages=chat, tools=tools, documents=documents,
                                       add_generation_prompt=add_generation_prompt, **kwargs)
        except TemplateError:
            raise
        except Exception as e:
            raise _template_failure(e) from e
        finally:
            _clock.reset(token)

        if continue_final_message:
            try:
                stripped = final_message.strip()
            except AttributeError as e:
                raise TemplateError(f"continue_final_message: cannot continue {final_message!r}") from e
            if stripped not in rendered or _CONTINUE_TAG.strip() not in rendered:
                raise TemplateError(
                    "continue_final_message is set but the final message does not appear in the chat after "
                    "applying the chat template! This can happen if the chat template deletes portions of "
                    "the final message. Please verify the chat template and final message in your chat to "
                    "ensure they are compatible."
                    f"Final message to continue: {stripped}\nRendered chat:\n{rendered}"
                )
            tag_loc = rendered.rindex(_CONTINUE_TAG.strip())
            if rendered[tag_loc:tag_loc + len(_CONTINUE_TAG)] == _CONTINUE_TAG:
                rendered = rendered[:tag_loc]  # the template kept the spacing
            else:
                rendered = rendered[:tag_loc].rstrip()  # the template trimmed the content's trailing space
        return rendered
