// The model box: what the download is (which model, how big, from where, kept for later
// visits, nothing typed leaves the device) with a Download button; its progress per file and
// overall with Cancel; what replies run on once stored; the base model the comparison reads
// beside it, downloaded the same way and only when asked for; and "Manage downloads": what the
// browser stores (which model, which revision, how verified), its storage estimate, delete one
// model or all.

import { elideUrls } from "../lesson/terms.mjs";
import { formatBytes } from "../store/errors.mjs";
import { $, el, fill, refill } from "./dom.mjs";

const pct = (x) => (x == null ? "" : `${Math.floor(x)}%`);
const speedText = (s) => (s == null ? "" : `${formatBytes(s)}/s`);
const timeLeft = (secs) => (secs == null ? "" : secs < 90 ? `${Math.ceil(secs)} s left` : `${Math.ceil(secs / 60)} min left`);

const hostOf = (url) => {
  try {
    return new URL(url).host;
  } catch {
    return null;
  }
};

/**
 * Why a download failed, in the plain sentence the model box shows, the same for both models:
 * the store's error (store/errors.mjs: its name and fields, url, offset, ...) put in words, with
 * what to do. `what`: the model in words ("the model", "the base model"); `offline`: what works
 * without it (a sentence, or "").
 */
export function downloadFailure(e, what = "the model", offline = "") {
  const host = hostOf(e?.url);
  const then = offline ? ` ${offline}` : "";
  if (e?.name === "AbortError") return "The download was cancelled; what was stored stays, and the next one goes on from there.";
  if (e?.name === "NetworkError" && host) {
    if (!e.offset) {
      return `This page cannot reach ${host}, where ${what}'s files are: this device is offline, or its network blocks ` +
        `that host. Try again once ${host} can be reached.${then}`;
    }
    return `The download from ${host} broke off after ${formatBytes(e.offset)} (the network went, or ${host} stopped ` +
      `answering): what is stored is kept, and trying again goes on from there.${then}`;
  }
  if (e?.name === "QuotaError") return e.message; // already plain: the sizes, and what to delete
  // (IntegrityError and SizeError carry a file's `name` among their fields, which takes the
  // error's own name's place: known by what they hold instead, what was expected and what came)
  if (e?.expected !== undefined && e?.actual !== undefined && host) {
    return `${host} sent other bytes than were published for ${what} (${typeof e.expected === "number" ? "a file's size" : "a sha256"} ` +
      "differs): nothing of it counts as stored. Try again later; if it happens again, the files there have changed.";
  }
  if (e?.name === "HttpError" && host) {
    return `${host} answered HTTP ${e.status} for ${what}'s files${e.status === 404 ? ": they are not there" : ""}. Try again later.${then}`;
  }
  return `The download failed: ${elideUrls(e?.message ?? e)}`;
}

/** Why the model source could not be used, for the model box: the host the page may not read,
 * or the worker's detail with any URL in it shortened as labels are (a long ?model= fills no box). */
export function sourceError(m) {
  return m.hostNote || `The model source could not be used: ${elideUrls(m.detail ?? "")}`;
}

/** The size of what a source needs: [known bytes, whether every size is known]. */
export function sizeOf(files) {
  const known = files.filter((f) => f.size != null);
  return [known.reduce((n, f) => n + f.size, 0), known.length === files.length];
}

/**
 * Draw the box. m: {source, files: [{name, size}], stored (summary or null), progress (snapshot or
 * null), persistence ({persisted, pending} or null), error, model ({backend} or {error} or null), status,
 * detail, weightsSentence (for a learner), weightsForDevelopers (folded under "For developers")}; on: {download,
 * cancel, useDefault}.
 */
