"""The lesson's first experiment as a learner meets it (issue 32), in Chromium: Base vs instruct
before any download (a recorded comparison, and the base's download failing in a plain sentence
where the Hub cannot be reached), then with both models stored (each cell's own state, the 2x2
brought into view with an estimate, the base named from what its files are, the comparison kept
across a reload and a mode left, a draft kept).

The Hub cannot be reached here, so the base is a stand-in: a tiny random model with SmolLM2's
tokenizer whose README says it is one, served by the mirror as `serve --base-model FOLDER` serves
one, beside a tiny instruct model (tests/tiny_model.py): replies are noise, the machinery is
real. Screenshots at 1400x900 and 390x844 go to artifacts/screenshots/experiment-*.png.
"""

import json
import re

import numpy as np
import pytest

pytestmark = pytest.mark.browser

LESSON = "What is the capital of France?"
CELLS = ["instruct/plain", "instruct/template", "base/plain", "base/template"]  # the order Python computes them in
RUN_MS = 300_000
COMPARE_MODE = """try { localStorage.setItem('chatlens.prefs', '{"mode": "compare"}'); } catch {}"""
SIZES = ((1400, 900), (390, 844))
# A few tokens a reply: SwiftShader computes even the tiny models' steps slowly on this machine, and
# the lab's cap of 48 would take minutes a run. The page reads the cap from its settings at each send.
CAP = "chatlens.settingsReady.then((s) => { s.compare_limit = 5; })"


def until(page, js, what, arg=None, timeout=RUN_MS):
    """wait_for_function, failing with what the page shows when it never comes."""
    from playwright.sync_api import TimeoutError as Timeout

    try:
        page.wait_for_function(js, arg=arg, timeout=timeout, polling=200)
    except Timeout:
        shown = page.evaluate("""() => ({cells: [...document.querySelectorAll('#compare-grid .compare-cell')].map((c) => c.dataset.state),
            estimate: document.getElementById('compare-estimate')?.textContent, error: document.getElementById('compare-error')?.textContent,
            writing: chatlens.writing, status: chatlens.status, y: scrollY, grid: document.getElementById('compare-grid')?.getBoundingClientRect().top})""")
        raise AssertionError(f"{what} never came: {shown}") from None


def first_token(page, text):
    """Until the run just started for `text` has written its first token (not a run shown again)."""
    page.wait_for_function("""(t) => !document.getElementById('compare-restored') &&
        document.querySelector('#compare-both .compare-layout[data-layout=plain] .compare-read')?.textContent === t &&
        [...document.querySelectorAll('#compare-grid .compare-cell[data-state=writing] .compare-reply')].some((r) => r.textContent)""", arg=text)


def draft_saved(page, text):
    """Until the comparison's box holds `text` as the page keeps it for the next visit (page/prefs.mjs
    DRAFTS_KEY, written after a pause in typing)."""
    page.wait_for_function("(t) => { try { return JSON.parse(localStorage.getItem('chatlens.drafts')).compare === t; } "
                           "catch { return false; } }", arg=text)


def reload(app):
    """The page again, as a reload brings it (the test's cap set again)."""
    app.page.reload()
    app.wait_ready()
    app.page.evaluate(CAP)


def shots(page, name, at="#reads-title"):
    """The mode at desk and phone sizes, `at` scrolled to the top; never scrolling sideways."""
    from webapp import SHOTS

    SHOTS.mkdir(parents=True, exist_ok=True)
    for w, h in SIZES:
        page.set_viewport_size({"width": w, "height": h})
        assert page.evaluate("document.documentElement.scrollWidth <= innerWidth"), f"the page scrolls sideways at {w}px"
        page.evaluate("(s) => document.querySelector(s).scrollIntoView({block: 'start'})", at)
        page.screenshot(path=str(SHOTS / f"experiment-{name}-{w}.png"))
    page.set_viewport_size({"width": 1400, "height": 900})


def states(page):
    """Each cell's state and stop, as the page shows them."""
    return page.evaluate("""() => Object.fromEntries([...document.querySelectorAll('#compare-grid .compare-cell')].map((c) => [
        `${c.dataset.model}/${c.dataset.layout}`, {state: c.dataset.state, stop: c.querySelector('[data-stop]')?.dataset.stop ?? null,
        says: c.querySelector('.compare-state')?.textContent ?? '', text: c.querySelector('.compare-reply')?.textContent ?? null}]))""")


