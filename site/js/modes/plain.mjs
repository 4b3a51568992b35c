// Plain-text mode: the lesson's experiment. The user types any text; it is tokenized as it is,
// with no template (special tokens written in it are the tokens they name); "Continue" asks the
// model for the next-token distribution and a greedy continuation; "Send the same words as a chat
// message" sends them the other way, as a user message through the template, shown beside it.
// Neither touches the live conversation.

import { callArgs, readControls } from "../page/controls.mjs";
import { $, debounce, fill, keepFocus } from "../views/dom.mjs";
import { renderMessage } from "../views/overflow.mjs";
import { renderPlain } from "../views/plain.mjs";
import { weightsOf } from "../page/weights.mjs";
import { LESSON_TEXT } from "../views/lessonfigures.mjs";

export { LESSON_TEXT };

function view(page) {
  const { state } = page;
  const p = state.plain;
  return { tokens: p.tokens, plain: p.plain, chat: p.chat, gap: state.nearTieGap, eos: p.plain.answer?.eos_id,
           lesson: p.text.trim() === LESSON_TEXT ? weightsOf(page.api.source) : null,
           presets: page.api.settings?.presets, onLesson: () => sendAsChat(page, { asLesson: true }), hooks: page.replyHooks ?? {} };
}

/** Draw plain-text mode's panel from the store (the subscriber calls it on each "plain" change). */
export function drawPlain(page) {
  if (page.state.mode !== "plain" || !page.state.plain) return;
  const p = page.state.plain;
  if (p.error) return renderMessage($("reads"), `Cannot tokenize: ${p.error}`, "error");
  if (!p.tokens && !p.plain.streaming && !p.plain.answer && !p.chat.streaming && !p.chat.answer) {
    return renderMessage($("reads"), page.api.status.state === "booting" || page.api.status.state === "loading"
      ? "Python is starting in a worker; the text's tokens appear when it is ready."
      : "Type some text: this panel shows its tokens as the model reads them, with no template.");
  }
  renderPlain($("reads"), view(page));
}

/** The text's tokens, for the newest text only. */
export async function tokenizePlain(page) {
  const { api, store } = page;
  const text = $("plain-text").value;
  const p = store.plainText(text);
  const seq = ++p.seq;
  if (!text) return store.tokenized(p, {});
  let answer;
  try {
    answer = { tokens: await api.tokenize({ text }) };
  } catch (e) {
    answer = { error: e.message };
  }
  if (seq === p.seq) store.tokenized(p, answer); // else a newer text is being read
}

const maxTokens = () => Number($("plain-max").value);

/** Run one side: `start({onToken, onProgress, signal})` calls the API; `key` is "plain" or "chat".
 * Its reply streams into the side (state.mjs's slot) and its answer takes the reply's place as it
 * comes, under the same names. */
async function runSide(page, key, start) {
  const { state, store } = page;
  await tokenizePlain(page);
  const p = state.plain;
  if (!p.text.trim()) return;
  const side = p[key];
  setBusy(page, true);
  store.sideStarted(side);
  const controller = new AbortController();
  const running = start({ onToken: (t) => store.tokenArrived(side, t), onProgress: (pr) => store.progressed(side, pr),
                          signal: controller.signal });
  // the side being written holds its AbortController in the store (`stopper`), for Stop
  const ended = () => {
    if (state.stopper?.controller === controller) store.stopperSet(null);
  };
  store.stopperSet({ mode: "plain", controller, ended: running.then(ended, ended) });
  try {
    store.sideEnded(side, { answer: await running });
  } catch (e) {
    store.sideEnded(side, { error: `No ${key === "plain" ? "continuation" : "reply"}: ${e.message}` });
  } finally {
    setBusy(page, false);
  }
}

/** Stop the side being written, if any: it keeps what it has, marked stopped. Resolves once it
 * has ended. */
export function stopPlain(page) {
  const writing = page.state.stopper;
  if (writing?.mode !== "plain") return Promise.resolve();
  writing.controller.abort();
  return writing.ended;
}

function setBusy(page, on) {
  page.store.plainWriting(on);
  keepFocus($("plain-stop"), !on, $("plain-text")); // Stop pressed: back to the text
  keepFocus($("plain-run"), on, $("plain-stop"), "disabled"); // pressed: its Stop takes the focus
  keepFocus($("plain-as-chat"), on, $("plain-stop"), "disabled");
}

/** The next-token distribution and the greedy continuation of the text, with no template. */
export function continuePlain(page) {
  const { api } = page;
  if (page.state.writing) return;
  return runSide(page, "plain",
    (options) => api.complete({ text: $("plain-text").value, topK: api.settings.top_k, maxTokens: maxTokens() }, options));
}

/** The same words the other way: one user message through the template (the nav's system
 * prompt and window), its reply with each token's candidates. asLesson: with no system prompt of
 * its own, so the template's default applies, as in the lesson's run. */
export function sendAsChat(page, { asLesson = false } = {}) {
  const { api } = page;
  if (page.state.writing) return;
  const args = callArgs([{ role: "user", content: $("plain-text").value }], api.settings, readControls());
  if (asLesson) {
    args.preset = api.settings.default_preset; // "none": the template's default system prompt
    delete args.custom;
  }
  return runSide(page, "chat", (options) => api.run({ ...args, topK: api.settings.top_k, maxTokens: maxTokens() }, options));
}

/** Wire the mode's controls (once). */
export function setUpPlain(page) {
  $("plain-text").value = LESSON_TEXT;
  fill($("plain-max"), ...[1, 8, 32, page.api.settings.reply_limit].map((n) => {
    const o = document.createElement("option");
    o.value = String(n);
    o.textContent = `${n} token${n === 1 ? "" : "s"}`;
    o.selected = n === 8;
    return o;
  }));
  $("plain-text").addEventListener("input", debounce(() => tokenizePlain(page), 150));
  $("plain-run").addEventListener("click", () => continuePlain(page));
  $("plain-as-chat").addEventListener("click", () => sendAsChat(page));
  $("plain-stop").addEventListener("click", () => stopPlain(page));
}
