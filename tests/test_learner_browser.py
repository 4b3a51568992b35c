"""The lab, second pass as a learner meets it (issue 16), in Debian's Chromium: each thing said
once and in words (counts, why a reply ended, what a message's count holds, the status line,
Recorded mode's controls), no "null" printed, controls that can be read (contrast computed from
the page's styles), and the phone layout. One page serves the tests (Python boots once); each
state saves a screenshot to artifacts/screenshots/learner-*.png.
"""

import re

import pytest

from webapp import SHOTS, App  # the `server` and `browser` fixtures: tests/conftest.py

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def learner(browser, server):
    a = App(browser, server)
    a.open()
    yield a
    errors = a.errors
    a.close()
    assert not errors, errors


def recorded(app, preset="none", window=1024, step=0):
    page = app.page
    page.click("#mode-recorded")
    page.select_option("#preset", preset)
    page.select_option("#window", str(window))
    page.wait_for_function("() => document.getElementById('reads-caption')?.textContent.startsWith('Recorded')")
    while page.is_enabled("#rec-prev"):
        page.click("#rec-prev")
    for _ in range(step):
        page.click("#rec-next")
    page.wait_for_function("t => document.getElementById('rec-pos').textContent.startsWith(t)", arg=f"Turn {step + 1} of")
    return page


def conversation(doc, preset, window):
    return next(c for c in doc["conversations"] if c["preset"] == preset and c["window"] == window)


# -- each thing said once, in words -------------------------------------------------------------------------


def test_counts_are_words_one_token_and_two_messages(learner, doc):
    page = recorded(learner, window=256, step=2)  # the oldest turn is dropped here: two messages
    dropped = conversation(doc, "none", 256)["turns"][2]["dropped_messages"]
    assert len(dropped) == 2
    assert page.text_content(".dropped-title") == "Dropped to fit the window (oldest first): 2 messages"
    # a crafted record with counts of one: "1 token", never "1 tokens"
    turn = conversation(doc, "none", 1024)["turns"][0]
    one = {**turn, "reply_ids": turn["reply_ids"][:1], "reply_tokens": turn["reply_tokens"][:1],
           "reply_text": turn["reply_tokens"][0], "reply_vocab": None, "reply_bytes": None, "stop_reason": "stopped",
           "computed_tokens": 1, "timings": {"prefill_ms": 5}}
    page.evaluate("""async (rec) => {
        const r = await import('./js/views/reads.mjs');
        r.renderRecord(document.getElementById('reads'), rec, {caption: 'crafted: counts of one'});
    }""", one)
    everything = page.evaluate("""() => document.body.innerText + ' ' +
        [...document.querySelectorAll('[title], [aria-label]')].map(e => (e.title || '') + ' ' + (e.getAttribute('aria-label') || '')).join(' ')""")
    assert not re.search(r"(?<![\d,.])1 (tokens|messages)\b", everything)
    assert "(s)" not in everything
    assert "1 token" in page.text_content(".reply-title") and "read 1 new token in" in page.text_content("[data-stat=speed]")


def test_bubbles_say_in_words_why_a_reply_ended(learner, doc):
    page = recorded(learner, window=1024, step=2)  # turn 2's reply was cut at the reply limit
    turns = conversation(doc, "none", 1024)["turns"]
    metas = page.eval_on_selector_all("#chat .msg.assistant .meta", "ms => ms.map(m => [m.textContent, m.dataset.stop])")
    assert [stop for _, stop in metas] == [t["stop_reason"] for t in turns[:3]]
    words = {"end_turn": "the model ended it", "max_tokens": "cut off at the reply limit", "stopped": "stopped by you"}
    for (text, stop), t in zip(metas, turns):
        assert text == f"wrote {len(t['reply_ids'])} tokens · {words[stop]}"
        assert "stop:" not in text and "_" not in text
    user = page.eval_on_selector_all("#chat .msg.user .meta", "ms => ms.map(m => m.textContent)")
    assert all(m.endswith("tokens with the template's wrapping") for m in user), user
    learner.shot("learner-recorded-bubbles")


