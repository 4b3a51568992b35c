// A branch: at one step of a reply, another token taken by hand, and what the model wrote after
// it (chatlens.branch), drawn beside the reply it came from, with the point where they part.
//
// What a learner is offered first are the near-ties: steps whose two best candidates are closer
// than the site's near_tie_gap, where another device's rounding could have taken the other one
// ("the model nearly chose ..."). The rule is views/why.mjs's isNearTie, the one "why this token"
// marks them by.
//
// The branch as the view draws it (the page's state holds it, page/state/stepbox.mjs stepBox.branch;
// views/branch.mjs only draws):
//   step, id       where, and which id was taken by hand
//   token          that id's token as text (from the step's candidates)
//   streaming      what the model wrote after it: a reply so far (state.mjs replySoFar), drawn
//                  by the one reply view (views/reply.mjs), which appends each token as it comes
//   answer         chatlens.branch's answer once it has ended (null while it streams)
//   error          a sentence, when it failed
// Keep and Drop (and Stop while it streams) are the caller's: callbacks.

import { streamed } from "./bytes.mjs";
import { count, el } from "./dom.mjs";
import { replyView } from "./reply.mjs";
import { visibleToken } from "./tokens.mjs";
import { isNearTie, percent } from "./why.mjs";

/** The steps of `record`'s reply that are near-ties (why.mjs isNearTie), in reply order, each
 * with the candidate the model nearly chose: [{step, id, token, p, chosen, chosenToken, behind}],
 * `behind` the logits between the two. The branches offered first. */
export function nearTieOffers(record, gap) {
  const out = [];
  (record.top_k ?? []).forEach((row, step) => {
    // a step chosen by hand (a kept branch's) is no near-tie of the model's own choosing
    if (!isNearTie(row, gap) || (record.reply_ids && record.reply_ids[step] !== row[0][0])) return;
    const [[chosen, top], [id, logit, p]] = row;
    out.push({ step, id, token: record.top_k_tokens?.[step]?.[1] ?? "", p, chosen, chosenToken: record.top_k_tokens?.[step]?.[0] ?? "",
               behind: top - logit });
  });
  return out;
}

/** A step's candidates a branch can take, best first, the id the reply took left out:
 * [{id, token, p, logit, near}], near for the one the model nearly chose at a near-tie. */
export function branchChoices(record, step, gap) {
  const row = record.top_k?.[step];
  if (!row) return [];
  const chosen = record.reply_ids?.[step] ?? row[0][0];
  // the runner-up of a near-tie the model decided itself (not a step a kept branch chose by hand)
  const near = isNearTie(row, gap) && chosen === row[0][0] ? row[1][0] : null;
  return row
    .map(([id, logit, p], rank) => ({ id, token: record.top_k_tokens?.[step]?.[rank] ?? "", p, logit, near: id === near }))
    .filter((c) => c.id !== chosen);
}

/** "the model nearly chose “ her” (0.004 logits behind “ his”)": a near-tie offer in words. */
export function nearlyChose(offer) {
  return `the model nearly chose “${visibleToken(offer.token)}” (${offer.behind.toFixed(4)} logits behind ` +
    `“${visibleToken(offer.chosenToken)}”)`;
}

/** The reply's text token by token, from its bytes: what each adds (a character once whole). */
const textsOf = (bytes) => (bytes?.length ? streamed(bytes) : []);

/** What the branch's figures say: the cache's, from the answer alone. */
export function cacheSentence(answer, promptLength) {
  const { reused_tokens: reused, computed_tokens: computed, step } = answer;
  if (reused === promptLength + step && computed === 1) {
    const parts = step === 0 ? "the whole prompt" : `the prompt's ${promptLength} and the reply's first ${step === 1 ? "token" : step}`;
    return `From the cache: ${count(reused, "token")}, ${parts}. ` +
      "Computed: 1 token, the one chosen by hand, before the branch's own first choice.";
  }
  return `From the cache: ${count(reused, "token")}. Computed before the branch's own first choice: ${count(computed, "token")}.`;
}

/** One side of the fork: the token it parts with (marked) and the text after it. */
function side(title, cls, partToken, partTitle, rest, { writing = false, end = null, count: n }) {
  return el(
    "div",
    { class: `fork-side ${cls}` },
    el("div", { class: "fork-title" }, el("b", { text: title }), ` · ${n}`),
    el(
      "div",
      { class: `fork-text${writing ? " is-streaming" : ""}`, dir: "auto" },
      el("span", { class: "fork-part", title: partTitle, text: visibleToken(partToken) }),
      rest,
      end ? el("span", { class: "fork-end", text: end }) : null,
    ),
  );
}

/**
 * The branch beside the reply it came from. record: the turn record whose reply was branched
 * (reply_ids, reply_tokens, reply_bytes, top_k when known, prompt_ids, special_ids); branch: as
 * the header says; gap: the near-tie gap; onKeep, onDrop, onStop: the actions (no callback, no
 * button).
 */
