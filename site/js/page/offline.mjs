// The service worker (../sw.js) that keeps the site usable offline once visited, and the note
// that a new version is ready. The worker a new build installs waits until the page asks for it,
// so the files a page runs on all come from one build.

/** Register the service worker; onUpdate(activate) is called when a new version is ready. */
export async function registerOffline(onUpdate) {
  const sw = globalThis.navigator?.serviceWorker;
  if (!sw) return null; // no service workers (a private window, an insecure origin): online only
  let registration;
  try {
    registration = await sw.register(new URL("../../sw.js", import.meta.url), { scope: new URL("../../", import.meta.url).pathname });
  } catch (e) {
    console.warn("chatlens: no offline copy:", e.message);
    return null;
  }
  const offer = (waiting) => {
    if (!waiting || !sw.controller) return; // the first install needs no reload
    onUpdate(() => {
      sw.addEventListener("controllerchange", () => location.reload(), { once: true });
      waiting.postMessage({ type: "activate-now" });
    });
  };
  offer(registration.waiting);
  registration.addEventListener("updatefound", () => {
    const installing = registration.installing;
    installing?.addEventListener("statechange", () => {
      if (installing.state === "installed") offer(installing);
    });
  });
  return registration;
}
