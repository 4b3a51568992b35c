// Generated from py/chatlens/protocol.py by `python -m chatlens protocol --write`: do not edit.
// The worker's requests (chatlens.worker), their arguments and what they answer. On the wire
// every name is snake_case, as Python writes it.

/**
 * Read a model source's text side: tokenizer, chat template, config.
 * @typedef {object} Load
 * @property {string} path the model's files in the worker's file system: a .gguf file or a Hugging Face folder
 */

/**
 * A chat turn: the conversation, the window it must fit, the system prompt.
 * @typedef {object} Turn
 * @property {Array} messages [{role, content}, ...]: the history, then the new user message last
 * @property {number} [window=1024] the context window, in tokens
 * @property {number} [reserve=96] tokens kept free in the window for the reply
 * @property {number|null} [max_tokens=null] the reply limit (default: the reserve)
 * @property {string|null} [preset=null] a system prompt preset (chatlens.presets), or none
 * @property {string|null} [custom=null] the custom preset's text
 * @property {string|null} [system=null] the system prompt as text (null: the template's default)
 * @property {boolean} [special_in_text=true] special tokens written in a message are read as tokens (false: as characters)
 * @property {number|null} [top_k=null] candidates a reply token records (chat: default 0, none; predict: default the site's)
 */

/**
 * No arguments.
 * @typedef {object} Empty
 */

/**
 * Build the GPU program of the forward pass for this source and adapter.
 * @typedef {object} GpuProgram
 * @property {number} n_ctx the context the program's KV cache holds
 * @property {Array} [features=[]] the adapter's features
 * @property {object} [limits={}] the adapter's limits, by WebGPU's names
 */

/**
 * Compute replies with the program gpu_program built; the page's executor runs its steps.
 * @typedef {object} UseGpu
 * @property {string} [name="adapter"] the adapter's name, for the record's backend
 */

/**
 * Start a reply the page pulls (one `step` a token).
 * @typedef {object} Start
 * @property {string} kind chat (a Turn's reply), text (a Text's continuation) or predict (a Turn's first token)
 * @property {object} args the arguments of that kind: a Turn, or a Text
 * @property {number} [depth=2] GPU steps to keep in flight
 * @property {number} [chunk=16] the most prompt ids one NumPy step reads, so the page's progress moves and a stop falls between chunks (0: the backend's own; a GPU step reads the program's chunk)
 */

/**
 * The next step of the reply being pulled; on the GPU, with the oldest run's bytes as an extra argument.
 * @typedef {object} Step
 * @property {number|null} [depth=null] GPU steps to keep in flight (default: as started)
 */

/**
 * The next slices of the count being pulled.
 * @typedef {object} CountStep
 * @property {number} [ms=20] how long this step may count, in milliseconds, before it answers
 */

/**
 * Plain text to continue, with no template.
 * @typedef {object} Text
 * @property {string} text the text, tokenized as it is (special tokens written in it matched)
 * @property {number} [max_tokens=96] new tokens at most
 * @property {number} [top_k=0] candidates each new token records (0: none)
 */

/**
 * The text's tokens, with no template.
 * @typedef {object} Tokenize
 * @property {string} text the text
 */

/**
 * A chat template rendered as transformers' apply_chat_template renders it.
 * @typedef {object} Render
 * @property {*} messages [{role, content, ...}, ...]
 * @property {string|null} [template=null] Jinja source (default: the model's template)
 * @property {*} [tools=null] tool definitions passed to the template
 * @property {*} [documents=null] documents passed to the template
 * @property {boolean|null} [add_generation_prompt=null] end with the assistant's header (default: true, false when continuing)
 * @property {boolean|string} [continue_final_message=false] continue the last message (or the named field of it)
 * @property {object|null} [variables=null] extra template variables
 * @property {boolean} [assistant_mask=false] also mark the tokens inside {% generation %} blocks
 */

/**
 * A learner's Python, run with count_tokens(text) among its globals.
 * @typedef {object} RunPython
 * @property {string} code the program
 * @property {number} [seconds=3.0] its time limit
 * @property {Array} [results=[]] names whose values to return
 */

/** Each request's arguments (a typedef above) and what it answers. */
export const REQUESTS = {
  load: { args: "Load", answers: "{\"eos_token\", \"n_ctx\", \"vocab_size\", \"source\"}: the text side is ready" },
  preview: { args: "Turn", answers: "the TurnRecord (chatlens.record) of what the model would read, with the reuse the cache would give" },
  use_numpy: { args: "Empty", answers: "{\"backend\", \"n_ctx\"}: replies compute with NumPy (the weights in the file system)" },
  gpu_program: { args: "GpuProgram", answers: "the GPU program (chatlens.gpu.program's plain data)" },
  use_gpu: { args: "UseGpu", answers: "{\"backend\", \"n_ctx\"}" },
  start: { args: "Start", answers: "a pull's answer (chatlens.worker: tokens, runs, read, prompt, in_flight, done)" },
  step: { args: "Step", answers: "a pull's answer" },
  stop: { args: "Empty", answers: "a pull's answer, done: the reply ends with stop_reason \"stopped\"" },
  count: { args: "Turn", answers: "{\"read\", \"of\", \"done\"}: start counting exactly what the system prompt and the new message need (characters read of all; done: null, or WindowError's data counted exactly: needed, window, reserve, pieces, at_least false, and its sentence as message); ends a count already running" },
  count_step: { args: "CountStep", answers: "{\"read\", \"of\", \"done\"}: the count goes on" },
  count_stop: { args: "Empty", answers: "{\"stopped\"}: the count running (if any) ends unanswered" },
  run: { args: "Turn", answers: "the TurnRecord with its reply, pulled to its end here (NumPy)" },
  predict: { args: "Turn", answers: "{\"top_k\", \"top_k_tokens\", \"top_k_bytes\", \"used\", \"reused_tokens\", \"backend\"}, pulled here (NumPy)" },
  complete: { args: "Text", answers: "chatlens.complete.continuation's data, pulled here (NumPy)" },
  tokenize: { args: "Tokenize", answers: "{\"prompt_ids\", \"prompt_tokens\", \"prompt_vocab\", \"prompt_bytes\", \"special_ids\"}" },
  render: { args: "Render", answers: "{\"text\", \"ids\", \"tokens\", \"vocab\", \"bytes\", \"special_ids\", \"assistant_mask\"?}" },
  chat_template: { args: "Empty", answers: "{\"source\", \"names\", \"special_tokens\"}: the model's chat template" },
  lab_source: { args: "Empty", answers: "{\"name\", \"source\"}: the lab's hand-written Python (chatlens/by_hand.py)" },
  run_python: { args: "RunPython", answers: "{\"stdout\", \"stderr\", \"error\", \"timed_out\", \"results\"} (chatlens.usercode)" },
};

/** start's kinds: the arguments each takes. */
export const KINDS = {"chat": "Turn", "text": "Text", "predict": "Turn"};

/** Each arguments type's fields, in order. */
export const FIELDS = {
  Load: ["path"],
  Turn: ["messages", "window", "reserve", "max_tokens", "preset", "custom", "system", "special_in_text", "top_k"],
  Empty: [],
  GpuProgram: ["n_ctx", "features", "limits"],
  UseGpu: ["name"],
  Start: ["kind", "args", "depth", "chunk"],
  Step: ["depth"],
  CountStep: ["ms"],
  Text: ["text", "max_tokens", "top_k"],
  Tokenize: ["text"],
  Render: ["messages", "template", "tools", "documents", "add_generation_prompt", "continue_final_message", "variables", "assistant_mask"],
  RunPython: ["code", "seconds", "results"],
};
