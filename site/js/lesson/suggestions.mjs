// "Try this": messages that show one thing each, with the sentence that says what. In Live mode
// a suggestion goes into the draft; in Recorded mode it jumps to the recorded turn it is about
// (recordedTarget). The recorded conversation is the lesson's five messages, in this order:
// Priya, sleep tip, "What is my name?", "Who are you?", "What year is it?".

// Long enough that this one message, with any preset's system prompt, fills nine tenths or more
// of the smallest window (the reply limit kept free included); tests/test_lab_browser.py checks it.
export const LONG_MESSAGE =
  "Tell me the whole story of the printing press: how Gutenberg built his press and cast metal type in Mainz, " +
  "why his Bible mattered so much, how printing spread to Venice, Paris and London within fifty years, what it did " +
  "to the price of books, to the Reformation, to maps and to science, how printers, authors and censors fought over " +
  "what could be printed, and how steam presses and cheap paper finally gave the nineteenth century its daily " +
  "newspapers. Please answer in detail, step by step, and name one person for each step.";

export const SUGGESTIONS = [
  {
    id: "who",
    text: "Who are you?",
    hint: "a new conversation each time: with None, then with Pirate",
    why: "The model has no name of its own: it answers from whatever the system prompt tells it. Asked first in a new conversation each time, the system prompt is all that differs.",
    // Live mode: picked while a conversation is under way, it starts a new one, so the answer
    // cannot echo an earlier reply (the challenge counts only a conversation's first message).
    fresh: true,
    recorded: { message: "Who are you?" },
  },
  {
    id: "year",
    text: "What year is it?",
    hint: "then try Today's date",
    why: "The model cannot see a clock: without a date in the system prompt it can only guess a year from its training data.",
    recorded: { message: "What year is it?" },
  },
  {
    id: "name",
    text: "Hi! My name is Priya.",
    hint: "then ask “What is my name?”",
    why: "Nothing is remembered between turns: the name is known only while this message is still in the text the model reads.",
    recorded: { message: "Hi! My name is Priya." },
  },
  {
    id: "recall",
    text: "What is my name?",
    hint: "does it still know?",
    why: "The model can only answer from the window: if the message with the name was dropped, the name is gone.",
    recorded: { message: "What is my name?" },
  },
  {
    id: "tip",
    text: "Give me one tip for sleeping better.",
    hint: "a long answer",
    why: "A long answer shows the reply limit: watch it get cut off there (max_tokens) instead of ending with its end-of-turn token.",
    recorded: { message: "Give me one tip for sleeping better." },
  },
  {
    id: "long",
    text: LONG_MESSAGE,
    hint: "long: fills the smallest window by itself",
    why: "One message this long takes nine tenths of the smallest window, so sending anything after it pushes the older turns out.",
    // The recording has no message this long: in Recorded mode the chip says what it shows instead.
    recorded: {
      smallestWindow: true,
      firstDrop: true,
      text: "The first turn that drops a message",
      hint: "in the smallest window",
      why: "The recorded conversation outgrows the smallest window after a few turns: from this turn on, the oldest messages are left out of the text the model reads.",
    },
  },
];

/** The recorded user message of turn i (the file's message list, or the turn's new piece). */
function messageOf(doc, conv, i) {
  const list = conv.messages || doc.messages;
  if (list && list[i] !== undefined) return typeof list[i] === "string" ? list[i] : list[i].content;
  const piece = conv.turns[i].pieces.find((p) => p.kind === "new");
  return piece ? piece.text : "";
}

/**
 * Where a suggestion leads in the recording: {preset, window, step}, or null when the recording
 * has no such turn. `preset` and `window` are the ones shown now; a suggestion about filling a
 * window moves to the smallest recorded one.
 */
export function recordedTarget(suggestion, doc, { preset, window }) {
  const r = suggestion.recorded || {};
  let win = Number(window);
  if (r.smallestWindow) {
    const wins = doc.conversations.filter((c) => c.preset === preset).map((c) => Number(c.window));
    if (!wins.length) return null;
    win = Math.min(...wins);
  }
  const conv = doc.conversations.find((c) => c.preset === preset && Number(c.window) === win);
  if (!conv) return null;
  let step = -1;
  if (r.message) step = conv.turns.findIndex((_, i) => messageOf(doc, conv, i) === r.message);
  if (r.firstDrop) step = conv.turns.findIndex((t) => t.dropped_messages.length > 0);
  return step >= 0 ? { preset, window: win, step } : null;
}