export function drawModelBox(m, on) {
  const body = $("model-body");
  const [bytes, exact] = sizeOf(m.files || []);
  const size = bytes ? `${exact ? "" : "at least "}${formatBytes(bytes)}` : "an unknown size";
  const where = m.source ? `${m.source.label} (${new URL(m.source.url).host})` : "the model source";
  const parts = [];
  if (m.status === "error") {
    // The source could not be read: say so, and offer the way back to the default model.
    parts.push(el("p", { class: "error", id: "source-error", role: "alert", text: sourceError(m) }));
    if (m.source?.origin === "url" || !m.source) {
      parts.push(el("button", { type: "button", id: "use-default", onclick: on.useDefault, text: "Use the default model" }));
    }
    return refill(body, ...parts);
  }
  if (m.hostNote) parts.push(el("p", { class: "error", id: "source-error", role: "alert", text: m.hostNote }));
  if (m.weightsSentence) parts.push(el("p", { class: "about-download weights", text: m.weightsSentence }));
  if (m.progress) {
    parts.push(progressView(m.progress), el("button", { type: "button", id: "download-cancel", onclick: on.cancel, text: "Cancel" }));
    parts.push(persistenceNote(m.persistence));
  } else if (m.stored?.complete) {
    const check = m.stored.verified
      ? "every file matched its published sha256"
      : "some files have no published hash: they were hashed on arrival and are not verified against a published value";
    parts.push(el("p", { class: `about-download ${m.stored.verified ? "" : "unverified"}`, dataset: { stored: "complete" } },
      `Stored in this browser: ${formatBytes(m.stored.bytes)} from ${where}; ${check}. Later visits read it from here, with no download.`));
    parts.push(persistenceNote(m.persistence));
    parts.push(el("p", { class: "about-download", id: "model-backend", text: backendText(m) }));
    if (m.numpyNote && !m.model?.backend) parts.push(el("p", { class: "about-download", id: "numpy-note", text: m.numpyNote }));
  } else {
    parts.push(el("p", { class: "about-download", id: "about-download" },
      `Replies need the model's weights: SmolLM2-135M-Instruct, ${size} of files from ${where}. `,
      "They are downloaded once and kept in this browser for later visits. Everything runs on your device; ",
      "nothing you type is sent anywhere."));
    if (m.stored && m.stored.bytes > 0) {
      parts.push(el("p", { class: "about-download", text: `${formatBytes(m.stored.bytes)} of it is stored already: the download goes on from there.` }));
    }
    if (m.numpyNote) parts.push(el("p", { class: "about-download", id: "numpy-note", text: m.numpyNote }));
    parts.push(el("button", { type: "button", id: "download", onclick: on.download, disabled: !m.source, text: "Download" }));
  }
  if (m.weightsForDevelopers) {
    // after what a learner needs; the box is redrawn at each status or progress change: a fold opened stays open,
    // and its summary keeps the focus (refill, by its id)
    const open = body.querySelector("#weights-developers")?.open;
    parts.push(el("details", { class: "about-download for-developers", id: "weights-developers", open },
      el("summary", { id: "weights-developers-summary", text: "For developers: the files" }), el("p", { text: m.weightsForDevelopers })));
  }
  if (m.error) parts.push(el("p", { class: "error", id: "download-error", role: "alert", text: elideUrls(m.error) }));
  refill(body, ...parts);
}

/** What the browser's answer to the request for persistent storage means for the stored model
 * (nothing where the browser cannot say). */
function persistenceNote(p) {
  if (p?.persisted == null) return null;
  const [state, text] = p.persisted ? ["persistent", "Stored persistently: the browser won't evict it under storage pressure."]
    : p.pending ? ["pending", "The browser was asked to store it persistently and has not answered yet (Firefox asks you first); " +
                              "until it does, it may evict it under storage pressure, and it would be downloaded again."]
    : ["evictable", "The browser may evict it under storage pressure (it did not grant persistent storage); it would then be downloaded again."];
  return el("p", { class: "about-download", id: "persistence", dataset: { persistence: state }, text });
}

function backendText(m) {
  if (m.model?.error) return `Replies are not available: ${elideUrls(m.model.error)}`;
  if (m.model?.backend) return `Replies are computed on ${m.model.backend}.`;
  return m.status === "weights" ? `Loading the weights: ${elideUrls(m.detail || "")}` : "The weights load next.";
}