def test_a_message_row_says_how_many_tokens_are_the_templates(learner, doc, tokenizer):
    """A reply of 96 tokens is 102 in the next prompt: the row says 6 are the template's, the
    role's name being cut like any word ("assistant" into two tokens), and the note says so."""
    page = recorded(learner, window=1024, step=2)
    record = conversation(doc, "none", 1024)["turns"][2]
    rows = page.eval_on_selector_all("tr.piece-row", """rs => rs.map(r => [r.dataset.kind, Number(r.dataset.count),
        r.querySelector('.share')?.textContent || null])""")
    for (kind, count, share), piece in zip(rows, record["pieces"]):
        if kind == "header":
            assert share is None
            continue
        role = {"default_system": "system", "new": "user"}.get(kind, kind)
        # the template's tokens, from the tokenizer (tested against Hugging Face's): <|im_start|>,
        # the role, a line break; <|im_end|> and a line break
        framing = len(tokenizer.encode(f"<|im_start|>{role}\n")) + len(tokenizer.encode("<|im_end|>\n"))
        assert share == f" · {framing} of the template's + {count - framing} tokens of its text", (kind, share)
        assert count == piece["count"]
    reply = next(r for r in rows if r[0] == "assistant" and r[1] == 102)
    assert "+ 96 tokens of its text" in reply[2]
    note = page.text_content(".pieces-box .vocabulary")
    n = len(tokenizer.encode("assistant"))
    assert n == 2 and "“assistant” is 2 tokens" in note and "“user” is 1 token" in note
    assert "tokenized afresh" in note
    learner.shot("learner-template-share")


def test_the_status_line_says_each_thing_once_and_whole(learner):
    page = learner.page
    text = " ".join(page.inner_text("#status").split())
    state = page.get_attribute("#status", "data-state")
    assert state in ("text", "weights", "ready")
    phrases = re.findall(r"[a-z']+ [a-z']+ [a-z']+", text.lower())
    assert len(phrases) == len(set(phrases)), text  # no three words twice
    assert text.lower().count("ready") <= 1, text
    whole = page.evaluate("""() => [...document.querySelectorAll('#status, #status *')]
        .every(e => e.scrollWidth <= e.clientWidth + 1 && getComputedStyle(e).textOverflow !== 'ellipsis')""")
    assert whole, text
    # the rule, on what the worker says in each state
    got = page.evaluate("""async () => {
        const s = await import('./js/views/status.mjs');
        return [s.restates('Previews work; replies need the model', "the tokenizer and chat template are ready; replies need the model's weights"),
                s.restates('Loading the model', "loading the model's weights"),
                s.restates('Loading the model', 'the tokenizer and chat template are ready; the weights are next'),
                s.restates('Previews work; replies need the model', 'replies are not available: no WebGPU adapter')];
    }""")
    assert got == [True, True, False, False]


def test_a_learner_who_asks_for_less_motion_sees_the_status_dot_still(learner):
    """The tests' Chromium asks for reduced motion (webapp.LAUNCH_ARGS): the dot that pulses while the
    model is not ready stands still; without the request it pulses."""
    page = learner.page
    assert page.get_attribute("#status", "data-state") != "ready"  # no model stored: the dot would pulse
    animation = "() => getComputedStyle(document.querySelector('#status .dot')).animationName"
    assert page.evaluate(animation) == "none"
    page.emulate_media(reduced_motion="no-preference")
    try:
        assert page.evaluate(animation) == "pulse"
    finally:
        page.emulate_media(reduced_motion="reduce")


