// End-to-end: `autoglm serve` on a Hugging Face folder answers chat completions with the
// folder's own tokenizer.json and chat template (the Llama 3 template here).
// Usage: node --test hf_folder.test.mjs  (env AUTOGLM_BIN, AUTOGLM_SHARED)
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, existsSync } from 'node:fs';
import OpenAI from 'openai';
import { skipUnlessShared, startServer } from './serve.mjs';

const bin = process.env.AUTOGLM_BIN;
const shared = process.env.AUTOGLM_SHARED;
const folder = `${shared}/models/hf/llama3-tiny`;
const golden = `${shared}/golden/hf-llama3-tiny/case.json`;
const haveModel = existsSync(`${folder}/config.json`) && existsSync(golden);
let server;
let client;

before(async () => {
  if (!haveModel) return;
  const started = startServer(bin, ['-m', `${folder}/`]);
  server = started.server;
  const port = await started.port;
  client = new OpenAI({ baseURL: `http://127.0.0.1:${port}/v1`, apiKey: 'unused', maxRetries: 0 });
});

after(() => server?.kill('SIGTERM'));

const skip = skipUnlessShared(haveModel, `${folder} or its golden case`);

test('models names the folder', { skip }, async () => {
  const models = await client.models.list();
  assert.equal(models.data[0].id, 'llama3-tiny');
});

test('chat renders the folder template: the reference prompt length', { skip }, async () => {
  const ref = JSON.parse(readFileSync(golden, 'utf8')).cases.find((c) => c.id === 'chat');
  const r = await client.chat.completions.create({
    model: 'llama3-tiny', messages: ref.messages, max_tokens: 16, temperature: 0,
  });
  // The Llama 3 template with its own <|begin_of_text|> gives the reference's 28 tokens;
  // a fallback template (ChatML) would give another count.
  assert.equal(r.usage.prompt_tokens, ref.input_tokens.length);
  assert.equal(r.usage.completion_tokens, 16);
  assert.equal(r.choices[0].finish_reason, 'length');
  assert.ok(r.choices[0].message.content.length > 0);

  const stream = await client.chat.completions.create({
    model: 'llama3-tiny', messages: ref.messages, max_tokens: 16, temperature: 0, stream: true,
  });
  let text = '';
  for await (const chunk of stream) text += chunk.choices[0]?.delta?.content ?? '';
  assert.equal(text, r.choices[0].message.content);
});
