// Where each of the page's two models comes from (page/source.mjs), and what the store then keeps
// for it (store/spec.mjs): the instruct and the base are two sources with two ids, the Hub's files
// checked against build.json's pins, the mirror's against its manifest.
import assert from "node:assert/strict";
import { test } from "node:test";
import { mirrorBase, pinsOf, resolveBaseSource, resolveSource } from "../../site/js/page/source.mjs";
import { modelSpec } from "../../site/js/store/spec.mjs";

const H = (c) => c.repeat(64);
const location = { href: "http://127.0.0.1:8000/index.html" };
// build.json's shape (py/chatlens/host/build.py writes it): the pins here are stand-ins, the test
// is about which pins reach the store, not their values.
const BUILD = {
  models: {
    instruct: {
      repo: "HuggingFaceTB/SmolLM2-135M-Instruct", revision: "12fd25f77366fa6b3b4b768ec3050bf629380bac",
      files: [{ name: "config.json" }, { name: "generation_config.json", optional: true },
              { name: "tokenizer.json", sha256: H("a") }, { name: "tokenizer_config.json" },
              { name: "model.safetensors", sha256: H("b") }],
      verified: "instruct: pinned by public code",
    },
    base: {
      repo: "HuggingFaceTB/SmolLM2-135M", revision: "93efa2f097d58c2a74874c7e644dbc9b0cee75a2",
      files: [{ name: "config.json", sha256: H("c") }, { name: "tokenizer.json", sha256: H("a") },
              { name: "tokenizer_config.json", sha256: H("d") }, { name: "model.safetensors", sha256: H("e"), size: 269060552 }],
      verified: "base: the sha256 the Hub states for each file",
    },
  },
};

// The mirror's manifest as host/mirror.py's Mirror.manifest() writes it, with the base beside it.
const entry = (repo, revision, names, extra = {}) => ({
  repo, revision, base: `models/${repo}/resolve/${revision}/`, hf: true, gguf: null, sha256: null, about: `a ${repo} stand-in`,
  files: Object.fromEntries(names.map((n, i) => [n, 10 + i])), chunk_size: 16,
  digests: Object.fromEntries(names.map((n, i) => [n, { sha256: H(String(i)), chunks: [H(String(i))] }])), ...extra,
});
const FOLDER = ["config.json", "generation_config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"];
const mirror = (withBase) => ({
  ...entry("HuggingFaceTB/SmolLM2-135M-Instruct", "q4_1-b179c9523d0e", FOLDER),
  ...(withBase ? { base_model: entry("HuggingFaceTB/SmolLM2-135M", "local-1234", [...FOLDER.filter((n) => n !== "generation_config.json"), "README.md"]) } : {}),
});
// The mirror's base as an object under "base" (what the page first expected; host/mirror.py
// writes base_model, since "base" is the instruct's folder).
const mirrorBaseUnderBase = () => {
  const m = mirror(true);
  const { base_model: base, ...rest } = m;
  return { ...rest, base };
};

test("build.json's two models; a build without them has neither", () => {
  assert.equal(pinsOf(BUILD).base.repo, "HuggingFaceTB/SmolLM2-135M");
  assert.equal(pinsOf(BUILD).instruct.repo, "HuggingFaceTB/SmolLM2-135M-Instruct");
  assert.deepEqual(pinsOf({}), { instruct: null, base: null });
});

test("from the Hub: two sources, two store ids, each file checked against build.json's pins", async () => {
  const instruct = await resolveSource({ location, build: BUILD, wanted: null, manifest: null });
  const base = await resolveBaseSource({ location, build: BUILD, manifest: null });
  assert.deepEqual([instruct.origin, instruct.model, base.origin, base.model], ["hub", "instruct", "hub", "base"]);
  assert.equal(base.url, "https://huggingface.co/HuggingFaceTB/SmolLM2-135M/resolve/93efa2f097d58c2a74874c7e644dbc9b0cee75a2/");
  assert.equal(base.verified, BUILD.models.base.verified);
  const [si, sb] = [modelSpec(instruct), modelSpec(base)];
  assert.notEqual(si.id, sb.id);
  assert.equal(sb.id, "hf:HuggingFaceTB/SmolLM2-135M@93efa2f097d58c2a74874c7e644dbc9b0cee75a2");
  // the store's spec carries each pin of build.json's own list, file by file
  assert.deepEqual(sb.files.map((f) => [f.name, f.sha256, f.size]), BUILD.models.base.files.map((f) => [f.name, f.sha256, f.size ?? null]));
  assert.deepEqual(si.files.map((f) => [f.name, f.sha256]), BUILD.models.instruct.files.map((f) => [f.name, f.sha256 ?? null]));
  assert.deepEqual([sb.model, sb.verified], ["base", BUILD.models.base.verified]);
});