function progressView(p, id = "download-progress") {
  const o = p.overall;
  const line = (label, x, cls) =>
    el("div", { class: `file-progress ${cls}` },
      el("span", { text: label }),
      el("progress", { max: x.total ?? 1, value: x.total == null ? undefined : x.done, "aria-label": label }),
      el("span", { text: [`${formatBytes(x.done)}${x.total == null ? "" : ` of ${formatBytes(x.total)}`}`, pct(x.percent),
                          speedText(x.speed), timeLeft(x.eta)].filter(Boolean).join(" · ") }));
  // no live region: it is drawn again at each chunk (the status line says when the download ends)
  return el("div", { class: "progress", id },
    line("All files", o, "overall"),
    ...p.files.map((f) => line(f.name, { ...f, percent: f.total ? (100 * f.done) / f.total : null }, `file state-${f.state}`)));
}

/** Which of the page's models a stored one is, its revision, and how it was verified, in a line. */
export function whichLine(s) {
  // the base named from what its files are: the Hub's pinned revision, a stand-in (its label says
  // so, from its files), or another local copy ("local-" and its sha256: mirror.py's revision)
  const base = /stand-in/i.test(s.source?.label ?? "") ? "the base model's stand-in (not SmolLM2-135M's weights)"
    : /^local-/.test(s.source?.revision ?? "") ? "given as the base model: a local copy, not the Hub's SmolLM2-135M file"
      : "the base model (SmolLM2-135M)";
  const which = { instruct: "the instruct model (SmolLM2-135M-Instruct)", base }[s.source?.model];
  const r = s.source?.revision;
  const rev = r ? `revision ${/^[0-9a-f]{40}$/.test(r) ? r.slice(0, 12) : r}` : null; // a commit's hash: its start
  return [which, rev, s.source?.verified].filter(Boolean).join(" · ");
}

/** How a source's files are checked, in a sentence for a learner (build.json's and the mirror's
 * own are written for developers). */
function checked(source) {
  if (!source) return "";
  if (source.origin === "mirror") return " Each file is checked against the sha256 this site's mirror lists for it.";
  return source.verified ? " Each file is checked against a published sha256 before it counts as stored." : "";
}

/**
 * Draw the base model's part of the box. m: {source, spec, status (summary; complete false while
 * half is stored), progress, error, unavailable (why this page cannot offer it), name
 * (page/weights.mjs baseNameOf: what the files are)}; on: {download, cancel}.
 */
export function drawBaseBox(m, on) {
  const body = $("base-body");
  if (!body) return;
  if (m.unavailable) return refill(body, el("p", { class: "about-download", id: "base-unavailable", text: `The base model is not offered here: ${m.unavailable}` }));
  const parts = [];
  const files = m.spec?.files || [];
  const [bytes, exact] = sizeOf(files);
  const size = bytes ? `${exact ? "" : "at least "}${formatBytes(bytes)}` : "an unknown size";
  const where = m.source ? `${m.source.label} (${new URL(m.source.url).host})` : "its source";
  const name = m.name?.kind === "original" || !m.name ? "SmolLM2-135M, the base model (pretraining only, no instruction tuning)" : m.name.says;
  if (m.progress) {
    parts.push(progressView(m.progress, "base-progress"),
      el("button", { type: "button", id: "base-cancel", onclick: on.cancel, text: "Cancel" }));
  } else if (m.status?.complete) {
    parts.push(el("p", { class: `about-download ${m.status.verified ? "" : "unverified"}`, id: "base-stored", dataset: { stored: "complete" } },
      `Stored in this browser: ${formatBytes(m.status.bytes)} of ${name}, from ${where}; ` +
      `${m.status.verified ? "every file matched its published sha256" : "some files have no published hash: they are not verified against a published value"}. ` +
      "The comparison reads it beside the instruct model, offline too."));
  } else if (m.source) {
    parts.push(el("p", { class: "about-download", id: "about-base" },
      `The comparison gives the same ids to ${name}: ${size} of files from ${where}.${checked(m.source)} ` +
      "It is downloaded only if you ask, and kept in this browser beside the instruct model."));
    if (m.status && m.status.bytes > 0) {
      parts.push(el("p", { class: "about-download", id: "base-partial",
        text: `${formatBytes(m.status.bytes)} of it is stored already: the download goes on from there. Until it is whole, nothing reads it.` }));
    }
    parts.push(el("button", { type: "button", id: "download-base", onclick: on.download, text: `Download the base model (${size})` }));
  }
  if (m.error) parts.push(el("p", { class: "error", id: "base-error", role: "alert", text: m.error }));
  refill(body, ...parts);
}

