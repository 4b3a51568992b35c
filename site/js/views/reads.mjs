// "What the model reads": a turn record (py/chatlens/record.py) drawn as the window bar, the
// exact prompt text (special tokens as chips, line breaks visible), the token chips with their
// ids, the per-piece counts, the dropped messages and the reply's stop reason. Every piece of
// text goes in as text nodes. Special tokens are the record's special_ids: text that merely
// looks like one is drawn as the text it is.

import { el } from "./dom.mjs";

const SEGMENTS = [
  // window bar: [name, css class, which piece kinds count]
  ["system", "seg-system", ["system", "default_system"]],
  ["turns", "seg-turns", ["user", "assistant"]],
  ["new message + header", "seg-new", ["new", "header"]],
];

/** Which prompt positions hold special tokens, from the record's special_ids. */
export function specialPositions(record) {
  const ids = new Set(record.special_ids);
  return record.prompt_ids.map((id) => ids.has(id));
}

/** The prompt text of token positions [start, end) with special tokens as chips and each line
 * break as a visible mark; its textContent is exactly the tokens' text. */
function tokenText(record, special, start, end, text) {
  const frag = document.createDocumentFragment();
  // Walk the piece's text token by token: a special token's text is cut out as a chip, the text
  // between special tokens goes in as it is, with its line breaks marked.
  let pos = 0;
  const plain = (s) => {
    const parts = s.split("\n");
    parts.forEach((part, k) => {
      if (k > 0) frag.append(el("span", { class: "nl", text: "\n" }));
      if (part) frag.append(document.createTextNode(part));
    });
  };
  for (let i = start; i < end; i++) {
    if (!special[i]) continue;
    const tok = record.prompt_tokens[i];
    const at = text.indexOf(tok, pos);
    if (at < 0) continue; // (cannot happen for a record chatlens made: the token's text is in its piece)
    plain(text.slice(pos, at));
    frag.append(el("span", { class: "special", text: tok }));
    pos = at + tok.length;
  }
  plain(text.slice(pos));
  return frag;
}

/** A token's text made visible: spaces as ·, line breaks as ↵, tabs as →. */
export function visibleToken(t) {
  return t.replace(/ /g, "\u00b7").replace(/\n/g, "\u21b5").replace(/\t/g, "\u2192");
}

export function sums(record) {
  const by = {};
  for (const p of record.pieces) by[p.kind] = (by[p.kind] || 0) + p.count;
  return SEGMENTS.map(([name, cls, kinds]) => [name, cls, kinds.reduce((s, k) => s + (by[k] || 0), 0)]);
}

function windowBar(record) {
  const w = record.window;
  const segs = [
    ...sums(record),
    ["reserved for the reply", "seg-reserve", record.reserve],
    ["free", "seg-free", Math.max(0, record.free)],
  ];
  const bar = el("div", { class: "window-bar", role: "img", "aria-label": `window of ${w} tokens` });
  const legend = el("ul", { class: "legend" });
  for (const [name, cls, n] of segs) {
    if (n > 0) bar.append(el("span", { class: `seg ${cls}`, style: `flex-grow:${n}`, title: `${name}: ${n} tokens` }));
    legend.append(el("li", { dataset: { seg: name } }, el("span", { class: `swatch ${cls}` }), `${name} `, el("b", { text: n })));
  }
  return el("div", { class: "window" }, el("div", { class: "window-title" }, "Window: ", el("b", { text: w }), " tokens"), bar, legend);
}

function stats(record) {
  const rows = [
    ["used", record.used],
    ["reused from the cache", record.reused_tokens],
    ["computed", record.computed_tokens],
    ["reply limit", `${record.max_tokens ?? record.reserve} tokens`],
  ];
  if (record.stop_reason) rows.push(["stop reason", record.stop_reason]);
  if (record.reply_ids) rows.push(["reply", `${record.reply_ids.length} tokens`]);
  return el(
    "dl",
    { class: "stats" },
    rows.map(([k, v]) => el("div", { dataset: { stat: k } }, el("dt", { text: k }), el("dd", { text: v }))),
  );
}

