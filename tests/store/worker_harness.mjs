// The store in a module worker (where the chatlens worker will use it): read a range, list pieces.
import { openModelStore, requestPersistence } from "./js/store/models.mjs";
import { sha256Hex } from "./js/store/sha256.mjs";

self.onmessage = async ({ data }) => {
  try {
    const store = await openModelStore({ dbName: data.dbName });
    const bytes = await store.read(data.source, data.name, { start: data.start, end: data.end });
    const pieces = [];
    for await (const p of store.chunks(data.source, data.name, { start: data.start, end: data.end })) pieces.push([p.index, p.offset, p.bytes.length]);
    const models = await store.list();
    self.postMessage({
      ok: true, sha256: await sha256Hex(bytes), length: bytes.length, pieces, models: models.map((m) => m.id),
      persist: await requestPersistence(), estimate: await store.estimate(),
    });
    store.close();
  } catch (e) {
    self.postMessage({ ok: false, error: { name: e.name, message: String(e.message ?? e) } });
  }
};
