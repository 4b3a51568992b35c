// Generated from py/chatlens/protocol.py by `python -m chatlens protocol --write`: do not edit.
// The contract between the page, its worker (site/js/worker/worker.mjs) and Python
// (chatlens.worker): each request's arguments and answer, and the page<->worker messages.
// On the wire every name is snake_case, as Python writes it.

/**
 * Read a model source's text side: tokenizer, chat template, config.
 * @typedef {object} Load
 * @property {string} path the model's files in the worker's file system: a .gguf file or a Hugging Face folder
 */

/**
 * load's answer: the text side is ready.
 * @typedef {object} Loaded
 * @property {string} eos_token the end-of-turn token, as text
 * @property {number} n_ctx the model's whole context, in tokens
 * @property {number} vocab_size the vocabulary's size
 * @property {string} source the path that was read
 */

/**
 * Read the base model's text side beside the instruct model's: refused when its tokenizer differs.
 * @typedef {object} LoadBase
 * @property {string} path the base model's files in the worker's file system: a .gguf file or a Hugging Face folder
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
 * One turn.
 * @typedef {object} TurnRecord
 * @property {string} prompt_text as chatlens.record.TurnRecord documents it
 * @property {Array} prompt_ids as chatlens.record.TurnRecord documents it
 * @property {Array} prompt_tokens as chatlens.record.TurnRecord documents it
 * @property {Array} prompt_vocab as chatlens.record.TurnRecord documents it
 * @property {Array} prompt_bytes as chatlens.record.TurnRecord documents it
 * @property {Array} special_ids as chatlens.record.TurnRecord documents it
 * @property {boolean} special_in_text as chatlens.record.TurnRecord documents it
 * @property {Array} pieces as chatlens.record.TurnRecord documents it
 * @property {Array} dropped_messages as chatlens.record.TurnRecord documents it
 * @property {number} window as chatlens.record.TurnRecord documents it
 * @property {number|null} context as chatlens.record.TurnRecord documents it
 * @property {number} reserve as chatlens.record.TurnRecord documents it
 * @property {number} used as chatlens.record.TurnRecord documents it
 * @property {number} free as chatlens.record.TurnRecord documents it
 * @property {number} reused_tokens as chatlens.record.TurnRecord documents it
 * @property {number} computed_tokens as chatlens.record.TurnRecord documents it
 * @property {string|null} system as chatlens.record.TurnRecord documents it
 * @property {string|null} preset as chatlens.record.TurnRecord documents it
 * @property {number} max_tokens as chatlens.record.TurnRecord documents it
 * @property {string|null} [reply_text=null] as chatlens.record.TurnRecord documents it
 * @property {Array|null} [reply_ids=null] as chatlens.record.TurnRecord documents it
 * @property {Array|null} [reply_tokens=null] as chatlens.record.TurnRecord documents it
 * @property {Array|null} [reply_vocab=null] as chatlens.record.TurnRecord documents it
 * @property {Array|null} [reply_bytes=null] as chatlens.record.TurnRecord documents it
 * @property {string|null} [stop_reason=null] as chatlens.record.TurnRecord documents it
 * @property {object|null} [timings=null] as chatlens.record.TurnRecord documents it
 * @property {string|null} [backend=null] as chatlens.record.TurnRecord documents it
 * @property {Array|null} [top_k=null] as chatlens.record.TurnRecord documents it
 * @property {Array|null} [top_k_tokens=null] as chatlens.record.TurnRecord documents it
 * @property {Array|null} [top_k_bytes=null] as chatlens.record.TurnRecord documents it
 * @property {object|null} [branched=null] as chatlens.record.TurnRecord documents it
 */

/**
 * Compute one model's replies with NumPy.
 * @typedef {object} UseNumpy
 * @property {string} [model="instruct"] instruct or base
 */

/**
 * use_numpy's and use_gpu's answer: what computes replies now.
 * @typedef {object} BackendInfo
 * @property {string} backend "numpy", or "webgpu: <adapter>" (as a record's backend)
 * @property {number} n_ctx the most tokens its cache holds
 */

/**
 * Build the GPU program of the forward pass for one model's source and this adapter.
 * @typedef {object} GpuProgram
 * @property {number} n_ctx the context the program's KV cache holds
 * @property {Array} [features=[]] the adapter's features
 * @property {object} [limits={}] the adapter's limits, by WebGPU's names
 * @property {string} [model="instruct"] instruct or base
 */