test("from the mirror: its base when serve put one there, its names from build.json, its hashes from the manifest", async () => {
  for (const m of [mirror(true), mirrorBaseUnderBase()]) {
    const mb = mirrorBase(m);
    const base = await resolveBaseSource({ location, build: BUILD, manifest: m });
    assert.deepEqual([base.origin, base.model, base.url], ["mirror", "base", `http://127.0.0.1:8000/${mb.base}`]);
    const sb = modelSpec(base);
    assert.equal(sb.id, "hf:HuggingFaceTB/SmolLM2-135M@local-1234");
    // README.md is in the mirror's folder but not in build.json's list: not kept
    assert.deepEqual(sb.files.map((f) => f.name), BUILD.models.base.files.map((f) => f.name));
    assert.deepEqual(sb.files.map((f) => [f.sha256, f.size]), sb.files.map((f) => [mb.digests[f.name].sha256, mb.files[f.name]]));
    assert.match(base.verified, /this site's mirror/);
    assert.equal(base.label, "local mirror of HuggingFaceTB/SmolLM2-135M");
  }
  const standIn = mirror(true);
  standIn.base_model.stand_in = true;
  assert.equal((await resolveBaseSource({ location, build: BUILD, manifest: standIn })).label,
    "local mirror of a stand-in for HuggingFaceTB/SmolLM2-135M (not its weights)");
  const m = mirror(true);
  const instruct = await resolveSource({ location, build: BUILD, wanted: null, manifest: m });
  assert.deepEqual([instruct.origin, instruct.model, instruct.url], ["mirror", "instruct", `http://127.0.0.1:8000/${m.base}`]);
  assert.notEqual(modelSpec(instruct).id, modelSpec(await resolveBaseSource({ location, build: BUILD, manifest: m })).id);
  // the instruct's mirror takes its optional generation_config.json, which the Hub's pins do not constrain here
  assert.deepEqual(modelSpec(instruct).files.map((f) => [f.name, f.sha256]),
    ["config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json", "model.safetensors"].map((n) => [n, m.digests[n].sha256]));
});

test("a mirror without a base: the base comes from the Hub, never the mirror's instruct", async () => {
  const base = await resolveBaseSource({ location, build: BUILD, manifest: mirror(false) });
  assert.deepEqual([base.origin, base.repo], ["hub", "HuggingFaceTB/SmolLM2-135M"]);
});

test("the manifest is read from beside the site when not given", async () => {
  const asked = [];
  const saved = globalThis.fetch;
  globalThis.fetch = async (url) => {
    asked.push(String(url));
    return { ok: true, json: async () => mirror(true) };
  };
  try {
    const base = await resolveBaseSource({ location, build: BUILD });
    assert.equal(base.origin, "mirror");
    globalThis.fetch = async () => { throw new TypeError("no server"); };
    assert.equal((await resolveBaseSource({ location, build: BUILD })).origin, "hub");
  } finally {
    globalThis.fetch = saved;
  }
  assert.deepEqual(asked, ["http://127.0.0.1:8000/models/manifest.json"]);
});

test("a base that cannot be told from the instruct, or none at all, is refused in a sentence", async () => {
  const m = mirror(true);
  m.base_model = { ...m.base_model, repo: m.repo, revision: m.revision };
  await assert.rejects(resolveBaseSource({ location, build: BUILD, manifest: m }), /instruct model's repo and revision/);
  const same = { models: { instruct: BUILD.models.instruct, base: BUILD.models.instruct } };
  await assert.rejects(resolveBaseSource({ location, build: same, manifest: null }), /base model is the instruct model/);
  await assert.rejects(resolveBaseSource({ location, build: { models: { instruct: BUILD.models.instruct } }, manifest: null }), /names no base model/);
});

test("a Hugging Face folder given by URL keeps the instruct's file names, without its pins", async () => {
  const src = await resolveSource({ location, build: BUILD, wanted: "https://huggingface.co/someone/copy", manifest: null });
  const spec = modelSpec(src);
  assert.deepEqual(spec.files.map((f) => [f.name, f.sha256, f.optional]),
    BUILD.models.instruct.files.map((f) => [f.name, null, Boolean(f.optional)]));
  const g = await resolveSource({ location, build: BUILD, wanted: "https://example.org/m.Q8_0.gguf", manifest: null });
  assert.deepEqual(modelSpec(g).files.map((f) => f.name), ["m.Q8_0.gguf"]);
});