# -- before any download ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def first_visit(browser, server, python_snapshot):
    """The page on its default model with nothing stored, in Base vs instruct; no base in the
    mirror, so the base's source is the Hub, which cannot be reached from here."""
    from webapp import App

    before = server.mirror.base_model
    server.mirror.base_model = None
    a = App(browser, server, snapshot=python_snapshot)  # a fresh profile whose pages start Python from the snapshot
    a.context.add_init_script(COMPARE_MODE)
    a.open()
    yield a
    a.close()
    server.mirror.base_model = before
    assert not a.errors, a.errors


def test_before_any_download_a_recorded_comparison_with_its_weights_and_the_lessons_words(first_visit, server):
    page = first_visit.page
    recorded = json.loads((server.root / "recorded-compare.json").read_text())
    page.wait_for_selector("#compare-recorded")
    about = page.text_content("#compare-recorded")
    assert "4-bit copy of SmolLM2-135M-Instruct" in about and recorded["models"]["instruct"]["file"] in about
    assert "not the original bf16 weights" in about
    france = next(c for c in recorded["comparisons"] if c["prompt"]["text"] == LESSON)
    shown = states(page)
    for layout in ("plain", "template"):
        cell = france["instruct"][layout]
        assert shown[f"instruct/{layout}"]["stop"] == cell["stop_reason"]
        assert shown[f"instruct/{layout}"]["text"] == (cell["reply_text"] or "(no text: the first token ended it)")
        # the base's half is not recorded (no real base here): its cell says so, in the lesson's words
        base = page.locator(f'.compare-cell[data-model="base"][data-layout="{layout}"]')
        assert base.get_attribute("data-state") == "not-recorded"
        assert "real base model" in base.locator(".compare-state").text_content()
        assert base.locator("blockquote").text_content() == f"“{france['base'][layout]['lesson']['quote']}”"
        assert "The lesson's own words" in base.locator("figcaption").text_content()
    assert "<|im_end|>" in page.text_content('.compare-cell[data-model="base"][data-layout="template"] blockquote')
    # the lesson's figure beside the recorded instruct's, and only what is known of why they differ
    note = page.text_content('.compare-cell[data-model="instruct"][data-layout="template"] .compare-lesson')
    assert "83%" in note and "4-bit copy of the weights (Q4_1)" in note and "has not been measured" in note
    assert "59.2%" in note and "downloadable from the Hub" in note and "because" not in note
    # another recorded message, one click away
    page.click(".compare-recorded-pick >> nth=0")
    other = page.input_value("#compare-text")
    assert other != LESSON and other in recorded["prompts"]
    assert page.text_content("#compare-both .compare-layout[data-layout=plain] .compare-read") == other
    # picked, it is kept as a message typed there is: a reload shows the same (issue 43.4)
    draft_saved(page, other)
    page.reload()
    first_visit.wait_ready()
    assert page.input_value("#compare-text") == other
    page.wait_for_function("t => document.querySelector('#compare-both .compare-read')?.textContent === t", arg=other)
    page.fill("#compare-text", LESSON)
    page.wait_for_function("t => document.querySelector('#compare-both .compare-read')?.textContent === t", arg=LESSON)
    shots(page, "before-download", "#compare-recorded")


def test_the_base_download_where_the_hub_cannot_be_reached_says_so_plainly(first_visit):
    page = first_visit.page
    page.click("#base-model summary")
    page.click("#download-base")
    error = page.wait_for_selector("#base-error", timeout=120_000).text_content()
    assert error.startswith("This page cannot reach huggingface.co, where the base model's files are"), error
    assert "Try again once huggingface.co can be reached" in error and "recorded" in error
    assert "broke off" not in error and "byte 0" not in error and "/resolve/" not in error and "Failed to fetch" not in error
    page.locator("#model-box").screenshot(path=str(__import__("webapp").SHOTS / "experiment-base-unreachable.png"))
    page.click("#base-model summary")