/**
 * The GPU program: chatlens.gpu.program's plain data (a dict, the one answer that is not an instance of its class: the program is data the browser's executor reads as it is).
 * @typedef {object} GpuProgramAnswer
 */

/**
 * Compute replies with the program gpu_program built; the page's executor runs its steps.
 * @typedef {object} UseGpu
 * @property {string} [name="adapter"] the adapter's name, for the record's backend
 * @property {string} [model="instruct"] instruct or base: the model whose program gpu_program built last
 */

/**
 * Start the job the page pulls (`step` until its answer is done): a reply, a prediction or a count.
 * @typedef {object} Start
 * @property {string} kind chat (a Turn's reply), text (a Text's continuation), predict (a Turn's first token), count (a Turn's overflow, counted exactly), compare (a Compare's four replies), branch (a Branch: another choice at one step of a reply) or inspect (an Inspect: one step's attention and lens); chatlens.jobs.KINDS
 * @property {object} args the arguments of that kind: a Turn, a Text, a Compare, a Branch or an Inspect
 * @property {number} [depth=2] GPU steps to keep in flight
 * @property {number} [chunk=16] the most prompt ids one NumPy step reads, so the page's progress moves and a stop falls between chunks (0: the backend's own; a GPU step reads the program's chunk)
 */

/**
 * start's, step's and stop's answer: where the job is.
 * @typedef {object} PullAnswer
 * @property {Array} tokens Token objects (a compare job's: CellToken objects): the ids this step chose (a reply), in order; [] for a count
 * @property {Array} runs GpuRun objects to submit now, in order; the page gives each one's bytes to a step, oldest first (Python's Pull books the runs in flight)
 * @property {number} read the prompt read so far: tokens (a reply), characters (a count)
 * @property {number} of all of it, in the same unit
 * @property {number} in_flight runs submitted whose bytes are not given yet
 * @property {TurnRecord|null} [record=null] a chat job's start only: the TurnRecord the reply will fill, as a preview answers it, before any step; null otherwise
 * @property {*} [done=null] null, or the job's answer once it has ended: a TurnRecord (chat), a Continuation (text), a Prediction (predict), Counted (count), Compared (compare), Branched (branch), Inspected (inspect); Stopped (a count or an inspection stopped)
 * @property {ComparePrompt|null} [prompt=null] a compare job's start only: what both models read, before any step; null otherwise
 * @property {string} [model="instruct"] the model whose backend computes the runs (a compare job: the current reply's; its tokens also carry their model and layout)
 * @property {number|null} [cell=null] a compare job: the reply under way (0 to 3, in Compared's order); runs of an earlier one still in flight are not needed; null otherwise
 */

/**
 * The next step of the job being pulled; a GPU reply's, with the oldest run's bytes as an extra argument.
 * @typedef {object} Step
 * @property {number|null} [depth=null] GPU steps to keep in flight (default: as started)
 * @property {number} [ms=20] a count's step: how long it may count, in milliseconds, before it answers
 */

/**
 * No arguments.
 * @typedef {object} Empty
 */

/**
 * predict's answer (and a predict job's done): the reply's likely first tokens; the cache is left as it was.
 * @typedef {object} Prediction
 * @property {Array} top_k rows: the first step's K best [id, logit, probability], best first
 * @property {Array} top_k_tokens their tokens as text
 * @property {Array} top_k_bytes their bytes, as hex
 * @property {number} used the prompt's tokens
 * @property {number} reused_tokens of them, tokens the cache held already
 * @property {string} backend what computed it
 */

/**
 * Plain text to continue, with no template.
 * @typedef {object} Text
 * @property {string} text the text, tokenized as it is (special tokens written in it matched)
 * @property {number} [max_tokens=96] new tokens at most
 * @property {number} [top_k=0] candidates each new token records (0: none)
 */

