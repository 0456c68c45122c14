// The Open-AutoGLM phone agent as a client, as its phone_agent/model/client.py talks to a server
// (docs/open-autoglm-client.md): the openai SDK with base_url .../v1 and api key "EMPTY", the
// fixed model id autoglm-phone-9b (--served-model-name), the start-up probe (a "Hi" string, 5
// tokens, not streamed), then each step as one streamed POST of the whole history: a system
// prompt, earlier user turns whose screenshots were stripped (text-only part lists), assistant
// turns holding the literal <think>...</think><answer>...</answer> the client writes back, and the
// newest user turn as [a full-resolution PNG screenshot as a data: URL, the task and screen info],
// with temperature 0, top_p 0.85, frequency_penalty 0.2 and max_tokens 3000, on a server with
// reasoning_format none. The model is a random GLM-4.1V-shaped one create-model writes (with its
// projector), each reply forced into the agent's action syntax by this server's `grammar` added
// to the client's body by a fetch wrapper, so the plumbing is tested: the image reaches the
// model (its tokens count in the prompt), every chunk is one the SDK reads, and the client's own
// reply parser (ported below) gets text without the model's special tags and parses each action.
// The client itself is Python and needs the openai package, which Debian does not carry (and
// this machine reaches no PyPI): the npm openai client sends its request shape instead.
// Usage: node-22 --test phone_agent.test.mjs  (env AUTOGLM_BIN)
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { deflateSync } from 'node:zlib';
import OpenAI from 'openai';
import { startServer } from '../e2e/serve.mjs';

const bin = process.env.AUTOGLM_BIN;
const MODEL = 'autoglm-phone-9b';
let server;
let client;
let agent;
let stepIndex = 0;

// Each step's forced reply: some thinking, then one action in the client's syntax.
const ACTIONS = ['do(action="Launch", app="WeChat")', 'do(action="Tap", element=[500,120])', 'finish(message="Done")'];
function withGrammar(url, init) {
  const body = JSON.parse(init.body);
  const reply = `Looking at the screen. ${ACTIONS[stepIndex % ACTIONS.length]}`;
  body.grammar = `root ::= ${JSON.stringify(reply)}`;
  return fetch(url, { ...init, body: JSON.stringify(body) });
}

before(async () => {
  const dir = mkdtempSync(`${tmpdir()}/phone-agent-`);
  const model = `${dir}/autoglm-phone-tiny.gguf`; // its projector: autoglm-phone-tiny.mmproj.gguf beside it
  const made = spawnSync(bin, ['create-model', '--arch', 'glm4v', '--preset', 'tiny', '--type', 'f16', '-o', model]);
  assert.equal(made.status, 0, String(made.stderr));
  // Upstream's recommended context (vLLM --max-model-len 25480).
  const started = startServer(bin, ['-m', model, '--served-model-name', MODEL, '-c', '25480', '--reasoning-format', 'none']);
  server = started.server;
  const port = await started.port;
  client = new OpenAI({ baseURL: `http://127.0.0.1:${port}/v1`, apiKey: 'EMPTY' });
  // The same client, its bodies untouched but for this server's `grammar` (a random model's
  // reply forced into the agent's action syntax; the client itself sends extra_body {}).
  agent = new OpenAI({ baseURL: `http://127.0.0.1:${port}/v1`, apiKey: 'EMPTY', fetch: withGrammar });
});
after(() => server?.kill('SIGTERM'));

// A PNG of w x h (RGB, 8 bits), written here: a status bar, a grid of app icons, a dock.
function screenshotPng(w, h) {
  const crcTable = Array.from({ length: 256 }, (_, n) => {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
    return c >>> 0;
  });
  const crc = (buf) => {
    let c = 0xffffffff;
    for (const b of buf) c = crcTable[(c ^ b) & 0xff] ^ (c >>> 8);
    return (c ^ 0xffffffff) >>> 0;
  };
  const chunk = (type, data) => {
    const out = Buffer.alloc(12 + data.length);
    out.writeUInt32BE(data.length, 0);
    out.write(type, 4, 'ascii');
    data.copy(out, 8);
    out.writeUInt32BE(crc(out.subarray(4, 8 + data.length)), 8 + data.length);
    return out;
  };
  const raw = Buffer.alloc((w * 3 + 1) * h);
  for (let y = 0; y < h; y++) {
    raw[y * (w * 3 + 1)] = 0; // filter: none
    for (let x = 0; x < w; x++) {
      const icon = y > 200 && y < h - 300 && (x % 270) > 60 && (x % 270) < 210 && (y % 300) > 80 && (y % 300) < 230;
      const rgb = y < 80 ? [20, 20, 20] : y > h - 260 ? [60, 60, 70] : icon ? [(x * 7) % 256, (y * 3) % 256, 180] : [235, 240, 245];
      raw.set(rgb, y * (w * 3 + 1) + 1 + x * 3);
    }
  }
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(w, 0);
  ihdr.writeUInt32BE(h, 4);
  ihdr.set([8, 2, 0, 0, 0], 8);
  const png = Buffer.concat([
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    chunk('IHDR', ihdr),
    chunk('IDAT', deflateSync(raw)),
    chunk('IEND', Buffer.alloc(0)),
  ]);
  return `data:image/png;base64,${png.toString('base64')}`;
}

