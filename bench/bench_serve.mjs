#!/usr/bin/env node
// bench-serve: replays requests against any OpenAI-compatible server (autoglm serve,
// llama.cpp server, vLLM...) at a fixed concurrency or a Poisson arrival rate, and
// reports throughput and latency percentiles. Node.js 18+, no dependencies.
//
//   node bench/bench_serve.mjs --url http://127.0.0.1:8080 -n 64 -c 16 --prompt-len 128 --output-len 64
//   node bench/bench_serve.mjs --url ... --rate 2 -n 32            (Poisson arrivals, 2 requests/s)
//   node bench/bench_serve.mjs --url ... --turns 4 -c 4 -n 16      (multi-turn chats: n conversations)
//   node bench/bench_serve.mjs --url ... --turns 3 -n 8 --returning (round by round: each conversation returns
//        after the other n - 1 took their turn, so that with enough of them its KV left the server's pool)
import { parseArgs } from 'node:util';

const { values: o } = parseArgs({
  options: {
    url: { type: 'string', default: 'http://127.0.0.1:8080' },
    model: { type: 'string', default: '' },
    'api-key': { type: 'string', default: '' },
    n: { type: 'string', short: 'n', default: '32' },
    concurrency: { type: 'string', short: 'c', default: '4' },
    rate: { type: 'string', default: '' },
    'prompt-len': { type: 'string', default: '64' },       // words; "a:b" draws uniformly
    'output-len': { type: 'string', default: '64' },       // max_tokens; "a:b" draws uniformly
    turns: { type: 'string', default: '1' },
    returning: { type: 'boolean', default: false },
    seed: { type: 'string', default: '1' },
    temperature: { type: 'string', default: '0' },
    help: { type: 'boolean', short: 'h', default: false },
  },
});
if (o.help) {
  console.log('options: --url --model --api-key -n -c/--concurrency --rate --prompt-len N|a:b --output-len N|a:b --turns T --returning --seed --temperature');
  process.exit(0);
}

let state = BigInt(o.seed) * 6364136223846793005n + 1442695040888963407n;
const random = () => {  // 64-bit LCG: the same workload for the same seed
  state = (state * 6364136223846793005n + 1442695040888963407n) & ((1n << 64n) - 1n);
  return Number(state >> 11n) / 2 ** 53;
};
const draw = (spec) => {
  const [a, b] = spec.split(':').map(Number);
  return b === undefined ? a : a + Math.floor(random() * (b - a + 1));
};
const words = 'the a little girl boy dog cat sun park tree ball red big happy sad ran saw said played found went home friend mom day time once upon toy box water sky bird flower'.split(' ');
const text = (n) => Array.from({ length: n }, () => words[Math.floor(random() * words.length)]).join(' ');

const headers = { 'Content-Type': 'application/json' };
if (o['api-key']) headers.Authorization = `Bearer ${o['api-key']}`;
let model = o.model;
if (!model) {
  const r = await fetch(`${o.url}/v1/models`, { headers });
  model = (await r.json()).data[0].id;
}

// One streamed chat request; returns its timings and token counts.
async function chat(messages, maxTokens) {
  const t0 = performance.now();
  const r = await fetch(`${o.url}/v1/chat/completions`, {
    method: 'POST', headers,
    body: JSON.stringify({ model, messages, max_tokens: maxTokens, temperature: Number(o.temperature), stream: true,
                           stream_options: { include_usage: true } }),
  });
  if (!r.ok) return { error: `${r.status} ${await r.text()}` };
  const decoder = new TextDecoder();
  let buf = '', content = '', first = null, last = null, usage = null;
  const gaps = [];
  for await (const chunk of r.body) {
    buf += decoder.decode(chunk, { stream: true });
    let i;
    while ((i = buf.indexOf('\n\n')) >= 0) {
      const line = buf.slice(0, i).trim();
      buf = buf.slice(i + 2);
      if (!line.startsWith('data:')) continue;
      const data = line.slice(5).trim();
      if (data === '[DONE]') continue;
      const j = JSON.parse(data);
      if (j.usage) usage = j.usage;
      const delta = j.choices?.[0]?.delta?.content;
      if (delta) {
        const now = performance.now();
        if (first === null) first = now; else gaps.push(now - last);
        last = now;
        content += delta;
      }
    }
  }
  const end = performance.now();
  return { ttft: first === null ? null : first - t0, gaps, e2e: end - t0, content,
           output: usage?.completion_tokens ?? 0, cached: usage?.prompt_tokens_details?.cached_tokens ?? 0,
           prompt: usage?.prompt_tokens ?? 0 };
}