/**
 * A plain-text continuation (complete, and a text job's done): the text's tokens (Tokenized's fields), what the model wrote after them (Reply's fields), and eos_id.
 * @typedef {object} Continuation
 * @property {Array} prompt_ids the token ids, in order
 * @property {Array} prompt_tokens each id's token as text
 * @property {Array} prompt_vocab each id's token as the vocabulary writes it
 * @property {Array} prompt_bytes each id's token's bytes, as hex
 * @property {Array} special_ids the distinct special ids among them, sorted
 * @property {Array} reply_ids the ids chosen, the end-of-turn id included when the model wrote it
 * @property {string} reply_text the reply as text, without the end-of-turn token
 * @property {Array} reply_tokens each reply id's token as text (its bytes decoded on their own)
 * @property {Array} reply_vocab each reply id's token as the vocabulary writes it
 * @property {Array} reply_bytes each reply id's token's bytes, as hex
 * @property {string} stop_reason "end_turn", "max_tokens" or "stopped"
 * @property {Array|null} top_k rows, one per reply id: the step's K best [id, logit, probability], best first (null unless asked)
 * @property {Array|null} top_k_tokens those candidates' tokens as text
 * @property {Array|null} top_k_bytes those candidates' bytes, as hex
 * @property {number} reused_tokens prompt tokens the cache held already
 * @property {number} computed_tokens prompt tokens read now, after the reused ones (fewer than the rest when stopped while the prompt was read)
 * @property {string|null} backend what computed the reply (null: nothing did, it never started)
 * @property {object|null} timings prefill_ms, decode_ms, prefill_tok_s, decode_tok_s (null: it never started)
 * @property {number} eos_id the end-of-turn id
 */

/**
 * The text's tokens, with no template.
 * @typedef {object} Tokenize
 * @property {string} text the text
 */

/**
 * tokenize's answer (and the prompt's half of a continuation): a text's tokens, no template.
 * @typedef {object} Tokenized
 * @property {Array} prompt_ids the token ids, in order
 * @property {Array} prompt_tokens each id's token as text
 * @property {Array} prompt_vocab each id's token as the vocabulary writes it
 * @property {Array} prompt_bytes each id's token's bytes, as hex
 * @property {Array} special_ids the distinct special ids among them, sorted
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
 * render's answer: a chat template rendered as transformers' apply_chat_template renders it.
 * @typedef {object} Rendered
 * @property {string} text the rendered text
 * @property {Array} ids its token ids
 * @property {Array} tokens each id's token as text
 * @property {Array} vocab each id's token as the vocabulary writes it
 * @property {Array} bytes each id's token's bytes, as hex
 * @property {Array} special_ids the distinct special ids among them, sorted
 * @property {Array|null} [assistant_mask=null] only when asked: 1 for each token inside {% generation %}, else 0
 */

/**
 * chat_template's answer: the model's chat template.
 * @typedef {object} TemplateInfo
 * @property {string} source its Jinja source
 * @property {Array|null} names its named templates, or null
 * @property {object} special_tokens the special tokens it reads (bos_token, eos_token, ...)
 */

/**
 * lab_source's answer: the lab's hand-written Python (chatlens/by_hand.py).
 * @typedef {object} LabSource
 * @property {string} name the file's name
 * @property {string} source its text
 */

/**
 * A learner's Python, run with count_tokens(text) among its globals.
 * @typedef {object} RunPython
 * @property {string} code the program
 * @property {number} [seconds=3.0] its time limit
 * @property {Array} [results=[]] names whose values to return
 */

/**
 * run_python's answer (chatlens.usercode.run_code).
 * @typedef {object} PythonRun
 * @property {string} stdout what it printed
 * @property {string} stderr what it wrote to stderr
 * @property {object|null} error {name, message, line?}, or null
 * @property {boolean} timed_out whether it ran past its limit
 * @property {number} seconds how long it ran
 * @property {object} results the names asked for that hold plain data
 */

/**
 * Boot the worker: Pyodide, chatlens, the text side of the model source.
 * @typedef {object} Init
 * @property {object} source the model source (site/js/page/source.mjs)
 * @property {object} build build.json
 * @property {string} backend auto, webgpu or numpy
 * @property {string|null} [lock=null] a Web Lock the worker holds while it lives (connection.mjs)
 * @property {boolean} [hide_jspi=false] tests: hide JSPI before Python starts, as a browser without it would
 * @property {boolean} [one_model_on_gpu=false] tests: the GPU has room for one model's weights only, as a small one may (the comparison then puts one model on it at a time)
 */

