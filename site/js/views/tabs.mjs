// Tabs with full tab semantics: a tablist of role="tab" buttons (aria-selected, aria-controls,
// roving tabindex: only the selected tab is in the Tab order) and one role="tabpanel". Arrow
// keys, Home and End move to a tab and select it.

import { el } from "./dom.mjs";

/**
 * The tablist for `tabs` ([{value, label}]), `selected` the chosen value, `panelId` the id of
 * the tabpanel it controls, `idPrefix` the tabs' ids ("<idPrefix>-<value>"). select(value, {focus})
 * is called on a click or key; it redraws, then the caller focuses the tab when `focus` is set.
 */
export function tabList({ label, tabs, selected, panelId, idPrefix, select }) {
  const list = el("div", { class: "tabs", role: "tablist", "aria-label": label });
  const buttons = tabs.map(({ value, label: text }) =>
    el("button", {
      type: "button",
      role: "tab",
      id: `${idPrefix}-${value}`,
      class: value === selected ? "active" : null,
      "aria-selected": String(value === selected),
      "aria-controls": panelId,
      tabindex: value === selected ? "0" : "-1",
      dataset: { view: value },
      text,
      onclick: () => select(value, { focus: true }),
    }),
  );
  list.addEventListener("keydown", (e) => {
    const at = buttons.indexOf(document.activeElement);
    if (at < 0) return;
    const last = buttons.length - 1;
    const to = { ArrowRight: at + 1, ArrowDown: at + 1, ArrowLeft: at - 1, ArrowUp: at - 1, Home: 0, End: last }[e.key];
    if (to === undefined) return;
    e.preventDefault();
    const next = buttons[(to + buttons.length) % buttons.length];
    select(next.dataset.view, { focus: true });
  });
  list.append(...buttons);
  return list;
}

/** Focus the tab of `value` in `root`, if it is there. */
export function focusTab(root, value) {
  root.querySelector(`[role="tab"][data-view="${value}"]`)?.focus();
}
