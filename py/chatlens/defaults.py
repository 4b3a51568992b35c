"""The chat's defaults, defined once: the CLI, the chat session, the worker and the page (through
build.json, written by the build) all read them from here.
"""

from . import device, presets

REPLY_LIMIT = 96  # new tokens a reply may have; also the reserve kept free in the window for it
WINDOWS = (256, 512, 1024)  # the windows the lab offers: small, so a learner can watch one fill
DEFAULT_WINDOW = 1024
TOP_K = 10  # candidates the page shows for each reply token ("why this token")
# The base-and-instruct comparison (chatlens.compare): each of its four replies stops at the
# instruct model's end of turn or at this cap, the lab's cap for the base model (the lesson: the
# base model, given the template, never writes <|im_end|> and "runs until the lab stops it at 48
# tokens"). Its first step's candidates: as many as "why this token" shows.
COMPARE_LIMIT = 48
COMPARE_TOP_K = TOP_K
# A step is a near-tie when its two best logits are closer than this: there a different but
# correct float rounding (another GPU, browser or NumPy build) may choose the other token. The
# same gap the fidelity tests stop comparing greedy replies at (tests/test_model.py); backends
# agree on logits to about 1e-3 on this model, so a smaller gap is where they can disagree.
NEAR_TIE_GAP = 0.01
# GPU steps kept in flight, at least: the next decode is submitted before the last id is read back
# (chatlens.pull). The browser's executor keeps more when its host's latency asks; the GPU program
# carries this floor to it (meta["in_flight"]).
IN_FLIGHT = 2


def for_page() -> dict:
    """The settings the page builds its controls from (build.json's "settings")."""
    return {
        "reply_limit": REPLY_LIMIT,
        "windows": list(WINDOWS),
        "default_window": DEFAULT_WINDOW,
        "presets": [{"name": name, "label": presets.LABELS[name], "dated": name in presets.DATED} for name in presets.NAMES],
        "default_preset": presets.DEFAULT,
        "top_k": TOP_K,
        "compare_limit": COMPARE_LIMIT,
        "compare_top_k": COMPARE_TOP_K,
        "near_tie_gap": NEAR_TIE_GAP,
        "emulated_adapters": list(device.EMULATED),  # chatlens.device's rule, applied before Python starts
    }