function pieceTable(record) {
  const body = el("tbody");
  for (const p of record.pieces) {
    body.append(
      el(
        "tr",
        { class: `piece-row kind-${p.kind}`, dataset: { label: p.label, count: p.count, kind: p.kind } },
        el("td", {}, el("span", { class: `swatch kind-${p.kind}` }), el("span", { class: "label", text: p.label })),
        el("td", { class: "num", text: p.count }),
      ),
    );
  }
  for (const d of record.dropped_messages) {
    body.append(
      el(
        "tr",
        { class: "dropped-row", dataset: { index: d.message_index, count: d.count } },
        el("td", {}, el("span", { class: "tag-dropped", text: "dropped" }), ` message ${d.message_index + 1} · ${d.role}`),
        el("td", { class: "num", text: d.count }),
      ),
    );
  }
  return el(
    "table",
    { class: "pieces" },
    el("thead", {}, el("tr", {}, el("th", { text: "piece" }), el("th", { class: "num", text: "tokens" }))),
    body,
    el("tfoot", {}, el("tr", {}, el("td", { text: "prompt" }), el("td", { class: "num", text: record.used }))),
  );
}

function droppedList(record) {
  if (!record.dropped_messages.length) return null;
  return el(
    "div",
    { class: "dropped" },
    el("div", { class: "dropped-title", text: `Dropped to fit the window (oldest first): ${record.dropped_messages.length} message(s)` }),
    record.dropped_messages.map((d) =>
      el(
        "div",
        { class: "dropped-turn", dataset: { index: d.message_index } },
        el("span", { class: "tag-dropped", text: `message ${d.message_index + 1} · ${d.role} · ${d.count} tokens` }),
        el("s", { class: "dropped-text", text: d.content }),
      ),
    ),
  );
}

function promptText(record, special) {
  const box = el("pre", { class: "prompt-text", id: "prompt-text" });
  for (const p of record.pieces) {
    const span = el("span", {
      class: `piece kind-${p.kind}`,
      title: `${p.label}: ${p.count} tokens`,
      dataset: { label: `${p.label} · ${p.count}`, kind: p.kind },
    });
    span.append(tokenText(record, special, p.start, p.end, p.text));
    box.append(span);
  }
  return box;
}

function tokenView(record, special) {
  const kinds = new Array(record.prompt_ids.length);
  for (const p of record.pieces) for (let i = p.start; i < p.end; i++) kinds[i] = p.kind;
  const box = el("div", { class: "tokens", id: "token-view" });
  record.prompt_ids.forEach((id, i) => {
    const t = record.prompt_tokens[i];
    box.append(
      el(
        "span",
        { class: `tok kind-${kinds[i] || "none"}${special[i] ? " special" : ""}`, title: `token ${i} · id ${id}`, dataset: { id } },
        el("span", { class: "t", text: visibleToken(t) }),
        el("span", { class: "id", text: id }),
      ),
    );
  });
  return box;
}

function replyBox(record) {
  if (record.reply_text === null || record.reply_text === undefined) return null;
  return el(
    "div",
    { class: "reply" },
    el(
      "div",
      { class: "reply-title" },
      "The reply: ",
      el("b", { text: `${record.reply_ids.length} tokens` }),
      ", stopped by ",
      el("code", { class: `stop stop-${record.stop_reason}`, text: record.stop_reason }),
      record.stop_reason === "end_turn" ? " (the model wrote its end-of-turn token)" : ` (the ${record.max_tokens}-token limit)`,
    ),
    el("div", { class: "reply-text", text: record.reply_text }),
  );
}

/** Draw `record` into `root`. view: "text" | "tokens". */
export function renderRecord(root, record, { caption = "", view = "text", onView } = {}) {
  const special = specialPositions(record);
  const tabs = el(
    "div",
    { class: "tabs", role: "tablist" },
    [
      ["text", "Text"],
      ["tokens", `Tokens (${record.used})`],
    ].map(([v, label]) =>
      el("button", {
        type: "button",
        role: "tab",
        class: v === view ? "active" : null,
        "aria-selected": String(v === view),
        dataset: { view: v },
        text: label,
        onclick: () => onView?.(v),
      }),
    ),
  );
  const parts = [
    el("p", { class: "caption", id: "reads-caption", text: caption }),
    windowBar(record),
    stats(record),
    droppedList(record),
    tabs,
    view === "tokens" ? tokenView(record, special) : promptText(record, special),
    pieceTable(record),
    replyBox(record),
  ];
  root.replaceChildren(...parts.filter(Boolean));
}

export function renderMessage(root, text, cls = "note") {
  root.replaceChildren(el("p", { class: cls, text }));
}
