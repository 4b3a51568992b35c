"""One step of a reply, acted on in the lab (site/js/modes/steps.mjs), in Chromium on SwiftShader's
WebGPU: a reply token clicked names its step, whose inspection is drawn; another candidate picked
branches the reply there, streamed beside it; Keep makes the branch the turn's reply, which the
next message reads; Drop leaves the conversation as it was; what cannot be done is said plainly.

The tiny random Llama with SmolLM2's tokenizer and template (tests/tiny_model.py), few tokens, one
page for the module: the tests build on each other (the branch is of the first test's reply). The
page's figures are compared with the command line's on the same files (cli_in_process), never with
typed-in numbers.
"""

import json
import re
import subprocess

import pytest

from conftest import cli_in_process
from tiny_model import write_tiny_model
from webapp import SHOTS, App, assert_accessible, slow_gpu

pytestmark = pytest.mark.browser

WINDOW = 256
LIMIT = 4  # the page's reply limit here: SwiftShader is slow, and four tokens show every mechanism
FIRST = "Tell me why the sky is blue."
SECOND = "And the sea?"
STEP_MS = 600_000  # a few GPU steps on SwiftShader, on a machine other browser runs share


@pytest.fixture(scope="module")
def tiny(server):
    folder = write_tiny_model(server.root / "tiny-inspect" / "model", server.mirror.files["config.json"].parent, seed=1)
    return folder, f"{server.url}tiny-inspect/model/"


@pytest.fixture(scope="module")
def page(browser, server, tiny, python_snapshot):
    a = App(browser, server, snapshot=python_snapshot)
    p = a.open(f"?model={tiny[1]}")
    p.set_default_timeout(STEP_MS)
    assert p.evaluate("chatlens.downloadModel()")["complete"]
    assert p.evaluate("chatlens.modelReady")["kind"] == "webgpu"
    p.wait_for_function("() => chatlens.status.state === 'ready'")
    p.select_option("#window", str(WINDOW))
    p.evaluate(f"chatlens.settings.reply_limit = {LIMIT}")  # what the chat sends as maxTokens
    p.check("#why")
    yield p
    errors = a.errors
    a.close()
    assert not errors, errors


def shots(page, name, at="#step-box"):
    """The page at both sizes (the wide one last: the tests' own size), scrolled to `at`."""
    SHOTS.mkdir(parents=True, exist_ok=True)
    for w, h, size in ((390, 844, "390"), (1400, 1000, "1400")):
        page.set_viewport_size({"width": w, "height": h})
        page.evaluate("(at) => document.querySelector(at)?.scrollIntoView({block: 'start', behavior: 'instant'})", at)
        page.screenshot(path=str(SHOTS / f"{name}-{size}.png"))


def cli(command, payload, *args, tiny):
    done = cli_in_process(command, "--window", str(WINDOW), "--max-tokens", str(LIMIT), *args, stdin=json.dumps(payload),
                          model=tiny[0])
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def send(page, text):
    """Send a message in Live mode and wait for its reply to end, with its candidates drawn."""
    n = page.locator("#chat .msg.assistant").count()
    page.fill("#draft", text)
    page.press("#draft", "Enter")
    page.wait_for_function("n => document.querySelectorAll('#chat .msg.assistant').length > n && !chatlens.writing", arg=n)
    page.wait_for_selector("#reads .reply-tokens .tok[data-step]")


def ids_of(page, selector):
    return page.eval_on_selector_all(selector, "cs => cs.map(c => Number(c.dataset.id))")


@pytest.fixture(scope="module")
def first(page, tiny):
    """The first turn, sent on the page; the command line's record of the same turn."""
    page.click("#new-conversation")
    send(page, FIRST)
    want = cli("run", {"messages": [{"role": "user", "content": FIRST}]}, "--top-k", "10", tiny=tiny)
    assert ids_of(page, "#reads .reply-tokens .tok") == want["reply_ids"]
    return want


