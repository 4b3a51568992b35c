// Which weights speak, said once for the whole page: recorded mode, the model-source line and
// the download box all use weightsSentence(), so a 4-bit copy is never passed off as the
// original download and the wording lives in one place.
//
// weightsOf(x) takes either a model source (chatlens.source: {kind, url, label, origin,
// manifest?}) or the recorded file (site/recorded.json: {model: {file, source, sha256}}).

const ORIGINAL_REPO = "HuggingFaceTB/SmolLM2-135M-Instruct";
const RERECORD = "chatlens record --model M";

/** The quantization a file or folder name states ("Q4_1", "Q8_0", "F16"), or null. */
export function quantOf(name = "") {
  const m = /(?:^|[^a-z0-9])(q\d(?:_[a-z0-9]+)*|bf16|f16|f32)(?:[^a-z0-9]|$)/i.exec(name);
  return m ? m[1].toUpperCase() : null;
}

const bitsOf = (quant) => {
  const m = /^Q(\d)/.exec(quant || "");
  if (m) return Number(m[1]);
  return { BF16: 16, F16: 16, F32: 32 }[quant] ?? null;
};

const ORIGINAL = "the original bf16 weights from Hugging Face";

/**
 * What a source or the recorded file holds:
 *   {kind: "copy" | "original" | "unknown", quant, bits, name, from, computes, exported}
 * "copy": a quantized copy (the Q4_1 GGUF, or the bf16 folder exported from it); "original":
 * the bf16 weights Hugging Face publishes; "unknown": someone else's file. computes: the files
 * that compute, in words (served by `serve`, the mirror's bf16 export of the GGUF, not the GGUF
 * the command line reads by default); exported: whether those are a bf16 folder exported from a
 * quantized GGUF (then figures differ a little from the GGUF's: docs/fidelity.md).
 */
export function weightsOf(x) {
  if (!x) return { kind: "unknown", quant: null, bits: null, name: "", from: "", computes: "", exported: false };
  if (x.model && !x.origin) {
    // the recorded file
    const name = x.model.file || "";
    const quant = quantOf(name);
    return { kind: quant && quant !== "BF16" ? "copy" : "unknown", quant, bits: bitsOf(quant), name, from: x.model.source || "",
             computes: name ? `the file ${name}` : "", exported: false };
  }
  if (x.origin === "mirror") {
    const m = x.manifest || {};
    const quant = quantOf(m.gguf || "") || quantOf(m.revision || "") || quantOf(x.label || "");
    const exported = x.kind === "hf" && Boolean(m.gguf);
    const gguf = `the ${quant || "quantized"} GGUF`;
    return { kind: "copy", quant, bits: bitsOf(quant), name: m.gguf || x.label || "", from: "this site's mirror",
             computes: exported ? `the bf16 folder exported from ${gguf}` : x.kind === "gguf" ? `${gguf} itself` : x.label || "",
             exported };
  }
  const original = { kind: "original", quant: "BF16", bits: 16, name: ORIGINAL_REPO, from: "Hugging Face", computes: ORIGINAL,
                     exported: false };
  if (x.origin === "hub") return original;
  // A URL someone gave: the original only when it is the original repository on the Hub.
  const url = String(x.url || "");
  const quant = quantOf(url.split("/").pop() || "");
  if (x.kind === "hf" && url.startsWith(`https://huggingface.co/${ORIGINAL_REPO}/`)) return original;
  return { kind: quant ? "copy" : "unknown", quant, bits: bitsOf(quant), name: x.label || url, from: url,
           computes: x.label || url, exported: false };
}

// What weights are, for a learner who has not met the word: said once, in each sentence below.
const WHAT = "the numbers the model computes with, learned in training";
/** "a 4-bit", "an 8-bit": the article a number of bits takes. */
const aBits = (bits) => `${/^(8|11|18)/.test(String(bits)) ? "an" : "a"} ${bits}-bit`;

/**
 * Which weights are in use, for a learner: what they are, and that replies differ between copies,
 * in words that need no file formats (those are in weightsForDevelopers).
 *   weightsSentence(recordedDoc)    for recorded mode
 *   weightsSentence(chatlens.source) for the model-source line and the download box
 */
export function weightsSentence(x) {
  const w = weightsOf(x);
  const recorded = Boolean(x?.model && !x.origin);
  if (recorded) {
    const kept = "These replies were recorded: the model was run once on these conversations and what it wrote was " +
      "kept, so they show without downloading the model.";
    if (w.kind === "copy") {
      return `${kept} It ran on a smaller copy of its weights (${WHAT}), each number rounded to ${w.bits} bits, not the ` +
        "original weights the lesson quotes, so the replies differ from the lesson's: “Blackbeak Betty” and “The year " +
        "is 2026.” do not appear here.";
    }
    return `${kept} It ran on weights (${WHAT}) that may not be the original ones the lesson quotes, so the replies can ` +
      "differ from the lesson's.";
  }
  if (w.kind === "original") {
    return `These are the model's original weights (${WHAT}), from Hugging Face: the ones the lesson quotes. The ` +
      "recorded replies come from a smaller copy and differ from them.";
  }
  if (w.kind === "copy" && x?.origin === "mirror") {
    return `This site serves its own copy of the model's weights (${WHAT}), each number rounded to ${w.bits ?? "a few"} bits ` +
      "to make the download smaller: not the original weights from Hugging Face, so its replies differ from the lesson's.";
  }
  if (w.kind === "copy") {
    return `These weights (${WHAT}) are ${w.bits ? aBits(w.bits) : "a smaller"} copy (${w.name}), not the original ` +
      "weights from Hugging Face, so replies can differ from the lesson's.";
  }
  return `These weights (${WHAT}) come from ${w.name || "an address you gave"}; whether they are the original ones ` +
    "cannot be told from here, and replies from other weights differ.";
}

