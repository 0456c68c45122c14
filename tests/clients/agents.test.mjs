// Agent clients against a thinking model: the openai client reading reasoning_content and
// tool_calls, Anthropic's SDK (messages, a streamed tool round trip, a thinking block, its
// errors), and the AI SDK's Anthropic provider and OpenAI-compatible provider (reasoning and
// tool-call parts). The model is stories260K with GLM-4.6's own chat template; each reply is
// forced by this server's `grammar` extension (sent in the body, or added by a fetch wrapper
// for the AI SDK, which has no place for it), so the plumbing is tested, not the weights.
// Usage: node-22 --test agents.test.mjs  (env AUTOGLM_BIN, AUTOGLM_SHARED)
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, writeFileSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { fileURLToPath } from 'node:url';
import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';
import { generateText, streamText, tool, jsonSchema } from 'ai';
import { createAnthropic } from '@ai-sdk/anthropic';
import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import { skipUnlessShared, startServer } from '../e2e/serve.mjs';

const bin = process.env.AUTOGLM_BIN;
const shared = process.env.AUTOGLM_SHARED;
const stories = `${shared}/models/stories260K.gguf`;
const template = fileURLToPath(new URL('../data/chat_templates/glm-4.6.jinja', import.meta.url));
const skip = skipUnlessShared(existsSync(stories), `${shared}/models`);
const key = 'sk-agents-test';
const MODEL = 'stories260K.gguf'; // a single model's id: its file name
let server;
let port;

before(async () => {
  if (skip) return;
  const dir = mkdtempSync(`${tmpdir()}/agents-`);
  const config = `${dir}/serve.yaml`;
  writeFileSync(config, `api_keys: [${key}]\naccess_log: ""\n`);
  const started = startServer(bin, ['-m', stories, '--chat-template', template, '--config', config]);
  server = started.server;
  port = await started.port;
});
after(() => server?.kill('SIGTERM'));

// GBNF forcing a reply in GLM-4.5's format: thinking, then a call or an answer.
const gbnf = (text) => `root ::= ${JSON.stringify(text)}`;
const THINK_THEN_CALL = gbnf(
  '<think>Use the tool.</think>\n<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>\n</tool_call>',
);
const THINK_THEN_ANSWER = gbnf('<think>It is sunny.</think>\nSunny in Paris.');

const weatherParameters = {
  type: 'object',
  properties: { city: { type: 'string' } },
  required: ['city'],
  additionalProperties: false,
};

// A fetch that adds `grammar` to every JSON body (the AI SDK sends only the fields it knows).
function fetchWithGrammar(grammar) {
  return (url, init) => {
    const body = JSON.parse(init.body);
    body.grammar = grammar;
    return fetch(url, { ...init, body: JSON.stringify(body) });
  };
}

test('openai: reasoning_content and tool_calls from a thinking model', { skip }, async () => {
  const client = new OpenAI({ baseURL: `http://127.0.0.1:${port}/v1`, apiKey: key, maxRetries: 0 });
  const tools = [{ type: 'function', function: { name: 'get_weather', parameters: weatherParameters } }];
  const messages = [{ role: 'user', content: 'Weather in Paris?' }];
  const r = await client.chat.completions.create({ messages, tools, max_tokens: 200, grammar: THINK_THEN_CALL });
  const m = r.choices[0].message;
  assert.equal(m.reasoning_content, 'Use the tool.');
  assert.equal(r.choices[0].finish_reason, 'tool_calls');
  assert.equal(m.tool_calls[0].function.name, 'get_weather');
  assert.deepEqual(JSON.parse(m.tool_calls[0].function.arguments), { city: 'Paris' });

  const stream = await client.chat.completions.create({
    messages,
    tools,
    max_tokens: 200,
    stream: true,
    grammar: THINK_THEN_CALL,
  });
  let reasoning = '';
  let args = '';
  let name = '';
  for await (const chunk of stream) {
    const d = chunk.choices[0]?.delta ?? {};
    reasoning += d.reasoning_content ?? '';
    for (const c of d.tool_calls ?? []) {
      name += c.function?.name ?? '';
      args += c.function?.arguments ?? '';
    }
  }
  assert.equal(reasoning, 'Use the tool.');
  assert.equal(name, 'get_weather');
  assert.deepEqual(JSON.parse(args), { city: 'Paris' });

  await assert.rejects(
    client.chat.completions.create({
      messages,
      tools: [{ type: 'function', function: { name: 'f', parameters: { type: 'object', properties: 5 } } }],
      tool_choice: 'required',
    }),
    (e) => e.status === 400 && e.param === 'tools',
  );
  await assert.rejects(client.chat.completions.create({ model: 'nope', messages }), (e) => e.status === 404);
});