def test_a_clicked_token_names_its_step_and_its_inspection_is_the_engines(page, first, tiny):
    page.locator("#reads .reply-tokens .tok").nth(1).click()
    bar = page.wait_for_selector("#step-box .step-bar[data-step='1']")
    assert bar.text_content().startswith("Token 2 of turn 1's reply")
    assert page.locator("#step-box .inspect").count() == 0  # nothing computed until asked
    page.click("#step-box .step-inspect")
    page.wait_for_selector("#step-box .inspect[data-step='1']")
    want = cli("inspect", {"messages": [{"role": "user", "content": FIRST}], "reply_ids": first["reply_ids"]}, "--step", "1",
               tiny=tiny)
    view = page.eval_on_selector("#step-box .inspect", "n => ({...n.dataset})")
    assert int(view["position"]) == want["position"] == len(first["prompt_ids"])
    kinds = page.eval_on_selector_all("#step-box .share-row", "rs => rs.map(r => r.dataset.kind)")
    assert kinds == [p["kind"] for p in want["by_piece"]]
    # the text it read: the prompt and the reply's first token, each a chip with its weight
    assert ids_of(page, "#step-box .inspect-read .tok") == first["prompt_ids"] + first["reply_ids"][:1]
    # the lens's last block: the model's own choice first, as the command line's lens has it (the
    # box's part "How the choice formed", a tab beside "Where it looked")
    assert page.get_attribute("#step-tab-looked", "aria-selected") == "true"
    page.get_by_role("tab", name="How the choice formed").click()
    last = page.eval_on_selector_all("#step-box .lens-table tr.is-last td", "cs => cs.map(c => Number(c.dataset.id))")
    assert last == [i for i, _ in want["lens"][-1]] and last[0] == want["chosen_id"] == first["reply_ids"][1]
    # the commitment strip: a cell a block, the chosen token first for good from the command line's settles on, and
    # a legend that says in words each kind of cell it shows (a phone has no hover titles)
    said = [t.split(": ", 1)[1] for t in page.eval_on_selector_all("#step-box .commit-cell", "cs => cs.map(c => c.title)")]
    legend = page.eval_on_selector_all("#step-box .commit-legend li[data-kind]", "ls => ls.map(l => l.textContent)")
    assert len(said) == len(want["lens"]) and sorted(set(said)) == sorted(legend)
    stays = [l for l, w in enumerate(said) if w.endswith("to the last block")]
    assert stays == ([] if want["settles"] is None else list(range(want["settles"], len(want["lens"]))))
    shots(page, "inspect-commit-legend", at="#step-box .inspect-lens")
    page.get_by_role("tab", name="Where it looked").click()


def causes_drawn(page):
    """The cause table as drawn: each piece's name, and each cell's measure (its data: p, top id, log-probability)."""
    return page.eval_on_selector_all("#step-box .cause-row", """rs => rs.map(r => ({piece: r.dataset.piece,
        cells: [...r.querySelectorAll('.cause-cell')].map(c => ({...c.dataset}))}))""")


def assert_cause_drawn(rows, want, key="p"):
    assert [r["piece"] for r in rows] == [p["name"] for p in want["pieces"]]
    for row, piece in zip(rows, want["pieces"]):
        for cell in row["cells"]:
            m = piece[cell["what"]]
            if m is None:
                assert cell[key] == "", (piece["name"], cell)
                continue
            # SwiftShader's GPU against CPython's NumPy, the same weights: probabilities within 1e-3
            tol = 1e-3 if key == "p" else 1e-2
            assert abs(float(cell[key]) - m["reply_logprob" if key == "logprob" else "p"]) < tol, (piece["name"], cell, m)
            assert int(cell["top"]) == m["top_id"]


def test_which_piece_it_needed_is_the_engines_and_the_whole_reply_too(page, first, tiny):
    """The step's "Which piece it needed": each piece knocked out and removed, as CPython's `cause`
    computes it on the same files; then the same for the whole reply so far, behind its switch."""
    page.locator("#reads .reply-tokens .tok").nth(1).click()
    page.wait_for_selector("#step-box .step-bar[data-step='1']")
    page.click("#step-box .step-cause")
    page.wait_for_selector("#step-box .cause-box .cause[data-step='1']")
    payload = {"messages": [{"role": "user", "content": FIRST}], "reply_ids": first["reply_ids"]}
    want = cli("cause", payload, "--step", "1", tiny=tiny)
    assert_cause_drawn(causes_drawn(page), want)
    said = page.text_content("#step-box .cause-with")
    assert f"{100 * want['p']:.1f}%" in said
    # the template's default system prompt cannot be removed: the cell says why, in a sentence
    default = page.text_content("#step-box .cause-row[data-piece='default_system:0'] .cause-cell[data-what=removed]")
    assert "cannot be left out" in default
    # Guess first: the figures wait for the learner's guess, which is then marked beside them
    page.check("#guess-first")
    page.wait_for_selector("#step-box .cause-guess-form")
    assert page.locator("#step-box .cause-table").count() == 0
    page.check("#step-box .cause-guess-form input[value='new:0']")
    page.click("#step-box .cause-guess-form button[type=submit]")
    page.wait_for_selector("#step-box .cause-row.guessed[data-piece='new:0']")
    page.uncheck("#guess-first")
    page.click("#step-box .cause-whole button")
    page.wait_for_selector("#step-box .cause-whole.link")  # the switch back: the whole reply is shown
    last = cli("cause", payload, "--step", str(len(first["reply_ids"]) - 1), "--tokens", tiny=tiny)
    assert_cause_drawn(causes_drawn(page), last, key="logprob")
    # every reply token at once: the strip, its piece and measure chosen, each token's figures the engine's
    page.select_option("#step-box .strip-piece", "new:0")
    page.check("#step-box .strip-measure input[value=knocked]")
    page.wait_for_selector("#step-box .strip[data-piece='new:0'][data-measure='knocked']")
    drawn = page.eval_on_selector_all("#step-box .strip-tok", "ts => ts.map(t => [Number(t.dataset.p), Number(t.dataset.under)])")
    new = next(p for p in last["pieces"] if p["name"] == "new:0")
    assert len(drawn) == len(first["reply_ids"])
    for (p, under), base, row in zip(drawn, last["tokens"], new["knocked"]["tokens"]):
        assert abs(p - base["p"]) < 1e-3 and abs(under - row["p"]) < 1e-3
    page.focus("#step-box .strip-tok >> nth=0")  # a token's figures on focus, in a sentence
    assert page.text_content("#step-box .strip-detail").startswith("Token 1, ")
    shots(page, "cause-tiny-whole", at="#step-box .cause-box")
    page.click("#step-box .cause-whole.link")
    assert_cause_drawn(causes_drawn(page), want)
    page.click("#step-box .cause-close")
    assert page.locator("#step-box .cause-box").count() == 0


