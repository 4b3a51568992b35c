// The chat column: message bubbles, with the messages the shown record no longer reads marked
// as dropped, one banner when the conversation has no replies, and a live region that announces
// new messages only.
//
// drawChat is called on every preview (each keystroke, after a pause): it updates the bubbles in
// place and appends new ones instead of redrawing, so nothing changes for a screen reader while
// the learner types. New messages are announced through #chat-announce, a visually hidden live
// region that gets nothing else.

import { streamed } from "./bytes.mjs";
import { STOP_SHORT } from "../lesson/terms.mjs";
import { announce, count, el, fill } from "./dom.mjs";
import { byHandBadge } from "./reply.mjs";
import { bindWhy, markNearTies, whyBox } from "./why.mjs";

/** The chat's hint in Live mode, before the first message (the one-column layout has no
 * "right side", so it names the panel). */
export const EMPTY_LIVE = "Type a message below. The panel “What the model reads” shows, as you type, the exact text the model would read.";

/** The indexes (into the messages sent) of the messages a record dropped. */
export const droppedOf = (record) => new Set(record.dropped_messages.map((d) => d.message_index));

/** The tokens a user message takes in its own turn's prompt, the template's tokens included
 * (the same count as its row in the panel), or null before its record exists. */
function messageCount(record) {
  const piece = record?.pieces?.find((p) => p.kind === "new");
  return piece ? piece.count : null;
}

function metaOf(it) {
  // a turn that came back from a reload (page/saved.mjs reloadedOf): its saved lines until its
  // record is read again, and after when the reload cut its reply off
  const saved = it.reloaded && (!it.record || it.reloaded.cut) ? it.reloaded : null;
  if (it.role === "user") {
    const n = saved ? saved.count ?? null : messageCount(it.record);
    const parts = [];
    if (n !== null) parts.push(`${count(n, "token")} with the template's wrapping`);
    if (it.noReply) parts.push(saved?.cut ? "no reply: the page was reloaded while the model read it" : "no reply");
    return parts.join(" · ");
  }
  if (it.streaming) return readingText(it.progress) ?? "writing…";
  const [wrote, stop] = saved ? [saved.wrote, saved.stop] : [it.record?.reply_ids?.length, it.record?.stop_reason];
  if (!stop || wrote == null) return "";
  const why = saved?.cut ? "stopped: the page was reloaded while it was written" : STOP_SHORT[stop] || stop;
  return `wrote ${count(wrote, "token")} · ${why}`;
}

/** While the prompt is read: how much of it, and how fast (the worker's progress), else null.
 * NumPy reads it a chunk a step, so `read` moves; a GPU reads a chunk of up to 128 tokens in one
 * step, which a slow GPU runs in parts: the part done of that step's parts, and the tokens it
 * reads, say how far it has got (in the line itself: a phone shows no title). */
export function readingText(p) {
  if (!p || p.read >= p.of) return null;
  const rate = p.ms > 0 && p.read > 0 ? ` · ${(1000 * p.read / p.ms).toFixed(p.read / p.ms < 0.01 ? 2 : 0)} tokens/s` : "";
  return `reading the prompt: ${p.read} of ${count(p.of, "token")}${rate}${stepParts(p)}`;
}

/** " · part 90 of 213 of the GPU's step for the next 128 tokens, 102 s" while a step runs in parts, else "". */
export function stepParts(p) {
  if (!(p?.parts > 0)) return "";
  const of = p.partsOf > 0 ? ` of ${p.partsOf}` : "";
  const covers = p.covers > 0 ? ` for the next ${count(p.covers, "token")}` : "";
  return ` · part ${p.parts}${of} of the GPU's step${covers}, ${Math.round(p.ms / 1000)} s`;
}

function makeBubble(it, turn) {
  const b = el(
    "div",
    { class: `msg ${it.role}` },
    el("div", { class: "who", text: `${it.role === "user" ? "You" : "SmolLM2"} · turn ${turn}` }),
    el("div", { class: "content", dir: "auto", text: it.text }),
    el("div", { class: "meta" }),
  );
  return b;
}

/** Set the meta line; a finished reply's line carries its stop reason as data-stop. */
function setMeta(node, text, stop) {
  const meta = node.querySelector(".meta");
  if (stop) meta.dataset.stop = stop;
  else delete meta.dataset.stop;
  if (node._meta === text) return;
  node._meta = text;
  meta.textContent = text;
  meta.hidden = !text;
  meta.removeAttribute("title");
}

/** A reply kept from a branch (kept, or kept before a reload: its saved lines) is marked on its bubble. */
function setByHand(node, branched) {
  const has = node.querySelector(":scope > .by-hand");
  if (has && (!branched || Number(has.dataset.step) !== branched.step)) has.remove();
  if (branched && !node.querySelector(":scope > .by-hand")) node.prepend(byHandBadge(branched));
}

