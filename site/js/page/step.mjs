// One step of a reply, as a request: what the page asks chatlens.inspect and chatlens.branch for
// a step of which reply. Both read a Turn, the request the turn's reply was written from (its
// messages, system prompt, window and reply limit: the worker renders the same prompt from it),
// with the reply and the step beside it. Where that request comes from:
//   a live turn        the request it was sent with (modes/live.mjs)
//   the draft          the preview's request, replyIds [] and step 0: the first token a reply to
//                      the draft would have
//   a recorded turn    the recording's messages, replies and system text (recordedRequest)
//   a comparison cell  the message as the cell's model read it in the cell's layout, one user
//                      message and no system prompt of the learner's (compareCellRequest)
//   plain text         the text as the one message, read with no template (plainRequest)
// and, once a branch is kept, the turn's record with the branch as its reply (withBranch). No DOM:
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

/** chatlens.inspect's arguments for the first token of a reply to the draft `preview` (the
 * preview's request): no reply yet, step 0, whose query is the prompt's last token. */
export const draftRequest = (preview, options) => inspectRequest(preview, [], 0, options);

/** chatlens.branch's arguments: at `step` of the reply written from `turn`, take `id`, then go
 * on greedily. The turn's reply limit caps the whole branch; topK: the candidates each of the
 * branch's own steps records (the turn's, by default), so the branch can be branched again. */
export function branchRequest(turn, replyIds, step, id, { topK = turn.topK } = {}) {
  return { ...stepOf(turn, replyIds, step), id, topK };
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

/** The turn record once the branch `branched` (chatlens.branch's answer) is kept: its reply is the
 * branch, marked as chosen by hand (`branched`), as chatlens.record.TurnRecord.with_branch makes
 * it. Two differences, both of what the page holds: reply_vocab is null (the answer carries no
 * vocabulary spelling, and the page reads none), and the candidates of every step are kept when
 * both the reply's and the branch's are known (the steps up to the one replaced are the reply's,
 * the one replaced included: the same ids were read there; the rest the branch's), so the kept
 * reply can be branched again from any step. */
export function withBranch(record, branched) {
  const { step } = branched;
  const known = record.top_k?.length > step && branched.top_k;
  return {
    ...record,
    reply_ids: branched.branch_ids,
    reply_text: branched.branch_text,
    reply_tokens: branched.branch_tokens,
    reply_vocab: null,
    reply_bytes: branched.branch_bytes,
    stop_reason: branched.stop_reason,
    top_k: known ? [...record.top_k.slice(0, step + 1), ...branched.top_k] : null,
    top_k_tokens: known ? [...record.top_k_tokens.slice(0, step + 1), ...branched.top_k_tokens] : null,
    top_k_bytes: known ? [...record.top_k_bytes.slice(0, step + 1), ...branched.top_k_bytes] : null,
    branched: { step, id: branched.id, reply_ids: branched.reply_ids },
  };
}
