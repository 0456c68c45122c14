// Shared by the playground pages: the API key (kept in this browser only) and fetch helpers.
'use strict';

const keyStore = 'autoglm.apiKey';

export function apiKey() {
  return localStorage.getItem(keyStore) || '';
}

export function bindKeyField(input) {
  input.value = apiKey();
  input.addEventListener('change', () => localStorage.setItem(keyStore, input.value.trim()));
}

export function headers(extra = {}) {
  const h = { ...extra };
  const key = apiKey();
  if (key) h.Authorization = `Bearer ${key}`;
  return h;
}

// A JSON answer, or an Error carrying the server's message (OpenAI error shape).
export async function getJson(path) {
  const res = await fetch(path, { headers: headers() });
  const body = await res.json().catch(() => ({}));
  if (!res.ok) throw new Error(body.error?.message || `${path}: HTTP ${res.status}`);
  return body;
}

// Calls onEvent with each parsed `data:` object of a server-sent event stream, until [DONE].
export async function readEvents(response, onEvent) {
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += decoder.decode(value, { stream: true });
    let end;
    while ((end = buffer.indexOf('\n\n')) >= 0) {
      const event = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      for (const line of event.split('\n')) {
        if (!line.startsWith('data:')) continue;
        const data = line.slice(5).trim();
        if (data === '[DONE]') return;
        onEvent(JSON.parse(data));
      }
    }
  }
}
