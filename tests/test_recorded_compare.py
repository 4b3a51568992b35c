"""The recorded comparison the site ships (site/recorded-compare.json, written by `python -m chatlens
record`): what a learner sees in Base vs instruct before any download. Its instruct half comes from
the model recorded, labelled with its file; its base half only from the real base model, and where
that is not at hand (here: the Hub cannot be reached) each base cell says so and quotes the
lesson's own account of what the base model does, as the lesson's words."""

import json

import pytest

from chatlens import defaults
from chatlens.compare import LAYOUTS
from chatlens.host import fetch
from chatlens.host.build import Checkout
from chatlens.host.chatcli import COMPARE_PROMPTS, LESSON_ON_BASE, LESSON_SOURCE
from chatlens.protocol import to_json
from conftest import ROOT, run_cli


@pytest.fixture(scope="module")
def shipped():
    path = Checkout.at(ROOT).recorded_compare
    assert path.exists(), f"{path} is missing: python -m chatlens record --only comparison"
    return path, json.loads(path.read_text())


def test_the_shipped_recording_is_small_labelled_and_the_base_half_is_the_lessons_words(shipped):
    path, doc = shipped
    assert path.stat().st_size < 300_000  # shipped to every visitor, precached by the service worker
    assert doc["models"]["instruct"] == {"file": fetch.FILENAME, "sha256": fetch.SHA256, "source": f"PyPI {fetch.PACKAGE}"}
    assert doc["models"]["base"] == {"recorded": False}
    assert (doc["max_tokens"], doc["top_k"]) == (defaults.COMPARE_LIMIT, defaults.COMPARE_TOP_K)
    assert doc["prompts"] == COMPARE_PROMPTS and [c["prompt"]["text"] for c in doc["comparisons"]] == COMPARE_PROMPTS
    for c in doc["comparisons"]:
        for layout in LAYOUTS:
            assert c["instruct"][layout]["backend"] == "numpy" and c["instruct"][layout]["top_k"]
            base = c["base"][layout]
            assert base["recorded"] is False and "only from the real base model" in base["why"]
            assert base["lesson"] == {"quote": LESSON_ON_BASE[layout], "source": LESSON_SOURCE}
    # the lesson's France prompt: the instruct model ends its turn at once as plain text
    france = doc["comparisons"][0]["instruct"]
    assert france["plain"]["reply_ids"] == [2] and france["plain"]["top_k_tokens"][0][0] == "<|im_end|>"


def test_record_only_the_comparison_writes_the_instruct_half_as_compare_computes_it(hf_dir, tmp_path):
    """`record --only comparison` on a tiny model: recorded-compare.json alone, beside --out, its
    instruct cells those chatlens.compare computes for the same model with any base beside it."""
    from chatlens.host.compare import compared
    from chatlens.source import load_model
    from tiny_model import write_tiny_model

    tiny = write_tiny_model(tmp_path / "tiny", hf_dir, seed=41)
    out = tmp_path / "site" / "recorded.json"
    done = run_cli("record", "--only", "comparison", "--out", str(out), model=tiny)
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in out.parent.iterdir()) == ["recorded-compare.json"]  # the conversations left alone
    doc = json.loads(out.with_name("recorded-compare.json").read_text())
    assert doc["models"]["instruct"]["source"] == str(tiny) and doc["models"]["base"] == {"recorded": False}
    model = load_model(tiny)
    other = load_model(write_tiny_model(tmp_path / "other", hf_dir, seed=42))
    for text, got in zip(COMPARE_PROMPTS, doc["comparisons"]):
        want = to_json(compared(model, other, text))
        assert got["prompt"] == want["prompt"]
        for layout in LAYOUTS:
            g, w = got["instruct"][layout], want["instruct"][layout]
            assert {k: g[k] for k in ("reply_ids", "reply_text", "stop_reason", "top_k_tokens")} == \
                   {k: w[k] for k in ("reply_ids", "reply_text", "stop_reason", "top_k_tokens")}
            assert got["base"][layout]["recorded"] is False
