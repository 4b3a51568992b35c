// The lab's three challenges, detected from turn records (live turns that were sent, and
// recorded turns as they are stepped through), kept in localStorage.

export const STORAGE_KEY = "chatlens.challenges";

export const CHALLENGES = [
  {
    id: "identity",
    title: "Ask who it is",
    text: "Ask “Who are you?” with no system prompt, then again with one.",
  },
  { id: "year", title: "The current year", text: "Get a reply that says the current year." },
  { id: "drop", title: "Past the window", text: "Chat until the first message is dropped from the window." },
];

const WHO = /\bwho\s+are\s+you\b/i;

/** The new user message of a record (its piece's text, template tokens included). */
function newMessageText(record) {
  return record.pieces
    .filter((p) => p.kind === "new")
    .map((p) => p.text)
    .join("");
}

/** Whether the record has a system prompt of its own (empty text counts as the template default). */
const hasSystem = (record) => typeof record.system === "string" && record.system.trim() !== "";

// The date preset states the day: "... Today's date is Monday, November 30, 2026." (chatlens.presets)
const STATED_DATE = /\b(?:January|February|March|April|May|June|July|August|September|October|November|December) \d{1,2}, (\d{4})\b/;

/**
 * The years that count as "the current year" for a record: the browser clock's, and, for a turn
 * made with the date preset, the year of the date its system prompt states. A recorded reply was
 * made on its recording date, so after New Year it still answers that date's year, and the
 * challenge stays completable. Only the date preset counts: a custom prompt could state any year.
 */
function currentYears(record, now) {
  const years = [now.getFullYear()];
  const stated = record.preset === "date" && hasSystem(record) ? STATED_DATE.exec(record.system) : null;
  if (stated) years.push(Number(stated[1]));
  return years;
}

/** The progress after seeing `record`: a new object, or the same one when nothing changed. */
export function observe(progress, record, now = new Date()) {
  const next = { ...progress };
  if (WHO.test(newMessageText(record))) {
    if (hasSystem(record)) next.whoSystem = true;
    else next.whoDefault = true;
  }
  const reply = record.reply_text || "";
  if (currentYears(record, now).some((y) => new RegExp(`(?<!\\d)${y}(?!\\d)`).test(reply))) next.year = true;
  if (record.dropped_messages.some((d) => d.message_index === 0)) next.drop = true;
  next.identity = Boolean(next.whoDefault && next.whoSystem);
  const changed = Object.keys(next).some((k) => next[k] !== progress[k]);
  return changed ? next : progress;
}

export function done(progress) {
  return CHALLENGES.filter((c) => progress[c.id]).length;
}

export function load(storage = globalThis.localStorage) {
  try {
    const v = JSON.parse(storage.getItem(STORAGE_KEY) || "{}");
    return v && typeof v === "object" ? v : {};
  } catch {
    return {};
  }
}

export function save(progress, storage = globalThis.localStorage) {
  try {
    storage.setItem(STORAGE_KEY, JSON.stringify(progress));
  } catch {
    // storage full or disabled: progress lasts for this page only
  }
}
