// A case shared as a link: what reproduces one turn of a conversation and one step of its reply,
// carried in the address's #fragment (a browser sends no fragment to any server), and the same
// case as the command line's request on stdin. No DOM: tests/page/link.test.mjs plays it in node.
//
// The case is the page API's request for the turn (chatlens.preview's and run's arguments), with
// what the link adds beside it:
//   messages                  [{role: "user" | "assistant", content}]: the conversation up to the
//                             turn, your message last
//   preset, custom, system    the system prompt: a preset's name, or custom text ("custom" and
//                             its text; system text alone is read as custom text)
//   window, reserve, maxTokens, specialInText    as the page API takes them
//   replyIds                  the reply as the device that made the link wrote it: a device that
//                             opens the link compares its own greedy reply with these ids
//   step                      the step of the reply to open (0: the one that chose replyIds[0])
//   open                      which of the step box's measures were open: MEASURES, any of them
//   id                        the id a branch took at the step ("branch" open)
// written as JSON, deflated (CompressionStream "deflate-raw"), in base64url, after a version:
// "#case=1.<data>". A link is user text: decodeCase reads it with a cap on what it may inflate
// to, checks every field's type, and refuses anything else in a sentence (it never throws); the
// page then puts its text in as text (views/dom.mjs), never as HTML (docs/safety.md).

import { toWire } from "./protocol.mjs";

export const VERSION = 1;
export const KEY = "case"; // the fragment's name: #case=1.<data>
export const MEASURES = ["inspect", "cause", "whole", "branch"]; // where it looked, which piece it needed, the same for the whole reply, a branch
export const MOST_CHARACTERS = 32_000; // a link's fragment at most (browsers and chat apps keep links of this size whole)
const MOST_BYTES = 1 << 20; // what the fragment may inflate to (a deflated megabyte of spaces is a few kilobytes)
const MOST_MESSAGES = 500;
const MOST_IDS = 1 << 16;

const FIELDS = ["v", "messages", "preset", "custom", "system", "window", "reserve", "maxTokens", "specialInText", "replyIds", "step", "open", "id"];
const isCount = (n) => Number.isInteger(n) && n > 0 && n <= 1 << 24;
const isId = (n) => Number.isInteger(n) && n >= 0 && n < 1 << 24;

/** Why `c` (a case, the version aside) is not one a link can hold, in a sentence's words, or null. */
export function caseProblem(c) {
  if (!c || typeof c !== "object" || Array.isArray(c)) return "it holds no case";
  const unknown = Object.keys(c).filter((k) => !FIELDS.includes(k));
  if (unknown.length) return `it holds ${unknown.map((k) => JSON.stringify(k)).join(", ")}, which no case has`;
  const { messages } = c;
  if (!Array.isArray(messages) || !messages.length) return "it holds no messages";
  if (messages.length > MOST_MESSAGES) return `it holds ${messages.length} messages, more than ${MOST_MESSAGES}`;
  for (const [i, m] of messages.entries()) {
    if (!m || typeof m !== "object" || Object.keys(m).some((k) => k !== "role" && k !== "content")) return `its message ${i + 1} is not {role, content}`;
    if (m.role !== "user" && m.role !== "assistant") return `its message ${i + 1} is neither yours nor the model's`;
    if (typeof m.content !== "string") return `its message ${i + 1} has no text`;
    if (m.role === "assistant" && messages[i - 1]?.role !== "user") return `its reply ${i + 1} answers no message of yours`;
  }
  if (messages.at(-1).role !== "user") return "its last message is not yours";
  if (!messages.at(-1).content.trim()) return "its last message is empty";
  for (const k of ["preset", "custom"]) if (c[k] !== undefined && typeof c[k] !== "string") return `its ${k} is not text`;
  if (c.system !== undefined && c.system !== null && typeof c.system !== "string") return "its system prompt is not text";
  for (const k of ["window", "reserve", "maxTokens"]) if (c[k] !== undefined && !isCount(c[k])) return `its ${k} is not a count of tokens`;
  if (c.specialInText !== undefined && typeof c.specialInText !== "boolean") return "its specialInText is neither true nor false";
  if (c.replyIds !== undefined && (!Array.isArray(c.replyIds) || c.replyIds.length > MOST_IDS || !c.replyIds.every(isId))) return "its reply is not a list of token ids";
  if (c.step !== undefined) {
    if (!Number.isInteger(c.step) || c.step < 0) return "its step is not a step";
    if (!(c.step < (c.replyIds?.length ?? 0))) return `its step ${c.step} is not one of its reply's ${c.replyIds?.length ?? 0} tokens`;
  }
  if (c.open !== undefined) {
    if (!Array.isArray(c.open) || !c.open.every((m) => MEASURES.includes(m)) || new Set(c.open).size !== c.open.length) {
      return `its open measures are not among ${MEASURES.join(", ")}`;
    }
    if (c.open.length && c.step === undefined) return "it opens a measure of no step";
  }
  const branch = Boolean(c.open?.includes("branch"));
  if (branch !== (c.id !== undefined)) return branch ? "its branch takes no id" : "it names an id but opens no branch";
  if (branch && !isId(c.id)) return "its branch's id is not a token id";
  return null;
}

