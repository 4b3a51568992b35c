// What a reload brings back of the page's work (its settings are prefs.mjs's): the live
// conversation, each reply with its record to read again (its steps inspected and branched as
// before); a branch that was being written, said to be gone; the last comparison, as far as it
// got. And when they are written (createSaver): as they change, a reply being written by its
// growth at most once a second and as the page hides, so a reload loses nothing that was shown.

import { read, write } from "./prefs.mjs";
import { record } from "./state/shapes.mjs";

export const LIVE_KEY = "chatlens.live"; // [{user, reply, settings, line, kept}]: the live conversation
export const GROWING_KEY = "chatlens.live.growing"; // {at, entry}: the reply being written, as far as it got (saveGrowing)
export const CANDIDATES_KEY = "chatlens.live.candidates"; // {reply's print: {top_k, top_k_tokens, top_k_bytes}} (keptOf)

/**
 * What a turn a reload brought back holds of its last visit (loadLive), in the turn's `reloaded`
 * (page/state/conversation.mjs newTurn) for as long as its reply is that visit's (a branch kept
 * since makes it null: the reply is this visit's then):
 *   count, wrote, stop   the bubbles' lines as saved: the message's tokens, the reply's tokens and
 *                        what ended it (null where the save had none)
 *   cut                  the page went while the reply (or the read) was under way: what it had
 *                        written comes back stopped by the reload, marked so
 *   branched             {step, id}: the reply was a branch kept (chosen by hand), else null
 *   kept                 the reply's record as saved (keptOf's, with its text and its candidates
 *                        or candidates: "lost"), to be read again (recordAgain); null: it cannot be
 *   why                  why its record could not be read again (a sentence), null until tried
 */
export const reloadedOf = ({ count = null, wrote = null, stop = null, cut = false, branched = null, kept = null }) =>
  record({ count, wrote, stop, cut, branched, kept, why: null });

/** The live conversation saved last time: newTurn's fields, {user, reply, settings, note,
 * noteClass, reloaded} (reply undefined when it had none). A turn whose reply was being written
 * when the page went ("cut") comes back as a reply the reload stopped: what it had written,
 * marked stopped; one cut off before its first token comes back with no reply (a note says why),
 * to be sent again. */
export function loadLive(storage = globalThis.localStorage) {
  const v = read(storage, LIVE_KEY);
  if (!Array.isArray(v)) return [];
  // the reply being written as far as it got, newer than the conversation's entry for it (the
  // conversation saved since, that reply had ended: its entry is no longer cut, and wins)
  const g = read(storage, GROWING_KEY);
  if (g && Number.isInteger(g.at) && v[g.at]?.cut === true && g.entry?.user === v[g.at].user) v[g.at] = g.entry;
  const c = read(storage, CANDIDATES_KEY);
  const candidates = c && typeof c === "object" ? c : {};
  const number = (n) => (Number.isInteger(n) && n >= 0 ? n : null);
  return v.filter((t) => t && typeof t.user === "string" && (t.reply === undefined || typeof t.reply === "string"))
    .map((t) => {
      const turn = t.reply === undefined ? { user: t.user } : { user: t.user, reply: t.reply };
      if (typeof t.settings === "string") turn.settings = t.settings;
      const l = t.line && typeof t.line === "object" ? t.line : {};
      // a reply kept from a branch (TurnRecord.branched) stays marked as chosen by hand
      const b = l.branched;
      turn.reloaded = reloadedOf({
        count: number(l.count), wrote: number(l.wrote), stop: typeof l.stop === "string" ? l.stop : null, cut: t.cut === true,
        branched: b && Number.isInteger(b.step) && b.step >= 0 && Number.isInteger(b.id) ? { step: b.step, id: b.id } : null,
        kept: keptFrom(t.kept, t.reply, candidates),
      });
      if (t.reply === undefined && (t.cut === true || typeof t.noReply === "string")) {
        turn.note = t.cut === true ? RELOADED : t.noReply;
        turn.noteClass = "no-reply";
      }
      return turn;
    });
}

