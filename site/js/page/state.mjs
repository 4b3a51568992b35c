// The page's state, and the only code that changes it: named transitions (a message sent, its
// record read, a token arrived, the reply ended, a mode chosen, a setting changed, ...). Each
// changes the state, then tells every subscriber what changed as {type, ...}: the modes call the
// API and the transitions, and app.mjs's subscriber redraws what the change touched. The live
// conversation is the page's own (the worker only caches: every request carries the whole
// conversation). No DOM here: tests/page/state.test.mjs plays it in node.

import * as challenges from "../lesson/challenges.mjs";
import * as inside from "../lesson/inside.mjs";

function initial(progress, insideProgress) {
  return {
    mode: "live",
    modeChosen: false, // the learner picked the mode (else it follows the store: app.mjs landingMode)
    customKept: false, // Recorded mode set a custom system prompt aside; Live gets it back
    view: "text", // the panel's tab: "text" | "tokens"
    live: record({ turns: [] }), // each turn: newTurn() below
    // A reply is being written: in Live, from the message sent to its reply's end (or its
    // failure); in plain text, while a side is written; in the comparison, while its four are.
    // One at a time: a send or a run while
    // this is true does nothing. (chatlens.writing, the API's, is true while a run is in flight,
    // whoever asked for it.)
    writing: false,
    draftSeq: 0, // the newest preview asked for; older answers are dropped
    counter: null, // the AbortController of the exact count in flight (modes/live.mjs countExactly)
    drawn: null, // the panel's last drawing: [record, caption, extra] (app.mjs page.draw)
    recorded: null, // the recorded file, once loaded
    recordedError: null,
    step: 0, // the recorded turn shown
    // The window chosen in another mode while Recorded mode offers only the recorded windows:
    // given back when Recorded mode is left (modes/recorded.mjs).
    windowAside: null,
    progress, // the challenges: lesson/challenges.mjs
    insideProgress, // "Look inside": lesson/inside.mjs's cases, each completed by a cause or a branch of a live turn
    // Whether live replies can be had, for the chat's banner (views/chat.mjs liveBanner):
    // state "unknown" (no run has answered yet), "none" (runs fail: `why` says why, e.g. the
    // weights are not downloaded; one banner says so and messages are marked "no reply"), or
    // "ready" (the model answers). offer: a backend that could compute them (a banner's button).
    replies: repliesOf({ state: "unknown", why: "" }),
    // "Why this token": replies carry each token's candidates, and the preview predicts the
    // first one (modes/live.mjs). Off by default: off costs nothing.
    why: false,
    nearTieGap: null, // build.json's near_tie_gap (chatlens.defaults), once the settings are read
    prediction: null, // {key, args, state: "pending" | "done" | "error", result, message}
    predicting: false, // a prediction is in flight: one at a time, the newest draft's next
    predictTimer: null, // the pause in typing before the prediction is asked (a timer's id)
    plain: null, // plain-text mode's text, its tokens and its two sides (plainText below; modes/plain.mjs)
    // What the page read at its start (app.mjs): a window that waits for the model's context
    // (prefs.mjs conversationPrefs's pendingWindow), the notes about ignored settings, and
    // whether the landing mode was chosen by the page (not by the learner or a saved choice).
    start: record({ pendingWindow: undefined, notes: [], landed: false }),
    workbench: record({ template: null, editing: "rows", seq: 0 }), // modes/workbench.mjs
    byHand: record({ source: null }), // the lab's hand-written Python as the package has it (modes/byhand.mjs)
    // The comparison (modes/compare.mjs): which models are stored (true, false, or null before
    // the store answers; baseSource: the base's source, for the note on its weights), and the
    // newest run (compareRunOf). A new message stops the run before it: only the newest is drawn.
    // recorded: site/recorded-compare.json once read (recordedError: why not), shown before any run.
    compare: record({ stored: record({ instruct: null, base: null, baseSource: null }), run: null, seq: 0, recorded: null,
                      recordedError: null }),
    // The reply being written in Live or in plain text, for Stop (one at a time: `writing`):
    // {mode ("live" or "plain"), controller, ended: a promise settled once its request has}
    // (modes/live.mjs, modes/plain.mjs); the comparison's run holds its own.
    stopper: null,
    // The step box (modes/steps.mjs): one step of a reply acted on, whatever mode drew the reply.
    //   named       {where, step}: the step a click named (where: steps.mjs whereOf's)
    //   status      {text, cls}: what the box says (a refusal, a step under way, "Kept: ...")
    //   inspection  {where, step, draft, controller, answer}: asked (answer null), then answered
    //               (chatlens.inspect's); draft: the draft's first token
    //   branch      {where, step, id, token, controller, streaming, answer, error}: another
    //               choice at a step, written as a reply is: streaming is what the model wrote
    //               after the id taken (a reply so far, tokenArrived's), kept once it ends with
    //               its stop_reason; answer chatlens.branch's (the branch as a reply); error why
    //               there is none (a sentence)
    //   cause       {where, step, controller, context, progress, answer, error, whole, showWhole}:
    //               which piece the step needed (chatlens.cause's answer; context: what Look
    //               inside measured beside it, for its line), asked (answer null; progress
    //               the worker's {read, of, doing}), then answered or failed (error a sentence);
    //               whole: the same at the reply's last step {controller, progress, answer, error}
    //               once asked (the whole reply so far), showWhole whether the view shows it
    //   reloaded    a sentence: a branch the last visit was writing when it went, said until a
    //               message is sent or the conversation cleared
    // A new message, a new conversation, another mode or a restored conversation closes it: what
    // it computes is stopped (the transitions below abort its controllers).
    stepBox: record({ named: null, status: null, inspection: null, branch: null, cause: null, reloaded: null }),
  };
}

