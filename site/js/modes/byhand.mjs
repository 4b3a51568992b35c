// The lab's hand-written Python (chatlens/by_hand.py, read from the installed package): SmolLM2's
// chat template written out in plain Python and the loop that drops the oldest turns to fit the
// window. The learner can edit it and run it in the page's Python (the worker's run_python: its
// output is captured, and it is stopped at a time limit, so a loop without end cannot hang the
// worker); a line then says whether the text it built (`prompt`) equals the real template's
// rendering of the same messages (`kept`), through the worker's render request.

import { $, el, fill } from "../views/dom.mjs";

const SECONDS = 3; // the time limit for the learner's code (chatlens.usercode, by sys.settrace)
let api = null;
let original = null; // the package's source

function firstDifference(a, b) {
  let i = 0;
  while (i < a.length && i < b.length && a[i] === b[i]) i++;
  return i;
}

const around = (s, i) => JSON.stringify(s.slice(Math.max(0, i - 12), i + 20));

/** Whether the code's text equals the template's, in one line. */
async function comparison(results) {
  const { prompt, kept } = results;
  if (typeof prompt !== "string" || !Array.isArray(kept)) {
    return el("p", { class: "bh-compare is-none", text: "Nothing to compare: the code must leave its text in `prompt` and the messages it kept in `kept`." });
  }
  let real;
  try {
    real = (await api.render({ messages: kept, add_generation_prompt: true })).text;
  } catch (e) {
    return el("p", { class: "bh-compare is-error", text: `The real template cannot render these messages: ${e.message}` });
  }
  if (real === prompt) {
    return el("p", { class: "bh-compare is-equal", dataset: { equal: "true" } },
      el("b", { text: "✓ Equal: " }), `the hand-written text is exactly the real template's rendering of the same ${kept.length} messages (${prompt.length} characters).`);
  }
  const at = firstDifference(prompt, real);
  return el("p", { class: "bh-compare is-different", dataset: { equal: "false" } },
    el("b", { text: "✗ Different: " }),
    `the texts part at character ${at}: by hand ${around(prompt, at)}, the template ${around(real, at)}.`);
}

async function run() {
  const out = $("bh-output");
  $("bh-run").disabled = true;
  fill(out, el("p", { class: "note", text: "Running…" }));
  try {
    const r = await api.runPython({ code: $("bh-code").value, seconds: SECONDS, results: ["prompt", "kept"] });
    const parts = [
      el("div", { class: "bh-label", text: `Output (${r.seconds.toFixed(2)} s)` }),
      el("pre", { class: "bh-stdout", id: "bh-stdout", text: r.stdout || "(nothing printed)" }),
    ];
    if (r.stderr) parts.push(el("pre", { class: "bh-stderr", id: "bh-stderr", text: r.stderr }));
    if (r.error) {
      parts.push(el("p", { class: "bh-error", role: "alert" },
        el("b", { text: `${r.error.name}${r.error.line ? ` (line ${r.error.line})` : ""}: ` }), r.error.message));
    }
    if (!r.error) parts.push(await comparison(r.results));
    fill(out, ...parts);
  } catch (e) {
    fill(out, el("p", { class: "error", text: `Cannot run it: ${e.message}` }));
  } finally {
    $("bh-run").disabled = false;
  }
}

/** Wire the section; the code is read from the package the first time it is opened. */
export function setUpByHand(theApi) {
  api = theApi;
  $("bh-run").addEventListener("click", run);
  $("bh-reset").addEventListener("click", () => {
    if (original !== null) $("bh-code").value = original;
  });
  $("bh-code").addEventListener("keydown", (e) => {
    if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) {
      e.preventDefault();
      run();
    }
  });
  $("by-hand").addEventListener("toggle", async () => {
    if (original !== null || !$("by-hand").open) return;
    $("bh-code").value = "# reading chatlens/by_hand.py from the page's Python…";
    try {
      const { source } = await api.labSource();
      original = source;
      $("bh-code").value = source;
      $("bh-run").disabled = false;
    } catch (e) {
      $("bh-code").value = "";
      fill($("bh-output"), el("p", { class: "error", text: `Cannot read the code: ${e.message}` }));
    }
  });
}