def test_which_turn_each_reply_needed_is_the_engines(page, first, tiny):
    """The conversation's matrix, asked in its box under the step box: each cell the reply's
    log-probability with a piece removed, as CPython's `needs` computes it on the same files; a
    cell opens the reply's token strip."""
    page.click("#needs-box .needs-ask")
    page.wait_for_selector("#needs-box .needs-table")
    messages = [{"role": "user", "content": FIRST}, {"role": "assistant", "content": first["reply_text"]}]
    want = cli("needs", {"messages": messages, "replies": [first["reply_ids"]]}, tiny=tiny)
    cells = page.eval_on_selector_all("#needs-box .needs-fig", "bs => bs.map(b => [b.closest('.needs-piece').dataset.piece, Number(b.dataset.delta)])")
    [turn] = want["turns"]
    removed = {p["name"]: p["removed"]["reply_logprob"] - turn["reply_logprob"] for p in turn["pieces"] if p["removed"]}
    assert sorted(name for name, _ in cells) == sorted(removed)
    for name, delta in cells:
        assert abs(delta - removed[name]) < 1e-2, name
    page.locator("#needs-box .needs-fig").first.click()
    page.wait_for_selector("#needs-box .strip .strip-tok")
    assert page.locator("#needs-box .strip-tok").count() == len(first["reply_ids"])
    shots(page, "needs-tiny", at="#needs-box")
    assert_accessible(page, "the conversation's matrix, a reply's token strip open")
    page.click("#needs-box .needs-close")


def test_a_candidate_picked_branches_there_and_keep_makes_it_the_reply_the_next_turn_reads(page, first, tiny):
    step = 1
    other = first["top_k"][step][1][0]  # the step's second candidate
    page.locator("#reads .reply-tokens .tok").nth(step).hover()
    page.click(f"#reads .reply .why-table tbody tr[data-id='{other}']")
    page.wait_for_selector(f"#step-box .branch[data-step='{step}'][data-id='{other}'] .branch-keep")
    messages = [{"role": "user", "content": FIRST}]
    want = cli("branch", {"messages": messages, "reply_ids": first["reply_ids"]}, "--step", str(step), "--id", str(other),
               "--top-k", "10", tiny=tiny)
    # the cache the reply left: the prompt and the reply up to the step reused, the id taken computed
    reused = len(first["prompt_ids"]) + step
    assert page.text_content("#step-box .branch-cache").startswith(f"From the cache: {reused} tokens, the prompt's ")
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / "branch-tiny-1400.png"), full_page=True)
    page.click("#step-box .branch-keep")
    page.wait_for_selector("#step-box .step-status.kept")
    kept = page.text_content("#chat .msg.assistant:last-of-type .content")
    assert kept == want["reply_text"]
    assert "chosen by hand at token 2" in page.text_content("#reads .reply-title")
    assert "chosen by hand" in page.text_content("#chat .msg.assistant:last-of-type")
    # a reload keeps the mark: another tab of the same profile restores the conversation as saved
    tab = page.context.new_page()
    tab.goto(page.url)
    tab.wait_for_selector("#chat .msg.assistant .by-hand")
    assert tab.text_content("#chat .msg.assistant:last-of-type .content") == want["reply_text"]
    assert "chosen by hand at token 2" in tab.text_content("#chat .msg.assistant:last-of-type")
    tab.close()
    assert ids_of(page, "#reads .reply-tokens .tok") == want["reply_ids"]
    # every step of the kept reply has its candidates (the reply's up to the step, the branch's after): it branches again
    assert page.locator("#reads .reply-tokens .tok[data-step]").count() == len(want["reply_ids"])
    # the next turn reads the branch: its prompt is what the command line renders after it
    send(page, SECOND)
    page.click("#reads-tab-tokens")
    page.wait_for_selector("#token-view .tok")
    after = cli("run", {"messages": [*messages, {"role": "assistant", "content": want["reply_text"]},
                                     {"role": "user", "content": SECOND}]}, tiny=tiny)
    assert ids_of(page, "#token-view .tok")[:len(after["prompt_ids"])] == after["prompt_ids"]
    page.click("#reads-tab-text")


