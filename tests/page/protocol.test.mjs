// The one casing rule (site/js/page/protocol.mjs): the page's API takes camelCase, the wire is
// snake_case, and toWire alone converts, reading each request's fields from the contract
// (protocol.gen.mjs), so a field the contract adds reaches the wire with no name written here.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";
import { toWire } from "../../site/js/page/protocol.mjs";
import { FIELDS, JOBS, MESSAGES } from "../../site/js/worker/protocol.gen.mjs";

const settings = { reply_limit: 96, compare_limit: 48, compare_top_k: 10 };
const camel = (name) => name.replace(/_(\w)/g, (_, c) => c.toUpperCase());
const messages = [{ role: "user", content: "Hi!" }];

test("every request's arguments reach the wire from their camelCase names, and nothing else does", () => {
  for (const [type, { args: kind }] of Object.entries(MESSAGES.requests)) {
    // each field a value of its own, under its camelCase name, and one field the contract lacks
    const given = Object.fromEntries(FIELDS[kind].map((name, i) => [camel(name), name === "messages" ? messages : `v${i}`]));
    const wire = toWire(type, { ...given, notAField: 1 }, settings);
    assert.deepEqual(Object.keys(wire).sort(), [...FIELDS[kind]].sort(), type);
    for (const name of FIELDS[kind]) assert.deepEqual(wire[name], given[camel(name)], `${type}: ${name}`);
  }
});

test("a wire name given to the page's API is not taken (render's, until its callers move)", () => {
  assert.equal(toWire("run", { messages, max_tokens: 5, top_k: 3 }, settings).max_tokens, 96);
  assert.equal(toWire("run", { messages, top_k: 3 }, settings).top_k, undefined);
  assert.equal(toWire("init", { hide_jspi: true }).hide_jspi, undefined);
  assert.deepEqual(toWire("init", { hideJspi: true, oneModelOnGpu: false }), { hide_jspi: true, one_model_on_gpu: false });
  assert.equal(toWire("render", { messages, add_generation_prompt: true }).add_generation_prompt, true);
  assert.equal(toWire("render", { messages, addGenerationPrompt: true }).add_generation_prompt, true);
});

test("each request's defaults are the site's settings", () => {
  // a turn: the reply limit the site's, the reserve the reply limit; a reserve alone sets both
  assert.deepEqual(toWire("run", { messages, window: 512 }, settings), { messages, window: 512, max_tokens: 96, reserve: 96 });
  assert.deepEqual(toWire("preview", { messages, reserve: 40 }, settings), { messages, reserve: 40, max_tokens: 40 });
  assert.deepEqual(toWire("count", { messages, maxTokens: 8 }, settings), { messages, max_tokens: 8, reserve: 8 });
  // plain text: the reply limit; its candidates only when asked for
  assert.deepEqual(toWire("complete", { text: "Hi" }, settings), { text: "Hi", max_tokens: 96 });
  assert.deepEqual(toWire("complete", { text: "Hi", topK: 5, maxTokens: 8 }, settings), { text: "Hi", top_k: 5, max_tokens: 8 });
  // the comparison: the lab's cap and top-k
  assert.deepEqual(toWire("compare", { text: "Hi" }, settings), { text: "Hi", max_tokens: 48, top_k: 10 });
  assert.deepEqual(toWire("compare", { text: "Hi", maxTokens: 3, topK: 0 }, settings), { text: "Hi", max_tokens: 3, top_k: 0 });
  assert.deepEqual(toWire("chat_template"), {});
});

test("what the page's state holds (proxies, which postMessage refuses) goes as plain data", () => {
  const held = new Proxy({ role: "user", content: "Hi!" }, {});
  assert.throws(() => structuredClone(held), { name: "DataCloneError" });
  const wire = toWire("render", { messages: [held], variables: new Proxy({ name: "Ada" }, {}) });
  assert.deepEqual(structuredClone(wire), { messages: [{ role: "user", content: "Hi!" }], variables: { name: "Ada" } });
  assert.deepEqual(structuredClone(toWire("run", { messages: [held] }, settings)).messages, [{ role: "user", content: "Hi!" }]);
});

test("a request the worker does not take is refused", () => {
  assert.throws(() => toWire("bogus", {}), /no request bogus/);
});

test("api.mjs names every job method its loop makes, in the one comment a grep for them finds", () => {
  const source = readFileSync(new URL("../../site/js/page/api.mjs", import.meta.url), "utf8");
  const named = /The methods made here[^\n]*\n\s*\*\s+((?:api\.\w+\s*)+)/.exec(source)?.[1].trim().split(/\s+/);
  assert.deepEqual(named, Object.keys(JOBS).map((type) => `api.${type}`));
});
