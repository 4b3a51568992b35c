// The template workbench's output: the rendered text with its special tokens as chips, its
// tokens and counts, the assistant-token mask where the template marks {% generation %}, and
// errors (the template's raise_exception, a Jinja syntax error with its line) said plainly.

import { layout } from "./bytes.mjs";
import { $, el, fill } from "./dom.mjs";
import { chips } from "./tokens.mjs";

/** The rendered text (exactly: its textContent is the text), special tokens as chips, the
 * tokens the mask marks in green. */
function renderedText(out, special, mask, lay) {
  const pre = el("pre", { class: "prompt-text wb-text", id: "wb-text", tabindex: "0", "aria-label": "The rendered text" });
  if (!lay) {
    pre.textContent = out.text; // the tokens cannot be laid on the text: the text as it is
    return pre;
  }
  let run = "";
  let runMasked = false;
  const flush = () => {
    if (!run) return;
    pre.append(runMasked ? el("span", { class: "masked", text: run }) : document.createTextNode(run));
    run = "";
  };
  out.ids.forEach((id, i) => {
    const masked = Boolean(mask?.[i]);
    const text = out.text.slice(lay.starts[i], lay.starts[i + 1]); // the token's text
    if (special.has(id)) {
      flush();
      pre.append(el("span", { class: `special${masked ? " masked" : ""}`, text }));
      return;
    }
    if (masked !== runMasked) flush();
    runMasked = masked;
    run += text;
  });
  flush();
  return pre;
}

function tokenChips(out, special, mask, lay) {
  const box = el("div", { class: "tokens wb-tokens", "aria-label": "The rendered text's tokens" });
  chips(box, {
    tokens: out.tokens,
    ids: out.ids,
    lay,
    classOf: (i) => `${special.has(out.ids[i]) ? "special" : ""}${mask?.[i] ? " masked" : ""}`,
    titleOf: (i) => (mask?.[i] ? " · the assistant's" : ""),
  });
  return box;
}

/** The line of the template an error names ("... (line 3): ..."), with its number. */
function errorLine(message, template) {
  const m = /\(line (\d+)\)/.exec(message || "");
  if (!m || !template) return null;
  const n = Number(m[1]);
  const line = template.split("\n")[n - 1];
  if (line === undefined) return null;
  return el("div", { class: "wb-error-line" }, el("span", { class: "line-no", text: `line ${n}` }), el("code", { text: line }));
}

/**
 * Draw into `root`: {error: {name, message}, template} or {out: the render answer, masked:
 * whether the mask was asked for, hasGeneration: whether the template marks {% generation %}}.
 */
export function renderWorkbench(root, { out, error, template, masked, hasGeneration }) {
  if (error) {
    if ($("wb-said")) $("wb-said").textContent = ""; // said by the alert; the next render's counts are news
    fill(root, el(
      "div",
      { class: "wb-error", role: "alert" },
      el("b", { text: error.name === "TemplateError" ? "The template failed: " : `${error.name}: ` }),
      el("span", { class: "wb-error-message", text: error.message }),
      errorLine(error.message, template),
    ));
    return;
  }
  const special = new Set(out.special_ids);
  const mask = out.assistant_mask || null;
  const nSpecial = out.ids.filter((id) => special.has(id)).length;
  const nMasked = mask ? mask.reduce((a, b) => a + b, 0) : 0;
  const lay = layout(out.text, out.bytes);
  // a screen reader hears the counts, once a render (the output itself is hundreds of nodes)
  const said = $("wb-said");
  const line = `Rendered: ${out.ids.length} tokens, ${nSpecial} special${mask ? `, ${nMasked} marked as the assistant's` : ""}.`;
  if (said && said.textContent !== line) said.textContent = line;
  fill(root,
    el(
      "div",
      { class: "wb-counts", dataset: { stat: "wb-counts" } },
      el("b", { text: out.ids.length }), " tokens",
      ` (${nSpecial} special)`,
      mask ? el("span", { class: "wb-mask-count" }, " · ", el("b", { text: nMasked }), " marked as the assistant's") : null,
      ` · ${out.text.length} characters`,
    ),
    masked && !hasGeneration
      ? el("p", { class: "note", text: "This template has no {% generation %} blocks, so no token is marked as the assistant's (transformers only warns)." })
      : null,
    mask && nMasked ? el("p", { class: "term", text: "Green: the tokens {% generation %} blocks rendered, what return_assistant_tokens_mask marks (for training on the replies only)." }) : null,
    renderedText(out, special, mask, lay),
    tokenChips(out, special, mask, lay),
  );
}