def test_after_a_reload_the_last_reply_is_inspected_and_branched_as_before(page, tiny):
    """A reload (another tab of the same profile) brings the conversation back with its replies' records,
    read again (issue 43.3): "why this token" still ticked, the last reply's chips with their candidates,
    an inspection and a branch of it equal to the command line's on the same turn."""
    messages = [{"role": "user", "content": FIRST},
                {"role": "assistant", "content": page.text_content("#chat .msg.assistant >> nth=0 >> .content")},
                {"role": "user", "content": SECOND}]
    reply = ids_of(page, "#reads .reply-tokens .tok")  # the last turn's, before the reload
    tab = page.context.new_page()
    tab.set_default_timeout(STEP_MS)
    try:
        tab.goto(page.url)
        tab.wait_for_function("() => chatlens.settings")
        tab.evaluate(f"chatlens.settings.reply_limit = {LIMIT}")  # the module's limit: the turn's settings again
        tab.wait_for_function("() => chatlens.pageState.live.turns.at(-1)?.record?.reply_ids")  # read again by Python
        tab.dispatch_event("#window", "change")  # drawn under the module's limit
        tab.wait_for_selector("#reads .reply-tokens .tok[data-step]")
        assert tab.is_checked("#why")
        assert tab.text_content("#reads-caption") == "Turn 2: what the model read when you sent it"
        assert ids_of(tab, "#reads .reply-tokens .tok") == reply
        tab.wait_for_function("() => chatlens.status.state === 'ready'")
        tab.locator("#reads .reply-tokens .tok").nth(0).click()
        tab.click("#step-box .step-inspect")
        view = tab.wait_for_selector("#step-box .inspect[data-step='0']")
        want = cli("inspect", {"messages": messages, "reply_ids": reply}, "--step", "0", tiny=tiny)
        assert int(view.get_attribute("data-position")) == want["position"]
        tab.get_by_role("tab", name="How the choice formed").click()
        last = tab.eval_on_selector_all("#step-box .lens-table tr.is-last td", "cs => cs.map(c => Number(c.dataset.id))")
        assert last == [i for i, _ in want["lens"][-1]] and last[0] == reply[0]
        tab.set_viewport_size({"width": 1400, "height": 1000})
        SHOTS.mkdir(parents=True, exist_ok=True)
        tab.screenshot(path=str(SHOTS / "reload-inspect-tiny-1400.png"), full_page=True)
        # a candidate of the step branches there, as before the reload
        tab.locator("#reads .reply-tokens .tok").nth(0).hover()
        other = tab.eval_on_selector("#reads .reply .why-table tbody tr:not(.chosen)", "r => Number(r.dataset.id)")
        tab.click(f"#reads .reply .why-table tbody tr[data-id='{other}']")
        tab.wait_for_selector(f"#step-box .branch[data-step='0'][data-id='{other}'] .branch-keep")
        got = tab.evaluate("chatlens.pageState.stepBox.branch.answer")
        want = cli("branch", {"messages": messages, "reply_ids": reply}, "--step", "0", "--id", str(other), tiny=tiny)
        assert got["reply_ids"] == want["reply_ids"]
        tab.set_viewport_size({"width": 390, "height": 844})
        tab.locator("#step-box").screenshot(path=str(SHOTS / "reload-branch-tiny-390.png"))
        tab.click("#step-box .branch-drop")
    finally:
        tab.close()


def test_drop_leaves_the_conversation_as_it_was(page, first):
    before = page.text_content("#chat .msg.assistant:last-of-type .content")
    row = page.eval_on_selector("#reads .reply-tokens .tok[data-step='0']", "c => c.dataset.id")
    page.locator("#reads .reply-tokens .tok").nth(0).hover()
    page.click(f"#reads .reply .why-table tbody tr:not([data-id='{row}'])")
    page.wait_for_selector("#step-box .branch .branch-drop")
    page.wait_for_selector("#step-box .branch .branch-keep")
    page.click("#step-box .branch-drop")
    page.wait_for_selector("#step-box .step-status")
    assert page.text_content("#step-box .step-status") == "Dropped: the conversation is as it was."
    assert page.locator("#step-box .branch").count() == 0
    assert page.text_content("#chat .msg.assistant:last-of-type .content") == before


