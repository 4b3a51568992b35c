// The prompt: its exact text (special tokens as chips, line breaks visible, the reused prefix
// marked), its tokens, and the table of its pieces (a message each, with the template's share).
// Special tokens are the record's special_ids: text that merely looks like one is drawn as the
// text it is.

import { layout } from "./bytes.mjs";
import { TERMS } from "../lesson/terms.mjs";
import { count, el, term } from "./dom.mjs";
import { chips } from "./tokens.mjs";
import { droppedLabels } from "./window.mjs";

// -- the text and the tokens ----------------------------------------------------------------------------

/** Plain text with each line break as a visible mark (its textContent is the text). */
function appendPlain(parent, s) {
  s.split("\n").forEach((part, k) => {
    if (k > 0) parent.append(el("span", { class: "nl", text: "\n" }));
    if (part) parent.append(document.createTextNode(part));
  });
}

/** Where the reused prefix ends: the line between "from the cache" and "computed now"
 * (its labels are drawn by CSS, so the box's text stays exactly the prompt). */
const cacheCut = (record, block) =>
  el(block ? "div" : "span", {
    class: "cache-cut",
    "aria-hidden": "true",
    dataset: { reused: record.reused_tokens, computed: record.computed_tokens },
  });

export function promptText(record, special, lay) {
  const box = el("pre", { class: "prompt-text", id: "prompt-text", tabindex: "0", "aria-label": "The prompt text" });
  const text = record.prompt_text;
  const cut = record.reused_tokens > 0 && record.reused_tokens < record.used ? record.reused_tokens : -1;
  for (const p of record.pieces) {
    const span = el("span", {
      class: `piece kind-${p.kind}`,
      title: `${p.label}: ${count(p.count, "token")}`,
      dataset: { label: `${p.label} · ${p.count}`, kind: p.kind },
    });
    box.append(span);
    if (!lay || text.slice(lay.starts[p.start], lay.starts[p.end]) !== p.text) {
      appendPlain(span, p.text); // no bytes to lay the tokens on the text: the text as it is
      continue;
    }
    let run = "";
    let runCached = false;
    const flush = () => {
      if (!run) return;
      const target = runCached ? el("span", { class: "cached" }) : span;
      appendPlain(target, run);
      if (runCached) span.append(target);
      run = "";
    };
    for (let i = p.start; i < p.end; i++) {
      const cached = i < record.reused_tokens;
      if (i === cut || cached !== runCached) flush();
      runCached = cached;
      if (i === cut) span.append(cacheCut(record, false));
      const s = text.slice(lay.starts[i], lay.starts[i + 1]);
      if (special[i]) {
        flush();
        span.append(el("span", { class: `special${cached ? " cached" : ""}`, text: s }));
      } else run += s;
    }
    flush();
  }
  return box;
}

export function tokenView(record, special, lay) {
  const kinds = new Array(record.prompt_ids.length);
  for (const p of record.pieces) for (let i = p.start; i < p.end; i++) kinds[i] = p.kind;
  const box = el("div", { class: "tokens", id: "token-view", tabindex: "0", "aria-label": "The prompt's tokens" });
  const cut = record.reused_tokens > 0 && record.reused_tokens < record.used ? record.reused_tokens : -1;
  chips(box, {
    tokens: record.prompt_tokens,
    ids: record.prompt_ids,
    lay,
    cut,
    cutNode: cutNodeFor(record),
    classOf: (i) => `kind-${kinds[i] || "none"}${special[i] ? " special" : ""}${i < record.reused_tokens ? " cached" : ""}`,
  });
  return box;
}

const cutNodeFor = (record) => cacheCut(record, true);

// -- the pieces -------------------------------------------------------------------------------------------

/** How many of a message piece's tokens the template put around its text (<|im_start|>, the
 * role's name and a line break before; <|im_end|> and a line break after), counted from the
 * prompt's own tokens, or null when the piece is not laid out that way. */
export function templateShare(record, p, special) {
  if (!special[p.start]) return null;
  let head = 0;
  for (let i = p.start; i < p.end; i++) {
    if (record.prompt_tokens[i].includes("\n")) {
      head = i - p.start + 1;
      break;
    }
  }
  if (!head) return null;
  let tail = 0;
  if (p.end - 2 >= p.start + head && special[p.end - 2] && record.prompt_tokens[p.end - 1].includes("\n")) tail = 2;
  else if (special[p.end - 1]) tail = 1;
  return head + tail <= p.count ? head + tail : null;
}

/** How each role's name is tokenized, from the prompt itself: ["“user” is 1 token", "“assistant”
 * is 2 tokens (ass istant)"]. */
function roleWords(record, special) {
  const seen = new Map();
  for (const p of record.pieces) {
    if (p.kind === "header" || !special[p.start]) continue;
    const toks = [];
    for (let i = p.start + 1; i < p.end && !record.prompt_tokens[i].includes("\n"); i++) toks.push(record.prompt_tokens[i]);
    const name = toks.join("");
    if (name && !seen.has(name)) seen.set(name, toks);
  }
  return [...seen].map(([name, toks]) =>
    `“${name}” is ${count(toks.length, "token")}${toks.length > 1 ? ` (${toks.map((t) => `“${t}”`).join(" + ")})` : ""}`);
}

export function pieceTable(record, special) {
  const body = el("tbody");
  let reread = false; // a reply read back as text: its count need not be what the model wrote
  for (const p of record.pieces) {
    const share = p.kind === "header" ? null : templateShare(record, p, special);
    if (p.kind === "assistant") reread = true;
    body.append(
      el(
        "tr",
        { class: `piece-row kind-${p.kind}`, dataset: { label: p.label, count: p.count, kind: p.kind } },
        el(
          "td",
          {},
          el("span", { class: `swatch kind-${p.kind}` }),
          el("span", { class: "label", text: p.label }),
          share !== null ? el("span", { class: "share", text: ` · ${share} of the template's + ${count(p.count - share, "token")} of its text` }) : null,
          p.kind === "header" ? term(TERMS.header) : null,
        ),
        el("td", { class: "num", text: p.count }),
      ),
    );
  }
  const roles = roleWords(record, special);
  const labels = droppedLabels(record.dropped_messages);
  record.dropped_messages.forEach((d, k) => {
    body.append(
      el(
        "tr",
        { class: "dropped-row", dataset: { index: d.message_index, count: d.count } },
        el("td", {}, el("span", { class: "tag-dropped", text: "dropped" }), ` ${labels[k]}`),
        el("td", { class: "num", text: d.count }),
      ),
    );
  });
  return el(
    "div",
    { class: "pieces-box" },
    term(`${TERMS.message} ${TERMS.template}${roles.length ? ` Here ${roles.join(", ")}.` : ""}${reread ? ` ${TERMS.reread}` : ""}`, "vocabulary"),
    el(
      "table",
      { class: "pieces" },
      el("thead", {}, el("tr", {}, el("th", { text: "message" }), el("th", { class: "num", text: "tokens" }))),
      body,
      el("tfoot", {}, el("tr", {}, el("td", { text: "prompt" }), el("td", { class: "num", text: record.used }))),
    ),
  );
}


// The prompt's layout, once per prompt: a streamed reply draws the same prompt at every token.
const layouts = new WeakMap();
export function promptLayout(record) {
  const key = record.prompt_tokens;
  if (!layouts.has(key) || layouts.get(key).text !== record.prompt_text) {
    layouts.set(key, { text: record.prompt_text, lay: layout(record.prompt_text, record.prompt_bytes) });
  }
  return layouts.get(key).lay;
}
