// End-to-end: the official openai client reads answers served from the response cache like any
// other (non-streamed and streamed), and sees X-AutoGLM-Cache.
// Usage: node --test response_cache.test.mjs  (env AUTOGLM_BIN, AUTOGLM_SHARED)
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import OpenAI from 'openai';
import { skipUnlessShared, startServer } from './serve.mjs';

const model = `${process.env.AUTOGLM_SHARED}/models/stories260K.gguf`;
const have = existsSync(model);
let server;
let client;

before(async () => {
  if (!have) return;
  const config = join(mkdtempSync(join(tmpdir(), 'autoglm-cache-')), 'c.yaml');
  writeFileSync(config, 'response_cache: {enabled: true}\n');
  const started = startServer(process.env.AUTOGLM_BIN, ['--config', config, '-m', model]);
  server = started.server;
  client = new OpenAI({ baseURL: `http://127.0.0.1:${await started.port}/v1`, apiKey: 'unused', maxRetries: 0 });
});

after(() => server?.kill('SIGTERM'));

const skip = skipUnlessShared(have, model);
const ask = { model: 'stories260K.gguf', messages: [{ role: 'user', content: 'A story about a cat' }], max_tokens: 24,
              temperature: 0 };

test('a repeated greedy request is a hit, and reads as the first', { skip }, async () => {
  const first = await client.chat.completions.create(ask).withResponse();
  const again = await client.chat.completions.create(ask).withResponse();
  assert.equal(first.response.headers.get('x-autoglm-cache'), 'miss');
  assert.equal(again.response.headers.get('x-autoglm-cache'), 'hit');
  assert.deepEqual(again.data.choices, first.data.choices);
  assert.deepEqual(again.data.usage, first.data.usage);
  assert.notEqual(again.data.id, first.data.id);

  const streamed = await client.chat.completions.create({ ...ask, stream: true }).withResponse();
  assert.equal(streamed.response.headers.get('x-autoglm-cache'), 'hit');
  let text = '';
  let finish = null;
  for await (const chunk of streamed.data) {
    text += chunk.choices[0]?.delta?.content ?? '';
    finish = chunk.choices[0]?.finish_reason ?? finish;
  }
  assert.equal(text, first.data.choices[0].message.content);
  assert.equal(finish, first.data.choices[0].finish_reason);
});

test('sampling without a seed is never served from the cache', { skip }, async () => {
  const sampled = { ...ask, temperature: 0.9 };
  await client.chat.completions.create(sampled);
  const again = await client.chat.completions.create(sampled).withResponse();
  assert.equal(again.response.headers.get('x-autoglm-cache'), null);
});
