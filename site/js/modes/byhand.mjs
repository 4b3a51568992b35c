// The lab's hand-written Python (chatlens/by_hand.py, read from the installed package): the
// lesson's own program, SmolLM2's chat template written out as `piece` and `render(system, turns,
// message)`, its token counts written in by hand (`count`), and the loop that drops the oldest turn
// until the prompt and the reply limit fit the window. The learner can edit it and run it in the
// page's Python (the worker's run_python: its output is captured, and it is stopped at a time
// limit, so a loop without end cannot hang the worker); a line then checks what it printed against
// the real thing: the prompt (every line after the first) against the template's rendering of the
// turns it kept (`kept`) and its `message`, through the worker's render request, and its count
// (`used`) against the tokenizer's count of that text.

import { $, el, fill } from "../views/dom.mjs";

const RESULTS = ["kept", "message", "used"]; // the program's names the check reads

function firstDifference(a, b) {
  let i = 0;
  while (i < a.length && i < b.length && a[i] === b[i]) i++;
  return i;
}

const around = (s, i) => JSON.stringify(s.slice(Math.max(0, i - 12), i + 20));

/** The prompt the program printed: every line after the first, less the newline print() adds. */
function printedPrompt(stdout) {
  const at = stdout.indexOf("\n");
  if (at < 0) return null;
  const rest = stdout.slice(at + 1);
  return rest.endsWith("\n") ? rest.slice(0, -1) : rest;
}

/** kept ([[user, assistant], ...]) and the new message as chat messages, or null if they are not. */
function messagesOf(kept, message) {
  const isText = (t) => typeof t === "string";
  if (!Array.isArray(kept) || !isText(message) || !kept.every((t) => Array.isArray(t) && t.length === 2 && t.every(isText))) return null;
  return [...kept.flatMap(([user, assistant]) => [{ role: "user", content: user }, { role: "assistant", content: assistant }]),
    { role: "user", content: message }];
}

const plural = (n, one, many = `${one}s`) => `${n} ${n === 1 ? one : many}`;

/** Whether what the code printed is the template's text, and its count the tokenizer's, in one line. */
async function comparison(api, stdout, results) {
  const messages = messagesOf(results.kept, results.message);
  const printed = printedPrompt(stdout);
  if (!messages || printed === null) {
    return el("p", { class: "bh-compare is-none", text: "Nothing to compare: the code must print a line, then the prompt, and keep the turns it kept in `kept` and the new message in `message`." });
  }
  let real, tokens;
  try {
    real = (await api.render({ messages, add_generation_prompt: true })).text;
    tokens = (await api.tokenize({ text: real })).prompt_ids.length;
  } catch (e) {
    return el("p", { class: "bh-compare is-error", text: `The real template cannot render these messages: ${e.message}` });
  }
  const turns = plural(messages.length, "message");
  if (real !== printed) {
    const at = firstDifference(printed, real);
    return el("p", { class: "bh-compare is-different", dataset: { equal: "false" } },
      el("b", { text: "✗ Different: " }),
      `the printed prompt and the real template's rendering of the same ${turns} part at character ${at}: printed ${around(printed, at)}, the template ${around(real, at)}.`);
  }
  const same = `the printed prompt is exactly the real template's rendering of the same ${turns} (${printed.length} characters)`;
  if (results.used !== tokens) {
    const used = Number.isInteger(results.used) ? plural(results.used, "token") : "no whole number of tokens in `used`";
    return el("p", { class: "bh-compare is-different", dataset: { equal: "true", counted: "false" } },
      el("b", { text: "✗ Miscounted: " }),
      `${same}, but the code counts ${used} where SmolLM2's tokenizer counts ${tokens}: check the figures in \`count\`.`);
  }
  return el("p", { class: "bh-compare is-equal", dataset: { equal: "true", counted: "true" } },
    el("b", { text: "✓ Equal: " }), `${same}, and its ${tokens} tokens are what SmolLM2's tokenizer counts.`);
}

async function runCode(api) {
  const out = $("bh-output");
  $("bh-run").disabled = true;
  fill(out, el("p", { class: "note", text: "Running…" }));
  try {
    // No time limit sent: Python's default applies (chatlens.usercode.DEFAULT_SECONDS, by sys.settrace).
    const r = await api.runPython({ code: $("bh-code").value, results: RESULTS });
    const parts = [
      el("div", { class: "bh-label", text: `Output (${r.seconds.toFixed(2)} s)` }),
      el("pre", { class: "bh-stdout", id: "bh-stdout", text: r.stdout || "(nothing printed)" }),
    ];
    if (r.stderr) parts.push(el("pre", { class: "bh-stderr", id: "bh-stderr", text: r.stderr }));
    if (r.error) {
      parts.push(el("p", { class: "bh-error", role: "alert" },
        el("b", { text: `${r.error.name}${r.error.line ? ` (line ${r.error.line})` : ""}: ` }), r.error.message));
    }
    if (!r.error) parts.push(await comparison(api, r.stdout, r.results));
    fill(out, ...parts);
  } catch (e) {
    fill(out, el("p", { class: "error", text: `Cannot run it: ${e.message}` }));
  } finally {
    $("bh-run").disabled = false;
  }
}

/** Wire the section; the code is read from the package the first time it is opened (the store's
 * byHand.source, what Reset gives back). */
export function setUpByHand({ api, state, store }) {
  const run = () => runCode(api);
  $("bh-run").addEventListener("click", run);
  $("bh-reset").addEventListener("click", () => {
    if (state.byHand.source !== null) $("bh-code").value = state.byHand.source;
  });
  $("bh-code").addEventListener("keydown", (e) => {
    if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) {
      e.preventDefault();
      run();
    }
  });
  $("by-hand").addEventListener("toggle", async () => {
    if (state.byHand.source !== null || !$("by-hand").open) return;
    $("bh-code").value = "# reading chatlens/by_hand.py from the page's Python…";
    try {
      const { source } = await api.labSource();
      store.byHandRead(source);
      $("bh-code").value = source;
      $("bh-run").disabled = false;
    } catch (e) {
      $("bh-code").value = "";
      fill($("bh-output"), el("p", { class: "error", text: `Cannot read the code: ${e.message}` }));
    }
  });
}
