// The OpenAI Batch API with the official openai client (latest release, Node 22), unmodified:
// files.create, batches.create/retrieve/list/cancel and files.content against `autoglm serve`.
// A batch of 50 greedy chat requests is answered line for line as the same requests made one by
// one are.
// Usage: node-22 --test batch.test.mjs  (env AUTOGLM_BIN, AUTOGLM_SHARED)
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, writeFileSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import OpenAI, { toFile } from 'openai';
import { skipUnlessShared, startServer } from '../e2e/serve.mjs';

const bin = process.env.AUTOGLM_BIN;
const stories = `${process.env.AUTOGLM_SHARED}/models/stories260K.gguf`;
const skip = skipUnlessShared(existsSync(stories), stories);
const key = 'sk-batch-test';
let server;
let client;

before(async () => {
  if (skip) return;
  const dir = mkdtempSync(`${tmpdir()}/batch-`);
  writeFileSync(`${dir}/serve.yaml`, `api_keys: [${key}]\naccess_log: ""\njobs: {data_dir: ${dir}/jobs, concurrency: 4}\n`);
  const started = startServer(bin, ['-m', stories, '--config', `${dir}/serve.yaml`]);
  server = started.server;
  client = new OpenAI({ baseURL: `http://127.0.0.1:${await started.port}/v1`, apiKey: key, maxRetries: 0 });
});
after(() => server?.kill('SIGTERM'));

const words = ['dog', 'cat', 'sun', 'tree', 'boat', 'cake', 'bird', 'rain', 'fox', 'moon'];
const requestOf = (i) => ({
  model: 'stories260K.gguf',
  messages: [{ role: 'user', content: `Tell me about the ${words[i % 10]} number ${i}` }],
  max_tokens: 4 + (i % 7) * 3,
  temperature: 0,
});

async function waitFor(id) {
  for (let i = 0; i < 1200; ++i) {
    const batch = await client.batches.retrieve(id);
    if (['completed', 'failed', 'expired', 'cancelled'].includes(batch.status)) return batch;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`batch ${id} did not end`);
}

const linesOf = async (fileId) =>
  (await (await client.files.content(fileId)).text()).trim().split('\n').map((l) => JSON.parse(l));

test('a batch of 50 is answered once per custom_id, as the synchronous requests are', { skip }, async () => {
  const jsonl = Array.from({ length: 50 }, (_, i) =>
    JSON.stringify({ custom_id: `req-${i}`, method: 'POST', url: '/v1/chat/completions', body: requestOf(i) }),
  ).join('\n');
  const file = await client.files.create({ file: await toFile(Buffer.from(jsonl), 'batch.jsonl'), purpose: 'batch' });
  assert.equal(file.purpose, 'batch');
  assert.equal(file.bytes, Buffer.byteLength(jsonl));
  const created = await client.batches.create({
    input_file_id: file.id, endpoint: '/v1/chat/completions', completion_window: '24h', metadata: { suite: 'e2e' },
  });
  assert.equal(created.status, 'in_progress');
  const done = await waitFor(created.id);
  assert.equal(done.status, 'completed');
  assert.deepEqual(done.request_counts, { total: 50, completed: 50, failed: 0 });
  assert.equal(done.metadata.suite, 'e2e');
  assert.equal(done.error_file_id, null);
  const lines = await linesOf(done.output_file_id);
  assert.equal(lines.length, 50);
  assert.equal(new Set(lines.map((l) => l.custom_id)).size, 50);
  for (const line of lines) {
    const i = Number(line.custom_id.slice(4));
    assert.equal(line.response.status_code, 200);
    assert.equal(line.error, null);
    const sync = await client.chat.completions.create(requestOf(i));
    assert.deepEqual(line.response.body.choices, JSON.parse(JSON.stringify(sync.choices)), line.custom_id);
    // cached_tokens depends on what ran before (the prefix cache); the counts do not.
    assert.equal(line.response.body.usage.prompt_tokens, sync.usage.prompt_tokens, line.custom_id);
    assert.equal(line.response.body.usage.completion_tokens, sync.usage.completion_tokens, line.custom_id);
  }
  const listed = [];
  for await (const b of client.batches.list({ limit: 1 })) listed.push(b.id);
  assert.ok(listed.includes(created.id));
  const input = await (await client.files.content(file.id)).text();
  assert.equal(input, jsonl);
});

test('cancel ends a batch, every line answered or marked cancelled', { skip }, async () => {
  const jsonl = Array.from({ length: 60 }, (_, i) =>
    JSON.stringify({
      custom_id: `c${i}`, method: 'POST', url: '/v1/completions',
      body: { model: 'stories260K.gguf', prompt: 'Once', max_tokens: 300, ignore_eos: true },
    }),
  ).join('\n');
  const file = await client.files.create({ file: await toFile(Buffer.from(jsonl), 'long.jsonl'), purpose: 'batch' });
  const created = await client.batches.create({ input_file_id: file.id, endpoint: '/v1/completions', completion_window: '24h' });
  const cancelled = await client.batches.cancel(created.id);
  assert.equal(cancelled.status, 'cancelled');
  const answered = cancelled.output_file_id ? await linesOf(cancelled.output_file_id) : [];
  const errors = await linesOf(cancelled.error_file_id);
  assert.equal(answered.length + errors.length, 60);
  assert.equal(new Set([...answered, ...errors].map((l) => l.custom_id)).size, 60);
  assert.ok(errors.every((l) => l.error.code === 'batch_cancelled' && l.response === null));
  assert.equal((await client.batches.retrieve(created.id)).status, 'cancelled');
});

test('files.create refuses a bad line, naming it', { skip }, async () => {
  const jsonl = `${JSON.stringify({ custom_id: 'a', method: 'POST', url: '/v1/completions', body: {} })}\n{broken`;
  await assert.rejects(
    client.files.create({ file: await toFile(Buffer.from(jsonl), 'bad.jsonl'), purpose: 'batch' }),
    (e) => e.status === 400 && /bad\.jsonl: line 2/.test(e.message),
  );
});
