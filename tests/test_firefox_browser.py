"""The page in a second engine: Debian's firefox-esr, headless, with its default settings.

Playwright cannot drive the stock Firefox (it needs its own build, which cannot be downloaded
here), so node scripts in tests/firefox/ drive it over WebDriver BiDi with the pinned
puppeteer-core, and each prints what the page gave as JSON; these tests compare it with the
command line on the same files. A first visit boots, previews, downloads the model (Firefox
never answers `navigator.storage.persist()` headless: the download must not wait for it),
replies on WebGPU and stops a reply; a second visit with the server gone works from the store
and the service worker, and with `auto` follows chatlens.device's rule on the adapter it finds.

Firefox's only WebGPU adapter here is a fallback (CPU) one, which `auto` rightly passes over:
the scripts ask for WebGPU by name, and the checks of the adapter hold on any, real or emulated.
It is slow, and Firefox resolves mapAsync on a ~100 ms timer, so the prompt is short and replies
a few tokens.
"""

import json
import os
import signal
import subprocess
from pathlib import Path

import pytest

from conftest import cli_in_process
from webapp import ROOT, SHOTS

pytestmark = pytest.mark.browser

FIREFOX = Path(os.environ.get("CHATLENS_FIREFOX", "/usr/bin/firefox-esr"))
SCRIPTS = ROOT / "tests" / "firefox"
SYSTEM = "Be brief."
MESSAGES = [{"role": "user", "content": "Hi!"}]
WINDOW = 256
TOKENS = 3


def firefox(script, timeout=600, **args) -> dict:
    """Run tests/firefox/SCRIPT with ARGS; what it printed on its last line."""
    proc = subprocess.Popen(["node", str(SCRIPTS / script), json.dumps(args)], cwd=SCRIPTS,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGTERM)  # puppeteer closes Firefox on SIGTERM: nothing is left running
        out, err = proc.communicate(timeout=30)
        pytest.fail(f"{script} ran past {timeout} s: {err[-2000:]}")
    assert proc.returncode == 0 and out.strip(), f"{script} failed ({proc.returncode}): {err[-2000:]}"
    result = json.loads(out.strip().splitlines()[-1])
    assert "failed" not in result, result["failed"]
    assert not result["errors"], result["errors"]  # page errors and CSP violations
    return result


@pytest.fixture(scope="module")
def site(server):
    """The session's site and mirror on a server of this module's own, stopped for the offline visit."""
    from chatlens.host.serve import SiteServer

    if not FIREFOX.exists():
        pytest.skip(f"{FIREFOX} is missing (apt-get install -y firefox-esr)")
    if not (SCRIPTS / "node_modules" / "puppeteer-core").exists():
        pytest.fail("tests/firefox/node_modules is missing: npm ci --prefix tests/firefox (scripts/setup.sh --test)")
    srv = SiteServer(server.root, mirror=server.mirror).start()
    srv.running = True
    yield srv
    if srv.running:
        srv.shutdown()
        srv.server_close()


@pytest.fixture(scope="module")
def cli(server):
    """`python -m chatlens run` on the mirror's Hugging Face folder, the files the page downloads (in
    pytest's process, the folder loaded once a session: test_chatcli.py runs the command for real)."""
    folder = server.mirror.files["config.json"].parent
    done = cli_in_process("run", "--window", str(WINDOW), "--max-tokens", str(TOKENS), "--system", SYSTEM,
                   stdin=json.dumps({"messages": MESSAGES}), model=folder)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.fixture(scope="module")
def first_visit(site, faulty_site, tmp_path_factory):
    """A first visit on a fresh profile (kept for the return visit), then the faulty test build's
    site in the same browser: tests/firefox/first_visit.mjs."""
    profile = tmp_path_factory.mktemp("firefox") / "profile"
    SHOTS.mkdir(parents=True, exist_ok=True)
    faulty, query = faulty_site
    result = firefox("first_visit.mjs", url=site.url, profile=str(profile), shots=str(SHOTS),
                     system=SYSTEM, messages=MESSAGES, window=WINDOW, maxTokens=TOKENS,
                     faulty={"url": faulty.url, "query": query})
    return result, profile


def test_firefox_boots_and_previews_what_the_cli_reads(first_visit, cli):
    visit, _ = first_visit
    assert visit["boot"]["state"] in ("text", "weights", "ready")
    assert visit["preview"]["prompt_text"] == cli["prompt_text"]
    assert visit["preview"]["prompt_ids"] == cli["prompt_ids"]
    # an adapter, fast or slow, real or emulated: the scripts ask for WebGPU by name (the one here is
    # Firefox's fallback adapter, which `auto` passes over: test_auto_passes_an_emulated_adapter_over_...)
    assert visit["adapter"] is not None and set(visit["adapter"]) == {"fallback", "vendor", "architecture", "device",
                                                                       "description"}


