#!/usr/bin/env node
// isolation: does one client's worst input slow down everyone else? Starts `autoglm serve`,
// measures a "victim" client's small chat requests on the idle server, then again while an
// attacker (a separate process, so its CPU work is not counted in the victim's timings)
// sends the worst inputs of each kind: 10^5-deep JSON, grammar bombs, JSON Schema pattern bombs,
// marker-dense text, 8 MiB bodies, large prompts that are slow to tokenize, header-only bodies
// announcing 8 MiB, and slowloris connections up to the connection limit. Reports both latency
// distributions, the p99 ratio (the goal: within 2x), /health's latency under attack (the goal:
// always under 1 s), and whether the server restarted.
// Loopback only. Node.js 18+, no dependencies.
//
//   node bench/isolation.mjs --bin build/src/cli/autoglm --model ../shared/models/stories260K.gguf --seconds 20
import { fork } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import os, { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { startServer } from '../tests/e2e/serve.mjs';

const { values: o } = parseArgs({
  options: {
    bin: { type: 'string', default: 'build/src/cli/autoglm' },
    model: { type: 'string', default: '../shared/models/stories260K.gguf' },
    seconds: { type: 'string', default: '20' },
    'max-connections': { type: 'string', default: '256' },
    kinds: { type: 'string', default: 'deep,bomb,stacks,pattern,unk,markers,huge,slowprompt,headeronly,slowloris' },
    attacker: { type: 'string' },  // internal: the attacker process's target URL
  },
});

const chat = (content, extra = {}) =>
  JSON.stringify({ messages: [{ role: 'user', content }], max_tokens: 8, temperature: 0, ...extra });

if (o.attacker) {
  // The attacker stands in for remote clients: at the lowest priority, its own CPU work
  // (building 8 MiB bodies) takes as little as possible from the server on a small machine.
  os.setPriority(19);
  await attack(new URL(o.attacker), Number(o['max-connections']) - 16, Number(o.seconds), o.kinds.split(','));
  process.exit(0);
}

// Words of a children's story, drawn at random: text whose tokenization takes the longest per byte.
function storyText(bytes) {
  const words = 'the a little girl boy dog cat sun park tree ball red big happy sad ran saw said played found'.split(' ');
  const parts = [];
  for (let n = 0; n < bytes;) {
    const w = words[Math.floor(Math.random() * words.length)];
    parts.push(w);
    n += w.length + 1;
  }
  return parts.join(' ');
}

// ---- the attacker (a child process) ----
async function attack(url, slowConnections, seconds, wanted) {
  const post = (path, body) => fetch(new URL(path, url), { method: 'POST', body }).then((r) => r.text()).catch(() => {});
  const all = {
    deep: () => post('/v1/chat/completions', `{"messages": ${'['.repeat(100000)}${']'.repeat(100000)}}`),
    bomb: () => post('/v1/chat/completions', chat('hi', { grammar: 'root ::=' + ' "a"{0,10000}'.repeat(300) })),
    stacks: () => {
      let g = 'root ::= a0\n';
      for (let k = 0; k < 18; ++k) g += `a${k} ::= a${k + 1} "0" | a${k + 1} "1"\n`;
      return post('/v1/chat/completions', chat('hi', { grammar: g + 'a18 ::= "x"\n' }));
    },
    unk: () => post('/tokenize', JSON.stringify({ content: '<unk>x'.repeat(100000) })),
    markers: () => post('/v1/chat/completions', chat('<|im_start|>'.repeat(50000))),
    huge: () => post('/v1/completions', JSON.stringify({ prompt: 'a'.repeat(8 << 20) })),
    pattern: () => post('/v1/chat/completions', chat('hi', {
      response_format: { type: 'json_schema',
                         json_schema: { name: 'p', schema: { type: 'string', pattern: '^(c{1,100}){1,100}$' } } },
    })),
    slowprompt: () => post('/v1/completions', JSON.stringify({ prompt: storyText(6800000) })),
  };
  const headerOnly = () => new Promise((resolve) => {  // a body announced, never sent
    const s = net.connect(Number(url.port), url.hostname, () => {
      s.write(`POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: ${8 << 20}\r\n\r\n`);
      resolve();
    });
    s.on('error', () => resolve());
    s.on('close', () => { if (Date.now() < end) headerOnly(); });  // the server let go: announce again
    sockets.push(s);
  });
  const kinds = wanted.filter((k) => all[k]).map((k) => all[k]);
  const sockets = [];
  const slowloris = () => new Promise((resolve) => {  // headers one byte at a time, never finished
    const s = net.connect(Number(url.port), url.hostname, () => {
      s.write('POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n');
      const timer = setInterval(() => s.write('X'), 1000);
      s.on('close', () => clearInterval(timer));
      resolve();
    });
    s.on('error', () => resolve());
    sockets.push(s);
  });
  const end = Date.now() + seconds * 1000;
  const announcing = wanted.includes('headeronly') ? 64 : 0;
  for (let i = 0; i < announcing; ++i) await headerOnly();
  if (wanted.includes('slowloris')) for (let i = 0; i < slowConnections - announcing; ++i) await slowloris();
  const loops = Array.from({ length: 2 }, async (_, w) => {
    for (let k = w; Date.now() < end && kinds.length; k += 2) await kinds[k % kinds.length]();
  });
  await Promise.all(loops);
  await new Promise((r) => setTimeout(r, Math.max(0, end - Date.now())));
  for (const s of sockets) s.destroy();
}

// ---- the victim and the server ----
const dir = mkdtempSync(join(tmpdir(), 'isolation-'));
const config = join(dir, 'config.yaml');
writeFileSync(config, `max_connections: ${o['max-connections']}\n`);
const { server, port: started } = startServer(o.bin, ['-m', o.model, '--config', config]);
const port = await started;
let restarted = false;
server.on('exit', () => { restarted = true; });
const url = `http://127.0.0.1:${port}`;

async function victim(seconds) {
  const latencies = [];
  let failed = 0;
  const end = Date.now() + seconds * 1000;
  for (let k = 0; Date.now() < end; ++k) {
    const t0 = performance.now();
    try {
      const r = await fetch(`${url}/v1/chat/completions`, { method: 'POST', body: chat(`Tell a story ${k}`) });
      await r.text();
      if (r.status !== 200) ++failed;
    } catch { ++failed; }
    latencies.push(performance.now() - t0);
  }
  latencies.sort((a, b) => a - b);
  const p = (q) => latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))];
  return { n: latencies.length, failed, p50: p(0.5), p90: p(0.9), p99: p(0.99) };
}

