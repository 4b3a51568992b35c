// The page<->worker messages used in the code are the ones the contract names: every type that
// the worker's modules (site/js/worker/) and site/js/page/connection.mjs post, switch on or
// answer (and that page/api.mjs calls or signals) must be listed in protocol.gen.mjs
// (py/chatlens/protocol.py's PAGE_REQUESTS, SIGNALS and EVENTS), and every call into Python one
// of its REQUESTS. The jobs the worker routes through its one handler (JOBS[type]) are the
// contract's own list, so each of them counts as used.
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { test } from "node:test";
import { JOBS, MESSAGES, REQUESTS } from "../../site/js/worker/protocol.gen.mjs";

const read = (path) => readFileSync(new URL(`../../site/js/${path}`, import.meta.url), "utf8");
const all = (source, re) => [...source.matchAll(re)].map((m) => m[1]);
const strings = (list) => all(list, /["'](\w+)["']/g);

/** The keys of the object literal `const name = {...}` (its members at two spaces' indent). */
function keys(source, name) {
  const start = source.indexOf(`const ${name} = {`);
  assert.ok(start >= 0, `no ${name} object`);
  const body = source.slice(start, source.indexOf("\n};", start));
  return all(body, /^ {2}(?:async\s+)?(\w+)\s*[(:]/gm);
}

/** Each message type a file uses, by what it is: {event, request, signal, python}: [type, ...]. */
export function used(worker, connection, api) {
  const added = all(worker, /for \(const \w+ of \[([^\]]*)\]\)\s*\{\s*requests\[/g).flatMap(strings);
  const routed = /\bJOBS\[type\]/.test(worker) ? Object.keys(JOBS) : []; // every job, through one handler
  return {
    event: [...all(worker, /postMessage\(\{\s*type:\s*["'](\w+)["']/g), ...all(connection, /data\.type === ["'](\w+)["']/g)],
    request: [...keys(worker, "requests"), ...added, ...routed, ...all(worker, /\btype === ["'](\w+)["']/g),
              ...all(worker, /TEXT_SIDE = new Set\(\[([^\]]*)\]/g).flatMap(strings),
              ...all(api, /\bcall\(\s*["'](\w+)["']/g), ...all(api, /textRequest\(["'](\w+)["']\)/g)],
    signal: [...keys(worker, "signals"), ...all(api, /\.signal\(\s*["'](\w+)["']/g)],
    python: [...all(worker, /\b(?:call|ask)\(\s*["'](\w+)["']/g)],
  };
}

const named = {
  event: Object.keys(MESSAGES.events),
  request: Object.keys(MESSAGES.requests),
  signal: Object.keys(MESSAGES.signals),
  python: Object.keys(REQUESTS),
};

/** The types `found` uses that the contract does not name, by what they are. */
function unnamed(found) {
  const out = {};
  for (const [what, types] of Object.entries(found)) {
    const missing = [...new Set(types)].filter((t) => !named[what].includes(t));
    if (missing.length) out[what] = missing;
  }
  return out;
}

/** The worker's modules as one text (what it posts and calls may be in any of them), its
 * generated contract left out. */
const workerSource = () => readdirSync(new URL("../../site/js/worker/", import.meta.url))
  .filter((f) => f.endsWith(".mjs") && f !== "protocol.gen.mjs").sort().map((f) => read(`worker/${f}`)).join("\n");
const sources = () => [workerSource(), read("page/connection.mjs"), read("page/api.mjs")];

test("every message the worker and the connection use is named in protocol.gen.mjs", () => {
  const found = used(...sources());
  for (const what of ["event", "request", "signal", "python"]) assert.ok(found[what].length > 1, `found no ${what}`);
  assert.deepEqual(unnamed(found), {});
});

test("every event and signal the contract names is used, so the list stays the code's", () => {
  const found = used(...sources());
  assert.deepEqual(named.event.filter((t) => !found.event.includes(t)), []);
  assert.deepEqual(named.signal.filter((t) => !found.signal.includes(t)), []);
  assert.deepEqual(named.request.filter((t) => !found.request.includes(t)), []);
});

test("a type the contract does not name is caught, wherever it is used", () => {
  const [worker, connection, api] = sources();
  const bogus = {
    event: [worker.replace('postMessage({ type: "status"', 'postMessage({ type: "bogus"'), connection, api],
    request: [worker.replace("  async preview(args) {", "  async bogus(args) {"), connection, api],
    signal: [worker.replace("  lose_gpu() {", "  bogus() {"), connection, api],
    python: [worker.replace('ask("start"', 'ask("bogus"'), connection, api],
  };
  for (const [what, files] of Object.entries(bogus)) {
    assert.notEqual(files[0], worker, `the ${what} edit found nothing to change`);
    assert.deepEqual(unnamed(used(...files))[what], ["bogus"], what);
  }
  const onPage = connection.replace('data.type === "token"', 'data.type === "bogus"');
  assert.deepEqual(unnamed(used(worker, onPage, api)).event, ["bogus"]);
});
