// "What the model reads": a turn record (py/chatlens/record.py) drawn as the window bar (and
// the part reused from the cache), the counts with what each word means, the exact prompt text
// (special tokens as chips, line breaks visible, the reused prefix marked), the token chips with
// their ids (a character split across tokens shown as its bytes, grouped under the character),
// the per-message counts, the dropped messages and the reply with its stop reason, speed and
// backend. A message that cannot fit is drawn as an overflow of the window.
// Every piece of text goes in as text nodes. Special tokens are the record's special_ids: text
// that merely looks like one is drawn as the text it is.

import { hex, layout } from "./bytes.mjs";
import { replyLimitNote, stopReasonText, TERMS } from "../lesson/terms.mjs";
import { count, el, fill } from "./dom.mjs";
import { focusTab, tabList } from "./tabs.mjs";
import { bindWhy, candidatesTable, markNearTies, whyBox } from "./why.mjs";

const SEGMENTS = [
  // window bar: [name, css class, which piece kinds count]
  ["system", "seg-system", ["system", "default_system"]],
  ["turns", "seg-turns", ["user", "assistant"]],
  ["new message + header", "seg-new", ["new", "header"]],
];
const FULL_CONTEXT = 8192; // SmolLM2's trained context (the model's whole window)
const PANEL_ID = "reads-tabpanel";