def test_recorded_mode_offers_its_own_controls(learner, doc):
    page = recorded(learner, window=1024, step=3)
    assert page.inner_text("#new-conversation") == "Back to turn 1"
    page.click("#new-conversation")
    page.wait_for_function("() => document.getElementById('rec-pos').textContent.startsWith('Turn 1 of')")
    # the long message is not in the recording: its chip says what the turn it leads to shows
    chip = page.inner_text("#rec-suggestions button[data-suggestion=long] .s-text")
    assert chip == "The first turn that drops a message"
    page.click("#rec-suggestions button[data-suggestion=long]")
    smallest = min(c["window"] for c in doc["conversations"] if c["preset"] == "none")
    step = next(i for i, t in enumerate(conversation(doc, "none", smallest)["turns"]) if t["dropped_messages"])
    page.wait_for_function("t => document.getElementById('rec-pos').textContent.startsWith(t)", arg=f"Turn {step + 1} of")
    assert page.locator(".dropped").count() == 1
    learner.shot("learner-recorded-long-chip")
    page.click("#mode-plain")
    assert not page.is_visible("#new-conversation")  # plain text has no conversation to restart
    page.click("#mode-live")
    assert page.inner_text("#new-conversation") == "New conversation"


def test_nothing_prints_null(learner):
    page = learner.page
    page.click("#mode-live")
    page.click("#workbench summary")
    page.wait_for_selector("#wb-text")
    page.click("#manage summary")
    page.wait_for_selector("#storage-estimate")
    nulls = page.evaluate("""() => {
        const out = [];
        const walk = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
        while (walk.nextNode()) if (/^\\s*(null|undefined)\\s*$/.test(walk.currentNode.data)) out.push(walk.currentNode.parentElement.outerHTML.slice(0, 120));
        return out;
    }""")
    assert nulls == []
    page.click("#workbench summary")
    page.click("#manage summary")


# -- controls that can be read -------------------------------------------------------------------------------

# Every visible, enabled control's text against what is behind it, from computed styles: WCAG's
# contrast ratio of the text colour (blended over the background) and the first opaque-enough
# background among it and its ancestors (blended down to the page's).
CONTRAST = """() => {
  const rgba = (s) => { const m = s.match(/[\\d.]+/g).map(Number); return [m[0], m[1], m[2], m.length > 3 ? m[3] : 1]; };
  const over = (top, bottom) => [0, 1, 2].map((i) => top[i] * top[3] + bottom[i] * (1 - top[3])).concat([1]);
  const lum = (c) => { const l = c.slice(0, 3).map((v) => { v /= 255; return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; });
                       return 0.2126 * l[0] + 0.7152 * l[1] + 0.0722 * l[2]; };
  const background = (e) => {
    const layers = [];
    for (let n = e; n; n = n.parentElement) {
      const c = rgba(getComputedStyle(n).backgroundColor);
      if (c[3] > 0) layers.push(c);
      if (c[3] >= 1) break;
    }
    return layers.reverse().reduce((acc, c) => over(c, acc), [255, 255, 255, 1]);
  };
  const out = [];
  for (const e of document.querySelectorAll('button, select, summary, a[href], [role=tab], input:not([type=checkbox]):not([type=radio]), textarea, label')) {
    const r = e.getBoundingClientRect();
    if (!r.width || !r.height || e.disabled || e.closest('[hidden]') || getComputedStyle(e).visibility === 'hidden') continue;
    if (!e.textContent.trim() && !['SELECT', 'INPUT', 'TEXTAREA'].includes(e.tagName)) continue;
    const bg = background(e);
    const fg = over(rgba(getComputedStyle(e).color), bg);
    const [a, b] = [lum(fg), lum(bg)].sort((x, y) => y - x);
    const ratio = (a + 0.05) / (b + 0.05);
    out.push({ what: (e.id ? '#' + e.id : e.tagName.toLowerCase()) + ' ' + e.textContent.trim().slice(0, 30), ratio: Math.round(ratio * 100) / 100 });
  }
  return out;
}"""


def test_every_control_can_be_read(learner):
    page = learner.page
    seen = {}
    for mode in ("live", "recorded", "plain"):
        page.click(f"#mode-{mode}")
        page.evaluate("() => { for (const id of ['stop', 'plain-stop']) document.getElementById(id).hidden = false; }")
        for c in page.evaluate(CONTRAST):
            seen[c["what"]] = min(c["ratio"], seen.get(c["what"], 99))
        page.evaluate("() => { for (const id of ['stop', 'plain-stop']) document.getElementById(id).hidden = true; }")
    assert any(w.startswith("#stop") for w in seen) and any(w.startswith("#plain-stop") for w in seen)
    low = {w: r for w, r in seen.items() if r < 4.5}
    assert not low, low
    page.click("#mode-live")