/** "Manage downloads": the stored models, the estimate, and delete buttons. */
export function drawManage(models, estimate, on) {
  const rows = models.map((s) =>
    el("tr", { dataset: { model: s.id } },
      el("td", { class: "model" }, el("b", { text: s.source?.label || s.id }), el("br"),
        whichLine(s) ? el("span", { class: "which", text: whichLine(s) }) : null, whichLine(s) ? el("br") : null,
        el("small", { text: s.id })),
      el("td", { class: "files", dataset: { label: "files" }, text: s.files.map((f) => `${f.name} ${formatBytes(f.bytes ?? f.size ?? 0)}`).join(", ") }),
      el("td", { class: "size", dataset: { label: "size" }, text: `${formatBytes(s.bytes)}${s.complete ? "" : " (incomplete)"}` }),
      el("td", { class: "stored", dataset: { label: "stored" }, text: s.stored_at ? new Date(s.stored_at).toLocaleString() : "" }),
      el("td", { class: "check", dataset: { label: "check" }, text: s.complete ? (s.verified ? "verified" : "not verified against a published value") : "partial" }),
      el("td", { class: "actions" }, el("button", { type: "button", class: "delete-model", text: "Delete",
        onclick: (e) => askFirst(e.currentTarget.parentElement, deleteQuestion(s, on.inUse?.(s.id)), () => on.delete(s.id)) }))));
  const usage = estimate?.usage == null ? "unknown" : formatBytes(estimate.usage);
  const quota = estimate?.quota == null ? "unknown" : formatBytes(estimate.quota);
  fill($("manage-body"), 
    el("p", { id: "storage-estimate", text: `This site uses ${usage} of the ${quota} the browser allows it${estimate?.persisted ? " (kept under storage pressure)" : ""}.` }),
    models.length
      ? el("table", {}, el("thead", {}, el("tr", {}, ...["model", "files", "size", "stored", "check"].map((t) => el("th", { text: t })),
        el("th", {}, el("span", { class: "sr-only", text: "delete" })))), // a header a screen reader can name
        el("tbody", {}, rows))
      : el("p", { text: "Nothing is stored." }),
    models.length ? el("div", { class: "delete-all-box" }, el("button", { type: "button", id: "delete-all", text: "Delete all",
      onclick: (e) => askFirst(e.currentTarget.parentElement,
        `Delete all ${models.length === 1 ? "" : `${models.length} `}stored models (${formatBytes(models.reduce((n, m) => n + (m.bytes || 0), 0))})? ` +
          "Replies need a model downloaded again.", on.deleteAll) })) : null,
  );
}

function deleteQuestion(s, inUse) {
  return `Delete ${formatBytes(s.bytes)} of ${s.source?.label || s.id}? ` +
    (inUse ? "Replies use it now: the page starts again without it, and replies need it downloaded again."
      : "It would have to be downloaded again.");
}

/** Ask once, in place: `box`'s content becomes the question with Delete and Keep; Keep puts the
 * content back, Delete runs `go`. */
function askFirst(box, question, go) {
  const before = [...box.childNodes];
  const keep = el("button", { type: "button", class: "keep", text: "Keep it", onclick: () => fill(box, ...before) });
  fill(box, el("div", { class: "confirm", role: "alertdialog", "aria-label": question },
    el("p", { class: "confirm-question", text: question }),
    el("button", { type: "button", class: "confirm-delete", text: "Delete", onclick: () => go() }), " ", keep));
  keep.focus();
}
