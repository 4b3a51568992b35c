// Python in the worker: Pyodide booted from the site's own files, the wheels build.json lists,
// and chatlens.worker, the one module the worker calls (JSON in, JSON out).
//
// Booting Python and importing chatlens takes most of a visit's start (about 5 s of 7 on the
// project's machine). So the first boot saves Python's memory once chatlens is imported (one of
// Pyodide's memory snapshots, about 30 MB, in Cache Storage), and later boots start from it
// (about 1 s). A snapshot holds memory, not files: the wheels are unpacked again either way, for
// the modules chatlens imports later. It is only valid for the same Pyodide and the same wheels,
// so it is keyed by build.json's pyodide.snapshot_id; a snapshot that fails to load is dropped.

const SNAPSHOTS = "python-snapshot"; // not "chatlens-...": sw.js clears those when a build activates
const WHEELS_DIR = "/tmp/chatlens-wheels";

/** Start Pyodide. `site` is the site's root URL; `build` is build.json; `snapshot`: whether to
 * start from a saved snapshot and save one. Resolves with the interpreter; `py.chatlensSnapshot`
 * says whether it came from a snapshot and where one goes. */
export async function startPython(site, build, { snapshot = true } = {}) {
  const indexURL = new URL(build.pyodide.index, site).href;
  const { loadPyodide } = await import(new URL("pyodide.mjs", indexURL).href);
  const options = {
    indexURL,
    packageBaseUrl: new URL(build.pyodide.packages, site).href,
    stdout: () => {},
    stderr: (line) => console.warn("[python]", line),
  };
  const key = snapshot && build.pyodide.snapshot_id ? new URL(`python-snapshot/${build.pyodide.snapshot_id}`, site).href : null;
  const saved = key ? await readSnapshot(key) : null;
  if (saved) {
    try {
      const py = await loadPyodide({ ...options, _loadSnapshot: saved });
      py.chatlensSnapshot = { key, restored: true };
      return py;
    } catch (e) {
      console.warn("chatlens: the saved Python snapshot did not load; booting without it:", e);
      await dropSnapshots();
    }
  }
  const py = await loadPyodide({ ...options, _makeSnapshot: Boolean(key) });
  py.chatlensSnapshot = { key, restored: false };
  return py;
}

async function readSnapshot(key) {
  try {
    const hit = await (await caches.open(SNAPSHOTS)).match(key);
    return hit ? new Uint8Array(await hit.arrayBuffer()) : null;
  } catch {
    return null; // no Cache Storage here (a private window, an opaque origin): boot as usual
  }
}

async function saveSnapshot(key, bytes) {
  try {
    await dropSnapshots(); // one snapshot at a time: the previous build's is of no use
    await (await caches.open(SNAPSHOTS)).put(key, new Response(bytes, { headers: { "Content-Type": "application/octet-stream" } }));
  } catch (e) {
    console.warn("chatlens: the Python snapshot could not be saved (the next visit boots as this one did):", e);
  }
}

async function dropSnapshots() {
  try {
    await caches.delete(SNAPSHOTS);
  } catch {
    // nothing to drop
  }
}

/** The wheels unpacked into site-packages by Python's zipfile. Not pyodide.loadPackage: it
 * leaves JavaScript objects in Python's memory, which a snapshot cannot hold. */
async function unpackWheels(py, site, build) {
  const wheels = await Promise.all(build.wheels.map(async (w) => {
    const url = new URL(w, site).href;
    const r = await fetch(url);
    if (!r.ok) throw new Error(`${url}: HTTP ${r.status}`);
    return [w.split("/").pop(), new Uint8Array(await r.arrayBuffer())];
  }));
  py.FS.mkdirTree(WHEELS_DIR);
  for (const [name, bytes] of wheels) py.FS.writeFile(`${WHEELS_DIR}/${name}`, bytes);
  py.runPython(`
import importlib, os, site, zipfile
for _name in sorted(os.listdir(${JSON.stringify(WHEELS_DIR)})):
    with zipfile.ZipFile(os.path.join(${JSON.stringify(WHEELS_DIR)}, _name)) as _wheel:
        _wheel.extractall(site.getsitepackages()[0])
    os.remove(os.path.join(${JSON.stringify(WHEELS_DIR)}, _name))
importlib.invalidate_caches()
del _name, _wheel
`);
}

/** Install chatlens; returns {call}: one request to chatlens.worker, answered with its result or
 * thrown as an Error named for the Python exception. Every call is synchronous and short: a
 * reply is many calls the worker's JavaScript makes (worker.mjs's `pull`), so Python never waits
 * for JavaScript and needs no JSPI. Extra arguments (a step's bytes) pass as JavaScript objects. */
export async function installChatlens(py, site, build) {
  await unpackWheels(py, site, build);
  const snapshot = py.chatlensSnapshot;
  if (snapshot?.key && !snapshot.restored) {
    py.runPython("import chatlens.worker");
    let bytes = null;
    try {
      bytes = py.makeMemorySnapshot(); // before any JavaScript object reaches Python
    } catch (e) {
      console.warn("chatlens: no Python snapshot this time:", e);
    }
    if (bytes) saveSnapshot(snapshot.key, bytes); // in the background: the boot goes on
  }
  const entry = py.pyimport("chatlens.worker").call;
  const answer = (json) => {
    const out = JSON.parse(json);
    if (out.ok) return out.result;
    const e = new Error(out.error.message);
    e.name = out.error.name;
    if (out.error.data !== undefined) e.data = out.error.data; // a WindowError's numbers
    throw e;
  };
  const call = (name, args = {}, ...extra) => answer(entry(name, JSON.stringify(args), ...extra));
  return { call };
}