# -- true to the lesson -------------------------------------------------------------------------------------------


def test_plain_text_says_why_its_numbers_are_not_the_lessons(learner):
    """The lesson's France experiment: beside each distribution, the lesson's figure, this copy's,
    and why they differ (the mirror holds 4-bit weights), in one sentence."""
    page = learner.page
    page.click("#mode-plain")
    page.wait_for_function("() => document.querySelector('[data-stat=plain-tokens]')")
    assert page.input_value("#plain-text") == "What is the capital of France?"
    # the two sides' first steps as the worker answers them (ids and logits here are made up:
    # the note reads the probability it is given)
    notes = page.evaluate("""async () => {
        const v = await import('./js/views/plain.mjs');
        const w = await import('./js/page/weights.mjs');
        const side = (tok, p) => ({ reply_ids: [2], reply_tokens: [tok], reply_text: '', stop_reason: 'max_tokens',
                                    top_k: [[[2, 20.1, p], [504, 19.0, 0.1]]], top_k_tokens: [[tok, 'Paris']] });
        const tokens = await chatlens.tokenize({ text: 'What is the capital of France?' });
        const draw = (source) => {
            v.renderPlain(document.getElementById('reads'), { tokens, plain: { answer: side('<|im_end|>', 0.678) },
                chat: { answer: side('The', 0.155) }, gap: 0.01, lesson: w.weightsOf(source) });
            return [...document.querySelectorAll('.lesson-note')].map((n) => [n.dataset.lesson, n.textContent]);
        };
        return { mirror: draw(chatlens.source), hub: draw({ origin: 'hub', kind: 'hf' }) };
    }""")
    (plain, p_text), (chat, c_text) = notes["mirror"]
    assert (plain, chat) == ("plain", "chat")
    assert "reports 73% for “<|im_end|>”" in p_text and "gives it 67.8%" in p_text and "4-bit weights (Q4_1)" in p_text
    assert "reports 83% for “The”" in c_text and "gives it 15.5%" in c_text
    assert "same original weights" in notes["hub"][0][1]
    learner.shot("learner-plain-lesson-note")
    page.click("#mode-live")


def test_a_challenge_counts_only_replies_that_show_it_and_quotes_them(learner):
    got = learner.evaluate("""async () => {
        const c = await import('./js/lesson/challenges.mjs');
        const who = (system, reply, stop) => ({
            pieces: [{kind: 'new', text: '<|im_start|>user\\nWho are you?<|im_end|>\\n'}], dropped_messages: [],
            system, preset: system ? 'pirate' : 'none', window: 1024, reply_text: reply, reply_ids: [1], stop_reason: stop});
        const live = {live: true};
        const long = "I'm SmolLM, an AI assistant trained by Hugging Face to answer questions, explain ideas and help you write.";
        const stopped = c.observe(c.observe({}, who(null, 'The', 'stopped'), new Date(), live),
                                  who('You are a pirate.', 'I am', 'stopped'), new Date(), live);
        const answered = c.observe(c.observe(stopped, who(null, long, 'end_turn'), new Date(), live),
                                   who('You are a pirate.', 'Arr, I be Captain Ryder of the Black Gull!', 'max_tokens'), new Date(), live);
        const same = c.observe(c.observe({}, who(null, 'I am SmolLM.', 'end_turn'), new Date(), live),
                               who('Be brief.', 'I am SmolLM.', 'end_turn'), new Date(), live);
        return {stopped: [c.done(stopped), Boolean(stopped.whoDefault), Boolean(stopped.whoSystem)],
                answered: [c.done(answered), answered.showed.identity], same: same.showed.identity};
    }""")
    assert got["stopped"] == [0, False, False]  # stopped one-token replies show nothing
    done, line = got["answered"]
    assert done == 1 and "Hugging Face to answer questions, explain ideas and help you write." in line
    assert "Captain Ryder of the Black Gull!" in line and "changed with the system prompt" in line
    assert "same answer both times" in got["same"] and "changed" not in got["same"]


