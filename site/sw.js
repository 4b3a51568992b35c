// The service worker: the site works offline once visited. `chatlens build` writes the list of
// the files it precaches, with their sha256 and the build's id, into PRECACHE below (in the
// source tree it is null, and this worker caches nothing). A build's files live in a cache named
// by its id and are served from it alone, so a page never mixes two builds; a new build
// installs beside the old one, and the page offers a reload when it is ready. The model's
// weights are not here: they live in IndexedDB (js/store/).

const PRECACHE = /* chatlens:precache */ null;
const CACHE = PRECACHE && `chatlens-${PRECACHE.build}`;
const RUNTIME = "chatlens-runtime"; // the mirror's manifest (network first) and Pyodide's packages from its CDN
const PREFIX = "chatlens-";

const scope = new URL(self.registration.scope);
const precached = new Set((PRECACHE?.files || []).map((f) => new URL(f.url, scope).href));
const indexUrl = new URL("index.html", scope).href;

async function sha256(buffer) {
  const digest = await crypto.subtle.digest("SHA-256", buffer);
  return [...new Uint8Array(digest)].map((b) => b.toString(16).padStart(2, "0")).join("");
}

self.addEventListener("install", (event) => {
  event.waitUntil((async () => {
    if (!PRECACHE) return;
    const cache = await caches.open(CACHE);
    for (const f of PRECACHE.files) {
      const url = new URL(f.url, scope).href;
      if (await cache.match(url)) continue; // an install that stopped half-way resumes
      const response = await fetch(new Request(url, { cache: "no-cache" }));
      if (!response.ok) throw new Error(`${url}: HTTP ${response.status}`);
      const got = await sha256(await response.clone().arrayBuffer());
      // A file that is not what the build listed fails the install: the old build stays in use.
      if (got !== f.sha256) throw new Error(`${url}: sha256 ${got}, the build lists ${f.sha256}`);
      await cache.put(url, response);
    }
    // The mirror's manifest says where the model's files are; the first visit fetched it before
    // this worker controlled the page, so keep it now: offline, the page still finds its source.
    try {
      const manifest = new URL("models/manifest.json", scope).href;
      const response = await fetch(new Request(manifest, { cache: "no-cache" }));
      if (response.ok) await (await caches.open(RUNTIME)).put(manifest, response);
    } catch {
      // no mirror (a static host): the page reads the Hub, and nothing needs keeping here
    }
  })());
});

self.addEventListener("activate", (event) => {
  event.waitUntil((async () => {
    for (const name of await caches.keys()) {
      if (name.startsWith(PREFIX) && name !== CACHE && name !== RUNTIME) await caches.delete(name);
    }
    await self.clients.claim();
  })());
});

self.addEventListener("message", (event) => {
  if (event.data?.type === "activate-now") self.skipWaiting(); // the page's "reload to update"
});

self.addEventListener("fetch", (event) => {
  const request = event.request;
  if (request.method !== "GET" || !PRECACHE) return;
  const url = new URL(request.url);
  url.hash = "";
  let key = url.href;
  if (url.origin === scope.origin && (url.pathname === scope.pathname || key === scope.href)) key = indexUrl;
  if (precached.has(key)) {
    event.respondWith(caches.open(CACHE).then((c) => c.match(key)).then((r) => r || fetch(request)));
  } else if (url.origin === scope.origin && url.pathname.endsWith("/models/manifest.json")) {
    event.respondWith(networkFirst(request));
  } else if (PRECACHE.packages && key.startsWith(PRECACHE.packages)) {
    event.respondWith(cacheFirst(request));
  }
  // Anything else (the weights, with their Range requests) goes to the network untouched.
});

async function networkFirst(request) {
  const cache = await caches.open(RUNTIME);
  try {
    const response = await fetch(request);
    if (response.ok) await cache.put(request, response.clone());
    return response;
  } catch (e) {
    const cached = await cache.match(request);
    if (cached) return cached;
    throw e;
  }
}

async function cacheFirst(request) {
  const cache = await caches.open(RUNTIME);
  const cached = await cache.match(request);
  if (cached) return cached;
  const response = await fetch(request);
  if (response.ok) await cache.put(request, response.clone());
  return response;
}
