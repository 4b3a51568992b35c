// One step of a reply, as a request: what the page asks chatlens.inspect, chatlens.cause and
// chatlens.branch for a step of which reply. Both read a Turn, the request the turn's reply was written from (its
// messages, system prompt, window and reply limit: the worker renders the same prompt from it),
// with the reply and the step beside it. Where that request comes from:
//   a live turn        the request it was sent with (modes/live.mjs)
//   the draft          the preview's request, replyIds [] and step 0: the first token a reply to
//                      the draft would have
//   a recorded turn    the recording's messages, replies and system text (recordedRequest)
//   a comparison cell  the message as the cell's model read it in the cell's layout, one user
//                      message and no system prompt of the learner's (compareCellRequest)
//   plain text         the text as the one message, read with no template (plainRequest)
// and, once a branch is kept, the turn's record with the branch as its reply (keptRecord). No DOM:
// tests/page/step.test.mjs plays it in node, tests/test_page_step.py against the worker.

/** A step's arguments: the turn's request without its topK (the run's candidates a token; each
 * request here names its own K), the reply and the step. */
function stepOf(turn, replyIds, step) {
  const { topK, ...args } = turn;
  return { ...args, replyIds: [...replyIds], step };
}

/** chatlens.inspect's arguments for the step that chose replyIds[step] of the reply written from
 * `turn` (step replyIds.length: the step after the reply so far). topK: the lens's candidates a
 * layer (undefined: the engine's, 5). */
export function inspectRequest(turn, replyIds, step, { topK } = {}) {
  return { ...stepOf(turn, replyIds, step), topK };
}

/** chatlens.cause's arguments: which piece of the turn the step that chose replyIds[step] needed
 * (pieces: ["system:0", "user:0+assistant:0", ...]; undefined: every piece), every reply token's
 * figures with it (tokens: the token strip's; false for a figure alone). */
export function causeRequest(turn, replyIds, step, { pieces, tokens = true } = {}) {
  return { ...stepOf(turn, replyIds, step), pieces, tokens };
}

/** chatlens.needs's arguments: the conversation's matrix, read under `turn`'s settings (the last
 * turn's request), every assistant message of `messages` a reply measured with its ids
 * (`replies`, each as its record has them), each token's figures with it (the strips'). */
export function needsRequest(turn, messages, replies, { knocked = false } = {}) {
  const { topK, replyIds, step, ...args } = turn;
  return { ...args, messages, replies: replies.map((ids) => (ids ? [...ids] : null)), knocked, tokens: true };
}

/** chatlens.inspect's arguments for the first token of a reply to the draft `preview` (the
 * preview's request): no reply yet, step 0, whose query is the prompt's last token. */
export const draftRequest = (preview, options) => inspectRequest(preview, [], 0, options);

/** chatlens.branch's arguments: at `step` of the reply written from `turn`, take `id`, then go
 * on greedily. The turn's reply limit caps the whole branch; topK: the candidates each of the
 * branch's own steps records (the turn's, by default), and replyTopK the reply's own up to the
 * step (its record's top_k), so the branch, a reply with every step's candidates, can be
 * branched again. */
export function branchRequest(turn, replyIds, step, id, { topK = turn.topK, replyTopK = null } = {}) {
  return { ...stepOf(turn, replyIds, step), id, topK, replyTopK: replyTopK?.slice(0, step + 1) ?? null };
}

/** The request the recorded turn `index` of `conversation` (one of recorded.json's
 * conversations) was written from: the lesson's messages up to it, each earlier one answered by
 * its recorded reply, under the recording's system text (the date preset's is the recording's
 * day, not today), window and reply limit. */
export function recordedRequest(recorded, conversation, index) {
  const messages = [];
  for (let k = 0; k < index; k++) {
    messages.push({ role: "user", content: recorded.messages[k] });
    messages.push({ role: "assistant", content: conversation.turns[k].reply_text });
  }
  messages.push({ role: "user", content: recorded.messages[index] });
  return { messages, system: conversation.system, window: conversation.window, maxTokens: recorded.reply_limit };
}

/**
 * The request one of the comparison's cells was written from.
 * prompt: the comparison's prompt (chatlens.compare's onPrompt); cell: {model, layout};
 * settings: build.json's (windows, compare_limit); context: the model's whole context.
 * The message is the one user message, read by the cell's model in the cell's layout, with no
 * system prompt of the learner's. Its window is the smallest the site offers that holds the
 * prompt and the cap (a window only bounds what is dropped, and one message drops nothing), so
 * the worker's cache stays that small. Only the instruct model reading the chat template is a
 * turn a branch can continue (chatlens.branch reads the instruct model's turns): `branchWhy`
 * says so for the other three, null for it.
 */
export function compareCellRequest(prompt, { model, layout }, settings, context) {
  const cap = settings.compare_limit;
  const ids = layout === "plain" ? prompt.plain_ids : prompt.template_ids;
  const window = [...settings.windows].sort((a, b) => a - b).find((w) => w >= ids.length + cap) ?? context;
  const args = { messages: [{ role: "user", content: prompt.text }], preset: "none", window, maxTokens: cap, model, layout };
  const branchWhy = model === "instruct" && layout === "template" ? null
    : "A branch continues the instruct model's chat turns: this cell can be inspected, not branched.";
  return { args, branchWhy };
}

/** chatlens.inspect's arguments for plain text's continuation of `text` (plain text mode's
 * plain side): the text as the one message, read with no template. */
export const plainRequest = (text) => ({ messages: [{ role: "user", content: text }], layout: "plain" });

// What a reply wrote, of the record's fields: what a kept branch replaces (py/chatlens/record.py
// WRITTEN; the rest, what was reused and computed and how long it took, is the turn's own).
const WRITTEN = ["reply_ids", "reply_text", "reply_tokens", "reply_vocab", "reply_bytes", "stop_reason", "top_k", "top_k_tokens",
                 "top_k_bytes"];

/** The turn record once the branch `b` (chatlens.branch's answer: the branch as a reply, its
 * candidates included, built in Python) is kept: what the reply wrote is the branch's, marked as
 * chosen by hand (`branched`), the turn's own figures kept. The rule is defined once, in Python
 * (chatlens.record.TurnRecord.with_branch, which the command line's /keep uses); this follows it
 * field for field, its candidates included (every step's, or none), and tests/test_page_step.py
 * holds the two equal on a branch Python keeps. */
export function keptRecord(record, b) {
  const written = Object.fromEntries(WRITTEN.map((k) => [k, b[k]]));
  if (b.top_k?.includes(null)) Object.assign(written, { top_k: null, top_k_tokens: null, top_k_bytes: null });
  return { ...record, ...written, branched: { step: b.step, id: b.id, reply_ids: b.branched_from } };
}