# -- at home on a phone ---------------------------------------------------------------------------------------------


class Phone:
    """The browser, its new contexts a 390x844 touch phone's (App's own options kept)."""

    def __init__(self, browser, width=390, height=844):
        self.browser, self.size = browser, {"width": width, "height": height}

    def new_context(self, **options):
        return self.browser.new_context(**{**options, "viewport": self.size, "is_mobile": True, "has_touch": True})


IN_VIEW = """(sel) => { const r = document.querySelector(sel).getBoundingClientRect();
    return r.height > 0 && r.top >= 0 && r.bottom <= innerHeight; }"""


def test_a_phone_keeps_the_composer_and_the_headline_figures_in_view(browser, server):
    a = App(Phone(browser), server)
    try:
        page = a.open()
        a.type_draft("Hi! My name is Priya.")
        # without scrolling: the composer and what the model reads, in figures
        assert page.evaluate(IN_VIEW, "#draft") and page.evaluate(IN_VIEW, "#send") and page.evaluate(IN_VIEW, "#reads-summary")
        figures = page.evaluate("""() => Object.fromEntries([...document.querySelectorAll('#reads-summary [data-stat]')]
            .map(s => [s.dataset.stat, Number(s.querySelector('b').textContent)]))""")
        used = int(page.text_content("[data-stat=used] dd"))
        assert figures == {"summary-used": used, "summary-dropped": 0, "summary-reused": 0}
        a.shot("learner-phone-live")
        # one tap to the panel: the composer stays where it was
        page.click(".to-reads")
        page.wait_for_function("() => document.getElementById('reads-title').getBoundingClientRect().top < 100")
        assert page.evaluate(IN_VIEW, "#draft")
        page.screenshot(path=str(SHOTS / "learner-phone-reads-view.png"))
        page.click(".dock-to-chat")  # and one tap back to the chat
        page.wait_for_function("() => Math.abs(document.getElementById('chat-title').getBoundingClientRect().top) < 100")
        assert page.evaluate(IN_VIEW, "#draft")
        page.screenshot(path=str(SHOTS / "learner-phone-chat-view.png"))
        # nothing hides under the dock: the page's end scrolls above it
        page.evaluate("window.scrollTo(0, document.scrollingElement.scrollHeight)")
        gap = page.evaluate("""() => document.getElementById('dock').getBoundingClientRect().top -
            document.querySelector('.foot').getBoundingClientRect().bottom""")
        assert gap >= 0, gap
        page.click("#mode-recorded")
        page.wait_for_function("() => document.getElementById('reads-caption')?.textContent.startsWith('Recorded')")
        assert page.evaluate(IN_VIEW, "#reads-summary") and not page.is_visible("#draft")
        page.evaluate("document.getElementById('rec-suggestions').scrollIntoView({block: 'center'})")
        assert page.evaluate(IN_VIEW, "#rec-next")  # Previous and Next stay in reach down the chat column
        page.screenshot(path=str(SHOTS / "learner-phone-recorded-view.png"))
        assert not a.errors, a.errors
    finally:
        a.close()


STORED = [{"id": "hf:HuggingFaceTB/SmolLM2-135M-Instruct@q4_1-b179c9523d0e", "source": {"label": "local mirror of HuggingFaceTB/SmolLM2-135M-Instruct"},
           "files": [{"name": "config.json", "bytes": 533}, {"name": "tokenizer.json", "bytes": 3523000}, {"name": "model.safetensors", "bytes": 269060000}],
           "bytes": 272600000, "complete": True, "verified": True, "stored_at": 1764622230000}]