/**
 * init's answer.
 * @typedef {object} Booted
 * @property {object} source the model source
 * @property {object} info load's answer (Loaded)
 * @property {string} pyodide Pyodide's version
 * @property {object|null} stored the store's status of the source, or null
 * @property {string} snapshot "restored", "saved" or "none": how Python started
 * @property {object} device {backend, why, adapter}: what was chosen to compute replies
 */

/**
 * What computes replies (attach's answer, the model event): or {error, offer} when the weights failed.
 * @typedef {object} ModelInfo
 * @property {string} backend as BackendInfo's
 * @property {number} n_ctx the most tokens its cache holds
 * @property {string} kind "webgpu" or "numpy"
 * @property {string} why why that backend
 * @property {string} [model="instruct"] instruct or base: whose weights these are
 * @property {string|null} [note=null] a sentence when the two models cannot both be on the device (one at a time then)
 */

/**
 * Put the base model beside the instruct: its text side read (refused when its tokenizer differs) and its weights on the same device, from the store only once it holds the whole model.
 * @typedef {object} AttachBase
 * @property {object} source the base model's source, as the page resolves it (page/downloads.mjs baseSource())
 */

/**
 * The comparison: one message read as plain text and in the chat template, by the base and the instruct model.
 * @typedef {object} Compare
 * @property {string} text the message
 * @property {number} [max_tokens=48] new tokens at most, each reply
 * @property {number} [top_k=10] candidates the first step of each reply records (0: none)
 */

/**
 * A compare job's done (chatlens.compare.Plan.answer): the prompt, and the four replies, each a Reply (top_k: each step's candidates; a reply a stop kept from starting has no ids, stop_reason "stopped" and no backend).
 * @typedef {object} Compared
 * @property {ComparePrompt} prompt what both models read
 * @property {object} instruct {plain, template}: the instruct model's replies
 * @property {object} base {plain, template}: the base model's replies
 * @property {number} max_tokens the cap each reply had
 * @property {number} top_k K
 * @property {number} eos_id the instruct model's end of turn, where every reply stops
 */

/**
 * Another choice at one step of a turn's reply: the reply up to that step, then `id`, then greedy again; max_tokens caps the whole branch (the reply's ids it keeps included).
 * @typedef {object} Branch
 * @property {Array} messages [{role, content}, ...]: the history, then the new user message last
 * @property {number} [window=1024] the context window, in tokens
 * @property {number} [reserve=96] tokens kept free in the window for the reply
 * @property {number|null} [max_tokens=null] the reply limit (default: the reserve)
 * @property {string|null} [preset=null] a system prompt preset (chatlens.presets), or none
 * @property {string|null} [custom=null] the custom preset's text
 * @property {string|null} [system=null] the system prompt as text (null: the template's default)
 * @property {boolean} [special_in_text=true] special tokens written in a message are read as tokens (false: as characters)
 * @property {number|null} [top_k=null] candidates a reply token records (chat: default 0, none; predict: default the site's)
 * @property {Array|null} [reply_ids=null] the reply to branch, as the turn's record has it (null, on the command line only: the turn's reply is computed first)
 * @property {number} step the step whose choice is replaced: the branch keeps reply_ids[:step], then takes id
 * @property {number} id the token id taken at that step
 */

/**
 * A branch's answer (a branch job's done, and `python -m chatlens branch`'s output): the reply it branched from, where, and what the model wrote after the choice made by hand.
 * @typedef {object} Branched
 * @property {Array} prompt_ids the prompt's ids, as the turn's record has them
 * @property {Array} reply_ids the reply it branched from
 * @property {number} step the step whose choice was replaced
 * @property {number} id the id taken there
 * @property {Array} branch_ids reply_ids[:step], then id, then the ids the model chose after it (the end-of-turn id included when written)
 * @property {string} branch_text the branch as text, without the end-of-turn token
 * @property {Array} branch_tokens each branch id's token as text (as the record's reply_tokens)
 * @property {Array} branch_bytes each branch id's token's bytes, as hex
 * @property {string} stop_reason "end_turn", "max_tokens" or "stopped"
 * @property {Array|null} top_k rows for the ids the branch chose itself (branch_ids[step + 1:]): each step's K best [id, logit, probability] (null unless asked); the steps before are the reply's own
 * @property {Array|null} top_k_tokens those candidates' tokens as text
 * @property {Array|null} top_k_bytes those candidates' bytes, as hex
 * @property {number} reused_tokens tokens the cache held already: the prompt and reply_ids[:step] when the reply is the cache's
 * @property {number} computed_tokens tokens read before the branch's first own choice (1, the id taken, when the reply was the cache's)
 * @property {string|null} backend what computed it (null: nothing needed computing, the id ended the branch)
 * @property {object|null} timings as a Reply's
 */

