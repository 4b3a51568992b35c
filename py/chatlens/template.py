"""Render a model's Jinja chat template exactly as transformers' `apply_chat_template(..., tokenize=False)` does.

This mirrors transformers 5.x (checked against 5.24):

- `transformers/utils/chat_template_utils.py`, `render_jinja_template`: tool and document checks, turning every
  input into plain JSON-like data, the reasoning field aliases, and the `continue_final_message` tag-and-cut rules.
- `transformers/tokenization_utils_base.py`, `PreTrainedTokenizerBase.apply_chat_template`: the empty
  conversation check, dropping keys whose value is None, the `continue_final_message` / `add_generation_prompt`
  conflict, and the template variables `{**special_tokens_map, **kwargs}`; `get_chat_template`: choosing among
  named templates; `__init__`: a list of `{"name", "template"}` becomes a dict of named templates.
- `transformers/integrations/gguf/gguf_tokenizer_mapping.py`, `get_gguf_tokenizer`: the special tokens a GGUF
  names (bos, eos, unk, pad) are looked up in `tokenizer.ggml.tokens`.

Where transformers raises (ValueError, TypeError, jinja2 errors) this module raises `TemplateError`, with the
same message where transformers' is a sentence and with one that says what was wrong where transformers fails
with a bare TypeError from deep inside. `render_with_spans` gives the `{% generation %}` spans transformers uses
for `return_assistant_tokens_mask`, and `assistant_mask` the per-token mask.

Templates come from model files and from users, so chatlens is stricter than transformers in a few places, each
with a TemplateError that says why. The jinja2 environment templates render in (transformers'
`_cached_compile_jinja_template`), its sandbox's refusals and the render limits (`RenderLimits`) are
chatlens.sandbox's; here, messages that are not a list of messages (a string, a dict, None) are refused where
transformers would iterate over them.

Runs under CPython and Pyodide; needs only jinja2 (numpy is used if present, never required).
"""

from __future__ import annotations

import dataclasses
import re
import sys
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any, Callable

import jinja2

from .errors import TemplateError
# Underscored names: shared with this module only, not part of chatlens.sandbox's interface to anything else
from .sandbox import (DEFAULT_LIMITS, RenderLimits, _Budget, _budget, _clock, _compile, _LimitReached,
                      _template_failure)

__all__ = ["ChatTemplate", "RenderLimits", "Rendered", "SPECIAL_TOKEN_NAMES", "assistant_mask", "has_generation_tag"]

# tokenization_utils_base.PreTrainedTokenizerBase.SPECIAL_TOKENS_ATTRIBUTES: the named tokens that
# `special_tokens_map` passes to every template.
SPECIAL_TOKEN_NAMES = ("bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token")

# chat_template_utils._REASONING_FIELDS
_REASONING_FIELDS = ("reasoning_content", "thinking", "reasoning")

# render_jinja_template's marker appended to the content that `continue_final_message` continues
_CONTINUE_TAG = "CONTINUE_FINAL_MESSAGE_TAG "


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


def _kind(value) -> str:
    return "None" if value is None else type(value).__name__


def _check_messages(messages):
    """Messages must be one conversation: a list of message dicts (or objects that read as dicts)."""
    if type(messages) is list and not (messages and type(messages[0]) in (list, tuple)):
        return  # the usual case, decided without the slower abstract-class checks below
    if isinstance(messages, Mapping):
        raise TemplateError("messages must be a list of message dicts, not a dict (one message? put it in a list)")
    if isinstance(messages, (str, bytes)) or messages is None or not (
            isinstance(messages, Iterable) or hasattr(messages, "messages")):
        raise TemplateError(f"messages must be a list of message dicts, not {_kind(messages)}")
    if isinstance(messages, (list, tuple)) and messages and isinstance(messages[0], (list, tuple)):
        # transformers renders a batch here and returns a list of texts; one conversation is rendered at a time
        raise TemplateError("messages must be one conversation (a list of message dicts), not a batch of "
                            "conversations")


def _checked_tools(tools) -> list:
    """The tools as a list of JSON schemas (render_jinja_template's tool_schemas). Like transformers, anything
    iterable is taken item by item (so an empty string or dict is no tools at all)."""
    what = f"tools must be a list of JSON schemas (dicts), not {_kind(tools)}"
    if not isinstance(tools, Iterable):
        raise TemplateError(what)
    schemas = []
    for tool in tools:
        if not isinstance(tool, dict):
            if isinstance(tools, (str, bytes, Mapping)):
                raise TemplateError(what)
            # transformers also converts Python functions to JSON schemas; we take schemas only
            raise TemplateError("Tools should be JSON schemas (dicts); converting functions to schemas "
                                f"is not supported here, got {tool!r}")
        schemas.append(tool)
    return schemas


def _check_documents(documents):
    what = f"documents must be a list of dicts with 'title' and 'text' keys, not {_kind(documents)}"
    if not isinstance(documents, Iterable):
        raise TemplateError(what)
    for document in documents:
        if not isinstance(document, dict):
            if isinstance(documents, (str, bytes, Mapping)):
                raise TemplateError(what)
            raise TemplateError("Documents should be a list of dicts with 'title' and 'text' keys!")


