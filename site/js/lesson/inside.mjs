// "Look inside": the lesson's three cases where what the model read explains what it wrote, and
// a branch at a near-tie, each one click away (modes/inside.mjs runs them), each a challenge that
// completes from what the learner's own measures of a live turn showed. Kept apart from the lab's
// three challenges (lesson/challenges.mjs), which complete from replies alone.
//
// The cases, as the lesson tells them, each completed by "which piece it needed" (chatlens.cause)
// at the step the sentence is about, its inspection (where that step looked) named beside it:
//   pirate   Pirate, "Who are you?" first in a conversation: the first token of the name it gives,
//            with the system prompt removed and knocked out
//   dropped  the smallest window, "What is my name?" once the turn with the name was dropped: the
//            name it gives, with the dropped turn put back (what it writes then, whatever it is;
//            the lesson tells it with Be brief; this copy's recording drops the turn with no
//            system prompt, so the case uses that)
//   year     Today's date, "What year is it?": the year's last digit with the date removed and
//            knocked out, and the digits before it with the date removed
//   branch   the first near-tie of a reply (or, where there is none, its closest call): the other
//            token taken, and what the model would have written after it
// Every figure a line quotes comes from the step it names, measured on this page. No DOM:
// tests/page/inside.test.mjs.

import * as challenges from "./challenges.mjs";
import { change, likelier, moved, percent, times, visibleToken } from "./terms.mjs";

export const STORAGE_KEY = "chatlens.inside.v1";