/** A reply that has ended, its record read: a link to its turn, or the turn as a command
 * (modes/shared.mjs hears the buttons, and finds the turn by the bubble's record). */
function setShare(node, record, turn) {
  node._record = record;
  const has = node.querySelector(":scope > .share");
  const want = Boolean(record?.reply_ids?.length);
  if (has && !want) has.remove();
  if (!want || has) return;
  node.append(el("div", { class: "share" },
    el("button", { type: "button", class: "link share-link", "aria-label": `Copy a link to turn ${turn}`, text: "Copy a link" }),
    el("button", { type: "button", class: "link share-command", "aria-label": `Copy as a command: turn ${turn}`, text: "Copy as a command" })));
}

/** With the reply's candidates (record.top_k, "why this token"): the bubble's text as one span a
 * token, each showing its step's candidates when pointed at, and the end-of-turn token after it.
 * The text stays exactly the reply (the spans spell it); without top_k, plain text again. */
function setReplyTokens(node, record, why) {
  const content = node.querySelector(".content");
  const want = why && record?.top_k?.length ? record : null;
  if ((node._whyRecord || null) === want) return;
  node._whyRecord = want;
  node.querySelector(".bubble-why")?.remove();
  if (!want) {
    content.textContent = node._text;
    return;
  }
  const tokens = record.reply_tokens;
  const ended = record.stop_reason === "end_turn";
  const words = ended ? tokens.length - 1 : tokens.length;
  const pieces = replyPieces(record, words);
  if (!pieces) return; // the record cannot say which text each token adds: plain text stays
  fill(content, ...pieces.map((piece, i) => el("span", { class: "rt", dataset: { step: i }, text: piece })));
  const end = ended
    ? el("span", { class: "rt special", dataset: { step: words }, title: "the end-of-turn token the model wrote", text: tokens[words] })
    : null;
  const box = whyBox("Point at a word of the reply (or tap it) to see which tokens the model weighed there.");
  const extra = el("div", { class: "bubble-why" }, end ? el("div", { class: "end-token" }, "ended with ", end) : null, box);
  content.after(extra);
  const special = new Set(record.special_ids || []);
  if (ended) special.add(record.reply_ids[words]);
  for (const target of [content, extra]) {
    bindWhy(target, box, record, { tokens, ids: record.reply_ids, special, gap: why.gap });
    markNearTies(target, record.top_k, why.gap);
  }
  extra.tabIndex = -1; // the end token is reached through the content's arrow keys
}

/** The text each of the first `words` reply tokens adds, decoded as the worker streams it (from
 * the record's reply_bytes), or null when the record has no bytes or they do not spell the
 * reply's text. */
function replyPieces(record, words) {
  const bytes = record.reply_bytes;
  if (!bytes || bytes.length < words) return null;
  const pieces = streamed(bytes.slice(0, words));
  return pieces.join("") === record.reply_text ? pieces : null;
}

function ensure(id, make) {
  return document.getElementById(id) || make();
}

function announcer(box) {
  return ensure("chat-announce", () => {
    const a = el("div", { id: "chat-announce", class: "sr-only", "aria-live": "polite" });
    box.after(a);
    return a;
  });
}

function bannerBox(box) {
  return ensure("chat-banner", () => {
    const b = el("p", { id: "chat-banner", class: "notice banner", hidden: true });
    box.before(b);
    return b;
  });
}


/** The banner's text for a conversation without replies, `why` being the reason runs failed. */
export function noRepliesText(why) {
  const reason = why ? ` (${why.replace(/^No reply: /, "")})` : "";
  return `No replies here yet${reason}: each message waits without an answer, and a second one would be read ` +
    "as two of your messages in a row, which no chat app sends. Recorded mode has real replies.";
}

/** The banner state.replies asks for, or null. When something else here could compute replies
 * (r.offer: a backend), the banner is why, in full, and offers it (a button: onOffer(backend)). */
export function liveBanner(state, onOffer = null) {
  const r = state.replies;
  if (!r || r.state !== "none") return null;
  if (r.offer && onOffer) return { text: r.why, action: { label: OFFER_LABEL[r.offer] || r.offer, run: () => onOffer(r.offer) } };
  return { text: noRepliesText(r.why) };
}

const OFFER_LABEL = { webgpu: "Compute replies on this GPU (WebGPU)" };

/**
 * Draw `items` ([{role, text, record, dropped, current, streaming, note, noteClass}]) into the
 * chat box. A note of class "no-reply" (a turn without a reply) is not drawn under its message:
 * the message is marked "no reply" and one banner above the chat says why. `banner` ({text} or
 * null) sets the banner directly. `why` ({gap}: the near-tie gap) makes the words of replies
 * whose record has top_k show their candidates.
 */
