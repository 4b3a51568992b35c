// Which hosts the page may read a model from: its Content-Security-Policy's connect-src (the meta
// tag here, the same list serve sends as a header), so that a ?model= elsewhere is explained in a
// sentence instead of failing with "Failed to fetch".

/** The hosts the page's Content-Security-Policy lets it read (connect-src), from its meta tag:
 * ["this site", "huggingface.co", "*.hf.co", ...]; and whether `url` is one of them. */
export function readableHosts(doc = document) {
  const csp = doc.querySelector('meta[http-equiv="Content-Security-Policy"]')?.content || "";
  const rule = csp.split(";").map((r) => r.trim().split(/\s+/)).find((r) => r[0] === "connect-src");
  return rule ? rule.slice(1) : ["'self'"];
}

export function canRead(url, hosts = readableHosts()) {
  let u;
  try {
    u = new URL(url, location.href);
  } catch {
    return false;
  }
  return hosts.some((h) => {
    if (h === "'self'") return u.origin === location.origin;
    const m = /^(https?:)\/\/(\*\.)?([^/]+)$/.exec(h);
    if (!m || m[1] !== u.protocol) return false;
    return m[2] ? u.host.endsWith(`.${m[3]}`) : u.host === m[3];
  });
}

/** For a ?model= the page may not read: which hosts it can, and why, in one sentence (else null). */
export function hostNote(source, hosts = readableHosts()) {
  if (!source || source.origin !== "url" || canRead(source.url, hosts)) return null;
  const names = hosts.map((h) => (h === "'self'" ? "this site" : h.replace(/^https?:\/\//, "")));
  return `This page cannot read ${new URL(source.url).host}: it reads models only from ${names.join(", ")}. ` +
    "Its Content-Security-Policy allows no other host, so that nothing you type can leave your device. " +
    "Put the model's files on Hugging Face or beside this site, and give that address instead.";
}