/** Why a restored message has no reply: the page went while the model read it. */
export const RELOADED = "No reply: the page was reloaded while the model read this message";

/** Each turn's message and reply, the settings it was sent under, and what its bubbles say (the
 * message's count, how many tokens the reply took and what ended it), so a reload shows the same
 * lines: a stopped reply still says so. Saved whole as the conversation changes (a message sent,
 * read, answered; createSaver below): a reply being written is saved as far as it has got,
 * marked cut, and its growth since by saveGrowing; this write holds it, so the growth's key goes. */
export function saveLive(turns, storage = globalThis.localStorage) {
  const candidates = new Map(); // a kept reply's key (candidatesKey) -> its candidates
  const keep = (r, was) => {
    const kept = keptOf(r, was);
    if (kept?.candidates === true) candidates.set(candidatesKey(kept), Object.fromEntries(CANDIDATES.map((k) => [k, r[k]])));
    return kept;
  };
  const entries = turns.map((t) => {
    if (underWay(t)) return growingEntry(t);
    const r = t.record;
    const count = messageCount(r);
    // as a reload brought it back (its record not read again yet, or read again: the same reply)
    const back = t.reloaded;
    const line = r && !back?.cut ? { count, wrote: r.reply_ids?.length, stop: r.stop_reason ?? undefined }
      : back ? { count: back.count, wrote: back.wrote, stop: back.stop, branched: back.branched } : {};
    if (r?.branched) line.branched = { step: r.branched.step, id: r.branched.id };
    const out = { user: t.user, reply: t.reply, settings: t.settings, line };
    const kept = t.reply === undefined ? null : keep(r ?? back?.kept ?? {}, back?.kept);
    if (kept) out.kept = kept;
    if (back?.cut) out.cut = true; // restored from a reload's cut, still as it was
    else if (t.reply === undefined && t.note) out.noReply = t.note; // why it got none
    return out;
  });
  // the conversation first: where the candidates leave it no room, they go (loadLive says so)
  if (!write(storage, LIVE_KEY, entries) && write(storage, CANDIDATES_KEY, null)) write(storage, LIVE_KEY, entries);
  write(storage, GROWING_KEY, null);
  saveCandidates(candidates, storage);
}

const messageCount = (record) => record?.pieces?.find((p) => p.kind === "new")?.count;

/** Whether a turn is being read or written now. */
const underWay = (t) => Boolean(t.streaming || (!t.record && t.reply === undefined && !t.note));

/** A turn being read or written, as a reload would find it: what it has written so far (a reply
 * so far: state/shapes.mjs replySoFar), marked cut, its record kept as far as it got. */
function growingEntry(t) {
  const r = t.record;
  const s = t.streaming;
  const count = messageCount(r);
  if (!s?.reply_ids.length) return { user: t.user, settings: t.settings, line: { count }, cut: true };
  const kept = r ? keptOf({ ...r, ...s, stop_reason: "stopped", timings: null, backend: null }) : null;
  return { user: t.user, reply: s.reply_text, settings: t.settings, line: { count, wrote: s.reply_ids.length, stop: "stopped" },
           cut: true, ...(kept ? { kept } : {}) };
}

/** The reply being written (the last turn's), as far as it has got, under its own key: a token
 * rewrites that reply's entry, never the conversation before it (loadLive puts it in its place). */
export function saveGrowing(turns, storage = globalThis.localStorage) {
  const at = turns.length - 1;
  if (at < 0 || !underWay(turns[at])) return;
  const growing = { at, entry: growingEntry(turns[at]) };
  // with no room, the candidates go first, as for the conversation
  if (!write(storage, GROWING_KEY, growing) && write(storage, CANDIDATES_KEY, null)) {
    if (storage) candidatesSaved.delete(storage); // written again by the next saveLive, if there is room then
    write(storage, GROWING_KEY, growing);
  }
}

