// The conversation settings: the system prompt preset, the window and the reply limit, built
// from the site's settings (build.json's "settings", written from chatlens.defaults), so the
// page states none of them itself.

import { replyLimitNote } from "../lesson/terms.mjs";
import { $, el, fill } from "../views/dom.mjs";

/** Fill the selects and the reply limit from `settings`. */
export function buildControls(settings) {
  fill($("preset"), ...settings.presets.map((p) => el("option", { value: p.name, text: p.label })));
  $("preset").value = settings.default_preset;
  fill($("window"), 
    ...settings.windows.map((n) => el("option", { value: String(n), text: `${n} tokens`, selected: n === settings.default_window })),
  );
  $("reply-limit").textContent = settings.reply_limit;
  $("reply-limit").closest(".limit").title = replyLimitNote(settings.reply_limit);
}

/** Once the model is known: its whole context as a window beyond the lab's. */
export function addFullContext(nCtx) {
  const select = $("window");
  if (!nCtx || [...select.options].some((o) => Number(o.value) === nCtx)) return;
  select.append(el("option", { value: String(nCtx), text: `${nCtx} tokens (the model's whole context)` }));
}

/** The controls as they are now, read from the page in one place: a plain snapshot that a change's
 * handler takes once and passes down, so the modes' logic runs on plain values (in node too).
 * {preset, custom (the custom system prompt, when that preset is chosen), window,
 * specialInText, draft (the message being typed)}. */
export function readControls() {
  const preset = $("preset").value;
  return {
    preset,
    custom: preset === "custom" ? $("custom-system").value : undefined,
    window: Number($("window").value),
    specialInText: $("special-in-text").checked,
    draft: $("draft").value,
  };
}

/** The arguments of a preview or run call for `messages`, from a snapshot of the controls
 * (readControls). */
export function callArgs(messages, settings, { preset, custom, window, specialInText }) {
  const system = preset === "custom" ? { preset: "custom", custom } : { preset };
  // specialInText only when off: the worker's default reads special tokens written in a message as tokens
  return { ...system, messages, window, reserve: settings.reply_limit, ...(specialInText ? {} : { specialInText }) };
}