// What each case asks and sends. `window`: "smallest" (build.json's smallest), else the site's
// default window, so a case never runs in the window the one before it set.
export const CASES = [
  {
    id: "pirate",
    title: "The name from the system prompt",
    preset: "pirate",
    message: "Who are you?",
    step: "name",
    text: "With Pirate, ask “Who are you?” first in a new conversation. The step that writes the first token of the name " +
      "it gives opens as soon as that token is written: where it looked, and what it writes without the system prompt.",
    look: "Attention says where a step read from; taking a piece away says whether the step needed it.",
  },
  {
    id: "dropped",
    title: "A name made up",
    preset: "none",
    window: "smallest", // as the lesson's drop needs
    history: { preset: "none", turns: 2 }, // the recording's first two turns in that window: Priya's, and a long answer
    message: "What is my name?",
    step: "name",
    text: "With no system prompt and the smallest window, after the turn with your name and a long answer, ask “What is my " +
      "name?”. The step of the name it gives opens, and the dropped turn is put back to see what it writes then.",
    look: "In the recording, this turn no longer fits the turn with the name, and the reply was “I'm Emily.”. (With Be " +
      "brief the recorded answers are shorter and the name still fits in that window.)",
  },
  {
    id: "year",
    title: "The year from Today's date",
    preset: "date",
    message: "What year is it?",
    step: "year",
    text: "With Today's date, ask “What year is it?” in a new conversation. The step of the year's last digit opens, and " +
      "the date is taken away from it and from the digits before it.",
    look: "Taking the date away, one digit at a time, shows which of the year's digits needed it.",
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
// Where a name follows in a reply: "my name is", "I'm", "call me", ...
const NAME_BEFORE = /(?:\bname(?:'s| is)|\bI'm|\bI am|\bI be|\bcall me|\bcalled|\bnamed)\s*$/i;

const newMessage = (record) => (record.pieces || []).filter((p) => p.kind === "new").map((p) => p.text).join("");
const firstMessage = (record) =>
  !(record.pieces || []).some((p) => p.kind === "user" || p.kind === "assistant") && !(record.dropped_messages || []).length;

/** The year the date preset's system prompt states, or null. */
export function statedYear(record) {
  const m = record.preset === "date" && typeof record.system === "string" ? STATED_DATE.exec(record.system) : null;
  return m ? m[1] : null;
}

/** The first token of the name a reply gives: a capitalised word right after "name is", "I'm",
 * "call me" and the like, or null (so far). */
function nameStep(tokens) {
  let text = "";
  for (let k = 0; k < tokens.length; k++) {
    if (k > 0 && /^ [A-Z]/.test(tokens[k]) && NAME_BEFORE.test(text)) return k;
    text += tokens[k];
  }
  return null;
}

/**
 * The step a case looks inside in `record`'s reply, or null: the first token of the name it gives
 * ("name"; once the reply has ended without one, its first capitalised word after the first
 * token, else its first token), the last digit of the stated year where the reply writes it
 * ("year": the year's digits are one token each). `partial`: the reply is still being written,
 * so only a step that is certain now is named (Look inside opens it at once).
 */
export function caseStep(c, record, { partial = false } = {}) {
  const tokens = record.reply_tokens ?? [];
  if (c.step === "name") {
    const found = nameStep(tokens);
    if (found !== null || partial) return found;
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

/** The steps of the stated year's digits before its last one, in the reply (the year case takes
 * the date away from each), or []. */
export function yearDigitSteps(record) {
  const last = caseStep(CASES.find((c) => c.id === "year"), record);
  return last === null ? [] : Array.from({ length: statedYear(record).length - 1 }, (_, k) => last - statedYear(record).length + 1 + k);
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

/** " it would write “ You” instead (24.8%)", or "" when the chosen token still leads. */
const instead = (cause, m) => (m.top_id === cause.chosen_id ? "" : `, and ${shown(m.top_token)} leads (${percent(m.top_p)})`);
const head = (h) => `block ${h.layer + 1} · head ${h.head + 1}`;
const pieceOf = (cause, kind) => cause.pieces.find((p) => p.kind === kind);

/** Where the step looked, from its inspection (null: none of this step): the head that read the
 * piece of `kind` most, on which of its tokens (`on(token)`: the words for it). */
function lookedAt(record, inspection, kind, on) {
  const h = inspection?.strongest_heads?.find((s) => s.kind === kind);
  if (!h) return "";
  const tokens = [...record.prompt_tokens, ...(record.reply_tokens ?? [])];
  return ` Where it looked: ${head(h)} put ${percent(h.weight)} of its weight on ${on(shown(tokens[h.position]))}` +
    " (“The head that reads each piece most”, in the inspection).";
}
const PIECE_WORDS = { default_system: "the template's default system prompt", system: "the system prompt" };

/** Every token of the reply so far with a piece removed (a cause's answer at the reply's last
 * step, with `tokens`): how many fall, the ones that fall most ([token, factor], most first), and
 * the whole reply's factor, or null when the answer carries no tokens. */
export function stripFalls(whole, kind) {
  const piece = pieceOf(whole, kind);
  const rows = piece?.removed?.tokens;
  if (!rows || !whole.tokens) return null;
  const tokens = whole.tokens.map((base, k) => ({ k, ratio: rows[k].p / base.p }));
  const falls = tokens.filter((t) => change(t.ratio) === "falls").sort((a, b) => a.ratio - b.ratio);
  return { falls, of: tokens.length, reply: Math.exp(piece.removed.reply_logprob - whole.reply_logprob) };
}

/**
 * What "which piece it needed" (chatlens.cause's answer) of a live turn's step completes: {id:
 * line} for the case it shows, each line in its own figures. record: the turn's record; context:
 * {inspection: chatlens.inspect's answer of the same step, or null; digits: the year's earlier
 * digits, [{token, p, removed}] (Look inside measures them with the date removed); whole: the
 * cause at the reply's last step with every token's figures (the token strip), or null; needed:
 * the conversation's matrix's row for this turn (chatlens.needs's, its last), or null}.
 */
export function caused(record, cause, { inspection = null, digits = [], whole = null, needed = null } = {}) {
  const found = {};
  if (inspection && inspection.step !== cause.step) inspection = null;
  const chosen = shown(cause.chosen_token);
  const system = pieceOf(cause, "system");
  const pirateCase = CASES.find((c) => c.id === "pirate");
  if (record.preset === "pirate" && WHO.test(newMessage(record)) && firstMessage(record) && system?.removed && system.knocked &&
      caseStep(pirateCase, record) === cause.step) {
    const { removed, knocked } = system;
    const through = change(knocked.p / cause.p) === "little" && change(removed.p / cause.p) === "falls"
      ? " Not read, it barely moves, yet removed it falls: the system prompt reaches this token through the tokens that " +
        "read it, which a knockout leaves as they were and a removal does not."
      : "";
    const strip = whole ? stripFalls(whole, "system") : null;
    const words = strip ? ` Over every token of the reply so far (${strip.of}), without the system prompt ${strip.falls.length} ` +
      `fall, most ${strip.falls.slice(0, 3).map((t) => `${shown(record.reply_tokens[t.k])} (token ${t.k + 1}: ${times(1 / t.ratio)} times)`).join(", ")}; ` +
      `the reply so far is ${times(1 / strip.reply)} times less likely (the strip under the table).` : "";
    found.pirate = `Writing ${chosen}, the first token of the name it gives (${percent(cause.p)}): without the system ` +
      `prompt (the template's default in its place) it ${moved(removed.p, cause.p)}${instead(cause, removed)}; with the ` +
      `system prompt there but not read by the reply, it ${moved(knocked.p, cause.p)}${instead(cause, knocked)}.${through}` +
      words + lookedAt(record, inspection, "system", (t) => `the system prompt's ${t}`);
  }
  const back = pieceOf(cause, "dropped");
  if ((record.dropped_messages || []).some((d) => d.message_index === 0) && NAME.test(newMessage(record)) && back?.removed) {
    const m = back.removed;
    const far = inspection?.every_layer?.look_back?.[0];
    const tokens = [...record.prompt_tokens, ...(record.reply_tokens ?? [])];
    const where = far?.reads?.length ? inspection.by_piece.find((p) => far.reads[0][0] >= p.start && far.reads[0][0] < p.end) : null;
    const reads = where ? `; the head that reads furthest back, ${head(far)}, reads ${shown(tokens[far.reads[0][0]])} in ` +
      `${PIECE_WORDS[where.kind] ?? where.label}` : "";
    // the turn's tokens, the figure its row in the cause table gives: both its messages, not the first one's alone
    found.dropped = `Writing ${chosen} (${percent(cause.p)}): the turn with your name was dropped ` +
      `(the whole turn: ${back.count} tokens), so nothing the model read holds your name${reads}. Put back, as a ` +
      `larger window would read it, the model would write ${shown(m.top_token)} there (${percent(m.top_p)})` +
      (m.top_id === cause.chosen_id ? "." : `, and ${chosen} ${moved(m.p, cause.p)}.`) + matrixWords(needed);
  }
  const year = statedYear(record);
  if (year && system?.removed && system.knocked && caseStep(CASES.find((c) => c.id === "year"), record) === cause.step) {
    const { removed, knocked } = system;
    const before = digits.length
      ? ` The digits before it, without the date: ${digits.map((d) => `${shown(d.token)} ${moved(d.removed, d.p)}`).join(", ")}.`
      : "";
    found.year = `Writing ${chosen}, the last digit of ${year} (${percent(cause.p)}): without the date (the template's ` +
      `default system prompt in its place) it ${moved(removed.p, cause.p)}${instead(cause, removed)}; not read by the ` +
      `reply, it ${moved(knocked.p, cause.p)}${instead(cause, knocked)}.${before}` +
      lookedAt(record, inspection, "system", (t) => `${t} in the system prompt`);
  }
  return found;
}

/** Which turn the whole reply needed, from the conversation's matrix (its row for the turn): each
 * earlier turn it read taken away (a removal takes a kept turn whole: its two messages, one
 * figure), the new message, and the dropped turn put back; "" without a row. The template's own
 * pieces (the system prompt it writes, the generation header) are not turns: they are left to
 * the matrix. */
function matrixWords(row) {
  if (!row) return "";
  const said = (p) => likelier(p.removed.reply_logprob, row.reply_logprob);
  const turns = new Map(); // "turn 2" -> its messages' pieces, each taken away
  for (const p of row.pieces) {
    if (!p.removed || (p.kind !== "user" && p.kind !== "assistant")) continue;
    const turn = p.label.split(" · ")[0];
    turns.set(turn, [...(turns.get(turn) ?? []), p]);
  }
  const whole = (ps) => ps.every((p) => Math.abs(p.removed.reply_logprob - ps[0].removed.reply_logprob) < 1e-6);
  const parts = [...turns].flatMap(([turn, ps]) => (whole(ps) ? [`without ${turn} it is ${said(ps[0])}`]
    : ps.map((p) => `without ${p.label} it is ${said(p)}`)));
  const asked = row.pieces.find((p) => p.kind === "new" && p.removed);
  if (asked) parts.push(`without your new message, ${said(asked)}`);
  const back = row.pieces.find((p) => p.kind === "dropped" && p.removed);
  if (back) parts.push(`with the dropped turn put back, ${said(back)}`);
  if (!parts.length) return "";
  const text = row.reply_tokens.join("").replace(/<\|im_end\|>$/, "");
  return ` Over the whole reply (“${visibleToken(text)}”, the conversation's matrix): ${parts.join("; ")}.`;
}

/** What a branch of a live turn completes: {branch: line} when it took the runner-up at the
 * reply's first near-tie or closest call (tieStep). branched: chatlens.branch's answer. */
export function branched(record, answer, gap) {
  const t = tieStep(record, gap);
  if (!t || t.step !== answer.step || t.id !== answer.id) return {};
  // about 60 characters, whole tokens only: a special token is never cut to "<|i"
  const from = (tokens) => {
    let text = "";
    for (const token of tokens.slice(t.step)) {
      if (text && text.length + token.length > 60) break;
      text += token;
    }
    return text;
  };
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
