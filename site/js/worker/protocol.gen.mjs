// Generated from py/chatlens/protocol.py by `python -m chatlens protocol --write`: do not edit.
// What the page reads of the contract between the page, its worker and Python: the requests,
// the messages, the jobs, and the fields of each type a page request takes. Every type is
// documented once, in py/chatlens/contract.py. On the wire every name is snake_case, as
// Python writes it.

/** Python's requests (chatlens.worker): each one's argument and answer types. */
export const REQUESTS = {
  load: { args: "Load", answers: "Loaded" },
  load_base: { args: "LoadBase", answers: "Loaded" },
  preview: { args: "Turn", answers: "TurnRecord" },
  use_numpy: { args: "UseNumpy", answers: "BackendInfo" },
  gpu_program: { args: "GpuProgram", answers: "GpuProgramAnswer" },
  use_gpu: { args: "UseGpu", answers: "BackendInfo" },
  check_program: { args: "CheckProgram", answers: "CheckProgramAnswer" },
  check_read: { args: "CheckRead", answers: "CheckResult" },
  check_weights: { args: "CheckWeights", answers: "CheckWeightsAnswer" },
  check_weights_read: { args: "CheckWeightsRead", answers: "Checked" },
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
    debug: { args: "Empty", answers: "DebugInfo" },
    check: { args: "Empty", answers: "CheckResult" },
    preview: { args: "Turn", answers: "TurnRecord" },
    render: { args: "Render", answers: "Rendered" },
    tokenize: { args: "Tokenize", answers: "Tokenized" },
    chat_template: { args: "Empty", answers: "TemplateInfo" },
    lab_source: { args: "Empty", answers: "LabSource" },
    run_python: { args: "RunPython", answers: "PythonRun" },
    run: { args: "Turn", answers: "TurnRecord" },
    complete: { args: "Text", answers: "Continuation" },
    predict: { args: "Turn", answers: "Prediction" },
    count: { args: "Turn", answers: "Counted" },
    compare: { args: "Compare", answers: "Compared" },
    branch: { args: "Branch", answers: "Branched" },
    inspect: { args: "Inspect", answers: "Inspected" },
    cause: { args: "Cause", answers: "Caused" },
    needs: { args: "Needs", answers: "Needed" },
  },
  signals: {"stop": "StopSignal", "lose_gpu": "Empty"},
  events: {"status": "StatusEvent", "model": "ModelEvent", "check": "CheckEvent", "record": "RecordEvent", "prompt": "PromptEvent", "token": "TokenEvent", "cell_end": "CellEndEvent", "progress": "ProgressEvent"},
  answer: "Answer",
};

/** The page's requests that are jobs (Python pulls them a step at a time), as each job's class
 * declares it (py/chatlens/jobs.py Job): kind, writes, background, window, both_models. */
export const JOBS = {
  run: {"kind": "run", "writes": true, "background": false, "window": true, "both_models": false},
  complete: {"kind": "complete", "writes": true, "background": false, "window": false, "both_models": false},
  predict: {"kind": "predict", "writes": false, "background": false, "window": false, "both_models": false},
  count: {"kind": "count", "writes": false, "background": true, "window": false, "both_models": false},
  compare: {"kind": "compare", "writes": true, "background": false, "window": false, "both_models": true},
  branch: {"kind": "branch", "writes": true, "background": false, "window": true, "both_models": false},
  inspect: {"kind": "inspect", "writes": false, "background": false, "window": true, "both_models": false},
  cause: {"kind": "cause", "writes": false, "background": false, "window": true, "both_models": false},
  needs: {"kind": "needs", "writes": false, "background": false, "window": true, "both_models": false},
};

/** The fields of each type a page request takes, in order. */
export const FIELDS = {
  Init: ["source", "build", "backend", "lock", "hide_jspi", "one_model_on_gpu", "kept", "check_override"],
  Empty: [],
  AttachBase: ["source"],
  Turn: ["messages", "window", "reserve", "max_tokens", "preset", "custom", "system", "special_in_text", "top_k"],
  Render: ["messages", "template", "tools", "documents", "add_generation_prompt", "continue_final_message", "variables", "assistant_mask"],
  Tokenize: ["text"],
  RunPython: ["code", "seconds", "results"],
  Text: ["text", "max_tokens", "top_k"],
  Compare: ["text", "max_tokens", "top_k"],
  Branch: ["messages", "window", "reserve", "max_tokens", "preset", "custom", "system", "special_in_text", "top_k", "reply_ids", "step", "id", "reply_top_k"],
  Inspect: ["messages", "window", "reserve", "max_tokens", "preset", "custom", "system", "special_in_text", "reply_ids", "step", "model", "layout", "top_k"],
  Cause: ["messages", "window", "reserve", "max_tokens", "preset", "custom", "system", "special_in_text", "reply_ids", "step", "model", "layout", "pieces", "tokens"],
  Needs: ["messages", "window", "reserve", "max_tokens", "preset", "custom", "system", "special_in_text", "replies", "knocked", "pieces", "tokens"],
};
