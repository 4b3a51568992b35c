// The import graph of site/js/, read from the sources: no cycle, and each thread's folders import
// only what that thread may load (the worker and the GPU executor never the page's DOM code).
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, normalize, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { test } from "node:test";

const js = fileURLToPath(new URL("../../site/js/", import.meta.url));
const IMPORT = /(?:import|export)\s[^'";]*?from\s*["'](\.{1,2}\/[^"']+\.mjs)["']|import\(\s*["'](\.{1,2}\/[^"']+\.mjs)["']|new URL\(\s*["'](\.{1,2}\/[^"']+\.mjs)["']/g;

function modules(dir = js) {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? (e.name === "vendor" ? [] : modules(join(dir, e.name))) : e.name.endsWith(".mjs") ? [join(dir, e.name)] : []);
}

const graph = new Map(modules().map((file) => {
  const deps = [...readFileSync(file, "utf8").matchAll(IMPORT)].map((m) => normalize(join(dirname(file), m[1] || m[2] || m[3])));
  return [relative(js, file), deps.map((d) => relative(js, d))];
}));

test("site/js has no import cycle", () => {
  const state = new Map(); // module -> "open" while on the path, "done" after
  const visit = (m, path) => {
    if (state.get(m) === "done") return;
    assert.notEqual(state.get(m), "open", `import cycle: ${[...path.slice(path.indexOf(m)), m].join(" -> ")}`);
    state.set(m, "open");
    for (const d of graph.get(m) || []) visit(d, [...path, m]);
    state.set(m, "done");
  };
  for (const m of graph.keys()) visit(m, []);
  assert.ok(graph.size > 30); // the whole tree was read
});

test("each folder imports only what its thread loads", () => {
  // the worker's thread: the worker, the GPU executor and the model store; never the page's
  const WORKER = ["worker/", "gpu/", "store/"];
  for (const [m, deps] of graph) {
    if (!WORKER.some((f) => m.startsWith(f))) continue;
    for (const d of deps) assert.ok(WORKER.some((f) => d.startsWith(f)), `${m} (a worker's module) imports ${d}`);
  }
  for (const [m, deps] of graph) {
    if (!m.startsWith("views/") && !m.startsWith("lesson/")) continue;
    for (const d of deps) assert.ok(!d.startsWith("modes/") && !d.startsWith("page/"), `${m} imports ${d}: views draw, the page and the modes call them`);
  }
});
