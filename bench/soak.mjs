#!/usr/bin/env node
// soak: starts `autoglm serve` and, for a bounded time, has N clients mix normal chat
// requests with hostile ones (malformed JSON, 10^5-deep nesting, 8 MiB bodies, grammar
// bombs, marker-dense text, slow readers, clients that disconnect mid-stream). Reports the
// errors of the normal requests, their latency percentiles, and the server's RSS after
// warm-up and at the end. Loopback only. Node.js 18+, no dependencies.
//
//   node bench/soak.mjs --bin build/src/cli/autoglm --model ../shared/models/stories260K.gguf --seconds 60 -c 8
import { readFileSync } from 'node:fs';
import net from 'node:net';
import { parseArgs } from 'node:util';
import { startServer } from '../tests/e2e/serve.mjs';

const { values: o } = parseArgs({
  options: {
    bin: { type: 'string', default: 'build/src/cli/autoglm' },
    model: { type: 'string', default: '../shared/models/stories260K.gguf' },
    seconds: { type: 'string', default: '30' },
    concurrency: { type: 'string', short: 'c', default: '8' },
  },
});
const seconds = Number(o.seconds), clients = Number(o.concurrency);

const { server, port: started } = startServer(o.bin, ['-m', o.model]);
const port = await started;
let restarted = false;
server.on('exit', () => { restarted = true; });
const rssKiB = () => Number(readFileSync(`/proc/${server.pid}/status`, 'utf8').match(/VmRSS:\s+(\d+)/)[1]);
const url = `http://127.0.0.1:${port}`;

const chat = (content, extra = {}) =>
  JSON.stringify({ messages: [{ role: 'user', content }], max_tokens: 16, temperature: 0, ...extra });
const hostile = [
  () => fetch(`${url}/v1/chat/completions`, { method: 'POST', body: '{"messages": [' }),
  () => fetch(`${url}/v1/chat/completions`, { method: 'POST', body: `{"messages": ${'['.repeat(100000)}${']'.repeat(100000)}}` }),
  () => fetch(`${url}/v1/completions`, { method: 'POST', body: JSON.stringify({ prompt: 'a'.repeat(8 << 20) }) }),
  () => fetch(`${url}/v1/chat/completions`, { method: 'POST', body: chat('hi', { grammar: 'root ::=' + ' "a"{0,10000}'.repeat(300) }) }),
  () => fetch(`${url}/tokenize`, { method: 'POST', body: JSON.stringify({ content: '<unk>x'.repeat(20000) }) }),
  () => new Promise((resolve) => {  // a slow reader: asks for a stream, reads nothing for a while
    const s = net.connect(port, '127.0.0.1', () => {
      const body = chat('Once upon a time', { stream: true, max_tokens: 64 });
      s.write(`POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: ${body.length}\r\n\r\n${body}`);
      s.pause();
      setTimeout(() => { s.destroy(); resolve(); }, 2000);
    });
    s.on('error', resolve);
  }),
  () => new Promise((resolve) => {  // disconnects mid-stream
    const s = net.connect(port, '127.0.0.1', () => {
      const body = chat('Once upon a time', { stream: true, max_tokens: 64 });
      s.write(`POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: ${body.length}\r\n\r\n${body}`);
      s.once('data', () => { s.destroy(); resolve(); });
    });
    s.on('error', resolve);
  }),
];

const latencies = [];
let normalErrors = 0, normal = 0, hostileSent = 0;
const end = Date.now() + seconds * 1000;
let warmRss = 0;
setTimeout(() => { warmRss = rssKiB(); }, Math.min(5000, (seconds * 1000) / 4));

async function client(i) {
  for (let k = 0; Date.now() < end; ++k) {
    if ((i + k) % 2 === 0) {
      const t0 = performance.now();
      try {
        const r = await fetch(`${url}/v1/chat/completions`, { method: 'POST', body: chat(`Tell a story ${k}`) });
        await r.text();
        if (r.status !== 200) ++normalErrors;
      } catch { ++normalErrors; }
      latencies.push(performance.now() - t0);
      ++normal;
    } else {
      ++hostileSent;
      try { const r = await hostile[(i * 7 + k) % hostile.length](); if (r?.text) await r.text(); } catch { /* expected */ }
    }
  }
}
await Promise.all(Array.from({ length: clients }, (_, i) => client(i)));
const endRss = rssKiB();
server.kill('SIGTERM');
latencies.sort((a, b) => a - b);
const p = (q) => latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))].toFixed(1);
console.log(`soak ${seconds}s, ${clients} clients: ${normal} normal requests (${normalErrors} failed), ${hostileSent} hostile`);
console.log(`normal latency ms: p50 ${p(0.5)} p90 ${p(0.9)} p99 ${p(0.99)}`);
console.log(`server RSS: ${warmRss} KiB after warm-up, ${endRss} KiB at the end; restarted: ${restarted}`);
process.exit(normalErrors === 0 && !restarted ? 0 : 1);