# -- both models stored --------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def both(browser, server, python_snapshot):
    """The page on a tiny instruct, with a tiny stand-in base beside it, both stored, in Base vs instruct."""
    from chatlens.host.mirror import base_mirror
    from tiny_model import write_tiny_model
    from webapp import App

    tokenizers = server.mirror.files["config.json"].parent
    write_tiny_model(server.root / "tiny-exp" / "instruct", tokenizers, seed=31)
    folder = write_tiny_model(server.root / "tiny-exp" / "base", tokenizers, seed=32)
    (folder / "README.md").write_text("# A stand-in for SmolLM2-135M: a tiny random model (test_experiment_browser)\n")
    before = server.mirror.base_model
    server.mirror.base_model = base_mirror(folder)
    a = App(browser, server, snapshot=python_snapshot)  # a fresh profile whose pages start Python from the snapshot
    a.context.add_init_script(COMPARE_MODE)
    page = a.open(f"?model={server.url}tiny-exp/instruct/")
    page.evaluate("chatlens.downloadModel()")
    assert page.evaluate("chatlens.downloadModel({model: 'base'})")["complete"]
    # reloaded once the instruct's weights, loaded after its download, are on the device: a reload
    # in the middle of that upload leaves the next page's boot waiting on a busy software GPU
    page.wait_for_function("() => chatlens.model?.backend", timeout=RUN_MS)
    page.reload()
    a.wait_ready()
    page.wait_for_function("() => chatlens.model?.backend", timeout=RUN_MS)
    page.wait_for_selector("#compare-missing", state="detached")
    page.set_default_timeout(RUN_MS)
    page.evaluate(CAP)
    yield a
    a.close()
    server.mirror.base_model = before
    assert not a.errors, a.errors


WATCH = """() => {
    // every state the cells pass through, as drawn (a mutation at a time: a tiny model's replies
    // come faster than any polling from here), and whether the 2x2 was in view then
    window.__seen = [];
    const snap = () => {
        const cells = [...document.querySelectorAll('#compare-grid .compare-cell')];
        if (cells.length !== 4) return;
        const s = Object.fromEntries(cells.map((c) => [`${c.dataset.model}/${c.dataset.layout}`, c.dataset.state +
            (c.querySelector('[data-stop]') ? ':' + c.querySelector('[data-stop]').dataset.stop : '')]));
        const r = document.getElementById('compare-grid').getBoundingClientRect();
        const seen = {s, inView: r.top < innerHeight && r.bottom > 0, estimate: document.getElementById('compare-estimate')?.textContent ?? '',
                      // where the 2x2 sits on the page, whether what both read is drawn, a count shown under "Reading the prompt"
                      top: Math.round(r.top + scrollY), both: Boolean(document.getElementById('compare-both')),
                      countWhileReading: cells.some((c) => c.dataset.state === 'reading' && c.querySelector('.compare-count:not([hidden])'))};
        const key = JSON.stringify(seen);
        if (window.__seen.at(-1)?.key !== key) window.__seen.push({key, ...seen});
    };
    new MutationObserver(snap).observe(document.getElementById('reads'), {childList: true, subtree: true, attributes: true, characterData: true});
    addEventListener('scroll', snap);
}"""


