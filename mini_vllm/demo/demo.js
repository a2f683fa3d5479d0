// The demo page: one scripted reply, read two ways.
//  - left ("naive"): each token's raw bytes, decoded alone by a fresh TextDecoder;
//  - right ("course"): the real /v1/chat/completions stream, decoded by one streaming TextDecoder.
// Plain JavaScript, no build step, nothing loaded from outside this server.
"use strict";

const $ = (id) => document.getElementById(id);
const REPLACEMENT = /\uFFFD/g;
const MAX_TOKENS = 2048; // every script fits; the naive pane always shows the whole reply
let config = null;
let running = null; // the AbortController of the run in progress

const countReplacements = (text) => (text.match(REPLACEMENT) || []).length;

// Server-sent events from a fetch response: yields each event's data field as a string.
// The body arrives in arbitrary pieces, so the decoder must be a streaming one: a character
// split between two reads is kept until its last byte comes (this is the whole lesson, in a browser).
async function* sseData(response) {
  const reader = response.body.getReader();
  const decoder = new TextDecoder("utf-8");
  let pending = "";
  for (;;) {
    const { value, done } = await reader.read();
    pending += done ? decoder.decode() : decoder.decode(value, { stream: true });
    let end;
    while ((end = pending.indexOf("\n\n")) >= 0) {
      const event = pending.slice(0, end);
      pending = pending.slice(end + 2);
      const data = event.split("\n").filter((line) => line.startsWith("data:"))
        .map((line) => line.slice(5).replace(/^ /, "")).join("\n");
      if (data) yield data;
    }
    if (done) return;
  }
}

// An HTTP error from this server has OpenAI's body: {"error": {"message", "type", ...}}.
async function errorMessage(response) {
  try {
    const body = await response.json();
    if (body && body.error) return body.error;
  } catch (_) { /* not JSON: fall through */ }
  return { message: `HTTP ${response.status} ${response.statusText}`, type: "http_error" };
}

function describeError(error) {
  if (error.type === "not_implemented" || /NotImplementedError/.test(error.message || "")) {
    return "The course pipeline is not built yet.\n" + error.message +
      "\nImplement that task, check it with `make lab-02`, then restart `LAB_IMPL=starter make demo`.";
  }
  return error.message;
}

function setState(pane, state, status) {
  $(pane).dataset.state = state;
  if (status !== undefined) $(`${pane}-status`).textContent = status;
}

// ---- left pane: decode each token alone -------------------------------------------------------

function hexToBytes(hex) {
  const bytes = new Uint8Array(hex.length / 2);
  for (let i = 0; i < bytes.length; i++) bytes[i] = parseInt(hex.slice(2 * i, 2 * i + 2), 16);
  return bytes;
}

async function runNaive(params, signal) {
  const text = $("naive-text");
  const strip = $("naive-tokens");
  let tokens = 0;
  setState("naive", "streaming", "streaming…");
  const query = new URLSearchParams({ tokenizer: params.tokenizer, script: params.script, delay_ms: params.delay,
    schema: params.schema ? params.schema.key : "none" });
  const response = await fetch(`/demo/token-bytes?${query}`, { signal });
  if (!response.ok) {
    setState("naive", "error", describeError(await errorMessage(response)));
    return;
  }
  for await (const data of sseData(response)) {
    if (data === "[DONE]") break;
    const token = JSON.parse(data);
    tokens += 1;
    const chip = document.createElement("span");
    chip.textContent = token.special ? `#${token.id}` : token.hex.match(/../g).join(" ");
    if (token.special) {
      chip.className = "special"; // EOS: a client skips special tokens, so nothing to show
    } else {
      // A fresh decoder for every token, never told more bytes are coming: an unfinished
      // character becomes U+FFFD here, in the browser, exactly as the WHATWG decoder rules say.
      const shown = new TextDecoder("utf-8").decode(hexToBytes(token.hex));
      text.append(shown);
      if (shown.includes("\uFFFD")) chip.className = "broken";
    }
    strip.append(chip);
    $("naive-token-count").textContent = tokens;
    $("naive-fffd-count").textContent = countReplacements(text.textContent);
  }
  const how = params.schema ? "sampled with no mask, each decoded alone" : "each decoded alone";
  setState("naive", "done", `done: ${tokens} tokens, ${how}`);
}

