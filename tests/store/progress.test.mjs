import assert from "node:assert/strict";
import { test } from "node:test";
import { Meter, Progress, throttle } from "../../site/js/store/progress.mjs";

function clock() {
  let t = 0;
  const now = () => t;
  now.tick = (ms) => (t += ms);
  return now;
}

test("speed over a sliding window from the first byte, falling during a stall", () => {
  const now = clock();
  const m = new Meter({ now, window: 1000, settle: 500 });
  assert.equal(m.speed(), null);
  m.start();
  now.tick(500); // connecting: not slowness
  m.add(500);
  assert.equal(m.speed(), null); // one chunk: no rate yet
  for (let i = 0; i < 10; i++) {
    now.tick(100);
    m.add(200); // 2000 bytes/s
  }
  assert.ok(Math.abs(m.speed() - 2000) < 1e-9, m.speed());
  now.tick(3000);
  assert.ok(m.speed() < 1000, m.speed());
});

test("no speed and no time left until the bytes have come for a while", () => {
  const now = clock();
  const p = new Progress({ model: "m", files: [{ name: "a", size: 300_000_000 }], now });
  p.begin("a", { done: 0, total: 300_000_000 });
  now.tick(2000); // a slow start (connecting)
  p.add("a", 16384);
  now.tick(50);
  p.add("a", 16384);
  let s = p.snapshot();
  assert.deepEqual([s.overall.speed, s.overall.eta, s.file.speed, s.file.eta], [null, null, null, null]);
  for (let i = 0; i < 30; i++) {
    now.tick(100);
    p.add("a", 1_000_000); // 10 MB/s
  }
  s = p.snapshot();
  assert.ok(Math.abs(s.overall.speed / 10_000_000 - 1) < 0.03, s.overall.speed); // the slow first 50 ms fade out
  assert.ok(Math.abs(s.overall.eta - (300_000_000 - s.overall.done) / s.overall.speed) < 1e-6, s.overall.eta);
});

test("per-file and overall figures, resumed bytes not counted as speed", () => {
  const now = clock();
  const p = new Progress({ model: "m", files: [{ name: "a", size: 100 }, { name: "b", size: 300 }], now, settle: 1000 });
  p.begin("a", { done: 0, total: 100 });
  now.tick(500);
  p.add("a", 10);
  now.tick(1000);
  p.add("a", 90);
  p.end("a", "stored");
  p.begin("b", { done: 200, total: 300 }); // 200 bytes were stored before: checked, not fetched
  assert.equal(p.snapshot().file.speed, null); // a resume never reads "0 bytes/s"
  now.tick(500);
  p.add("b", 10);
  now.tick(1000);
  p.add("b", 40);
  const s = p.snapshot();
  assert.equal(s.model, "m");
  assert.deepEqual([s.file.name, s.file.done, s.file.total, s.file.percent], ["b", 250, 300, (100 * 250) / 300]);
  assert.equal(s.file.speed, 40); // 40 bytes in the second after b's first
  assert.equal(s.file.eta, 50 / 40);
  assert.deepEqual([s.overall.done, s.overall.total], [350, 400]);
  assert.equal(s.overall.speed, 140 / 2.5); // 140 bytes in the 2.5 s after the first byte
  assert.deepEqual(s.files.map((f) => f.state), ["stored", "downloading"]);
});

test("an unknown total: bytes and speed, no percent or time left", () => {
  const now = clock();
  const p = new Progress({ model: "m", files: [{ name: "a", size: null }], now, settle: 1000 });
  p.begin("a", {});
  now.tick(500);
  p.add("a", 1000);
  now.tick(1000);
  p.add("a", 2000);
  const s = p.snapshot();
  assert.deepEqual([s.overall.done, s.overall.total, s.overall.percent, s.overall.eta], [3000, null, null, null]);
  assert.equal(s.overall.speed, 2000);
  p.end("a", "stored");
  assert.equal(p.snapshot().overall.total, 3000); // known once stored
});

test("absent and skipped files, resets", () => {
  const now = clock();
  const p = new Progress({ model: "m", files: [{ name: "a", size: null }, { name: "b", size: 10 }], now });
  p.begin("a", {});
  p.end("a", "absent");
  p.begin("b", { done: 10, total: 10 });
  p.end("b", "skipped");
  const s = p.snapshot("done");
  assert.deepEqual([s.phase, s.overall.done, s.overall.total, s.overall.percent, s.overall.eta], ["done", 10, 10, 100, 0]);
  p.begin("b", { done: 5, total: 10 });
  p.reset("b", 0);
  assert.equal(p.snapshot().file.done, 0);
  assert.throws(() => p.begin("c"), /no file c/);
});

test("throttle: at most one event an interval, unless forced", () => {
  const now = clock();
  const got = [];
  const emit = throttle((v) => got.push(v), 100, now);
  emit(() => 1);
  emit(() => 2);
  now.tick(100);
  emit(() => 3);
  emit(() => 4, true);
  assert.deepEqual(got, [1, 3, 4]);
});
