#!/usr/bin/env node
// batch-latency: time to first token of interactive requests on an idle server, then while a
// batch runs (the Batch API's lines are jobs at the jobs' low priority). Reports both p50s and
// their ratio; the batch must still be running when the loaded samples end. Node 18+, no
// dependencies. The server needs jobs.data_dir.
//
//   node bench/batch_latency.mjs --url http://127.0.0.1:8080 --batch 200 -n 20
import { parseArgs } from 'node:util';

const { values: o } = parseArgs({
  options: {
    url: { type: 'string', default: 'http://127.0.0.1:8080' },
    'api-key': { type: 'string', default: '' },
    n: { type: 'string', short: 'n', default: '20' },
    batch: { type: 'string', default: '200' },
    'batch-tokens': { type: 'string', default: '128' },
    'prompt-words': { type: 'string', default: '48' },
  },
});
const headers = { 'content-type': 'application/json', ...(o['api-key'] ? { authorization: `Bearer ${o['api-key']}` } : {}) };
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const words = 'the cat sat on a mat and saw one big red dog run far away from home'.split(' ');
const prompt = (i, n) => Array.from({ length: n }, (_, k) => words[(i * 7 + k * 3) % words.length]).join(' ');

// Milliseconds from sending a streamed chat request to its first content chunk.
async function ttft(i) {
  const started = performance.now();
  const r = await fetch(`${o.url}/v1/chat/completions`, {
    method: 'POST', headers,
    body: JSON.stringify({ messages: [{ role: 'user', content: prompt(i, Number(o['prompt-words'])) }], max_tokens: 8, temperature: 0, stream: true }),
  });
  const reader = r.body.getReader();
  let first = null;
  for (let text = ''; ;) {
    const { value, done } = await reader.read();
    if (done) break;
    text += new TextDecoder().decode(value);
    if (first === null && /"content":"[^"]/.test(text)) first = performance.now() - started;
  }
  if (first === null) throw new Error(`request ${i}: no content (HTTP ${r.status})`);
  return first;
}

async function sample(offset) {
  const out = [];
  for (let i = 0; i < Number(o.n); ++i) {
    out.push(await ttft(offset + i));
    await sleep(50);
  }
  return out;
}

const p50 = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

async function main() {
  await sample(1000); // warm up
  const idle = await sample(0);
  const jsonl = Array.from({ length: Number(o.batch) }, (_, i) => JSON.stringify({
    custom_id: `b${i}`, method: 'POST', url: '/v1/completions',
    body: { prompt: prompt(i + 500, 32), max_tokens: Number(o['batch-tokens']), ignore_eos: true },
  })).join('\n');
  const form = new FormData();
  form.append('purpose', 'batch');
  form.append('file', new Blob([jsonl]), 'bench.jsonl');
  const file = await (await fetch(`${o.url}/v1/files`, { method: 'POST', headers: { authorization: headers.authorization ?? '' }, body: form })).json();
  const batch = await (await fetch(`${o.url}/v1/batches`, {
    method: 'POST', headers, body: JSON.stringify({ input_file_id: file.id, endpoint: '/v1/completions', completion_window: '24h' }),
  })).json();
  const status = async () => (await fetch(`${o.url}/v1/batches/${batch.id}`, { headers })).json();
  while ((await status()).request_counts.completed < 2) await sleep(100);
  const before = await status();
  const loaded = await sample(0);
  const after = await status();
  await fetch(`${o.url}/v1/batches/${batch.id}/cancel`, { method: 'POST', headers });
  console.log(JSON.stringify({
    idle_ttft_p50_ms: +p50(idle).toFixed(1),
    loaded_ttft_p50_ms: +p50(loaded).toFixed(1),
    ratio: +(p50(loaded) / p50(idle)).toFixed(2),
    batch_lines_done_during_sampling: after.request_counts.completed - before.request_counts.completed,
    batch_still_running: after.status === 'in_progress',
  }));
  if (after.status !== 'in_progress') process.exitCode = 1; // the loaded samples did not all run beside the batch
}
main().catch((e) => { console.error(e); process.exit(1); });
