"""The Jinja environment chat templates render in, and the limits that make every render end.

The environment is transformers 5.x's (checked against 5.24): `transformers/utils/chat_template_utils.py`,
`_cached_compile_jinja_template`, that is `ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)`
with the `{% generation %}` tag and `loopcontrols`, the `raise_exception` and `strftime_now` globals, the `tojson`
filter, and the restricted `dict` and `namespace` globals. chatlens.template renders with it.

Templates come from model files and from users, so the sandbox is stricter than transformers' in a few places,
each with a TemplateError that says why: a template that reaches for Python's internals (`__class__`,
`__globals__`, ...), tries to change its inputs (`messages.append`) or to read a file (include, import, extends)
fails at once (transformers' sandbox prints such an attribute as an empty value and fails only when it is used);
a render stops at the limits of `RenderLimits` (2 s, 4 Mi characters) and at MAX_CALL_DEPTH nested calls; and a
template that nests blocks and brackets deeper than MAX_NESTING is refused before it compiles. The limits are
there because a render must end on its own: in Pyodide no thread or signal can interrupt it, and a recursion too
deep overflows the JavaScript stack and kills the worker instead of raising RecursionError.

Runs under CPython and Pyodide; needs only jinja2.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import re
import time
from collections.abc import Mapping
from contextvars import ContextVar
from datetime import datetime
from functools import lru_cache
from typing import Callable

import jinja2
import jinja2.exceptions
import jinja2.ext
import jinja2.nodes
import jinja2.sandbox
import jinja2.utils
from jinja2.sandbox import ImmutableSandboxedEnvironment

from .errors import TemplateError

# The clock `strftime_now` reads, set for the duration of one render (compiled templates are shared).
_clock: ContextVar[Callable[[], datetime] | None] = ContextVar("chatlens_template_clock", default=None)


class _RaisedByTemplate(jinja2.exceptions.TemplateError):
    """What `raise_exception(message)` raises: a jinja2 TemplateError, as in transformers, that we can tell apart."""


class _Forbidden(jinja2.exceptions.SecurityError):
    """The sandbox refused something; the message is already a sentence for the user."""


class _LimitReached(Exception):
    """A render went past its RenderLimits. Not a jinja2 error, so nothing inside a template can swallow it."""


# ---------------------------------------------------------------------------------------------------------------
# Render limits. Templates come from model files and from users, so a render must end, in CPython and in Pyodide
# alike, where there are no threads or signals to interrupt it. The environment below counts the template's own
# steps instead (each loop iteration, call, item a filter passes along, and piece of output) and reads the clock
# every _CHECK_EVERY steps: whatever repeats in a template is one of those. Sizes are checked where values grow
# (operators, `~`, joins, formats, namespace stores, calls, buffered and yielded output), so a value cannot grow
# step by step past the limit.
# ---------------------------------------------------------------------------------------------------------------


_SMALL = 1 << 16  # a `+` result shorter than this is never measured (no limit is below it: RenderLimits)


@dataclasses.dataclass(frozen=True)
class RenderLimits:
    """How far one render may go before it stops with TemplateError.

    seconds: the time one render may take (SmolLM2's template renders in about 0.2 ms).
    chars: the most characters a render may produce, which is also the largest string or list any step of it
      may build: 4 Mi characters (about 130 times the text of an 8192-token prompt), or `input_multiple` times
      the characters of text passed in (messages, tools, documents, variables) when that is more, so that a
      legitimately long input never trips it.
    clock: where a render reads the time, in seconds (time.monotonic: it works in Pyodide too, and a wall clock
      set back would stretch the limit). The one place the limits read the time, so that a test can hand it a
      clock of its own.
    """

    seconds: float = 2.0
    chars: int = 4 * 1024 * 1024
    input_multiple: int = 4
    clock: Callable[[], float] = dataclasses.field(default=time.monotonic, compare=False, repr=False)

    def __post_init__(self):
        if not self.seconds > 0 or self.chars < _SMALL or self.input_multiple < 1:
            raise ValueError(f"render limits need seconds > 0, chars >= {_SMALL} and input_multiple >= 1")


DEFAULT_LIMITS = RenderLimits()
_CHECK_EVERY = 64  # template steps between two readings of the clock
# Nesting, bounded for Pyodide: there jinja's recursion exhausts the JavaScript stack (a fatal error for the
# whole worker, not a RecursionError) at about 150 nested macro calls or 200 nested blocks. Real templates stay
# far below: the ones in tests/templates nest brackets 3 deep and their syntax trees 13 deep.
MAX_CALL_DEPTH = 64  # template calls running inside each other
MAX_NESTING = 40  # blocks and brackets open at once, counted in the template's text
MAX_TREE_DEPTH = 80  # depth of the parsed template


class _Budget:
    """What one render has used so far; `spans` collects `{% generation %}` spans when asked for."""

    __slots__ = ("seconds", "now", "deadline", "max_chars", "chars", "countdown", "spans", "depth", "measured",
                 "last_sum", "_inputs", "_multiple")

    def __init__(self, limits: RenderLimits, inputs: tuple, track: bool):
        self.seconds = limits.seconds
        self.now = limits.clock
        self.deadline = self.now() + limits.seconds
        self.max_chars = limits.chars
        self.chars = 0  # characters of output yielded so far
        self.countdown = _CHECK_EVERY
        self.spans = [] if track else None
        self.depth = 0  # calls of template code (macros, recursive loops) now running inside each other
        self.measured = {}  # id -> (container, its text, its depth): the containers namespaces hold now
        self.last_sum = None  # the same for the last list `+` made, usually about to be stored
        # The inputs' share of the limit is counted only when the fixed limit is reached, off the normal path
        self._inputs, self._multiple = inputs, limits.input_multiple

    def clock(self):
        self.countdown = _CHECK_EVERY
        if self.now() > self.deadline:
            raise _LimitReached(f"the render took longer than its limit of {self.seconds:g} s "
                                "(a loop or a recursion without end?)")

    def raise_limit(self) -> bool:
        """Raise max_chars to the inputs' share once; whether that changed it."""
        if self._inputs is None:
            return False
        share = self._multiple * _text_chars(self._inputs)
        self._inputs = None
        if share <= self.max_chars:
            return False
        self.max_chars = share
        return True

    def check_size(self, size: int, what: str = "a value"):
        if size > self.max_chars and not (self.raise_limit() and size <= self.max_chars):
            raise _LimitReached(f"the template built {what} of {size:,} characters, more than the limit of "
                                f"{self.max_chars:,} for one render")


_budget: ContextVar[_Budget | None] = ContextVar("chatlens_template_budget", default=None)


def _step() -> _Budget | None:
    """Count one step of template code; every _CHECK_EVERY steps, look at the clock."""
    budget = _budget.get()
    if budget is not None:
        budget.countdown -= 1
        if budget.countdown <= 0:
            budget.clock()
    return budget


def _counted(budget: _Budget, iterable):
    for item in iterable:
        budget.countdown -= 1
        if budget.countdown <= 0:
            budget.clock()
        yield item


def _size(value) -> int:
    kind = type(value)
    if kind is str or kind is list or kind is tuple or kind is dict or kind is bytes:
        return len(value)
    if kind is int:
        return value.bit_length() // 8  # a number that doubles its digits each step grows too
    return 0


# Widths and precisions written in %-formats and str.format specs ('%999999999d', '{:>999999999}'): each could
# allocate that many characters in one step, so they are read before the format runs.
_PERCENT_SPEC = re.compile(r"%(?:\([^)]*\))?[#0 +\-]*(\*|\d+)?(?:\.(\*|\d+))?")
_BRACE_SPEC = re.compile(r"\{[^{}]*?:([^{}]*(?:\{[^{}]*\}[^{}]*)*)\}")
_DIGITS = re.compile(r"\d+")


def _numbers(values) -> list:
    out = []
    for v in values:
        if type(v) is int:
            out.append(v)
        elif isinstance(v, (list, tuple)):
            out.extend(x for x in v if type(x) is int)
        elif isinstance(v, Mapping):
            out.extend(x for x in v.values() if type(x) is int)
    return out


def _check_format(budget: _Budget, fmt: str, args, percent: bool):
    """Refuse a format whose width or precision alone would pass the limit."""
    widths = []
    starred = False
    if percent:
        for m in _PERCENT_SPEC.finditer(fmt):
            for g in m.groups():
                if g == "*":
                    starred = True
                elif g:
                    widths.append(int(g))
    else:
        for m in _BRACE_SPEC.finditer(fmt):
            spec = m.group(1)
            starred = starred or "{" in spec
            widths.extend(int(d) for d in _DIGITS.findall(spec))
    if starred:
        widths.extend(_numbers(args))
    if widths:
        budget.check_size(max(widths), "a formatted field")


# str methods whose result can be much longer than the string: (method name) -> the predicted length
_GROWING_STR_METHODS = {
    "center": lambda s, a: a[0] if a and type(a[0]) is int else 0,
    "ljust": lambda s, a: a[0] if a and type(a[0]) is int else 0,
    "rjust": lambda s, a: a[0] if a and type(a[0]) is int else 0,
    "zfill": lambda s, a: a[0] if a and type(a[0]) is int else 0,
    "expandtabs": lambda s, a: len(s) * (a[0] if a and type(a[0]) is int else 8),
    "replace": lambda s, a: (len(s) + (s.count(a[0]) + (not a[0])) * max(len(a[1]) - len(a[0]), 0)
                             if len(a) >= 2 and type(a[0]) is str and type(a[1]) is str else 0),
    "join": lambda s, a: (sum(len(x) for x in a[0] if type(x) is str) + len(s) * len(a[0])
                          if a and isinstance(a[0], (list, tuple)) else 0),
}


def _check_call(budget: _Budget, obj, args, kwargs):
    for a in args:  # what a recursion passes down is where it can grow
        kind = type(a)
        if kind is str:
            if len(a) > budget.max_chars:
                budget.check_size(len(a))
        elif kind is list or kind is tuple or kind is dict:
            _check_container(budget, a)
    owner = getattr(obj, "__self__", None)
    if type(owner) is str or type(owner) is bytes:
        predict = _GROWING_STR_METHODS.get(getattr(obj, "__name__", None))
        if predict is not None:
            try:
                size = predict(owner, args)
            except (TypeError, ValueError):  # arguments the method itself refuses, as it will in a moment
                size = 0
            budget.check_size(size)
    wrapped = getattr(obj, "__wrapped__", None)  # the sandbox's wrapper of str.format / str.format_map
    if wrapped is not None and type(getattr(wrapped, "__self__", None)) is str:
        _check_format(budget, wrapped.__self__, list(args) + list(kwargs.values()), percent=False)


def _checked_concat(parts):
    """environment.concat: joins the output a macro, call block or {% set %} block buffered."""
    budget = _budget.get()
    if budget is not None:
        if not isinstance(parts, list):
            parts = list(parts)
        budget.check_size(sum(map(len, parts)), "a block of output")
    return "".join(parts)


def _checked_str_join(seq):
    """The `~` operator."""
    parts = list(map(str, seq))
    budget = _budget.get()
    if budget is not None:
        budget.check_size(sum(map(len, parts)), "a string")
    return "".join(parts)


def _text_chars(value) -> int:
    """Characters of text in plain data (what the inputs' share of the output limit is counted from). Walked
    with a list, not recursion: a template can build data nested deeper than any stack."""
    total, todo = 0, [value]
    while todo:
        item = todo.pop()
        if type(item) is str:
            total += len(item)
        elif isinstance(item, Mapping):
            todo.extend(item.keys())
            todo.extend(item.values())
        elif isinstance(item, (list, tuple)):
            todo.extend(item)
    return total


def _measure(budget: _Budget, value) -> tuple[int, int]:
    """(characters of text, depth of nesting) of a list, tuple or dict. A namespace's values are remembered
    (the sandbox lets no container change), so `ns.items + [item]` and `[ns.tree]` cost a look-up, not a walk
    of everything built so far. Both numbers matter once the value is printed: its text is what prints, and
    printing nested containers recurses in C, which in Pyodide overflows the JavaScript stack."""
    measured = budget.measured
    known = measured.get(id(value)) or budget.last_sum
    if known is not None and known[0] is value:
        return known[1], known[2]
    chars, deepest = len(value), 1
    todo = [(value, 1)]
    while todo:
        item, depth = todo.pop()
        known = measured.get(id(item))
        if known is not None and known[0] is item:
            chars += known[1]
            deepest = max(deepest, depth - 1 + known[2])
            continue
        deepest = max(deepest, depth)
        if deepest > MAX_CALL_DEPTH:
            break
        children = list(item.keys()) + list(item.values()) if type(item) is dict else item
        for child in children:
            kind = type(child)
            if kind is str:
                chars += len(child)
            elif kind is list or kind is tuple or kind is dict:
                todo.append((child, depth + 1))
    return chars, deepest


def _check_container(budget: _Budget, value) -> tuple[int, int]:
    chars, depth = _measure(budget, value)
    budget.check_size(chars)
    if depth > MAX_CALL_DEPTH:
        raise _LimitReached(f"the template nested lists or dicts more than {MAX_CALL_DEPTH} deep")
    return chars, depth


# ---------------------------------------------------------------------------------------------------------------
# The environment (chat_template_utils._cached_compile_jinja_template), with the sandbox's refusals turned into
# plain sentences and the render limits counted
# ---------------------------------------------------------------------------------------------------------------


class _GenerationTag(jinja2.ext.Extension):
    """`{% generation %}...{% endgeneration %}`: transformers' AssistantTracker.

    The rendered text is the body unchanged. When the render asks for spans (return_assistant_tokens_mask), the
    body's span is recorded exactly where transformers records it: starting at the length of the output yielded
    so far, which is why every render goes through `Template.generate`.
    """

    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return jinja2.nodes.CallBlock(self.call_method("_generation_support"), [], [], body).set_lineno(lineno)

    @jinja2.pass_eval_context
    def _generation_support(self, context, caller):
        rv = caller()
        budget = _budget.get()
        if budget is not None and budget.spans is not None:
            budget.spans.append((budget.chars, budget.chars + len(rv)))
        return rv


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
        # A namespace is the one thing a loop's iterations share, so a value that grows step by step lives here
        budget = _budget.get()
        if budget is not None:
            budget.countdown -= 1  # a store is a step: loops whose bodies only compute and store still count
            if budget.countdown <= 0:
                budget.clock()
            old = jinja2.utils.Namespace.__getattribute__(self, "_Namespace__attrs").get(name)
            if type(old) in (list, tuple, dict):
                budget.measured.pop(id(old), None)
            if type(value) in (list, tuple, dict):
                chars, depth = _check_container(budget, value)
                budget.measured[id(value)] = (value, chars, depth)
            elif _size(value) > budget.max_chars:
                budget.check_size(_size(value))
        jinja2.utils.Namespace.__setitem__(self, name, value)

    @staticmethod
    def _check_name(name):
        if isinstance(name, str) and name.startswith("_"):
            raise jinja2.exceptions.SecurityError(
                f"Chat templates cannot store underscore-prefixed attributes on a namespace, but got {name!r}. "
                "Please rename the attribute."
            )


class _NoFiles(jinja2.BaseLoader):
    """A chat template is one text: `{% include %}`, `{% import %}` and `{% extends %}` would read files."""

    def get_source(self, environment, template):
        raise _Forbidden(f"the template tried to read the file {template!r} (with include, import or extends), "
                         "which the sandbox forbids")


def _described(obj) -> str:
    name = type(obj).__name__
    return f"{'an' if name[:1].lower() in 'aeiou' else 'a'} {name}"


_BLOCK_TAGS = frozenset(["if", "for", "macro", "call", "filter", "block", "with", "autoescape", "generation"])


def _check_nesting(env, source):
    """Refuse, before jinja's parser recurses into it, a template that opens too many blocks or brackets."""
    depth, after_block_begin = 0, False
    try:
        for lineno, kind, value in env.lex(source):
            if kind == "operator" and value in "([{":
                depth += 1
            elif kind == "operator" and value in ")]}":
                depth = max(depth - 1, 0)
            elif after_block_begin and kind == "name":
                if value in _BLOCK_TAGS:
                    depth += 1
                elif value.startswith("end"):
                    depth = max(depth - 1, 0)
            if kind != "whitespace":
                after_block_begin = kind == "block_begin"
            if depth > MAX_NESTING:
                raise jinja2.exceptions.TemplateSyntaxError(
                    f"blocks and brackets are nested more than {MAX_NESTING} deep", lineno)
    except jinja2.exceptions.TemplateSyntaxError:
        raise
    except Exception:  # the lexer's own complaints come again, with their line, when the template is parsed
        return


def _check_tree_depth(tree):
    """Refuse a template whose syntax tree is too deep for jinja's recursive compiler (a long chain of `+` or
    of filters nests it without any bracket)."""
    stack = [(tree, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_TREE_DEPTH:
            raise jinja2.exceptions.TemplateSyntaxError(
                f"the template's expressions are nested more than {MAX_TREE_DEPTH} deep", node.lineno or 1)
        stack.extend((child, depth + 1) for child in node.iter_child_nodes())


class _Environment(ImmutableSandboxedEnvironment):
    """transformers' sandbox, refusing with a sentence and counting steps against the render's limits."""

    intercepted_binops = frozenset(["+", "*", "%", "**"])
    concat = staticmethod(_checked_concat)

    def _parse(self, source, name, filename):
        _check_nesting(self, source)
        tree = super()._parse(source, name, filename)
        _check_tree_depth(tree)
        for loop in tree.find_all(jinja2.nodes.For):  # each iteration counts as a step
            loop.iter = jinja2.nodes.Filter(loop.iter, _LOOP_FILTER, [], [], None, None, lineno=loop.lineno)
        return tree

    def unsafe_undefined(self, obj, attribute):
        # The stock sandbox returns an undefined value that fails only when used; say what was reached, at once
        if isinstance(attribute, str) and attribute.startswith("_"):
            why = "Python's internals are out of a template's reach"
        elif isinstance(attribute, str) and jinja2.sandbox.modifies_known_mutable(obj, attribute):
            why = "a template may not change its inputs"
        else:
            why = "it is not safe"
        raise _Forbidden(f"the template tried to reach {attribute!r} of {_described(obj)}, which the sandbox "
                         f"forbids ({why})")

    def call_binop(self, context, operator, left, right):
        if operator == "+":  # the common one, templates join their text with it: only a look at the result
            value = left + right
            if type(value) is str:
                if len(value) > _SMALL:
                    budget = _budget.get()
                    if budget is not None:
                        budget.check_size(len(value))
            elif type(value) is list or type(value) is tuple:  # copies of one long string add up when printed
                budget = _budget.get()
                if budget is not None:
                    (a, depth_a), (b, depth_b) = _measure(budget, left), _measure(budget, right)
                    budget.check_size(a + b)
                    budget.last_sum = (value, a + b, max(depth_a, depth_b))
            return value
        budget = _budget.get()
        if budget is not None:
            if operator == "*":
                # a list of n copies costs n times its text once printed or joined, so count text, not items
                if type(right) is int and type(left) in (str, bytes, list, tuple):
                    budget.check_size((len(left) if type(left) in (str, bytes) else _measure(budget, left)[0]) * right)
                elif type(left) is int and type(right) in (str, bytes, list, tuple):
                    budget.check_size((len(right) if type(right) in (str, bytes) else _measure(budget, right)[0]) * left)
            elif operator == "%" and type(left) is str:
                _check_format(budget, left, [right], percent=True)
            elif operator == "**" and type(left) is int and type(right) is int and right > 0 and abs(left) > 1:
                budget.check_size(left.bit_length() * right // 8, "a number")
        value = self.binop_table[operator](left, right)
        if budget is not None and _size(value) > budget.max_chars:
            budget.check_size(_size(value))
        return value

    def call(__self, __context, __obj, *args, **kwargs):  # noqa: N805 (jinja's own signature)
        budget = _step()
        if not __self.is_safe_callable(__obj):
            raise _Forbidden(f"the template tried to call {getattr(__obj, '__name__', type(__obj).__name__)!r}, "
                             "which the sandbox forbids")
        if budget is None:
            return __context.call(__obj, *args, **kwargs)
        _check_call(budget, __obj, args, kwargs)
        budget.depth += 1
        if budget.depth > MAX_CALL_DEPTH:
            raise _LimitReached(f"it recursed too deeply: calls nested more than {MAX_CALL_DEPTH} deep (a macro "
                                "that calls itself without end?)")
        try:
            value = __context.call(__obj, *args, **kwargs)
        finally:
            budget.depth -= 1
        if type(value) is str and len(value) > budget.max_chars:
            budget.check_size(len(value))
        return value


def _checked_filter(filter_function, predict):
    """A built-in filter that counts as a step and first checks the size its result would have."""
    skip = 1 if getattr(filter_function, "jinja_pass_arg", None) is not None else 0  # a context comes first

    @functools.wraps(filter_function)
    def checked(*args, **kwargs):
        budget = _step()
        if budget is None:
            return filter_function(*args, **kwargs)
        predict(budget, *args[skip:], **kwargs)
        value = filter_function(*args, **kwargs)
        if _size(value) > budget.max_chars:
            budget.check_size(_size(value))
        return value

    return checked


def _counting_filter(filter_function):
    """map, select and the like: each item they pass along counts as a step, as a loop's iterations do."""
    skip = 1 if getattr(filter_function, "jinja_pass_arg", None) is not None else 0

    @functools.wraps(filter_function)
    def counting(*args, **kwargs):
        budget = _step()
        if budget is not None and len(args) > skip and args[skip]:  # a falsy value is passed on as it is
            args = (*args[:skip], _counted(budget, args[skip]), *args[skip + 1:])
        return filter_function(*args, **kwargs)

    return counting


def _predict_format(budget, value, *args, **kwargs):
    if isinstance(value, str):
        _check_format(budget, value, list(args) + list(kwargs.values()), percent=True)


def _predict_width(budget, value, width=80, *args, **kwargs):
    if type(width) is int:
        budget.check_size(width)


def _predict_indent(budget, value, width=4, *args, **kwargs):
    if type(width) is int and isinstance(value, str):
        budget.check_size(len(value) + width * (value.count("\n") + 1))


def _predict_join(budget, value, d="", *args, **kwargs):
    if isinstance(value, (list, tuple)) and isinstance(d, str):
        budget.check_size(sum(len(x) for x in value if type(x) is str) + len(d) * len(value))


def _predict_replace(budget, value, old="", new="", *args, **kwargs):
    if isinstance(value, str) and isinstance(old, str) and isinstance(new, str):
        budget.check_size(_GROWING_STR_METHODS["replace"](value, (old, new)))


def _predict_json(budget, value, *args, **kwargs):
    budget.check_size(_text_chars(value))


def _predict_count(budget, value, count=0, fill_with=None, *args, **kwargs):
    # slice(n) makes n lists; batch(n, fill) pads the last one to n items
    if type(count) is int:
        budget.check_size(count, "a list")


_CHECKED_FILTERS = {"format": _predict_format, "center": _predict_width, "indent": _predict_indent,
                    "join": _predict_join, "replace": _predict_replace, "tojson": _predict_json,
                    "slice": _predict_count, "batch": _predict_count, "wordwrap": _predict_width}
_COUNTING_FILTERS = ("map", "select", "reject", "selectattr", "rejectattr")


@jinja2.pass_context  # never folded into a constant at compile time: it needs a render's budget
def _counted_loop(context, iterable):
    """What every `{% for %}` iterates: its items, each counted as a step."""
    budget = _budget.get()
    return iterable if budget is None else _counted(budget, iterable)


_LOOP_FILTER = "chatlens_counted_loop"  # a filter, not a call: filters are called directly, calls go the long way


def _lipsum(n=5, html=True, min=20, max=100):
    budget = _step()
    if budget is not None and type(n) is int and type(max) is int:
        budget.check_size(n * max * 12, "lorem ipsum")  # about a dozen characters a word, at most
    return jinja2.utils.generate_lorem_ipsum(n=n, html=html, min=min, max=max)


def _make_environment() -> ImmutableSandboxedEnvironment:
    env = _Environment(trim_blocks=True, lstrip_blocks=True, extensions=[_GenerationTag, jinja2.ext.loopcontrols],
                       loader=_NoFiles())
    env.filters["tojson"] = _tojson
    for name, predict in _CHECKED_FILTERS.items():
        env.filters[name] = _checked_filter(env.filters[name], predict)
    for name in _COUNTING_FILTERS:
        env.filters[name] = _counting_filter(env.filters[name])
    env.globals["lipsum"] = _lipsum
    env.filters[_LOOP_FILTER] = _counted_loop
    env.globals["raise_exception"] = _raise_exception
    env.globals["strftime_now"] = _strftime_now
    env.globals["dict"] = TemplateDict()
    env.globals["namespace"] = TemplateNamespace
    return env


@lru_cache(maxsize=64)
def _compile(source: str) -> jinja2.Template:
    """Compile a template once (per text), as transformers' `_compile_jinja_template` does."""
    # Compiling folds constant expressions (a filter on literals runs now), so it is bounded like a render
    token = _budget.set(_Budget(DEFAULT_LIMITS, (source,), False))
    try:
        compiled = _make_environment().from_string(source)
    except _LimitReached as e:
        raise TemplateError(f"chat template could not be compiled: {e}") from e
    except jinja2.exceptions.TemplateSyntaxError as e:
        where = f" (line {e.lineno})" if e.lineno else ""
        raise TemplateError(f"chat template syntax error{where}: {e.message}") from e
    except jinja2.exceptions.TemplateError as e:
        raise TemplateError(f"chat template could not be compiled: {e}") from e
    except (RecursionError, SyntaxError, MemoryError) as e:
        # Deeply nested blocks or brackets exhaust jinja's parser, or Python's own (it allows 100 indentation
        # levels in the code jinja writes)
        raise TemplateError("chat template could not be compiled: its blocks or brackets are nested too deeply") from e
    finally:
        _budget.reset(token)
    # `~` joins with the runtime's str_join, imported into the template's own module: count it too
    compiled.root_render_func.__globals__["str_join"] = _checked_str_join
    return compiled


def _template_line(e: BaseException) -> int | None:
    """The template line an error was raised on: jinja rewrites tracebacks so that template frames show it."""
    line = None
    tb = e.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == "<template>":
            line = tb.tb_lineno
        tb = tb.tb_next
    return line


def _template_failure(e: BaseException) -> TemplateError:
    """The TemplateError for an exception raised while a template renders."""
    if isinstance(e, _RaisedByTemplate):  # the template's own words, exactly as transformers shows them
        return TemplateError("" if e.message is None else str(e.message))
    line = _template_line(e)
    at = f" (line {line})" if line else ""
    if isinstance(e, _Forbidden):
        return TemplateError(f"chat template error{at}: {e}")
    if isinstance(e, jinja2.exceptions.SecurityError):
        return TemplateError(f"chat template error{at}: the sandbox forbids this: {e}")
    if isinstance(e, _LimitReached):
        return TemplateError(f"chat template stopped{at}: {e}")
    if isinstance(e, RecursionError):
        return TemplateError(f"chat template stopped{at}: it recursed too deeply (a macro that calls itself "
                             "without end?)")
    if isinstance(e, MemoryError):
        return TemplateError(f"chat template stopped{at}: it ran out of memory")
    if isinstance(e, jinja2.exceptions.TemplateError):  # UndefinedError and the like
        return TemplateError(f"chat template error{at}: {e}")
    return TemplateError(f"chat template error{at}: {type(e).__name__}: {e}")

