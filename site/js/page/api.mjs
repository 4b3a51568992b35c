// window.chatlens: the page's API, for the UI, for embedding and for tests. It talks to the
// module worker where Python runs. Its arguments are named in camelCase (protocol.mjs alone puts
// them on the wire, in snake_case); its answers come as the wire names them, in snake_case.
//   await chatlens.ready                        -> {source, info, pyodide, stored, snapshot, device} once the
//                                                  worker is up (snapshot: "restored" when Python started
//                                                  from the memory snapshot an earlier visit saved, "saved",
//                                                  "none"; device: {backend, why, adapter} chosen to compute)
//   await chatlens.preview({system, messages, window, reserve, maxTokens, specialInText})  -> the turn
//        record, without generating (or {preset, custom} instead of system: a preset's system text)
//   await chatlens.run({...as preview, topK}, {onRecord, onToken, onProgress, signal})
//        -> the turn record with the reply, in one request; onRecord(record) once, before any
//        token: the record the reply will fill (as a preview answers it; a turn that does not fit
//        rejects with a WindowError before any token); onToken({id, text, token, bytes}) streams
//        each reply id as it is chosen (text: what it adds to the reply; token and bytes: the id's
//        token as the record's reply_tokens and reply_bytes write it; id -1: text ending a
//        character); onProgress({read, of, ms, parts, partsOf, covers}) while the prompt is read
//        (tokens read of all, ms since the reply started; a long GPU step run in parts: the part
//        done, of its parts, and the tokens that step reads); signal: an AbortSignal
//        that stops the reply: it ends with stop_reason "stopped", keeping what it wrote (aborted
//        before the call, it rejects with an Error named AbortError); topK: K fills the record's
//        top_k, each reply token's K best [id, logit, probability]. Replies are written one at a
//        time: a second waits for the first to end (stop it with its own signal); while one is
//        written, inspect, cause, needs and branch reject at once with the sentence the page's
//        buttons say ("Taking a piece away waits for the reply being written: press Stop, ...";
//        page/writing.mjs)
//   await chatlens.predict({...as preview, topK}) -> {top_k, top_k_tokens, top_k_bytes, used, reused_tokens,
//        backend}: the reply's most likely first tokens, computed now (the cache is left as it was)
//   await chatlens.count({...as preview}, {onProgress, signal}) -> what a preview's overflow needs,
//        counted exactly: {needed, window, reserve, pieces, at_least: false, context, message}, the
//        data of the WindowError the preview answered from a bound (data.at_least: "at least N"),
//        and its sentence. Counted in the background: previews and the rest are answered meanwhile.
//        onProgress({read, of, ms, parts}): characters of the prompt read; signal (an AbortSignal),
//        a newer count, a new preview or a reply end it, and it rejects with an Error named AbortError
//   await chatlens.complete({text, topK, maxTokens}, {onToken, onProgress, signal}) -> plain text
//        continued with no template: {prompt_ids, ..., reply_ids, reply_text, reply_tokens, reply_bytes,
//        stop_reason, top_k, ...}: the text's tokens, then the reply as a record names it
//   await chatlens.branch({...as run, replyIds, step, id, maxTokens, topK, replyTopK}, {onToken, onProgress, signal})
//        -> another choice at one step of the turn's reply, as a reply: {reply_ids, reply_text,
//        reply_tokens, reply_vocab, reply_bytes, stop_reason, top_k, top_k_tokens, top_k_bytes,
//        reused_tokens, computed_tokens, backend, timings, prompt_ids, step, id, branched_from}:
//        branched_from[:step], then id, then greedy again, maxTokens ids in all (top_k: every
//        step's, when replyTopK gives the reply's up to the step and topK asks for the rest); onToken streams the ids after `id` as run's do; written as a
//        reply is (one at a time; signal stops it, keeping what it wrote)
//   await chatlens.inspect({...as run, replyIds, step, topK}, {onProgress, signal}) -> one step of the
//        turn's reply inspected: {prompt_ids, reply_ids, step, position, query_id, chosen_id,
//        attention ([layer][head] weights over positions 0..position), by_piece ([{kind, label,
//        start, end, share}]), lens ([layer] top K [id, probability]), lens_tokens (their text), reused_tokens,
//        computed_tokens, backend, note}; step: the one that chose reply id `step` (replyIds [] and
//        step 0: a draft's first token); topK: the lens's candidates a layer (default 5); model:
//        "instruct" (default) or "base" (once its weights are in); layout: "template" (default) or
//        "plain" (the last message's text read as it is: plain text's, the comparison's plain
//        cells). A signal rejects it with an AbortError
//   await chatlens.cause({...as inspect, pieces, tokens}, {onProgress, signal}) -> which piece of the
//        turn one step of its reply needed: {prompt_ids, reply_ids, step, position, chosen_id,
//        chosen_token, p, top_id, top_p, reply_logprob, tokens, pieces: [{name, kind, label, start,
//        end, spans, count, attention_share, knocked, removed, knocked_why, removed_why}],
//        reused_tokens, computed_tokens, backend}: each piece knocked out (the reply may not read
//        it) and removed (the turn rendered without it; a dropped turn put back), each {p, top_id,
//        top_token, top_p, reply_logprob, prompt_ids, what, tokens} or null with a sentence why;
//        pieces: ["system:0", "user:0+assistant:0", ...] (default: every piece and, from two kept
//        turns, the groups "replies:0" and "history:0"); tokens: true adds each reply position's
//        {p, top_id, top_p} from 0 to the step; onProgress({read, of, ms, doing, stage, ...}):
//        tokens run through of all, what is computed now in words, {done, of} passes. A signal
//        rejects it with an AbortError; the cache holds what it held
//   await chatlens.needs({...as run, replies, knocked, pieces, tokens}, {onProgress, signal}) -> which
//        turn each reply of the conversation needed: {turns: [{turn, message_index, prompt_ids,
//        reply_ids, reply_tokens, reply_logprob, tokens, pieces: [...as cause's, at the reply's
//        last step]}], knocked, reused_tokens, computed_tokens, backend}; messages: the
//        conversation, every assistant message a reply measured; replies: each one's ids as its
//        record has them; knocked: knock pieces out too; onProgress's stage: {done, of, turn, turns}
//   await chatlens.compare({text, maxTokens, topK}, {onPrompt, onToken, onCellEnd, onProgress, signal}) -> the
//        lesson's experiment: the message read as plain text and in the chat template, by the base and the
//        instruct model: {prompt: {text, plain_ids, plain_tokens, template_text, template_ids,
//        template_tokens, special_ids}, base: {plain, template}, instruct: {plain, template},
//        max_tokens, top_k, eos_id}, each cell a reply as a record names it {reply_ids, reply_tokens,
//        reply_text, stop_reason, top_k (each step's [id, logit, probability] rows), top_k_tokens, ...}.
//        Both models must be stored (the base attaches on the first compare); onPrompt(prompt)
//        once, before any token; onToken({model, layout, token: {id, text, token, bytes}}) as
//        each reply id is chosen (the four come one after another); onCellEnd({model, layout,
//        stop_reason}) the moment one of them ends (end_turn or max_tokens; its candidates come
//        with the answer); onProgress({read, of, ms, parts}) while the reply under way reads its
//        prompt; signal stops all four (stop_reason "stopped"; one a stop kept from starting has no
//        ids and backend null: it never ran); a new compare
//        waits for the one before, as replies do. maxTokens, topK: the site's compare_limit and
//        compare_top_k by default
//   await chatlens.tokenize({text})             -> {prompt_ids, prompt_tokens, prompt_vocab, prompt_bytes,
//                                                  special_ids}: no template
//   await chatlens.render({messages, template, tools, documents, addGenerationPrompt,
//        continueFinalMessage, variables, assistantMask}) -> {text, ids, tokens, vocab, bytes,
//        special_ids, assistant_mask?}: transformers' apply_chat_template, for the template
//        workbench (the wire's names, add_generation_prompt, ..., are still taken: protocol.mjs)
//   await chatlens.chatTemplate()               -> {source, names, special_tokens}: the model's template
//   await chatlens.labSource()                  -> {name, source}: the lab's hand-written Python
//   await chatlens.runPython({code, seconds, results}) -> {stdout, stderr, error, timed_out, seconds, results}
//   await chatlens.link({...as run, replyIds, step, open, id}) -> the address of this page that sets the case up
//        (page/link.mjs): the turn's request, the reply's ids as written here, and a step of it with
//        open, the measures open ("inspect", "cause", "whole", "branch"; id: the branch's), in the
//        #fragment; what "Copy a link" copies. A TypeError says what a link cannot hold, a RangeError a case too long
//   chatlens.command({...as link})              -> the same case as a command line: its request on stdin, as
//        `python3 -m chatlens run`, `inspect`, `cause` or `branch` reads it (what "Copy as a command" copies)
//   chatlens.writing                            -> true while a reply (run, complete, branch or compare) is
//                                                  being written; whoever asked for it stops it with its signal
//   await chatlens.downloadModel({model, onProgress, signal}) -> the stored model once the current source is
//        stored and verified (then the worker loads its weights: chatlens.model, status "ready");
//        model: the model key, "instruct" (the default: the current source) or "base" (the comparison's base
//        model, stored beside it; the instruct's weights stay as they are)
//   await chatlens.storedModels()               -> [{id, source, files, bytes, total, complete, verified, stored_at}]:
//                                                  source.model the model key, "instruct", "base" or null
//                                                  (a model given by URL); verified: how its bytes were checked
//   await chatlens.deleteModel(id), chatlens.deleteAllModels(), chatlens.storageEstimate()
//   chatlens.model                              -> what computes the instruct's replies once its weights are in:
//                                                  {backend, n_ctx, kind: "webgpu"|"numpy", why, check,
//                                                  dispatches_per_token} or {error, offer}; check: the GPU's
//                                                  known-answer check that let it compute (as chatlens.check())
//   await chatlens.check()                      -> the GPU's known-answer check (py/chatlens/check.py):
//                                                  {passed, max_diff, tolerance, checks: [{what, passed, max_diff,
//                                                  differed}], ms, cached, adapter, sentence, fault, weights}: the
//                                                  result kept for this adapter and build, this visit's, or one run
//                                                  now; a GPU that fails it computes nothing the page shows
//   chatlens.checked                            -> the last check result the worker reported (null: none yet)
//   await chatlens.bench({newTokens})           -> this device's speed on `python -m chatlens bench`'s input
//                                                  (page/bench.mjs): bench's keys, prefill_tok_s, decode_tok_s,
//                                                  first_token_ms, dispatches_per_token, backend, adapter, ...
//   chatlens.baseModel                          -> the same for the base model, once a comparison has put
//                                                  its weights beside the instruct's ({..., model: "base",
//                                                  note: a sentence when only one fits on the GPU at a time})
//   chatlens.backend                            -> the backend asked for: auto | webgpu | numpy
//                                                  (?backend= or the saved setting)
//   chatlens.settings                           -> the site's settings (build.json, from chatlens.defaults):
//                                                  reply_limit, windows, default_window, presets, ...
//                                                  (await chatlens.settingsReady first)
//   chatlens.source, chatlens.build             -> the model source and build.json, once known
//   chatlens.status                             -> {state, detail}: booting | loading | text (previews
//                                                  work; replies need the weights) | weights | ready | error
//   chatlens.onStatus(fn)                       -> fn(status) now and on every change (and once
//                                                  chatlens.source, the model source, is known)
//   chatlens.pageState                          -> for tests: the page's state (page/state.mjs), set by the
//                                                  page (app.mjs): read it, never change it
// The record's fields, and what id, token, bytes and piece mean, are documented once, in
// py/chatlens/record.py (TurnRecord); every other request's and answer's fields in
// py/chatlens/contract.py (protocol.py holds the tables the wire is made from).