def _tag_final_message(chat: list, continue_final_message, chat_template: str) -> str:
    """Mark the text that continue_final_message continues (render_jinja_template); returns that text.

    transformers appends the tag with `+`, so content that is not text fails there with a bare TypeError;
    here it fails with a sentence saying what the final message holds.
    """
    field = continue_final_message if isinstance(continue_final_message, str) else "content"
    final = chat[-1]
    final_message = final.get(field)
    if final_message is None:
        raise TemplateError(f'continue_final_message is set but the final message has no "{field}" to continue!')
    continue_fields = [field]
    if field in _REASONING_FIELDS:
        continue_fields = [f for f in _REASONING_FIELDS if final.get(f) == final_message]
    if not any(f in chat_template for f in continue_fields):
        raise TemplateError(f'continue_final_message is set to "{field}" but this is not an accepted '
                            "field in the chat_template")
    if isinstance(final_message, (list, tuple)):
        for block in reversed(final_message):
            try:
                has_text = "text" in block
            except TypeError:
                has_text = True  # transformers fails on this block; so do we, below
            if not has_text:
                continue
            if not isinstance(block, dict) or not isinstance(block["text"], str):
                raise TemplateError(
                    f"continue_final_message: the final message's content blocks must be dicts whose \"text\" is "
                    f"a string, but one is {block!r}")
            block["text"] = block["text"] + _CONTINUE_TAG
            return block["text"][:-len(_CONTINUE_TAG)]  # the last text block
        raise TemplateError("continue_final_message is set but we could not find any text to continue "
                            "in the final message!")
    if not isinstance(final_message, str):
        raise TemplateError(f'continue_final_message: the final message\'s "{field}" must be text or a list of '
                            f"content blocks to continue, not {_kind(final_message)}")
    for f in continue_fields:
        final[f] = final[f] + _CONTINUE_TAG
    return final_message


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
        try:
            return bytes(value).decode("utf-8")
        except UnicodeDecodeError as e:
            raise TemplateError(f"GGUF metadata text is not UTF-8: {e}") from None
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
                 special_tokens: dict | None = None, clock: Callable[[], datetime] | None = None,
                 limits: RenderLimits = DEFAULT_LIMITS):
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
        self.limits = limits
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
            if not isinstance(tokens, list):
                raise TemplateError(f"tokenizer.ggml.tokens must be a list of tokens, not {_kind(tokens)}")
            if isinstance(token_id, bool) or not isinstance(token_id, int):
                raise TemplateError(f"tokenizer.ggml.{key} must be a token id (a whole number), not {token_id!r}")
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
        The messages passed in are never modified. Raises TemplateError where transformers raises, and when the
        render goes past `self.limits`.
        """
        return self._render(messages, add_generation_prompt, continue_final_message, tools, documents,
                            template_name, extra, track=False).text

    def render_with_spans(self, messages: list[dict], *, add_generation_prompt: bool = False, tools=None,
                          documents=None, template_name: str | None = None, **extra) -> "Rendered":
        """The text, and the character spans of what `{% generation %}` blocks rendered: what transformers
        computes for `return_assistant_tokens_mask=True` (turn them into a per-token mask with `assistant_mask`).

        A template without `{% generation %}` gives no spans (transformers only warns). As in transformers this
        cannot be combined with continue_final_message.
        """
        return self._render(messages, add_generation_prompt, False, tools, documents, template_name, extra,
                            track=True)

    def _render(self, messages, add_generation_prompt, continue_final_message, tools, documents, template_name,
                extra, track) -> "Rendered":
        # apply_chat_template
        chat_template = self.select(template_name, tools)
        _check_messages(messages)
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
            tools = _checked_tools(tools)
        if documents is not None:
            _check_documents(documents)
        try:
            tools = _plain(tools)
            documents = _plain(documents)
            kwargs = _plain(kwargs)
            chat = _plain(chat)  # a fresh copy: the edits below never touch the caller's messages
        except RecursionError:
            raise TemplateError("the messages, tools, documents or variables are nested too deeply") from None
        chat = _alias_reasoning_fields(chat)
        final_message = None
        if continue_final_message:
            final_message = _tag_final_message(chat, continue_final_message, chat_template)

        budget = _Budget(self.limits, (chat, tools, documents, kwargs), track)
        clock_token, budget_token = _clock.set(self.clock), _budget.set(budget)
        parts = []
        try:
            # Rendered piece by piece (as transformers does for assistant masks) so that output is counted
            for part in compiled.generate(messages=chat, tools=tools, documents=documents,
                                          add_generation_prompt=add_generation_prompt, **kwargs):
                parts.append(part)
                budget.chars += len(part)
                if budget.chars > budget.max_chars and not budget.raise_limit():
                    raise _LimitReached(f"the template produced more than {budget.max_chars:,} characters, the "
                                        "limit for one render")
                budget.countdown -= 1
                if budget.countdown <= 0:
                    budget.clock()
            rendered = "".join(parts)
        except TemplateError:
            raise
        except (Exception, RecursionError, MemoryError) as e:
            raise _template_failure(e) from e
        finally:
            _budget.reset(budget_token)
            _clock.reset(clock_token)
        del parts

        if continue_final_message:
            stripped = final_message.strip()
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
        return Rendered(rendered, budget.spans or [])


@dataclasses.dataclass
class Rendered:
    """A render and, when asked for, where its `{% generation %}` blocks are."""

    text: str
    generation_spans: list  # (start, end) character offsets into text, in the order the blocks finished


def has_generation_tag(source: str) -> bool:
    """Whether a template marks assistant text with `{% generation %}` (transformers' own test, which only warns)."""
    return re.search(r"\{\%-?\s*generation\s*-?\%\}", source) is not None


def assistant_mask(offsets, spans) -> list:
    """1 for each token that overlaps a generation span, else 0: `apply_chat_template`'s assistant_masks, from
    the tokens' (start, end) character offsets and `Rendered.generation_spans`."""
    mask = [0] * len(offsets)
    k = 0
    for i, (start, end) in enumerate(offsets):
        while k < len(spans) and start >= spans[k][1]:
            k += 1
        if k == len(spans):
            break
        if end > spans[k][0]:
            mask[i] = 1
    return mask