/**
 * One step of a turn's reply inspected (chatlens.inspection): where its query token looked, and how the choice formed through the layers. top_k: the lens's candidates a layer.
 * @typedef {object} Inspect
 * @property {Array} messages [{role, content}, ...]: the history, then the new user message last
 * @property {number} [window=1024] the context window, in tokens
 * @property {number} [reserve=96] tokens kept free in the window for the reply
 * @property {number|null} [max_tokens=null] the reply limit (default: the reserve)
 * @property {string|null} [preset=null] a system prompt preset (chatlens.presets), or none
 * @property {string|null} [custom=null] the custom preset's text
 * @property {string|null} [system=null] the system prompt as text (null: the template's default)
 * @property {boolean} [special_in_text=true] special tokens written in a message are read as tokens (false: as characters)
 * @property {number|null} [top_k=null] candidates a reply token records (chat: default 0, none; predict: default the site's)
 * @property {Array|null} [reply_ids=null] the reply so far, as the turn's record has it ([]: the draft's first token; null, on the command line only: the turn's reply is computed first)
 * @property {number} [step=0] the step that chose reply id `step` (its query: the token before it); len(reply_ids) for the step after the reply so far
 */

/**
 * An inspection's answer (an inspect job's done, and `python -m chatlens inspect`'s output): chatlens.inspection.Inspection's figures for the step, placed on the turn's prompt. Layers and heads are counted from 0.
 * @typedef {object} Inspected
 * @property {Array} prompt_ids the prompt's ids, as the turn's record has them
 * @property {Array} reply_ids the reply so far
 * @property {number} step the step inspected: the one that chose reply id `step`
 * @property {number} position where its query sits: len(prompt_ids) + step - 1
 * @property {number} query_id the token at that position, whose step this is
 * @property {number} chosen_id the id the last layer makes most likely: the one greedy decoding writes there
 * @property {Array} attention attention[layer][head]: the query's weights over positions 0..position, each row summing to 1
 * @property {Array} by_piece [{kind, label, start, end, share}]: the mean weight (all layers and heads) on each piece of the prompt, then on the reply so far (kind "reply")
 * @property {Array} lens lens[layer]: the residual stream after that block through the final norm and the output layer, its top K [id, probability], best first; the last layer's is the step's own
 * @property {number} reused_tokens tokens the cache held already before the position
 * @property {number} computed_tokens tokens read now: those the cache lacked before the position, and the query
 * @property {string} backend what computed it
 * @property {string|null} [note=null] a sentence when the inspection read more than one token (the cache lacked part of what comes before the step), null otherwise
 */

/**
 * debug's answer (scripts/bench_browser.py).
 * @typedef {object} DebugInfo
 * @property {number|null} wasm_heap Python's wasm memory, in bytes
 * @property {object|null} last_reply where the last job's time went in the worker: python_ms, submit_ms, wait_ms, pulls (calls into Python), most_in_flight
 */

/**
 * A count job's done: WindowError's data for the system prompt and the new message, counted exactly.
 * @typedef {object} Counted
 * @property {number} needed tokens they need
 * @property {number} window the window
 * @property {number} reserve tokens kept free for the reply
 * @property {boolean} at_least false: exact (a preview's bound says true)
 * @property {Array} pieces [{label, count, ...}]: what needs the tokens
 * @property {string} message the sentence a WindowError would say
 * @property {number} context the model's whole context
 */

