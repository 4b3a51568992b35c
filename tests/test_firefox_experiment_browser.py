"""Base vs instruct in Firefox before any download (issue 32), driven as tests/test_firefox_browser.py
drives Debian's firefox-esr (tests/firefox/experiment.mjs over WebDriver BiDi): the recorded
comparison is drawn from site/recorded-compare.json as Chromium draws it, the base's download
where the Hub cannot be reached says so in a plain sentence, and a typed message survives a
reload. Nothing is downloaded or computed: it takes a boot and a reload.
"""

import json

import pytest

from test_firefox_browser import FIREFOX, SCRIPTS, firefox
from webapp import SHOTS

pytestmark = pytest.mark.browser

LESSON = "What is the capital of France?"


@pytest.fixture(scope="module")
def visit(server, tmp_path_factory):
    """The session's site on a server of its own, with no base model in the mirror (its source is the Hub)."""
    from chatlens.host.serve import SiteServer

    if not FIREFOX.exists():
        pytest.skip(f"{FIREFOX} is missing (apt-get install -y firefox-esr)")
    if not (SCRIPTS / "node_modules" / "puppeteer-core").exists():
        pytest.fail("tests/firefox/node_modules is missing: npm ci --prefix tests/firefox (scripts/setup.sh --test)")
    before = server.mirror.base_model
    server.mirror.base_model = None
    srv = SiteServer(server.root, mirror=server.mirror).start()
    try:
        SHOTS.mkdir(parents=True, exist_ok=True)
        yield firefox("experiment.mjs", url=srv.url, profile=str(tmp_path_factory.mktemp("firefox-exp") / "profile"), shots=str(SHOTS))
    finally:
        srv.shutdown()
        srv.server_close()
        server.mirror.base_model = before


def test_firefox_shows_the_recorded_comparison_says_why_the_base_cannot_download_and_keeps_a_draft(visit, server):
    recorded = json.loads((server.root / "recorded-compare.json").read_text())
    france = next(c for c in recorded["comparisons"] if c["prompt"]["text"] == LESSON)
    shown = visit["recorded"]
    assert shown["message"] == LESSON and "4-bit copy of SmolLM2-135M-Instruct" in shown["about"]
    for layout in ("plain", "template"):
        cell = shown["cells"][f"instruct/{layout}"]
        assert cell["stop"] == france["instruct"][layout]["stop_reason"]
        assert cell["text"] == (france["instruct"][layout]["reply_text"] or "(no text: the first token ended it)")
        base = shown["cells"][f"base/{layout}"]
        assert base["state"] == "not-recorded" and "real base model" in base["says"]
        assert base["quote"] == f"“{france['base'][layout]['lesson']['quote']}”"
    error = visit["baseError"]
    assert error.startswith("This page cannot reach huggingface.co"), error
    assert "byte 0" not in error and "/resolve/" not in error
    assert visit["afterReload"] == "Typed in Firefox, not sent"