def test_each_cell_shows_its_own_state_and_its_result_the_moment_it_ends(both):
    page = both.page
    page.set_viewport_size({"width": 390, "height": 844})
    page.evaluate("window.scrollTo(0, 0)")
    page.evaluate(WATCH)
    page.fill("#compare-text", LESSON)
    page.click("#compare-run")
    until(page, "() => window.__seen.some((s) => s.s['instruct/plain'] === 'writing')", "the first reply written")
    until(page, "() => !chatlens.writing && document.getElementById('compare-stop').hidden", "the end of the four")
    seen = [s for s in page.evaluate("window.__seen") if "not-recorded" not in s["s"].values()]  # the recording shown first
    order = [s["s"] for s in seen]
    # at the start the first reads or writes and the three after it wait
    assert any(s["instruct/plain"] in ("reading", "writing") and all(s[c] == "waiting" for c in CELLS[1:]) for s in order), order
    # the first one's result is shown the moment it ends, while the base's last is still to come
    first_done = next(s for s in order if s["instruct/plain"].startswith("ended:"))
    assert first_done["base/template"] == "waiting", first_done
    # never four "Writing…" at once: one reply is computed at a time
    assert all(sum(v == "writing" for v in s.values()) <= 1 for s in order), order
    # the 2x2 brought into view on a phone, and how long the rest takes said while they are written
    writing = [s for s in seen if "writing" in s["s"].values()]
    assert writing and any(s["inView"] for s in writing), seen
    assert any(re.match(r"(About \d+ s more \(so far|Between about .* more: the most if no reply ends before the cap of|"
                        r"Likely about .* more, between .*: likely if each reply still to come is as long as the median)",
                        s["estimate"]) for s in writing), seen
    # what both read comes below the 2x2: the cells stay where they are when it comes (issue 43.9)
    came = next(i for i, s in enumerate(seen) if s["both"])
    assert came > 0 and seen[came]["top"] == seen[came - 1]["top"], seen[came - 1:came + 1]
    # a cell reading its prompt shows no count of tokens under it (issue 43.5)
    assert not any(s["countWhileReading"] for s in seen), seen
    end = states(page)
    assert all(end[c]["state"] == "ended" and end[c]["stop"] for c in CELLS), end
    assert page.is_hidden("#compare-estimate")
    shots(page, "after", "#compare-grid")

    # the lab's cap: long enough to look at one mid-run (the base's last still waiting), then Stop
    page.evaluate("chatlens.settings.compare_limit = 48")
    page.click("#compare-run")
    until(page, "() => !document.getElementById('compare-restored') && "
                "document.querySelector('.compare-cell[data-model=instruct][data-layout=plain] [data-stop]') && "
                "document.querySelector('.compare-cell[data-model=instruct][data-layout=template]')?.dataset.state === 'writing' && "
                "/^Likely about/.test(document.getElementById('compare-estimate')?.textContent)", "the second reply under way")
    assert page.get_attribute('.compare-cell[data-model="base"][data-layout="template"]', "data-state") == "waiting"
    # the likely figure beside the worst case, made from the one reply ended so far: its length, as its cell shows it
    ended = page.locator('.compare-cell[data-model="instruct"][data-layout="plain"] .reply-tokens .tok').count()
    said = page.text_content("#compare-estimate")
    assert f"as long as the median of those ended so far ({ended} token" in said and "the most if no reply ends" in said
    assert page.evaluate("getComputedStyle(document.getElementById('compare-stop')).backgroundColor") == "rgb(185, 28, 28)"  # red, as Live's Stop
    shots(page, "mid-run", "#compare-estimate")
    page.click("#compare-stop")
    until(page, "() => !chatlens.writing && document.getElementById('compare-stop').hidden", "the stop")
    assert page.text_content("#compare-stopped") == "Stopped: you pressed Stop."
    assert states(page)["base/template"]["state"] == "never-ran"
    page.evaluate(CAP)


def test_a_step_of_the_bases_template_cell_is_inspected_where_it_was_drawn_and_not_branched(both):
    """A chip of a comparison cell names its step (issue 34.5: the comparison's cells too): its
    inspection is chatlens.inspect's on that cell's model and layout (the base's weights, the
    template the instruct model reads), and the step offers no branch, saying why."""
    page = both.page
    # the lesson's message, so the comparison the next test reloads is still the lesson's
    page.fill("#compare-text", LESSON)
    page.click("#compare-run")
    # this run's four, each ended: the last run's grid (the same message, stopped) kept one that never ran
    until(page, """(t) => !chatlens.writing && !document.getElementById('compare-restored') &&
        document.querySelector('#compare-both .compare-layout[data-layout=plain] .compare-read')?.textContent === t &&
        [...document.querySelectorAll('#compare-grid .compare-cell')].filter((c) => c.dataset.state === 'ended').length === 4""",
          "the four replies", arg=LESSON)
    cell = '.compare-cell[data-model="base"][data-layout="template"]'
    chips = page.eval_on_selector_all(f"{cell} .reply-tokens .tok", "ts => ts.map((t) => Number(t.dataset.id))")
    assert len(chips) >= 2, chips
    page.locator(f"{cell} .reply-tokens .tok").nth(1).click()
    assert page.text_content("#step-box .step-name").startswith("Token 2 of the base model's chat-template cell's reply")
    assert page.locator("#step-box .branch-offer").count() == 0
    assert "can be inspected, not branched" in page.text_content("#step-box .step-bar")
    page.click("#step-box .step-inspect")
    # the step box's inspection, as the store holds it
    until(page, "() => chatlens.pageState.stepBox.inspection?.answer && document.querySelector('#step-box .inspect')", "the inspection")
    got = page.evaluate("chatlens.pageState.stepBox.inspection.answer")
    want = page.evaluate("""([replyIds, lesson]) => chatlens.inspect({messages: [{role: 'user', content: lesson}], preset: 'none',
                                                            model: 'base', layout: 'template', replyIds, step: 1})""", [chips, LESSON])
    assert got["reply_ids"] == chips and got["chosen_id"] == chips[1] == want["chosen_id"]
    assert got["prompt_ids"] == want["prompt_ids"] and got["backend"] == want["backend"]
    np.testing.assert_allclose(got["attention"], want["attention"], rtol=0, atol=1e-5)
    assert [[i for i, _ in row] for row in got["lens"]] == [[i for i, _ in row] for row in want["lens"]]
    assert page.locator("#step-box .share-row").count() == len(got["by_piece"])
    shots(page, "inspect-base-cell", "#step-box")
    page.click("#step-box .inspect-close")
    # a plain cell's step: no "Which piece it needed", and the bar says why where the button would be
    page.locator('.compare-cell[data-model="base"][data-layout="plain"] .reply-tokens .tok').nth(0).click()
    assert page.text_content("#step-box .step-name").startswith("Token 1 of the base model's plain-text cell's reply")
    assert page.locator("#step-box .step-cause").count() == 0
    said = page.text_content("#step-box .step-no-cause")
    assert said.startswith("“Which piece it needed” is not offered here. Plain text is one piece with nothing around it")
    shots(page, "plain-cell-step", "#step-box")


