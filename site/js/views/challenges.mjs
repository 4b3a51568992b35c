// The challenges box and the "Try this" suggestions.

import { CHALLENGES, done, stateText } from "../lesson/challenges.mjs";
import { SUGGESTIONS } from "../lesson/suggestions.mjs";
import { $, el, fill } from "./dom.mjs";

/** Each challenge with its state as text ("done" / "not yet"), what a completion showed, and
 * where the recording shows it (which never completes it). */
export function drawChallenges(progress) {
  $("challenge-count").textContent = `${done(progress)} of ${CHALLENGES.length} complete`;
  fill($("challenges"), 
    ...CHALLENGES.map((c) => {
      const isDone = progress[c.id] === true;
      const seen = !isDone && progress.seen?.[c.id];
      return el(
        "li",
        { class: isDone ? "done" : seen ? "seen" : "", dataset: { challenge: c.id } },
        el("span", { class: "check", "aria-hidden": "true", text: isDone ? "✓" : "○" }),
        el(
          "div",
          { class: "challenge" },
          el("b", { text: c.title }),
          " ",
          el("span", { class: "state", text: stateText(progress, c.id) }),
          el("div", { class: "challenge-text", text: c.text }),
          isDone && progress.showed?.[c.id] ? el("div", { class: "showed", text: progress.showed[c.id] }) : null,
          seen ? el("div", { class: "seen-where", text: `In the recording: ${progress.seen[c.id]}. Send it yourself in Live mode to complete it.` }) : null,
        ),
      );
    }),
  );
}

/** Suggestion buttons: the message, a short hint, and the sentence that says what it shows. */
function suggestionButtons(list, pick, label, recorded = false) {
  return list.map((item) => {
    // in the recording, a suggestion can show its own words (recorded.text): another message
    const s = recorded && item.recorded?.text ? { ...item, ...item.recorded, id: item.id } : item;
    return el(
      "li",
      {},
      el(
        "button",
        { type: "button", class: "suggestion", dataset: { suggestion: s.id || "" }, onclick: () => pick(item) },
        el("span", { class: "s-text", text: s.text.length > 60 ? s.text.slice(0, 57) + "…" : s.text }),
        s.hint ? el("small", { class: "s-hint", text: `${label} · ${s.hint}` }) : el("small", { class: "s-hint", text: label }),
      ),
      s.why ? el("p", { class: "why", text: s.why }) : null,
    );
  });
}

/** The Live mode suggestions (#suggestions): pick(text, suggestion) puts one into the draft (a
 * `fresh` one in a new conversation). */
export function drawSuggestions(pick) {
  fill($("suggestions"), ...suggestionButtons(SUGGESTIONS, (s) => pick(s.text, s), "put it in the draft"));
}

/** The Recorded mode suggestions (#rec-suggestions): jump(s) shows the recorded turn it is about;
 * `enabled(s)` says whether the recording has one. */
export function drawRecordedSuggestions(jump, enabled = () => true) {
  const box = $("rec-suggestions");
  if (!box) return;
  fill(box, ...suggestionButtons(SUGGESTIONS, jump, "show the recorded turn", true));
  box.querySelectorAll("button.suggestion").forEach((b, i) => {
    b.disabled = !enabled(SUGGESTIONS[i]);
  });
}
