// The bytes behind each token. Byte-level BPE cuts text into bytes, not characters, so one
// character (a CJK ideograph, an emoji, an Arabic or Hebrew letter) can be split across tokens.
//
// Records carry each token's bytes as hex (prompt_bytes, reply_bytes, bytes: py/chatlens/record.py
// says how); a token's text (prompt_tokens) turns a part of a character into U+FFFD. This module
// only reads those bytes and lays the tokens on the text they spell: tokens that hold parts of a
// character are grouped under the character they spell together.

const encoder = new TextEncoder();
const decoder = new TextDecoder("utf-8"); // not fatal: bad bytes become U+FFFD, as in Python's "replace"

/** A record's hex bytes ("e69d") as bytes. */
export function fromHex(h) {
  const out = new Uint8Array(h.length / 2);
  for (let k = 0; k < out.length; k++) out[k] = parseInt(h.slice(2 * k, 2 * k + 2), 16);
  return out;
}

/** Bytes as upper-case hex pairs, the way the page shows them: "E4 BD". */
export const hex = (bytes) => [...bytes].map((b) => b.toString(16).toUpperCase().padStart(2, "0")).join(" ");

/** The text tokens spell together, from each one's hex bytes. */
export const spelled = (hexes) => streamed(hexes).join("");

/** The text each token adds, decoded in order as the worker streams it (a character only once
 * whole, invalid bytes as U+FFFD; the rest of a character the last tokens leave open goes to the
 * last), from each token's hex bytes. */
export function streamed(hexes) {
  const d = new TextDecoder("utf-8");
  const out = hexes.map((h) => d.decode(fromHex(h), { stream: true }));
  const tail = d.decode();
  if (tail && out.length) out[out.length - 1] += tail;
  return out;
}

const same = (a, b, at) => {
  if (at + a.length > b.length) return false;
  for (let k = 0; k < a.length; k++) if (a[k] !== b[at + k]) return false;
  return true;
};

/**
 * Where each token lies in `text`, the text the tokens spell, from `hexes` (each token's bytes
 * as the record carries them). Returns null without bytes, or when they do not spell the text,
 * else:
 *   bytes   per token: its bytes (Uint8Array)
 *   starts  per boundary (n + 1): the UTF-16 offset in text where that token starts (inside a
 *           character: the end of that character, the earliest place it can be drawn)
 *   parts   per token: [{text}] for characters it holds whole and [{bytes, char}] for bytes of a
 *           character it shares with a neighbour
 *   groups  [first, last, text]: runs of tokens that together spell `text`, characters that no
 *           single token holds whole
 */
export function layout(text, hexes) {
  if (!hexes) return null;
  const all = encoder.encode(text);
  const bytes = hexes.map(fromHex);
  const startsB = []; // each boundary's byte offset
  let at = 0;
  for (const tb of bytes) {
    if (!same(tb, all, at)) return null;
    startsB.push(at);
    at += tb.length;
  }
  if (at !== all.length) return null;
  startsB.push(at);

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
  const starts = startsB.map((pos) => cpAt.get(cpStartingAtOrAfter(pos)).u);

  const parts = bytes.map((tb, i) => {
    const a = startsB[i];
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

  // A boundary is clean where it falls between characters; tokens between two neighbouring
  // clean boundaries that are more than one token apart form a group.
  const groups = [];
  let from = 0;
  for (let i = 1; i <= bytes.length; i++) {
    if (!cpAt.has(startsB[i])) continue;
    if (i - from > 1) groups.push([from, i - 1, decoder.decode(all.subarray(startsB[from], startsB[i]))]);
    from = i;
  }
  return { bytes, starts, parts, groups };
}