// The state's records have fixed fields: a field not declared (a misspelt name) throws, read or
// written, instead of reading undefined (the way `customChosen` once read a field renamed away).
const IGNORED = new Set(["toJSON", "then", "constructor"]); // asked of any object by JSON, await, inspectors
function record(fields) {
  return new Proxy(Object.seal(fields), {
    get(target, key) {
      if (typeof key === "string" && !(key in target) && !IGNORED.has(key)) throw new TypeError(`the page's state has no field ${key}`);
      return target[key];
    },
  });
}
const repliesOf = ({ state, why, offer = null }) => record({ state, why, offer });

/**
 * A reply so far: a chatlens.protocol.Reply's fields as its tokens come. Every reply the page
 * shows is one while it is written (Live's turn, a plain-text side, each of the comparison's
 * four), and the answer that replaces it once it ends (a TurnRecord, a Continuation, a Compared
 * cell) has the same fields, so one view draws both (views/reply.mjs): reply_ids, reply_text,
 * reply_tokens, reply_bytes (each id's token as text, and its bytes as hex), stop_reason (null
 * while it is written), top_k, top_k_tokens, top_k_bytes (null: tokens bring no candidates, the
 * answer does); and progress, the prompt read so far while it is read: {read, of, ms, parts}
 * (tokens read of all, ms since the job started, parts of a long GPU step done), null once a
 * token has come.
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
const slotOf = () => Object.seal({ streaming: null, answer: null, error: null });

/** A live turn, every field declared: user (the message), settings (the key it was read under),
 * record (what the model read, then the reply's), reply (its text, undefined while it has none),
 * note and noteClass (why it has none), streaming (the reply being written: a reply so far),
 * saved (the bubble's lines as a reload saved them: prefs.mjs loadLive). */
export function newTurn({ user, settings, record = null, reply = undefined, note = undefined, noteClass = undefined, saved = undefined }) {
  return Object.seal({ user, settings, record, reply, note, noteClass, streaming: null, saved });
}

/** A comparison run: its message, the prompt both read (once onPrompt answers), its four cells
 * (slots keyed model then layout, the answer's shape, from `shape`: build.json's model_keys and
 * layouts), how it ended (`answer`; `error`, a sentence; `stopped`, why the page stopped it, a
 * sentence, when it did) and `restored` (shown again after a reload, not computed now). */
const compareRunOf = (seq, text, controller, { model_keys: keys, layouts }) => Object.seal({
  seq, text, controller, prompt: null, answer: null, error: null, stopped: null, restored: false,
  cells: Object.fromEntries(keys.map((m) => [m, Object.fromEntries(layouts.map((l) => [l, slotOf()]))])),
});

/** The comparison's cells in the order they are computed (model_keys, then layouts: Python's
 * protocol.MODELS and compare.LAYOUTS, carried by build.json): [{model, layout, cell}]. */
