// Where the model comes from, in order:
//   1. a URL given by the page's ?model= parameter, or saved in the settings (localStorage):
//      a GGUF file, or a Hugging Face folder (a .../resolve/<revision>/ URL, or a repo page URL);
//   2. the same-origin mirror that `python -m chatlens serve` puts beside the site
//      (models/manifest.json says where its files are);
//   3. the original weights on the Hugging Face Hub, pinned to a revision (build.json).
// The base model (for the comparison) comes from the mirror's `base`, else the Hub: never from a URL.
// A source is {kind: "hf" | "gguf", url (absolute; a folder URL ends with "/"), label, origin,
// model ("instruct" | "base"; none for a URL), verified (a sentence), files, manifest} (store/spec.mjs).

import { shortened } from "../lesson/terms.mjs";
import { sourceUrlPref } from "./prefs.mjs";

const HUB = "https://huggingface.co/";

/** The source a URL names: a .gguf file, or a Hugging Face model folder. */
export function sourceFromUrl(value, base) {
  const url = new URL(value, base);
  const hub = url.origin === new URL(HUB).origin;
  let parts = url.pathname.split("/").filter(Boolean);
  if (hub) {
    // Hub pages to file URLs: ORG/NAME -> resolve/main/, ORG/NAME/tree|blob/REV/... -> resolve/REV/...
    if (parts.length === 2) parts = [...parts, "resolve", "main"];
    else if (parts.length >= 4 && (parts[2] === "tree" || parts[2] === "blob")) parts[2] = "resolve";
  }
  const last = parts[parts.length - 1] || "";
  if (/\.gguf$/i.test(last)) {
    url.pathname = "/" + parts.join("/");
    return { kind: "gguf", url: url.href, label: shortened(decoded(last)), origin: "url" };
  }
  url.pathname = "/" + parts.join("/") + "/";
  url.search = "";
  url.hash = "";
  return { kind: "hf", url: url.href, label: shortened(hub ? parts.slice(0, 2).join("/") : url.href), origin: "url" };
}

/** build.json's pins of the two models (its `models`), {instruct, base}: each {repo, revision,
 * files: [{name, sha256?, size?, optional?}], verified: how its files are verified, in a
 * sentence} (null where the build has none). */
export function pinsOf(build) {
  return { instruct: build?.models?.instruct ?? null, base: build?.models?.base ?? null };
}

/** The configured source: ?model=, then the saved setting, then the mirror, then the Hub.
 * `wanted`: the model URL asked for (default: prefs.mjs's sourceUrlPref, which ignores a bad one).
 * `manifest`: the mirror's models/manifest.json when already read (null: none); else it is fetched. */
export async function resolveSource({ location = globalThis.location, storage = globalThis.localStorage, build,
                                      wanted = sourceUrlPref({ location, storage }).url, manifest } = {}) {
  const { instruct } = pinsOf(build);
  if (wanted) {
    const source = sourceFromUrl(wanted, location.href);
    // A folder someone gave: the files the instruct's folder has, with none of its pins (other bytes).
    return source.kind === "hf" ? { ...source, files: namesOf(instruct) } : source;
  }
  const m = manifest === undefined ? await readMirror(location) : manifest;
  const mirrored = m && mirrorSource(m, location, "instruct", instruct);
  if (mirrored) return mirrored;
  return hubSource("instruct", instruct);
}

/**
 * The base model's source (SmolLM2-135M, pretraining only), downloaded only when asked for:
 * the mirror's `base` when `serve --base-model` put one there, else the Hub at build.json's
 * pinned revision, each file checked against the sha256 build.json pins. Never the instruct:
 * a base with the instruct's repo and revision is refused (the store would keep them as one).
 * `manifest`: as resolveSource's.
 */
export async function resolveBaseSource({ location = globalThis.location, build, manifest } = {}) {
  const { instruct, base } = pinsOf(build);
  const m = manifest === undefined ? await readMirror(location) : manifest;
  const mb = mirrorBase(m);
  if (mb) {
    if (mb.repo === m.repo && mb.revision === m.revision) {
      throw new Error(`The mirror's base model has the instruct model's repo and revision (${mb.repo}@${mb.revision}): ` +
        "the two must be told apart to be stored side by side.");
    }
    const source = mirrorSource({ ...mb, chunk_size: mb.chunk_size ?? m.chunk_size }, location, "base", base ?? instruct);
    if (source) return source;
  }
  if (!base) throw new Error("This build names no base model (build.json has no models.base): build the site again.");
  if (instruct && base.repo === instruct.repo && base.revision === instruct.revision) {
    throw new Error(`build.json's base model is the instruct model (${base.repo}@${base.revision}).`);
  }
  return hubSource("base", base);
}

/** The base model's entry in the mirror's manifest, or null (serve put none there). */
export function mirrorBase(m) {
  const b = m?.base_model ?? m?.base;
  return b && typeof b === "object" ? b : null;
}

/** models/manifest.json beside the site, or null when there is no mirror. */
export async function readMirror(location = globalThis.location) {
  try {
    const r = await fetch(new URL("models/manifest.json", location.href), { cache: "no-cache" });
    return r.ok ? await r.json() : null;
  } catch {
    return null; // no mirror beside this site: the Hub it is
  }
}

const MIRROR_CHECK = "Each file, and each piece of it, is checked against the sha256 this site's mirror lists " +
  "(hashed by `serve` from its own copy, not a value Hugging Face publishes).";

// A model in the mirror (`m`: the manifest's top level, or its base entry), as a source; null
// when it holds neither a folder nor a GGUF. `listed`: build.json's entry for the files' names.
function mirrorSource(m, location, which, listed) {
  const folder = new URL(m.base, new URL(".", location.href)).href; // the manifest's URLs are the site's
  const common = { origin: "mirror", manifest: m, model: which, verified: MIRROR_CHECK + (m.about ? ` It holds ${m.about}.` : "") };
  const of = m.stand_in ? `a stand-in for ${m.repo} (not its weights)` : m.repo; // serve says which (its README)
  if (m.hf) return { kind: "hf", url: folder, label: `local mirror of ${of}`, files: namesOf(listed), ...common };
  if (m.gguf) return { kind: "gguf", url: new URL(m.gguf, folder).href, label: `local mirror: ${m.gguf}`, ...common };
  return null;
}

function hubSource(which, entry) {
  if (!entry) throw new Error(`This build names no ${which} model (build.json): build the site again.`);
  const { repo, revision, files, verified } = entry;
  return {
    kind: "hf",
    url: `${HUB}${repo}/resolve/${revision}/`,
    repo,
    revision,
    files, // the sha256 pinned for the files the store keeps (build.json)
    label: `${repo} on Hugging Face (revision ${revision.slice(0, 7)})`,
    origin: "hub",
    model: which,
    verified: verified ?? null,
  };
}

// The names of the files a folder source keeps (build.json's list), without the pins: another
// copy of the model has other bytes.
function namesOf(entry) {
  return entry?.files?.map(({ name, optional }) => (optional ? { name, optional: true } : { name }));
}

/** A URL's path segment as people read it ("%20" a space); as it is when it does not decode. */
function decoded(segment) {
  try {
    return decodeURIComponent(segment);
  } catch {
    return segment;
  }
}
