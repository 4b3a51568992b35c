// The one way the page makes elements: text always goes in as text nodes, never as HTML.

export const $ = (id) => document.getElementById(id);

export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "class") node.className = v;
    else if (k === "text") node.textContent = v;
    else if (k === "dataset") Object.assign(node.dataset, v);
    else if (k === "style") node.style.cssText = v; // through the CSSOM: the CSP allows no style attributes
    else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else node.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return node;
}

export function debounce(fn, ms) {
  let t = null;
  return (...a) => {
    clearTimeout(t);
    t = setTimeout(() => fn(...a), ms);
  };
}

/** "1 token", "2 tokens": a count and its noun, singular for one. */
export const count = (n, one, many = `${one}s`) => `${n} ${Number(n) === 1 ? one : many}`;

/** node.replaceChildren without the holes: replaceChildren writes null as the text "null", so the
 * page's views fill nodes through this, and an absent part (null, undefined, false) is left out. */
export function fill(node, ...children) {
  node.replaceChildren(...children.flat().filter((c) => c !== null && c !== undefined && c !== false));
  return node;
}

/** fill, for a view redrawn whole while the learner may be on one of its controls (the model box
 * redraws at each status or progress change): focus stays on the control of the same id, so a
 * button a link just focused, or one reached by Tab, is not lost to the redraw. */
export function refill(node, ...children) {
  const focused = node.contains(document.activeElement) ? document.activeElement.id : "";
  fill(node, ...children);
  if (focused && !node.contains(document.activeElement)) node.querySelector(`#${CSS.escape(focused)}`)?.focus({ preventScroll: true });
  return node;
}

/** Say `line` once in `region`, a visually hidden live region that gets nothing else: each line
 * is a paragraph of its own (a live region reads what is added), the oldest go. */
export function announce(region, line, keep = 4) {
  if (!region || !line) return;
  region.append(el("p", { text: line }));
  while (region.childElementCount > keep) region.firstElementChild.remove();
}

/** A term's explanation under a figure: a paragraph of class "term". */
export const term = (text, cls = "") => el("p", { class: `term ${cls}`.trim(), text });

/** Hide `control` (a Stop, a Send made disabled: `how` "hidden" or "disabled") or show it again;
 * one that goes while it holds the focus hands it to `to` (the box the next message is typed in),
 * not to the page's top, where the browser would put it. */
export function keepFocus(control, off, to, how = "hidden") {
  if (off && document.activeElement === control) to.focus();
  control[how] = off;
}
