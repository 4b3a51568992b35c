// "What the model reads": a turn record (py/chatlens/record.py) drawn as the window
// (window.mjs), the prompt as text or tokens and its pieces (prompt.mjs), and the reply
// (reply.mjs). A message that cannot fit is drawn as an overflow of the window (overflow.mjs).
// Every piece of text goes in as text nodes.

import { TERMS } from "../lesson/terms.mjs";
import { el, fill, term } from "./dom.mjs";
import { pieceTable, promptLayout, promptText, tokenView } from "./prompt.mjs";
import { predictionBox, replyBox } from "./reply.mjs";
import { focusTab, tabList } from "./tabs.mjs";
import { specialPositions } from "./tokens.mjs";
import { drawSummary, droppedList, notes, stats, windowBar } from "./window.mjs";

const PANEL_ID = "reads-tabpanel";

/** Why the panel has nothing to show (Python could not start: `text`), with the ways on offered
 * as buttons: actions [{id, label, run}]. */
export function renderFailure(root, text, actions = []) {
  fill(root, el("p", { class: "error", id: "reads-failure", text }),
    actions.length ? el("div", { class: "failure-actions" },
      ...actions.map((a) => el("button", { type: "button", id: a.id, text: a.label, onclick: a.run }))) : null);
  if (root.id === "reads") drawSummary(null);
}

let focusAfterDraw = null; // the tab to focus once the panel is drawn again (after a tab is chosen)

/** Draw `record` into `root`. view: "text" | "tokens"; onView(view) when a tab is chosen (the
 * caller keeps the choice and draws again). reply: the turn's reply so far while it is written
 * (page/state.mjs replySoFar; the record is the preview's), drawn by the reply view, which its
 * tokens then grow in place (views/reply.mjs replyGrew); else the record's own reply. why ({gap}:
 * the near-tie gap) makes a reply with top_k show each token's candidates; prediction (see
 * predictionBox) draws the first token's; hooks: the reply view's ({onStep, onCandidate}). */
export function renderRecord(root, record, options = {}) {
  const { caption = "", view = "text", onView, why = null, prediction = null, reply = null, hooks = {} } = options;
  // Drawing again keeps the focus (a tab, the text box) and the scroll of the text box.
  const active = document.activeElement;
  const focusId = focusAfterDraw ? `reads-tab-${focusAfterDraw}` : root.contains(active) && active.id ? active.id : null;
  focusAfterDraw = null;
  const scroller = root.querySelector("#prompt-text, #token-view");
  const scrolled = scroller ? [scroller.id, scroller.scrollTop] : null;

  const special = specialPositions(record);
  const lay = promptLayout(record);
  const select = (v, { focus } = {}) => {
    if (focus) focusAfterDraw = v;
    if (onView) onView(v);
    else renderRecord(root, record, { ...options, view: v });
    if (focusAfterDraw === v) {
      // the caller did not draw again (nothing changed): focus now
      focusAfterDraw = null;
      focusTab(root, v);
    }
  };
  const tabs = tabList({
    label: "How to show the prompt",
    tabs: [
      { value: "text", label: "Text" },
      { value: "tokens", label: `Tokens (${record.used})` },
    ],
    selected: view,
    panelId: PANEL_ID,
    idPrefix: "reads-tab",
    select,
  });
  const groups = lay?.groups.length ? term(TERMS.bytes, "bytes-note") : null;
  const panel = el(
    "div",
    { id: PANEL_ID, role: "tabpanel", "aria-labelledby": `reads-tab-${view}` },
    view === "tokens" ? groups : null,
    view === "tokens" ? tokenView(record, special, lay) : promptText(record, special, lay),
  );
  const parts = [
    el("p", { class: "caption", id: "reads-caption", text: caption }),
    windowBar(record),
    stats(record),
    ...notes(record, special),
    droppedList(record),
    tabs,
    panel,
    predictionBox(record, prediction, why),
    pieceTable(record, special),
    replyBox(record, why, reply ?? record, hooks),
  ];
  fill(root, ...parts.filter(Boolean));
  if (root.id === "reads") drawSummary(record);
  if (scrolled) {
    const again = root.querySelector(`#${scrolled[0]}`);
    if (again) again.scrollTop = scrolled[1];
  }
  if (focusId) root.querySelector(`#${focusId}`)?.focus({ preventScroll: true });
}