PROGRESS = {"overall": {"done": 51_000_000, "total": 272_600_000, "percent": 18.7, "speed": 16_400_000, "eta": 13.5},
            "files": [{"name": "tokenizer.json", "done": 3_523_000, "total": 3_523_000, "state": "complete"},
                      {"name": "model.safetensors", "done": 47_000_000, "total": 269_060_000, "state": "running"}]}
DRAW_BOX = """async ([stored, progress]) => {
    const v = await import('./js/views/downloads.mjs');
    v.drawModelBox({ files: [], source: chatlens.source, progress, status: 'text', weightsSentence: 'crafted' }, {});
    v.drawManage(stored, { usage: 288e6, quota: 10e9 }, { delete() {}, deleteAll() {} });
    document.getElementById('manage').open = true;
}"""
# cells and bars, measured: a cell that wraps a word letter by letter is narrower than its word
MEASURE = """() => ({
    bars: [...document.querySelectorAll('#download-progress progress')].map(p => Math.round(p.getBoundingClientRect().width)),
    cells: [...document.querySelectorAll('#manage-body th, #manage-body td, #manage-body button')].filter(c => c.textContent.trim())
        .map(c => { const r = document.createRange(); r.selectNodeContents(c);
                    const lines = new Set([...r.getClientRects()].filter(x => x.width > 0).map(x => Math.round(x.top))).size;
                    return [c.tagName === 'TH' ? 'th:' + c.textContent : c.className || c.textContent, Math.round(c.getBoundingClientRect().width), lines]; }),
})"""


def test_the_window_bar_ids_and_manage_downloads_read_at_1400(learner):
    page = recorded(learner, window=1024, step=2)
    colours = page.evaluate("""() => Object.fromEntries(['user', 'assistant', 'default_system', 'new'].map(k =>
        [k, getComputedStyle(document.querySelector('.window-bar .piece-seg.kind-' + k)).backgroundColor]))""")
    assert colours["user"] != colours["assistant"] and len(set(colours.values())) == 4, colours
    page.click("#reads-tab-tokens")
    id_px = page.evaluate("parseFloat(getComputedStyle(document.querySelector('#token-view .tok .id')).fontSize)")
    assert id_px >= 11, id_px
    page.click("#reads-tab-text")
    page.evaluate(DRAW_BOX, [STORED, PROGRESS])
    m = page.evaluate(MEASURE)
    lines = {c[0]: c[2] for c in m["cells"]}
    for cell in ("th:model", "th:files", "th:size", "th:stored", "th:check", "size", "stored", "check", "delete-model"):
        assert lines[cell] == 1, (cell, m["cells"])  # "check", the date and "Delete" each on one line
    assert min(m["bars"]) >= 300, m
    page.locator("#model-box").screenshot(path=str(SHOTS / "learner-manage-1400.png"))
    page.evaluate("() => { document.getElementById('manage').open = false; }")


def test_a_phone_shows_download_bars_manage_cards_and_one_scroll(browser, server):
    a = App(Phone(browser, 414, 896), server)
    try:
        page = a.open()
        a.type_draft("What is the capital of France? " * 12)
        box = page.evaluate("""() => { const p = document.getElementById('prompt-text');
            return [p.scrollHeight, p.clientHeight, getComputedStyle(p).overflowY]; }""")
        assert box[0] <= box[1] + 1, box  # the prompt grows with the page: no scroll inside a scroll
        page.set_viewport_size({"width": 390, "height": 844})
        page.evaluate(DRAW_BOX, [STORED, PROGRESS])
        m = page.evaluate(MEASURE)
        assert min(m["bars"]) >= 300, m["bars"]  # each bar across the card, never squeezed to nothing
        narrow = [c for c in m["cells"] if 0 < c[1] < 120 and "elete" not in c[0]]  # (the header row is hidden: each cell says its name)
        assert not narrow, narrow
        page.locator("#model-box").screenshot(path=str(SHOTS / "learner-phone-downloads.png"))
        assert page.evaluate("document.scrollingElement.scrollWidth") <= 390
        assert not a.errors, a.errors
    finally:
        a.close()