/**
 * The files behind weightsSentence, for a developer (the page shows it under "For developers"):
 * the format and the copy, which of them this page and the command line compute with, and, for a
 * recording, how to make another. Null where there is nothing to add.
 */
export function weightsForDevelopers(x) {
  const w = weightsOf(x);
  const recorded = Boolean(x?.model && !x.origin);
  if (recorded) {
    const what = w.kind === "copy" ? `The ${w.quant} GGUF is ${aBits(w.bits)} copy, not the original bf16 weights. ` : "";
    return `${what}${RERECORD_HINT}`;
  }
  if (w.kind === "original") {
    return `The bf16 weights of ${ORIGINAL_REPO} at the revision build.json pins; the command line computes with ` +
      `${CLI_COPY} unless --model names other weights (docs/fidelity.md).`;
  }
  if (w.kind === "copy" && x?.origin === "mirror") {
    const gguf = `the ${w.quant || "quantized"} GGUF`;
    return w.exported
      ? `The mirror holds ${gguf} and a bf16 folder exported from it. This page computes with the bf16 folder; the ` +
        "command line reads the GGUF itself unless given that folder with --model (docs/fidelity.md), so their figures " +
        "differ a little."
      : `The mirror holds ${gguf}, the file this page computes with, as the command line does.`;
  }
  return null;
}

/** The copy the command line computes with by default (`chatlens inspect`, `run`, ...). */
export const CLI_COPY = "the Q4_1 GGUF";

/**
 * Beside figures measured with the command line on its default copy (CLI_COPY): which copy this
 * page computes with, and whether its own figures may differ from those. source: chatlens.source.
 */
export function cliFiguresNote(source) {
  const w = weightsOf(source);
  if (source?.origin === "mirror" && w.exported) {
    return `These figures were measured with the command line on ${CLI_COPY} itself; this page computes with ` +
      `${w.computes}, so its own figures differ a little (on one step, attention weights by up to 0.005). ` +
      "The command line computes with this page's copy when --model names that folder (docs/fidelity.md).";
  }
  if (source?.origin === "mirror" && source.kind === "gguf") {
    return `These figures were measured with the command line on ${CLI_COPY}, the file this page computes with.`;
  }
  const here = w.computes || "weights this page cannot name";
  return `These figures were measured with the command line on ${CLI_COPY}, a 4-bit copy; this page computes with ${here}, ` +
    "so its own figures differ.";
}

/** How to re-record recorded mode from other weights (shown beside the recorded sentence). */
export const RERECORD_HINT = `To record from other weights, run ${RERECORD}.`;

/**
 * The base model the comparison reads, named from what its files are (never from where they were
 * asked for): {kind, name, says}. kind: "original" (the Hub's pinned SmolLM2-135M: from the Hub, or
 * a mirror serving that revision), "stand-in" (files that say they are one: the mirror's
 * manifest), "copy" (any other local copy given as the base), "unknown" (not resolved). name: a
 * cell's heading; says: the base in a sentence. source: the base's source (page/source.mjs
 * resolveBaseSource); pin: build.json's models.base ({repo, revision}).
 */
export function baseNameOf(source, pin = null) {
  if (!source) return { kind: "unknown", name: "Base", says: "the base model" };
  if (source.origin === "hub") {
    return { kind: "original", name: "SmolLM2-135M", says: "SmolLM2-135M, the base model (pretraining only), from the Hub at its pinned revision" };
  }
  const m = source.manifest || {};
  if (m.stand_in) {
    // the mirror's `about`: "<file> (sha256 …): <the README's first line>"
    const said = String(m.about || "").replace(/^[^:]*:\s*/, "").replace(/^#\s*/, "").replace(/, given to serve --base-model$/, "").trim();
    return { kind: "stand-in", name: "Stand-in base",
             says: `a stand-in for the base model, not SmolLM2-135M's weights${said ? ` (its files say: “${said}”)` : ""}` };
  }
  if (pin && m.repo === pin.repo && m.revision === pin.revision) {
    return { kind: "original", name: "SmolLM2-135M", says: "SmolLM2-135M, the base model (pretraining only): the Hub's pinned file, served by this site's mirror" };
  }
  return { kind: "copy", name: "Base (a local copy)",
           says: `a local copy given as the base model (${source.label || "its source names no file"}), not the Hub's pinned SmolLM2-135M file` };
}