export const cellsOf = (run) => Object.entries(run?.cells ?? {}).flatMap(([model, byLayout]) =>
  Object.entries(byLayout).map(([layout, cell]) => ({ model, layout, cell })));

/** The store: {state, subscribe(fn) -> unsubscribe, ...transitions}. `progress`: the challenges
 * as saved (challenges.load() on the page); `insideProgress`: Look inside's (inside.load()). */
export function createStore(progress = {}, insideProgress = {}) {
  const state = record(initial(progress, insideProgress));
  const subscribers = new Set();
  const emit = (type, detail = {}) => {
    const change = { type, ...detail };
    for (const fn of subscribers) fn(change, state);
    return change;
  };
  // A turn's change is drawn only while the turn is in the conversation shown (a new
  // conversation may have started while it was read or written).
  const turnChange = (type, turn, detail = {}) => emit(type, { turn, current: state.live.turns.includes(turn), ...detail });
  // The reply of a turn being written, begun by its record or, from an API that does not answer
  // the record first, by its first progress or token.
  const begun = (turn) => {
    if (!turn.streaming && turn.reply === undefined && !turn.note && state.writing) turn.streaming = replySoFar();
    return turn.streaming;
  };
  /** Which mode shows the reply written at `at` (a live turn, a plain-text side, a comparison's
   * cell), or null when none does (a new conversation, text or comparison took its place). */
  const shownIn = (at) => {
    if (state.live.turns.includes(at)) return "live";
    if (state.stepBox.branch === at) return "branch";
    if (state.plain && (state.plain.plain === at || state.plain.chat === at)) return "plain";
    if (cellsOf(state.compare.run).some((c) => c.cell === at)) return "compare";
    return null;
  };
  /** The reply so far written at `at`; a live turn's begins here when its record did not come first. */
  const writtenAt = (at) => at.streaming ?? (state.live.turns.includes(at) ? begun(at) : null);
  /** A reply's change ({at, reply, mode, current}; a live turn's as `turn` too, as Live's are). */
  const replyChange = (type, at, reply, detail = {}) => {
    const mode = shownIn(at);
    emit(type, { at, reply, mode, current: mode !== null, ...(mode === "live" ? { turn: at } : {}), ...detail });
  };
  // A comparison ended, however: the newest one ending ends the writing.
  const compareSettled = (run) => {
    run.controller = null;
    const current = state.compare.run === run;
    if (current) state.writing = false;
    emit("compare", { run, current, what: "settled" });
  };
  // The comparison's models and layouts: build.json's settings, from Python's (py/chatlens/
  // protocol.py MODELS, compare.py LAYOUTS), read before any comparison can start.
  let shape = null;
  // The step box's changes: {type: "step-box", what}.
  const boxChange = (what) => emit("step-box", { what });
  /** The step box closed: the conversation it was about changed. What it computes is stopped. */
  const boxClosed = () => {
    const box = state.stepBox;
    box.inspection?.controller?.abort();
    box.branch?.controller?.abort();
    causeEnded();
    Object.assign(box, { named: null, status: box.reloaded ? { text: box.reloaded, cls: "note" } : null, inspection: null, branch: null });
  };
  /** The box's cause goes (another step named or inspected, the box closed): what it computes is stopped. */
  const causeEnded = () => {
    const cause = state.stepBox.cause;
    cause?.controller?.abort();
    cause?.whole?.controller?.abort();
    state.stepBox.cause = null;
  };
  /** Whether the box's cause is of another step than `where`'s `step`. */
  const causeElsewhere = (where, step) => {
    const cause = state.stepBox.cause;
    return cause !== null && (cause.where.record !== where.record || cause.step !== step);
  };
  /** The reply ended (end_turn, max_tokens or stopped): the turn's full record. Another turn's
   * reply ending closes a branch the step box holds: it was never that turn's. */
  function replied(turn, record) {
    turn.record = record;
    turn.reply = record.reply_text;
    turn.streaming = null;
    state.writing = false;
    const branch = state.stepBox.branch;
    if (branch && branch.where.turn !== turn) boxClosed(), boxChange("closed");
    turnChange("replied", turn, { stopped: record.stop_reason === "stopped" });
  }
  /** What a cause or a branch of a live turn completes of Look inside (lesson/inside.mjs). */
  const insideFound = (found) => {
    const next = inside.add(state.insideProgress, found);
    if (next === state.insideProgress) return;
    state.insideProgress = next;
    emit("inside");
  };

  return {
    state,
    subscribe(fn) {
      subscribers.add(fn);
      return () => subscribers.delete(fn);
    },

    // -- settings and modes ----------------------------------------------------------------------
    /** build.json was read: the numbers the views need from it. */
    settingsRead(settings) {
      state.nearTieGap = settings.near_tie_gap;
      if (settings.model_keys && settings.layouts) shape = { model_keys: settings.model_keys, layouts: settings.layouts };
      emit("settings-read");
    },
    /** The live conversation kept from the last visit (page/prefs.mjs loadLive). */
    restored(turns) {
      state.live = record({ turns: turns.map(newTurn) });
      boxClosed();
      emit("restored");
    },
    /** A restored turn's record read again (modes/live.mjs restoreRecords: the prompt read anew,
     * the reply as saved), or why it cannot be (a sentence, kept in its saved lines). */
    recordRestored(turn, { record = null, why = null }) {
      if (record) turn.record = record;
      else turn.saved = { ...turn.saved, why }; // kept: the next visit tries again
      turnChange("record-restored", turn);
    },
    /** A mode shown; chosen: the learner picked it (it is then remembered). */
    modeChosen(mode, { chosen = false } = {}) {
      if (chosen) state.modeChosen = true;
      state.mode = mode;
      boxClosed();
      emit("mode", { mode });
    },
    /** Recorded mode has no custom system prompt: kept aside (true) or given back (false). */
    customKept(on) {
      state.customKept = on;
    },
    /** Recorded mode set the window chosen elsewhere aside (a number), or gave it back (null). */
    windowAside(window) {
      state.windowAside = window;
    },
    /** The page's start read the saved settings: a window to check once the model is read, and
     * notes on what was ignored. */
    startRead({ pendingWindow, notes }) {
      state.start.pendingWindow = pendingWindow;
      state.start.notes = notes;
    },
    /** The page chose the landing mode itself (app.mjs landingMode). */
    landed() {
      state.start.landed = true;
    },
    /** The panel drew [record, caption, extra] (drawn again as it was when the tab changes). */
    panelDrawn(drawn) {
      state.drawn = drawn;
    },
    /** A control changed (system prompt, window, special tokens as text): the turn is read again. */
    settingChanged() {
      emit("setting");
    },
    viewChosen(view) {
      state.view = view;
      emit("view", { view });
    },
    whyChosen(on) {
      state.why = on;
      state.prediction = null;
      emit("why", { on });
    },
    /** Whether replies can be had (see `replies` above); `changed`: the banner differs now. */
    repliesKnown(replies) {
      const before = state.replies;
      state.replies = repliesOf(replies);
      const changed = ["state", "why", "offer"].some((k) => (replies[k] ?? null) !== (before[k] ?? null));
      emit("replies", { changed });
    },

    // -- the live conversation -------------------------------------------------------------------
    /** New conversation: Live starts over; Recorded goes back to its first turn. */
    cleared() {
      if (state.mode === "live") state.live = record({ turns: [] });
      else state.step = 0;
      state.stepBox.reloaded = null;
      boxClosed();
      emit("cleared", { mode: state.mode });
    },
    /** A preview is asked for: its number, to drop the answer if a newer one was asked since. */
    previewAsked() {
      return ++state.draftSeq;
    },
    isNewest: (seq) => seq === state.draftSeq,
    /** Preview `seq` answered: {args, caption, record} or {args, caption, error}; `current`: it is
     * still the newest (an older answer is not drawn). */
    previewed(seq, answer) {
      emit("previewed", { ...answer, current: seq === state.draftSeq });
    },
    /** A preview too long for the window (its bound, WindowError's at_least) counted exactly:
     * {counted} (the exact figures) or {error}. */
    /** An exact count started (its AbortController), or ended (null); a newer one aborts it. */
    countStarted(controller) {
      state.counter = controller;
    },
    counted(seq, answer) {
      emit("counted", { ...answer, current: seq === state.draftSeq });
    },
    /** The user sent `text` (read under `settings`, a key): its turn, with no record yet; a reply
     * is being written from now on (`writing`). A message sent again (sentAgain) takes the
     * place of the one that got no reply. */
    sent(text, settings) {
      if (sentAgain(state, text)) state.live.turns.pop();
      state.writing = true;
      state.stepBox.reloaded = null;
      boxClosed();
      const turn = newTurn({ user: text, settings });
      state.live.turns.push(turn);
      turnChange("sent", turn);
      return turn;
    },
    /** The message could not be read (too long, Python failed): its turn is taken back. */
    unsent(turn, error) {
      const current = state.live.turns.includes(turn);
      if (current) state.live.turns.splice(state.live.turns.indexOf(turn), 1);
      state.writing = false;
      emit("unsent", { turn, current, error });
    },
    /** The turn's record (what the model reads) came back: its reply starts. */
    read(turn, record) {
      turn.record = record;
      turn.streaming ??= replySoFar();
      turnChange("read", turn);
    },

    // -- a reply being written, whatever the mode ---------------------------------------------------
    /** A token of the reply written at `at` (a live turn, a plain-text side, a comparison's cell):
     * {id, text, token, bytes}, added to its reply so far. The change carries the reply: the one
     * view that draws it appends the token (views/reply.mjs replyGrew). */
    tokenArrived(at, token) {
      const reply = writtenAt(at);
      // (a reply the page saw end takes only the text its last ids left unfinished, id -1)
      if (!reply || (reply.stop_reason && token.id >= 0)) return;
      addToken(reply, token);
      replyChange("token", at, reply, { token });
    },
    /** The prompt of the reply written at `at` is being read: {read, of, ms, parts} so far. */
    progressed(at, progress) {
      const reply = writtenAt(at);
      if (!reply) return;
      reply.progress = progress;
      replyChange("progress", at, reply);
    },
    /** Stop was pressed: the reply ends with what it has (a `replied` with stop_reason stopped). */
    stopAsked() {
      emit("stopping");
    },
    replied,
    /** No reply could be had: the turn says why; `record`: what the model would have read, when
     * the run failed before it said. */
    failed(turn, message, record = turn.record) {
      turn.record = record;
      turn.note = `No reply: ${message}`;
      turn.noteClass = "no-reply";
      turn.streaming = null;
      state.writing = false;
      turnChange("failed", turn);
    },

    // -- the prediction while the user types -----------------------------------------------------
    /** The prediction for a new draft is wanted (its key: the draft's arguments). */
    predicting(key, args) {
      state.prediction = Object.seal({ key, args, state: "pending", result: undefined, message: undefined });
      return state.prediction;
    },
    /** The prediction waits for a pause in typing: the timer that asks it (the one before is
     * cleared by the caller). */
    predictScheduled(timer) {
      state.predictTimer = timer;
    },
    /** A prediction was asked of the model (true), or answered (false). */
    predictAsked(on) {
      state.predicting = on;
    },
    /** A prediction's answer: {state: "done", result} or {state: "error", message}. */
    predicted(wanted, answer) {
      Object.assign(wanted, answer);
      emit("predicted", { prediction: wanted, current: state.prediction === wanted });
    },

    // -- the step box: one step of a reply, inspected or branched (modes/steps.mjs) ------------------
    /** A click named a step of a reply (where: steps.mjs whereOf's). */
    stepNamed(where, step) {
      if (causeElsewhere(where, step)) causeEnded();
      Object.assign(state.stepBox, { named: { where, step }, status: null });
      boxChange("named");
    },
    /** The box says `text` (cls: "note", "error", "kept"). */
    stepSaid(text, cls = "note") {
      state.stepBox.status = { text, cls };
      boxChange("said");
    },
    /** An inspection is asked (its AbortController; `says`: the line while it computes): the one
     * before it is stopped. Returns it, for inspected/inspectFailed. */
    inspectionAsked(where, step, { draft = false, controller, says }) {
      const box = state.stepBox;
      box.inspection?.controller?.abort();
      if (causeElsewhere(where, step)) causeEnded();
      box.inspection = Object.seal({ where, step, draft, controller, answer: null });
      box.status = { text: says, cls: "note" };
      boxChange("inspecting");
      return box.inspection;
    },
    /** The inspection answered (chatlens.inspect's), if it is still the box's: shown (a cause of
     * the same step names where it looked in its Look inside line). */
    inspected(inspection, answer) {
      if (state.stepBox.inspection !== inspection) return;
      Object.assign(inspection, { answer, controller: null });
      state.stepBox.status = null;
      boxChange("inspected");
    },
    /** The inspection failed (a sentence) or was stopped (null: nothing said), if it is still the box's. */
    inspectFailed(inspection, message) {
      if (state.stepBox.inspection !== inspection) return;
      state.stepBox.inspection = null;
      state.stepBox.status = message ? { text: message, cls: "error" } : state.stepBox.status;
      boxChange("inspect-failed");
    },
    /** The inspection's Close. */
    inspectionClosed() {
      state.stepBox.inspection = null;
      boxChange("inspection-closed");
    },
    /** Which piece a step needed is asked (its AbortController): the cause before it is stopped.
     * Returns it, for causeProgress, caused and causeFailed. */
    causeAsked(where, step, { controller, context = {} }) {
      causeEnded();
      const box = state.stepBox;
      box.cause = Object.seal({ where, step, controller, context, progress: null, answer: null, error: null, whole: null,
                                showWhole: false });
      box.status = null;
      boxChange("causing");
      return box.cause;
    },
    /** The whole reply so far is asked for the box's cause: the same at the reply's last step. */
    wholeAsked(cause, { controller }) {
      if (state.stepBox.cause !== cause) return null;
      cause.whole?.controller?.abort();
      cause.whole = Object.seal({ controller, progress: null, answer: null, error: null });
      cause.showWhole = true;
      boxChange("causing");
      return cause.whole;
    },
    /** How far a cause (or its whole reply's) has got: the worker's progress. */
    causeProgress(cause, part, progress) {
      if (state.stepBox.cause !== cause) return;
      part.progress = progress;
      boxChange("cause-progress");
    },
    /** A cause (or its whole reply's: part) answered, or failed (a sentence; null: stopped, nothing
     * said). A live turn's completes what it shows of Look inside. */
    caused(cause, part, { answer = null, error = null }) {
      part.controller = null;
      if (state.stepBox.cause !== cause) return;
      Object.assign(part, { answer, error, progress: null });
      if (answer && part === cause && cause.where.kind === "live") {
        const seen = state.stepBox.inspection;
        const inspection = seen?.where.record === cause.where.record && seen.step === cause.step ? seen.answer : null;
        insideFound(inside.caused(cause.where.record, answer, { inspection, ...cause.context }));
      }
      boxChange("caused");
    },
    /** The view shows the cause's whole reply so far (show), or its step. */
    wholeShown(cause, show) {
      if (state.stepBox.cause !== cause) return;
      cause.showWhole = show;
      boxChange("cause-shown");
    },
    /** The cause's Close (and Stop: what it computes is stopped). */
    causeClosed() {
      causeEnded();
      boxChange("cause-closed");
    },
    /** A branch starts (another id at a step: its token's text, its AbortController); the one
     * before it is stopped. Its reply streams through tokenArrived. Returns it. */
    branchStarted(where, step, id, token, controller) {
      const box = state.stepBox;
      box.branch?.controller?.abort();
      box.branch = Object.seal({ where, step, id, token, controller, streaming: replySoFar(), answer: null, error: null });
      box.status = null;
      boxChange("branch");
      return box.branch;
    },
    /** The branch ended: {answer} (chatlens.branch's) or {error} (a sentence). One of a live
     * turn completes what it shows of Look inside. */
    branchEnded(branch, { answer = null, error = null }) {
      branch.controller = null;
      if (state.stepBox.branch !== branch) return;
      Object.assign(branch, { answer, error });
      if (answer) {
        branch.streaming.stop_reason = answer.stop_reason;
        branch.streaming.progress = null;
        branch.token = answer.reply_tokens?.[branch.step] ?? branch.token;
        if (branch.where.kind === "live") insideFound(inside.branched(branch.where.record, answer, state.nearTieGap));
      }
      boxChange("branch-ended");
    },
    /** The branch is kept (its turn checked by the caller: the conversation's last, its reply
     * unchanged): its turn's record becomes `record` (page/step.mjs keptRecord's), through the
     * one transition for a reply that ended; the box says so. */
    branchKept(branch, record, said) {
      const turn = branch.where.turn;
      Object.assign(state.stepBox, { named: null, inspection: null, branch: null, status: { text: said, cls: "kept" } });
      boxChange("kept");
      replied(turn, record);
    },
    /** The branch is dropped: stopped if it is being written; the conversation is as it was. */
    branchDropped(branch) {
      branch.controller?.abort();
      if (state.stepBox.branch === branch) state.stepBox.branch = null;
      state.stepBox.status = { text: "Dropped: the conversation is as it was.", cls: "note" };
      boxChange("dropped");
    },
    /** The page's last visit was writing a branch when it went: `said` (a sentence), until a
     * message is sent or the conversation cleared. */
    branchReloaded(said) {
      state.stepBox.reloaded = said;
      if (said) state.stepBox.status = { text: said, cls: "note" };
      boxChange("said");
    },

    // -- the challenges --------------------------------------------------------------------------
    /** A record seen (live: a turn sent and answered; else a recorded turn): what it completes. */
    observed(record, { live, where, now = new Date() }) {
      const next = challenges.observe(state.progress, record, now, { live, where });
      if (next === state.progress) return;
      state.progress = next;
      emit("challenges");
    },
    progressReset() {
      state.progress = {};
      emit("challenges");
    },
    /** The reply being written in Live or plain text (`stopper` above) started, or ended (null). */
    stopperSet(stopper) {
      state.stopper = stopper;
    },

    // -- recorded mode ---------------------------------------------------------------------------
    recordedLoaded(doc) {
      state.recorded = doc;
      state.recordedError = null;
    },
    recordedFailed(message) {
      state.recordedError = message;
    },
    /** The recorded turn asked for (a button, a "Try this" jump). */
    stepped(step) {
      state.step = step;
      emit("step", { step });
    },
    /** The turn shown, clamped to the conversation's turns (no redraw: it is being drawn). */
    stepShown(step) {
      state.step = step;
    },

    // -- plain-text mode -------------------------------------------------------------------------
    /** The text to read: a new one starts fresh (its tokens unknown, and its two sides, "plain"
     * (the continuation) and "chat" (the same words as a chat message), slots with nothing in them). */
    plainText(text) {
      if (!state.plain || state.plain.text !== text) state.plain = Object.seal({ text, tokens: null, error: null, seq: 0, plain: slotOf(), chat: slotOf() });
      return state.plain;
    },
    /** A side of plain text is being written (true) or ended (false). */
    plainWriting(on) {
      state.writing = on;
      emit("plain-writing", { on });
    },
    /** The text's tokens (or why not), for `p` if it is still the text shown. */
    tokenized(p, { tokens = null, error = null }) {
      if (state.plain !== p) return;
      p.tokens = tokens;
      p.error = error;
      emit("plain");
    },
    /** A plain-text side (a slot of state.plain) starts its reply. */
    sideStarted(side) {
      Object.assign(side, { streaming: replySoFar(), answer: null, error: null });
      if (shownIn(side)) emit("plain");
    },
    /** A plain-text side ended: {answer} (a Continuation, or the TurnRecord) or {error}. */
    sideEnded(side, { answer = null, error = null }) {
      Object.assign(side, { streaming: null, answer, error });
      if (shownIn(side)) emit("plain");
    },

    // -- the comparison ---------------------------------------------------------------------------
    /** The store said which models it holds: {instruct, base} (booleans), baseSource. */
    compareStored({ instruct, base, baseSource = null }) {
      Object.assign(state.compare.stored, { instruct, base, baseSource });
      emit("compare-stored");
    },
    /** A comparison of `text` starts (its AbortController): the run before it is no longer drawn.
     * Each cell waits until its reply begins (cellBegun). */
    compareStarted(text, controller) {
      if (!shape) throw new Error("the comparison's models and layouts come with build.json's settings, not read yet");
      const run = compareRunOf(++state.compare.seq, text, controller, shape);
      state.compare.run = run;
      state.writing = true;
      emit("compare", { run, current: true, what: "started" });
      return run;
    },
    /** A comparison shown again as a reload found it saved (prefs.mjs loadCompare): {text,
     * prompt, answer, error, stopped, cells: {model: {layout: {answer} | {streaming}}}}. */
    compareRestored(saved) {
      if (!shape) throw new Error("the comparison's models and layouts come with build.json's settings, not read yet");
      const run = compareRunOf(++state.compare.seq, saved.text, null, shape);
      Object.assign(run, { prompt: saved.prompt ?? null, answer: saved.answer ?? null, error: saved.error ?? null,
                           stopped: saved.stopped ?? null, restored: true });
      for (const { model, layout, cell } of cellsOf(run)) {
        const was = saved.cells?.[model]?.[layout];
        if (was?.answer) cell.answer = was.answer;
        else if (was?.streaming) cell.streaming = Object.assign(replySoFar(), was.streaming, { progress: null });
      }
      state.compare.run = run;
      emit("compare", { run, current: true, what: "restored" });
      return run;
    },
    /** The recorded comparison was read (doc), or could not be (error: why). */
    compareRecordedLoaded(doc, error = null) {
      state.compare.recorded = doc;
      state.compare.recordedError = error;
      emit("compare", { run: state.compare.run, current: true, what: "recorded" });
    },
    /** What both models read came back (before any token). */
    comparePrompt(run, prompt) {
      run.prompt = prompt;
      emit("compare", { run, current: state.compare.run === run, what: "prompt" });
    },
    /** One of the four begins its reply (known from its first progress or token: the four are
     * computed one after another, in cellsOf's order). */
    cellBegun(run, cell) {
      if (cell.streaming || cell.answer) return;
      cell.streaming = replySoFar();
      emit("compare", { run, current: state.compare.run === run, cell, what: "begun" });
    },
    /** One of the four ended before the answer (the worker's cell_end: its end of turn, or the
     * cap): `stop` is its stop_reason, shown at once; the answer brings its candidates. */
    cellEnded(run, cell, stop) {
      if (!cell.streaming || cell.streaming.stop_reason) return;
      cell.streaming.stop_reason = stop;
      cell.streaming.progress = null;
      emit("compare", { run, current: state.compare.run === run, cell, what: "ended" });
    },
    /** The page asks the comparison to stop: why, in a sentence (Stop pressed, the mode left, a
     * new message); the answer follows, its replies "stopped". */
    compareStopping(run, why) {
      run.stopped ??= why;
      emit("compare", { run, current: state.compare.run === run, what: "stopping" });
    },
    /** The four ended (end_turn, max_tokens or stopped each): the answer. */
    compareEnded(run, answer) {
      run.answer = answer;
      run.prompt ??= answer.prompt;
      for (const { model, layout, cell } of cellsOf(run)) Object.assign(cell, { answer: answer[model]?.[layout] ?? null, streaming: null });
      compareSettled(run);
    },
    /** The comparison failed: why, in a sentence. */
    compareFailed(run, message) {
      run.error = message;
      compareSettled(run);
    },

    // -- the workbench and the hand-written Python -----------------------------------------------
    /** The model's chat template came: {source, names, special_tokens}. */
    workbenchTemplate(template) {
      state.workbench.template = template;
    },
    /** The messages are edited as "rows" or "json". */
    workbenchEditing(editing) {
      state.workbench.editing = editing;
    },
    /** A render is asked for: its number (only the newest answer is drawn). */
    workbenchAsked() {
      return ++state.workbench.seq;
    },
    /** The lab's Python source was read from the package. */
    byHandRead(source) {
      state.byHand.source = source;
    },
  };
}

