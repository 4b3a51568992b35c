// The template workbench: any chat template (the model's own, an example, or one pasted in),
// messages edited as rows or as JSON, add_generation_prompt, continue_final_message, tools,
// documents and extra variables, rendered by the worker's `render` request with transformers'
// apply_chat_template semantics (py/chatlens/template.py). Every edit renders again, after a
// short pause; only the newest answer is drawn. What it keeps is the store's `workbench`: the
// model's template ({source, names, special_tokens}), how the messages are edited ("rows" |
// "json") and the newest render's number.

import { $, debounce, el, fill } from "../views/dom.mjs";
import { renderWorkbench } from "../views/workbench.mjs";

const ROLES = ["system", "user", "assistant", "tool"];
const START = [
  { role: "user", content: "What is the capital of France?" },
  { role: "assistant", content: "The capital of France is Paris." },
  { role: "user", content: "And of Germany?" },
];
const TOOLS = [{ type: "function", function: { name: "get_weather", description: "The weather in a city",
  parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] } } }];
const DOCUMENTS = [{ title: "Berlin", text: "Berlin is the capital of Germany." }];

// Small templates to start from, each showing one feature of apply_chat_template.
const CHATML = "{% for message in messages %}<|im_start|>{{ message.role }}\n{{ message.content }}<|im_end|>\n{% endfor %}" +
  "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}";
const EXAMPLES = {
  generation: {
    label: "ChatML with {% generation %} around the replies (the assistant mask)",
    template: "{% for message in messages %}{% if message.role == 'assistant' %}<|im_start|>assistant\n" +
      "{% generation %}{{ message.content }}<|im_end|>{% endgeneration %}\n{% else %}<|im_start|>{{ message.role }}\n" +
      "{{ message.content }}<|im_end|>\n{% endif %}{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}",
  },
  tools: {
    label: "ChatML that lists the tools (JSON schemas) in a system message",
    template: "{% if tools %}<|im_start|>system\nYou may call these functions:\n{% for tool in tools %}{{ tool | tojson }}\n" +
      "{% endfor %}<|im_end|>\n{% endif %}" + CHATML,
  },
  documents: {
    label: "ChatML that puts the documents before the conversation (retrieval)",
    template: "{% if documents %}<|im_start|>system\nAnswer from these documents:\n{% for d in documents %}" +
      "[{{ loop.index }}] {{ d.title }}: {{ d.text }}\n{% endfor %}<|im_end|>\n{% endif %}" + CHATML,
  },
  strict: {
    label: "ChatML that refuses a conversation not starting with a user (raise_exception)",
    template: "{% if messages[0].role != 'user' %}{{ raise_exception('The first message must be the user\\'s.') }}{% endif %}" + CHATML,
  },
};

/** The messages as the rows hold them. */
function rowMessages() {
  return [...$("wb-rows").querySelectorAll(".wb-row")].map((r) => ({
    role: r.querySelector("select").value,
    content: r.querySelector("textarea").value,
  }));
}

function drawRows(messages, changed) {
  fill($("wb-rows"), ...messages.map((m, i) => {
    const roles = ROLES.includes(m.role) ? ROLES : [...ROLES, m.role];
    return el(
      "div",
      { class: "wb-row" },
      el("select", { "aria-label": `message ${i + 1}: role`, onchange: changed },
        roles.map((r) => el("option", { value: r, text: r, selected: r === m.role }))),
      el("textarea", { rows: 2, dir: "auto", "aria-label": `message ${i + 1}: content`, oninput: changed, text: m.content }),
      el("button", { type: "button", class: "wb-remove", "aria-label": `remove message ${i + 1}`, text: "×",
                     onclick: () => { drawRows(rowMessages().filter((_, k) => k !== i), changed); changed(); } }),
    );
  }));
}

/** Whether rows can show these messages: each only a role and text content. */
const rowsCanShow = (messages) =>
  Array.isArray(messages) && messages.every((m) => m && typeof m === "object" && typeof m.role === "string" &&
    typeof m.content === "string" && Object.keys(m).every((k) => k === "role" || k === "content"));

function setMode({ state, store }, next, changed) {
  if (next === state.workbench.editing) return;
  if (next === "json") {
    $("wb-json").value = JSON.stringify(rowMessages(), null, 2);
  } else {
    let messages;
    try {
      messages = JSON.parse($("wb-json").value);
    } catch (e) {
      return note(`The JSON cannot be read (${e.message}): fix it to edit the messages as rows.`);
    }
    if (!rowsCanShow(messages)) return note("These messages have more than a role and text (tool calls, content parts…): edit them as JSON.");
    drawRows(messages, changed);
  }
  note("");
  store.workbenchEditing(next);
  $("wb-mode-rows").setAttribute("aria-pressed", String(next === "rows"));
  $("wb-mode-json").setAttribute("aria-pressed", String(next === "json"));
  $("wb-rows-box").hidden = next !== "rows";
  $("wb-json").hidden = next !== "json";
}

