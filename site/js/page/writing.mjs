// The one rule for what a reply being written (chatlens.writing) holds off, used by the page's
// buttons (modes/steps.mjs refusal) and by window.chatlens (api.mjs) alike: a job that looks at a
// reply already written (a step inspected, a piece taken away, which turn each reply needed, a
// branch) needs the model the reply is using, so while one is written it is refused at once, in a
// sentence that says what to do, not queued behind it where it would wait with nothing said.
// A new reply (run, complete, compare) still waits for the one before, as api.mjs documents, and
// a prediction of the draft's first token is not asked while a reply is written (modes/live.mjs).

/** The jobs refused while a reply is written, each with the words its sentence starts with (the
 * page's buttons use the same words). */
export const HELD_OFF = {
  inspect: "Inspecting a step",
  cause: "Taking a piece away",
  needs: "Measuring which turn each reply needed",
  branch: "A branch",
};

/** The sentence: "Taking a piece away waits for the reply being written: press Stop, or ...". */
export const waitsForReply = (what) => `${what} waits for the reply being written: press Stop, or wait until it ends, then ask again.`;