// ---- right pane: the course pipeline over the real OpenAI endpoint ----------------------------

// The reply is shown in the order the model wrote it: runs of text, and each tool call's box where
// the call was. The prose around a call keeps its own spaces ("cities. " and " And then:"); put
// side by side without the box between them, they would read as a double space that was never written.
function appendText(text) {
  const flow = $("course-text");
  let run = flow.lastElementChild;
  if (!run || !run.classList.contains("text")) {
    run = document.createElement("span");
    run.className = "text";
    flow.append(run);
  }
  run.append(text);
}

function toolCallBox(index) {
  let box = document.querySelector(`#course-text .tool-call[data-index="${index}"]`);
  if (!box) {
    box = document.createElement("div");
    box.className = "tool-call";
    box.dataset.index = index;
    const name = document.createElement("div");
    name.className = "tool-name";
    const args = document.createElement("pre");
    args.className = "tool-args"; // the raw JSON as it streams
    const view = document.createElement("dl");
    view.className = "tool-view"; // the parsed arguments, once the call is complete
    view.hidden = true;
    box.append(name, args, view);
    $("course-text").append(box);
  }
  return box;
}

function showDelta(delta) {
  const reasoning = delta.reasoning ?? delta.reasoning_content;
  if (reasoning) {
    $("course-reasoning").hidden = false;
    $("course-reasoning").append(reasoning);
  }
  if (delta.content) appendText(delta.content);
  for (const call of delta.tool_calls || []) {
    const box = toolCallBox(call.index ?? 0);
    const fn = call.function || {};
    // OpenAI's shape: the first entry of an index names the function, later ones only add arguments.
    if (fn.name && !box.dataset.name) {
      box.dataset.name = fn.name;
      box.querySelector(".tool-name").textContent = fn.name;
    }
    if (fn.arguments) box.querySelector(".tool-args").append(fn.arguments);
  }
}

// Each argument on its own line, a string as the text it stands for: the JSON escape "\n" in a
// file's content becomes a real line break, and the raw JSON is hidden.
function showArguments(box, parsed) {
  const view = box.querySelector(".tool-view");
  const entries = parsed && typeof parsed === "object" && !Array.isArray(parsed) ? Object.entries(parsed) : [];
  for (const [key, value] of entries) {
    const term = document.createElement("dt");
    term.textContent = key;
    const shown = document.createElement("dd");
    shown.textContent = typeof value === "string" ? value : JSON.stringify(value, null, 2);
    view.append(term, shown);
  }
  if (entries.length) {
    view.hidden = false;
    box.querySelector(".tool-args").hidden = true;
  }
}

// A call is complete when the next one starts, or when the stream ends normally. Arguments that
// happen to parse are no proof: a call cut off by an error can end on a well-formed "{...}".
function checkToolArguments(streamFailed) {
  const boxes = [...document.querySelectorAll("#course-text .tool-call")];
  boxes.forEach((box, i) => {
    if (streamFailed && i === boxes.length - 1) {
      box.dataset.json = "incomplete";
      return;
    }
    try {
      showArguments(box, JSON.parse(box.querySelector(".tool-args").textContent));
      box.dataset.json = "valid";
    } catch (_) {
      box.dataset.json = "invalid";
    }
  });
}

