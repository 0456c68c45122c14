// The web UI in a real browser (Debian's chromium, headless, driven by puppeteer-core) against
// `autoglm serve` with API keys: the chat page streams an answer equal to the API's own, follows
// a JSON schema, shows a forced tool call; the dashboard plots the server's live metrics. Both
// pages are screenshotted (PNG) into AUTOGLM_SCREENSHOTS (the build folder under ctest).
// Usage: node-22 --test playground.test.mjs  (env AUTOGLM_BIN, AUTOGLM_SHARED; CHROMIUM optional)
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, mkdtempSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import Ajv from 'ajv';
import { skipUnlessShared, startServer } from '../e2e/serve.mjs';

const shared = process.env.AUTOGLM_SHARED;
const stories = `${shared}/models/stories260K.gguf`;
const qwen = `${shared}/models/hf/qwen2-tiny`;
const glm46 = fileURLToPath(new URL('../data/chat_templates/glm-4.6.jinja', import.meta.url));
const key = 'sk-playground-test';
const shots = process.env.AUTOGLM_SCREENSHOTS ?? mkdtempSync(join(tmpdir(), 'autoglm-shots-'));
let server, base, browser;

function findChromium() {
  for (const p of [process.env.CHROMIUM, '/usr/bin/chromium', '/usr/bin/chromium-browser'])
    if (p && existsSync(p)) return p;
  if (process.env.CI === 'true') throw new Error('chromium is absent, in CI');
  return undefined;
}

const skip = skipUnlessShared(existsSync(stories) && existsSync(`${qwen}/config.json`), `${shared}/models`) ||
  (!findChromium() && 'chromium is absent');

before(async () => {
  if (skip) return;
  const dir = mkdtempSync(join(tmpdir(), 'autoglm-playground-'));
  writeFileSync(join(dir, 'serve.yaml'), `api_keys: [${key}]
metrics_require_key: true
access_log: ""
models:
  - {name: stories, path: ${stories}}
  - {name: qwen2-tiny, path: ${qwen}}
  - {name: thinker, path: ${stories}, chat_template: ${glm46}}
`);
  const started = startServer(process.env.AUTOGLM_BIN, ['--config', join(dir, 'serve.yaml')]);
  server = started.server;
  base = `http://127.0.0.1:${await started.port}`;
  const { default: puppeteer } = await import('puppeteer-core');
  browser = await puppeteer.launch({
    executablePath: findChromium(),
    args: ['--no-sandbox', '--headless=new', '--disable-gpu', '--no-first-run', '--disable-background-networking',
      '--disable-component-update', '--disable-sync', '--window-size=1280,900'],
    defaultViewport: { width: 1280, height: 900 },
  });
  mkdirSync(shots, { recursive: true });
});

after(async () => {
  await browser?.close();
  server?.kill('SIGTERM');
});

// A page of the UI whose errors (script errors, CSP refusals, failed loads) are collected.
async function open(path) {
  const page = await browser.newPage();
  const errors = [];
  page.on('pageerror', (e) => errors.push(`pageerror: ${e.message}`));
  page.on('console', (m) => { if (m.type() === 'error') errors.push(`console: ${m.text()}`); });
  page.on('requestfailed', (r) => errors.push(`failed: ${r.url()} ${r.failure()?.errorText}`));
  await page.goto(`${base}${path}`, { waitUntil: 'networkidle0' });
  return { page, errors };
}

async function setValue(page, selector, value) {
  await page.$eval(selector, (el, v) => {
    el.value = v;
    el.dispatchEvent(new Event('change'));
  }, value);
}

