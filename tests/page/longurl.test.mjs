// A ?model= of thousands of characters is shortened wherever an error names it, as the labels
// shorten it (lesson/terms.mjs's shortened and elideUrls): the status pill, its tooltip, the settings'
// source line and the model box (issue 43, item 8).

import assert from "node:assert/strict";
import { test } from "node:test";
import { elideUrls, shortened } from "../../site/js/lesson/terms.mjs";
import { sourceFromUrl } from "../../site/js/page/source.mjs";
import { sourceError } from "../../site/js/views/downloads.mjs";
import { statusView } from "../../site/js/views/status.mjs";

const page = "http://127.0.0.1:8000/";
const long = `${page}models/${"a".repeat(5000)}/`;
// as the worker says it when the folder's first file is not there
const failed = { state: "error", detail: `${long}config.json: HTTP 404` };

test("elideUrls keeps a URL's start and end, and leaves short ones and the words around them", () => {
  const said = elideUrls(failed.detail);
  assert.ok(said.length < 100, said);
  assert.ok(said.startsWith(`${page}models/aaa`) && said.endsWith("aaa/config.json: HTTP 404"), said);
  assert.ok(said.includes("…"));
  const short = `${page}models/x/config.json: HTTP 404`;
  assert.equal(elideUrls(short), short);
  assert.equal(elideUrls("no address here"), "no address here");
});

test("the status pill, its tooltip and the source line name a long ?model= shortened", () => {
  const source = sourceFromUrl(long, page);
  assert.ok(source.label.length <= 120); // the label, as before
  const v = statusView({ status: failed, source, writing: false }, { note: null });
  assert.equal(v.state, "error");
  assert.equal(v.shown, elideUrls(failed.detail));
  assert.ok(v.title.length < 120 && v.title.startsWith("Error: "), v.title);
  assert.ok(v.label.length < 400, v.label);
  assert.equal(v.label, `${source.label} (${shortened(source.url)}): failed: ${elideUrls(failed.detail)}`);
  // a host the page may not read: the pill says so in a short line, the model box says why
  const other = sourceFromUrl(`https://example.org/${"c".repeat(5000)}/`, page);
  const blocked = statusView({ status: { state: "error", detail: `${other.url}config.json: Failed to fetch` }, source: other }, { note: "why" });
  assert.equal(blocked.shown, "this page cannot read example.org (the model box says why)");
  assert.ok(blocked.label.length < 400, blocked.label);
});

test("the model box's error names a long ?model= shortened", () => {
  const said = sourceError({ detail: failed.detail });
  assert.equal(said, `The model source could not be used: ${elideUrls(failed.detail)}`);
  assert.ok(said.length < 150, said);
  assert.equal(sourceError({ detail: failed.detail, hostNote: "This page cannot read example.org: …" }), "This page cannot read example.org: …");
});
