// The figures views/inspect.mjs draws from an inspection (chatlens.inspect's answer), computed on
// the page: the mean weight over heads, each piece's share with or without the first token, the
// positions most attended to, the heads whose weight lies furthest back, and where the logit lens settles.
// No DOM. The first four are py/chatlens/inspection.py's mean_weights, by_piece, top_positions and
// look_back, written again for
// the page: tests/page/attention.test.mjs runs both on the same arrays and asks for equal numbers,
// bit for bit. Sums are therefore correctly rounded, as Python's math.fsum rounds them (`fsum`):
// a plain loop's rounding would differ in the last bits and could reorder equal-looking weights.
//
// Layers and heads are 0-based here, as in the answer (attention[layer][head], lens[layer]); the
// view labels them from 1 (views/inspect.mjs blockLabel).

/** The correctly rounded sum of `xs` (finite numbers): CPython's math.fsum (Shewchuk's exact
 * partials, then the half-even fix across partials), so a sum here equals Python's bit for bit. */
export function fsum(xs) {
  // (indexed loops and a swap through a temporary: a view sums each position's 270 weights, and
  // destructuring or iterators here made a 1,000-token inspection take seconds to draw)
  const p = [];
  let n = 0;
  for (let k = 0; k < xs.length; k++) {
    let x = xs[k];
    let i = 0;
    for (let j = 0; j < n; j++) {
      let y = p[j];
      if (Math.abs(x) < Math.abs(y)) {
        const t = x;
        x = y;
        y = t;
      }
      const hi = x + y;
      const lo = y - (hi - x);
      if (lo !== 0) p[i++] = lo;
      x = hi;
    }
    n = i;
    if (x !== 0) p[n++] = x;
  }
  if (n === 0) return 0;
  let hi = p[--n];
  let lo = 0;
  while (n > 0) {
    const x = hi;
    const y = p[--n];
    hi = x + y;
    lo = y - (hi - x);
    if (lo !== 0) break;
  }
  if (n > 0 && ((lo < 0 && p[n - 1] < 0) || (lo > 0 && p[n - 1] > 0))) {
    const y = lo * 2;
    const x = hi + y;
    if (y === x - hi) hi = x;
  }
  return hi;
}

function layerOf(attention, layer) {
  if (!(Number.isInteger(layer) && layer >= 0 && layer < attention.length)) {
    throw new RangeError(`layer ${layer} is out of range: the model has layers 0 to ${attention.length - 1}`);
  }
  return layer;
}

/** Each position's weight averaged over the heads of every layer (layer null) or of one layer:
 * inspection.mean_weights. */
export function meanWeights(attention, layer = null) {
  const layers = layer === null ? attention : [attention[layerOf(attention, layer)]];
  const rows = layers.flat();
  const n = rows[0].length;
  const out = new Array(n);
  const column = new Array(rows.length);
  for (let j = 0; j < n; j++) {
    for (let r = 0; r < rows.length; r++) column[r] = rows[r][j];
    out[j] = fsum(column) / rows.length;
  }
  return out;
}

/** The mean weights summed over each piece of the prompt, then over the reply so far (kind
 * "reply") when the query lies past the prompt: inspection.by_piece. pieces: the record's
 * pieces, or the answer's by_piece (its reply span is then a piece like the others, and the
 * shares come out the same). skipFirst: position 0 left out, the shares taken of the rest. */
export function byPiece(attention, pieces, { layer = null, skipFirst = false } = {}) {
  const weights = meanWeights(attention, layer);
  const n = weights.length;
  const spans = pieces
    .filter((p) => Number(p.start) < n)
    .map((p) => ({ kind: p.kind, label: p.label, start: Number(p.start), end: Math.min(Number(p.end), n) }));
  const promptEnd = Math.max(0, ...pieces.map((p) => Number(p.end)));
  if (n > promptEnd) spans.push({ kind: "reply", label: "reply so far", start: promptEnd, end: n });
  const first = skipFirst ? 1 : 0;
  const total = fsum(weights.slice(first)) || 1;
  return spans.map((s) => ({ ...s, share: fsum(weights.slice(Math.max(s.start, first), s.end)) / total }));
}

/** [[position, weight], ...], the `n` largest of `weights` from position `from` to `to`
 * (exclusive), most first, equal weights by lower position. */
function largest(weights, n, from = 0, to = weights.length) {
  // kept in order as it is scanned (n is 10 at most here): no sort of every position for each of
  // the 270 heads
  const k = Math.max(Math.trunc(n), 0);
  const top = [];
  for (let j = from; j < to && k > 0; j++) {
    const w = weights[j];
    if (top.length === k && !(w > top[k - 1][1])) continue; // equal: the lower position, already in, stays
    let at = top.length;
    while (at > 0 && w > top[at - 1][1]) at--;
    top.splice(at, 0, [j, w]);
    if (top.length > k) top.pop();
  }
  return top;
}

/** The `n` positions with the most mean weight, as [position, weight], most first (equal weights
 * by lower position); skipFirst leaves position 0 out: inspection.top_positions. */
export function topPositions(attention, n = 10, { layer = null, skipFirst = false } = {}) {
  return largest(meanWeights(attention, layer), n, skipFirst ? 1 : 0);
}

// The last positions a head's reach leaves out: the query's own token and the three before it
// (at a reply's first step, the generation header's tokens). Averaged over heads, most of the
// weight sits on the first token and on the last few (issue 34, measured on this model); what a
// learner looks for is a head that reads the system prompt, an earlier turn or the message.
export const RECENT = 4;

/** The heads whose weight lies furthest back. For each head (of every layer, or of one), over
 * positions 1 to P - RECENT (the first token and the last `recent` positions, the query's own
 * among them, left out): `weight`, its weight there; `reach`, each of those weights times how many
 * positions back from the query it lies, summed; `distance`, the mean distance of that weight
 * (reach / weight, 0 with none); `reads`, the `top` positions it reads most there, as [position,
 * weight]. The `n` with the most reach, most first (equal reach by lower layer, then head): a head
 * that puts half its weight 40 tokens back outranks one that puts all of it 5 back.
 * py/chatlens/inspection.py's look_back (RECENT its RECENT). */
export function lookBack(attention, n = 6, { layer = null, recent = RECENT, top = 3 } = {}) {
  const layers = layer === null ? attention.map((heads, l) => [l, heads]) : [[layerOf(attention, layer), attention[layer]]];
  const heads = [];
  for (const [l, rows] of layers) {
    rows.forEach((row, h) => {
      const p = row.length - 1;
      const end = Math.max(1, row.length - recent);
      const far = row.slice(1, end);
      const weight = fsum(far);
      const reach = fsum(far.map((w, k) => w * (p - (k + 1))));
      heads.push({ layer: l, head: h, weight, reach, distance: weight ? reach / weight : 0, reads: largest(row, top, 1, end) });
    });
  }
  heads.sort((a, b) => (b.reach - a.reach) || (a.layer - b.layer) || (a.head - b.head));
  return heads.slice(0, Math.max(Math.trunc(n), 0));
}

/** Where the logit lens settles on `id`: the first layer from which it is every later layer's
 * first choice (lens[layer][0][0]), or null when the last layer's first choice is another id. */
export function settles(lens, id) {
  let at = null;
  for (let l = lens.length - 1; l >= 0 && lens[l][0]?.[0] === id; l--) at = l;
  return at;
}

/** The lens's probability of `id` at `layer`, or null when it is not among that layer's top K. */
export function lensProbability(lens, layer, id) {
  const row = lens[layer].find(([i]) => i === id);
  return row ? row[1] : null;
}