test('@anthropic-ai/sdk: a message, a thinking block, a streamed tool round trip, errors', { skip }, async () => {
  const client = new Anthropic({ baseURL: `http://127.0.0.1:${port}`, apiKey: key, maxRetries: 0 });
  const tools = [{ name: 'get_weather', description: 'The weather in a city', input_schema: weatherParameters }];
  const question = { role: 'user', content: 'Weather in Paris?' };
  const first = await client.messages.create({
    model: MODEL,
    max_tokens: 300,
    messages: [question],
    tools,
    thinking: { type: 'enabled', budget_tokens: 100 },
    grammar: THINK_THEN_CALL,
  });
  assert.equal(first.type, 'message');
  assert.equal(first.stop_reason, 'tool_use');
  assert.equal(first.content[0].type, 'thinking');
  assert.equal(first.content[0].thinking, 'Use the tool.');
  const call = first.content.find((b) => b.type === 'tool_use');
  assert.equal(call.name, 'get_weather');
  assert.deepEqual(call.input, { city: 'Paris' });
  assert.ok(first.usage.input_tokens > 0 && first.usage.output_tokens > 0);

  const stream = client.messages.stream({
    model: MODEL,
    max_tokens: 300,
    tools,
    messages: [
      question,
      { role: 'assistant', content: first.content },
      { role: 'user', content: [{ type: 'tool_result', tool_use_id: call.id, content: 'sunny' }] },
    ],
    grammar: THINK_THEN_ANSWER,
  });
  let thinking = '';
  let text = '';
  stream.on('thinking', (delta) => (thinking += delta));
  stream.on('text', (delta) => (text += delta));
  const final = await stream.finalMessage();
  assert.equal(thinking, 'It is sunny.');
  assert.equal(text, 'Sunny in Paris.');
  assert.equal(final.stop_reason, 'end_turn');
  assert.deepEqual(
    final.content.map((b) => b.type),
    ['thinking', 'text'],
  );

  const counted = await client.messages.countTokens({ model: MODEL, messages: [question] });
  assert.ok(counted.input_tokens > 0);

  await assert.rejects(
    client.messages.create({ model: 'nope', max_tokens: 10, messages: [question] }),
    (e) => e instanceof Anthropic.NotFoundError && e.error?.error?.type === 'not_found_error',
  );
  await assert.rejects(
    client.messages.create({
      model: MODEL,
      max_tokens: 10,
      messages: [{ role: 'user', content: [{ type: 'tool_result', content: 'x' }] }],
    }),
    (e) =>
      e instanceof Anthropic.BadRequestError &&
      e.error?.error?.type === 'invalid_request_error' &&
      e.error.error.message.startsWith('messages.0.content.0.tool_use_id'),
  );
  await assert.rejects(
    client.messages.create({
      model: MODEL,
      max_tokens: 10,
      messages: [question],
      tools: [{ name: 'f', input_schema: { type: 'object', properties: 5 } }],
      tool_choice: { type: 'any' },
    }),
    (e) => e instanceof Anthropic.BadRequestError && e.error?.error?.message.startsWith('tools'),
  );
  const wrongKey = new Anthropic({ baseURL: `http://127.0.0.1:${port}`, apiKey: 'sk-wrong', maxRetries: 0 });
  await assert.rejects(
    wrongKey.messages.create({ model: MODEL, max_tokens: 10, messages: [question] }),
    (e) => e instanceof Anthropic.AuthenticationError,
  );
});

test("AI SDK's Anthropic provider: reasoning and tool-call parts", { skip }, async () => {
  const anthropic = createAnthropic({
    baseURL: `http://127.0.0.1:${port}/v1`,
    apiKey: key,
    fetch: fetchWithGrammar(THINK_THEN_CALL),
  });
  const result = await generateText({
    model: anthropic(MODEL),
    prompt: 'Weather in Paris?',
    maxOutputTokens: 300,
    tools: { get_weather: tool({ description: 'The weather in a city', inputSchema: jsonSchema(weatherParameters) }) },
  });
  assert.equal(result.reasoningText, 'Use the tool.');
  assert.equal(result.toolCalls.length, 1);
  assert.equal(result.toolCalls[0].toolName, 'get_weather');
  assert.deepEqual(result.toolCalls[0].input, { city: 'Paris' });

  const answering = createAnthropic({
    baseURL: `http://127.0.0.1:${port}/v1`,
    apiKey: key,
    fetch: fetchWithGrammar(THINK_THEN_ANSWER),
  });
  const streamed = streamText({ model: answering(MODEL), prompt: 'Weather?', maxOutputTokens: 300 });
  let reasoning = '';
  let text = '';
  for await (const part of streamed.fullStream) {
    if (part.type === 'reasoning-delta') reasoning += part.text;
    if (part.type === 'text-delta') text += part.text;
    if (part.type === 'error') throw part.error;
  }
  assert.equal(reasoning, 'It is sunny.');
  assert.equal(text, 'Sunny in Paris.');

  await assert.rejects(
    generateText({ model: anthropic('nope'), prompt: 'Hi', maxOutputTokens: 10, maxRetries: 0 }),
    (e) => e.statusCode === 404 && /does not exist/.test(e.message),
  );
});

test("AI SDK's OpenAI-compatible provider: reasoning parts", { skip }, async () => {
  const provider = createOpenAICompatible({
    name: 'autoglm',
    baseURL: `http://127.0.0.1:${port}/v1`,
    apiKey: key,
    fetch: fetchWithGrammar(THINK_THEN_ANSWER),
  });
  const result = await generateText({ model: provider(MODEL), prompt: 'Weather?', maxOutputTokens: 300 });
  assert.equal(result.reasoningText, 'It is sunny.');
  assert.equal(result.text, 'Sunny in Paris.');
});
