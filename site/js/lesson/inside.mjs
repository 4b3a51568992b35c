// "Look inside": the lesson's three cases where what the model read explains what it wrote, and
// a branch at a near-tie, each one click away (modes/inside.mjs runs them), each a challenge that
// completes from what the learner's own inspection or branch measured. Kept apart from the lab's
// three challenges (lesson/challenges.mjs), which complete from replies alone.
//
// The cases, as the lesson tells them:
//   pirate   Pirate, "Who are you?" first in a conversation: the name comes from the system prompt
//   dropped  the smallest window, "What is my name?" once the turn with the name was dropped: the name it
//            gives is made up, since nothing it reads holds one (the lesson tells it with Be brief;
//            this copy's recording drops the turn with no system prompt, so the case uses that)
//   year     Today's date, "What year is it?": the year is copied from the date in the system prompt
//   branch   the first near-tie of a reply (or, where there is none, its closest call): the other
//            token taken, and what the model would have written after it
// Each completes from a live turn only (as the lab's challenges do), and its line says what the
// inspection or the branch measured, in numbers taken from it. No DOM: tests/page/inside.test.mjs.

import * as challenges from "./challenges.mjs";
import { percent, visibleToken } from "./terms.mjs";

export const STORAGE_KEY = "chatlens.inside.v1";

// The figures measured with the command line (`chatlens inspect`) on the 4-bit copy of these
// weights, for the lines that say where to look. Blocks and heads counted from 1, as the page does.
export const CASES = [
  {
    id: "pirate",
    title: "The name from the system prompt",
    preset: "pirate",
    message: "Who are you?",
    step: "first",
    text: "With Pirate, ask “Who are you?” first in a new conversation, then look inside the reply's first token.",
    look: "Averaged over all heads, the weight sits on the first token and the last few; single heads reach back. " +
      "Measured with the command line on the 4-bit copy: block 24 · head 5 put 0.82 of its weight on the system " +
      "prompt's “ pirate” as the reply began.",
  },
  {
    id: "dropped",
    title: "A name made up",
    preset: "none",
    window: "smallest", // the site's smallest window (build.json's windows), as the lesson's drop needs
    history: { preset: "none", turns: 2 }, // the recording's first two turns in that window: Priya's, and a long answer
    message: "What is my name?",
    step: "name",
    text: "With no system prompt and the smallest window, after the turn with your name and a long answer, ask “What is my name?”, then look inside the name it gives.",
    look: "In the recording, this turn no longer fits the turn with the name, and the reply was “I'm Emily.”: a name made up. " +
      "(With Be brief the recorded answers are shorter and the name still fits in that window.) The shares show every piece it could read from.",
  },
  {
    id: "year",
    title: "The year from Today's date",
    preset: "date",
    message: "What year is it?",
    step: "year",
    text: "With Today's date, ask “What year is it?” in a new conversation, then look inside the year's last digit.",
    look: "Measured with the command line on the 4-bit copy, writing “2026”: block 19 · head 7 put 0.97 of its weight on " +
      "the date's “2”, block 21 · head 9 0.97 on its “6”, and the logit lens has “6” first from block 25 on.",
  },
  {
    id: "branch",
    title: "The other token at a near-tie",
    step: "tie",
    text: "With “Why this token” on, take the token the model nearly chose at its reply's first near-tie (or, where there is none, its closest call) and watch the reply change.",
    look: "A near-tie is a step whose two best candidates are within the site's gap: another device's rounding could have taken the other.",
  },
];

const shown = (t) => `“${visibleToken(String(t ?? ""))}”`;
const WHO = /\bwho\s+are\s+you\b/i;
const NAME = /\bwhat\s+is\s+my\s+name\b/i;
const STATED_DATE = /\b(?:January|February|March|April|May|June|July|August|September|October|November|December) \d{1,2}, (\d{4})\b/;

const newMessage = (record) => (record.pieces || []).filter((p) => p.kind === "new").map((p) => p.text).join("");
const firstMessage = (record) =>
  !(record.pieces || []).some((p) => p.kind === "user" || p.kind === "assistant") && !(record.dropped_messages || []).length;

/** The year the date preset's system prompt states, or null. */
export function statedYear(record) {
  const m = record.preset === "date" && typeof record.system === "string" ? STATED_DATE.exec(record.system) : null;
  return m ? m[1] : null;
}

/** The step a case inspects in `record`'s reply: the first ("first"), the first capitalised word
 * after it ("name": “ Emily” in “I'm Emily.”; the first token where there is none), the last digit
 * of the stated year where the reply writes it ("year"; the year's digits are one token each), or
 * null. */
