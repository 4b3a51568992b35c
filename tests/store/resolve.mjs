// A module resolution hook for node --test: the store imports @noble/hashes from where the build
// copies it into the site (js/vendor/noble-hashes/); in the source tree it is in build/node_modules.
import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";

const VENDOR = new URL("../../site/js/vendor/noble-hashes/", import.meta.url).href;
const NOBLE = new URL("../../build/node_modules/@noble/hashes/", import.meta.url).href;

export async function resolve(specifier, context, next) {
  if (context.parentURL && /^\.{1,2}\//.test(specifier)) {
    const url = new URL(specifier, context.parentURL).href;
    if (url.startsWith(VENDOR)) {
      const target = NOBLE + url.slice(VENDOR.length);
      if (!existsSync(fileURLToPath(target))) {
        throw new Error(`${fileURLToPath(target)} is missing: install the site's pinned inputs (npm ci --prefix build)`);
      }
      return { url: target, shortCircuit: true };
    }
  }
  return next(specifier, context);
}