/**
 * A reply, as every answer that carries one carries it: built once (chatlens.reply.reply_of) for the turn record (chatlens.record.TurnRecord has these fields), a plain-text continuation and each of the comparison's four.
 * @typedef {object} Reply
 * @property {Array} reply_ids the ids chosen, the end-of-turn id included when the model wrote it
 * @property {string} reply_text the reply as text, without the end-of-turn token
 * @property {Array} reply_tokens each reply id's token as text (its bytes decoded on their own)
 * @property {Array} reply_vocab each reply id's token as the vocabulary writes it
 * @property {Array} reply_bytes each reply id's token's bytes, as hex
 * @property {string} stop_reason "end_turn", "max_tokens" or "stopped"
 * @property {Array|null} top_k rows, one per reply id: the step's K best [id, logit, probability], best first (null unless asked)
 * @property {Array|null} top_k_tokens those candidates' tokens as text
 * @property {Array|null} top_k_bytes those candidates' bytes, as hex
 * @property {number} reused_tokens prompt tokens the cache held already
 * @property {number} computed_tokens prompt tokens read now, after the reused ones (fewer than the rest when stopped while the prompt was read)
 * @property {string|null} backend what computed the reply (null: nothing did, it never started)
 * @property {object|null} timings prefill_ms, decode_ms, prefill_tok_s, decode_tok_s (null: it never started)
 */

/**
 * What both models of a comparison read (chatlens.compare.prompts).
 * @typedef {object} ComparePrompt
 * @property {string} text the message
 * @property {Array} plain_ids the message's ids as plain text, nothing added
 * @property {Array} plain_tokens their tokens as text
 * @property {string} template_text the message inside the instruct model's chat template, as text
 * @property {Array} template_ids its ids
 * @property {Array} template_tokens their tokens as text
 * @property {Array} special_ids the distinct special ids in either, sorted
 */

/**
 * A reply id as a step chose it (a PullAnswer's tokens, the page's token event).
 * @typedef {object} Token
 * @property {number} id the token id (-1: no id, only text ending a character the last ids left split)
 * @property {string} text what it adds to the reply, decoded incrementally so no character is ever split
 * @property {string} token the id's token as text, as the record's reply_tokens writes it
 * @property {string} bytes its bytes, as hex, as reply_bytes writes them
 */

/**
 * A compare job's token: a Token's fields, and the reply it belongs to.
 * @typedef {object} CellToken
 * @property {number} id the token id (-1: no id, only text ending a character the last ids left split)
 * @property {string} text what it adds to the reply, decoded incrementally so no character is ever split
 * @property {string} token the id's token as text, as the record's reply_tokens writes it
 * @property {string} bytes its bytes, as hex, as reply_bytes writes them
 * @property {string} model instruct or base
 * @property {string} layout plain or template
 */

/**
 * A GPU run the page submits (chatlens.gpu.backend.Run's to_json).
 * @typedef {object} GpuRun
 * @property {Array} sequences the program's sequences to dispatch, in order
 * @property {Array} params the step buffer's u32 words
 * @property {string|null} readback what the run reads back, or null
 * @property {number} tokens the number of ids it feeds
 * @property {boolean} chooses whether it ends with an id chosen
 */

/**
 * A job's done when it was stopped before it had an answer of its own (a count).
 * @typedef {object} Stopped
 * @property {boolean} [stopped=true] true
 */

/**
 * Stop the job of request `id`: a reply ends at its next pull (stop_reason "stopped"); a count rejects with an AbortError.
 * @typedef {object} StopSignal
 * @property {number} id the request's id
 */

/**
 * The worker's state.
 * @typedef {object} StatusEvent
 * @property {string} state booting | loading | text (previews work; replies need the weights) | weights | ready | error
 * @property {string} detail a sentence
 */

/**
 * What computes replies now (a ModelInfo), or {error, offer} (offer: "webgpu" when a software GPU passed over could).
 * @typedef {object} ModelEvent
 * @property {object} model ModelInfo, or {error, offer}
 */

/**
 * A chat request's turn record, before any of its tokens (PullAnswer's record).
 * @typedef {object} RecordEvent
 * @property {number} id the request's id
 * @property {object} record the TurnRecord the reply will fill
 */

/**
 * A compare request's prompt (PullAnswer's prompt), before any of its tokens.
 * @typedef {object} PromptEvent
 * @property {number} id the request's id
 * @property {object} prompt what both models read (Compared's prompt)
 */

/**
 * A reply id, as it is chosen.
 * @typedef {object} TokenEvent
 * @property {number} id the request's id (the token's own id is token.id)
 * @property {object} token a Token (a compare request's: a CellToken)
 */

