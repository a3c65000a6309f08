#include "server/web_page.h"

namespace cachet::server {

namespace {

// Chat: the conversation is kept in the page and sent whole with each message (the server's
// prefix cache makes the earlier turns cheap); the answer streams in through server-sent
// events. Speech: the text goes to /v1/audio/speech and the WAV plays in an <audio> element.
constexpr const char* kPage = R"HTML(<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>cachet</title>
<style>
  :root { --fg: #1d232a; --muted: #68737d; --line: #d8dee4; --accent: #1f6feb; --bg: #f6f8fa; }
  * { box-sizing: border-box; }
  body { margin: 0; font: 15px/1.45 system-ui, sans-serif; color: var(--fg); background: var(--bg); }
  header { display: flex; gap: 1rem; align-items: baseline; padding: .7rem 1.2rem;
           background: #fff; border-bottom: 1px solid var(--line); }
  header h1 { font-size: 1.15rem; margin: 0; }
  header .status { color: var(--muted); font-size: .85rem; }
  nav button { border: none; background: none; padding: .3rem .6rem; cursor: pointer;
               color: var(--muted); font: inherit; }
  nav button.active { color: var(--accent); border-bottom: 2px solid var(--accent); }
  main { max-width: 860px; margin: 0 auto; padding: 1rem; }
  .panel { display: none; }
  .panel.active { display: block; }
  #messages { background: #fff; border: 1px solid var(--line); border-radius: 8px;
              min-height: 320px; max-height: 60vh; overflow-y: auto; padding: .8rem; }
  .msg { margin: .4rem 0; padding: .5rem .7rem; border-radius: 8px; white-space: pre-wrap;
         word-wrap: break-word; }
  .msg.user { background: #ddf4ff; margin-left: 15%; }
  .msg.assistant { background: #f3f4f6; margin-right: 15%; }
  .msg.error { background: #ffebe9; color: #82071e; }
  .row { display: flex; gap: .5rem; margin-top: .6rem; align-items: flex-start; }
  textarea, input, select { font: inherit; padding: .45rem; border: 1px solid var(--line);
                            border-radius: 6px; background: #fff; }
  textarea { flex: 1; resize: vertical; min-height: 2.6rem; }
  button.primary { background: var(--accent); color: #fff; border: none; border-radius: 6px;
                   padding: .5rem 1rem; cursor: pointer; font: inherit; }
  button.primary:disabled { opacity: .5; cursor: default; }
  button.plain { background: #fff; border: 1px solid var(--line); border-radius: 6px;
                 padding: .5rem .8rem; cursor: pointer; font: inherit; }
  details { margin-top: .6rem; color: var(--muted); }
  details label { display: inline-flex; gap: .3rem; align-items: center; margin: .3rem 1rem .3rem 0; }
  #system { width: 100%; min-height: 3rem; margin-top: .3rem; }
  .note { color: var(--muted); font-size: .9rem; }
  audio { width: 100%; margin-top: .8rem; }
</style>
</head>
<body>
<header>
  <h1>cachet</h1>
  <span class="status" id="status">connecting&hellip;</span>
  <nav>
    <button id="tab-chat" class="active" data-panel="chat">Chat</button>
    <button id="tab-speech" data-panel="speech">Speech</button>
  </nav>
</header>
<main>
  <section id="chat" class="panel active">
    <div id="messages" aria-live="polite"></div>
    <div class="row">
      <textarea id="prompt" placeholder="Type a message; Enter sends, Shift+Enter starts a new line"></textarea>
      <button id="send" class="primary">Send</button>
      <button id="stop" class="plain" disabled>Stop</button>
      <button id="clear" class="plain">Clear</button>
    </div>
    <details>
      <summary>Settings</summary>
      <label>Max tokens <input id="max_tokens" type="number" min="1" value="200" style="width:6rem"></label>
      <label>Temperature <input id="temperature" type="number" min="0" max="2" step="0.1" value="0.8" style="width:5rem"></label>
      <label>Top p <input id="top_p" type="number" min="0.01" max="1" step="0.05" value="0.95" style="width:5rem"></label>
      <label>API key <input id="api_key" type="password" placeholder="(none)" style="width:12rem"></label>
      <div>System prompt<br><textarea id="system" placeholder="(optional)"></textarea></div>
    </details>
    <p class="note" id="usage"></p>
  </section>
  <section id="speech" class="panel">
    <p class="note" id="speech-note">Checking whether text to speech is loaded&hellip;</p>
    <div class="row">
      <textarea id="speech-text" placeholder="Text to speak">Hello from cachet.</textarea>
      <button id="speak" class="primary" disabled>Speak</button>
    </div>
    <audio id="audio" controls></audio>
  </section>
</main>
<script>
"use strict";
const $ = (id) => document.getElementById(id);
const history = [];
let controller = null;
let ttsModel = null;
let chatModel = "default";

$("api_key").value = localStorage.getItem("cachet_api_key") || "";
$("api_key").addEventListener("change", () => localStorage.setItem("cachet_api_key", $("api_key").value));

function headers() {
  const h = { "Content-Type": "application/json" };
  const key = $("api_key").value.trim();
  if (key) h["Authorization"] = "Bearer " + key;
  return h;
}

for (const b of document.querySelectorAll("nav button")) {
  b.addEventListener("click", () => {
    for (const x of document.querySelectorAll("nav button")) x.classList.toggle("active", x === b);
    for (const p of document.querySelectorAll(".panel")) p.classList.toggle("active", p.id === b.dataset.panel);
  });
}

async function refreshHealth() {
  try {
    const r = await fetch("/health");
    const h = await r.json();
    chatModel = h.model || chatModel;
    ttsModel = h.tts || null;
    $("status").textContent = h.status === "ok"
      ? `model ${h.model} \u00b7 ${h.active}/${h.slots} busy \u00b7 ${h.queued} queued`
      : h.status;
    $("speak").disabled = !ttsModel;
    $("speech-note").textContent = ttsModel
      ? `Text to speech with ${ttsModel} (24 kHz).`
      : "Text to speech is not loaded: start the server with --tts METAVOICE_DIR.";
  } catch (e) {
    $("status").textContent = "server unreachable";
  }
}

function addMessage(role, text) {
  const div = document.createElement("div");
  div.className = "msg " + role;
  div.textContent = text;
  $("messages").appendChild(div);
  $("messages").scrollTop = $("messages").scrollHeight;
  return div;
}

function errorText(body, status) {
  try { return JSON.parse(body).error.message; } catch (e) { return `HTTP ${status}: ${body}`; }
}

async function send() {
  const text = $("prompt").value.trim();
  if (!text || controller) return;
  $("prompt").value = "";
  addMessage("user", text);
  history.push({ role: "user", content: text });
  const messages = [];
  const system = $("system").value.trim();
  if (system) messages.push({ role: "system", content: system });
  messages.push(...history);
  const out = addMessage("assistant", "");
  controller = new AbortController();
  $("send").disabled = true;
  $("stop").disabled = false;
  let answer = "";
  try {
    const r = await fetch("/v1/chat/completions", {
      method: "POST", headers: headers(), signal: controller.signal,
      body: JSON.stringify({
        model: chatModel, messages, stream: true, stream_options: { include_usage: true },
        max_tokens: Number($("max_tokens").value) || 200,
        temperature: Number($("temperature").value),
        top_p: Number($("top_p").value) || 1,
      }),
    });
    if (!r.ok) throw new Error(errorText(await r.text(), r.status));
    const reader = r.body.getReader();
    const decoder = new TextDecoder();
    let buf = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buf += decoder.decode(value, { stream: true });
      let i;
      while ((i = buf.indexOf("\n\n")) >= 0) {
        const event = buf.slice(0, i);
        buf = buf.slice(i + 2);
        for (const line of event.split("\n")) {
          if (!line.startsWith("data: ")) continue;
          const data = line.slice(6);
          if (data === "[DONE]") continue;
          const j = JSON.parse(data);
          if (j.error) throw new Error(j.error.message);
          if (j.choices && j.choices.length && j.choices[0].delta.content) {
            answer += j.choices[0].delta.content;
            out.textContent = answer;
            $("messages").scrollTop = $("messages").scrollHeight;
          }
          if (j.usage) {
            const u = j.usage;
            $("usage").textContent = `${u.prompt_tokens} prompt tokens (${u.prompt_tokens_details.cached_tokens} cached), ${u.completion_tokens} generated`;
          }
        }
      }
    }
    out.dataset.done = "1";
  } catch (e) {
    if (e.name !== "AbortError") {
      out.classList.add("error");
      out.textContent = (answer ? answer + "\n" : "") + "Error: " + e.message;
    }
    out.dataset.done = "1";
  } finally {
    history.push({ role: "assistant", content: answer });
    controller = null;
    $("send").disabled = false;
    $("stop").disabled = true;
    refreshHealth();
  }
}

$("send").addEventListener("click", send);
$("stop").addEventListener("click", () => controller && controller.abort());
$("clear").addEventListener("click", () => { history.length = 0; $("messages").textContent = ""; $("usage").textContent = ""; });
$("prompt").addEventListener("keydown", (e) => {
  if (e.key === "Enter" && !e.shiftKey) { e.preventDefault(); send(); }
});

$("speak").addEventListener("click", async () => {
  const input = $("speech-text").value.trim();
  if (!input || !ttsModel) return;
  $("speak").disabled = true;
  $("speech-note").textContent = "Synthesizing\u2026";
  try {
    const r = await fetch("/v1/audio/speech", {
      method: "POST", headers: headers(),
      body: JSON.stringify({ model: ttsModel, input, response_format: "wav" }),
    });
    if (!r.ok) throw new Error(errorText(await r.text(), r.status));
    const blob = await r.blob();
    const audio = $("audio");
    if (audio.src) URL.revokeObjectURL(audio.src);
    audio.src = URL.createObjectURL(blob);
    audio.dataset.bytes = String(blob.size);
    $("speech-note").textContent = `Got ${blob.size} bytes of audio.`;
    audio.play().catch(() => {});
  } catch (e) {
    $("speech-note").textContent = "Error: " + e.message;
  } finally {
    $("speak").disabled = !ttsModel;
  }
});

refreshHealth();
setInterval(refreshHealth, 5000);
</script>
</body>
</html>
)HTML";

}  // namespace

const char* web_page_html() {
  return kPage;
}

}  // namespace cachet::server
