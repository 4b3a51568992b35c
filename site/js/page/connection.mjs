// One module worker (worker/worker.mjs) and the requests waiting for it. The page's API
// (api.mjs) keeps one and starts another when it dies.
//
// A worker can die without a word: a test (or the browser, under memory pressure) terminates
// it, and no event says so. So the worker holds a Web Lock for as long as it lives, and the page
// asks for the same lock: the browser grants it the moment the worker is gone.

let count = 0;

/**
 * Start a worker. on: {message(data) for its status, model and check events, died(error) once it is gone}.
 * Returns {call(type, args, on) -> {id, answer}, signal(type, args), lock, watch, dead, kill};
 * `on`: {record(r), prompt(p), token(t), cellEnd(c), progress(p)} for a request's events. The messages and their fields
 * are described once, in py/chatlens/protocol.py (listed in ../worker/protocol.gen.mjs).
 */
export function connect(on) {
  const url = new URL("../worker/worker.mjs", import.meta.url);
  const worker = new Worker(url, { type: "module" });
  const lock = `chatlens-worker-${Date.now()}-${++count}`;
  const pending = new Map(); // request id -> {resolve, reject, on}
  let nextId = 1;
  let dead = null;

  const die = (error) => {
    if (dead) return;
    dead = error;
    worker.terminate();
    for (const p of pending.values()) p.reject(error);
    pending.clear();
    on.died(error);
  };

  worker.onmessage = ({ data }) => {
    if (data.type === "status" || data.type === "model" || data.type === "check") return on.message(data);
    const p = pending.get(data.id);
    if (!p) return;
    if (data.type === "record") return p.on?.record?.(data.record);
    if (data.type === "prompt") return p.on?.prompt?.(data.prompt); // a comparison's, before its tokens
    if (data.type === "token") return p.on?.token?.(data.token);
    if (data.type === "cell_end") return p.on?.cellEnd?.(data.cell); // a comparison's reply ended
    if (data.type === "progress") {
      return p.on?.progress?.({ read: data.read, of: data.of, ms: data.ms, parts: data.parts ?? 0, partsOf: data.parts_of ?? 0,
                                covers: data.covers ?? 0, doing: data.doing ?? null, stage: data.stage ?? null });
    }
    pending.delete(data.id);
    if (data.ok) p.resolve(data.result);
    else {
      const e = new Error(data.error);
      if (data.name) e.name = data.name;
      if (data.data !== undefined) e.data = data.data; // a WindowError's numbers
      p.reject(e);
    }
  };
  worker.onerror = (e) => {
    e.preventDefault?.();
    // A script that fails to load gives a plain Event, with no message.
    die(workerError(e.message ? `the worker failed: ${e.message}` : `the worker failed to start: ${url.pathname} could not be loaded`));
  };

  const call = (type, args, on) => {
    const id = nextId++;
    const answer = new Promise((resolve, reject) => {
      if (dead) return reject(dead);
      pending.set(id, { resolve, reject, on });
      worker.postMessage({ id, type, args });
    });
    return { id, answer };
  };

  /** Once the worker holds its lock (it takes it on init): find out when it is gone. */
  const watch = () => {
    globalThis.navigator?.locks?.request(lock, () => die(workerError("the worker stopped")));
  };
  return {
    call,
    signal: (type, args) => dead || worker.postMessage({ type, args }),
    lock,
    watch,
    get dead() {
      return dead;
    },
    /** End the worker without a word, as a crash does (tests): the lock tells the page. */
    kill: () => worker.terminate(),
  };
}

function workerError(message) {
  const e = new Error(message);
  e.name = "WorkerError";
  return e;
}
