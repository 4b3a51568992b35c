// What the page sends the worker: each request's arguments, as the contract names them
// (site/js/worker/protocol.gen.mjs, written from py/chatlens/protocol.py). One casing rule: the
// page's API takes JavaScript's camelCase (maxTokens, topK, specialInText, addGenerationPrompt),
// every name on the wire is snake_case, and this module alone converts, reading each request's
// fields from the contract (FIELDS) rather than writing them again.

import { FIELDS, MESSAGES } from "../worker/protocol.gen.mjs";

const camel = (name) => name.replace(/_(\w)/g, (_, c) => c.toUpperCase());
/** A structured-clone-safe copy: the page's state is made of proxies, which postMessage refuses. */
const copy = (value) => (typeof value === "object" && value !== null ? JSON.parse(JSON.stringify(value)) : value);

// modes/workbench.mjs and modes/byhand.mjs still give render's options as the wire names them
// (add_generation_prompt, ...): taken as they are, beside camelCase, until they pass camelCase.
const WIRE_NAMES_TAKEN = new Set(["render"]);

/** Each argument type's defaults, filled in on the wire copy from the site's settings (build.json). */
const DEFAULTS = {
  /** preview, run, predict, count: the messages as {role, content} strings; the reply limit the
   * site's; the reserve kept free in the window for the reply, the reply limit. */
  Turn(out, settings) {
    out.messages = out.messages.map((m) => ({ role: String(m.role), content: String(m.content) }));
    out.max_tokens ??= out.reserve ?? settings.reply_limit;
    out.reserve ??= out.max_tokens;
  },
  /** complete: the reply limit the site's (topK, each token's candidates, only when asked for). */
  Text(out, settings) {
    out.max_tokens ??= settings.reply_limit;
  },
  /** compare: the lab's cap and top-k. */
  Compare(out, settings) {
    out.max_tokens ??= settings.compare_limit;
    out.top_k ??= settings.compare_top_k;
  },
};
// branch and inspect: a Turn (the turn whose reply they read), with their own fields beside it.
DEFAULTS.Branch = DEFAULTS.Inspect = DEFAULTS.Turn;

/**
 * The arguments the worker gets for request `type` (a page->worker request: MESSAGES.requests)
 * from the page API's `args`: only the fields of its type, each read from its camelCase name and
 * copied, with the type's defaults from `settings` (build.json's).
 */
export function toWire(type, args = {}, settings = {}) {
  const kind = MESSAGES.requests[type]?.args;
  if (!kind) throw new TypeError(`chatlens: the worker takes no request ${type}`);
  const out = {};
  for (const name of FIELDS[kind]) {
    let value = args[camel(name)];
    if (value === undefined && WIRE_NAMES_TAKEN.has(type)) value = args[name];
    if (value !== undefined) out[name] = copy(value);
  }
  DEFAULTS[kind]?.(out, settings);
  return out;
}
