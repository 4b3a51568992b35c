"""The browser's executor (site/js/gpu/executor.mjs) seen from Pyodide, behind the same
run(sequences, params, readback) -> bytes as native.NativeExecutor: WebGPUBackend runs unchanged.

In the worker (JS and Python sides):
    js: const gpu = await probe();                    // {adapter, name, features, limits}
    py: program = build_program(plan, n_ctx, gpu.features.to_py(), gpu.limits.to_py())
    js: const executor = await createExecutor(gpu.adapter, JSON.parse(programJson), read);
    py: backend = open_browser(program, executor)
The weight bytes go from JS straight to the GPU (`read` serves the ranges the program's
`weights` name); only the step parameters and the readbacks cross into Python.
Calls block through pyodide.ffi.run_sync, which needs JSPI (Chromium has it).
"""

from .backend import WebGPUBackend


class JsExecutor:
    def __init__(self, js_executor, run_sync=None, to_js=None):
        if run_sync is None or to_js is None:
            from pyodide.ffi import run_sync as _run_sync, to_js as _to_js

            run_sync, to_js = run_sync or _run_sync, to_js or _to_js
        self.js, self._run_sync, self._to_js = js_executor, run_sync, to_js
        self.name = str(js_executor.name)

    def run(self, sequences, params: bytes = b"", readback: str | None = None) -> bytes:
        out = self._run_sync(self.js.run(self._to_js(list(sequences)), self._to_js(bytes(params)), readback))
        return out.to_bytes() if hasattr(out, "to_bytes") else bytes(out)


def open_browser(program: dict, js_executor, **bridge) -> WebGPUBackend:
    executor = JsExecutor(js_executor, **bridge)
    return WebGPUBackend(program, executor, name=f"webgpu: {executor.name}")
