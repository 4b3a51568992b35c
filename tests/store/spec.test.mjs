import assert from "node:assert/strict";
import { test } from "node:test";
import { filesFromManifest, modelId, modelSpec, parseResolveUrl } from "../../site/js/store/spec.mjs";

const HUB = "https://huggingface.co/HuggingFaceTB/SmolLM2-135M-Instruct/resolve/12fd25f77366fa6b3b4b768ec3050bf629380bac/";
const MIRROR = "http://127.0.0.1:8000/models/HuggingFaceTB/SmolLM2-135M-Instruct/resolve/q4_1-b179c9523d0e/";
const H = (c) => c.repeat(64);

test("ids: repo and revision where the URL has them, else the URL", () => {
  assert.equal(modelId({ kind: "hf", url: HUB }), "hf:HuggingFaceTB/SmolLM2-135M-Instruct@12fd25f77366fa6b3b4b768ec3050bf629380bac");
  assert.equal(modelId({ kind: "hf", url: MIRROR }), "hf:HuggingFaceTB/SmolLM2-135M-Instruct@q4_1-b179c9523d0e");
  // the same mirror on another port is the same model
  assert.equal(modelId({ kind: "hf", url: MIRROR.replace("8000", "8001") }), modelId({ kind: "hf", url: MIRROR }));
  assert.equal(modelId({ kind: "gguf", url: MIRROR + "m.Q4_1.gguf" }), "gguf:HuggingFaceTB/SmolLM2-135M-Instruct@q4_1-b179c9523d0e/m.Q4_1.gguf");
  assert.equal(modelId({ kind: "gguf", url: "https://example.org/x/model.gguf#frag" }), "gguf:https://example.org/x/model.gguf");
  assert.equal(modelId({ kind: "hf", url: HUB, id: "mine" }), "mine");
  // a mirror's model at a path of its own: the manifest's repo and revision name it
  const manifest = { repo: "HuggingFaceTB/SmolLM2-135M", revision: "standin-1" };
  assert.equal(modelId({ kind: "hf", url: "http://127.0.0.1:8000/x/base/", manifest }), "hf:HuggingFaceTB/SmolLM2-135M@standin-1");
  assert.equal(modelId({ kind: "hf", url: "http://127.0.0.1:8000/x/base/" }), "hf:http://127.0.0.1:8000/x/base/");
  assert.throws(() => modelId({ kind: "onnx", url: HUB }), TypeError);
  assert.deepEqual(parseResolveUrl(HUB + "tokenizer.json"), {
    repo: "HuggingFaceTB/SmolLM2-135M-Instruct", revision: "12fd25f77366fa6b3b4b768ec3050bf629380bac", path: "tokenizer.json",
  });
});

test("a Hub source with pins from build.json", () => {
  const files = [
    { name: "config.json" }, { name: "generation_config.json", optional: true },
    { name: "tokenizer.json", sha256: H("a") }, { name: "tokenizer_config.json" },
    { name: "model.safetensors", sha256: H("B") },
  ];
  const spec = modelSpec({ kind: "hf", url: HUB, files, label: "Hub" });
  assert.equal(spec.repo, "HuggingFaceTB/SmolLM2-135M-Instruct");
  assert.equal(spec.revision, "12fd25f77366fa6b3b4b768ec3050bf629380bac");
  assert.deepEqual(spec.files.map((f) => [f.name, f.sha256, f.role, f.optional]), [
    ["config.json", null, "text", false], ["generation_config.json", null, "text", true],
    ["tokenizer.json", H("a"), "text", false], ["tokenizer_config.json", null, "text", false],
    ["model.safetensors", H("b"), "weights", false],
  ]);
  assert.equal(spec.files[4].url, HUB + "model.safetensors");
  assert.equal(spec.files[4].chunkSize, 16 << 20);
  assert.equal(spec.files[4].chunks, null);
});

