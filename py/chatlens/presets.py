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

LABELS = {
    "none": "None (the template's default)",
    "pirate": "Pirate",
    "brief": "Be brief",
    "date": "Today's date",
    "custom": "Custom text",
}


def today() -> datetime.date:
    return datetime.date.today()


def format_date(day) -> str:
    """The date as the date preset states it ("Saturday, November 29, 2025")."""
    if isinstance(day, datetime.datetime):
        day = day.date()
    return DATE_FORMAT.format(date=day)


def check(preset, custom=None):
    """Raise ChatlensError unless system_for(preset, custom) would give a system prompt."""
    if preset is None:
        return
    name = str(preset).strip().lower()
    if name == "custom" and custom is None:
        raise ChatlensError("the custom preset needs a system text")
    if name != "custom" and name not in PRESETS:
        raise ChatlensError(f"unknown preset {preset!r}: choose one of {', '.join(list(PRESETS) + ['custom'])}")


def system_for(preset, custom=None, clock=None):
    """The system prompt for a preset name, taken now.

    preset: one of PRESETS, "custom" (then `custom` is the text), or None (then `custom`
    if given, else the template's default). clock: a callable returning a date or datetime
    (default: today's date), called only for the date preset.
    Returns the system text, or None for the template's default.
    """
    if preset is None:
        return custom
    check(preset, custom)
    name = str(preset).strip().lower()
    if name == "custom":
        return custom
    text = PRESETS[name]
    if name == "date":
        day = (clock or today)()
        text = text.format(date=format_date(day))
    return text