export function caseStep(c, record) {
  const tokens = record.reply_tokens ?? [];
  if (c.step === "first") return tokens.length ? 0 : null;
  if (c.step === "name") {
    const i = tokens.findIndex((t, k) => k > 0 && /^ [A-Z][a-z]/.test(t));
    return i >= 0 ? i : tokens.length ? 0 : null;
  }
  if (c.step === "year") {
    const year = statedYear(record);
    if (!year) return null;
    for (let i = 0; i + year.length <= tokens.length; i++) {
      if (tokens.slice(i, i + year.length).join("") === year) return i + year.length - 1;
    }
    return null;
  }
  return null;
}

/** The step a branch is offered at: the first near-tie, else the closest call (the smallest gap
 * between the two best logits), with the runner-up: {step, id, gap, tie}, or null (no candidates). */
export function tieStep(record, gap) {
  const rows = record.top_k ?? [];
  let best = null;
  rows.forEach((row, step) => {
    if (row.length < 2 || record.reply_ids?.[step] !== row[0][0]) return; // a step chosen by hand is no call of the model's
    const d = row[0][1] - row[1][1];
    if (!best || (d < best.gap && !best.tie)) best = { step, id: row[1][0], gap: d, tie: d < gap };
  });
  return best;
}

/**
 * What an inspection of a live turn's step completes: {id: line} for the cases it shows, each
 * line in the inspection's own numbers. record: the turn's record; answer: chatlens.inspect's.
 */
export function inspected(record, answer) {
  const found = {};
  // the head that put the most weight on one position of the system prompt, as the answer has it
  const system = answer.strongest_heads.find((h) => h.kind === "system");
  const tokens = [...record.prompt_tokens, ...(record.reply_tokens ?? [])];
  const chosen = tokens[record.prompt_ids.length + answer.step];
  const head = (h) => `block ${h.layer + 1} · head ${h.head + 1}`;
  if (record.preset === "pirate" && system && WHO.test(newMessage(record)) && firstMessage(record)) {
    found.pirate = `Writing ${shown(chosen)}, ${head(system)} put ${percent(system.weight)} of its weight on the system prompt's ` +
      `${shown(tokens[system.position])}: the name it gives is read from there.`;
  }
  if ((record.dropped_messages || []).some((d) => d.message_index === 0) && NAME.test(newMessage(record))) {
    const parts = answer.every_layer.shares_skip_first.filter((p) => p.share >= 0.005).map((p) => `${p.label} ${percent(p.share)}`).join(", ");
    found.dropped = `Writing ${shown(chosen)}: the message with your name was dropped (${record.dropped_messages[0].count} tokens). Of the weight ` +
      `beyond the first token, averaged over all heads: ${parts}. None of what it read holds a name, so the one it ` +
      `gives is made up.`;
  }
  const year = statedYear(record);
  if (year && system && /^\d$/.test(chosen ?? "") && year.includes(chosen)) {
    found.year = `Writing ${shown(chosen)} of ${year}, ${head(system)} put ${percent(system.weight)} of its weight on the system ` +
      `prompt's ${shown(tokens[system.position])}: the year is copied from the date the app wrote there.`;
  }
  return found;
}

/** What a branch of a live turn completes: {branch: line} when it took the runner-up at the
 * reply's first near-tie or closest call (tieStep). branched: chatlens.branch's answer. */
export function branched(record, answer, gap) {
  const t = tieStep(record, gap);
  if (!t || t.step !== answer.step || t.id !== answer.id) return {};
  const from = (tokens) => tokens.slice(t.step).join("").slice(0, 60);
  const call = t.tie ? `a near-tie, ${t.gap.toFixed(4)} logits apart` : `its closest call, ${t.gap.toFixed(4)} logits apart (no near-tie)`;
  return {
    branch: `At token ${t.step + 1}, ${call}, the model wrote ${shown(record.reply_tokens[t.step])}; taking ` +
      `${shown(answer.reply_tokens[t.step])}, the reply went on “${from(answer.reply_tokens)}” instead of “${from(record.reply_tokens)}”.`,
  };
}

/** The progress with `found` ({id: line}) added: a new object, or the same when nothing is new. */
export function add(progress, found) {
  const fresh = Object.entries(found).filter(([id]) => !progress[id]);
  return fresh.length ? { ...progress, ...Object.fromEntries(fresh) } : progress;
}

export const done = (progress) => CASES.filter((c) => progress[c.id]).length;

// saved as the challenges' progress is, under this module's own key
export const load = (storage = globalThis.localStorage) => challenges.load(storage, STORAGE_KEY);
export const save = (progress, storage = globalThis.localStorage) => challenges.save(progress, storage, STORAGE_KEY);
