// What the database holds, summarized per model (state.mjs's modelSummary), without reading a
// single chunk's bytes: the listing, the quota message's "stored" figure, and a model's status.

import { modelSummary } from "./state.mjs";

export async function summarize(db, id, spec = null) {
  const [model, records, present] = await Promise.all([db.getModel(id), db.filesOf(id), db.chunkIndicesOf(id)]);
  if (!model && !spec) return null;
  return modelSummary(model, records, (name) => present.get(name) ?? [], spec);
}

export async function inventory(db) {
  const models = await db.listModels();
  const out = [];
  for (const m of models) out.push(await summarize(db, m.id));
  return out.sort((a, b) => String(b.stored_at ?? "").localeCompare(String(a.stored_at ?? "")) || a.id.localeCompare(b.id));
}

/** Bytes that every model's chunks hold together. */
export async function storedBytes(db) {
  return (await inventory(db)).reduce((a, m) => a + m.bytes, 0);
}