/**
 * When what survives a reload is written (app.mjs's subscriber calls it): `whole(x)` at once when
 * it changes (`changed`: a message sent, read, answered or failed, a setting, a new conversation;
 * a comparison started, a cell ended), and `grown(x)` for what a reply being written adds (`grew`:
 * a token) at most once every `every` ms; `flush` writes a growth that waits, at once (the page
 * hidden, which a reload does first, or Stop pressed). So a token does not serialise the
 * conversation, and a reload loses nothing that was shown. now, later, cancel: the clock and
 * timers (a test's own).
 */
export function createSaver({ whole, grown, every = 1000, now = () => Date.now(), later = setTimeout, cancel = clearTimeout }) {
  let last = -Infinity; // when the growth was last written
  let timer = null; // the growth waiting, once asked and not yet due
  let waiting = null; // what it will write
  const clear = () => {
    if (timer !== null) cancel(timer);
    timer = null;
  };
  const writeGrowth = () => {
    clear();
    last = now();
    grown(waiting);
  };
  return {
    changed(x) {
      clear(); // the whole write holds the growth
      whole(x);
    },
    grew(x) {
      waiting = x;
      if (timer !== null) return;
      const wait = last + every - now();
      if (wait <= 0) writeGrowth();
      else timer = later(writeGrowth, wait);
    },
    flush() {
      if (timer !== null) writeGrowth();
    },
  };
}

// -- a reply's record across a reload ------------------------------------------------------------------
// The reply's ids, tokens and bytes come back with its text, so its steps can be inspected and
// branched after a reload as before: the prompt is not saved but read again by Python from the same
// request (the turn's system text, window, reserve and reply limit: previewOf), and recordAgain
// checks it is the prompt the reply was written after (its print: its length and a hash of its
// ids). The figures of the run (the cache's, the timings, the backend) are the run's, as saved.
// The candidates ("why this token") are saved under their own key, written only when the replies
// that have them change (not at each token); where the browser's storage has no room for them, the
// replies come back without them, and say so (candidates: "lost").

const KEPT = ["reply_ids", "reply_tokens", "reply_vocab", "reply_bytes", "stop_reason", "reused_tokens", "computed_tokens",
              "timings", "backend", "system", "preset", "window", "reserve", "max_tokens", "special_in_text", "branched"];
const CANDIDATES = ["top_k", "top_k_tokens", "top_k_bytes"];

/** The print of a list of ids: its length and its FNV-1a hash, "34:1a2b3c4d". */
export function printOf(ids) {
  let h = 0x811c9dc5;
  for (const id of ids) {
    for (let k = 0; k < 4; k++) h = Math.imul(h ^ ((id >>> (8 * k)) & 0xff), 0x01000193) >>> 0;
  }
  return `${ids.length}:${h.toString(16).padStart(8, "0")}`;
}

const sameReply = (r, kept) => Boolean(kept && r.reply_ids?.length === kept.reply_ids.length && r.reply_ids.every((id, i) => id === kept.reply_ids[i]));
const isIds = (a) => Array.isArray(a) && a.every((x) => Number.isInteger(x) && x >= 0);
const isTexts = (a, n) => Array.isArray(a) && a.length === n && a.every((x) => typeof x === "string");

/**
 * What a reload keeps of a turn's record `r` (a reply that ended, or one cut off as far as it
 * got; or a kept record a reload brought back, not read again yet): KEPT's fields and the prompt's
 * print; `candidates`: true when the reply has them (saved apart: saveCandidates), "lost" carried
 * on from `was` (the same reply, brought back by a reload without them), else absent (it was
 * written with "why this token" off). null when the record cannot be read again: no prompt, or a
 * reply without its tokens and bytes.
 */