def test_stop_ends_a_branch_with_what_it_wrote_and_the_conversation_as_it_was(page, first, tiny):
    """Stop while a branch is written, as a reply's Stop: it ends stopped, what it wrote is the
    command line's branch so far, and nothing of the conversation changed."""
    before = page.text_content("#chat .msg.assistant:last-of-type .content")
    record = ids_of(page, "#reads .reply-tokens .tok")  # the last turn's reply (the second message's)
    slow_gpu(page, 1500)  # each GPU completion 1.5 s later: Stop lands mid-branch, on any adapter
    page.locator("#reads .reply-tokens .tok").nth(0).hover()
    other = page.eval_on_selector("#reads .reply .why-table tbody tr:not(.chosen)", "r => Number(r.dataset.id)")
    page.click(f"#reads .reply .why-table tbody tr[data-id='{other}']")
    # the first token after the one taken by hand has come: then Stop
    page.wait_for_function("() => /^The branch · [2-9]/.test(document.querySelector('#step-box .fork-branch .fork-title')?.textContent)")
    page.click("#step-box .branch-stop")
    page.wait_for_function("() => chatlens.pageState.stepBox.branch?.answer")  # the store holds the step box's branch
    slow_gpu(page, 0)  # on time again for the tests after this one
    got = page.evaluate("chatlens.pageState.stepBox.branch.answer")
    assert got["stop_reason"] == "stopped"
    kept = page.eval_on_selector_all("#chat .msg.assistant .content", "cs => cs.map(c => c.textContent)")[0]  # turn 1's, kept
    want = cli("branch", {"messages": [{"role": "user", "content": FIRST}, {"role": "assistant", "content": kept},
                                       {"role": "user", "content": SECOND}], "reply_ids": record},
               "--step", "0", "--id", str(other), tiny=tiny)
    assert 2 <= len(got["reply_ids"]) < len(want["reply_ids"]) and got["reply_ids"] == want["reply_ids"][:len(got["reply_ids"])]
    assert page.text_content("#chat .msg.assistant:last-of-type .content") == before
    page.click("#step-box .branch-drop")
    assert page.text_content("#step-box .step-status") == "Dropped: the conversation is as it was."


def test_what_cannot_be_done_is_said_in_a_sentence(page, first):
    # a branch asked while a reply is written: refused, with what to do
    page.evaluate("""() => { window.__stop = new AbortController();
                             window.__running = chatlens.run({messages: [{role: 'user', content: 'Hi'}], window: 256,
                                                              maxTokens: 64}, {signal: window.__stop.signal}); }""")
    assert page.evaluate("chatlens.writing")
    page.locator("#reads .reply-tokens .tok").nth(0).hover()
    page.click("#reads .reply .why-table tbody tr:not(.chosen)")
    status = page.text_content("#step-box .step-status.error")
    assert status == "A branch waits for the reply being written: press Stop, or wait until it ends, then ask again."
    # which piece it needed, asked then too: the same sentence, and no cause begun
    page.locator("#reads .reply-tokens .tok").nth(0).click()
    page.click("#step-box .step-cause")
    status = page.text_content("#step-box .step-status.error")
    assert status == "Taking a piece away waits for the reply being written: press Stop, or wait until it ends, then ask again."
    assert page.evaluate("chatlens.pageState.stepBox.cause") is None
    # the page's API asked then: each job that looks at a reply already written refuses at once, in the sentence its
    # button says (a branch's and a cause's, above), rather than waiting behind the reply with nothing said
    asked = page.evaluate("""async (ids) => {
        const turn = {messages: [{role: 'user', content: 'x'}], window: 256};
        const asks = {inspect: {...turn, replyIds: ids, step: 0}, cause: {...turn, replyIds: ids, step: 0},
                      branch: {...turn, replyIds: ids, step: 0, id: ids[0]},
                      needs: {messages: [{role: 'user', content: 'x'}, {role: 'assistant', content: 'y'}], window: 256}};
        const said = {};
        for (const [type, args] of Object.entries(asks)) {
            said[type] = await chatlens[type](args).then(() => 'answered', (e) => e.message);
            said[type + ' writing'] = chatlens.writing;  // refused before the reply ended: at once
        }
        return said;
    }""", first["reply_ids"])
    words = {"inspect": "Inspecting a step", "cause": "Taking a piece away", "branch": "A branch",
             "needs": "Measuring which turn each reply needed"}
    for job, what in words.items():
        assert asked[job] == f"{what} waits for the reply being written: press Stop, or wait until it ends, then ask again."
        assert asked[f"{job} writing"], job
    assert page.evaluate("chatlens.writing")  # still being written: the sentences above were refusals
    page.evaluate("window.__stop.abort(); window.__running")
    # a step out of range, through the page's API
    said = page.evaluate("""(ids) => chatlens.inspect({messages: [{role: 'user', content: 'x'}], window: 256, replyIds: ids,
                                                        step: ids.length + 3}).then(() => 'answered', (e) => e.message)""",
                         first["reply_ids"])
    n = len(first["reply_ids"])
    assert said == f"step {n + 3} is out of range: the reply has {n} tokens, so steps 0 to {n}"
    # a piece that does not exist, through the page's API: a sentence
    said = page.evaluate("""(ids) => chatlens.cause({messages: [{role: 'user', content: 'x'}], window: 256, replyIds: ids,
                                                      step: 0, pieces: ['user:4']}).then(() => 'answered', (e) => e.message)""",
                         first["reply_ids"])
    assert said.startswith("there is no piece 'user:4': this turn's pieces are default_system:0, new:0, header:0")