async function runCourse(params, signal) {
  let chunks = 0;
  let finish = null;
  setState("course", "streaming", "streaming…");
  const body = {
    model: config.model,
    messages: [{ role: "user", content: params.message }],
    stream: true,
    stream_options: { include_usage: true },
    max_tokens: MAX_TOKENS,
    ...params.request,
  };
  // The tokenizer is chosen by the base URL: /demo/tokenizers/<name>/v1 is a whole OpenAI server.
  const url = `/demo/tokenizers/${encodeURIComponent(params.tokenizer)}/v1/chat/completions?delay_ms=${params.delay}`;
  const response = await fetch(url, {
    method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body), signal,
  });
  if (!response.ok) {
    setState("course", "error", describeError(await errorMessage(response)));
    return;
  }
  for await (const data of sseData(response)) {
    if (data === "[DONE]") break;
    const chunk = JSON.parse(data);
    if (chunk.error) { // a stub or a malformed call mid-stream: the server reports it in-band
      checkToolArguments(true);
      setState("course", "error", describeError(chunk.error));
      return;
    }
    chunks += 1;
    $("course-chunk-count").textContent = chunks;
    if (chunk.usage) $("course-token-count").textContent = chunk.usage.completion_tokens;
    for (const choice of chunk.choices || []) {
      showDelta(choice.delta || {});
      finish = choice.finish_reason || finish;
    }
    $("course-fffd-count").textContent = countReplacements($("course-output").textContent);
  }
  checkToolArguments(false);
  setState("course", "done", `done: finish_reason=${finish}, ${chunks} chunks`);
}

// ---- under both panes: the raw event stream of the chosen API ---------------------------------

const API_PATHS = { chat: "/v1/chat/completions", responses: "/v1/responses", messages: "/v1/messages" };

// The same reply asked for in each API's own request shape; a script's tools and stop strings
// are written the way that API spells them.
function eventsRequest(api, params) {
  const extra = params.request || {};
  const tools = extra.tools || [];
  if (api === "responses") {
    const format = params.schema ? { text: { format: { type: "json_schema", name: params.schema.key, strict: true,
      schema: params.schema.schema } } } : {};
    return {
      model: config.model, input: params.message, stream: true, max_output_tokens: MAX_TOKENS,
      tools: tools.map((t) => ({ type: "function", name: t.function.name, parameters: t.function.parameters })),
      ...format,
    };
  }
  if (api === "messages") { // Anthropic has no response_format: this request is not constrained
    return {
      model: config.model, max_tokens: MAX_TOKENS, stream: true,
      messages: [{ role: "user", content: params.message }],
      tools: tools.map((t) => ({ name: t.function.name, input_schema: t.function.parameters })),
      stop_sequences: extra.stop || [],
    };
  }
  return {
    model: config.model, messages: [{ role: "user", content: params.message }], stream: true,
    max_tokens: MAX_TOKENS, ...extra,
  };
}

async function runEvents(params, signal) {
  const path = API_PATHS[params.api];
  $("events-path").textContent = path;
  setState("events", "streaming", "streaming…");
  const url = `/demo/tokenizers/${encodeURIComponent(params.tokenizer)}${path}?delay_ms=${params.delay}`;
  const response = await fetch(url, {
    method: "POST", headers: { "content-type": "application/json" },
    body: JSON.stringify(eventsRequest(params.api, params)), signal,
  });
  if (!response.ok) {
    setState("events", "error", describeError(await errorMessage(response)));
    return;
  }
  const reader = response.body.getReader();
  const decoder = new TextDecoder("utf-8");
  let wire = "";
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    const text = decoder.decode(value, { stream: true });
    wire += text;
    $("raw-events").append(text);
    $("raw-events").scrollTop = $("raw-events").scrollHeight;
  }
  const events = wire.split("\n\n").filter((block) => block.trim()).length;
  setState("events", "done", `done: ${events} events from ${path}`);
}

// ---- controls ---------------------------------------------------------------------------------

function resetPanes() {
  for (const id of ["naive-text", "naive-tokens", "course-reasoning", "course-text", "raw-events"]) {
    $(id).replaceChildren();
  }
  $("course-reasoning").hidden = true;
  for (const id of ["naive-token-count", "naive-fffd-count", "course-token-count", "course-chunk-count",
    "course-fffd-count"]) {
    $(id).textContent = "0";
  }
}