export function branchView(record, branch, { gap, onKeep = null, onDrop = null, onStop = null } = {}) {
  const { step, id, answer, error, streaming } = branch;
  const writing = !answer && !error;
  const replyIds = record.reply_ids ?? [];
  const special = new Set(record.special_ids ?? []);
  const replyTexts = textsOf(record.reply_bytes);
  const endsTurn = (ids, stop) => stop === "end_turn" && special.has(ids.at(-1));
  const replyEnd = endsTurn(replyIds, record.stop_reason);
  const shared = replyTexts.slice(0, step).join("");
  const row = record.top_k?.[step];
  const pOf = (i) => row?.find(([c]) => c === i)?.[2];
  const pWords = (i) => (pOf(i) === undefined ? "" : ` (${percent(pOf(i))})`);
  const modelToken = record.reply_tokens?.[step] ?? "";
  const modelRest = replyTexts.slice(step + 1, replyEnd ? -1 : undefined).join("");

  // the branch: the token taken by hand, then what the model wrote after it, as a reply (its view
  // appends each token as it comes; its title counts the ids kept, the one taken, and the rest)
  const branchTitle = (rest) => el("div", { class: "fork-title" }, el("b", { text: "The branch" }),
    ` · ${count(step + 1 + rest.reply_ids.length, "token")}${branch.answer ? `, ${branch.answer.stop_reason}` : branch.error ? "" : ", writing…"}`);
  const branchSide = replyView(streaming, {
    title: branchTitle, className: "fork-side fork-branch", textClass: "fork-text", special, steps: false,
    lead: () => el("span", { class: "fork-part", title: "the token chosen by hand", text: visibleToken(branch.token) }),
  });
  const tie = isNearTie(row, gap);

  return el(
    "section",
    { class: `branch${writing ? " is-writing" : ""}`, "aria-label": `A branch at token ${step + 1}`, dataset: { step, id } },
    el("h3", {}, `A branch at token ${step + 1} `, el("span", { class: "by-hand", text: "chosen by hand" })),
    el("p", { class: "branch-chose" },
      "The model wrote ", el("b", { text: `“${visibleToken(modelToken)}”` }), pWords(replyIds[step]),
      "; you took ", el("b", { text: `“${visibleToken(branch.token)}”` }), pWords(id),
      tie && row?.[1]?.[0] === id ? ", the token it nearly chose." : "."),
    el(
      "div",
      { class: "branch-shared" },
      el("span", { class: "fork-title", text: `Both begin with ${count(step, "token")}` }),
      step ? el("span", { class: "shared-text", dir: "auto", text: shared }) : el("span", { class: "shared-text is-empty", text: "(nothing: they part at the first token)" }),
    ),
    el(
      "div",
      { class: "branch-fork" },
      side("The model's reply", "fork-model", modelToken, "the token the model chose", modelRest,
           { end: replyEnd ? record.reply_tokens?.at(-1) : null, count: `${count(replyIds.length, "token")}, ${record.stop_reason ?? "writing"}` }),
      branchSide,
    ),
    answer ? el("p", { class: "branch-cache" }, cacheSentence(answer, record.prompt_ids.length)) : null,
    error ? el("p", { class: "error", text: error }) : null,
    el(
      "div",
      { class: "branch-actions" },
      writing && onStop ? el("button", { type: "button", class: "branch-stop", onclick: onStop, text: "Stop" }) : null,
      !writing && answer && onKeep ? el("button", { type: "button", class: "branch-keep", onclick: onKeep, text: "Keep: make it the reply" }) : null,
      !writing && onDrop ? el("button", { type: "button", class: "branch-drop", onclick: onDrop, text: "Drop" }) : null,
    ),
    !writing && answer && onKeep ? el("p", { class: "term", text: "Kept, the branch becomes this turn's reply: later messages read it, marked as chosen by hand. Dropped, the conversation stays as it was." }) : null,
  );
}

/** The near-ties of a reply as buttons, each starting a branch there (onBranch(step, id, token)). */
export function nearTieList(record, gap, onBranch) {
  const offers = nearTieOffers(record, gap);
  if (!offers.length) return null;
  return el(
    "div",
    { class: "near-tie-offers" },
    el("p", { class: "near-tie-lead", text: `Where this reply was a near-tie (${count(offers.length, "step")}): take the other token and see where it goes.` }),
    el("ul", {}, offers.map((o) => el(
      "li",
      {},
      el("button", { type: "button", class: "branch-offer", dataset: { step: o.step, id: o.id }, onclick: () => onBranch(o.step, o.id, o.token) },
        `At token ${o.step + 1}, ${nearlyChose(o)}`),
    ))),
  );
}