/** Whether a turn's message got no reply (and none is coming): the worker failed, or a reload
 * cut it off before the model wrote anything. */
export const unanswered = (turn) => turn.reply === undefined && !turn.streaming && Boolean(turn.note);

/** Whether `text` is the last message sent again: it got no reply (a reload cut it off, the
 * worker died), replies can be had now, and the text is the same. Without replies at all, a
 * message sent twice is two messages (the window fills, message by message). */
export function sentAgain(state, text) {
  const last = state.live.turns.at(-1);
  return Boolean(last && unanswered(last) && last.user === text && state.replies.state !== "none");
}

/** The messages of the live conversation, then `extra` as the new user message. A message that
 * got no reply stays in it (the page without a model still fills the window, message by
 * message), so the next follows it directly. partial: a reply being written counts with what it
 * has written so far (a draft previewed during a reply). */
export function liveMessages(state, extra, { partial = false } = {}) {
  const msgs = [];
  for (const t of state.live.turns) {
    msgs.push({ role: "user", content: t.user });
    if (t.reply !== undefined) msgs.push({ role: "assistant", content: t.reply });
    else if (partial && t.streaming) msgs.push({ role: "assistant", content: t.streaming.reply_text });
  }
  if (extra !== undefined) msgs.push({ role: "user", content: extra });
  return msgs;
}
