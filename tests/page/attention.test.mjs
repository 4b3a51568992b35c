// The page's inspection figures (site/js/views/attention.mjs) against chatlens.inspection's own,
// on the same attention arrays: tests/page/inspect_reference.py makes the arrays and computes
// Python's answers now; every number here must equal Python's, bit for bit.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import { test } from "node:test";
import { byPiece, fsum, lensProbability, lookBack, meanWeights, settles, topPositions } from "../../site/js/views/attention.mjs";

const script = fileURLToPath(new URL("./inspect_reference.py", import.meta.url));
const python = process.env.PYTHON || "python3";
const reference = JSON.parse(execFileSync(python, [script], { encoding: "utf8", maxBuffer: 64 << 20 }));
const { cases } = reference;
const layerOf = (key) => (key === "all" ? null : Number(key));

test("the reference made the cases it says, each with every variant", () => {
  assert.deepEqual(cases.map((c) => c.name), ["model-shaped", "first step", "ties", "rounding"]);
  for (const c of cases) {
    assert.equal(Object.keys(c.by_piece).length, 6, c.name);
    assert.equal(Object.keys(c.back).length, 3, c.name);
  }
});

test("fsum is Python's math.fsum: correctly rounded, where a plain loop is not", () => {
  let differs = 0;
  for (const [xs, want] of reference.fsum) {
    assert.equal(fsum(xs), want, JSON.stringify(xs).slice(0, 80));
    if (xs.reduce((a, b) => a + b, 0) !== want) differs += 1;
  }
  assert.ok(differs >= 2, "the cases include sums a plain loop rounds differently");
});

for (const c of cases) {
  test(`${c.name}: the mean over heads is inspection.mean_weights`, () => {
    for (const [key, want] of Object.entries(c.mean)) assert.deepEqual(meanWeights(c.attention, layerOf(key)), want, key);
  });

  test(`${c.name}: each piece's share, with and without the first token, is inspection.by_piece`, () => {
    for (const [key, want] of Object.entries(c.by_piece)) {
      const [layer, skip] = key.split("/");
      const options = { layer: layerOf(layer), skipFirst: skip === "skip" };
      assert.deepEqual(byPiece(c.attention, c.pieces, options), want, key);
      // The answer's own by_piece (its reply span included) given back as the pieces: the same shares.
      assert.deepEqual(byPiece(c.attention, want, options), want, `${key}, from the answer's by_piece`);
    }
  });

  test(`${c.name}: the positions most attended to are inspection.top_positions`, () => {
    for (const [key, want] of Object.entries(c.top)) {
      const [layer, skip] = key.split("/");
      assert.deepEqual(topPositions(c.attention, 10, { layer: layerOf(layer), skipFirst: skip === "skip" }), want, key);
    }
  });

  test(`${c.name}: the heads that read furthest back are the reference's look_back`, () => {
    for (const [key, want] of Object.entries(c.back)) assert.deepEqual(lookBack(c.attention, 6, { layer: layerOf(key) }), want, key);
  });
}

test("the first token left out: its share goes, the rest still sum to 1", () => {
  const c = cases[0];
  const kept = byPiece(c.attention, c.pieces);
  const skipped = byPiece(c.attention, c.pieces, { skipFirst: true });
  const first = meanWeights(c.attention)[0];
  assert.ok(first > 0.1, "the model-shaped rows park weight on the first token");
  assert.ok(Math.abs(fsum(skipped.map((p) => p.share)) - 1) < 1e-12);
  // the system prompt holds the first token: without it, its share is what is left of it, of the rest
  assert.ok(Math.abs(skipped[0].share - (kept[0].share - first) / (1 - first)) < 1e-12);
});

test("a layer outside the model is refused in a sentence", () => {
  assert.throws(() => meanWeights(cases[0].attention, 30), { name: "RangeError", message: "layer 30 is out of range: the model has layers 0 to 29" });
});

test("where the lens settles: the first layer from which the id is every later layer's first choice", () => {
  // made up for the rule: 7 leads at layer 1, loses layer 2, leads from layer 3 on
  const lens = [[[5, 0.4], [7, 0.3]], [[7, 0.5], [5, 0.2]], [[5, 0.6], [7, 0.1]], [[7, 0.7], [5, 0.1]], [[7, 0.9], [5, 0.05]]];
  assert.equal(settles(lens, 7), 3);
  assert.equal(settles(lens, 5), null); // not the last layer's choice
  assert.equal(lensProbability(lens, 2, 7), 0.1);
  assert.equal(lensProbability(lens, 2, 9), null); // not among that layer's top K
});
