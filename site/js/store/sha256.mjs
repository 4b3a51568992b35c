// SHA-256 two ways. A file's hash is computed as its bytes stream in, with @noble/hashes
// (copied into the site by the build), because WebCrypto's digest takes the whole input at once
// and a model file is hundreds of MB. A chunk's hash uses WebCrypto: native, several times
// faster, and a chunk is in memory anyway.

import { sha256 as nobleSha256 } from "../vendor/noble-hashes/sha2.js";

export function toHex(bytes) {
  const u8 = bytes instanceof Uint8Array ? bytes : new Uint8Array(bytes);
  let s = "";
  for (let i = 0; i < u8.length; i++) s += u8[i].toString(16).padStart(2, "0");
  return s;
}

/** sha256 of `bytes` (Uint8Array or ArrayBuffer) as lowercase hex. */
export async function sha256Hex(bytes) {
  return toHex(await crypto.subtle.digest("SHA-256", bytes));
}

/** An incremental sha256: update(bytes) as often as needed, then hex() once. */
export function createSha256() {
  const h = nobleSha256.create();
  return {
    update(bytes) {
      h.update(bytes instanceof Uint8Array ? bytes : new Uint8Array(bytes));
      return this;
    },
    hex() {
      return toHex(h.digest());
    },
  };
}
