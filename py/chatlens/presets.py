"""System prompt presets: none (the template's default), pirate, brief, date, or custom text.

No numpy, no I/O: the site's worker uses this module in Pyodide as it is.
The date preset is a template: the date is filled in at send time from a clock that
callers may replace (tests, and the recorded conversations, use a fixed date).
"""

import datetime

from .errors import ChatlensError

DATE_FORMAT = "{date:%A, %B} {date.day}, {date.year}"  # e.g. "Saturday, November 29, 2025"

# name -> system text, or None for "send no system message: the template inserts its default".
# The "date" entry is a format string; system_for() fills in {date}.
PRESETS = {
    "none": None,
    "pirate": "You are a pirate. Answer every message the way a pirate talks, arr!",
    "brief": "You are a helpful assistant. Answer in one short sentence.",
    "date": "You are a helpful assistant. Today's date is {date}.",
}

# The presets whose text is taken when a message is sent (the date's): a case shared as a link
# carries the text it read, not the name, so that another day reads the same (site/js/modes/shared.mjs).
DATED = tuple(name for name, text in PRESETS.items() if text and "{date}" in text)

CUSTOM = "custom"  # the user's own text
NAMES = (*PRESETS, CUSTOM)  # in the order the page offers them
DEFAULT = "none"
LABELS = {
    "none": "None (the template's default)",
    "pirate": "Pirate",
    "brief": "Be brief",
    "date": "Today's date",
    CUSTOM: "Custom text",
}


def today() -> datetime.date:
    return datetime.date.today()


def format_date(day) -> str:
    """The date as the date preset states it ("Saturday, November 29, 2025")."""
    if isinstance(day, datetime.datetime):
        day = day.date()
    return DATE_FORMAT.format(date=day)


def is_blank(text) -> bool:
    return text is None or (isinstance(text, str) and not text.strip())


def normalize(preset, custom=None) -> tuple:
    """(preset name or None, custom text or None) as chatlens uses them, or ChatlensError.

    The one rule for blank text: custom text that is empty or only whitespace is no system
    prompt of your own, so the template's default applies, as with the "none" preset. (A system
    message with empty content can still be sent explicitly, inside the messages.) Custom text
    without a preset name means the custom preset. Names are case-insensitive."""
    if preset is None:
        if custom is None:
            return None, None
        preset = CUSTOM
    name = str(preset).strip().lower()
    if name != CUSTOM and name not in PRESETS:
        raise ChatlensError(f"unknown preset {preset!r}: choose one of {', '.join(NAMES)}")
    if name == CUSTOM:
        if custom is not None and not isinstance(custom, str):
            raise ChatlensError("the custom system prompt must be text")
        if is_blank(custom):
            return DEFAULT, None
        return name, custom
    return name, None


def system_for(preset, custom=None, clock=None):
    """The system prompt for a preset name, taken now.

    preset: one of PRESETS, "custom" (then `custom` is the text), or None (then `custom`
    if given, else the template's default). Blank custom text is the template's default
    (see normalize). clock: a callable returning a date or datetime (default: today's date),
    called only for the date preset.
    Returns the system text, or None for the template's default.
    """
    name, custom = normalize(preset, custom)
    if name is None or name == CUSTOM:
        return custom
    text = PRESETS[name]
    if name == "date":
        day = (clock or today)()
        text = text.format(date=format_date(day))
    return text


def describe(preset, custom=None, clock=None) -> str:
    """Which system prompt a turn gets, in words (the CLI says it)."""
    name, custom = normalize(preset, custom)
    text = system_for(name, custom, clock)
    if text is None:
        return "the template's default"
    return repr(text) if name == CUSTOM else f"{name}: {text!r}"