# -- controls and state ------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tiny(server):
    """The tiny random model (tests/tiny_model.py) beside the site: stored and loaded in seconds."""
    from tiny_model import write_tiny_model

    write_tiny_model(server.root / "tiny-learner" / "model", server.mirror.files["config.json"].parent, seed=3)
    return f"{server.url}tiny-learner/model/"


def test_delete_asks_once_then_the_page_the_status_and_the_api_agree(browser, server, tiny):
    a = App(browser, server)
    try:
        page = a.open(f"?model={tiny}")
        page.click("#download")
        page.wait_for_function("() => chatlens.status.state === 'ready' && chatlens.model?.backend", timeout=300_000)
        page.click("#manage summary")
        page.click("#manage-body .delete-model")
        question = page.text_content("#manage-body .confirm-question")
        assert question.startswith("Delete ") and "Replies use it now" in question
        assert len(page.evaluate("chatlens.storedModels()")) == 1  # asked, not deleted
        page.click("#manage-body .keep")
        page.click("#manage-body .delete-model")
        a.shot("learner-delete-asks")
        with page.expect_navigation():
            page.click("#manage-body .confirm-delete")
        a.wait_ready()
        page.wait_for_function("() => document.getElementById('download')")
        assert page.evaluate("chatlens.storedModels()") == []
        assert page.get_attribute("#status", "data-state") == "text" and page.evaluate("chatlens.model") is None
        assert "replies need the model" in page.text_content("#status-text")
        assert not a.errors, a.errors
    finally:
        a.close()


def test_a_reload_keeps_each_bubbles_line_and_says_nothing_changed(browser, server):
    a = App(browser, server)
    try:
        page = a.open()
        page.wait_for_function("() => chatlens.settings")
        # a conversation as the page saves it: the first reply stopped by the learner
        saved = page.evaluate("""async () => {
            const saved = await import('./js/page/saved.mjs');
            const controls = await import('./js/page/controls.mjs');
            const state = await import('./js/page/state.mjs');
            const args = (turns, text) => controls.callArgs(state.liveMessages({ live: { turns } }, text), chatlens.settings, controls.readControls());
            const key = (a) => JSON.stringify({ ...a, messages: undefined });
            const rec = (n, stop) => ({ pieces: [{ kind: 'new', count: 13 }], reply_ids: Array(n).fill(1), stop_reason: stop });
            const one = { user: 'Hi! My name is Priya.', reply: 'Hello', record: rec(5, 'stopped') };
            one.settings = key(args([], one.user));
            const two = { user: 'What is my name?', reply: 'Your name is Priya.', record: rec(6, 'end_turn') };
            two.settings = key(args([one], two.user));
            saved.saveLive([one, two]);
            return JSON.parse(localStorage.getItem(saved.LIVE_KEY));
        }""")
        assert saved[0]["line"] == {"count": 13, "wrote": 5, "stop": "stopped"}
        page.reload()
        a.wait_ready()
        page.wait_for_function("() => document.querySelectorAll('#chat .msg.assistant .meta[data-stop]').length === 2")
        metas = page.eval_on_selector_all("#chat .msg .meta", "ms => ms.map(m => m.textContent)")
        assert metas == ["13 tokens with the template's wrapping", "wrote 5 tokens · stopped by you",
                         "13 tokens with the template's wrapping", "wrote 6 tokens · the model ended it"]
        page.wait_for_function("() => document.getElementById('reads-caption')?.textContent.startsWith('Turn 2')")
        caption = page.text_content("#reads-caption")
        assert caption.startswith("Turn 2 as you sent it: the same text, read again") and "settings chosen now" not in caption
        page.select_option("#window", "256")  # now something changed
        page.wait_for_function("() => document.getElementById('reads-caption').textContent.startsWith('Turn 2 again, under the settings chosen now')")
        a.shot("learner-reload-lines")
        assert not a.errors, a.errors
    finally:
        a.close()


