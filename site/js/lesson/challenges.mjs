// The lab's three challenges, detected from turn records and kept in localStorage.
//
// A challenge completes only from a turn the learner sent in Live mode that has a reply from the
// model: observe(progress, record, now, {live: true}). Recorded turns (live: false) can only
// show that a challenge was "seen in the recording"; they never complete one. After a completion,
// progress.showed[id] holds one line that says what it showed.
//
// The progress object: {whoDefault, whoSystem, identity, year, drop: true once done,
//   showed: {id: line}, seen: {id: where in the recording}, heard: {whoDefault, whoSystem: {reply, system}}}
// "Who are you?" counts only as the first message of a conversation: asked again later in the
// same one, the model can repeat its earlier answer, which would show nothing about the prompt.

export const STORAGE_KEY = "chatlens.challenges.v2"; // v1 counted recorded turns and turns without replies

export const CHALLENGES = [
  {
    id: "identity",
    title: "Ask who it is",
    text: "Ask “Who are you?” in a new conversation with no system prompt, then in another with one.",
  },
  { id: "year", title: "The current year", text: "Get a reply that says the current year." },
  { id: "drop", title: "Past the window", text: "Chat until the first message is dropped from the window." },
];

const FLAGS = ["whoDefault", "whoSystem", "identity", "year", "drop"];
const WHO = /\bwho\s+are\s+you\b/i;

/** The new user message of a record (its piece's text, template tokens included). */
function newMessageText(record) {
  return (record.pieces || [])
    .filter((p) => p.kind === "new")
    .map((p) => p.text)
    .join("");
}

/** Whether the message is the first of its conversation: the model read no earlier message or
 * reply (none in the text, none dropped from it), so its answer cannot echo an earlier one. */
const firstMessage = (record) =>
  !(record.pieces || []).some((p) => p.kind === "user" || p.kind === "assistant") && !(record.dropped_messages || []).length;

/** Whether the record has a system prompt of its own (empty text counts as the template default). */
const hasSystem = (record) => typeof record.system === "string" && record.system.trim() !== "";

/** Whether the model answered: a reply with some text that the model ended or the reply limit
 * cut. A reply the learner stopped ("The", "I am") shows nothing yet, so it completes nothing. */
export const hasReply = (record) =>
  typeof record.reply_text === "string" && record.reply_text.trim() !== "" && record.stop_reason !== "stopped";

// The date preset states the day: "... Today's date is Monday, November 30, 2026." (chatlens.presets)
const STATED_DATE = /\b(?:January|February|March|April|May|June|July|August|September|October|November|December) \d{1,2}, (\d{4})\b/;

/** The year the record's system prompt states, for the date preset only (a custom prompt could
 * state any year). A recorded reply was made on its recording date, so after New Year it still
 * answers that date's year. */
function statedYear(record) {
  const m = record.preset === "date" && hasSystem(record) ? STATED_DATE.exec(record.system) : null;
  return m ? Number(m[1]) : null;
}

const saysYear = (text, y) => new RegExp(`(?<!\\d)${y}(?!\\d)`).test(text);

// A quote long enough to show what the reply said (a learner checks the claim against it).
const quote = (text, n = 140) => {
  const t = text.replace(/\s+/g, " ").trim();
  return `“${t.length > n ? t.slice(0, n - 1) + "…" : t}”`;
};

/**
 * What a record satisfies, whatever its mode: {whoDefault, whoSystem, year, drop}, each a line
 * saying what it shows, or absent (whoDefault and whoSystem: {reply, system}, asked as the first
 * message of a conversation, unless `anywhere`: the recording asks it fourth). `now` gives "the
 * current year".
 */