/** Which prompt positions hold special tokens, from the record's special_ids. */
export function specialPositions(record) {
  const ids = new Set(record.special_ids);
  return record.prompt_ids.map((id) => ids.has(id));
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

const term = (text, cls = "") => el("p", { class: `term ${cls}`.trim(), text });

/** "turn N · role" for each dropped message, numbered as the pieces are (a turn is a user
 * message and what follows it; the dropped ones are the oldest turns, whole). */
export function droppedLabels(dropped) {
  let t = 0;
  let hasUser = false;
  return dropped.map((d) => {
    if (t === 0 || (d.role === "user" && hasUser)) {
      t += 1;
      hasUser = false;
    }
    if (d.role === "user") hasUser = true;
    return `turn ${t} · ${d.role}`;
  });
}

// -- the window ------------------------------------------------------------------------------------

function windowTitle(w) {
  const whole = w >= FULL_CONTEXT;
  return el(
    "div",
    { class: "window-title" },
    "Window: ",
    el("b", { text: w }),
    " tokens",
    whole ? " (the model's whole context)" : null,
    term(whole ? TERMS.window : `${TERMS.window} ${TERMS.trained}`),
  );
}

function windowBar(record) {
  const w = record.window;
  const segs = [
    ...sums(record),
    ["reserved for the reply", "seg-reserve", record.reserve],
    ["free", "seg-free", Math.max(0, record.free)],
  ];
  const bar = el("div", { class: "window-bar", role: "img", "aria-label": `window of ${w} tokens: ${record.used} used, ${record.reserve} kept for the reply, ${Math.max(0, record.free)} free` });
  const legend = el("ul", { class: "legend" });
  // the bar a piece a segment, so your messages and the replies show in their own colours;
  // the legend sums them by group
  for (const p of record.pieces) {
    if (p.count > 0) bar.append(el("span", { class: `seg piece-seg kind-${p.kind}`, style: `flex-grow:${p.count}`, title: `${p.label}: ${count(p.count, "token")}` }));
  }
  for (const [name, cls, n] of segs) {
    if (n > 0 && !SEGMENTS.some(([seg]) => seg === name)) bar.append(el("span", { class: `seg ${cls}`, style: `flex-grow:${n}`, title: `${name}: ${count(n, "token")}` }));
    legend.append(el("li", { dataset: { seg: name } }, el("span", { class: `swatch ${cls}` }), `${name} `, el("b", { text: n })));
  }
  // The same scale, for the cache: the prefix reused, then what is computed now.
  const reused = record.reused_tokens;
  const computed = record.computed_tokens;
  const cache = el(
    "div",
    { class: "cache-bar", role: "img", "aria-label": `${count(reused, "token")} from the cache, ${computed} computed now` },
    reused > 0 ? el("span", { class: "seg seg-cached", style: `flex-grow:${reused}`, title: `from the cache: ${count(reused, "token")}` }) : null,
    computed > 0 ? el("span", { class: "seg seg-computed", style: `flex-grow:${computed}`, title: `computed now: ${count(computed, "token")}` }) : null,
    el("span", { class: "seg seg-rest", style: `flex-grow:${Math.max(0, w - record.used)}` }),
  );
  const cacheLegend = el(
    "ul",
    { class: "legend cache-legend" },
    el("li", { dataset: { seg: "from the cache" } }, el("span", { class: "swatch seg-cached" }), "from the cache ", el("b", { text: reused })),
    el("li", { dataset: { seg: "computed now" } }, el("span", { class: "swatch seg-computed" }), "computed now ", el("b", { text: computed })),
  );
  return el("div", { class: "window" }, windowTitle(w), bar, legend, cache, cacheLegend);
}

// -- counts and notes ----------------------------------------------------------------------------------

function stats(record) {
  const limit = record.max_tokens ?? record.reserve;
  const rows = [
    ["used", record.used, TERMS.used],
    ["reused from the cache", record.reused_tokens, TERMS.reused],
    ["computed", record.computed_tokens, TERMS.computed],
    ["reply limit", count(limit, "token"), replyLimitNote(limit)],
  ];
  return el(
    "dl",
    { class: "stats" },
    rows.map(([k, v, explain]) =>
      el("div", { dataset: { stat: k } }, el("dt", { text: k }), el("dd", { text: v }), explain ? el("dd", { class: "term", text: explain }) : null),
    ),
  );
}

/** "The reply: N tokens, ended: why · end_turn" (or ", writing…" while it streams): the title of
 * a reply or of a plain-text continuation. */
export function replyTitle(what, n, stopReason, writing) {
  return el(
    "div",
    { class: "reply-title" },
    `${what}: `,
    el("b", { text: `${n} token${n === 1 ? "" : "s"}` }),
    writing ? ", writing…" : `, ended: ${stopReasonText(stopReason)} · `,
    writing ? null : el("code", { class: `stop stop-${stopReason}`, text: stopReason }),
  );
}

/** The tokens between a message's template tokens that are special: a special token written as
 * text inside the message, which the model reads as the real thing. */
function writtenSpecials(record, special) {
  const found = [];
  for (const p of record.pieces) {
    if (p.kind === "header" || p.kind === "prompt") continue;
    // the template's own: <|im_start|> at the start, <|im_end|> two from the end
    for (let i = p.start + 1; i < p.end - 2; i++) if (special[i]) found.push([p, record.prompt_tokens[i]]);
  }
  return found;
}

const SPECIAL_SETTING = "Special tokens typed in messages are tokens"; // the checkbox's label (index.html)

function notes(record, special) {
  const out = [];
  const specials = writtenSpecials(record, special);
  if (specials.length) {
    const names = [...new Set(specials.map(([, t]) => t))].join(", ");
    const where = [...new Set(specials.map(([p]) => p.label))].join(", ");
    out.push(el(
      "p",
      { class: "note special-note" },
      el("b", { text: `${names} written as text (${where}): ` }),
      "the tokenizer turns it into the real special token, so the model reads a message boundary there, " +
        "exactly as if the template had put it. Text that only looks like one (<|IM_END|>) stays plain characters. " +
        `To compare, untick “${SPECIAL_SETTING}”: the same text is then read as its characters.`,
    ));
  }
  if (record.special_in_text === false) {
    out.push(el("p", { class: "note special-note special-as-text" },
      el("b", { text: "Special tokens typed in messages are read as plain characters this turn: " }),
      `“${SPECIAL_SETTING}” is off, so <|im_end|> written in a message is a few ordinary tokens, not a message ` +
        "boundary. The template's own tokens around each message are still special tokens."));
  }
  if (record.reused_tokens === 0) {
    out.push(el("p", { class: "note reuse-note" },
      record.reply_text == null
        ? "Nothing would come from the cache: the cache holds only what the model read and wrote on an earlier turn, and nothing has been computed in this conversation yet (replies compute it)."
        : "Nothing came from the cache: this was the first text the model computed, or it did not start like the one before."));
  } else if (record.dropped_messages.length) {
    const sys = record.pieces.find((p) => p.kind === "system" || p.kind === "default_system");
    if (sys && record.reused_tokens <= sys.end + 3) {
      out.push(el("p", { class: "note reuse-note" },
        "Reuse stops early: dropping the oldest turn changed the text right after the system prompt, and the cache can only reuse a prefix."));
    }
  }
  return out;
}

function droppedList(record) {
  if (!record.dropped_messages.length) return null;
  const labels = droppedLabels(record.dropped_messages);
  return el(
    "div",
    { class: "dropped" },
    el("div", { class: "dropped-title", text: `Dropped to fit the window (oldest first): ${count(record.dropped_messages.length, "message")}` }),
    record.dropped_messages.map((d, k) =>
      el(
        "div",
        { class: "dropped-turn", dataset: { index: d.message_index } },
        el("span", { class: "tag-dropped", text: `${labels[k]} · ${count(d.count, "token")}` }),
        el("s", { class: "dropped-text", dir: "auto", text: d.content }),
      ),
    ),
  );
}

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

/** The piece's text found by searching for its special tokens (when the tokens cannot be laid
 * out on the text: not for a record chatlens made). */
function pieceTextBySearch(span, record, special, p) {
  let pos = 0;
  for (let i = p.start; i < p.end; i++) {
    if (!special[i]) continue;
    const tok = record.prompt_tokens[i];
    const at = p.text.indexOf(tok, pos);
    if (at < 0) continue;
    appendPlain(span, p.text.slice(pos, at));
    span.append(el("span", { class: "special", text: tok }));
    pos = at + tok.length;
  }
  appendPlain(span, p.text.slice(pos));
}

function promptText(record, special, lay) {
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
      pieceTextBySearch(span, record, special, p);
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

/** A chip's visible text: whole characters as they are, parts of a character as hex bytes. */
function chipText(parts, token) {
  const t = el("span", { class: "t" });
  if (!parts) {
    if (token.includes("\ufffd")) t.append(el("span", { class: "hex unknown", text: "part" }));
    else t.append(visibleToken(token));
    return t;
  }
  for (const part of parts) {
    if (part.text !== undefined) t.append(visibleToken(part.text));
    else t.append(el("span", { class: "hex", text: hex(part.bytes) }));
  }
  return t;
}

function chipTitle(i, id, parts) {
  let s = `token ${i} · id ${id}`;
  for (const part of parts || []) if (part.bytes) s += ` · bytes ${hex(part.bytes)} of “${part.char}”`;
  if (!parts) s += " · which bytes of the character it holds cannot be told from this record";
  return s;
}

/** Token chips for `tokens`, with the groups of chips that spell a split character under it. */
function chips(box, { tokens, ids, lay, classOf, cut = -1, cutNode = null }) {
  const groupAt = new Map((lay?.groups || []).map((g) => [g[0], g]));
  let target = box;
  let groupEnd = -1;
  for (let i = 0; i < tokens.length; i++) {
    const g = groupAt.get(i);
    if (cutNode && target === box && (i === cut || (g && cut > g[0] && cut <= g[1]))) box.append(cutNode);
    if (g) {
      const label = g[2].trim() || g[2];
      const inner = el("span", { class: "group-tokens" });
      box.append(el(
        "span",
        { class: "char-group", title: `${g[1] - g[0] + 1} tokens that together spell “${label}”` },
        el("span", { class: "char", dir: "auto", text: label }),
        inner,
      ));
      target = inner;
      groupEnd = g[1];
    }
    const parts = lay ? lay.parts[i] : null;
    target.append(el(
      "span",
      { class: `tok ${classOf(i)}`, title: chipTitle(i, ids[i], parts), dataset: { id: ids[i] } },
      chipText(parts, tokens[i]),
      el("span", { class: "id", text: ids[i] }),
    ));
    if (i === groupEnd) target = box;
  }
}

function tokenView(record, special, lay) {
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

function pieceTable(record, special) {
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

// -- the reply ----------------------------------------------------------------------------------------------

const ms = (v) => (v >= 1000 ? `${(v / 1000).toFixed(1)} s` : `${Math.round(v)} ms`);

function speed(record) {
  const t = record.timings;
  if (!t) return null;
  const parts = [];
  if (t.prefill_ms !== undefined) {
    parts.push(`read ${count(record.computed_tokens, "new token")} in ${ms(t.prefill_ms)}` +
      (t.prefill_tok_s ? ` (${t.prefill_tok_s} tokens/s)` : ""));
  }
  if (t.decode_ms !== undefined) {
    parts.push(`wrote in ${ms(t.decode_ms)}` + (t.decode_tok_s ? ` (${t.decode_tok_s} tokens/s)` : ""));
  }
  return el("div", { class: "reply-speed", dataset: { stat: "speed" } }, parts.join(" · "));
}

function replyTokens(record, why) {
  const tokens = record.reply_tokens;
  const ids = record.reply_ids;
  if (!tokens || !ids || !tokens.length) return null;
  const ended = record.stop_reason === "end_turn";
  const text = record.reply_text + (ended ? tokens[tokens.length - 1] : "");
  const lay = layout(tokens, text, record.reply_vocab || null);
  const box = el("div", { class: "tokens reply-tokens", "aria-label": "The reply's tokens" });
  chips(box, { tokens, ids, lay, classOf: (i) => `kind-reply${ended && i === tokens.length - 1 ? " special" : ""}` });
  if (!why || !record.top_k?.length || record.top_k.length !== ids.length) return box;
  // "why this token": each chip shows its step's candidates
  box.querySelectorAll(".tok").forEach((chip, i) => (chip.dataset.step = i));
  const special = new Set(record.special_ids || []);
  if (ended) special.add(ids[ids.length - 1]);
  const candidates = whyBox("Point at a token of the reply (or tap it, or use the arrow keys) to see the candidates the model weighed at that step.");
  bindWhy(box, candidates, record, { tokens, ids, special, gap: why.gap });
  markNearTies(box, record.top_k, why.gap);
  return [box, candidates];
}

/** The prediction while the user types: the model's most likely first tokens for this draft.
 * prediction: {state: "pending" | "done" | "error", result?: the predict answer, message?}. */
function predictionBox(record, prediction, why) {
  if (!prediction) return null;
  const { state, result, message } = prediction;
  const body =
    state === "done"
      ? candidatesTable(result.top_k, result.top_k_tokens, { chosen: result.top_k[0][0], special: new Set(record.special_ids), gap: why?.gap })
      : el("p", { class: state === "error" ? "error" : "note", text: state === "error" ? `No prediction: ${message}` : "Predicting the first token…" });
  return el(
    "div",
    { class: `prediction is-${state}`, id: "prediction", "aria-live": "polite" },
    el("div", { class: "prediction-title", text: "What the model would most likely write first" }),
    term("A prediction: the model's first step on this draft, computed now on your device. Nothing is sent; " +
      "if you send this message, greedy decoding starts the reply with the first of these."),
    body,
  );
}

function replyBox(record, why) {
  if (record.reply_text === null || record.reply_text === undefined) return null;
  const n = record.reply_ids ? record.reply_ids.length : 0;
  const writing = !record.stop_reason;
  return el(
    "div",
    { class: `reply${writing ? " is-streaming" : ""}` },
    replyTitle("The reply", n, record.stop_reason, writing),
    el("div", { class: "reply-text", dir: "auto", text: record.reply_text }),
    replyTokens(record, why),
    el(
      "div",
      { class: "reply-facts" },
      speed(record),
      record.backend ? el("div", { class: "reply-backend", dataset: { stat: "backend" } }, "computed by ", el("b", { text: record.backend })) : null,
    ),
    term(`${TERMS.greedy} A reply ends with end_turn (its end-of-turn token), max_tokens (the reply limit) or stopped (you pressed Stop).`),
  );
}

// -- the panel ------------------------------------------------------------------------------------------------

// The prompt's layout, once per prompt: a streamed reply draws the same prompt at every token.
const layouts = new WeakMap();
function promptLayout(record) {
  const key = record.prompt_tokens;
  if (!layouts.has(key) || layouts.get(key).text !== record.prompt_text) {
    layouts.set(key, { text: record.prompt_text, lay: layout(record.prompt_tokens, record.prompt_text, record.prompt_vocab || null) });
  }
  return layouts.get(key).lay;
}

/** The panel's headline figures, where the page docks them beside the composer (a phone):
 * what the model reads of the window, what was dropped and what came from the cache; `record`
 * null clears them (a message, plain text). */
export function drawSummary(record, note = "") {
  const box = document.getElementById("reads-summary");
  if (!box) return;
  if (!record) return fill(box, note);
  const n = record.dropped_messages.length;
  const figure = (stat, words, value, tail = "") => el("span", { dataset: { stat } }, `${words} `, el("b", { text: value }), tail);
  fill(box, figure("summary-used", "used", record.used, ` of ${record.window}`), " · ",
    figure("summary-dropped", "dropped", n), " · ", figure("summary-reused", "reused", record.reused_tokens));
}

let focusAfterDraw = null; // the tab to focus once the panel is drawn again (after a tab is chosen)
const drawnIn = new WeakMap(); // root -> what it last drew: the streaming redraw's test

/** Draw `record` into `root`. view: "text" | "tokens"; onView(view) when a tab is chosen (the
 * caller keeps the choice and draws again). While a reply streams, the record's reply_text is
 * the reply so far and stop_reason is null. why ({gap}: the near-tie gap) makes a reply with
 * top_k show each token's candidates; prediction (see predictionBox) draws the first token's. */
export function renderRecord(root, record, options = {}) {
  const { caption = "", view = "text", onView, why = null, prediction = null } = options;
  // A streamed token changes the reply and nothing else: the same prompt (the same ids, by
  // identity), view and caption redraw only the reply's box, so a token costs the reply's
  // chips, not the prompt's (900 chips and more on the Tokens tab).
  const last = drawnIn.get(root);
  const key = { prompt: record.prompt_tokens, caption, view, gap: why?.gap, prediction };
  drawnIn.set(root, key);
  const box = last && record.stop_reason == null && root.querySelector(".reply.is-streaming");
  // (globalThis.chatlensFullRedraw: scripts/bench_browser.py's "before" row, the whole panel each token)
  if (box && !globalThis.chatlensFullRedraw && Object.keys(key).every((k) => key[k] === last[k])) {
    box.replaceWith(replyBox(record, why));
    return;
  }
  // Drawing again keeps the focus (a tab, the text box) and the scroll of the text box.
  const active = document.activeElement;
  const focusId = focusAfterDraw ? `reads-tab-${focusAfterDraw}` : root.contains(active) && active.id ? active.id : null;
  focusAfterDraw = null;
  const scroller = root.querySelector("#prompt-text, #token-view");
  const scrolled = scroller ? [scroller.id, scroller.scrollTop] : null;

  const special = specialPositions(record);
  const lay = promptLayout(record);
  const select = (v, { focus } = {}) => {
    if (focus) focusAfterDraw = v;
    if (onView) onView(v);
    else renderRecord(root, record, { ...options, view: v });
    if (focusAfterDraw === v) {
      // the caller did not draw again (nothing changed): focus now
      focusAfterDraw = null;
      focusTab(root, v);
    }
  };
  const tabs = tabList({
    label: "How to show the prompt",
    tabs: [
      { value: "text", label: "Text" },
      { value: "tokens", label: `Tokens (${record.used})` },
    ],
    selected: view,
    panelId: PANEL_ID,
    idPrefix: "reads-tab",
    select,
  });
  const groups = lay?.groups.length ? term(TERMS.bytes, "bytes-note") : null;
  const panel = el(
    "div",
    { id: PANEL_ID, role: "tabpanel", "aria-labelledby": `reads-tab-${view}` },
    view === "tokens" ? groups : null,
    view === "tokens" ? tokenView(record, special, lay) : promptText(record, special, lay),
  );
  const parts = [
    el("p", { class: "caption", id: "reads-caption", text: caption }),
    windowBar(record),
    stats(record),
    ...notes(record, special),
    droppedList(record),
    tabs,
    panel,
    predictionBox(record, prediction, why),
    pieceTable(record, special),
    replyBox(record, why),
  ];
  fill(root, ...parts.filter(Boolean));
  if (root.id === "reads") drawSummary(record);
  if (scrolled) {
    const again = root.querySelector(`#${scrolled[0]}`);
    if (again) again.scrollTop = scrolled[1];
  }
  if (focusId) root.querySelector(`#${focusId}`)?.focus({ preventScroll: true });
}

// -- messages and the overflow ------------------------------------------------------------------------------

/** The overflow a WindowError's data describes (chatlens.errors.WindowError: the system prompt
 * and the new message do not fit), with what the window leaves; null for any other error. */
export function windowOverflow(error) {
  const d = error?.name === "WindowError" ? error.data : null;
  return d ? { ...d, budget: d.window - d.reserve } : null;
}

const PIECE_WORDS = {
  system: "the system prompt",
  "system (template default)": "the template's default system prompt",
  "new message": "your new message",
  "generation header": "the generation header",
};
const pieceWords = (label) => PIECE_WORDS[label] || label;
const pieceClass = (label) =>
  label.startsWith("system") ? "seg-system" : label === "new message" || label === "generation header" ? "seg-new" : "seg-turns";

/** The window drawn overflowing: what the system prompt and the new message need against what
 * the window leaves once the reply's room is kept free. */
export function renderOverflow(root, info, message = "") {
  const { needed, pieces, window: w, reserve, budget, at_least: bound } = info;
  const over = needed - budget;
  const least = bound ? "at least " : ""; // counted from a bound, before tokenizing (a pasted book)
  const scale = needed + reserve;
  if (root.id === "reads") drawSummary(null, `needs ${needed + reserve} of ${count(w, "token")}: too long for the window`);
  const bar = el("div", {
    class: "window-bar overflow-bar",
    role: "img",
    "aria-label": `needs ${needed + reserve} tokens with the reply's room, the window holds ${w}`,
  });
  for (const p of pieces) bar.append(el("span", { class: `seg ${pieceClass(p.label)}`, style: `flex-grow:${p.count}`, title: `${p.label}: ${count(p.count, "token")}` }));
  bar.append(el("span", { class: "seg seg-reserve", style: `flex-grow:${reserve}`, title: `reserved for the reply: ${count(reserve, "token")}` }));
  bar.append(el("span", { class: "window-edge", style: `left:${(100 * w) / scale}%`, title: `the window ends here: ${w} tokens` }));
  bar.append(el("span", { class: "window-over", style: `left:${(100 * w) / scale}%` }));
  const words = pieces.map((p) => `${pieceWords(p.label)} (${p.count})`);
  const needs = words.length > 1 ? `${words.slice(0, -1).join(", ")} and ${words[words.length - 1]}` : words.join("");
  fill(root, 
    el("p", { class: "caption", id: "reads-caption", text: "This message does not fit the window" }),
    el(
      "div",
      { class: "window overflow" },
      windowTitle(w),
      bar,
      el(
        "ul",
        { class: "legend" },
        pieces.map((p) => el("li", { dataset: { seg: p.label } }, el("span", { class: `swatch ${pieceClass(p.label)}` }), `${p.label} `, el("b", { text: p.count }))),
        el("li", { dataset: { seg: "reserved for the reply" } }, el("span", { class: "swatch seg-reserve" }), "reserved for the reply ", el("b", { text: reserve })),
        el("li", { dataset: { seg: "over" } }, el("span", { class: "swatch seg-over" }), "over the window by ", el("b", { text: over })),
      ),
    ),
    el(
      "p",
      { class: "overflow-text" },
      `Even with every older turn dropped, ${needs} need ${least}${needed} tokens, but a window of ${w} keeps ${reserve} free for the reply and leaves ${budget}: `,
      el("b", { text: `${least}${over} too many` }),
      ". Shorten the message, choose a larger window, or a shorter system prompt.",
    ),
    message ? el("p", { class: "error detail", text: message }) : null,
  );
}

/** A message instead of a record; `error` (the Error it reports) that is a window overflow is
 * drawn as one. */
export function renderMessage(root, text, cls = "note", error = null) {
  const info = windowOverflow(error);
  if (info) return renderOverflow(root, info, text);
  fill(root, el("p", { class: cls, text }));
  if (root.id === "reads") drawSummary(null);
}