const note = (text) => {
  $("wb-note").textContent = text;
  $("wb-note").hidden = !text;
};

/** A JSON field: undefined when empty, else its value (or a thrown Error that names it). */
function jsonField(id, what) {
  const text = $(id).value.trim();
  if (!text) return undefined;
  try {
    return JSON.parse(text);
  } catch (e) {
    const err = new Error(`${what} is not valid JSON: ${e.message}`);
    err.name = "JSON";
    throw err;
  }
}

/** The render request the inputs make. */
function request({ template: model, editing }) {
  const messages = editing === "rows" ? rowMessages() : jsonField("wb-json", "the messages");
  const args = {
    messages,
    add_generation_prompt: $("wb-gen").checked,
    continue_final_message: $("wb-continue").checked,
    assistant_mask: $("wb-mask").checked,
  };
  const template = $("wb-template").value;
  if (!model || template !== model.source) args.template = template;
  for (const [key, id, what] of [["tools", "wb-tools", "tools"], ["documents", "wb-documents", "documents"],
                                 ["variables", "wb-variables", "the variables"]]) {
    const value = jsonField(id, what);
    if (value !== undefined) args[key] = value;
  }
  return args;
}

async function renderNow({ api, state, store }) {
  const mine = store.workbenchAsked();
  const newest = () => mine === state.workbench.seq;
  const template = $("wb-template").value;
  let args;
  try {
    args = request(state.workbench);
  } catch (e) {
    return renderWorkbench($("wb-output"), { error: { name: "Input", message: e.message } });
  }
  $("wb-output").setAttribute("aria-busy", "true");
  try {
    const out = await api.render(args);
    if (!newest()) return;
    renderWorkbench($("wb-output"), { out, masked: args.assistant_mask, hasGeneration: /\{%-?\s*generation\s*-?%\}/.test(template) });
  } catch (e) {
    if (!newest()) return;
    renderWorkbench($("wb-output"), { error: { name: e.name, message: e.message }, template });
  } finally {
    if (newest()) $("wb-output").removeAttribute("aria-busy");
  }
}

function useExample({ state }, changed) {
  const key = $("wb-example").value;
  $("wb-template").value = key === "model" ? state.workbench.template?.source ?? "" : EXAMPLES[key].template;
  if (key === "tools" && !$("wb-tools").value.trim()) $("wb-tools").value = JSON.stringify(TOOLS, null, 2);
  if (key === "documents" && !$("wb-documents").value.trim()) $("wb-documents").value = JSON.stringify(DOCUMENTS, null, 2);
  if (key === "generation") $("wb-mask").checked = true;
  changed();
}

/** Wire the workbench; it asks for the model's template the first time it is opened. */
export function setUpWorkbench(page) {
  const { api, store } = page;
  const changed = debounce(() => renderNow(page), 250);
  fill($("wb-example"), 
    el("option", { value: "model", text: "The model's own template" }),
    ...Object.entries(EXAMPLES).map(([value, ex]) => el("option", { value, text: ex.label })),
  );
  drawRows(START, changed);
  $("wb-mode-rows").addEventListener("click", () => setMode(page, "rows", changed));
  $("wb-mode-json").addEventListener("click", () => setMode(page, "json", changed));
  $("wb-add").addEventListener("click", () => {
    const rows = rowMessages();
    drawRows([...rows, { role: rows.at(-1)?.role === "user" ? "assistant" : "user", content: "" }], changed);
    $("wb-rows").querySelector(".wb-row:last-child textarea").focus();
    changed();
  });
  $("wb-example").addEventListener("change", () => useExample(page, changed));
  for (const id of ["wb-template", "wb-json", "wb-tools", "wb-documents", "wb-variables"]) $(id).addEventListener("input", changed);
  for (const id of ["wb-gen", "wb-continue", "wb-mask"]) $(id).addEventListener("change", changed);
  let opened = false;
  $("workbench").addEventListener("toggle", async () => {
    if (opened || !$("workbench").open) return;
    opened = true;
    renderWorkbench($("wb-output"), { error: { name: "Waiting", message: "Python is starting: the render follows." } });
    try {
      store.workbenchTemplate(await api.chatTemplate());
      if (!$("wb-template").value) $("wb-template").value = page.state.workbench.template.source;
    } catch (e) {
      return renderWorkbench($("wb-output"), { error: { name: e.name, message: e.message } });
    }
    renderNow(page);
  });
}