// Sends a message from the chat page; resolves to the new assistant message's text, finish and tool calls.
async function send(page, text) {
  const before = await page.$$eval('.message.assistant', (els) => els.length);
  await page.type('#prompt', text);
  await page.click('#send');
  await page.waitForFunction((n) => {
    const els = document.querySelectorAll('.message.assistant');
    return els.length > n && els[els.length - 1].dataset.finish;
  }, { timeout: 60000 }, before);
  return page.$$eval('.message.assistant', (els) => {
    const last = els[els.length - 1];
    return { text: last.querySelector('.content').textContent, finish: last.dataset.finish,
      calls: [...last.querySelectorAll('.tool-call')].map((c) => c.textContent),
      status: document.getElementById('status').textContent };
  });
}

test('chat: streams the answer the API gives, follows a schema, shows a tool call', { skip, timeout: 180000 }, async () => {
  const { page, errors } = await open('/');
  // Without the key the model list cannot load, and the page says why.
  await page.waitForFunction(() => document.getElementById('status').textContent.includes('API key'));
  await setValue(page, '#api-key', key);
  await page.waitForFunction(() => document.querySelectorAll('#model option').length === 3);
  const options = await page.$$eval('#model option', (os) => os.map((o) => o.value));
  assert.deepEqual(options, ['stories', 'qwen2-tiny', 'thinker']);
  await page.select('#model', 'stories');
  await setValue(page, '#temperature', '0');
  await setValue(page, '#max-tokens', '24');
  const answer = await send(page, 'Once upon a time');
  assert.equal(answer.finish, 'length', answer.status);
  assert.ok(answer.text.length > 0);
  // The same request through the API, whole: the streamed text in the page is the same.
  const direct = await fetch(`${base}/v1/chat/completions`, {
    method: 'POST', headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${key}` },
    body: JSON.stringify({ model: 'stories', messages: [{ role: 'user', content: 'Once upon a time' }], temperature: 0, top_p: 1,
      max_tokens: 24 }) }).then((r) => r.json());
  assert.equal(answer.text, direct.choices[0].message.content);
  await page.screenshot({ path: join(shots, 'playground-chat.png') });

  // JSON-schema mode: the answer parses and validates.
  await page.click('#clear');
  const schema = { type: 'object', properties: { mood: { enum: ['happy', 'sad'] } }, required: ['mood'], additionalProperties: false };
  await setValue(page, '#schema', JSON.stringify(schema));
  await setValue(page, '#max-tokens', '64');
  const structured = await send(page, 'How do you feel?');
  assert.equal(structured.finish, 'stop', structured.status);
  assert.ok(new Ajv().validate(schema, JSON.parse(structured.text)), structured.text);

  // Tools on the Hugging Face model, the call forced: it is shown with its arguments.
  await page.click('#clear');
  await setValue(page, '#schema', '');
  await page.select('#model', 'qwen2-tiny');
  const tools = [{ type: 'function', function: { name: 'get_weather', description: 'The weather in a city',
    parameters: { type: 'object', properties: { city: { enum: ['Paris', 'Oslo'] } }, required: ['city'] } } }];
  await setValue(page, '#tools', JSON.stringify(tools));
  await page.select('#tool-choice', 'required');
  const called = await send(page, 'What is the weather in Paris?');
  assert.equal(called.finish, 'tool_calls', called.status);
  assert.equal(called.calls.length, 1);
  assert.match(called.calls[0], /^get_weather\(\{"city": ?"(Paris|Oslo)"\}\)$/);
  await page.screenshot({ path: join(shots, 'playground-tools.png') });

  // A settings box that is not JSON is named, and nothing is sent.
  await setValue(page, '#tools', '[{');
  await page.type('#prompt', 'again');
  await page.click('#send');
  await page.waitForFunction(() => document.getElementById('status').textContent.startsWith('tools:'));
  assert.deepEqual(errors.filter((e) => !e.includes('401')), []);
});

// A thinking model (stories260K under GLM-4.6's template), its reply forced by a grammar the page
// does not know of (added to the request on its way out): the reasoning is folded above the answer.
test('chat: a thinking model\'s reasoning is folded above its answer', { skip, timeout: 120000 }, async () => {
  const { page, errors } = await open('/');
  await setValue(page, '#api-key', key);
  await page.waitForFunction(() => document.querySelectorAll('#model option').length === 3);
  await page.select('#model', 'thinker');
  await setValue(page, '#max-tokens', '128');
  await page.setRequestInterception(true);
  page.on('request', (req) => {
    if (!req.url().endsWith('/v1/chat/completions')) return req.continue();
    const body = JSON.parse(req.postData());
    body.grammar = 'root ::= "<think>The user greets me.</think>\\nHello!"';
    return req.continue({ postData: JSON.stringify(body) });
  });
  const answer = await send(page, 'Hi');
  assert.equal(answer.finish, 'stop', answer.status);
  assert.equal(answer.text, 'Hello!');
  const fold = await page.$eval('.message.assistant details.reasoning', (d) => ({
    open: d.open,
    text: d.querySelector('.reasoning-text').textContent,
    first: d.parentElement.firstElementChild === d,
  }));
  assert.deepEqual(fold, { open: false, text: 'The user greets me.', first: true });
  await page.screenshot({ path: join(shots, 'playground-reasoning.png') });
  assert.deepEqual(errors, []);
});

test('dashboard: plots the live metrics, with the key', { skip, timeout: 120000 }, async () => {
  // The key typed on the chat page is this origin's: the dashboard uses it too.
  const { page, errors } = await open('/dashboard');
  await page.waitForFunction(() => Number(document.body.dataset.scrapes || 0) >= 2, { timeout: 30000 });
  // Streams while the dashboard watches, until its throughput tile shows them.
  const generating = () => [...document.querySelectorAll('.tile')].some((t) =>
    t.querySelector('span').textContent === 'generated tok/s' && Number(t.querySelector('b').textContent) > 0);
  let seen = false;
  const load = async () => {
    while (!seen && !(await page.evaluate(generating)))
      await Promise.all([1, 2, 3].map((i) => fetch(`${base}/v1/completions`, {
        method: 'POST', headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${key}` },
        body: JSON.stringify({ model: 'stories', prompt: `Tale ${i}`, max_tokens: 2000, ignore_eos: true, stream: true }),
      }).then((r) => r.text())));
  };
  const loading = load();
  await page.waitForFunction(generating, { timeout: 60000 });
  seen = true;
  await loading;
  const tiles = await page.$$eval('.tile', (ts) => Object.fromEntries(ts.map((t) =>
    [t.querySelector('span').textContent, t.querySelector('b').textContent])));
  assert.match(tiles['requests running'], /^\d+$/);
  // The models card: each served model with its status.
  const models = await page.$$eval('#models tr', (rows) => rows.map((r) => [...r.cells].map((c) => c.textContent)));
  assert.deepEqual(models[0], ['model', 'status', 'in use', 'detail']);
  assert.ok(models.some((r) => r[0] === 'stories' && r[1] === 'loaded'), JSON.stringify(models));
  assert.match(tiles['KV cache used'], /^\d+\.\d %$/);
  // The TTFT histogram has the chat test's requests: its canvas has bars drawn.
  const painted = await page.$eval('#ttft', (c) => {
    const data = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
    let n = 0;
    for (let i = 0; i < data.length; i += 4) if (data[i + 3] > 0) ++n;
    return n;
  });
  assert.ok(painted > 500, `the TTFT chart is nearly blank (${painted} pixels)`);
  await page.screenshot({ path: join(shots, 'playground-dashboard.png') });
  for (const f of ['playground-chat.png', 'playground-tools.png', 'playground-dashboard.png'])
    assert.ok(statSync(join(shots, f)).size > 10000, `${f} is missing or empty`);
  assert.deepEqual(errors, []);
  // A wrong key: the dashboard says so instead of plotting stale data.
  await page.evaluate(() => localStorage.setItem('autoglm.apiKey', 'wrong'));
  await page.reload({ waitUntil: 'networkidle0' });
  await page.waitForFunction(() => document.getElementById('status').textContent.includes('401'));
});
