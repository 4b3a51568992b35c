// The lesson's figures for its first experiment ("What is the capital of France?" read as plain
// text and inside the chat template), and what this page may say when its own differ: only what
// was measured or is known (which weights, which system prompt), and what would settle the rest.
// Plain text (views/plain.mjs) and the comparison (views/compare.mjs) say it the same way. Pure:
// node tests play it (tests/page/compare.test.mjs).

/** What the lesson reports on the original bf16 weights: the first token's probability with no
 * template (<|im_end|>) and inside it ("The", with the template's default system prompt). */
export const LESSON_SHARES = { plain: { token: "<|im_end|>", percent: 73 }, chat: { token: "The", percent: 83 } };

/** The lesson's message, the one its figures are for. */
export const LESSON_TEXT = "What is the capital of France?";

/**
 * Measured on this site's 4-bit copy (SmolLM2-135M-Instruct's Q4_1 GGUF, the mirror's and the
 * recording's weights; issue 32's figures), the lesson's message inside the chat template: the
 * share of “The” at the first step moves with the system message alone.
 */
export const COPY_SENSITIVITY = {
  quant: "Q4_1",
  token: "The",
  rows: [["the template's default system prompt", "15.2%"], ["an empty system message", "59.2%"],
         ["“You are a helpful assistant.”", "19.8%"]],
};

/** Where the original weights are: what would settle a difference this page cannot explain. */
export const ORIGINAL_REPO = "HuggingFaceTB/SmolLM2-135M-Instruct";
export const SETTLE = `The same run on the original weights, downloadable from the Hub (${ORIGINAL_REPO}), would settle it.`;

/**
 * Why this page's figure may differ from the lesson's, as far as it is known, in sentences.
 * weights: page/weights.mjs weightsOf the source ({kind: "copy" | "original" | "unknown", bits,
 * quant, name}); side: "plain" or "chat" (the lesson's two figures); `these`: the sentence opens on
 * the weights themselves ("These are 4-bit weights"), where the figure beside it is this model's.
 */
export function differenceNote(weights, side, { these = false } = {}) {
  const w = weights || { kind: "unknown" };
  if (w.kind === "original") {
    return "These are the same original weights the lesson used: only the arithmetic differs here (its order and rounding on this device).";
  }
  if (w.kind === "copy") {
    const which = w.quant || w.name;
    const opening = these ? `These are ${w.bits ? `${w.bits}-bit` : "quantized"} weights (${which}), a copy`
      : `This page runs ${w.bits ? `a ${w.bits}-bit` : "a quantized"} copy of the weights (${which})`;
    const parts = [`${opening}, not the original bf16 weights the lesson used; how much of the difference that alone makes has not been measured.`];
    if (side === "chat" && w.quant === COPY_SENSITIVITY.quant) {
      const [[first, a], ...rest] = COPY_SENSITIVITY.rows;
      // measured with the command line on the GGUF itself; served by `serve` the page computes with its bf16 export
      const where = w.exported ? `Measured with the command line on the ${w.quant} GGUF itself (this page computes with the bf16 folder exported from it)`
        : "Measured on this same copy";
      parts.push(`${where}, the figure moves with what the model reads: “${COPY_SENSITIVITY.token}” is ${a} with ${first}, ` +
        `${rest.map(([what, p]) => `${p} with ${what}`).join(" and ")}.`);
    }
    parts.push(SETTLE);
    return parts.join(" ");
  }
  return `These weights (${w.name || "from an address you gave"}) are not known to be the original ones the lesson used. ${SETTLE}`;
}

/** The lesson's cache figures, for its conversation with no system prompt: the fifth message at
 * its largest window (351 sent, 336 from the cache, 15 new) and the first prompt after a drop at
 * its smallest (24 tokens reused, 101 read again). The lesson's windows are the site's (build.json's,
 * chatlens.defaults'), so they are named by rank, not written again here. */
export const LESSON_KV = {
  fifth: { preset: "none", window: "largest", turn: 5, used: 351, reused: 336, computed: 15 },
  drop: { preset: "none", window: "smallest", reused: 24, computed: 101 },
};

/**
 * Beside a recorded turn the lesson gives figures for: the lesson's and this recording's, and what
 * is known of why they differ (every prompt holds the replies before it, and the recording's are
 * this copy's, not the lesson's); null for any other turn. conv: the recorded conversation
 * ({preset, window, turns}); step: the turn shown (0 first); windows: the recording's windows.
 */
export function recordedKvNote(conv, step, windows) {
  const rec = conv?.turns?.[step];
  if (!rec || conv.preset !== "none") return null;
  const ranked = { largest: Math.max(...windows), smallest: Math.min(...windows) };
  const why = "Each prompt holds the replies before it, and these replies are this copy's (4-bit weights), not the lesson's: other texts, so other counts.";
  const f = LESSON_KV.fifth;
  if (Number(conv.window) === ranked[f.window] && step === f.turn - 1) {
    return `The lesson's run of this turn sent ${f.used} tokens, ${f.reused} of them from the cache and ${f.computed} new; this recording's ` +
      `sends ${rec.used}, ${rec.reused_tokens} from the cache and ${rec.computed_tokens} new. ${why}`;
  }
  const d = LESSON_KV.drop;
  const first = conv.turns.findIndex((t) => t.dropped_messages?.length);
  if (Number(conv.window) === ranked[d.window] && step === first && step > 0) {
    return `In the lesson's run the first prompt after a drop reused ${d.reused} tokens and read ${d.computed} again; this recording's ` +
      `reuses ${rec.reused_tokens} and reads ${rec.computed_tokens} again. ${why}`;
  }
  return null;
}