def test_recorded_mode_offers_the_windows_it_has(browser, server, doc):
    a = App(browser, server)
    try:
        a.context.add_init_script("localStorage.setItem('chatlens.prefs', JSON.stringify({mode: 'recorded'}))")
        page = a.open("?window=8192")
        page.wait_for_function("() => [...document.getElementById('window').options].some(o => o.value === '8192')")
        page.wait_for_function("() => document.getElementById('reads-caption')?.textContent.startsWith('Recorded')")
        recorded_windows = sorted({c["window"] for c in doc["conversations"] if c["preset"] == "none"})
        shown = page.evaluate("""() => ({ value: document.getElementById('window').value,
            offered: [...document.getElementById('window').options].filter(o => !o.disabled).map(o => Number(o.value)),
            panel: Number(document.querySelector('.window-title b').textContent),
            note: document.getElementById('rec-window-note').hidden ? '' : document.getElementById('rec-window-note').textContent })""")
        assert shown["offered"] == recorded_windows
        assert int(shown["value"]) == shown["panel"] == max(recorded_windows)  # the select and the panel agree
        assert "your window of 8192 comes back in Live mode" in shown["note"]
        a.shot("learner-recorded-windows")
        page.click("#mode-live")
        page.wait_for_function("() => document.getElementById('window').value === '8192'")
        a.type_draft("Hi")
        assert page.text_content(".window-title b") == "8192"
        assert page.evaluate("[...document.getElementById('window').options].every(o => !o.disabled)")
        assert not a.errors, a.errors
    finally:
        a.close()


# -- honest about what needs the network -------------------------------------------------------------------------------


def test_numpy_from_the_cdn_is_said_before_and_its_failure_in_a_sentence(browser, server, tiny):
    a = App(browser, server)
    try:
        page = a.open(f"?model={tiny}&backend=numpy")
        note = page.text_content("#numpy-note")
        host = page.evaluate("new URL(chatlens.build.pyodide.packages).host")
        assert f"Replies are computed by NumPy, which this page fetches once from Pyodide's site ({host})" in note
        assert "keeps for offline use" in note
        page.click("#download")  # this machine has no internet: Pyodide's NumPy cannot come
        page.wait_for_function("() => chatlens.model?.error || chatlens.model?.backend", timeout=300_000)
        error = page.evaluate("chatlens.model.error")
        assert error and f"NumPy, which computes replies in this browser, could not be fetched from Pyodide's site ({host})" in error
        assert "http" not in error.split("could not be fetched")[1], error  # a sentence, not a link to Pyodide's docs
        page.wait_for_function("(e) => document.getElementById('model-body').textContent.includes(e)", arg=error[:60])
        a.shot("learner-numpy-failed")
        assert not a.errors, a.errors
    finally:
        a.close()


def test_a_model_on_another_host_is_explained_not_failed_to_fetch(browser, server):
    a = App(browser, server)
    try:
        page = a.open("?model=https://example.org/models/x.Q8_0.gguf", ready=False)
        page.wait_for_selector("#source-error")
        text = page.text_content("#source-error")
        assert text.startswith("This page cannot read example.org: it reads models only from this site, huggingface.co")
        assert "Content-Security-Policy" in text and "Failed to fetch" not in text
        page.wait_for_function("() => document.getElementById('status').dataset.state === 'error'")
        for where in ("#status", "#reads"):
            assert "Failed to fetch" not in page.text_content(where) and "cannot read example.org" in page.text_content(where)
        assert page.is_visible("#use-default") or page.evaluate("chatlens.status.state") != "error"
        hosts = page.evaluate("""async () => { const m = await import('./js/page/hosts.mjs');
            return [m.canRead(location.href + 'models/x.gguf'), m.canRead('https://huggingface.co/a/b'),
                    m.canRead('https://cdn-lfs.hf.co/x'), m.canRead('https://example.org/x'), m.canRead('http://huggingface.co/a')]; }""")
        assert hosts == [True, True, True, False, False]
        a.shot("learner-other-host")
        assert not [e for e in a.errors if not e.startswith("CSP:")], a.errors  # its own policy said no, as meant
    finally:
        a.close()