export function keptOf(r, was = null) {
  const n = r.reply_ids?.length ?? 0;
  const prompt = isIds(r.prompt_ids) ? printOf(r.prompt_ids) : r.prompt;
  if (typeof prompt !== "string" || !isIds(r.reply_ids) || !isTexts(r.reply_tokens, n) || !isTexts(r.reply_bytes, n)) return null;
  const kept = { prompt };
  for (const k of KEPT) if (r[k] !== undefined && r[k] !== null) kept[k] = r[k];
  if (r.top_k?.length === n) kept.candidates = true;
  else if (was?.candidates === "lost" && sameReply(r, was)) kept.candidates = "lost";
  return kept;
}

/** The key a reply's candidates are saved under: its prompt's print and its own. */
const candidatesKey = (kept) => `${kept.prompt}/${printOf(kept.reply_ids)}`;

const candidatesSaved = new WeakMap(); // storage -> the keys its candidates were last written for

/** The candidates of the saved replies (key -> {top_k, top_k_tokens, top_k_bytes}), under their
 * own key, written when the replies that have them change; with no room, none (loadLive says so). */
function saveCandidates(candidates, storage) {
  const keys = [...candidates.keys()].join(" ");
  if (!storage || candidatesSaved.get(storage) === keys) return;
  candidatesSaved.set(storage, keys);
  if (!write(storage, CANDIDATES_KEY, candidates.size ? Object.fromEntries(candidates) : null)) write(storage, CANDIDATES_KEY, null);
}

/** A kept record as saved (keptOf's, read back) with the reply's text and its candidates (from
 * `candidates`, the key's: "lost" when they should be there and are not), or null when it is not one. */
function keptFrom(k, reply, candidates) {
  if (!k || typeof k !== "object" || typeof reply !== "string" || typeof k.prompt !== "string") return null;
  const n = Array.isArray(k.reply_ids) ? k.reply_ids.length : -1;
  if (!isIds(k.reply_ids) || !isTexts(k.reply_tokens, n) || !isTexts(k.reply_bytes, n)) return null;
  const kept = { ...k, reply_text: reply };
  if (k.candidates === true) {
    const c = candidates[candidatesKey(k)];
    if (c && Array.isArray(c.top_k) && c.top_k.length === n) Object.assign(kept, { top_k: c.top_k, top_k_tokens: c.top_k_tokens ?? null, top_k_bytes: c.top_k_bytes ?? null });
    else kept.candidates = "lost";
  }
  return kept;
}

/** The request that reads a kept reply's prompt again (chatlens.preview's): its messages, and the
 * turn's own system text, window, reserve and reply limit. */
export const previewOf = (kept, messages) => ({
  messages, system: kept.system ?? undefined, window: kept.window, reserve: kept.reserve, maxTokens: kept.max_tokens,
  ...(kept.special_in_text === false ? { specialInText: false } : {}),
});

/** The turn's record again: the prompt Python read now (a preview's record) with the reply kept,
 * or null when that prompt is not the one the reply was written after. */
export function recordAgain(preview, kept) {
  if (printOf(preview.prompt_ids) !== kept.prompt) return null;
  const { prompt, candidates, ...reply } = kept;
  return { top_k: null, top_k_tokens: null, top_k_bytes: null, branched: null, ...preview, ...reply };
}

// -- a branch being written (modes/steps.mjs) ------------------------------------------------------

export const BRANCH_KEY = "chatlens.branch"; // {label, step, token}: a branch being written, until it ends

/** A branch (another token taken at `step` of `label`'s reply) is being written; null: it ended.
 * A branch is not the conversation's until kept, so a reload loses it, and says so. */
export function saveBranch(branch, storage = globalThis.localStorage) {
  write(storage, BRANCH_KEY, branch);
}

