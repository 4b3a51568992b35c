// The challenges box and the "Try this" suggestions.

import { CHALLENGES, done } from "../challenges.mjs";
import { $, el } from "./dom.mjs";

export function drawChallenges(progress) {
  $("challenge-count").textContent = `${done(progress)} of ${CHALLENGES.length} complete`;
  $("challenges").replaceChildren(
    ...CHALLENGES.map((c) =>
      el(
        "li",
        { class: progress[c.id] ? "done" : "", dataset: { challenge: c.id } },
        el("span", { class: "check", "aria-hidden": "true", text: progress[c.id] ? "✓" : "○" }),
        el("b", { text: c.title }),
        " ",
        el("span", { text: c.text }),
      ),
    ),
  );
}

/** The suggestion buttons; pick(text) puts one into the draft. */
export function drawSuggestions(suggestions, pick) {
  $("suggestions").replaceChildren(
    ...suggestions.map((s) =>
      el(
        "button",
        { type: "button", class: "suggestion", title: s.hint, onclick: () => pick(s.text) },
        s.text.length > 60 ? s.text.slice(0, 57) + "…" : s.text,
        s.hint ? el("small", { text: s.hint }) : null,
      ),
    ),
  );
}
