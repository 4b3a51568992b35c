"""A pasted book in Chromium: the preview answers "too long for the window" at once, from a
bound; chatlens.count then counts it exactly in the worker's background, a slice at a time, while
the worker answers the page's other requests; the exact figures equal CPython's, and the overflow
view draws them in place of "at least". The tests share one browser context (conftest.py's
`shared_app`): none needs a fresh profile."""

import time

import pytest

from chatlens import chat, window

pytestmark = pytest.mark.browser

BOOK = "Tell me the whole story of the printing press, step by step. " * 16_400  # about a million characters


_COUNTED = {}  # (content, window) -> CPython's figures: the book is counted once a module, not once a test


def exact_figures(text_side, content, window_size=8192):
    """The figures CPython counts for the same Turn (the template's default system prompt)."""
    key = (id(text_side), content, window_size)
    if key not in _COUNTED:
        _COUNTED[key] = _count(text_side, content, window_size)
    return _COUNTED[key]


def _count(text_side, content, window_size):
    steps = window.counting(text_side.tokenizer, text_side.template, system=None,
                            messages=[{"role": "user", "content": content}], window=window_size,
                            reserve=96)
    while True:
        try:
            next(steps)
        except StopIteration as done:
            return done.value


def test_a_pasted_million_characters_is_bounded_at_once_then_counted_in_the_background(shared_app, text_side):
    page = shared_app.open()
    started = time.perf_counter()
    got = page.evaluate("""async (book) => {
        const messages = [{role: 'user', content: book}];
        const t0 = performance.now();
        let bound = null;
        try {
            await chatlens.preview({messages, window: 8192});
        } catch (e) {
            bound = {name: e.name, data: e.data, ms: performance.now() - t0};
        }
        const t1 = performance.now();
        const progress = [];
        let counted = null;
        const count = chatlens.count({messages, window: 8192}, {onProgress: (p) => progress.push(p)})
            .then((c) => (counted = {figures: c, ms: performance.now() - t1}));
        while (progress.length === 0) await new Promise((r) => setTimeout(r, 5));  // the count is under way
        const t2 = performance.now();
        const tokens = await chatlens.tokenize({text: 'Answered during the count.'});
        const tokenize = {ids: tokens.prompt_ids, ms: performance.now() - t2, beforeTheCount: counted === null};
        await count;

        // The overflow view: first the bound, while counting, then the exact figures in its place.
        const {renderMessage, renderCounted} = await import(new URL('js/views/overflow.mjs', location.href).href);
        const box = document.createElement('div');
        document.body.append(box);
        const e = Object.assign(new Error('too long'), {name: 'WindowError', data: bound.data});
        renderMessage(box, 'Cannot preview: too long', 'error', e, {counting: true});
        const boundText = box.textContent;
        renderCounted(box, counted.figures);
        return {bound, tokenize, counted, progress, boundText, countedText: box.textContent};
    }""", BOOK)
    print(f"\nbound {got['bound']['ms']:.0f} ms, count {got['counted']['ms']:.0f} ms in {len(got['progress'])} steps, "
          f"a tokenize meanwhile {got['tokenize']['ms']:.0f} ms; {time.perf_counter() - started:.1f} s in all")

    bound = got["bound"]
    assert bound["name"] == "WindowError" and bound["data"]["at_least"] is True

    tokenize = got["tokenize"]
    assert tokenize["beforeTheCount"] and tokenize["ids"] == text_side.tokenizer.encode("Answered during the count.")
    assert len(got["progress"]) > 5 and got["progress"][-1]["of"] > len(BOOK)

    figures = got["counted"]["figures"]
    assert figures == {**exact_figures(text_side, BOOK), "context": text_side.config.n_ctx}  # CPython's count, pieces and sentence
    assert figures["needed"] > bound["data"]["needed"] and figures["at_least"] is False

    assert "at least" in got["boundText"] and "Counting the exact number of tokens" in got["boundText"]
    assert "at least" not in got["countedText"] and "Counting" not in got["countedText"]
    assert f"need {figures['needed']:,} tokens" in got["countedText"]  # figures with separators, as Python writes them
    assert "(the model's whole context)" in got["countedText"]  # a window of 8192: all of SmolLM2's


def test_a_newer_count_or_a_preview_ends_the_count_before_it(shared_app, text_side):
    page = shared_app.open()
    got = page.evaluate("""async (book) => {
        const turn = (content) => ({messages: [{role: 'user', content}], window: 8192});
        const outcome = (p) => p.then((c) => ({needed: c.needed}), (e) => ({error: e.name, message: e.message}));
        const first = outcome(chatlens.count(turn(book)));
        const second = outcome(chatlens.count(turn(book + ' And then?')));
        const replaced = await first;
        const preview = await chatlens.preview(turn('Hi')).catch((e) => e.name);
        const ended = await second;
        const stopper = new AbortController();
        const third = outcome(chatlens.count(turn(book), {signal: stopper.signal}));
        stopper.abort();
        const short = await chatlens.count(turn('Hi'));
        return {replaced, preview: preview.used, ended, stopped: await third, short: short.needed};
    }""", BOOK)
    assert got["replaced"] == {"error": "AbortError", "message": "a newer count replaced this one"}
    hi = [{"role": "user", "content": "Hi"}]
    assert got["preview"] == chat.preview(text_side.tokenizer, text_side.template, system=None, messages=hi, window=8192).used
    assert got["ended"] == {"error": "AbortError", "message": "a newer preview ended the count"}
    assert got["stopped"]["error"] == "AbortError"
    assert got["short"] == exact_figures(text_side, "Hi")["needed"]  # counted to its end, as CPython counts it


def test_the_live_preview_shows_the_bound_then_the_exact_count(shared_app, text_side):
    page = shared_app.open()
    page.wait_for_function("() => ['text', 'weights', 'ready'].includes(chatlens.status.state)")
    page.click("#mode-live")
    page.select_option("#window", "8192")
    page.fill("#draft", BOOK)  # pasted at once
    page.wait_for_selector("#reads .overflow-counting")
    assert "at least" in page.text_content("#reads .overflow-text")
    page.wait_for_selector("#reads .overflow-counting", state="detached", timeout=120_000)
    exact = exact_figures(text_side, BOOK)
    text = page.text_content("#reads .overflow-text")
    assert "at least" not in text and f"need {exact['needed']:,} tokens" in text
    assert f"needs {exact['needed'] + exact['reserve']:,} of" in page.text_content("#reads-summary")