/** The case a link holds for `request` (the page API's request, with replyIds, step, open, id):
 * the fields a case has, in a fixed order (the rest, topK and such, change no figure of the
 * turn); a single measure may be given as a string. Throws a TypeError naming what is wrong. */
export function caseOf(request) {
  const r = request ?? {};
  if ((r.layout ?? "template") !== "template" || (r.model ?? "instruct") !== "instruct") {
    throw new TypeError("chatlens.link: a link holds a chat turn of the instruct model, read through its template");
  }
  const c = {};
  for (const k of FIELDS) if (r[k] !== undefined && k !== "v" && k !== "open") c[k] = r[k];
  if (r.open !== undefined && r.open !== null) c.open = typeof r.open === "string" ? [r.open] : [...r.open];
  if (Array.isArray(c.messages)) c.messages = c.messages.map((m) => ({ role: m?.role, content: m?.content }));
  const problem = caseProblem(c);
  if (problem) throw new TypeError(`chatlens.link: this request cannot be a link: ${problem}`);
  return c;
}

// -- the fragment -------------------------------------------------------------------------------------

const base64url = (bytes) => {
  let s = "";
  for (let i = 0; i < bytes.length; i += 0x8000) s += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  return btoa(s).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
};
const fromBase64url = (text) => {
  const s = atob(text.replace(/-/g, "+").replace(/_/g, "/"));
  return Uint8Array.from(s, (ch) => ch.charCodeAt(0));
};

async function deflate(text) {
  const stream = new Blob([new TextEncoder().encode(text)]).stream().pipeThrough(new CompressionStream("deflate-raw"));
  return new Uint8Array(await new Response(stream).arrayBuffer());
}

/** The text `bytes` inflate to, or an Error once it passes `most` bytes (a link is no place for a bomb). */
async function inflate(bytes, most) {
  const reader = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("deflate-raw")).getReader();
  const parts = [];
  let n = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    n += value.length;
    if (n > most) {
      await reader.cancel().catch(() => {});
      throw new RangeError(`it unpacks to more than ${most} bytes`);
    }
    parts.push(value);
  }
  return new TextDecoder("utf-8", { fatal: true }).decode(await new Blob(parts).arrayBuffer());
}

/** The fragment (without its "#") that holds case `c`: "case=1.<data>". */
export async function encodeCase(c) {
  return `${KEY}=${VERSION}.${base64url(await deflate(JSON.stringify({ v: VERSION, ...c })))}`;
}

const groups = (n) => n.toLocaleString("en-US");
const UNREADABLE = (why) => ({ error: `This link's case cannot be read: ${why}. Nothing was changed.` });

