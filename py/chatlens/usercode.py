"""Run a learner's Python (the lab's hand-written code, edited in the page) in this interpreter,
with its output captured and a time limit.

The page's worker has no threads or signals to interrupt Python with, so the limit is kept by
the code itself: `sys.settrace` sees every line the learner's code runs (frames of its own
file only: library code it calls, such as the tokenizer, runs untraced at full speed), and once
the deadline is past each further line raises TimeLimit. A `while True:` loop therefore stops
within a few lines of the limit. What the limit cannot stop, and is not meant to (this is the
learner's own code in their own browser, not an adversary's): a single long call into C or into
a library (`sum(range(10**12))`), and code that catches BaseException in its loop or turns the
tracer off itself.

Output is kept up to MAX_OUTPUT characters a stream; input() reads an empty stdin.
"""

import builtins
import io
import linecache
import sys
import time
import traceback

FILENAME = "<lab>"
DEFAULT_SECONDS = 3.0
MAX_SECONDS = 30.0
MAX_OUTPUT = 64 * 1024
_CHECK_EVERY = 64  # traced lines between two readings of the clock


class TimeLimit(BaseException):
    """The code ran past its time limit. A BaseException, so `except Exception:` in the
    learner's code does not swallow it."""


class _Capped(io.TextIOBase):
    """A text stream that keeps the first `limit` characters written to it."""

    def __init__(self, limit=MAX_OUTPUT):
        self.parts, self.size, self.limit, self.cut = [], 0, limit, False

    def writable(self):
        return True

    def write(self, s):
        s = str(s)
        room = self.limit - self.size
        if len(s) > room:
            s, self.cut = s[:max(room, 0)], True
        if s:
            self.parts.append(s)
            self.size += len(s)
        return len(s)

    def text(self):
        return "".join(self.parts) + (f"\n… (output cut at {self.limit:,} characters)" if self.cut else "")


def _tracer(deadline):
    """A sys.settrace function that enforces `deadline` on the lines of FILENAME's frames."""
    countdown = [_CHECK_EVERY]

    def on_line(frame, event, arg):
        countdown[0] -= 1
        if countdown[0] <= 0:
            countdown[0] = 1 if time.monotonic() > deadline else _CHECK_EVERY
            if countdown[0] == 1:  # past the deadline: every further line raises
                raise TimeLimit
        return on_line

    def on_call(frame, event, arg):
        if time.monotonic() > deadline:
            raise TimeLimit
        return on_line if frame.f_code.co_filename == FILENAME else None

    return on_call


def _error(e: BaseException, seconds) -> dict:
    """The exception as the page shows it: its name, message, the learner's line, and a
    traceback of the learner's frames only."""
    if isinstance(e, TimeLimit):
        return {"name": "TimeLimit", "message": f"the code ran longer than its limit of {seconds:g} s and was stopped "
                                                "(a loop without end?)", "line": _last_line(e)}
    if isinstance(e, SyntaxError) and e.filename == FILENAME:
        return {"name": type(e).__name__, "message": f"{e.msg} (line {e.lineno})", "line": e.lineno}
    return {"name": type(e).__name__, "message": str(e), "line": _last_line(e)}


def _last_line(e):
    line = None
    for frame in traceback.extract_tb(e.__traceback__):
        if frame.filename == FILENAME:
            line = frame.lineno
    return line


def _traceback(e: BaseException) -> str:
    frames = [f for f in traceback.extract_tb(e.__traceback__) if f.filename == FILENAME]
    lines = ["Traceback (most recent call last):\n"] + traceback.format_list(frames) if frames else []
    return "".join(lines + traceback.format_exception_only(type(e), e))


def run_code(source: str, *, seconds: float = DEFAULT_SECONDS, names: dict | None = None,
             results=()) -> dict:
    """Run `source` as the main module (`__name__ == "__main__"`) with `names` as extra globals.

    Returns {"stdout", "stderr" (the traceback of an error included), "error": {name, message,
    line} or None, "timed_out", "seconds" (wall time), "results": {name: value}} where results
    are the code's globals named in `results`, when they are JSON-like data."""
    seconds = float(seconds)
    if not 0 < seconds <= MAX_SECONDS:
        raise ValueError(f"the time limit must be between 0 and {MAX_SECONDS:g} seconds")
    out, err = _Capped(), _Capped()
    env = {"__name__": "__main__", "__builtins__": builtins, **(names or {})}
    # tracebacks and inspect read the code's lines from linecache
    linecache.cache[FILENAME] = (len(source), None, source.splitlines(True), FILENAME)
    error = None
    saved = sys.stdout, sys.stderr, sys.stdin, sys.gettrace()
    start = time.monotonic()
    try:
        code = compile(source, FILENAME, "exec")
        sys.stdout, sys.stderr, sys.stdin = out, err, io.StringIO("")
        sys.settrace(_tracer(start + seconds))
        try:
            exec(code, env)
        finally:
            sys.settrace(saved[3])
    except SystemExit as e:  # exit() in the code ends it, as it would end a script
        if e.code not in (None, 0):
            error = {"name": "SystemExit", "message": f"exit({e.code!r})", "line": _last_line(e)}
    except (Exception, TimeLimit) as e:  # the code's errors are its output
        error = _error(e, seconds)
        err.write(_traceback(e) if not isinstance(e, TimeLimit) else
                  f"stopped at line {error['line']}: {error['message']}\n")
    finally:
        sys.stdout, sys.stderr, sys.stdin = saved[:3]
        elapsed = time.monotonic() - start
    found = {}
    for name in results:
        if name in env and _is_data(env[name]):
            found[name] = env[name]
    return {"stdout": out.text(), "stderr": err.text(), "error": error,
            "timed_out": bool(error and error["name"] == "TimeLimit"), "seconds": round(elapsed, 4),
            "results": found}


def _is_data(value, depth=0) -> bool:
    """JSON-like data: what can travel back to the page as it is."""
    if depth > 20:
        return False
    if value is None or isinstance(value, (bool, int, float, str)):
        return True
    if isinstance(value, (list, tuple)):
        return all(_is_data(v, depth + 1) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _is_data(v, depth + 1) for k, v in value.items())
    return False