/** The sentence a reload says for a branch that was being written when it went, or null; read once. */
export function branchReloaded(storage = globalThis.localStorage) {
  const v = read(storage, BRANCH_KEY);
  write(storage, BRANCH_KEY, null);
  if (!v || typeof v !== "object" || !Number.isInteger(v.step) || typeof v.label !== "string" || typeof v.token !== "string") return null;
  return `The page was reloaded while a branch of ${v.label}'s reply (“${v.token}” at token ${v.step + 1}) was written: ` +
    "a branch is the conversation's only once kept, so it is gone and the conversation is as it was.";
}

// -- the comparison ------------------------------------------------------------------------------

export const COMPARE_KEY = "chatlens.compare"; // the last comparison, as far as it got (compareToSave)

const REPLY_FIELDS = ["reply_ids", "reply_text", "reply_tokens", "reply_bytes", "stop_reason"];

/** What a reload keeps of a comparison run (page/state/comparison.mjs compareRunOf): its message,
 * what both read, how it ended, and each cell's reply: the answer's once it came, else the reply
 * so far (a reply being written saved as far as it got, like Live's). */
export function compareToSave(run) {
  const cells = {};
  for (const [model, byLayout] of Object.entries(run.cells)) {
    cells[model] = {};
    for (const [layout, c] of Object.entries(byLayout)) {
      cells[model][layout] = c.answer ? { answer: c.answer }
        : c.streaming ? { streaming: Object.fromEntries(REPLY_FIELDS.map((k) => [k, c.streaming[k]])) } : {};
    }
  }
  const answer = run.answer && { max_tokens: run.answer.max_tokens, top_k: run.answer.top_k, eos_id: run.answer.eos_id };
  return { text: run.text, prompt: run.prompt, answer, error: run.error, stopped: run.stopped, running: Boolean(run.controller), cells };
}

export function saveCompare(run, storage = globalThis.localStorage) {
  write(storage, COMPARE_KEY, run ? compareToSave(run) : null);
}

/** A reply a stop kept from starting, as chatlens.compare answers one: no ids, nothing computed it. */
const neverRan = () => ({ reply_ids: [], reply_text: "", reply_tokens: [], reply_bytes: [], stop_reason: "stopped",
                          top_k: null, top_k_tokens: null, top_k_bytes: null, computed_tokens: 0, backend: null, timings: null });

/** Why a comparison a reload found running has stopped. */
export const COMPARE_RELOADED = "the page was reloaded while it ran";

/** The comparison saved last time, for the store's compareRestored (page/state/comparison.mjs),
 * or null (none, or not readable). One that was running comes back stopped by the reload: the
 * reply under way keeps what it wrote, marked stopped; the ones after it never ran. */
export function loadCompare(storage = globalThis.localStorage) {
  const v = read(storage, COMPARE_KEY);
  if (!v || typeof v !== "object" || typeof v.text !== "string" || !v.cells || typeof v.cells !== "object") return null;
  const isReply = (r) => r && typeof r === "object" && Array.isArray(r.reply_ids) && typeof r.reply_text === "string";
  const cells = {};
  for (const [model, byLayout] of Object.entries(v.cells)) {
    if (!byLayout || typeof byLayout !== "object") return null;
    cells[model] = {};
    for (const [layout, c] of Object.entries(byLayout)) {
      if (isReply(c?.answer)) cells[model][layout] = { answer: c.answer };
      else if (isReply(c?.streaming)) cells[model][layout] = { streaming: { ...c.streaming, stop_reason: c.streaming.stop_reason ?? "stopped" } };
      else cells[model][layout] = v.running ? { answer: neverRan() } : {};
    }
  }
  return {
    text: v.text, prompt: v.prompt && typeof v.prompt === "object" ? v.prompt : null,
    answer: v.answer && typeof v.answer === "object" ? v.answer : null,
    error: typeof v.error === "string" ? v.error : null,
    stopped: v.running ? COMPARE_RELOADED : typeof v.stopped === "string" ? v.stopped : null,
    cells,
  };
}
