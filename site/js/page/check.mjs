// The known-answer check's results, kept by the page (the worker has no localStorage): each
// under the key the worker gives it (the build's check key and the adapter's; a weights check's
// with its file's sha256), given back to the worker at init so a later visit does not run the
// check again, and run again when the adapter, the build or the weights change (another key).
// worker/check.mjs says what the check is and what happens when it fails. Pure but for storage.

export const KEPT_KEY = "chatlens.gpu-checks";
const MOST = 16; // results kept, the newest: a few adapters, builds and weights

/** The kept results, {key: result}; {} when none or unreadable. */
export function keptChecks(storage = globalThis.localStorage) {
  try {
    const kept = JSON.parse(storage?.getItem(KEPT_KEY) ?? "{}");
    return kept && typeof kept === "object" && !Array.isArray(kept) ? kept : {};
  } catch {
    return {};
  }
}

/** Keep `result` under `key` (a check event's), the oldest dropped past MOST; a result used from
 * what was kept (cached) is not written again, nor one whose check could not run (no checks: a
 * lost device, a file that did not come), which the next visit tries again. */
export function keepCheck(key, result, storage = globalThis.localStorage) {
  if (!key || !result || result.cached || (Array.isArray(result.checks) && !result.checks.length)) return;
  const kept = keptChecks(storage);
  delete kept[key];
  kept[key] = { ...result, cached: false, kept_at: Date.now() };
  const keys = Object.keys(kept);
  for (const old of keys.slice(0, Math.max(0, keys.length - MOST))) delete kept[old];
  try {
    storage?.setItem(KEPT_KEY, JSON.stringify(kept));
  } catch {
    // storage full or off: the next visit checks again
  }
}

/** The developer override, from the page's address only (never saved): ?gpu-check=ignore. */
export function checkOverride(location = globalThis.location) {
  return new URLSearchParams(location?.search ?? "").get("gpu-check") === "ignore";
}
