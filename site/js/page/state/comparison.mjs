// The comparison (modes/compare.mjs), an area of the page's state (page/state.mjs): which models
// are stored, the newest run and its four cells, the recorded comparison shown before any run.

import { record, replySoFar, slotOf } from "./shapes.mjs";

export const fields = () => ({
  // stored: which models the store holds (true, false, or null before it answers; baseSource:
  // the base's source, for the note on its weights); run: the newest run (compareRunOf), the
  // only one drawn (a new message stops the run before it); recorded: site/recorded-compare.json
  // once read (recordedError: why not), shown before any run; shape: the runs' models and
  // layouts, build.json's model_keys and layouts (chatlens.contract.MODELS, chatlens.compare.
  // LAYOUTS), set by settingsRead before any comparison can start.
  compare: record({ stored: record({ instruct: null, base: null, baseSource: null }), run: null, seq: 0, recorded: null,
                    recordedError: null, shape: null }),
});

/** A comparison run: its message, the prompt both read (once onPrompt answers), its four cells
 * (slots keyed model then layout, the answer's shape, from `shape`: build.json's model_keys and
 * layouts), how it ended (`answer`; `error`, a sentence; `stopped`, why the page stopped it, a
 * sentence, when it did) and `restored` (shown again after a reload, not computed now). */
const compareRunOf = (seq, text, controller, shape) => {
  if (!shape) throw new Error("the comparison's models and layouts come with build.json's settings, not read yet");
  const { model_keys: keys, layouts } = shape;
  return Object.seal({
    seq, text, controller, prompt: null, answer: null, error: null, stopped: null, restored: false,
    cells: Object.fromEntries(keys.map((m) => [m, Object.fromEntries(layouts.map((l) => [l, slotOf()]))])),
  });
};

/** The comparison's cells in the order they are computed (model_keys, then layouts: Python's
 * contract.MODELS and compare.LAYOUTS, carried by build.json): [{model, layout, cell}]. */
export const cellsOf = (run) => Object.entries(run?.cells ?? {}).flatMap(([model, byLayout]) =>
  Object.entries(byLayout).map(([layout, cell]) => ({ model, layout, cell })));

export function transitions({ state, emit }) {
  const changed = (run, what, detail = {}) => emit("compare", { run, current: state.compare.run === run, what, ...detail });
  // A comparison ended, however: the newest one ending ends the writing.
  const settled = (run) => {
    run.controller = null;
    if (state.compare.run === run) state.writing = false;
    changed(run, "settled");
  };
  return {
    /** The store said which models it holds: {instruct, base} (booleans), baseSource. */
    compareStored({ instruct, base, baseSource = null }) {
      Object.assign(state.compare.stored, { instruct, base, baseSource });
      emit("compare-stored");
    },
    /** A comparison of `text` starts (its AbortController): the run before it is no longer drawn.
     * Each cell waits until its reply begins (cellBegun). */
    compareStarted(text, controller) {
      const run = compareRunOf(state.compare.seq + 1, text, controller, state.compare.shape);
      state.compare.seq = run.seq;
      state.compare.run = run;
      state.writing = true;
      changed(run, "started");
      return run;
    },
    /** A comparison shown again as a reload found it saved (page/saved.mjs loadCompare): {text,
     * prompt, answer, error, stopped, cells: {model: {layout: {answer} | {streaming}}}}. */
    compareRestored(saved) {
      const run = compareRunOf(state.compare.seq + 1, saved.text, null, state.compare.shape);
      state.compare.seq = run.seq;
      Object.assign(run, { prompt: saved.prompt ?? null, answer: saved.answer ?? null, error: saved.error ?? null,
                           stopped: saved.stopped ?? null, restored: true });
      for (const { model, layout, cell } of cellsOf(run)) {
        const was = saved.cells?.[model]?.[layout];
        if (was?.answer) cell.answer = was.answer;
        else if (was?.streaming) cell.streaming = Object.assign(replySoFar(), was.streaming, { progress: null });
      }
      state.compare.run = run;
      changed(run, "restored");
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
      changed(run, "prompt");
    },
    /** One of the four begins its reply (known from its first progress or token: the four are
     * computed one after another, in cellsOf's order). */
    cellBegun(run, cell) {
      if (cell.streaming || cell.answer) return;
      cell.streaming = replySoFar();
      changed(run, "begun", { cell });
    },
    /** One of the four ended before the answer (the worker's cell_end: its end of turn, or the
     * cap): `stop` is its stop_reason, shown at once; the answer brings its candidates. */
    cellEnded(run, cell, stop) {
      if (!cell.streaming || cell.streaming.stop_reason) return;
      cell.streaming.stop_reason = stop;
      cell.streaming.progress = null;
      changed(run, "ended", { cell });
    },
    /** The page asks the comparison to stop: why, in a sentence (Stop pressed, the mode left, a
     * new message); the answer follows, its replies "stopped". */
    compareStopping(run, why) {
      run.stopped ??= why;
      changed(run, "stopping");
    },
    /** The four ended (end_turn, max_tokens or stopped each): the answer. */
    compareEnded(run, answer) {
      run.answer = answer;
      run.prompt ??= answer.prompt;
      for (const { model, layout, cell } of cellsOf(run)) Object.assign(cell, { answer: answer[model]?.[layout] ?? null, streaming: null });
      settled(run);
    },
    /** The comparison failed: why, in a sentence. */
    compareFailed(run, message) {
      run.error = message;
      settled(run);
    },
  };
}
