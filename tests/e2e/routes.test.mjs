// End-to-end: the official openai client against a server of three models and their routes
// (config/routing.example.yaml's kinds: rules, cascade, split), streamed and not; the route's
// headers and the answering model come back as the client reads them, and SIGHUP reloads
// the split's weights while the server keeps answering.
// Usage: node --test routes.test.mjs  (env AUTOGLM_BIN, AUTOGLM_SHARED)
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import OpenAI from 'openai';
import { skipUnlessShared, startServer } from './serve.mjs';

const shared = process.env.AUTOGLM_SHARED;
const paths = {
  stories: `${shared}/models/stories260K.gguf`,
  random: `${shared}/models/llama-2-tiny-random.gguf`,
  qwen: `${shared}/models/hf/qwen2-tiny`,
};
const have = Object.values(paths).every(existsSync);
let server;
let client;
let config;

function configText(storiesWeight) {
  return `context_window: 256
kv_cache: {memory_mib: 32}
models:
${Object.entries(paths).map(([name, path]) => `  - {name: ${name}, path: ${path}}`).join('\n')}
routes:
  smart:
    rules:
      - if: {last_user_matches: "prove"}
        model: qwen
    default: stories
  auto:
    cascade: {light: random, heavy: stories, tokens: 4, threshold: 1}
  ab:
    split:
      arms: [{model: stories, weight: ${storiesWeight}}, {model: qwen, weight: ${100 - storiesWeight}}]
`;
}

before(async () => {
  if (!have) return;
  config = join(mkdtempSync(join(tmpdir(), 'autoglm-routes-')), 'routes.yaml');
  writeFileSync(config, configText(0));
  const started = startServer(process.env.AUTOGLM_BIN, ['--config', config]);
  server = started.server;
  client = new OpenAI({ baseURL: `http://127.0.0.1:${await started.port}/v1`, apiKey: 'unused', maxRetries: 0 });
});

after(() => server?.kill('SIGTERM'));

const skip = skipUnlessShared(have, 'the three test models');

async function ask(model, content, extra = {}) {
  return client.chat.completions
    .create({ model, messages: [{ role: 'user', content }], max_tokens: 6, temperature: 0, ...extra })
    .withResponse();
}

async function askStreamed(model, content, extra = {}) {
  const { data, response } = await ask(model, content, { ...extra, stream: true });
  let text = '';
  const models = new Set();
  for await (const chunk of data) {
    models.add(chunk.model);
    text += chunk.choices[0]?.delta?.content ?? '';
  }
  return { text, models: [...models], response };
}

test('the models and routes are listed', { skip }, async () => {
  const ids = [];
  for await (const m of client.models.list()) ids.push(m.id);
  assert.deepEqual(ids.sort(), ['ab', 'auto', 'qwen', 'random', 'smart', 'stories']);
});

test('every route answers as a model does', { skip }, async () => {
  const cases = [
    ['smart', 'Hello', 'stories'],
    ['smart', 'prove it', 'qwen'],
    ['auto', 'Hello', 'stories'], // threshold 1: the random light model always escalates
    ['ab', 'Hello', 'qwen'], // weights 0/100
  ];
  for (const [route, content, model] of cases) {
    const direct = await ask(model, content);
    const routed = await ask(route, content);
    assert.equal(routed.data.model, model, route);
    assert.equal(routed.response.headers.get('x-autoglm-model'), model);
    assert.equal(routed.response.headers.get('x-autoglm-route'), route);
    assert.ok(routed.response.headers.get('x-autoglm-route-reason'));
    assert.equal(routed.data.choices[0].message.content, direct.data.choices[0].message.content, route);
    assert.equal(routed.data.object, 'chat.completion');
    assert.ok(routed.data.usage.completion_tokens > 0);

    const streamed = await askStreamed(route, content);
    assert.deepEqual(streamed.models, [model], route);
    assert.equal(streamed.response.headers.get('x-autoglm-model'), model);
    assert.equal(streamed.text, direct.data.choices[0].message.content, route);
  }
});

test('an unknown model is a NotFoundError naming the served ones', { skip }, async () => {
  await assert.rejects(ask('gpt-4', 'Hello'), (e) => e instanceof OpenAI.NotFoundError && /'stories'/.test(e.message));
});

test('SIGHUP reloads the split weights', { skip }, async () => {
  writeFileSync(config, configText(100));
  server.kill('SIGHUP');
  // Before the reload every answer is qwen's (weight 0 for stories): the first of stories's is
  // the reload taking effect.
  let model = '';
  for (const deadline = Date.now() + 60000; model !== 'stories' && Date.now() < deadline; ) {
    model = (await ask('ab', 'Hello', { max_tokens: 1 })).data.model;
    if (model !== 'stories') await new Promise((r) => setTimeout(r, 20));
  }
  assert.equal(model, 'stories', 'the split never moved to stories after SIGHUP');
  for (let i = 0; i < 5; ++i) assert.equal((await ask('ab', 'Hello', { max_tokens: 1 })).data.model, 'stories');
});
