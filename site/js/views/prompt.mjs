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

/** How many of a message piece's tokens the template put around its text (its tokens outside
 * the message's content span), or null when the record cannot tell. */
export function templateShare(p) {
  if (p.content_start == null || p.content_end == null) return null;
  return p.count - (p.content_end - p.content_start);
}

/** How each role's name is tokenized, from the prompt itself: ["“user” is 1 token", "“assistant”
 * is 2 tokens (ass istant)"]: the run of the template's tokens before a message's text that
 * spells its role. */
function roleWords(record) {
  const seen = new Map();
  const tokens = record.prompt_tokens;
  for (const p of record.pieces) {
    if (!p.role || p.content_start == null || seen.has(p.role)) continue;
    for (let a = p.start; a < p.content_start && !seen.has(p.role); a++) {
      let name = "";
      for (let z = a; z < p.content_start && p.role.startsWith(name + tokens[z]); z++) {
        name += tokens[z];
        if (name === p.role) {
          seen.set(p.role, tokens.slice(a, z + 1));
          break;
        }
      }
    }
  }
  return [...seen].map(([name, toks]) =>
    `“${name}” is ${count(toks.length, "token")}${toks.length > 1 ? ` (${toks.map((t) => `“${t}”`).join(" + ")})` : ""}`);
}

export function pieceTable(record) {
  const body = el("tbody");
  let reread = false; // a reply read back as text: its count need not be what the model wrote
  for (const p of record.pieces) {
    const share = templateShare(p);
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
  const roles = roleWords(record);
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
