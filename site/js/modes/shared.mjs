// A case shared: one turn of a conversation, and one step of its reply with the measures the step
// box had open, copied as a link (page/link.mjs: the address's #fragment, no server) or as the
// command line's request; and such a link opened.
//   "Copy a link", "Copy as a command"   beside each reply in the chat (views/chat.mjs draws them,
//                                        a .share-link or .share-command button in the bubble) and
//                                        in the step box (its hook, page.stepShare): the link is
//                                        chatlens.link(request) of the turn's request (shareRequest)
//   a link opened (openLink)             in Live mode, its system prompt, window and reply limit
//                                        set, the conversation before the turn put back and the
//                                        turn's message in the box: the panel previews what the
//                                        model will read before any weights are stored. Once they
//                                        are, it is sent; the reply's ids are compared with the
//                                        ones the link recorded (another device's rounding can
//                                        choose otherwise at a near-tie: the page says where), and
//                                        the step opens with its measures (modes/steps.mjs).
// A link that cannot be read (too long, cut, another version, a preset this site has not) gets a
// sentence in #case-note, and nothing is changed. The pure part (the request of a turn, the
// measures open, the turns of a case, the ids compared, the sentences) is played in node
// (tests/page/shared.test.mjs); tests/test_inspect_browser.py opens a link in a fresh profile.

import { addFullContext, readControls } from "../page/controls.mjs";
import { decodeCase } from "../page/link.mjs";
import { $, announce, count, el } from "../views/dom.mjs";
import { visibleToken } from "../views/tokens.mjs";
import { send, showLive, stop } from "./live.mjs";
import { branchStep, causeStep, inspectStep, nameStep, stepName, wholeReply, whereOf } from "./steps.mjs";

// -- the case of a turn, and of a step ---------------------------------------------------------------

/** A turn's system prompt as a link holds it: a preset's name, or its text as custom text where
 * the preset's text is taken when sent (the date's: build.json's `dated`) or none was named. */
export function systemOf(record, settings) {
  const preset = settings.presets.find((p) => p.name === record.preset);
  if (preset && preset.name !== "custom" && !preset.dated) return { preset: preset.name };
  return record.system === null || record.system === undefined ? { preset: settings.default_preset } : { preset: "custom", custom: record.system };
}

/** The measures of the step box open on `step` (state.stepBox): where it looked, which piece it
 * needed (or the same for the whole reply, when shown), a branch there; and the branch's id. */
export function openOf(stepBox, where, step) {
  const on = (m) => m?.where?.record === where.record && m.step === step;
  const open = [];
  if (on(stepBox.inspection) && stepBox.inspection.answer) open.push("inspect");
  if (on(stepBox.cause)) open.push(stepBox.cause.showWhole ? "whole" : "cause");
  const branch = on(stepBox.branch) ? stepBox.branch : null;
  if (branch) open.push("branch");
  return { open, ...(branch ? { id: branch.id } : {}) };
}

/** The page API's request for the case of the reply `where` lives in (whereOf's: a live or a
 * recorded turn), and of `step` of it with `open` measures (openOf's), or {why} (a sentence). */
export function shareRequest(where, settings, { step, open = [], id } = {}) {
  if (where.why) return { why: where.why };
  if (where.kind !== "live" && where.kind !== "recorded") {
    return { why: "A link holds a chat turn of Live or Recorded mode: this reply is not one (its mode keeps no conversation)." };
  }
  const r = where.record;
  return {
    messages: where.args.messages, ...systemOf(r, settings), window: r.window, reserve: r.reserve, maxTokens: r.max_tokens,
    ...(r.special_in_text === false ? { specialInText: false } : {}), replyIds: r.reply_ids,
    ...(step === undefined ? {} : { step, open, ...(id === undefined ? {} : { id }) }),
  };
}

/** The turns before a case's own (each {user, reply}: the reply undefined where none followed)
 * and its message, the last. */
export function caseTurns(messages) {
  const turns = [];
  for (const m of messages.slice(0, -1)) {
    if (m.role === "user") turns.push({ user: m.content });
    else turns.at(-1).reply = m.content;
  }
  return { turns, message: messages.at(-1).content };
}

/** Why this site cannot set `c` up (a sentence), or null: its preset, its window. nCtx: the
 * model's whole context, once known (else a window beyond the lab's waits for it). */
export function refusedHere(c, settings, nCtx = null) {
  const names = settings.presets.map((p) => p.name);
  if (c.preset !== undefined && !names.includes(c.preset)) {
    return `This link's system prompt is the preset “${c.preset}”, which this site does not have (it has ${names.join(", ")}). Nothing was changed.`;
  }
  if (c.window !== undefined && !settings.windows.includes(c.window) && nCtx !== null && c.window !== nCtx) {
    return `This link's window of ${c.window} tokens is not offered here: the windows are ${settings.windows.join(", ")} and the model's whole ` +
      `context (${nCtx} tokens). Nothing was changed.`;
  }
  return null;
}

/** Whether case `c`'s system prompt is custom text (named so, or text given with no preset). */
const isCustom = (c) => c.preset === "custom" || (c.preset === undefined && (c.custom !== undefined || Boolean(c.system)));

