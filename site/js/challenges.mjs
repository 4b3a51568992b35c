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

/** The progress after seeing `record`: a new object, or the same one when nothing changed. */
export function observe(progress, record, now = new Date()) {
  const next = { ...progress };
  if (WHO.test(newMessageText(record))) {
    if (record.system === null || record.system === undefined) next.whoDefault = true;
    else next.whoSystem = true;
  }
  if (record.reply_text && record.reply_text.includes(String(now.getFullYear()))) next.year = true;
  if (record.dropped_turns.some((d) => d.message_index === 0)) next.drop = true;
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