/**
 * The case an address's fragment holds: {case}, or {error} (a sentence: too long, another
 * version, not a case), or null when the fragment holds no case at all. Never throws.
 */
export async function decodeCase(fragment) {
  const text = String(fragment ?? "").replace(/^#/, "");
  const prefix = `${KEY}=`;
  if (!text.startsWith(prefix)) return null;
  if (text.length > MOST_CHARACTERS) {
    return { error: `This link is too long: ${groups(text.length)} characters, where a link here holds at most ${groups(MOST_CHARACTERS)}. Nothing was changed.` };
  }
  const m = /^(\d+)\.([A-Za-z0-9_-]*)$/.exec(text.slice(prefix.length));
  if (!m) return UNREADABLE("it was cut or changed on its way (a case is a version, a dot and letters)");
  if (Number(m[1]) !== VERSION) return UNREADABLE(`it is written in version ${m[1]}, and this page reads version ${VERSION}`);
  let c;
  try {
    c = JSON.parse(await inflate(fromBase64url(m[2]), MOST_BYTES));
  } catch (e) {
    return UNREADABLE(e instanceof RangeError ? e.message : "it was cut or changed on its way");
  }
  if (c?.v !== VERSION) return UNREADABLE("its version is not the one its address names");
  const { v, ...rest } = c;
  const problem = caseProblem(rest);
  return problem ? UNREADABLE(problem) : { case: rest };
}

/** The link to case `c` on the page at `page` (a URL: its origin and path; of its parameters only
 * ?model=, the weights the case was computed with, is kept: the case sets the rest). Throws a
 * RangeError with a sentence when the case is too long for a link. */
export async function linkTo(c, page) {
  const at = new URL(page);
  const model = at.searchParams.get("model");
  const fragment = await encodeCase(c);
  if (fragment.length > MOST_CHARACTERS) {
    throw new RangeError(`This case is too long for a link: ${groups(fragment.length)} characters, where a link here holds at most ` +
      `${groups(MOST_CHARACTERS)}. “Copy as a command” gives it whole.`);
  }
  return `${at.origin}${at.pathname}${model ? `?model=${encodeURIComponent(model)}` : ""}#${fragment}`;
}

// -- the command line ---------------------------------------------------------------------------------

/** The command a case's measure is: its name, and the wire request it reads (protocol.mjs's
 * toWire, the names `python3 -m chatlens` reads on stdin: docs/command-line.md). The whole reply
 * is the cause at the reply's last step; no step, the turn run again. */
export function commandRequest(c, settings = {}) {
  const open = c.open ?? [];
  if (c.step === undefined) return { command: "run", request: toWire("run", c, settings) };
  if (open.includes("branch")) return { command: "branch", request: toWire("branch", c, settings) };
  if (open.includes("whole")) return { command: "cause", request: toWire("cause", { ...c, step: c.replyIds.length - 1 }, settings) };
  if (open.includes("cause")) return { command: "cause", request: toWire("cause", c, settings) };
  return { command: "inspect", request: toWire("inspect", c, settings) };
}

/** A shell's single-quoted word for `text` (a ' closes the quote, is escaped, and opens it again). */
const quoted = (text) => `'${text.replace(/'/g, "'\\''")}'`;

/** The case as a command line: its request on stdin (printf, not echo: echo may read a
 * backslash) and the command; `weights`: the page's model source, said in a comment (the command
 * line reads its default GGUF, or the files --model names: the same weights give the same figures). */
export function commandOf(c, settings = {}, { weights = null } = {}) {
  const { command, request } = commandRequest(c, settings);
  const note = weights ? `  # the page's weights: ${weights.replace(/[\r\n]/g, " ")} (the same files: --model PATH)` : "";
  return `printf '%s\\n' ${quoted(JSON.stringify(request))} | python3 -m chatlens ${command}${note}`;
}