/**
 * The prompt of request `id` read so far.
 * @typedef {object} ProgressEvent
 * @property {number} id the request's id
 * @property {number} read tokens read (a count: characters)
 * @property {number} of of all
 * @property {number} ms since the job started
 * @property {number} [parts=0] on the GPU: parts of the step reading the next chunk done so far (gpu/executor.mjs)
 */

/**
 * The answer to request `id`: {id, ok: true, result} or {id, ok: false, error, name, data}.
 * @typedef {object} Answer
 * @property {number} id the request's id
 * @property {boolean} ok whether it succeeded
 * @property {*} [result=null] the request's answer (ok)
 * @property {string|null} [error=null] the error's message (not ok)
 * @property {string|null} [name=null] the error's name: the Python exception's type (WindowError, ...)
 * @property {*} [data=null] the error's numbers where it has them (WindowError's needed, window, reserve, pieces)
 */

/** Python's requests (chatlens.worker): the arguments and the answer, typedefs above. */
export const REQUESTS = {
  load: { args: "Load", answers: "Loaded" },
  load_base: { args: "LoadBase", answers: "Loaded" },
  preview: { args: "Turn", answers: "TurnRecord" },
  use_numpy: { args: "UseNumpy", answers: "BackendInfo" },
  gpu_program: { args: "GpuProgram", answers: "GpuProgramAnswer" },
  use_gpu: { args: "UseGpu", answers: "BackendInfo" },
  start: { args: "Start", answers: "PullAnswer" },
  step: { args: "Step", answers: "PullAnswer" },
  stop: { args: "Empty", answers: "PullAnswer" },
  run: { args: "Turn", answers: "TurnRecord" },
  predict: { args: "Turn", answers: "Prediction" },
  complete: { args: "Text", answers: "Continuation" },
  tokenize: { args: "Tokenize", answers: "Tokenized" },
  render: { args: "Render", answers: "Rendered" },
  chat_template: { args: "Empty", answers: "TemplateInfo" },
  lab_source: { args: "Empty", answers: "LabSource" },
  run_python: { args: "RunPython", answers: "PythonRun" },
};

/** The page<->worker messages, by type: requests (page -> worker: [args, answer]), signals
 * (page -> worker, never answered), events (worker -> page) and the answer envelope. */
export const MESSAGES = {
  requests: {
    init: { args: "Init", answers: "Booted" },
    attach: { args: "Empty", answers: "ModelInfo" },
    attach_base: { args: "AttachBase", answers: "ModelInfo" },
    compare: { args: "Compare", answers: "Compared" },
    branch: { args: "Branch", answers: "Branched" },
    inspect: { args: "Inspect", answers: "Inspected" },
    debug: { args: "Empty", answers: "DebugInfo" },
    preview: { args: "Turn", answers: "TurnRecord" },
    run: { args: "Turn", answers: "TurnRecord" },
    predict: { args: "Turn", answers: "Prediction" },
    complete: { args: "Text", answers: "Continuation" },
    count: { args: "Turn", answers: "Counted" },
    render: { args: "Render", answers: "Rendered" },
    tokenize: { args: "Tokenize", answers: "Tokenized" },
    chat_template: { args: "Empty", answers: "TemplateInfo" },
    lab_source: { args: "Empty", answers: "LabSource" },
    run_python: { args: "RunPython", answers: "PythonRun" },
  },
  signals: {"stop": "StopSignal", "lose_gpu": "Empty"},
  events: {"status": "StatusEvent", "model": "ModelEvent", "record": "RecordEvent", "prompt": "PromptEvent", "token": "TokenEvent", "progress": "ProgressEvent"},
  answer: "Answer",
};

