// Python in the worker: Pyodide booted from the site's own files, the wheels build.json lists,
// and chatlens.worker, the one module the worker calls (JSON in, JSON out).

/** Start Pyodide and install chatlens. `site` is the site's root URL; `build` is build.json. */
export async function startPython(site, build) {
  const indexURL = new URL(build.pyodide.index, site).href;
  const { loadPyodide } = await import(new URL("pyodide.mjs", indexURL).href);
  const py = await loadPyodide({
    indexURL,
    packageBaseUrl: new URL(build.pyodide.packages, site).href,
    stdout: () => {},
    stderr: (line) => console.warn("[python]", line),
  });
  return py;
}

export async function installChatlens(py, site, build) {
  await py.loadPackage(build.wheels.map((w) => new URL(w, site).href), { messageCallback: () => {} });
  const call = py.pyimport("chatlens.worker").call;
  /** One request to chatlens.worker; its answer, or an Error named for the Python exception. */
  return (name, args = {}, ...callbacks) => {
    const out = JSON.parse(call(name, JSON.stringify(args), ...callbacks));
    if (out.ok) return out.result;
    const e = new Error(out.error.message);
    e.name = out.error.name;
    throw e;
  };
}
