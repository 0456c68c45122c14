// The chat playground: streams /v1/chat/completions and shows text and tool calls as they come,
// and a thinking model's reasoning folded above its answer (open while it thinks).
import { bindKeyField, getJson, headers, readEvents } from './common.js';

const $ = (id) => document.getElementById(id);
const history = [];
let aborter = null;

function setStatus(text, isError = false) {
  $('status').textContent = text;
  $('status').className = isError ? 'error' : '';
}

function addMessage(role, text) {
  const div = document.createElement('div');
  div.className = `message ${role}`;
  const body = document.createElement('span');
  body.className = 'content';
  body.textContent = text;
  div.append(body);
  $('messages').append(div);
  div.scrollIntoView({ block: 'end' });
  return div;
}

async function loadModels() {
  try {
    const list = await getJson('/v1/models');
    const select = $('model');
    const chosen = select.value; // kept when the list is loaded again (a new key)
    select.replaceChildren();
    for (const m of list.data) {
      const option = document.createElement('option');
      option.value = m.id;
      option.textContent = m.kind && m.kind !== 'model' ? `${m.id} (${m.kind})` : m.id;
      select.append(option);
    }
    if (list.data.some((m) => m.id === chosen)) select.value = chosen;
    setStatus('');
  } catch (e) {
    setStatus(`models: ${e.message}`, true);
  }
}

// The JSON text of a settings box, or undefined when it is empty; errors name the box.
function parsed(id, what) {
  const text = $(id).value.trim();
  if (!text) return undefined;
  try {
    return JSON.parse(text);
  } catch (e) {
    throw new Error(`${what}: ${e.message}`);
  }
}

function requestBody() {
  const messages = [];
  const system = $('system').value.trim();
  if (system) messages.push({ role: 'system', content: system });
  messages.push(...history);
  const body = {
    model: $('model').value || undefined,
    messages,
    stream: true,
    stream_options: { include_usage: true },
    temperature: Number($('temperature').value),
    top_p: Number($('top-p').value),
    max_tokens: Number($('max-tokens').value),
  };
  if ($('seed').value !== '') body.seed = Number($('seed').value);
  const schema = parsed('schema', 'JSON schema');
  if (schema) body.response_format = { type: 'json_schema', json_schema: { name: 'playground', schema } };
  const tools = parsed('tools', 'tools');
  if (tools) {
    body.tools = tools;
    body.tool_choice = $('tool-choice').value;
  }
  return body;
}

// The fold that holds the reasoning, above the answer: made on the first reasoning delta.
function reasoningFold(div) {
  let fold = div.querySelector('details.reasoning');
  if (fold) return fold;
  fold = document.createElement('details');
  fold.className = 'reasoning';
  fold.open = true;
  const summary = document.createElement('summary');
  summary.textContent = 'Thinking';
  const text = document.createElement('div');
  text.className = 'reasoning-text';
  fold.append(summary, text);
  div.prepend(fold);
  return fold;
}

function showToolCalls(div, calls) {
  div.querySelectorAll('.tool-call').forEach((n) => n.remove());
  for (const call of calls) {
    const box = document.createElement('div');
    box.className = 'tool-call';
    box.textContent = `${call.function.name}(${call.function.arguments})`;
    div.append(box);
  }
}

async function send(text) {
  let body;
  try {
    history.push({ role: 'user', content: text });
    body = requestBody();
  } catch (e) {
    history.pop();
    setStatus(e.message, true);
    return;
  }
  addMessage('user', text);
  const div = addMessage('assistant', '');
  const content = div.querySelector('.content');
  const calls = [];
  let reasoning = '';
  let finish = '';
  let usage = null;
  aborter = new AbortController();
  $('send').disabled = true;
  $('stop').disabled = false;
  setStatus('generating…');
  const started = performance.now();
  let firstTokenMs = 0;
  try {
    const res = await fetch('/v1/chat/completions', {
      method: 'POST',
      headers: headers({ 'Content-Type': 'application/json' }),
      body: JSON.stringify(body),
      signal: aborter.signal,
    });
    if (!res.ok) {
      const err = await res.json().catch(() => ({}));
      throw new Error(err.error?.message || `HTTP ${res.status}`);
    }
    await readEvents(res, (chunk) => {
      if (chunk.error) throw new Error(chunk.error.message);
      if (chunk.usage) usage = chunk.usage;
      const choice = chunk.choices?.[0];
      if (!choice) return;
      const delta = choice.delta || {};
      if (delta.reasoning_content) {
        if (!firstTokenMs) firstTokenMs = performance.now() - started;
        reasoning += delta.reasoning_content;
        reasoningFold(div).querySelector('.reasoning-text').textContent = reasoning;
      }
      if (delta.content) {
        if (!firstTokenMs) firstTokenMs = performance.now() - started;
        const fold = div.querySelector('details.reasoning');
        if (fold && !content.textContent) fold.open = false; // the answer starts: the thinking folds away
        content.textContent += delta.content;
      }
      for (const t of delta.tool_calls || []) {
        const call = (calls[t.index] ??= { function: { name: '', arguments: '' } });
        if (t.function?.name) call.function.name += t.function.name;
        if (t.function?.arguments) call.function.arguments += t.function.arguments;
        showToolCalls(div, calls);
      }
      if (choice.finish_reason) finish = choice.finish_reason;
      div.scrollIntoView({ block: 'end' });
    });
    const turn = { role: 'assistant', content: content.textContent };
    if (reasoning) turn.reasoning_content = reasoning; // templates that keep it get it back
    history.push(turn);
    div.dataset.finish = finish;
    const meta = document.createElement('span');
    meta.className = 'meta';
    const seconds = (performance.now() - started) / 1000;
    meta.textContent = `${finish || 'ended'} · first token ${(firstTokenMs / 1000).toFixed(2)} s · ` +
      (usage ? `${usage.completion_tokens} tokens · ${(usage.completion_tokens / seconds).toFixed(1)} tok/s` : '');
    div.append(meta);
    setStatus('');
  } catch (e) {
    div.dataset.finish = 'error';
    setStatus(e.name === 'AbortError' ? 'stopped' : e.message, e.name !== 'AbortError');
    if (e.name !== 'AbortError') history.pop();
  } finally {
    aborter = null;
    $('send').disabled = false;
    $('stop').disabled = true;
  }
}

bindKeyField($('api-key'));
$('api-key').addEventListener('change', loadModels);
$('composer').addEventListener('submit', (e) => {
  e.preventDefault();
  const text = $('prompt').value.trim();
  if (!text || aborter) return;
  $('prompt').value = '';
  send(text);
});
$('prompt').addEventListener('keydown', (e) => {
  if (e.key === 'Enter' && !e.shiftKey) {
    e.preventDefault();
    $('composer').requestSubmit();
  }
});
$('stop').addEventListener('click', () => aborter?.abort());
$('clear').addEventListener('click', () => {
  history.length = 0;
  $('messages').replaceChildren();
});
loadModels();
