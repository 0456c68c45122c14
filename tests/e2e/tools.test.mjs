// Tool calling end to end with the official openai client: a Hugging Face folder with a
// Hermes-style template (Qwen3's), forced and named tool choices, streamed and not, and a
// follow-up turn carrying the call and its result (role "tool").
// Usage: node --test tools.test.mjs  (env AUTOGLM_BIN, AUTOGLM_SHARED)
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import OpenAI from 'openai';
import Ajv from 'ajv';
import { skipUnlessShared, startServer } from './serve.mjs';

const bin = process.env.AUTOGLM_BIN;
const folder = `${process.env.AUTOGLM_SHARED}/models/hf/qwen2-tiny`;
const haveModel = existsSync(`${folder}/config.json`);
const skip = skipUnlessShared(haveModel, folder);
let server;
let client;

before(async () => {
  if (!haveModel) return;
  const started = startServer(bin, ['-m', folder]);
  server = started.server;
  client = new OpenAI({ baseURL: `http://127.0.0.1:${await started.port}/v1`, apiKey: 'unused', maxRetries: 0 });
});
after(() => server?.kill('SIGTERM'));

const weather = {
  type: 'function',
  function: {
    name: 'get_weather',
    description: 'Current weather for a city',
    parameters: { type: 'object', properties: { city: { type: 'string', maxLength: 16 }, days: { type: 'integer', minimum: 1 } }, required: ['city'] },
  },
};
const calculator = {
  type: 'function',
  function: {
    name: 'calculator',
    description: 'Evaluate an arithmetic expression',
    parameters: { type: 'object', properties: { expression: { type: 'string', maxLength: 20 } }, required: ['expression'] },
  },
};
const messages = [{ role: 'user', content: 'What is the weather in Paris?' }];
const validators = Object.fromEntries([weather, calculator].map((t) => [t.function.name, new Ajv().compile(t.function.parameters)]));

function checkCall(call) {
  assert.equal(call.type, 'function');
  assert.match(call.id, /^call_/);
  const validate = validators[call.function.name];
  assert.ok(validate, `unknown tool ${call.function.name}`);
  const args = JSON.parse(call.function.arguments);
  assert.ok(validate(args), `${call.function.arguments}: ${JSON.stringify(validate.errors)}`);
}

test('tool_choice required: a schema-valid call, non-streamed', { skip }, async () => {
  for (const seed of [1, 2, 3]) {
    const r = await client.chat.completions.create({
      model: 'qwen2-tiny', messages, tools: [weather, calculator], tool_choice: 'required', temperature: 1, seed, max_tokens: 200,
    });
    const choice = r.choices[0];
    assert.equal(choice.finish_reason, 'tool_calls');
    assert.equal(choice.message.content, null);
    assert.equal(choice.message.tool_calls.length, 1);
    checkCall(choice.message.tool_calls[0]);
  }
});

test('a named function, streamed: deltas assemble into the same call as non-streamed', { skip }, async () => {
  const request = {
    model: 'qwen2-tiny', messages, tools: [weather, calculator], temperature: 1, seed: 7, max_tokens: 200,
    tool_choice: { type: 'function', function: { name: 'calculator' } },
  };
  const full = await client.chat.completions.create(request);
  const stream = await client.chat.completions.create({ ...request, stream: true });
  const calls = [];
  let finish = null;
  let content = '';
  for await (const chunk of stream) {
    const c = chunk.choices[0];
    if (!c) continue;
    content += c.delta?.content ?? '';
    for (const d of c.delta?.tool_calls ?? []) {
      calls[d.index] ??= { id: d.id, type: d.type, function: { name: d.function?.name ?? '', arguments: '' } };
      calls[d.index].function.arguments += d.function?.arguments ?? '';
    }
    if (c.finish_reason) finish = c.finish_reason;
  }
  assert.equal(finish, 'tool_calls');
  assert.equal(content, '');
  assert.equal(calls.length, 1);
  assert.equal(calls[0].function.name, 'calculator');
  checkCall(calls[0]);
  assert.equal(calls[0].function.arguments, full.choices[0].message.tool_calls[0].function.arguments);
});

test('tool results come back as role "tool"; tool_choice none gives text', { skip }, async () => {
  const r = await client.chat.completions.create({
    model: 'qwen2-tiny', tools: [weather], tool_choice: 'none', temperature: 0, max_tokens: 8,
    messages: [
      ...messages,
      { role: 'assistant', content: null, tool_calls: [{ id: 'call_9', type: 'function', function: { name: 'get_weather', arguments: '{"city": "Paris"}' } }] },
      { role: 'tool', tool_call_id: 'call_9', content: '{"temp_c": 21}' },
    ],
  });
  assert.equal(r.choices[0].message.tool_calls, undefined);
  assert.ok(r.choices[0].message.content.length > 0);
  assert.ok(r.usage.prompt_tokens > 40);
});

test('bad tools and tool_choice are 400s naming the parameter', { skip }, async () => {
  for (const [extra, param] of [
    [{ tools: [{ type: 'function', function: {} }] }, 'tools[0].function.name'],
    [{ tools: [weather], tool_choice: 'sometimes' }, 'tool_choice'],
    [{ tools: [weather], tool_choice: { type: 'function', function: { name: 'nope' } } }, 'tool_choice'],
    [{ tool_choice: 'required' }, 'tool_choice'],
  ]) {
    await assert.rejects(client.chat.completions.create({ model: 'qwen2-tiny', messages, ...extra }), (e) => {
      assert.equal(e.status, 400);
      assert.equal(e.error?.param ?? e.param, param);
      return true;
    });
  }
});

// max_tokens cuts a forced call short: finish_reason length, no tool_calls, and none of the
// call's markup in the content (streamed and not).
test('a call cut short by max_tokens leaves no markup', { skip }, async () => {
  for (const stream of [false, true]) {
    const params = { model: 'qwen2-tiny', messages, tools: [weather], tool_choice: 'required', temperature: 1, seed: 4, max_tokens: 6 };
    let content = '';
    let finish;
    let calls = 0;
    if (stream) {
      for await (const chunk of await client.chat.completions.create({ ...params, stream: true })) {
        const c = chunk.choices[0];
        content += c?.delta?.content ?? '';
        calls += c?.delta?.tool_calls?.length ?? 0;
        finish = c?.finish_reason ?? finish;
      }
    } else {
      const c = (await client.chat.completions.create(params)).choices[0];
      content = c.message.content ?? '';
      calls = c.message.tool_calls?.length ?? 0;
      finish = c.finish_reason;
    }
    assert.equal(finish, 'length');
    assert.equal(calls, 0);
    assert.ok(!content.includes('<tool_call>') && !content.includes('"name"'), `stream ${stream}: ${content}`);
  }
});