// The client's _parse_response (upstream main's order): finish(message=, then do(action=,
// then <answer>, else the whole text is the action.
function parseResponse(text) {
  for (const marker of ['finish(message=', 'do(action=']) {
    const at = text.indexOf(marker);
    if (at >= 0) return { thinking: text.slice(0, at).trim(), action: text.slice(at) };
  }
  const answer = text.indexOf('<answer>');
  if (answer >= 0)
    return {
      thinking: text.slice(0, answer).replace('<think>', '').replace('</think>', '').trim(),
      action: text.slice(answer + '<answer>'.length).replace('</answer>', '').trim(),
    };
  return { thinking: '', action: text };
}

const SYSTEM =
  'The current date: 2026-12-05, Saturday\n# Setup\nYou are a professional Android operation agent assistant ... ' +
  'Output <think>{think}</think> then <answer>{action}</answer>. Actions: do(action="Tap", element=[x,y]), ' +
  'do(action="Launch", app="xxx"), finish(message="xxx"). Coordinates run from (0,0) to (999,999).';
const screenInfo = (app) => JSON.stringify({ current_app: app });

// The client's request: the SDK's streamed create with its fixed sampling, content pieces joined.
async function step(messages) {
  const stream = await agent.chat.completions.create({
    messages,
    model: MODEL,
    max_tokens: 3000,
    temperature: 0.0,
    top_p: 0.85,
    frequency_penalty: 0.2,
    stream: true,
  });
  let raw = '';
  let chunks = 0;
  let first = null;
  for await (const chunk of stream) {
    chunks++;
    assert.ok(Array.isArray(chunk.choices), 'every chunk has a choices list');
    if (chunk.choices.length === 0) continue;
    assert.ok(chunk.choices[0].delta && typeof chunk.choices[0].delta === 'object', 'every choice has a delta');
    const content = chunk.choices[0].delta.content;
    if (content !== undefined && content !== null) {
      first ??= chunks;
      raw += content;
    }
  }
  assert.ok(first !== null, 'some chunk carries content (the client starts its TTFT there)');
  return raw;
}

test('the start-up probe: a "Hi" string, no system prompt, not streamed', async () => {
  const r = await client.chat.completions.create({
    model: MODEL,
    messages: [{ role: 'user', content: 'Hi' }],
    max_tokens: 5,
    temperature: 0.0,
    stream: false,
  });
  assert.ok(r.choices.length > 0);
  assert.equal(typeof r.choices[0].message.content, 'string');
  assert.equal(r.model, MODEL);
});

test('three agent steps as the client sends them: screenshot in the newest turn, stripped before', async () => {
  const screenshot = screenshotPng(1080, 2400);
  const messages = [{ role: 'system', content: SYSTEM }];
  let lastPromptTokens = 0;
  for (const [i, app] of ['System Home', '微信', '微信'].entries()) {
    stepIndex = i;
    const text = i === 0 ? `Open WeChat and message Li Lei\n\n${screenInfo(app)}` : `** Screen Info **\n\n${screenInfo(app)}`;
    messages.push({ role: 'user', content: [{ type: 'image_url', image_url: { url: screenshot } }, { type: 'text', text }] });
    const raw = await step(messages);
    for (const tag of ['<think>', '</think>', '<answer>', '</answer>'])
      assert.ok(!raw.includes(tag), `the model's special ${tag} is not in the content (vLLM's skip_special_tokens)`);
    const { thinking, action } = parseResponse(raw);
    // The client's parse_action: a do(...) call with keyword arguments, or finish(message=...).
    assert.equal(action, ACTIONS[i], `step ${i + 1}: the action the client executes`);
    assert.match(action, /^(do\((\w+=("[^"]*"|\[\d+,\d+\])(, )?)+\)|finish\(message=".*"\))$/);
    assert.equal(thinking, 'Looking at the screen.');
    // The same request unstreamed tells how many prompt tokens the screenshot took.
    const probe = await client.chat.completions.create({ model: MODEL, messages, max_tokens: 1, temperature: 0.0 });
    lastPromptTokens = probe.usage.prompt_tokens;
    // The client writes the turn back with the tags, and strips the screenshot from the user turn.
    messages.push({ role: 'assistant', content: `<think>${thinking}</think><answer>${action}</answer>` });
    messages[messages.length - 2].content = messages[messages.length - 2].content.filter((p) => p.type === 'text');
  }
  // 1080x2400 resized to 1092x2408 (GLM-4.1V's processor): 39 x 86 = 3354 image tokens in the newest turn.
  assert.ok(lastPromptTokens > 3354, `prompt tokens ${lastPromptTokens} hold the screenshot's 3354`);
});

test('a bad screenshot is a 400 naming the part, and the server goes on', async () => {
  await assert.rejects(
    client.chat.completions.create({
      model: MODEL,
      messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'data:image/png;base64,AAAA' } }, { type: 'text', text: 'x' }] }],
      max_tokens: 3,
    }),
    (e) => e.status === 400 && /messages\[0\]\.content\[0\]/.test(e.message),
  );
  const r = await client.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'Hi' }], max_tokens: 2 });
  assert.ok(r.choices.length > 0);
});
