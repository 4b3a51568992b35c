// How far a long computation is, in a learner's words: a cause's or a conversation's matrix
// (the worker's progress: {read, of, ms, doing, stage, parts, partsOf, covers}). The line says
// what is computed now (which piece, which measure), how many of how many passes (and replies),
// and a time left where one can be estimated; the GPU's parts of a step are a detail beside it.
// Pure: tests/page/progress.test.mjs.

import { count } from "./dom.mjs";

/** Seconds as a reader takes them: "about 40 s", "about 3 min". */
export function aboutTime(s) {
  if (s < 60) return `about ${Math.max(1, Math.round(s))} s`;
  return `about ${Math.round(s / 60)} min`;
}

/**
 * {line, detail}: line "system: knocked out · pass 2 of 7 · about 40 s left" (reply k of n first
 * for a matrix), detail the tokens run through and the GPU's part of its step, or "".
 * The time left is the time so far scaled by the tokens left, once a tenth of them is run
 * through and all of them are known (a cause's, once its step is read; a matrix's, on its last
 * reply): the passes cost by their tokens.
 */
export function workWords(p) {
  if (!p) return { line: "starting…", detail: "" };
  const st = p.stage ?? null;
  const parts = [];
  if (p.doing) parts.push(p.doing);
  if (st?.of > 0) parts.push(`pass ${Math.min(st.done + 1, st.of)} of ${st.of}`);
  const known = st ? st.of > 0 && (st.turns == null || st.turn === st.turns - 1) : false;
  if (known && p.of > 0 && p.read >= p.of / 10 && p.ms > 0) parts.push(`${aboutTime(((p.of - p.read) / p.read) * p.ms / 1000)} left`);
  const gpu = p.parts > 0 ? `; the GPU's part ${p.parts}${p.partsOf > 0 ? ` of ${p.partsOf}` : ""} of a step` +
    `${p.covers > 0 ? ` reading ${count(p.covers, "token")}` : ""}` : "";
  return { line: parts.join(" · ") || "starting…", detail: `${p.read} of ${count(p.of, "token")} run through${gpu}` };
}
