"""The GPU's known-answer check in Chromium (issue 49), on a faulty test build (`build --gpu-fault`:
chatlens.gpu.fault's documented fault in every GPU program the page builds), WebGPU asked for by
name (SwiftShader): one context with no kept results, whose first page runs the check and is
refused the GPU, whose second reads the kept result instead of running it again, and whose third
overrides it as a developer may (and measures the device with bench's input: chatlens.bench()). The honest build's check passes: the session's first boot waits
for it (webapp.session_snapshot), and test_robust_browser.py reads its figure where the device is
named. The tiny model (tests/tiny_model.py) is the one stored: refusing it costs no real download. The
faulty build (conftest.py's faulty_site) is Firefox's too (test_firefox_browser.py).
"""

import pytest

from chatlens import check
from chatlens.gpu import fault
from chatlens.host import bench
from webapp import BOOT_MS, App

pytestmark = pytest.mark.browser

MESSAGES = [{"role": "user", "content": "Hi!"}]
# A reply's tokens, as they stream: none may come from a GPU that failed its check.
RUN = """m => {
    const tokens = [];
    return chatlens.run({messages: m, window: 256, maxTokens: 2}, {onToken: (t) => tokens.push(t.id)})
        .then((r) => ({tokens, backend: r.backend, error: null}), (e) => ({tokens, error: e.message}));
}"""


def checks_run(page) -> int:
    """How many known-answer checks this page's worker ran (it marks each: worker/check.mjs)."""
    worker = next(w for w in page.workers if w.url.endswith("/worker/worker.mjs"))
    return worker.evaluate("performance.getEntriesByName('chatlens:check').length")


def test_a_faulty_gpu_is_refused_writes_nothing_and_its_result_is_kept(browser, faulty_site, text_side):
    srv, query = faulty_site
    app = App(browser, srv, checks=None)
    try:
        # the first visit: the check runs as the page boots, and fails, naming what differed
        page = app.open(query)
        page.wait_for_function("() => chatlens.checked", timeout=BOOT_MS)
        result = page.evaluate("chatlens.check()")
        assert not result["passed"] and not result["cached"] and result["fault"] == fault.DESCRIPTION
        assert result["max_diff"] > check.TOLERANCE and result["ms"] > 0 and result["adapter"]
        assert [c["what"] for c in result["checks"]] == [op.what for op in check.RUNS]
        assert not any(c["passed"] for c in result["checks"]) and "differed from the reference" in result["sentence"]
        assert checks_run(page) == 1
        box = page.text_content("#device-body")
        assert "faulty test build" in box and "computes wrong values" in box and result["adapter"] in box
        assert page.get_attribute("#device-check", "data-passed") == "false"
        # the model stored: its weights are refused the GPU, in a sentence naming the check and what to try
        assert page.evaluate("chatlens.downloadModel()")["complete"]
        page.wait_for_function("() => chatlens.model", timeout=BOOT_MS)
        model = page.evaluate("chatlens.model")
        assert "failed its known-answer check" in model["error"] and "Try another browser" in model["error"], model
        assert "known-answer check" in page.text_content("#status")
        reply = page.evaluate(RUN, MESSAGES)
        assert reply["tokens"] == [] and reply["error"], reply  # no token from the GPU
        app.shot("check-refused")

        # a second visit: the kept result is read, not run again
        again = app.open(query)
        again.wait_for_function("() => chatlens.model", timeout=BOOT_MS)
        kept = again.evaluate("chatlens.check()")
        assert kept["cached"] and not kept["passed"] and kept["max_diff"] == result["max_diff"]
        assert checks_run(again) == 0
        assert "failed its known-answer check" in again.evaluate("chatlens.model.error")
        assert "on an earlier visit" in again.text_content("#device-check")

        # a developer's override: the GPU computes, and every figure says it is unchecked
        forced = app.open(f"{query}&gpu-check=ignore")
        forced.wait_for_function("() => chatlens.model", timeout=BOOT_MS)
        assert forced.evaluate("chatlens.model.kind") == "webgpu"
        reply = forced.evaluate(RUN, MESSAGES)
        assert reply["error"] is None and len(reply["tokens"]) == 2
        assert "unchecked: it failed its known-answer check" in reply["backend"]
        assert checks_run(forced) == 0

        # "Measure this device": bench's input here (its prompt; two new tokens, not bench's own count,
        # on SwiftShader), beside other hardware's figures; SwiftShader's said to be a CPU emulation,
        # whose figures only show that it works (chatlens.bench's keys: tests/page/check.test.mjs)
        forced.evaluate("chatlens.settings.bench.new_tokens = 2")
        forced.click("#measure-device")
        forced.wait_for_selector("#device-measured", timeout=BOOT_MS)
        measured = forced.text_content("#device-measured")
        assert "a function check" in measured and "unchecked" in measured
        assert f"a {len(bench.prompt_ids(text_side))}-token prompt, 2 new tokens" in measured
        assert forced.locator("#device-measured tr.other-device").count() == len(bench.OTHER_DEVICES)
    finally:
        app.close()
    assert not app.errors, app.errors
