// What the page sends the worker for a preview or a run: the shape py/chatlens/worker.py reads.

/** The request the worker gets (py/chatlens/worker.py): a structured-clone-safe copy with only
 * the fields it reads. The reply limit (maxTokens) defaults to the site's; the reserve kept free
 * in the window for the reply defaults to the reply limit. topK (each reply token's best
 * candidates) is sent only when asked for. */
export function plain(args, settings) {
  const out = { messages: args.messages.map((m) => ({ role: String(m.role), content: String(m.content) })) };
  for (const k of ["system", "preset", "custom", "window", "maxTokens", "topK", "specialInText"]) {
    if (args[k] !== undefined) out[k] = args[k];
  }
  out.maxTokens = args.maxTokens ?? args.reserve ?? settings.reply_limit;
  out.reserve = args.reserve ?? out.maxTokens;
  return out;
}
