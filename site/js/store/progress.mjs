// Download progress: bytes done and total per file and overall, percent, speed and time left.
// Speed counts only bytes fetched now (not what was stored before a resume), measured from the
// first byte that arrived (not from the request: connecting and checking stored chunks are not
// slowness) over a sliding window, so a stall shows as falling speed. Speed and time left stay
// null until `settle` ms of bytes have come: a first chunk's rate says little ("8 KiB/s, 529 min
// left"). An unknown total (no Content-Length, no listed size) leaves percent and time left null
// but still gives bytes and speed. Pure: the clock is passed in.

export const WINDOW_MS = 4000; // the speed is over the last 4 s of bytes
export const SETTLE_MS = 1500; // and is said once 1.5 s of bytes have come

export class Meter {
  constructor({ now, window = WINDOW_MS, settle = SETTLE_MS }) {
    this.now = now;
    this.window = window;
    this.settle = settle;
    this.started = null;
    this.samples = []; // [time, bytes fetched so far], oldest first; the first is the first byte's
    this.fetched = 0;
  }

  start() {
    this.started ??= this.now();
  }

  add(n) {
    this.start();
    this.fetched += n;
    const t = this.now();
    this.samples.push([t, this.fetched]);
    // Keep one sample at or before the window's start: it is where the window measures from.
    while (this.samples.length > 1 && this.samples[1][0] <= t - this.window) this.samples.shift();
  }

  /** Bytes per second over the last `window` ms (since the first byte, until that long has
   * passed), or null before `settle` ms of bytes have come. */
  speed() {
    if (!this.samples.length) return null;
    const t = this.now();
    const first = this.samples[0];
    if (this.fetched === first[1] || t - first[0] < this.settle) return null;
    let from = first;
    for (const s of this.samples) if (s[0] <= t - this.window) from = s;
    return (this.fetched - from[1]) / (Math.max(t - from[0], 1) / 1000);
  }
}

export class Progress {
  /** files: [{name, size}] in download order (size null when unknown). */
  constructor({ model, files, now, window, settle }) {
    this.model = model;
    this.now = now;
    this.overall = new Meter({ now, window, settle });
    this.files = files.map((f) => ({ name: f.name, done: 0, total: f.size ?? null, state: "waiting", meter: new Meter({ now, window, settle }) }));
    this.current = null;
  }

  file(name) {
    const f = this.files.find((x) => x.name === name);
    if (!f) throw new Error(`no file ${name} in this download`);
    return f;
  }

  /** A file begins (or begins again): `done` bytes are already stored. */
  begin(name, { done = 0, total } = {}) {
    const f = this.file(name);
    f.done = done;
    if (total !== undefined) f.total = total;
    f.state = "downloading";
    f.meter.start();
    this.overall.start();
    this.current = f;
  }

  total(name, total) {
    this.file(name).total = total;
  }

  add(name, n) {
    const f = this.file(name);
    f.done += n;
    f.meter.add(n);
    this.overall.add(n);
  }

  /** Bytes found already stored (checked while resuming): done, but not part of the speed. */
  credit(name, n) {
    this.file(name).done += n;
  }

  /** Bytes already counted for this file are thrown away (a restart from byte 0). */
  reset(name, done = 0) {
    this.file(name).done = done;
  }

  end(name, state) {
    const f = this.file(name);
    f.state = state;
    if (state === "stored" || state === "skipped") f.total ??= f.done;
    if (state === "skipped" || state === "absent") f.done = f.total ?? f.done;
  }

  snapshot(phase = "download") {
    const f = this.current;
    const totals = this.files.filter((x) => x.state !== "absent").map((x) => x.total);
    const total = totals.every((t) => t != null) ? totals.reduce((a, t) => a + t, 0) : null;
    const done = this.files.reduce((a, x) => a + (x.state === "absent" ? 0 : x.done), 0);
    return {
      model: this.model,
      phase,
      file: f ? figures(f.name, f.done, f.total, f.meter.speed()) : null,
      overall: figures(null, done, total, this.overall.speed()),
      files: this.files.map((x) => ({ name: x.name, done: x.done, total: x.total, state: x.state })),
    };
  }
}

function figures(name, done, total, speed) {
  const left = total == null ? null : Math.max(0, total - done);
  const out = {
    done,
    total,
    percent: total == null ? null : total === 0 ? 100 : Math.min(100, (100 * done) / total),
    speed,
    eta: left == null ? null : left === 0 ? 0 : speed ? left / speed : null,
  };
  return name == null ? out : { name, ...out };
}

/** Calls `emit` at most every `interval` ms, except when forced (a file's start and end, the end). */
export function throttle(emit, interval, now) {
  let last = -Infinity;
  return (make, force = false) => {
    const t = now();
    if (!force && t - last < interval) return;
    last = t;
    emit(make());
  };
}