const conversations = Number(o.n), turns = Number(o.turns);
if (o.returning && o.rate) {
  console.error('--returning runs round by round at a concurrency: leave --rate out');
  process.exit(2);
}
const jobs = Array.from({ length: conversations }, () => ({
  messages: [],
  failed: false,
  turns: Array.from({ length: turns }, () => ({ prompt: text(draw(o['prompt-len'])), max: draw(o['output-len']) })),
}));
const results = [];
const errors = [];
// One turn of a conversation: its user message, then the reply kept for the next turn.
async function runTurn(job, index) {
  if (job.failed) return;
  const turn = job.turns[index];
  job.messages.push({ role: 'user', content: turn.prompt });
  const r = await chat(job.messages, turn.max);
  if (r.error) {
    errors.push(r.error);
    job.failed = true;
    return;
  }
  results.push({ ...r, turn: index });
  job.messages.push({ role: 'assistant', content: r.content });
}
async function runConversation(job) {
  for (let index = 0; index < turns; ++index) await runTurn(job, index);
}
// Runs task(item) for each item, `concurrency` at a time.
async function pool(items, concurrency, task) {
  let next = 0;
  const worker = async () => { while (next < items.length) await task(items[next++]); };
  await Promise.all(Array.from({ length: concurrency }, worker));
}

const t0 = performance.now();
if (o.rate) {
  const rate = Number(o.rate);
  const running = [];
  for (const job of jobs) {
    running.push(runConversation(job));
    await new Promise((res) => setTimeout(res, (-Math.log(1 - random()) / rate) * 1000));
  }
  await Promise.all(running);
} else if (o.returning) {
  for (let index = 0; index < turns; ++index) await pool(jobs, Number(o.concurrency), (job) => runTurn(job, index));
} else {
  await pool(jobs, Number(o.concurrency), runConversation);
}
const seconds = (performance.now() - t0) / 1000;

const pct = (xs, p) => {
  if (!xs.length) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))];
};
const row = (name, xs) => console.log(`${name.padEnd(22)} ${[50, 90, 99].map((p) => pct(xs, p).toFixed(1).padStart(9)).join(' ')}`);
const outTokens = results.reduce((a, r) => a + r.output, 0);
const promptTokens = results.reduce((a, r) => a + r.prompt, 0);
const cachedTokens = results.reduce((a, r) => a + r.cached, 0);
console.log(`server ${o.url}  model ${model}`);
console.log(`requests ${results.length} ok, ${errors.length} failed; ${o.rate ? `rate ${o.rate}/s` : `concurrency ${o.concurrency}`}; turns ${turns}`);
console.log(`duration ${seconds.toFixed(2)} s; throughput ${(results.length / seconds).toFixed(3)} req/s, ${(outTokens / seconds).toFixed(2)} output tok/s`);
console.log(`prompt tokens ${promptTokens}, cached by the server ${cachedTokens} (${promptTokens ? ((100 * cachedTokens) / promptTokens).toFixed(1) : 0}%)`);
console.log(`${'latency (ms)'.padEnd(22)} ${['p50', 'p90', 'p99'].map((s) => s.padStart(9)).join(' ')}`);
row('time to first token', results.map((r) => r.ttft).filter((x) => x !== null));
row('inter-token latency', results.flatMap((r) => r.gaps));
row('end to end', results.map((r) => r.e2e));
if (turns > 1) {
  row('TTFT, first turns', results.filter((r) => r.turn === 0).map((r) => r.ttft).filter((x) => x !== null));
  const later = results.filter((r) => r.turn > 0);
  row(o.returning ? 'TTFT, returning turns' : 'TTFT, later turns', later.map((r) => r.ttft).filter((x) => x !== null));
  const laterPrompt = later.reduce((a, r) => a + r.prompt, 0), laterCached = later.reduce((a, r) => a + r.cached, 0);
  console.log(`${o.returning ? 'returning' : 'later'} turns: prompt tokens ${laterPrompt}, cached by the server ${laterCached} ` +
              `(${laterPrompt ? ((100 * laterCached) / laterPrompt).toFixed(1) : 0}%)`);
}
if (errors.length) console.log(`first error: ${errors[0]}`);
process.exit(errors.length ? 1 : 0);