def test_firefox_downloads_the_model_though_it_never_answers_persist(first_visit):
    visit, _ = first_visit
    download = visit["download"]
    [model] = download["stored"]
    assert model["complete"] and model["verified"] and model["bytes"] > 0
    # The page's request for persistent storage is still unanswered; the box says what that means.
    assert download["persisted"] is False
    assert download["persistence"] == "pending" and "has not answered yet" in download["note"]


def test_a_webgpu_reply_in_firefox_equals_the_cli(first_visit, cli):
    visit, _ = first_visit
    assert visit["model"]["kind"] == "webgpu"
    reply, streamed = visit["reply"]["record"], visit["reply"]["streamed"]
    assert reply["backend"].startswith("webgpu: ")
    assert reply["prompt_ids"] == cli["prompt_ids"]
    assert reply["reply_ids"] == cli["reply_ids"] and reply["reply_text"] == cli["reply_text"]
    assert streamed == reply["reply_ids"]


def test_stop_in_firefox_keeps_the_token_written_before_it(first_visit, cli):
    visit, _ = first_visit
    stopped = visit["stopped"]["record"]
    assert stopped["stop_reason"] == "stopped"
    assert stopped["reply_ids"] == cli["reply_ids"][:1] == visit["stopped"]["streamed"]
    assert stopped["reused_tokens"] > 0  # the same prompt again: read from the cache


def test_firefox_checks_its_gpu_before_it_computes(first_visit):
    """The known-answer check ran on Firefox's adapter as the page booted and passed, the mirror's
    weights' first step with it, and states its figure (chatlens.check)."""
    check = first_visit[0]["check"]
    assert check["passed"] and not check["cached"] and check["ms"] > 0, check
    assert check["max_diff"] <= check["tolerance"] and check["weights"] == "checked"
    assert first_visit[0]["model"]["check"]["passed"]


def test_firefox_refuses_a_gpu_that_fails_its_check_and_keeps_the_result(first_visit):
    """The faulty test build: the check fails naming what differed, the stored model is refused the GPU
    in a sentence naming the check, no token is written, and a reload reads the kept result."""
    from chatlens.gpu import fault

    seen = first_visit[0]["faulty"]
    check = seen["check"]
    assert not check["passed"] and not check["cached"] and check["fault"] == fault.DESCRIPTION
    assert check["max_diff"] > check["tolerance"] and "differed from the reference" in check["sentence"]
    assert seen["stored"] and "failed its known-answer check" in seen["model"]["error"], seen["model"]
    assert seen["reply"]["tokens"] == [] and seen["reply"]["error"], seen["reply"]
    assert "faulty test build" in seen["box"] and "computes wrong values" in seen["box"]
    assert seen["again"]["cached"] and seen["again"]["max_diff"] == check["max_diff"]


@pytest.fixture(scope="module")
def return_visit(first_visit, site):
    """The same profile with the server gone: tests/firefox/return_visit.mjs."""
    visit, profile = first_visit
    assert visit["controlled"]  # the service worker cached this build
    site.shutdown()
    site.server_close()
    site.running = False
    return firefox("return_visit.mjs", url=site.url, profile=str(profile), shots=str(SHOTS),
                   system=SYSTEM, messages=MESSAGES, window=WINDOW, maxTokens=1)


def test_firefox_works_offline_once_the_model_is_stored(return_visit, first_visit, cli):
    again = return_visit
    assert again["boot"]["source"] == "mirror" and again["stored"]["complete"]
    # the first visit's check, kept: read, not run again
    assert again["check"]["cached"] and again["check"]["max_diff"] == first_visit[0]["check"]["max_diff"]
    assert again["preview"]["prompt_ids"] == cli["prompt_ids"]
    assert again["model"]["kind"] == "webgpu"
    assert again["reply"]["reply_ids"] == cli["reply_ids"][:1]


def test_auto_passes_an_emulated_adapter_over_and_takes_a_real_one(first_visit, return_visit):
    """`auto` follows chatlens.device's rule on the adapter the first visit found: an emulated one
    (Firefox's fallback adapter here) is passed over for NumPy, which cannot be fetched offline, and
    the GPU is offered by name; a real GPU computes the replies."""
    from chatlens.device import choose

    auto = return_visit["auto"]
    assert auto["backend"] == "auto"
    backend, why = choose("auto", first_visit[0]["adapter"])
    if backend == "numpy":
        assert "NumPy" in auto["model"]["error"] and auto["model"]["offer"] == "webgpu", (why, auto["model"])
    else:
        assert auto["model"]["kind"] == "webgpu" and not auto["model"].get("error"), (why, auto["model"])