def test_on_a_phone_the_step_box_fits(page, first):
    page.set_viewport_size({"width": 390, "height": 844})
    try:
        page.locator("#reads .reply-tokens .tok").nth(0).click()
        page.wait_for_selector("#step-box .step-bar[data-step='0']")
        page.click("#step-box .step-inspect")
        page.wait_for_selector("#step-box .inspect[data-step='0']")
        wide = page.evaluate("() => document.getElementById('step-box').scrollWidth <= document.documentElement.clientWidth")
        assert wide
        SHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SHOTS / "inspect-tiny-390.png"), full_page=True)
    finally:
        page.set_viewport_size({"width": 1400, "height": 1000})


def test_the_drafts_predicted_first_token_is_inspected_from_the_prediction(page, tiny):
    page.click("#new-conversation")
    draft = "Why is grass green?"
    page.fill("#draft", draft)
    page.wait_for_selector("#prediction.is-done")
    page.click("#prediction")
    view = page.wait_for_selector("#step-box .inspect[aria-label='Inspection of the first token of a reply to this draft']")
    want = cli("inspect", {"messages": [{"role": "user", "content": draft}], "reply_ids": []}, "--step", "0", tiny=tiny)
    assert int(view.get_attribute("data-position")) == want["position"] == len(want["prompt_ids"]) - 1
    predicted = page.eval_on_selector_all("#prediction tbody tr", "rs => rs.map(r => Number(r.dataset.id))")
    assert predicted[0] == want["chosen_id"]
    page.fill("#draft", "")


def test_look_inside_runs_the_pirate_case_in_one_click_and_completes_from_its_numbers(page, tiny):
    """The Pirate case: its preset and the site's default window set, the step it is about (the
    name's first token; on the tiny model, whose words are random, its first capitalised word)
    inspected and each piece taken away, then every token of the reply so far with the system
    prompt removed (the strip it opens on); its line quotes that step's own figures, as CPython's
    `cause` and `inspect` give them, and the strip's."""
    page.select_option("#window", str(WINDOW))  # another window first: the case sets its own
    page.click("#inside-box button.inside-try[data-inside=pirate]")
    page.wait_for_selector("#inside-box li[data-inside=pirate].done")
    assert page.input_value("#preset") == "pirate"
    assert page.input_value("#window") == str(page.evaluate("chatlens.settings.default_window"))
    step = int(page.get_attribute("#step-box .cause", "data-step"))
    # it opens on every token of the reply so far, the system prompt removed (the token strip)
    page.wait_for_selector("#step-box .strip[data-piece='system:0'][data-measure='removed']")
    line = page.text_content("#inside-box li[data-inside=pirate] .showed")
    assert "Over every token of the reply so far" in line
    page.get_by_role("tab", name="Where it looked").click()
    assert page.get_attribute("#step-box .inspect", "data-step") == str(step)
    record = page.evaluate("chatlens.pageState.live.turns.at(-1).record")
    payload = {"messages": [{"role": "user", "content": "Who are you?"}], "reply_ids": record["reply_ids"],
               "window": record["window"], "max_tokens": record["max_tokens"]}
    cause = cli_in_process("cause", "--preset", "pirate", "--step", str(step), stdin=json.dumps(payload), model=tiny[0])
    inspected = cli_in_process("inspect", "--preset", "pirate", "--step", str(step), stdin=json.dumps(payload), model=tiny[0])
    cause, inspected = json.loads(cause.stdout), json.loads(inspected.stdout)
    system = next(p for p in cause["pieces"] if p["kind"] == "system")
    assert line.startswith(f"Writing “") and f"({100 * cause['p']:.1f}%)" in line
    for m in (system["removed"], system["knocked"]):
        assert f"{100 * m['p']:.1f}%" in line or f"{100 * m['p']:.2f}%" in line or "<0.01%" in line, (m, line)
    head = next(h for h in inspected["strongest_heads"] if h["kind"] == "system")
    assert f"block {head['layer'] + 1} · head {head['head'] + 1} put {100 * head['weight']:.1f}% of its weight" in line
    # the head the line names is listed in the inspection, where its tint is a click away
    page.click(f"#step-box .strongest-list .back-show[data-layer='{head['layer']}'][data-head='{head['head']}']")
    page.wait_for_selector("#step-box .tint-source")
    assert page.text_content("#step-box .tint-source") == f"block {head['layer'] + 1} · head {head['head'] + 1}"
    assert page.text_content("#inside-count") == "1 of 4 complete"


