// The window: the bar of what the model reads (a piece a segment) and of what came from the
// cache, the counts with what each word means, the notes on special tokens and reuse, the
// dropped messages, and the headline figures docked beside the composer on a phone.

import { replyLimitNote, TERMS, trainedNote } from "../lesson/terms.mjs";
import { count, el, fill, term } from "./dom.mjs";

const SEGMENTS = [
  // window bar: [name, css class, which piece kinds count]
  ["system", "seg-system", ["system", "default_system"]],
  ["turns", "seg-turns", ["user", "assistant"]],
  ["new message + header", "seg-new", ["new", "header"]],
];

/** The bar's class for a piece of `kind` (chatlens.window's kinds); a kind no segment counts (the
 * whole prompt, where the template's pieces could not be told apart) is drawn as the turns. */
export const segmentClass = (kind) => SEGMENTS.find(([, , kinds]) => kinds.includes(kind))?.[1] ?? "seg-turns";

export function sums(record) {
  const by = {};
  for (const p of record.pieces) by[p.kind] = (by[p.kind] || 0) + p.count;
  return SEGMENTS.map(([name, cls, kinds]) => [name, cls, kinds.reduce((s, k) => s + (by[k] || 0), 0)]);
}

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

/** "Window: N tokens", and whether it is the model's whole context (`context`, the record's;
 * null where it is not known). */
export function windowTitle(w, context = null) {
  const whole = context != null && w >= context;
  return el(
    "div",
    { class: "window-title" },
    "Window: ",
    el("b", { text: w }),
    " tokens",
    whole ? " (the model's whole context)" : null,
    term(whole || context == null ? TERMS.window : `${TERMS.window} ${trainedNote(context)}`),
  );
}

export function windowBar(record) {
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
  return el("div", { class: "window" }, windowTitle(w, record.context), bar, legend, cache, cacheLegend);
}

// -- counts and notes ----------------------------------------------------------------------------------

export function stats(record) {
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

/** The special tokens inside a message's own text (its content span): a special token written
 * as text in the message, which the model reads as the real thing. */
function writtenSpecials(record, special) {
  const found = [];
  for (const p of record.pieces) {
    if (p.content_start == null) continue;
    for (let i = p.content_start; i < p.content_end; i++) if (special[i]) found.push([p, record.prompt_tokens[i]]);
  }
  return found;
}

const SPECIAL_SETTING = "Special tokens typed in messages are tokens"; // the checkbox's label (index.html)

export function notes(record, special) {
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

export function droppedList(record) {
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
