// The words the lab uses, each explained in one line where it appears (the panel, the chat,
// the challenges). The wording lives here once.

export const TERMS = {
  used: "Tokens in the text the model reads this turn.",
  reused: "Already read or written last turn: their keys and values are still in the model's cache, so they are not computed again.",
  computed: "Run through the model now: everything after the reused part.",
  header: "The template's opening of the reply (<|im_start|>assistant and a line break): the model writes what follows it.",
  message: "A message is one bubble in the chat; a turn is one of your messages and the reply to it. Old turns are dropped whole, oldest first.",
  template: "Each message's count includes the tokens the template wraps around its text: <|im_start|>, the role's name and a line break before it, <|im_end|> and a line break after. A role's name is cut into tokens like any other word, so roles need not take the same number.",
  reread: "A reply is read back as text on the next turn and tokenized afresh, so its count can differ by a token from what the model wrote; a reply cut off at the reply limit is closed with an <|im_end|> the model never wrote.",
  window: "The most tokens the model reads at once: what does not fit (with room kept for the reply) is dropped.",
  greedy: "Greedy decoding: at every step the single most likely next token is taken, so the same text gives the same reply (at rare near-ties, another browser's rounding can pick the other token).",
  special: "A special token: one id the template uses to mark where messages start and end, not characters the model spells out.",
  bytes: "Part of a character: byte-level tokens can split one character's UTF-8 bytes, shown here in hex.",
};

/** Beside a window smaller than the model's whole context (`context` tokens, the record's). */
export const trainedNote = (context) =>
  `The model was trained on texts of up to ${context.toLocaleString("en-US")} tokens; the lab's windows are smaller so you can watch one fill.`;

/** What ended a reply, in words. */
export const STOP_REASONS = {
  end_turn: "the model wrote its end-of-turn token (<|im_end|>)",
  max_tokens: "the reply reached the reply limit before the model ended it",
  stopped: "you stopped it",
};

export const stopReasonText = (reason) => STOP_REASONS[reason] || "still writing";

/** A probability as a percentage a reader can compare: 67.2%, 0.93%, <0.01% (the views' and the
 * lesson's sentences write every share so). */
export function percent(p) {
  if (p >= 0.01) return `${(100 * p).toFixed(1)}%`;
  if (p >= 0.0001) return `${(100 * p).toFixed(2)}%`;
  return "<0.01%";
}

/** How far a figure may move and still be said to change little: within a tenth either way (a
 * factor under 1.1, up or down). */
export const LITTLE = 1.1;

/**
 * The words of a change, one rule for the lab (a cause's figures: its table's cells, its
 * sentences, Look inside's lines): a figure against what it was, as their ratio (a probability's
 * p / from; the whole reply's, exp of the difference of its log-probabilities), is "little" when
 * it moved by a factor under LITTLE either way, else "falls" or "rises".
 */
export function change(ratio) {
  if (!(ratio >= 0)) return "little"; // nothing to compare (0 against 0)
  return Math.max(ratio, 1 / ratio) < LITTLE ? "little" : ratio < 1 ? "falls" : "rises";
}

const SUPERSCRIPT = "⁰¹²³⁴⁵⁶⁷⁸⁹";

/** A factor as a reader takes it in, one rule for the lab (a cause's table and sentences, the
 * strip's labels, Look inside's lines): two figures, "2.7", "190", "7,100", and from ten thousand
 * "about 4 × 10⁵" (short, for a label: "4×10⁵"). */
export function times(factor, { short = false } = {}) {
  if (factor < 10) return factor.toFixed(1);
  if (factor < 1e4) return Number(factor.toPrecision(2)).toLocaleString("en-US");
  const power = Math.floor(Math.log10(factor));
  const lead = Math.round(factor / 10 ** power);
  const [m, p] = lead === 10 ? [1, power + 1] : [lead, power];
  const ten = `10${String(p).split("").map((d) => SUPERSCRIPT[Number(d)]).join("")}`;
  return short ? `${m}×${ten}` : `about ${m} × ${ten}`;
}

/** How many times less (or more) likely the reply so far is under a measure: a factor, rounded
 * for reading ("7,100 times less likely"), from the difference of log-probabilities. */
export function likelier(logprob, base) {
  const d = logprob - base;
  const how = change(Math.exp(d));
  if (how === "little") return "about as likely";
  return `${times(Math.exp(Math.abs(d)))} times ${how === "falls" ? "less" : "more"} likely`;
}

const CHANGE_WORDS = { falls: "falls to", rises: "rises to", little: "stays near" };

/** How a probability moved, in words: "falls to 0.19% (from 12.6%)" (a cause's figures: the
 * chosen token's probability with a piece taken away, against every piece read). */
export function moved(p, from) {
  return `${CHANGE_WORDS[change(p / from)]} ${percent(p)} (from ${percent(from)})`;
}

// What a reader would not see: the other spaces (no-break U+00A0, thin, ideographic, ...), line and
// paragraph separators, controls (a carriage return) and format characters (zero-width, U+FEFF).
const UNSEEN = /[\p{Zs}\p{Zl}\p{Zp}\p{Cc}\p{Cf}]/gu;
const codePoint = (c) => `\u27e8U+${c.codePointAt(0).toString(16).toUpperCase().padStart(4, "0")}\u27e9`;

/** A token's text made visible: spaces as ·, line breaks as ↵, tabs as →, and any other character
 * that shows nothing (a no-break space, a zero-width one) as its code point, ⟨U+00A0⟩. */
export function visibleToken(t) {
  return t.replace(/ /g, "\u00b7").replace(/\n/g, "\u21b5").replace(/\t/g, "\u2192").replace(UNSEEN, codePoint);
}

/** A long URL as a label: its start and its end, the middle elided (a link may carry thousands of characters). */
export function shortened(text, most = 120) {
  return text.length > most ? `${text.slice(0, most - 41)}…${text.slice(-40)}` : text;
}

/** Every URL in `text` shortened (a long ?model= would fill an error's line). */
export const elideUrls = (text, most = 80) => String(text).replace(/https?:\/\/[^\s"'()]+/g, (url) => shortened(url, most));

/** What ended a reply, in the few words a chat bubble has room for. */
export const STOP_SHORT = {
  end_turn: "the model ended it",
  max_tokens: "cut off at the reply limit",
  stopped: "stopped by you",
};

/** Beside the reply limit: why it is kept free, and when a reply ends. `limit` is the number. */
export function replyLimitNote(limit) {
  const n = limit ? `${limit} tokens` : "the reply limit";
  return `A reply ends when the model writes its end-of-turn token or reaches ${n}; that many tokens are kept free in the window for it.`;
}