# -- the keyboard alone, and what a screen reader meets -------------------------------------------------------------


def tab_to(page, target, most=400):
    """Press Tab until the focus is on `target` (a locator) or inside it: how many presses it took."""
    for n in range(1, most + 1):
        page.keyboard.press("Tab")
        if target.evaluate("t => t.contains(document.activeElement)"):
            return n
    raise AssertionError(f"{most} presses of Tab never reached {target}")


SHARED = {}  # the case the keyboard copied: its link and its command, which the next test opens


def test_the_keyboard_alone_sends_opens_a_tokens_cause_and_the_whole_reply_and_stops(page, tiny):
    """Keyboard only, no pointer, "Why this token" off (off by default): send a message (a screen
    reader is told it, then the reply once it has ended, not a token at a time), Tab to the reply's
    tokens, the arrow keys to one, Enter opens its step; Tab to "Which piece it needed",
    copy the step as a link and as a command, then "The same for the whole reply so far" and
    "Where it looked, and how it chose"; the page then has nothing serious for axe-core; a second
    message stopped with its Stop hands the focus back to the message box. What it relies on, by
    role and name: the checkbox "Why this token", the comboboxes "System prompt" and "Window", the
    textbox "Message", the toolbar "The reply's tokens…", the buttons "New conversation", "Which
    piece it needed", "Copy a link to this step", "Copy as a command: this step", "The same for the
    whole reply so far", "Where it looked, and how it chose" and "Stop"; the textboxes "The link"
    and "The command"."""
    why = page.get_by_role("checkbox", name="Why this token", exact=True)
    why.focus()
    if why.is_checked():
        page.keyboard.press("Space")
    assert not why.is_checked()
    for name in ("System prompt", "Window"):  # the first of each: no system prompt, 256 tokens
        page.get_by_role("combobox", name=name, exact=True).focus()
        page.keyboard.press("Home")
    assert (page.input_value("#preset"), page.input_value("#window")) == ("none", str(WINDOW))
    page.get_by_role("button", name="New conversation", exact=True).focus()
    page.keyboard.press("Enter")
    draft = page.get_by_role("textbox", name="Message", exact=True)
    draft.focus()
    page.keyboard.type(FIRST)
    page.evaluate("""() => { window.__said = [];  // what the chat's live region is given: the message, then the reply once it ends
        new MutationObserver((ms) => ms.forEach((m) => m.addedNodes.forEach((n) => window.__said.push(n.textContent))))
            .observe(document.getElementById('chat-announce'), {childList: true}); }""")
    page.keyboard.press("Enter")
    page.wait_for_function("() => !chatlens.writing && chatlens.pageState.live.turns.at(-1)?.record?.reply_ids")
    assert page.evaluate("window.__said") == [f"You: {FIRST}", f"SmolLM2: {page.evaluate('chatlens.pageState.live.turns.at(-1).reply')}"]
    tokens = page.locator("#reads").get_by_role("toolbar", name=re.compile("^The reply's tokens"))
    presses = tab_to(page, tokens)
    print(f"Tab presses from the message box to the reply's tokens: {presses}")
    page.keyboard.press("Home")
    page.keyboard.press("ArrowRight")
    page.keyboard.press("Enter")
    page.wait_for_selector("#step-box .step-bar[data-step='1']")
    box = page.locator("#step-box")
    tab_to(page, box.get_by_role("button", name="Which piece it needed", exact=True))
    page.keyboard.press("Enter")
    whole = box.get_by_role("button", name="The same for the whole reply so far", exact=True)
    whole.wait_for()
    # the case as it is now, a link and a command (test_a_shared_link_... opens them)
    page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    for how, name in (("link", "Copy a link to this step"), ("command", "Copy as a command: this step")):
        tab_to(page, box.get_by_role("button", name=name, exact=True))
        page.keyboard.press("Enter")
        copied = box.get_by_role("textbox", name=f"The {how}", exact=True)
        copied.wait_for()
        SHARED[how] = copied.input_value()
        assert page.evaluate("navigator.clipboard.readText()") == SHARED[how]
    SHARED["reply_ids"] = page.evaluate("chatlens.pageState.live.turns[0].record.reply_ids")
    tab_to(page, whole)
    page.keyboard.press("Enter")
    box.get_by_role("button", name=re.compile("^Back to ")).wait_for()  # the whole reply's figures, shown
    tab_to(page, box.get_by_role("button", name="Where it looked, and how it chose", exact=True))
    page.keyboard.press("Enter")
    page.wait_for_selector("#step-box .inspect[data-step='1']")
    assert_accessible(page, "a live reply, its step box open at the inspection")
    # one part of the box in view at a time, a tab each: the arrow keys (End: the last) move between them
    assert page.locator("#step-box .cause-box").count() == 0
    box.get_by_role("tab", name="Where it looked", exact=True).focus()
    page.keyboard.press("End")
    page.wait_for_selector("#step-box .cause-box .strip")  # the cause, its whole reply's token strip
    assert box.get_by_role("tab", name="Which piece it needed", exact=True).evaluate("t => t === document.activeElement")
    shots(page, "keyboard-step-box")
    assert_accessible(page, "a live reply, its step box open: the cause of the whole reply, its token strip")
    # a reply stopped from the keyboard: the focus goes back to the message box, not to the page's top
    slow_gpu(page, 600)  # each GPU completion 0.6 s later: the reply is still being written when Stop is pressed
    try:
        tab_to(page, draft)
        page.keyboard.type(SECOND)
        page.keyboard.press("Enter")
        page.wait_for_function("() => chatlens.pageState.live.turns.at(-1)?.streaming")
        stop = page.get_by_role("button", name="Stop", exact=True)
        stop.wait_for()
        tab_to(page, stop)
        page.keyboard.press("Enter")
        page.wait_for_function("() => !chatlens.writing")
    finally:
        slow_gpu(page, 0)
    assert page.evaluate("chatlens.pageState.live.turns.at(-1).record.stop_reason") == "stopped"
    assert draft.evaluate("d => d === document.activeElement")


