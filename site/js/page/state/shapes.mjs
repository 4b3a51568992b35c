// The shapes every area of the page's state shares (page/state.mjs composes the areas): the sealed
// record each part of the state is, a reply so far, and a slot where a reply that is not a live
// turn's is written.

// The state's records have fixed fields: a field not declared (a misspelt name) throws, read or
// written, instead of reading undefined (the way `customChosen` once read a field renamed away).
const IGNORED = new Set(["toJSON", "then", "constructor"]); // asked of any object by JSON, await, inspectors
export function record(fields) {
  return new Proxy(Object.seal(fields), {
    get(target, key) {
      if (typeof key === "string" && !(key in target) && !IGNORED.has(key)) throw new TypeError(`the page's state has no field ${key}`);
      return target[key];
    },
  });
}

/**
 * A reply so far: a chatlens.contract.Reply's fields as its tokens come. Every reply the page
 * shows is one while it is written (Live's turn, a plain-text side, each of the comparison's
 * four, the step box's branch), and the answer that replaces it once it ends (a TurnRecord, a
 * Continuation, a Compared cell) has the same fields, so one view draws both (views/reply.mjs):
 * reply_ids, reply_text, reply_tokens, reply_bytes (each id's token as text, and its bytes as
 * hex), stop_reason (null while it is written), top_k, top_k_tokens, top_k_bytes (null: tokens
 * bring no candidates, the answer does); and progress, the prompt read so far while it is read:
 * {read, of, ms, parts} (tokens read of all, ms since the job started, parts of a long GPU step
 * done), null once a token has come.
 */
export const replySoFar = () => Object.seal({
  reply_ids: [], reply_text: "", reply_tokens: [], reply_bytes: [], stop_reason: null,
  top_k: null, top_k_tokens: null, top_k_bytes: null, progress: null,
});

/** A token ({id, text, token, bytes}; id -1: only text, ending a character the ids before left
 * split) added to a reply so far: the one way a reply grows. */
export function addToken(reply, { id, text, token, bytes }) {
  if (id >= 0) reply.reply_ids.push(id), reply.reply_tokens.push(token), reply.reply_bytes.push(bytes);
  reply.reply_text += text;
  reply.progress = null;
}

/** Where a reply that is not a live turn's is written: a plain-text side, one of the comparison's
 * four. streaming: its reply so far while it is written; answer: the reply once it has ended (a
 * Continuation, a TurnRecord, a Compared cell); error: why there is none (a sentence). */
export const slotOf = () => Object.seal({ streaming: null, answer: null, error: null });
