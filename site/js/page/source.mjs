// Where the model comes from, in order:
//   1. a URL given by the page's ?model= parameter, or saved in the settings (localStorage):
//      a GGUF file, or a Hugging Face folder (a .../resolve/<revision>/ URL, or a repo page URL);
//   2. the same-origin mirror that `python -m chatlens serve` puts beside the site
//      (models/manifest.json says where its files are);
//   3. the original weights on the Hugging Face Hub, pinned to a revision (build.json).
// A source is {kind: "hf" | "gguf", url (absolute; a folder URL ends with "/"), label, origin}.

import { modelPref } from "./prefs.mjs";

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

/** A long URL as a label: its start and its end, the middle elided (a link may carry thousands of characters). */
export function shortened(text, most = 120) {
  return text.length > most ? `${text.slice(0, most - 41)}…${text.slice(-40)}` : text;
}

/** The configured source: ?model=, then the saved setting, then the mirror, then the Hub.
 * `wanted`: the model URL asked for (default: prefs.mjs's modelPref, which ignores a bad one). */
export async function resolveSource({ location = globalThis.location, storage = globalThis.localStorage, build,
                                      wanted = modelPref({ location, storage }).url } = {}) {
  if (wanted) return sourceFromUrl(wanted, location.href);

  const manifestUrl = new URL("models/manifest.json", location.href);
  try {
    const r = await fetch(manifestUrl, { cache: "no-cache" });
    if (r.ok) {
      const m = await r.json();
      const base = new URL(m.base, manifestUrl.href.replace(/models\/manifest\.json$/, "")).href;
      if (m.hf) return { kind: "hf", url: base, label: `local mirror of ${m.repo}`, origin: "mirror", manifest: m };
      if (m.gguf) return { kind: "gguf", url: new URL(m.gguf, base).href, label: `local mirror: ${m.gguf}`, origin: "mirror", manifest: m };
    }
  } catch {
    // no mirror beside this site: fall through to the Hub
  }
  const { repo, revision, files } = build.model;
  return {
    kind: "hf",
    url: `${HUB}${repo}/resolve/${revision}/`,
    repo,
    revision,
    files, // the sha256 pinned for the files the store keeps (build.json)
    label: `${repo} on Hugging Face (revision ${revision.slice(0, 7)})`,
    origin: "hub",
  };
}

/** A URL's path segment as people read it ("%20" a space); as it is when it does not decode. */
function decoded(segment) {
  try {
    return decodeURIComponent(segment);
  } catch {
    return segment;
  }
}
