"""Persistent storage is asked for beside the download, never in front of it.

Firefox answers `navigator.storage.persist()` only once the user answers its permission prompt
(headless, never), so a download that waited for the answer never started there. Here Chromium's
persist() is made a prompt nobody answers until the test does (an init script); the download
starts and ends meanwhile, and the model box says what the pending answer, then the answer, mean.
The same in Firefox with its default settings: tests/test_firefox_browser.py.
"""

import pytest

from webapp import App  # the `server` and `browser` fixtures: tests/conftest.py

pytestmark = pytest.mark.browser

STORED_MS = 180_000  # the tiny model: a few MB stored and checked

# persist() as a prompt the user has not answered: it resolves only when the test calls
# window.__answerPersist(answer); persisted() says what was granted so far, as the browser does.
UNANSWERED = """(() => {
  if (!navigator.storage) return;
  let granted = false;
  window.__persistCalls = 0;
  const answered = new Promise((resolve) => {
    window.__answerPersist = (answer) => { granted = answer; resolve(answer); };
  });
  navigator.storage.persist = () => { window.__persistCalls++; return answered; };
  navigator.storage.persisted = () => Promise.resolve(granted);
})();"""


@pytest.fixture(scope="module")
def tiny(server):
    """The tiny random model (tests/tiny_model.py) beside the site: stored in seconds."""
    from tiny_model import write_tiny_model

    write_tiny_model(server.root / "tiny-persist" / "model", server.mirror.files["config.json"].parent, seed=5)
    return f"{server.url}tiny-persist/model/"


def stored(page):
    page.wait_for_selector("#model-body [data-stored='complete']", timeout=STORED_MS)
    return page.get_attribute("#persistence", "data-persistence"), page.text_content("#persistence")


def test_the_download_starts_and_ends_while_the_browser_has_not_answered_persist(app, tiny):
    app.context.add_init_script(UNANSWERED)
    page = app.open(f"?model={tiny}")
    page.click("#download")
    page.wait_for_selector("#persistence[data-persistence='pending']")  # said as the download starts
    state, note = stored(page)
    assert page.evaluate("window.__persistCalls") == 1  # asked once, and still unanswered
    assert state == "pending" and "has not answered yet" in note and "may evict it" in note
    assert [u for u in app.urls() if u.endswith("/model.safetensors")]
    assert page.evaluate("chatlens.storedModels()")[0]["complete"]
    app.shot("persist-unanswered")
    page.set_viewport_size({"width": 390, "height": 844})
    app.shot("persist-unanswered-phone")
    page.set_viewport_size({"width": 1400, "height": 1000})

    # The user answers the prompt: the box says what a grant means.
    page.evaluate("window.__answerPersist(true)")
    page.wait_for_selector("#persistence[data-persistence='persistent']")
    assert page.text_content("#persistence") == "Stored persistently: the browser won't evict it under storage pressure."
    app.shot("persist-granted")


def test_a_refusal_says_the_browser_may_evict_the_model(app, tiny):
    # Headless Chromium refuses persistent storage unless a test grants it (../shared/notes/browser.md).
    page = app.open(f"?model={tiny}")
    page.click("#download")
    stored(page)
    page.wait_for_selector("#persistence[data-persistence='evictable']")
    assert page.evaluate("navigator.storage.persisted()") is False
    assert page.text_content("#persistence").startswith("The browser may evict it under storage pressure")
    app.shot("persist-refused")
