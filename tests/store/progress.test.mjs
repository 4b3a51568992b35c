import assert from "node:assert/strict";
import { test } from "node:test";
import { Meter, Progress, throttle } from "../../site/js/store/progress.mjs";

function clock() {
  let t = 0;
  const now = () => t;
  now.tick = (ms) => (t += ms);
  return now;
}

test("speed over a sliding window, falling during a stall", () => {
  const now = clock();
  const m = new Meter({ now, window: 1000 });
  assert.equal(m.speed(), null);
  m.start();
  now.tick(500);
  m.add(500);
  assert.equal(m.speed(), 1000); // 500 bytes in 0.5 s
  for (let i = 0; i < 10; i++) {
    now.tick(100);
    m.add(200); // 2000 bytes/s
  }
  assert.ok(Math.abs(m.speed() - 2000) < 1e-9, m.speed());
  now.tick(3000);
  assert.ok(m.speed() < 1000, m.speed());
});

test("per-file and overall figures, resumed bytes not counted as speed", () => {
  const now = clock();
  const p = new Progress({ model: "m", files: [{ name: "a", size: 100 }, { name: "b", size: 300 }], now });
  p.begin("a", { done: 0, total: 100 });
  now.tick(1000);
  p.add("a", 100);
  p.end("a", "stored");
  p.begin("b", { done: 200, total: 300 }); // 200 bytes were stored before
  now.tick(1000);
  p.add("b", 50);
  const s = p.snapshot();
  assert.equal(s.model, "m");
  assert.deepEqual([s.file.name, s.file.done, s.file.total, s.file.percent], ["b", 250, 300, (100 * 250) / 300]);
  assert.equal(s.file.speed, 50);
  assert.equal(s.file.eta, 1);
  assert.deepEqual([s.overall.done, s.overall.total], [350, 400]);
  assert.equal(s.overall.speed, 75); // 150 bytes fetched in 2 s
  assert.deepEqual(s.files.map((f) => f.state), ["stored", "downloading"]);
});

test("an unknown total: bytes and speed, no percent or time left", () => {
  const now = clock();
  const p = new Progress({ model: "m", files: [{ name: "a", size: null }], now });
  p.begin("a", {});
  now.tick(500);
  p.add("a", 1000);
  const s = p.snapshot();
  assert.deepEqual([s.overall.done, s.overall.total, s.overall.percent, s.overall.eta], [1000, null, null, null]);
  assert.equal(s.overall.speed, 2000);
  p.end("a", "stored");
  assert.equal(p.snapshot().overall.total, 1000); // known once stored
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
