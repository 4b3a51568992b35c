// What the page sends the worker for a chat turn: a Turn (site/js/worker/protocol.gen.mjs,
// written from py/chatlens/protocol.py), made from the page API's arguments.

import { FIELDS } from "../worker/protocol.gen.mjs";

/** The page's API names its arguments in JavaScript's camelCase; the wire, as Python does. */
const camel = (name) => name.replace(/_(\w)/g, (_, c) => c.toUpperCase());

/** The Turn the worker gets for chatlens.preview / run / predict(args): a structured-clone-safe
 * copy with only a Turn's fields. The reply limit (maxTokens) defaults to the site's; the reserve
 * kept free in the window for the reply defaults to the reply limit. topK (each reply token's
 * best candidates) is sent only when asked for. */
export function plain(args, settings) {
  const out = {};
  for (const name of FIELDS.Turn) {
    const value = args[camel(name)];
    if (value !== undefined) out[name] = value;
  }
  out.messages = args.messages.map((m) => ({ role: String(m.role), content: String(m.content) }));
  out.max_tokens = args.maxTokens ?? args.reserve ?? settings.reply_limit;
  out.reserve = args.reserve ?? out.max_tokens;
  return out;
}