export function drawChat(box, items, empty, { banner, why = null } = {}) {
  // The specs to draw: user and assistant messages, other notes, or the empty hint.
  const specs = [];
  const whyNone = [];
  let turn = 0;
  for (const it of items) {
    if (it.note && it.noteClass === "no-reply") {
      const last = specs[specs.length - 1];
      if (last && last.role === "user") last.noReply = true;
      if (!last?.reloaded?.cut) whyNone.push(it.note); // a reload's cut is said on its message, not in the banner
      continue;
    }
    if (it.note) {
      specs.push({ kind: "note", text: it.note, cls: it.noteClass || "" });
      continue;
    }
    if (it.role === "user") turn++;
    specs.push({ ...it, kind: it.role, turn: Math.max(turn, 1) });
  }
  if (!specs.length && empty) specs.push({ kind: "empty", text: empty });

  // Keep the bubbles that still match, in order; redraw from the first that does not.
  const old = [...box.children];
  let i = 0;
  const isMessage = (n) => n._kind === "user" || n._kind === "assistant";
  const oldMessages = old.filter(isMessage).length;
  const fresh = [];
  for (; i < specs.length && i < old.length; i++) {
    const s = specs[i];
    const n = old[i];
    if (n._kind !== s.kind || n._turn !== s.turn) break;
    if (n._text !== s.text) {
      if (!n._streaming) break;
      // the reply as it streams: what a token adds is appended (the text before it stays)
      const content = n.querySelector(".content");
      if (s.text.length > n._text.length && s.text.startsWith(n._text)) content.append(s.text.slice(n._text.length));
      else content.textContent = s.text;
      n._text = s.text;
    }
    if (n._streaming && !s.streaming && isMessage(n)) fresh.push(s); // the reply is complete
  }
  const replaced = i < old.length; // a message changed or went away: a different view, not news
  for (const n of old.slice(i)) n.remove();
  for (let k = i; k < specs.length; k++) {
    const s = specs[k];
    let n;
    if (s.kind === "empty") n = el("p", { class: "empty", text: s.text });
    else if (s.kind === "note") n = el("div", { class: `msg note ${s.cls}`, text: s.text });
    else {
      n = makeBubble(s, s.turn);
      if (!s.streaming) fresh.push(s);
    }
    Object.assign(n, { _kind: s.kind, _text: s.text, _turn: s.turn });
    box.append(n);
  }
  // What can change in place: marks and the meta line.
  const nodes = [...box.children];
  specs.forEach((s, k) => {
    const n = nodes[k];
    n._streaming = Boolean(s.streaming);
    if (!isMessage(n)) return;
    n.classList.toggle("is-streaming", Boolean(s.streaming));
    n.classList.toggle("is-dropped", Boolean(s.dropped));
    n.classList.toggle("current", Boolean(s.current));
    n.classList.toggle("no-reply", Boolean(s.noReply));
    setMeta(n, metaOf(s), s.kind === "assistant" && !s.streaming ? s.record?.stop_reason ?? s.reloaded?.stop : null);
    if (s.kind === "assistant" && !s.streaming) setReplyTokens(n, s.record, why);
    if (s.kind === "assistant") setByHand(n, s.streaming ? null : s.record?.branched ?? s.reloaded?.branched);
    if (s.kind === "assistant") setShare(n, s.streaming ? null : s.record, s.turn);
  });

  // One banner for the whole conversation.
  const b = bannerBox(box);
  const want = banner !== undefined ? banner : whyNone.length ? { text: noRepliesText(whyNone[whyNone.length - 1]) } : null;
  const text = want ? (typeof want === "string" ? want : want.text) : "";
  // Its ways on, as buttons: want.actions [{id, label, run}] (want.action: one, "banner-action")
  const actions = want?.actions ?? (want?.action ? [{ id: "banner-action", ...want.action }] : []);
  const labels = actions.map((a) => a.label).join("\n");
  if (b._text !== text || b._labels !== labels) {
    b._text = text;
    b._labels = labels;
    fill(b, text, actions.length ? el("span", { class: "banner-actions" },
      ...actions.map((a) => el("button", { type: "button", id: a.id, text: a.label }))) : null);
  }
  for (const a of actions) b.querySelector(`#${a.id}`).onclick = a.run;
  const show = Boolean(text);
  const appeared = show && b.hidden;
  if (b.hidden === show) b.hidden = !show;

  // Announce what is new: a message appended, a reply once it has ended (never token by token);
  // not a view drawn again, nor one shown whole (from no message to several: a conversation a
  // reload brought back, a recording's turn), nor a message a reload brought back.
  const shownWhole = oldMessages === 0 && fresh.length > 1;
  const news = (replaced && oldMessages > 0) || shownWhole ? []
    : fresh.filter((s) => !s.reloaded).map((s) => `${s.kind === "user" ? "You" : "SmolLM2"}: ${s.text}`);
  if (appeared) news.push(text);
  for (const line of news) announce(announcer(box), line);

  const cur = box.querySelector(".msg.current");
  if (fresh.length || cur) {
    if (cur && !fresh.length) cur.scrollIntoView?.({ block: "nearest" });
    else box.scrollTop = box.scrollHeight;
  }
}