test("without a file list: a GGUF is its one file; a folder's list comes from build.json, never guessed here", () => {
  assert.throws(() => modelSpec({ kind: "hf", url: HUB }), /must name the files to keep/);
  const names = [{ name: "config.json" }, { name: "model.safetensors" }];
  const spec = modelSpec({ kind: "hf", url: HUB, files: names }, { chunkSize: 1024 });
  assert.deepEqual(spec.files.map((f) => f.name), ["config.json", "model.safetensors"]);
  assert.ok(spec.files.every((f) => f.size === null && f.sha256 === null && f.chunkSize === 1024));
  const g = modelSpec({ kind: "gguf", url: "https://example.org/a%20b/My%20Model.gguf" });
  assert.deepEqual(g.files.map((f) => [f.name, f.url, f.role]), [["My Model.gguf", "https://example.org/a%20b/My%20Model.gguf", "weights"]]);
});

test("the mirror's manifest gives sizes, sha256 and chunk hashes", () => {
  const manifest = {
    repo: "org/m", revision: "r1", base: "models/org/m/resolve/r1/", hf: true, gguf: "m.gguf", sha256: H("c"),
    files: { "config.json": 8, "m.gguf": 30, "model.safetensors": 25, "tokenizer.json": 2, "tokenizer_config.json": 3 },
    chunk_size: 10,
    digests: {
      "model.safetensors": { sha256: H("d"), chunks: [H("1"), H("2"), H("3")] },
      "config.json": { sha256: H("e"), chunks: [H("4")] },
    },
  };
  const names = [{ name: "config.json" }, { name: "generation_config.json", optional: true }, { name: "tokenizer.json" },
                 { name: "tokenizer_config.json" }, { name: "model.safetensors" }];
  const hf = modelSpec({ kind: "hf", url: "http://127.0.0.1:9/models/org/m/resolve/r1/", manifest, files: names });
  assert.equal(hf.id, "hf:org/m@r1");
  // no generation_config.json in this mirror: not asked for; the GGUF is not part of an hf source
  assert.deepEqual(hf.files.map((f) => f.name), ["config.json", "tokenizer.json", "tokenizer_config.json", "model.safetensors"]);
  // no names given: every file the mirror lists but its GGUF, the weights last
  const all = modelSpec({ kind: "hf", url: "http://127.0.0.1:9/models/org/m/resolve/r1/", manifest });
  assert.deepEqual(all.files.map((f) => f.name), ["config.json", "tokenizer.json", "tokenizer_config.json", "model.safetensors"]);
  const st = hf.files.find((f) => f.name === "model.safetensors");
  assert.deepEqual([st.size, st.sha256, st.chunkSize, st.chunks.length], [25, H("d"), 10, 3]);
  const tok = hf.files.find((f) => f.name === "tokenizer.json");
  assert.deepEqual([tok.size, tok.sha256, tok.chunks], [2, null, null]);
  // the GGUF's sha256 is the manifest's top-level one when no digest lists it
  const g = modelSpec({ kind: "gguf", url: "http://127.0.0.1:9/models/org/m/resolve/r1/m.gguf", manifest });
  assert.deepEqual(g.files.map((f) => [f.name, f.size, f.sha256]), [["m.gguf", 30, H("c")]]);
  assert.throws(() => filesFromManifest({ manifest: { files: { "config.json": 1 } }, files: names }, "hf"), /does not list tokenizer.json/);
});

test("bad descriptions are refused", () => {
  const src = (files) => ({ kind: "hf", url: HUB, files });
  assert.throws(() => modelSpec(src([{ name: "../x" }])), /not a file name/);
  assert.throws(() => modelSpec(src([{ name: "/x" }])), /not a file name/);
  assert.throws(() => modelSpec(src([{ name: "a" }, { name: "a" }])), /twice/);
  assert.throws(() => modelSpec(src([{ name: "a", sha256: "xyz" }])), /not a sha256/);
  assert.throws(() => modelSpec(src([{ name: "a", size: -1 }])), /not a byte count/);
  assert.throws(() => modelSpec(src([{ name: "a", chunks: [H("1")] }])), /need the file's size/);
  assert.throws(() => modelSpec(src([{ name: "a", size: 5, chunks: [H("1")] }])), /chunk size/);
  assert.throws(() => modelSpec(src([{ name: "a", size: 25, chunk_size: 10, chunks: [H("1")] }])), /expected 3 chunk hashes/);
  assert.throws(() => modelSpec({ kind: "gguf", url: HUB, files: [{ name: "a" }, { name: "b" }] }), /one file/);
  assert.throws(() => modelSpec({ kind: "hf" }), /needs a url/);
});