const seconds = Number(o.seconds);
await victim(2);  // warm-up
const idle = await victim(seconds);
const attacker = fork(new URL(import.meta.url).pathname,
  ['--attacker', url, '--seconds', String(seconds + 4), '--max-connections', o['max-connections'], '--kinds', o.kinds]);
await new Promise((r) => setTimeout(r, 3000));  // slowloris connections open, the first bombs sent
const health = [];
let probing = true;
const prober = (async () => {  // a liveness probe every 200 ms, as an orchestrator would send it
  while (probing) {
    const t0 = performance.now();
    const ok = await fetch(`${url}/health`, { signal: AbortSignal.timeout(10000) }).then((r) => r.ok).catch(() => false);
    health.push(ok ? performance.now() - t0 : Infinity);
    await new Promise((r) => setTimeout(r, 200));
  }
})();
const loaded = await victim(seconds);
probing = false;
await prober;
attacker.kill();
server.kill('SIGTERM');
const show = (name, s) =>
  console.log(`${name}: ${s.n} requests (${s.failed} failed), ms p50 ${s.p50.toFixed(1)} p90 ${s.p90.toFixed(1)} p99 ${s.p99.toFixed(1)}`);
show('idle server', idle);
show('under attack', loaded);
const ratio = loaded.p99 / idle.p99;
const slowestHealth = Math.max(...health);
console.log(`p99 ratio ${ratio.toFixed(2)} (goal <= 2); /health under attack: ${health.length} probes, slowest ` +
            `${slowestHealth.toFixed(1)} ms (goal < 1000); restarted: ${restarted}`);
process.exit(ratio <= 2 && slowestHealth < 1000 && loaded.failed === 0 && !restarted ? 0 : 1);
