// The worker's jobs: a record for each request that is one (protocol.gen.mjs's JOBS: a reply, a
// count, an inspection, ...), and the one loop that pulls a job from Python a step at a time.
//
// A job is Python's `start(kind)`, then one `step` a token (a job in the background, a count: a
// few milliseconds of counting) until its answer is done, or a `stop`. What a job does here is
// what its Python class declares (py/chatlens/jobs.py Job, carried by JOBS): whether it writes a
// reply, runs in the background, reads a turn's window, puts both models on the device. On the GPU
// this side submits the runs Python plans (several in flight: the GPU never waits for the host)
// and hands Python each run's bytes; with NumPy, Python computes each step in `step`. Between two
// steps the worker reads its messages (a stop, a preview). Python holds one job at a time and its
// `start` ends the one before; the worker queues the others (worker.mjs), so the job a start ends
// is only ever one in the background. No JSPI, no SharedArrayBuffer. What can happen, and what does:
//   a stop before the job starts   -> its record says so: a reply starts and its first pull is a
//   (it waits behind a request)       `stop` (stop_reason "stopped", nothing written); a job in
//                                     the background rejects without starting
//   a stop while it is pulled      -> the next pull is a `stop` (on the GPU at once, the runs in
//                                     flight dropped): a job that writes keeps what it wrote,
//                                     "stopped"; another (an inspection) rejects with an AbortError
//   a count while a reply is       -> it waits for that reply to end
//   pulled
//   a newer count, a preview or a  -> the count ends: it rejects with an Error named AbortError
//   reply, during a count             whose message says which
//   the GPU lost during a reply    -> its weights go to a new device (placement.mjs) and the job is
//                                     pulled again from its start; the tokens the page has already
//                                     are not posted again
//   Python raises                  -> the job ends; the error is its request's answer
// In every case a record lives from its request's message to its answer, so a stop finds the
// job it names whenever it comes; and a job asked to end (`ended`, set once) is pulled only to
// `stop` from then on.

const ENDED = Symbol("ended");

/** The worker's jobs. Each is opened when its request comes (`open`), pulled by its handler
 * (`pull`, once Python is up) and closed once answered (`close`). */
