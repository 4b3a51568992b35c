// Python in the worker: Pyodide booted from the site's own files, the wheels build.json lists,
// and chatlens.worker, the one module the worker calls (JSON in, JSON out).

/** Start Pyodide. `site` is the site's root URL; `build` is build.json. */
export async function startPython(site, build) {
  const indexURL = new URL(build.pyodide.index, site).href;
  const { loadPyodide } = await import(new URL("pyodide.mjs", indexURL).href);
  return loadPyodide({
    indexURL,
    packageBaseUrl: new URL(build.pyodide.packages, site).href,
    stdout: () => {},
    stderr: (line) => console.warn("[python]", line),
  });
}

/** Install chatlens; returns {call, callAsync}: one request to chatlens.worker, answered with its
 * result or thrown as an Error named for the Python exception. callAsync enters Python through
 * callPromising, so it may wait for JavaScript (the GPU) with pyodide.ffi.run_sync. */
export async function installChatlens(py, site, build) {
  await py.loadPackage(build.wheels.map((w) => new URL(w, site).href), { messageCallback: () => {} });
  const entry = py.pyimport("chatlens.worker").call;
  const answer = (json) => {
    const out = JSON.parse(json);
    if (out.ok) return out.result;
    const e = new Error(out.error.message);
    e.name = out.error.name;
    throw e;
  };
  const call = (name, args = {}, ...callbacks) => answer(entry(name, JSON.stringify(args), ...callbacks));
  const callAsync = async (name, args = {}, ...callbacks) =>
    answer(await (entry.callPromising ? entry.callPromising(name, JSON.stringify(args), ...callbacks)
      : entry(name, JSON.stringify(args), ...callbacks)));
  return { call, callAsync };
}