def test_a_shared_link_opened_in_a_fresh_profile_sets_the_case_up_and_opens_its_step(browser, server, page, tiny):
    """The link the keyboard copied (its step's cause open), opened in a fresh profile: the case's
    preview before any weights are stored, the same prompt ids as the command line's; once the
    model is downloaded, the same reply, id for id, and its step's cause equal to what the copied
    command computes (`python3 -m chatlens cause` on its request, the same files). A link that is
    cut, pasted into the same tab, says so and changes nothing stored. chatlens.link of the case's
    request is the link copied, chatlens.command the command."""
    link, command, reply = SHARED["link"], SHARED["command"], SHARED["reply_ids"]
    assert reply == cli("run", {"messages": [{"role": "user", "content": FIRST}]}, tiny=tiny)["reply_ids"]  # greedy, as the CLI's
    request = {"messages": [{"role": "user", "content": FIRST}], "preset": "none", "window": WINDOW, "reserve": LIMIT, "maxTokens": LIMIT,
               "replyIds": reply, "step": 1, "open": ["cause"]}
    assert page.evaluate("r => chatlens.link(r)", request) == link and page.evaluate("r => chatlens.command(r)", request) == command
    assert link.startswith(f"{server.url}?model=") and "#case=1." in link
    printed = subprocess.run(["bash", "-c", command[:command.index(" | python3 -m chatlens cause")]], capture_output=True, text=True, check=True)
    done = cli_in_process("cause", stdin=printed.stdout, model=tiny[0])
    assert done.returncode == 0, done.stderr
    want = json.loads(done.stdout)
    a = App(browser, server)
    try:
        fresh = a.open(link[len(server.url):])
        fresh.set_default_timeout(STEP_MS)
        fresh.wait_for_function("() => chatlens.pageState.drawn?.[1]?.startsWith('Preview')")
        assert fresh.evaluate("chatlens.pageState.drawn[0].prompt_ids") == want["prompt_ids"]  # what the model will read
        assert fresh.evaluate("chatlens.model") is None and fresh.evaluate("location.hash") == ""
        note = fresh.locator("#case-note")
        assert note.text_content().startswith("A shared case: turn 1 under None (the template's default), a window of 256 tokens; "
                                              "token 2 of its reply, which piece it needed. The panel shows what the model will read.")
        shots(fresh, "link-preview", at="#case-note")
        fresh.evaluate("chatlens.downloadModel()")
        fresh.wait_for_selector("#step-box .cause-box .cause[data-step='1']")
        assert fresh.evaluate("chatlens.pageState.live.turns.at(-1).record.reply_ids") == reply == want["reply_ids"]
        assert "This device wrote the link's reply, id for id (4 tokens)." in note.text_content()
        assert_cause_drawn(causes_drawn(fresh), want)
        shots(fresh, "link-step", at="#step-box")
        # a link cut on its way, pasted into the same tab (the fragment changes: no reload): said, and nothing changed
        stored = "() => JSON.stringify(Object.entries(localStorage).sort())"
        before = fresh.evaluate(stored)
        fresh.evaluate("(f) => { location.hash = f; }", link[link.index("#") + 1:-12])
        fresh.wait_for_function("() => document.getElementById('case-note').textContent.includes('cannot be read')")
        assert note.text_content() == "This link's case cannot be read: it was cut or changed on its way. Nothing was changed."
        assert fresh.evaluate(stored) == before
        assert fresh.text_content("#chat .msg.user .content") == FIRST and fresh.locator("#step-box .cause-box").count() == 1
        assert not a.errors, a.errors
    finally:
        a.close()