export function createJobs() {
  const records = new Map(); // request id -> its job's record, from its message to its answer
  let held = null; // the job Python holds: the one whose `start` came last, until it ends
  let lastReply = null; // where the last reply's time went (the bench's "debug" request)

  /** The record of the job request `id`, as its class declares it: `declared`, its JOBS entry
   * ({kind (a `start` kind), writes, background, window, both_models}). */
  function open(id, declared) {
    let wake;
    let finish;
    const job = {
      id,
      ...declared,
      ended: null, // why it was asked to end, once it was: "stopped", or a background job's sentence
      begun: false, // its pull has begun (in the background: waiting behind a reply, or counting)
      ending: new Promise((resolve) => (wake = resolve)), // ENDED, once it is asked to end
      finished: new Promise((resolve) => (finish = resolve)), // once its pull has ended, however
      end(why) {
        job.ended ??= why;
        wake(ENDED);
      },
      finish: () => finish(),
    };
    records.set(id, job);
    return job;
  }

  /** End the jobs begun in the background (one; two while the older is ending) but `except`, for
   * why(job), a sentence. */
  function endBackground(why, except = null) {
    for (const job of records.values()) if (job.background && job.begun && job !== except) job.end(why(job));
  }

  /**
   * Pull `job` to its end: a chat's record, the tokens and the progress posted as they come, a
   * stop answered at the next pull. Resolves with Python's answer (`done`); a job in the
   * background asked to end rejects with an AbortError. `call`: chatlens.worker's; `models`: the
   * weights' placement.mjs.
   */
  async function pull(job, args, { call, models }) {
    endBackground((other) => (job.background ? `a newer ${job.kind} replaced this one` : `a reply replaced the ${other.kind}`), job);
    job.begun = true;
    let used = models.instruct;
    const streamed = { posted: 0, skip: 0, recorded: false }; // what was posted to the page
    try {
      // One model on the GPU at a time: the instruct's put back before a job of its own starts (a
      // comparison swaps its models between its replies, in `pulls`).
      if (!job.background && !job.both_models) {
        await models.onDevice("instruct", { starting: true });
        used = models.instruct;
      }
      // A job in the background (a count) needs no weights: it waits for a reply Python is pulling.
      while (job.background && held && !held.background && !job.ended) await Promise.race([held.finished, job.ending]);
      if (job.background && job.ended) throw abortError(job.ended);
      try {
        return await pulls(job, args, streamed, { call, models });
      } catch (e) {
        if (job.background || !(await models.wasLost(used?.executor, e))) throw e;
        await models.attach(used.n_ctx);
        // Computed again from the start, the reply's first tokens are the ones the page has already.
        return await pulls(job, args, { posted: 0, skip: streamed.posted, recorded: streamed.recorded }, { call, models });
      }
    } finally {
      if (held === job) held = null;
      job.finish();
    }
  }

  /** The one loop that drives a job: `start`, then `step` (or `stop`) until its answer is done. */
  async function pulls(job, args, streamed, { call, models }) {
    const { id, kind } = job;
    let gpu = !job.background && models.instruct?.kind === "webgpu" ? models.instruct.executor : null;
    const t0 = performance.now();
    // Python's Pull books the runs in flight (it plans up to `depth` of them and reads their bytes
    // in order); this queue only holds the promises of those bytes, oldest first.
    const flight = [];
    // Where the time goes, for the bench: in Python, submitting runs, waiting for their bytes.
    const spent = { python_ms: 0, submit_ms: 0, wait_ms: 0, pulls: 0, most_in_flight: 0 };
    const timed = (what, f) => {
      const t = performance.now();
      try {
        return f();
      } finally {
        spent[what] += performance.now() - t;
      }
    };
    const ask = (name, a, ...extra) => {
      spent.pulls += 1;
      return timed("python_ms", () => call(name, a, ...extra));
    };
    /** The answer to a job asked to end: a reply's, stopped; another rejects. A job a newer start
     * replaced in Python is gone there already. */
    const ended = () => {
      if (held !== job) throw abortError(job.ended);
      const out = ask("stop", {});
      if (!job.writes) throw abortError(job.ended); // a count or an inspection has nothing to keep
      return out;
    };
    // The prompt's progress, posted at each pull and, on the GPU, after each part of a step that
    // reads it (a chunk of 128 tokens on a slow GPU is one step of minutes): the part done of the
    // step's parts, and the tokens that step reads.
    let progress = null; // {read, of, parts, parts_of, covers, doing, stage}, while the prompt is read
    const tellProgress = () => {
      if (progress) self.postMessage({ type: "progress", id, ...progress, ms: performance.now() - t0 });
    };
    // A comparison's next reply discards the runs of the one before, which the GPU may still be
    // running: their parts are not the new reply's (a cell's first parts once named the last
    // cell's one-token step). `epoch` counts the replies; a part tells only within its own.
    let epoch = 0;
    const partDone = (covers, at = epoch) => ({ part, of }) => {
      if (progress && at === epoch) Object.assign(progress, { parts: part, parts_of: of, covers }), tellProgress();
      return Boolean(job.ended);
    };
    try {
      return await loop();
    } finally {
      for (const f of flight) f.catch(() => {}); // steps computed past the end: their bytes are not needed
    }

    async function loop() {
      held = job; // Python's start ends the job before
      let out = ask("start", { kind, args, depth: gpu ? gpu.depth() : 1 });
      if (!job.background) lastReply = spent;
      let cell = out.cell;
      let placed = null; // the model whose weights are on the device for this job's runs, once asked
      for (;;) {
        if (out.record && !streamed.recorded) {
          streamed.recorded = true;
          self.postMessage({ type: "record", id, record: out.record });
        }
        if (out.prompt && !streamed.recorded) { // a comparison's: what both models read, before any token
          streamed.recorded = true;
          self.postMessage({ type: "prompt", id, prompt: out.prompt });
        }
        if (out.cell !== cell) { // a comparison's next reply: the runs still in flight were the last one's
          for (const f of flight.splice(0)) f.catch(() => {});
          cell = out.cell;
          epoch += 1;
        }
        // The runs go to the executor of the model whose reply it is: asked once a model, at the
        // job's first runs and when a comparison moves to the other model, not at every step.
        if (gpu && !out.done && out.model !== placed) {
          gpu = await models.onDevice(out.model);
          placed = out.model;
        }
        for (const t of out.tokens) {
          if (streamed.skip > 0) streamed.skip -= 1;
          else (streamed.posted += 1), self.postMessage({ type: "token", id, token: t });
        }
        // a comparison's replies that ended in this step, each the moment it ends (after its tokens)
        for (const cell of out.ended ?? []) self.postMessage({ type: "cell_end", id, cell });
        if (out.done) return out.done;
        progress = out.read < out.of ? { read: out.read, of: out.of, parts: 0, parts_of: 0, covers: 0, doing: out.doing ?? null,
                                          stage: out.stage ?? null } : null;
        tellProgress();
        if (job.ended) {
          out = ended();
          continue;
        }
        if (gpu) {
          for (const r of out.runs) {
            const params = new Uint8Array(new Uint32Array(r.params).buffer); // the step buffer's words
            flight.push(timed("submit_ms", () => gpu.submit(r.sequences, params, r.readback, { stopped: partDone(r.tokens) })));
          }
          spent.most_in_flight = Math.max(spent.most_in_flight, out.in_flight);
          const oldest = flight.shift();
          const t = performance.now();
          const raw = await Promise.race([oldest, job.ending]);
          spent.wait_ms += performance.now() - t;
          if (raw === ENDED || raw === null || job.ended) { // a stop came before this step's bytes: none of them count
            oldest.catch(() => {});
            out = ended();
            continue;
          }
          out = ask("step", { depth: gpu.depth() }, raw);
        } else {
          await Promise.race([nextTask(), job.ending]); // a stop or a preview between two steps
          out = job.ended ? ended() : ask("step", {});
        }
      }
    }
  }

  return {
    open,
    /** The request of `job` has been answered: its record goes. */
    close: (job) => records.delete(job.id),
    /** The stop signal: the job of request `id` ends at its next pull (or as it starts). */
    stop(id) {
      const job = records.get(id);
      job?.end(job.background ? `the ${job.kind} was stopped` : "stopped");
    },
    endBackground,
    pull,
    /** Where the last reply's time went in this thread (`pulls`'s figures), for the bench. */
    get lastReply() {
      return lastReply;
    },
  };
}

function abortError(message) {
  const e = new Error(message);
  e.name = "AbortError";
  return e;
}

/** Resolves after the messages already queued for this worker have been handled. */
const nextTask = () => new Promise((resolve) => {
  const channel = new MessageChannel();
  channel.port1.onmessage = () => resolve();
  channel.port2.postMessage(null);
});