const MEASURE_WORDS = { inspect: "where it looked", cause: "which piece it needed", whole: "which piece the whole reply needed", branch: "a branch" };

/** What the case is, in words: "turn 2 under Pirate, a window of N tokens; token 3 of its reply,
 * where it looked and which piece it needed". */
export function caseWords(c, settings) {
  const turn = c.messages.filter((m) => m.role === "user").length;
  const label = isCustom(c)
    ? "a custom system prompt" : settings.presets.find((p) => p.name === (c.preset ?? settings.default_preset))?.label ?? c.preset;
  const open = (c.open ?? []).map((m) => MEASURE_WORDS[m]);
  return `turn ${turn} under ${label}, a window of ${c.window ?? settings.default_window} tokens` +
    (c.step === undefined ? "" : `; token ${c.step + 1} of its reply${open.length ? `, ${open.join(" and ")}` : ""}`);
}

/** The link's reply against this device's (ids): a sentence, and where they part (null: nowhere). */
export function idsCompared(link, here, tokens = []) {
  if (!link) return { at: null, text: "" };
  const n = Math.min(link.length, here.length);
  let at = 0;
  while (at < n && link[at] === here[at]) at++;
  if (at === link.length && at === here.length) return { at: null, text: `This device wrote the link's reply, id for id (${count(at, "token")}).` };
  if (at === n) {
    return { at, text: `This device's reply has ${count(here.length, "token")} and the link's ${link.length}: the first ${count(n, "id")} are the same ` +
      "(a reply stopped, or a reply limit not the same)." };
  }
  const t = tokens[at] === undefined ? "" : ` (“${visibleToken(tokens[at])}”)`;
  return { at, text: `This device's reply parts from the link's at token ${at + 1}: the link's has id ${link[at]} there, this device wrote id ` +
    `${here[at]}${t}. Greedy replies are the same on the same weights up to rounding, and another device's rounding chose otherwise at a ` +
    "near-tie: what opens here is this device's reply." };
}

// -- the page ----------------------------------------------------------------------------------------

const said = (text, cls = "") => {
  const note = $("case-note");
  if (!note) return;
  note.textContent = text;
  note.className = `settings-note case-note${cls ? ` ${cls}` : ""}`;
  note.hidden = !text;
};

/** Attach to the page (app.mjs's `page`): the share buttons, the step box's hook, and a link
 * pasted into this tab's address (a fragment changed: no reload). */
export function setUpShare(page) {
  document.addEventListener("click", (e) => {
    const button = e.target.closest?.(".share-link, .share-command");
    if (!button) return;
    const how = button.classList.contains("share-link") ? "link" : "command";
    const inBox = button.closest("#step-box");
    const where = inBox ? page.state.stepBox.named?.where : whereOf(page.state, button.closest(".msg")?._record, context(page.api));
    if (!where) return;
    const step = inBox ? page.state.stepBox.named.step : undefined;
    const request = shareRequest(where, page.api.settings, step === undefined ? {} : { step, ...openOf(page.state.stepBox, where, step) });
    copy(page, button, how, request, inBox ? stepName(where, step) : where.label);
  });
  page.stepShare = () => stepShare(page);
  addEventListener("hashchange", () => openLink(page, location.hash));
}

const context = (api) => ({ settings: api.settings, context: api.model?.n_ctx });

/** The step box's share line: the step named, as a link or a command (and what was copied last). */
function stepShare(page) {
  const named = page.state.stepBox.named;
  if (!named || (named.where.kind !== "live" && named.where.kind !== "recorded")) return null;
  const node = el("div", { class: "share step-share" },
    el("button", { type: "button", class: "link share-link", "aria-label": "Copy a link to this step", text: "Copy a link" }),
    el("button", { type: "button", class: "link share-command", "aria-label": "Copy as a command: this step", text: "Copy as a command" }));
  // what was copied last, {key, text, link, how}, kept on the page: the box is drawn again often
  if (page.shareCopied?.key === keyOf(named.where, named.step)) node.append(copiedLine(page.shareCopied));
  return node;
}

const keyOf = (where, step) => `${where.label} ${step ?? ""} ${where.record.reply_ids?.join(",")}`;

function copiedLine({ text, link, how }) {
  return el("div", { class: "share-said" }, el("p", { text }),
    el("input", { type: "text", readonly: true, class: "share-text", value: link, "aria-label": how === "link" ? "The link" : "The command",
                  onfocus: (e) => e.target.select() }));
}

/** Copy the case of `request` as a link or a command; what was copied, and the text itself to
 * select where the browser would not let the page copy, beside the button. */
