// The challenges box, the "Try this" suggestions, and the "Look inside" cases.

import { CHALLENGES, done, stateText } from "../lesson/challenges.mjs";
import { CASES, done as doneInside } from "../lesson/inside.mjs";
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

/** The "Look inside" box (lesson/inside.mjs), after the challenges: each case with what to do,
 * where to look, a button that runs it (tryCase(c)), and once done the line its own inspection or
 * branch measured. The box is made here the first time: the page's HTML has none. */
export function drawInside(progress, tryCase) {
  let box = $("inside-box");
  if (!box) {
    box = el("div", { id: "inside-box", class: "box inside-box" });
    $("challenges").closest(".box").after(box);
  }
  fill(
    box,
    el("h3", {}, "Look inside ", el("span", { id: "inside-count", class: "count", text: `${doneInside(progress)} of ${CASES.length} complete` })),
    el("p", { class: "about", text: "Where the reply's words came from: each one sends the lesson's message in Live mode (the model must be stored), then opens the step under the panel. It completes from what your own inspection or branch measured." }),
    el("ul", { class: "challenges inside" }, CASES.map((c) => {
      const line = progress[c.id];
      return el(
        "li",
        { class: line ? "done" : "", dataset: { inside: c.id } },
        el("span", { class: "check", "aria-hidden": "true", text: line ? "✓" : "○" }),
        el(
          "div",
          { class: "challenge" },
          el("b", { text: c.title }), " ", el("span", { class: "state", text: line ? "done" : "not yet" }),
          el("div", { class: "challenge-text", text: c.text }),
          el("div", { class: "challenge-text inside-look", text: c.look }),
          el("button", { type: "button", class: "inside-try", dataset: { inside: c.id }, onclick: () => tryCase(c),
                         text: c.id === "branch" ? "Try it on the reply shown" : "Try it" }),
          line ? el("div", { class: "showed", text: line }) : null,
        ),
      );
    })),
  );
}
