"""The template workbench, the lab's hand-written Python and plain text's tokens, in Chromium.

No weights are needed: the page's worker renders with chatlens.template and tokenizes with
chatlens.tokenizer. The workbench's text and ids are compared with transformers'
apply_chat_template on a fast tokenizer over the same vocabulary (tests/test_template.py pins
the CPython side): templates with tools, documents, continue_final_message and {% generation %}
masks, typed into the page as a user would, read back from what the page shows. One page serves
the module; a last test opens the tools on a 390 px phone.
"""

import copy
import json
from pathlib import Path

import pytest

from webapp import App, assert_accessible  # the `server` and `browser` fixtures: tests/conftest.py

pytestmark = pytest.mark.browser

TEMPLATES = Path(__file__).parent / "templates"
Q = {"role": "user", "content": "What is the capital of France?"}
A = {"role": "assistant", "content": "Paris 🇫🇷, of course."}
TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "The weather in a city",
    "parameters": {"type": "object", "required": ["city"], "properties": {"city": {"type": "string"}}}}}]
DOCS = [{"title": "Berlin", "text": "Berlin — capital of Germany."}, {"title": "Paris", "text": "Paris is the capital of France."}]
TOOL_ROUND = [Q, {"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": {
    "name": "get_weather", "arguments": {"city": "Paris"}}}]},
    {"role": "tool", "name": "get_weather", "content": '{"temp": 21}'}, {"role": "user", "content": "Thanks!"}]


# What `shown` waits for, kept by the page: when the workbench's inputs last changed, and when the
# render drawn last had begun. A render begins once the inputs have paused (250 ms); one that asks the
# worker (chatlens.render) draws when the answer comes, one whose inputs are not valid draws at once.
WATCH_RENDERS = """() => {
    const w = window.__workbench = {input: 0, drawn: -1, answered: null};
    const box = document.getElementById('workbench');
    for (const type of ['input', 'change', 'click']) box.addEventListener(type, () => (w.input = performance.now()), true);
    const render = chatlens.render;
    chatlens.render = (args) => {
        const begun = performance.now();
        return render(args).finally(() => {
            w.answered = begun;  // what the workbench draws next, it draws for this render
            setTimeout(() => (w.answered = null));
        });
    };
    new MutationObserver(() => (w.drawn = w.answered ?? performance.now()))
        .observe(document.getElementById('wb-output'), {childList: true});
}"""


@pytest.fixture(scope="module")
def page(browser, server, python_snapshot):
    a = App(browser, server, snapshot=python_snapshot)
    p = a.open()
    p.click("#workbench summary")
    p.wait_for_selector("#wb-text")
    p.evaluate(WATCH_RENDERS)
    yield p
    errors = a.errors
    a.close()
    assert not errors, errors


@pytest.fixture(scope="module")
def smol(server):
    """(chatlens' text side, transformers' fast tokenizer with the GGUF's special tokens) for the page's model."""
    transformers = pytest.importorskip("transformers")
    tokenizers = pytest.importorskip("tokenizers")
    from chatlens.host.export import tokenizer_json_from_gguf
    from chatlens.gguf import read_metadata
    from chatlens.source import load_text_side

    gguf = server.mirror.files[server.mirror.gguf]
    text = load_text_side(gguf)
    hf = transformers.PreTrainedTokenizerFast(
        tokenizer_object=tokenizers.Tokenizer.from_str(json.dumps(tokenizer_json_from_gguf(read_metadata(gguf)))),
        **text.template.special_tokens)
    return text, hf


def set_inputs(page, *, template, messages, tools=None, documents=None, variables=None, generation_prompt=True,
               continue_final=False, mask=False):
    """Fill the workbench as a user would: the template pasted, the messages as JSON, the options."""
    if page.get_attribute("#wb-mode-json", "aria-pressed") != "true":
        page.click("#wb-mode-json")
    page.fill("#wb-template", template)
    page.fill("#wb-json", json.dumps(messages, ensure_ascii=False, indent=1))
    for sel, value in (("#wb-tools", tools), ("#wb-documents", documents), ("#wb-variables", variables)):
        page.fill(sel, "" if value is None else json.dumps(value, ensure_ascii=False))
    for sel, on in (("#wb-gen", generation_prompt), ("#wb-continue", continue_final), ("#wb-mask", mask)):
        page.set_checked(sel, on)