import { createDownloads } from "./downloads.mjs";
import { connect } from "./connection.mjs";
import { toWire } from "./protocol.mjs";
import { HELD_OFF, waitsForReply } from "./writing.mjs";
import { FIELDS, JOBS, MESSAGES } from "../worker/protocol.gen.mjs";
import { caseOf, commandOf, linkTo } from "./link.mjs";
import { backendPref, sourceUrlPref } from "./prefs.mjs";
import { checkOverride, keepCheck, keptChecks } from "./check.mjs";
import { benchOf } from "./bench.mjs";
import { resolveSource } from "./source.mjs";

export function createApi() {
  const listeners = new Set();
  let running = null; // the reply in progress (chatlens.writing): {id}, null when none
  const api = {
    status: { state: "booting", detail: "starting" },
    settings: null,
    source: null,
    model: null,
    baseModel: null, // the base model's weights beside the instruct's, once a comparison attached them
    restarts: 0, // workers started again after one died
    notes: [], // page parameters and saved settings that were not valid, and were ignored
    backend: null,
    build: null, // build.json: the Pyodide version, the wheels, the pinned model revision, the settings
    checked: null, // the GPU's known-answer check as the worker last reported it (page/check.mjs keeps it)
    onStatus(fn) {
      listeners.add(fn);
      fn(api.status);
      return () => listeners.delete(fn);
    },
  };
  const backend = backendPref();
  const sourceUrl = sourceUrlPref(); // ?model=, a model source's URL (not chatlens.model, what computes)
  api.backend = backend.backend;
  api.notes.push(...backend.notes, ...sourceUrl.notes);
  const setStatus = (state, detail = "") => {
    api.status = { state, detail };
    for (const fn of listeners) fn(api.status);
  };

  // build.json first: the page builds its controls from its settings while Python boots.
  api.settingsReady = getBuild().then((build) => {
    api.build = build;
    api.settings = build.settings;
    return build.settings;
  });
  // The model source, resolved once for the page (a new worker reads the same one).
  api.sourceReady = api.settingsReady.then(async () => (api.source ??= await resolveSource({ build: api.build, wanted: sourceUrl.url })));
  api.sourceReady.catch(() => {}); // `ready` rejects with the reason

  // The worker. When one that had started dies, the page says so and starts another: the
  // conversation is the page's, and the new worker's cache fills again on the next turn. One
  // that never started (its script did not load) is not retried: `ready` and every call reject.
  let conn = null;
  function start() {
    let booted = false;
    let died;
    const death = new Promise((_, reject) => (died = reject));
    death.catch(() => {});
    conn = connect({
      message(data) {
        if (data.type === "check") {
          keepCheck(data.key, data.result);
          if ("passed" in data.result && "checks" in data.result) api.checked = data.result; // not a weights entry alone
          return setStatus(api.status.state, api.status.detail);
        }
        if (data.type === "model") {
          // The event's ModelInfo: what computes a model's replies (or {error, offer}), its own
          // `model` the model key whose weights these are ("instruct" or "base").
          const computes = data.computes;
          if (computes?.model === "base") api.baseModel = computes; // the comparison's: chatlens.model stays
          else api.model = computes;
          return setStatus(api.status.state, api.status.detail);
        }
        setStatus(data.state, data.detail);
      },
      died(error) {
        died(error);
        if (!booted) return setStatus("error", error.message);
        api.restarts += 1;
        api.model = api.baseModel = null;
        setStatus("booting", `${error.message}: starting a new worker (the conversation is kept)`);
        start();
      },
    });
    const c = conn;
    api.ready = Promise.race([death, (async () => {
      await api.sourceReady;
      setStatus(api.status.state, api.status.detail); // listeners see the source at once
      // ?jspi=off, for tests: the worker hides JSPI, to show that nothing needs it
      const asked = new URLSearchParams(globalThis.location?.search);
      const hideJspi = asked.get("jspi") === "off";
      // ?gpu=one-model, for tests: the GPU takes one model's weights only, so the comparison's
      // one-at-a-time fallback runs as it would on a GPU with too little memory for both
      const oneModelOnGpu = asked.get("gpu") === "one-model";
      const info = await c.call("init", toWire("init", { source: api.source, build: api.build, backend: api.backend,
                                                         lock: c.lock, hideJspi, oneModelOnGpu, kept: keptChecks(),
                                                         checkOverride: checkOverride() })).answer;
      booted = true;
      c.watch();
      return info;
    })()]);
    api.ready.catch((e) => c.dead || setStatus("error", e.message));
    // A model the store holds already answers without asking: its weights load next.
    api.modelReady = api.ready.then(({ stored }) => (stored?.complete ? c.call("attach").answer : null));
    api.modelReady.catch(() => {}); // chatlens.model and the status say why
  }
  start();
  /** Request `type` of the worker, `args` in the page API's names (protocol.mjs puts them on the wire). */
  const call = (type, args, on) => conn.call(type, toWire(type, args, api.settings), on);

  const checkMessages = (args) => {
    if (!args || !Array.isArray(args.messages) || args.messages.length === 0) {
      throw new TypeError("chatlens: messages must be a non-empty array of {role, content}");
    }
  };
  /** The arguments of request `type` checked as its type needs them: a turn's messages, a text. */
  const checked = (type, args) => {
    const fields = FIELDS[MESSAGES.requests[type].args];
    if (fields.includes("messages")) checkMessages(args);
    else if (fields.includes("text") && (!args || typeof args.text !== "string")) throw new TypeError(`chatlens: ${type} needs {text}`);
  };
  api.preview = async (args) => {
    checkMessages(args);
    await api.ready;
    return call("preview", args).answer;
  };
  /** The comparison's base model stored whole and put beside the instruct (its weights attached). */
  async function baseAttached() {
    const found = await downloads.base();
    if (found.error) throw new Error(`the comparison needs the base model: ${found.error}`);
    if (!found.status?.complete) {
      throw new Error("the comparison needs the base model, which is not stored" +
        `${found.status?.bytes ? " whole yet" : ""}: download it first (its box in Manage downloads)`);
    }
    await call("attach_base", { source: found.source }).answer;
  }
  /**
   * Each job, api[type] (JOBS: as its Python class declares it): one that writes a reply (run,
   * complete, branch, compare) is streamed (onRecord, onPrompt, onToken, onProgress; chatlens.writing
   * while it runs) and a stop keeps what it wrote; another (predict, count, inspect, cause, needs) answers
   * once it ends, and a stop rejects it with an AbortError. `signal` stops it. One that puts both
   * models on the device (compare) attaches the base first, and its tokens say whose they are.
   * The methods made here, one a kind (grep finds them here, not as definitions):
   *   api.run api.complete api.predict api.count api.compare api.branch api.inspect api.cause api.needs
   */
  for (const [type, declared] of Object.entries(JOBS)) {
    api[type] = async (args, { onRecord, onPrompt, onToken, onCellEnd, onProgress, signal } = {}) => {
      checked(type, args);
      const aborted = () => new DOMException(`the ${declared.writes ? "reply" : type} was stopped before it started`, "AbortError");
      if (signal?.aborted) throw aborted();
      // a step of a reply looked at while a reply is written: refused now, as the page's buttons refuse (writing.mjs)
      const held = HELD_OFF[type];
      if (held && running) throw new Error(waitsForReply(held));
      await api.ready;
      if (declared.both_models) await baseAttached();
      if (signal?.aborted) throw aborted(); // while the page waited for the worker
      if (held && running) throw new Error(waitsForReply(held)); // a reply begun meanwhile
      const c = conn; // a stop goes to the worker that computes it, even once another replaced it
      const token = onToken && declared.both_models
        ? (t) => onToken({ model: t.model, layout: t.layout, token: { id: t.id, text: t.text, token: t.token, bytes: t.bytes } })
        : onToken;
      const { id, answer } = c.call(type, toWire(type, args, api.settings),
                                    { record: onRecord, prompt: onPrompt, token, cellEnd: onCellEnd, progress: onProgress });
      const stop = () => c.signal("stop", { id });
      signal?.addEventListener("abort", stop, { once: true });
      const me = { id };
      if (declared.writes) {
        running = me;
        setStatus(api.status.state, api.status.detail); // listeners see chatlens.writing
      }
      try {
        return await answer;
      } finally {
        signal?.removeEventListener("abort", stop);
        if (running === me) {
          running = null;
          setStatus(api.status.state, api.status.detail);
        }
      }
    };
  }
  // The text side's requests: the tokenizer and the template, no weights needed.
  const textRequest = (type) => async (args = {}) => {
    await api.ready;
    return call(type, args).answer;
  };
  api.tokenize = textRequest("tokenize");
  api.render = textRequest("render");
  api.chatTemplate = textRequest("chat_template");
  api.labSource = textRequest("lab_source");
  api.runPython = textRequest("run_python");
  /** The GPU's known-answer check: kept, this visit's, or run now (worker/check.mjs). */
  api.check = async () => {
    await api.ready;
    const result = await call("check", {}).answer;
    api.checked = result;
    return result;
  };
  /** This device's speed on the command line's bench input (page/bench.mjs). */
  api.bench = (options) => benchOf(api, options);
  const downloads = createDownloads(() => api.source, () => api.settingsReady.then(() => api.build)); // build.json read once
  /** Store the current source (verified), then have the worker load its weights. */
  api.downloadModel = async (options) => {
    if (options?.model === "base") return downloads.downloadModel(options); // the instruct's weights stay
    await api.ready;
    const summary = await downloads.downloadModel(options);
    api.modelReady = call("attach").answer;
    api.modelReady.catch(() => {}); // chatlens.model and the status say why
    return summary;
  };
  api.downloads = downloads; // spec() and status() of the current source, for the download box
  for (const k of ["storedModels", "deleteModel", "deleteAllModels", "storageEstimate"]) api[k] = downloads[k];

  // A case shared: its link (this page's address, the case in its fragment) and its command line.
  api.link = async (request) => linkTo(caseOf(request), globalThis.location.href);
  api.command = (request) => commandOf(caseOf(request), api.settings ?? {}, { weights: api.source ? `${api.source.label}, ${api.source.url}` : null });

  Object.defineProperty(api, "writing", { get: () => running !== null, enumerable: true });
  /** For tests: end the worker as a crash would (the page notices through its lock, as it does then). */
  api.terminateWorker = () => conn.kill();
  /** For tests: the worker's GPU device goes, as a driver reset takes it. */
  api.loseGpu = () => conn.signal("lose_gpu");
  return api;
}

async function getBuild() {
  const url = new URL("../../build.json", import.meta.url);
  const r = await fetch(url);
  if (!r.ok) throw new Error(`${url}: HTTP ${r.status}`);
  return r.json();
}
