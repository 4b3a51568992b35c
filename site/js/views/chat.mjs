// The chat column: message bubbles, with the messages the shown record no longer reads marked
// as dropped.

import { el } from "./dom.mjs";

export function bubble(role, text, record) {
  return el(
    "div",
    { class: `msg ${role}` },
    el("div", { class: "who", text: role === "user" ? "You" : "SmolLM2" }),
    el("div", { class: "content", text }),
    role === "assistant" && record?.stop_reason
      ? el("div", { class: "meta" }, "stop: ", el("code", { text: record.stop_reason }), ` · ${record.reply_ids.length} tokens`)
      : null,
  );
}

/** The indexes (into the messages sent) of the messages a record dropped. */
export const droppedOf = (record) => new Set(record.dropped_messages.map((d) => d.message_index));

/** Draw `items` ([{role, text, record, dropped, current, note, noteClass}]) into the chat box. */
export function drawChat(box, items, empty) {
  box.replaceChildren();
  if (!items.length && empty) box.append(el("p", { class: "empty", text: empty }));
  for (const it of items) {
    if (it.note) {
      box.append(el("div", { class: `msg note ${it.noteClass || ""}`, text: it.note }));
      continue;
    }
    const b = bubble(it.role, it.text, it.record);
    if (it.dropped) b.classList.add("is-dropped");
    if (it.current) b.classList.add("current");
    box.append(b);
  }
  box.scrollTop = box.scrollHeight;
}
