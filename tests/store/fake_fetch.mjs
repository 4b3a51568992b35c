// A fetch() over in-memory files with the same faults as tests/faulty_server.py, for node --test:
//   cutAfter: N      the body breaks off (a network error) after N bytes
//   closeAfter: N    the body ends cleanly after N bytes (a close-delimited response cut short)
//   wrongByteAt: K   the byte at file offset K is flipped
//   ignoreRange      answer 200 with the whole file whatever Range asks
//   status: S        answer S (500, 404, ...) with a short text body
//   noLength         no Content-Length header
//   delayMs: D       wait D ms before each block
//   times: T         how many requests the fault applies to (default 1; Infinity: all)
// Every request is logged: {url, range, status, sent}.

export function bytesOf(n, seed = 1) {
  // xorshift32: distinct chunks, reproducible
  const out = new Uint8Array(n);
  let x = seed >>> 0 || 1;
  for (let i = 0; i < n; i++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    out[i] = x & 255;
  }
  return out;
}

export function fakeServer(files, { block = 64 * 1024 } = {}) {
  const faults = new Map(); // url -> [fault, ...]
  const log = [];
  const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

  function fault(url, spec) {
    if (!faults.has(url)) faults.set(url, []);
    faults.get(url).push({ times: 1, ...spec });
  }

  function takeFault(url) {
    const list = faults.get(url) ?? [];
    const f = list[0];
    if (!f) return {};
    if (--f.times <= 0) list.shift();
    return f;
  }

  async function fetch(url, { headers = {}, signal } = {}) {
    if (signal?.aborted) throw signal.reason;
    url = String(url);
    const range = new Headers(headers).get("Range");
    const entry = { url, range, status: null, sent: 0 };
    log.push(entry);
    const data = files[url];
    const f = takeFault(url);
    if (!data || f.status) {
      entry.status = f.status ?? 404;
      return new Response(`HTTP ${entry.status}`, { status: entry.status });
    }
    let start = 0;
    let end = data.length;
    let status = 200;
    const m = /^bytes=(\d+)-(\d*)$/.exec(range ?? "");
    if (m && !f.ignoreRange) {
      start = Number(m[1]);
      end = m[2] ? Math.min(data.length, Number(m[2]) + 1) : data.length;
      if (start >= data.length) {
        entry.status = 416;
        return new Response("", { status: 416, headers: { "Content-Range": `bytes */${data.length}` } });
      }
      status = 206;
    }
    entry.status = status;
    const body = data.slice(start, end);
    if (f.wrongByteAt != null && f.wrongByteAt >= start && f.wrongByteAt < end) body[f.wrongByteAt - start] ^= 0x5a;
    const h = { "Content-Type": "application/octet-stream" };
    if (!f.noLength) h["Content-Length"] = String(body.length);
    if (status === 206) h["Content-Range"] = `bytes ${start}-${end - 1}/${data.length}`;
    let pos = 0;
    let failed = false;
    const stream = new ReadableStream({
      start(controller) {
        // like a real fetch: an abort errors the body at once, even mid-wait
        signal?.addEventListener("abort", () => {
          failed = true;
          controller.error(signal.reason);
        }, { once: true });
      },
      async pull(controller) {
        if (f.delayMs) await sleep(f.delayMs);
        if (failed) return;
        if (f.cutAfter != null && pos >= f.cutAfter) return controller.error(new TypeError("network error (cut)"));
        if (pos >= body.length || (f.closeAfter != null && pos >= f.closeAfter)) return controller.close();
        let n = Math.min(block, body.length - pos);
        const stop = f.cutAfter ?? f.closeAfter;
        if (stop != null) n = Math.min(n, stop - pos);
        controller.enqueue(body.slice(pos, pos + n));
        pos += n;
        entry.sent = pos;
      },
    });
    return new Response(stream, { status, headers: h });
  }

  return { fetch, log, fault, faults };
}
