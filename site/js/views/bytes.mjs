// The bytes behind each token. Byte-level BPE cuts text into bytes, not characters, so one
// character (a CJK ideograph, an emoji, an Arabic or Hebrew letter) can be split across tokens.
//
// A record's prompt_tokens are each token's bytes decoded on their own, which turns a part of a
// character into U+FFFD; its prompt_vocab (and reply_vocab) hold the tokens as the vocabulary
// writes them (GPT-2's byte alphabet: "Ġthe", "æĿ"), from which the bytes are exact. Tokens that
// hold parts of a character are grouped under the character they spell together.

const encoder = new TextEncoder();
const decoder = new TextDecoder("utf-8"); // not fatal: bad bytes become U+FFFD, as in Python's "replace"

// -- the GPT-2 byte alphabet -----------------------------------------------------------------------

let byteOfChar = null;

/** GPT-2's table: each byte is written as one printable character (bytes that print as
 * themselves keep their character; the others are shifted past U+00FF in byte order). */
function byteTable() {
  if (byteOfChar) return byteOfChar;
  const printable = (b) => (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff);
  byteOfChar = new Map();
  let shifted = 0;
  for (let b = 0; b < 0x100; b++) {
    const ch = printable(b) ? b : 0x100 + shifted++;
    byteOfChar.set(String.fromCodePoint(ch), b);
  }
  return byteOfChar;
}

/** The bytes a token written in the GPT-2 byte alphabet stands for ("ĠÙħ" -> 20 D9 85), or null
 * when a character is not in the alphabet. */
export function vocabBytes(token) {
  const table = byteTable();
  const out = [];
  for (const ch of token) {
    const b = table.get(ch);
    if (b === undefined) return null;
    out.push(b);
  }
  return Uint8Array.from(out);
}

// -- alignment --------------------------------------------------------------------------------------

const same = (a, b, at) => {
  if (at + a.length > b.length) return false;
  for (let k = 0; k < a.length; k++) if (a[k] !== b[at + k]) return false;
  return true;
};

/** Bytes as upper-case hex pairs: "E4 BD". */
export const hex = (bytes) => [...bytes].map((b) => b.toString(16).toUpperCase().padStart(2, "0")).join(" ");

/**
 * Where each token's bytes lie in `text`, the text the tokens spell. `vocab`, when given, holds
 * the tokens as the vocabulary writes them (GPT-2 byte alphabet), which makes every byte known.
 * Returns null when the tokens do not spell the text, else:
 *   bytes   per token: its bytes (Uint8Array), or null where the record cannot tell them
 *   starts  per boundary (n + 1): the UTF-16 offset in text where that token starts (inside a
 *           character, or unknown: the end of that character, the earliest place it can be)
 *   parts   per token with known bytes: [{text}] for characters it holds whole and [{bytes,
 *           char}] for bytes of a character it shares with a neighbour; null for unknown bytes
 *   groups  [first, last, text]: runs of tokens that together spell `text`, characters that no
 *           single token holds whole (or whose split the record cannot tell)
 */
export function layout(tokens, text, vocab = null) {
  const all = encoder.encode(text);
  const n = tokens.length;
  if (!vocab || vocab.length !== n) return null;
  // Each token's [start, length] in the text's bytes; the tokens must spell the text exactly.
  const choices = [];
  let at = 0;
  for (const v of vocab) {
    const tb = vocabBytes(v);
    if (!tb || !same(tb, all, at)) return null;
    choices.push([[at, tb.length]]);
    at += tb.length;
  }
  if (at !== all.length) return null;

  // Code points: which byte offsets start one, and the UTF-16 offset and character there.
  const cpAt = new Map(); // byte offset -> {u, ch, end}
  let b = 0;
  let u = 0;
  for (const ch of text) {
    const len = encoder.encode(ch).length;
    cpAt.set(b, { u, ch, end: b + len });
    b += len;
    u += ch.length;
  }
  cpAt.set(all.length, { u: text.length, ch: "", end: all.length });
  const cpStartingAtOrAfter = (pos) => {
    while (!cpAt.has(pos)) pos++;
    return pos;
  };
  const cpContaining = (pos) => {
    while (!cpAt.has(pos)) pos--;
    return pos;
  };

  const bytes = choices.map((c) => (c.length === 1 ? all.slice(c[0][0], c[0][0] + c[0][1]) : null));
  const startsB = []; // byte start per boundary, or null when unknown
  for (let i = 0; i < n; i++) {
    const s = new Set(choices[i].map((c) => c[0]));
    startsB.push(s.size === 1 ? [...s][0] : null);
  }
  startsB.push(all.length);
  const earliest = (i) => (i === n ? all.length : Math.min(...choices[i].map((c) => c[0])));
  const starts = startsB.map((pos, i) => cpAt.get(cpStartingAtOrAfter(pos ?? earliest(i))).u);

  const parts = bytes.map((tb, i) => {
    if (!tb) return null;
    const a = startsB[i] ?? choices[i][0][0];
    const z = a + tb.length;
    const list = [];
    for (let p = cpContaining(a); p < z; p = cpAt.get(p).end) {
      const cp = cpAt.get(p);
      if (p >= a && cp.end <= z) {
        const last = list[list.length - 1];
        if (last && last.text !== undefined) last.text += cp.ch;
        else list.push({ text: cp.ch });
      } else {
        list.push({ bytes: all.slice(Math.max(p, a), Math.min(cp.end, z)), char: cp.ch });
      }
    }
    return list;
  });

  // A boundary is clean where its place is known and falls between characters; tokens between
  // two neighbouring clean boundaries that are more than one token apart form a group.
  const clean = startsB.map((pos) => pos !== null && cpAt.has(pos));
  const groups = [];
  let from = 0;
  for (let i = 1; i <= n; i++) {
    if (!clean[i]) continue;
    if (i - from > 1) groups.push([from, i - 1, decoder.decode(all.subarray(startsB[from], startsB[i]))]);
    from = i;
  }
  return { bytes, starts, parts, groups };
}