def test_the_base_is_named_as_what_its_files_are_everywhere(both):
    page = both.page
    says = "a stand-in for the base model, not SmolLM2-135M's weights"
    assert says in page.text_content("#compare-notice")
    assert "SmolLM2-135M (the base model, pretraining only)" not in page.text_content("#compare-box")
    for layout in ("plain", "template"):
        heading = page.text_content(f'.compare-cell[data-model="base"][data-layout="{layout}"] h3')
        assert heading.startswith("Stand-in base") and "SmolLM2-135M" not in heading
    assert says in page.text_content(".compare-about")
    page.click("#base-model summary")
    stored = page.text_content("#base-stored")
    assert says in stored and "SmolLM2-135M, the base model" not in stored
    page.click("#base-model summary")
    # the status names it as its source's label does: a stand-in
    assert "stand-in" in page.evaluate("chatlens.status.detail") or "stand-in" in page.get_attribute("#status", "title")


def test_the_comparison_survives_a_reload_and_says_when_leaving_the_mode_stopped_it(both):
    page = both.page
    # finished: the same message, the same four, after a reload
    before = states(page)
    reload(both)
    page.wait_for_selector("#compare-restored")
    assert page.input_value("#compare-text") == LESSON
    # named as before the reload once the store and the source have said: the stand-in, not “Base”;
    # the instruct's weights by its source, never “an address you gave” (issue 43.4)
    until(page, "() => document.querySelector('.compare-cell[data-model=base] h3')?.textContent.startsWith('Stand-in base')",
          "the base named after the reload")
    assert "a stand-in for the base model" in page.text_content(".compare-about")
    until(page, "() => chatlens.source && /These weights \\(/.test(document.getElementById('reads').textContent)",
          "the instruct's weights named after the reload")
    assert "an address you gave" not in page.text_content("#reads")
    shots(page, "reloaded", "#compare-grid")
    again = states(page)
    assert {c: (again[c]["stop"], again[c]["text"]) for c in CELLS} == {c: (before[c]["stop"], before[c]["text"]) for c in CELLS}

    # running: reloaded at the first token, the one under way keeps what it wrote, stopped; the
    # ones after it never ran
    page.wait_for_function("() => chatlens.model?.backend", timeout=RUN_MS)
    page.fill("#compare-text", "Once upon a time")
    page.click("#compare-run")
    first_token(page, "Once upon a time")
    reload(both)
    page.wait_for_selector("#compare-restored")
    assert page.input_value("#compare-text") == "Once upon a time"
    cut = states(page)
    assert cut["base/template"]["state"] == "never-ran" and cut["base/template"]["says"] == "Never ran."
    assert "the page was reloaded while it ran" in page.text_content('.compare-cell[data-model="base"][data-layout="template"] .compare-stop')
    assert any(cut[c]["stop"] == "stopped" for c in CELLS) and "Stopped after 0 tokens" not in page.text_content("#compare-grid")

    # leaving the mode mid-run says so when coming back
    page.wait_for_function("() => chatlens.model?.backend", timeout=RUN_MS)
    page.click("#compare-run")
    first_token(page, "Once upon a time")
    page.click("#mode-live")
    page.wait_for_function("() => !chatlens.writing")
    page.click("#mode-compare")
    assert page.text_content("#compare-stopped") == "Stopped: you left Base vs instruct while it ran."
    assert "never-ran" in [s["state"] for s in states(page).values()]

    # a message typed and not sent is kept too
    page.fill("#compare-text", "A draft, not sent")
    draft_saved(page, "A draft, not sent")  # saved after a pause in typing
    reload(both)
    assert page.input_value("#compare-text") == "A draft, not sent"
    page.fill("#compare-text", LESSON)
    draft_saved(page, LESSON)