/** Each type's fields, in order. */
export const FIELDS = {
  Load: ["path"],
  Loaded: ["eos_token", "n_ctx", "vocab_size", "source"],
  LoadBase: ["path"],
  Turn: ["messages", "window", "reserve", "max_tokens", "preset", "custom", "system", "special_in_text", "top_k"],
  TurnRecord: ["prompt_text", "prompt_ids", "prompt_tokens", "prompt_vocab", "prompt_bytes", "special_ids", "special_in_text", "pieces", "dropped_messages", "window", "context", "reserve", "used", "free", "reused_tokens", "computed_tokens", "system", "preset", "max_tokens", "reply_text", "reply_ids", "reply_tokens", "reply_vocab", "reply_bytes", "stop_reason", "timings", "backend", "top_k", "top_k_tokens", "top_k_bytes", "branched"],
  UseNumpy: ["model"],
  BackendInfo: ["backend", "n_ctx"],
  GpuProgram: ["n_ctx", "features", "limits", "model"],
  GpuProgramAnswer: [],
  UseGpu: ["name", "model"],
  Start: ["kind", "args", "depth", "chunk"],
  PullAnswer: ["tokens", "runs", "read", "of", "in_flight", "record", "done", "prompt", "model", "cell"],
  Step: ["depth", "ms"],
  Empty: [],
  Prediction: ["top_k", "top_k_tokens", "top_k_bytes", "used", "reused_tokens", "backend"],
  Text: ["text", "max_tokens", "top_k"],
  Continuation: ["prompt_ids", "prompt_tokens", "prompt_vocab", "prompt_bytes", "special_ids", "reply_ids", "reply_text", "reply_tokens", "reply_vocab", "reply_bytes", "stop_reason", "top_k", "top_k_tokens", "top_k_bytes", "reused_tokens", "computed_tokens", "backend", "timings", "eos_id"],
  Tokenize: ["text"],
  Tokenized: ["prompt_ids", "prompt_tokens", "prompt_vocab", "prompt_bytes", "special_ids"],
  Render: ["messages", "template", "tools", "documents", "add_generation_prompt", "continue_final_message", "variables", "assistant_mask"],
  Rendered: ["text", "ids", "tokens", "vocab", "bytes", "special_ids", "assistant_mask"],
  TemplateInfo: ["source", "names", "special_tokens"],
  LabSource: ["name", "source"],
  RunPython: ["code", "seconds", "results"],
  PythonRun: ["stdout", "stderr", "error", "timed_out", "seconds", "results"],
  Init: ["source", "build", "backend", "lock", "hide_jspi", "one_model_on_gpu"],
  Booted: ["source", "info", "pyodide", "stored", "snapshot", "device"],
  ModelInfo: ["backend", "n_ctx", "kind", "why", "model", "note"],
  AttachBase: ["source"],
  Compare: ["text", "max_tokens", "top_k"],
  Compared: ["prompt", "instruct", "base", "max_tokens", "top_k", "eos_id"],
  Branch: ["messages", "window", "reserve", "max_tokens", "preset", "custom", "system", "special_in_text", "top_k", "reply_ids", "step", "id"],
  Branched: ["prompt_ids", "reply_ids", "step", "id", "branch_ids", "branch_text", "branch_tokens", "branch_bytes", "stop_reason", "top_k", "top_k_tokens", "top_k_bytes", "reused_tokens", "computed_tokens", "backend", "timings"],
  Inspect: ["messages", "window", "reserve", "max_tokens", "preset", "custom", "system", "special_in_text", "top_k", "reply_ids", "step"],
  Inspected: ["prompt_ids", "reply_ids", "step", "position", "query_id", "chosen_id", "attention", "by_piece", "lens", "reused_tokens", "computed_tokens", "backend", "note"],
  DebugInfo: ["wasm_heap", "last_reply"],
  Counted: ["needed", "window", "reserve", "at_least", "pieces", "message", "context"],
  Reply: ["reply_ids", "reply_text", "reply_tokens", "reply_vocab", "reply_bytes", "stop_reason", "top_k", "top_k_tokens", "top_k_bytes", "reused_tokens", "computed_tokens", "backend", "timings"],
  ComparePrompt: ["text", "plain_ids", "plain_tokens", "template_text", "template_ids", "template_tokens", "special_ids"],
  Token: ["id", "text", "token", "bytes"],
  CellToken: ["id", "text", "token", "bytes", "model", "layout"],
  GpuRun: ["sequences", "params", "readback", "tokens", "chooses"],
  Stopped: ["stopped"],
  StopSignal: ["id"],
  StatusEvent: ["state", "detail"],
  ModelEvent: ["model"],
  RecordEvent: ["id", "record"],
  PromptEvent: ["id", "prompt"],
  TokenEvent: ["id", "token"],
  ProgressEvent: ["id", "read", "of", "ms", "parts"],
  Answer: ["id", "ok", "result", "error", "name", "data"],
};