export function detect(record, now = new Date(), { anywhere = false } = {}) {
  const found = {};
  const reply = hasReply(record) ? record.reply_text : "";
  if (!reply) return found;
  if (WHO.test(newMessageText(record)) && (anywhere || firstMessage(record))) {
    found[hasSystem(record) ? "whoSystem" : "whoDefault"] = { reply, system: hasSystem(record) ? record.system : null };
  }
  const stated = statedYear(record);
  if (stated !== null && saysYear(reply, stated)) {
    found.year = `It said ${quote(reply)}: it read the date in the system prompt. The model has no clock; it knows the day only when the text says it.`;
  } else if (saysYear(reply, now.getFullYear())) {
    found.year = `It said ${quote(reply)} without being told the date: a guess from its training data, since the model has no clock.`;
  }
  const first = (record.dropped_messages || []).find((d) => d.message_index === 0);
  if (first) {
    found.drop = `Your first message (${first.count} tokens) was left out of the text to fit the ${record.window}-token window: ` +
      "the model no longer sees it at all, so it cannot recall it.";
  }
  return found;
}

/** What the two answers showed, quoted. Each was the first message of its conversation, so the
 * system prompt was the only difference in what the model read. (A progress saved before the
 * system prompt was kept holds the reply alone.) */
function identityLine(heard) {
  const reply = (h) => (typeof h === "string" ? h : h.reply);
  const [plain, given] = [reply(heard.whoDefault), reply(heard.whoSystem)];
  const system = typeof heard.whoSystem === "object" && heard.whoSystem.system ? ` (${quote(heard.whoSystem.system, 80)})` : "";
  const norm = (t) => t.replace(/\s+/g, " ").trim().toLowerCase();
  const said = `Asked first in a new conversation with no system prompt, it answered ${quote(plain)}; ` +
    `with a system prompt${system}, ${quote(given)}. `;
  if (norm(plain) === norm(given)) {
    return said + "The same answer both times: that system prompt did not change who it says it is (try the pirate preset).";
  }
  const named = /smollm/i.test(plain) ? " The name SmolLM is in the template's default system prompt." : "";
  return said + "The answer changed with the system prompt, the only thing that differed in what it read: " +
    "the model has no identity of its own, it takes one from the text it reads." + named;
}

/**
 * The progress after seeing `record`: a new object, or the same one when nothing changed.
 *   live: true   a turn the learner sent in Live mode: it completes what it shows, if it has a reply
 *   live: false  anything else (a recorded turn): at most "seen in the recording"; `where` says
 *                where (preset, window and turn)
 */
export function observe(progress, record, now = new Date(), { live = false, where = "" } = {}) {
  const found = detect(record, now, { anywhere: !live });
  const next = {
    ...progress,
    showed: { ...(progress.showed || {}) },
    seen: { ...(progress.seen || {}) },
    heard: { ...(progress.heard || {}) },
  };
  for (const [key, line] of Object.entries(found)) {
    if (live) {
      if (next[key]) continue;
      next[key] = true;
      if (key === "whoDefault" || key === "whoSystem") next.heard[key] = line;
      else next.showed[key] = line;
    } else if (!next.seen[key]) next.seen[key] = where || "the recording";
  }
  if (live && next.whoDefault && next.whoSystem && !next.identity) {
    next.identity = true;
    next.showed.identity = identityLine(next.heard);
  }
  if (next.seen.whoDefault && next.seen.whoSystem && !next.seen.identity) next.seen.identity = next.seen.whoSystem;
  const changed = FLAGS.some((k) => next[k] !== progress[k]) ||
    ["showed", "seen", "heard"].some((k) => JSON.stringify(next[k]) !== JSON.stringify(progress[k] || {}));
  return changed ? next : progress;
}

export function done(progress) {
  return CHALLENGES.filter((c) => progress[c.id] === true).length;
}

/** A challenge's state in words: "done", "not yet", or "not yet · seen in the recording". */
export function stateText(progress, id) {
  if (progress[id] === true) return "done";
  return progress.seen?.[id] ? "not yet · seen in the recording" : "not yet";
}

/** The progress saved under `key` (this module's, or lesson/inside.mjs's), {} when none is readable. */
export function load(storage = globalThis.localStorage, key = STORAGE_KEY) {
  try {
    const v = JSON.parse(storage.getItem(key) || "{}");
    return v && typeof v === "object" ? v : {};
  } catch {
    return {};
  }
}

export function save(progress, storage = globalThis.localStorage, key = STORAGE_KEY) {
  try {
    storage.setItem(key, JSON.stringify(progress));
  } catch {
    // storage full or disabled: progress lasts for this page only
  }
}