def shown(page):
    """What the page shows once the render of its inputs as they are now has been drawn: the text,
    the ids, the mask (or an error)."""
    page.wait_for_function("""() => window.__workbench.drawn > window.__workbench.input &&
        !document.getElementById('wb-output').hasAttribute('aria-busy')""")
    return page.evaluate("""() => {
        const error = document.querySelector('#wb-output .wb-error');
        if (error) return {error: error.textContent};
        const chips = [...document.querySelectorAll('#wb-output .wb-tokens .tok')];
        return {text: document.getElementById('wb-text').textContent, ids: chips.map(c => Number(c.dataset.id)),
                mask: chips.map(c => c.classList.contains('masked') ? 1 : 0),
                counts: document.querySelector('[data-stat=wb-counts]').textContent};
    }""")


def transformers_render(hf, template, messages, **kwargs):
    hf.chat_template = template
    text = hf.apply_chat_template(copy.deepcopy(messages), tokenize=False, **kwargs)
    return text, hf(text, add_special_tokens=False)["input_ids"]


CASES = {
    "generation_mask_and_tools": dict(template="qwen2.5-training", messages=[Q, A, {"role": "user", "content": "And Germany?"}],
                                      tools=TOOLS, mask=True),
    "documents": dict(template="command-r7b-tool_use", messages=[Q, A, {"role": "user", "content": "And Germany?"}],
                      documents=DOCS, tools=[]),
    "tool_calls": dict(template="qwen2.5-instruct", messages=TOOL_ROUND, tools=TOOLS),
    "variables": dict(template="llama-3.1-instruct", messages=[Q], tools=TOOLS, variables={"date_string": "1 May 2026"}),
    "continue_final_message": dict(template="smol", messages=[Q, {"role": "assistant", "content": "The capital of France is "}],
                                   generation_prompt=False, continue_final=True),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_workbench_renders_what_transformers_renders(page, smol, name):
    text_side, hf = smol
    case = dict(CASES[name])
    source = case.pop("template")
    template = text_side.template.source if source == "smol" else (TEMPLATES / f"{source}.jinja").read_text(encoding="utf-8")
    set_inputs(page, template=template, **case)
    got = shown(page)
    assert "error" not in got, got
    kwargs = {"add_generation_prompt": case.get("generation_prompt", True), "tools": case.get("tools"),
              "documents": case.get("documents"), **(case.get("variables") or {})}
    if case.get("continue_final"):
        kwargs = {"continue_final_message": True, "add_generation_prompt": False}
    text, ids = transformers_render(hf, template, case["messages"], **kwargs)
    assert got["text"] == text and got["ids"] == ids
    assert got["counts"].startswith(f"{len(ids)} tokens")
    if case.get("mask"):
        hf.chat_template = template
        out = hf.apply_chat_template(copy.deepcopy(case["messages"]), tokenize=True, return_dict=True,
                                     return_assistant_tokens_mask=True, **kwargs)
        assert got["mask"] == list(out["assistant_masks"]) and 0 < sum(got["mask"]) < len(ids)
    else:
        assert set(got["mask"]) == {0}


def test_rows_edit_the_messages_and_the_models_template_is_the_default(page, smol):
    text_side, hf = smol
    page.select_option("#wb-example", "model")
    assert page.input_value("#wb-template") == text_side.template.source
    page.click("#wb-mode-json")
    page.fill("#wb-json", json.dumps([Q, A]))
    for sel, on in (("#wb-gen", True), ("#wb-continue", False), ("#wb-mask", False)):
        page.set_checked(sel, on)
    for sel in ("#wb-tools", "#wb-documents", "#wb-variables"):
        page.fill(sel, "")
    page.click("#wb-mode-rows")
    assert page.locator("#wb-rows .wb-row").count() == 2
    page.click("#wb-add")
    page.locator("#wb-rows .wb-row:last-child textarea").fill("And of Germany?")
    messages = [Q, A, {"role": "user", "content": "And of Germany?"}]
    got = shown(page)
    assert (got["text"], got["ids"]) == transformers_render(hf, text_side.template.source, messages, add_generation_prompt=True)
    # a screen reader hears the counts once a render, not the output's hundreds of nodes
    assert page.get_attribute("#wb-output", "aria-live") is None
    assert page.text_content("#wb-said") == f"Rendered: {len(got['ids'])} tokens, {got['counts'].split('(')[1].split()[0]} special."
    assert_accessible(page, "the workbench, its rows and a render")
    page.locator("#wb-rows .wb-row").nth(0).locator("button").click()  # remove the first message
    got = shown(page)
    assert (got["text"], got["ids"]) == transformers_render(hf, text_side.template.source, messages[1:], add_generation_prompt=True)
    page.click("#wb-mode-json")
    assert json.loads(page.input_value("#wb-json")) == messages[1:]


def test_template_errors_are_shown_with_their_line(page, smol):
    text_side, _ = smol
    gemma = (TEMPLATES / "gemma-2-it.jinja").read_text(encoding="utf-8")
    set_inputs(page, template=gemma, messages=[{"role": "system", "content": "Be brief."}, Q])
    got = shown(page)
    assert got["error"] == "The template failed: System role not supported"  # its own raise_exception
    set_inputs(page, template="line one\n{% for m in messages %}\n{{ m.content }\n{% endfor %}", messages=[Q])
    got = shown(page)
    assert "syntax error (line 3)" in got["error"] and "line 3{{ m.content }" in got["error"].replace("\n", "")
    set_inputs(page, template=text_side.template.source, messages=[Q], generation_prompt=True, continue_final=True)
    assert "not compatible" in shown(page)["error"]
    page.fill("#wb-tools", "[{not json")
    assert "tools is not valid JSON" in shown(page)["error"]
    page.fill("#wb-tools", "")


# The hand-written Python (the lesson's program): tests/test_lesson_browser.py


def test_plain_text_is_tokenized_without_the_template(page, smol):
    text_side, hf = smol
    page.click("#mode-plain")
    text = "Hi<|im_end|> there <|IM_END|>"
    page.fill("#plain-text", text)
    page.wait_for_function("t => document.querySelector('.plain-text-view')?.textContent === t", arg=text)
    ids = page.eval_on_selector_all(".plain-tokens .tok", "cs => cs.map(c => Number(c.dataset.id))")
    assert ids == hf(text, add_special_tokens=False)["input_ids"] == text_side.tokenizer.encode(text)
    assert page.eval_on_selector_all(".plain-text-view .special", "s => s.map(e => e.textContent)") == ["<|im_end|>"]
    page.click("#mode-live")


PHONE_CHECK = """() => {
    const small = [];
    for (const e of document.querySelectorAll('button, select, input, textarea, summary, a[href], [role=tab]')) {
        const r = e.getBoundingClientRect();
        if (!r.width || !r.height || getComputedStyle(e).visibility === 'hidden') continue;
        if (e.tagName === 'A' && e.closest('p')) continue;
        if (r.height < 44 || r.width < 44) small.push(`${e.tagName}#${e.id} ${Math.round(r.width)}x${Math.round(r.height)}`);
    }
    return {width: document.scrollingElement.scrollWidth, small};
}"""


def test_the_tools_fit_a_phone(browser, server):
    phone = browser.new_context(viewport={"width": 390, "height": 844}, is_mobile=True, has_touch=True)
    try:
        page = phone.new_page()
        page.goto(server.url)
        page.wait_for_function("() => ['text', 'weights', 'ready'].includes(document.getElementById('status').dataset.state)",
                               timeout=120_000)
        page.click("#mode-plain")
        page.wait_for_selector(".plain-text-view")
        page.click("#why")
        page.click("#workbench summary")
        page.wait_for_selector("#wb-text")
        page.click("#by-hand summary")
        page.wait_for_function("() => document.getElementById('bh-code').value.includes('def render(')")
        check = page.evaluate(PHONE_CHECK)
        assert check["width"] <= 390 and check["small"] == [], check
        page.screenshot(path=str(Path(__file__).resolve().parent.parent / "artifacts" / "screenshots" / "tools-phone.png"),
                        full_page=True)
    finally:
        phone.close()