async function copy(page, button, how, request, what) {
  const box = button.closest(".share");
  box.querySelector(".share-said")?.remove();
  let text;
  let sentence;
  try {
    if (request.why) throw new Error(request.why);
    text = how === "link" ? await page.api.link(request) : page.api.command(request);
    sentence = `${how === "link" ? `A link to ${what}` : `${what[0].toUpperCase()}${what.slice(1)}, as a command`} (${count(text.length, "character")})`;
  } catch (e) {
    box.append(el("div", { class: "share-said" }, el("p", { class: "error", text: e.message })));
    return announce($("chat-announce"), e.message);
  }
  let copied = true;
  try {
    await navigator.clipboard.writeText(text);
  } catch {
    copied = false;
  }
  const line = { how, link: text, text: copied ? `Copied: ${sentence}.` : `${sentence}: this browser did not let the page copy it; select it here and copy it.` };
  if (box.classList.contains("step-share")) page.shareCopied = { ...line, key: keyOf(page.state.stepBox.named.where, page.state.stepBox.named.step) };
  box.append(copiedLine(line));
  announce($("chat-announce"), line.text);
}

/**
 * Open the case an address's fragment holds, if any: refused in a sentence, changing nothing,
 * when it cannot be read; else set up at once (the preview), and computed once the weights are in.
 */
export async function openLink(page, fragment) {
  const { api, state, store } = page;
  const read = await decodeCase(fragment);
  if (!read) return;
  history.replaceState(null, "", `${location.pathname}${location.search}`); // read once: a reload keeps what it set up, as any turn
  if (read.error) return said(read.error, "error");
  const c = read.case;
  let refused = refusedHere(c, api.settings);
  if (!refused && c.window !== undefined && !api.settings.windows.includes(c.window)) {
    const info = await api.ready.then((r) => r.info, () => null); // a window beyond the lab's: the model's whole context?
    refused = refusedHere(c, api.settings, info?.n_ctx ?? 0);
    if (!refused) addFullContext(info.n_ctx);
  }
  if (refused) return said(refused, "error");
  if (state.writing) await stop(page);

  // set up as the learner would: Live, the controls, the conversation before the turn, its message
  if (state.mode !== "live") store.modeChosen("live");
  const custom = isCustom(c);
  $("preset").value = custom ? "custom" : c.preset ?? api.settings.default_preset;
  if (custom) $("custom-system").value = c.custom ?? c.system;
  if (c.window !== undefined) $("window").value = String(c.window);
  $("special-in-text").checked = c.specialInText ?? true;
  const limit = c.maxTokens ?? c.reserve;
  const limitNote = limit !== undefined && limit !== api.settings.reply_limit
    ? ` Its reply limit, ${count(limit, "token")}, is this page's until it is reloaded (the site's is ${api.settings.reply_limit}).` : "";
  if (limit !== undefined) {
    api.settings.reply_limit = limit; // what a send reads (page/controls.mjs callArgs)
    $("reply-limit").textContent = limit;
  }
  store.settingChanged();
  store.cleared();
  const { turns, message } = caseTurns(c.messages);
  if (turns.length) store.restored(turns);
  $("draft").value = message;
  showLive(page, readControls());
  const words = caseWords(c, api.settings);
  const ready = () => Boolean(api.model?.backend);
  said(`A shared case: ${words}. The panel shows what the model will read.${limitNote}` +
    (ready() ? " Computing it now…" : " It is computed once the model's weights are in: the box above downloads them."));

  if (!ready()) {
    await new Promise((resolve) => {
      if (api.model?.error) return resolve();
      const off = api.onStatus(() => {
        if (!ready() && !api.model?.error) return;
        queueMicrotask(() => off());
        resolve();
      });
    });
  }
  if (!ready()) return said(`The shared case (${words}) cannot be computed here: ${api.model?.error ?? "no weights"}.`, "error");
  if ($("draft").value !== message || state.live.turns.length !== turns.length || state.writing) {
    return said(`The shared case (${words}) was not sent: the conversation or the message changed before the weights were in. ` +
      "Send it when you like.");
  }
  said(`A shared case: ${words}. Computing it now…${limitNote}`);
  await send(page, readControls());
  const turn = state.live.turns.at(-1);
  if (!turn?.record?.reply_ids || turn.user !== message) return said(`The shared case (${words}) got no reply: the chat says why.`, "error");
  const ids = idsCompared(c.replyIds, turn.record.reply_ids, turn.record.reply_tokens);
  if (c.step === undefined) return said(`The shared case: ${words}. ${ids.text}`.trim());
  const where = whereOf(state, turn.record, context(api));
  if (where.why || c.step >= turn.record.reply_ids.length) {
    return said(`The shared case: ${words}. ${ids.text} ${where.why ?? `This device's reply has no token ${c.step + 1} to open.`}`.trim(), "error");
  }
  said(`The shared case: ${words}. ${ids.text}`.trim());
  nameStep(page, where, c.step);
  const open = c.open ?? [];
  if (open.includes("inspect")) await inspectStep(page, where, c.step);
  if (open.includes("cause") || open.includes("whole")) {
    const answer = await causeStep(page, where, c.step);
    if (answer && open.includes("whole") && page.state.stepBox.cause) await wholeReply(page, page.state.stepBox.cause);
  }
  if (open.includes("branch")) await branchStep(page, where, c.step, c.id);
  if (ids.at !== null && !page.state.stepBox.status) page.store.stepSaid(ids.text); // beside the step too: what opened is this device's
}