async function guarded(pane, run) {
  try {
    await run();
  } catch (error) {
    if (error.name === "AbortError") setState(pane, "stopped", "stopped");
    else setState(pane, "error", `the stream failed: ${error.message}`);
  }
}

async function start(event) {
  if (event) event.preventDefault();
  if (running) running.abort();
  const controller = new AbortController();
  running = controller;
  const script = config.scripts.find((s) => s.key === $("script").value);
  // The schema picker (lab-08): the reply asked for as JSON, the right pane held to the schema.
  const schema = (config.schemas || []).find((s) => s.key === $("schema").value) || null;
  const request = schema ? {
    response_format: { type: "json_schema", json_schema: { name: schema.key, strict: true, schema: schema.schema } },
  } : script.request;
  const params = {
    script: script.key, request, tokenizer: $("tokenizer").value, delay: $("delay").value,
    api: $("api").value, schema, message: schema ? script.key + config.as_json : script.key,
  };
  resetPanes();
  document.body.dataset.run = "streaming";
  $("stop").disabled = false;
  await Promise.all([
    guarded("naive", () => runNaive(params, controller.signal)),
    guarded("course", () => runCourse(params, controller.signal)),
    guarded("events", () => runEvents(params, controller.signal)),
  ]);
  if (running === controller) {
    running = null;
    $("stop").disabled = true;
    document.body.dataset.run = "done";
  }
}

function showDelay() {
  $("delay-value").textContent = `${$("delay").value} ms`;
}

async function init() {
  const response = await fetch("/demo/scripts");
  config = await response.json();
  for (const script of config.scripts) $("script").append(new Option(script.label, script.key));
  for (const name of config.tokenizers) $("tokenizer").append(new Option(name, name));
  for (const schema of config.schemas || []) $("schema").append(new Option(schema.label, schema.key));
  $("tokenizer").value = config.default_tokenizer;
  $("script").value = config.default_script;
  // /demo?script=japanese&tokenizer=byte&delay=20&run=1 opens the page on a chosen case.
  const wanted = new URLSearchParams(location.search);
  if (wanted.has("script")) $("script").value = wanted.get("script");
  if (wanted.has("tokenizer")) $("tokenizer").value = wanted.get("tokenizer");
  if (wanted.has("delay")) $("delay").value = wanted.get("delay");
  if (wanted.has("api")) $("api").value = wanted.get("api");
  if (wanted.has("schema")) $("schema").value = wanted.get("schema");
  showDelay();
  $("pipeline-file").textContent = config.pipeline;
  $("server-info").textContent = `model ${config.model} · tokenizers: ${config.tokenizers.join(", ")}`;
  $("delay").addEventListener("input", showDelay);
  $("controls").addEventListener("submit", start);
  $("stop").addEventListener("click", () => running && running.abort());
  document.body.dataset.ready = "true";
  if (wanted.get("run") === "1") start();
}

init().catch((error) => {
  setState("course", "error", `could not load the demo's settings: ${error.message}`);
});

// lab-10's box: one user text, the control tokens of the f-string prompt and of lab-10's render.
document.getElementById("injection-form").addEventListener("submit", async (event) => {
  event.preventDefault();
  const out = document.getElementById("injection-report");
  const query = new URLSearchParams({tokenizer: document.getElementById("tokenizer").value,
                                     text: document.getElementById("injection-text").value});
  const reply = await fetch(`/demo/injection?${query}`);
  const body = await reply.json();
  if (!reply.ok) { out.textContent = body.error ? body.error.message : reply.statusText; return; }
  const line = (name, seen) => seen === null ? `${name}: lab-10 is still the starter's stub`
    : `${name}: ${seen.prompt_tokens} prompt tokens, control tokens ${seen.control_tokens.join(" ")}`;
  out.textContent = [line("f-string + encode", body.f_string), line("lab-10 render  ", body.lab_10)].join("\n");
});
