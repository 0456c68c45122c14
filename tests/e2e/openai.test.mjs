// End-to-end: the official `openai` npm client against `autoglm serve`.
// Usage: node --test openai.test.mjs  (env AUTOGLM_BIN, AUTOGLM_SHARED)
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, existsSync } from 'node:fs';
import OpenAI from 'openai';
import { skipUnlessShared, startServer } from './serve.mjs';

const bin = process.env.AUTOGLM_BIN;
const shared = process.env.AUTOGLM_SHARED;
const model = `${shared}/models/stories260K.gguf`;
const golden = `${shared}/golden/stories260k-once/case.json`;
const haveModel = existsSync(model);
let server;
let client;
let modelId;

before(async () => {
  if (!haveModel) return;
  const started = startServer(bin, ['-m', model]);
  server = started.server;
  const port = await started.port;
  client = new OpenAI({ baseURL: `http://127.0.0.1:${port}/v1`, apiKey: 'unused', maxRetries: 0 });
  modelId = (await client.models.list()).data[0].id;
});

after(() => server?.kill('SIGTERM'));

const skip = skipUnlessShared(haveModel, model);
const chat = (extra) => ({ model: modelId, messages: [{ role: 'user', content: 'Tell me a story' }], ...extra });

test('models lists the served file', { skip }, () => {
  assert.equal(modelId, 'stories260K.gguf');
});

test('completions reproduce the reference greedy text', { skip }, async () => {
  const ref = JSON.parse(readFileSync(golden, 'utf8'));
  const r = await client.completions.create({ model: modelId, prompt: 'Once upon a time', max_tokens: 64, temperature: 0 });
  assert.equal(r.object, 'text_completion');
  assert.equal(r.choices[0].text, ref.greedy.output_text);
  assert.equal(r.choices[0].finish_reason, 'length');
  assert.equal(r.usage.prompt_tokens, 5);
  assert.equal(r.usage.completion_tokens, 64);
  assert.equal(r.usage.total_tokens, 69);
});

test('chat non-stream and stream agree; usage is reported', { skip }, async () => {
  const full = await client.chat.completions.create(chat({ max_tokens: 24, temperature: 0 }));
  assert.equal(full.object, 'chat.completion');
  assert.equal(full.choices[0].message.role, 'assistant');
  assert.ok(full.choices[0].message.content.length > 0);
  assert.equal(full.choices[0].finish_reason, 'length');
  assert.equal(full.usage.completion_tokens, 24);
  assert.ok(full.usage.prompt_tokens > 0);

  const stream = await client.chat.completions.create(
    chat({ max_tokens: 24, temperature: 0, stream: true, stream_options: { include_usage: true } }));
  let text = '';
  let finish = null;
  let usage = null;
  for await (const chunk of stream) {
    assert.equal(chunk.object, 'chat.completion.chunk');
    if (chunk.usage) usage = chunk.usage;
    for (const c of chunk.choices) {
      text += c.delta?.content ?? '';
      if (c.finish_reason) finish = c.finish_reason;
    }
  }
  assert.equal(text, full.choices[0].message.content);
  assert.equal(finish, 'length');
  assert.equal(usage.completion_tokens, 24);
  assert.equal(usage.prompt_tokens, full.usage.prompt_tokens);
});

test('stop strings end the text before them', { skip }, async () => {
  const r = await client.completions.create({ model: modelId, prompt: 'Once upon a time', max_tokens: 64, temperature: 0, stop: ['Lily'] });
  assert.equal(r.choices[0].text, ', there was a little girl named ');
  assert.equal(r.choices[0].finish_reason, 'stop');
  const s = await client.completions.create({ model: modelId, prompt: 'Once upon a time', max_tokens: 64, temperature: 0, stop: 'girl', stream: true });
  let text = '';
  for await (const chunk of s) text += chunk.choices[0]?.text ?? '';
  assert.equal(text, ', there was a little ');
});

test('max_tokens and max_completion_tokens are honoured', { skip }, async () => {
  const a = await client.chat.completions.create(chat({ max_tokens: 3 }));
  assert.equal(a.usage.completion_tokens, 3);
  const b = await client.chat.completions.create(chat({ max_completion_tokens: 5 }));
  assert.equal(b.usage.completion_tokens, 5);
});

test('seeded sampling is reproducible', { skip }, async () => {
  const params = chat({ max_tokens: 20, temperature: 1, seed: 1234 });
  const a = await client.chat.completions.create(params);
  const b = await client.chat.completions.create(params);
  assert.equal(a.choices[0].message.content, b.choices[0].message.content);
});

test('logprobs with top alternatives', { skip }, async () => {
  const r = await client.chat.completions.create(chat({ max_tokens: 4, temperature: 0, logprobs: true, top_logprobs: 3 }));
  const items = r.choices[0].logprobs.content;
  assert.equal(items.length, 4);
  for (const it of items) {
    assert.equal(it.top_logprobs.length, 3);
    assert.ok(it.logprob <= 0);
    assert.equal(it.top_logprobs[0].logprob, it.logprob);  // greedy picks the most likely token
  }
});

test('completions logprobs use the legacy shape', { skip }, async () => {
  const r = await client.completions.create({ model: modelId, prompt: 'Once upon a time', max_tokens: 3, temperature: 0, logprobs: 2 });
  const lp = r.choices[0].logprobs;
  assert.equal(lp.tokens.length, 3);
  assert.equal(lp.token_logprobs.length, 3);
  assert.equal(Object.keys(lp.top_logprobs[0]).length, 2);
  assert.equal(lp.tokens.join(''), r.choices[0].text);
  assert.equal(lp.text_offset[0], 0);
});

test('errors have the OpenAI shape and status', { skip }, async () => {
  await assert.rejects(client.chat.completions.create(chat({ temperature: 'hot' })), (e) => {
    assert.equal(e.status, 400);
    assert.equal(e.error.param, 'temperature');
    assert.equal(e.error.type, 'invalid_request_error');
    return true;
  });
  await assert.rejects(client.chat.completions.create(chat({ n: 129 })), (e) => e.status === 400 && e.error.param === 'n');
  await assert.rejects(client.chat.completions.create(chat({ max_tokens: 0 })), (e) => e.status === 400 && e.error.param === 'max_tokens');
  await assert.rejects(client.chat.completions.create({ ...chat({}), model: 'gpt-4' }), (e) => e.status === 404 && e.error.param === 'model');
  await assert.rejects(client.chat.completions.create({ model: modelId, messages: [] }), (e) => e.status === 400 && e.error.param === 'messages');
  await assert.rejects(client.completions.create({ model: modelId, prompt: 'x '.repeat(5000), max_tokens: 1 }),
    (e) => e.status === 400 && /context window/.test(e.message));
});
