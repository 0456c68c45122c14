// A rollout as a load balancer sees it: three servers behind Debian's haproxy (least connections,
// health-checked on /ready), 200 requests (a quarter streamed) from 8 concurrent clients, and one
// replica sent SIGTERM in the middle of the run. The client sees no failed request: the drained
// replica finishes what it holds, its 503s and then its closed port are retried elsewhere.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startServer, skipUnlessShared } from '../e2e/serve.mjs';
import { freePort, until } from './util.mjs';

const root = join(dirname(fileURLToPath(import.meta.url)), '../..');
const shared = process.env.AUTOGLM_SHARED ?? join(root, '../shared');
const model = join(shared, 'models/stories260K.gguf');
const skip = skipUnlessShared(existsSync(model), 'stories260K.gguf');
const dir = mkdtempSync(join(tmpdir(), 'autoglm-replicas-'));
const replicas = [];
let haproxy, base;

function haproxyConfig(port, backends) {
  return `global
  maxconn 2000
defaults
  mode http
  timeout connect 2s
  timeout client 120s
  timeout server 120s
  # A draining server answers 503 (Retry-After) and then closes its port: both are retried on
  # another server, which is what makes a rollout invisible to clients.
  retries 3
  option redispatch 1
  retry-on conn-failure empty-response 503
  option http-buffer-request
frontend api
  bind 127.0.0.1:${port}
  default_backend replicas
backend replicas
  balance leastconn
  option httpchk GET /ready
  http-check expect status 200
  default-server inter 250ms fall 1 rise 2
${backends.map((p, i) => `  server r${i} 127.0.0.1:${p} check`).join('\n')}
`;
}

before(async () => {
  if (skip) return;
  writeFileSync(join(dir, 'serve.yaml'), 'access_log: ""\nshutdown_grace_s: 30\n');
  for (let i = 0; i < 3; ++i) {
    const started = startServer(process.env.AUTOGLM_BIN, ['--config', join(dir, 'serve.yaml'), '-m', model]);
    replicas.push({ server: started.server, port: await started.port });
  }
  const port = await freePort();
  base = `http://127.0.0.1:${port}`;
  writeFileSync(join(dir, 'haproxy.cfg'), haproxyConfig(port, replicas.map((r) => r.port)));
  const bin = ['/usr/sbin/haproxy', '/usr/bin/haproxy'].find(existsSync) ?? 'haproxy';  // sbin: not on every PATH
  haproxy = spawn(bin, ['-db', '-f', join(dir, 'haproxy.cfg')], { stdio: ['ignore', 'ignore', 'pipe'] });
  let log = '';
  haproxy.stderr.on('data', (d) => (log += d));
  haproxy.on('exit', (code) => { if (code) console.error(`haproxy exited with ${code}: ${log}`); });
  await until('haproxy to see the replicas ready', async () => (await fetch(`${base}/ready`)).status === 200);
});

after(() => {
  haproxy?.kill('SIGTERM');
  for (const r of replicas) r.server.kill('SIGKILL');
});

// One request through the balancer; resolves to an error string, or '' when it was answered whole.
async function one(i) {
  const stream = i % 4 === 0;
  try {
    const res = await fetch(`${base}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ messages: [{ role: 'user', content: `Story ${i}` }], max_tokens: stream ? 200 : 48,
        temperature: 0, ignore_eos: true, stream }),
    });
    const text = await res.text();
    if (res.status !== 200) return `request ${i}: HTTP ${res.status}: ${text.slice(0, 200)}`;
    if (stream) {
      if (!text.includes('data: [DONE]')) return `request ${i}: the stream was cut`;
      if (!text.includes('"finish_reason":"length"')) return `request ${i}: the stream did not finish`;
    } else if (JSON.parse(text).choices[0].finish_reason !== 'length') {
      return `request ${i}: ${text.slice(0, 200)}`;
    }
    return '';
  } catch (e) {
    return `request ${i}: ${e.cause?.code ?? e.message}`;
  }
}

test('SIGTERM to one of three replicas mid-run: no request fails', { skip, timeout: 300000 }, async () => {
  const total = 200, concurrency = 8;
  let next = 0, done = 0;
  const failures = [];
  const victim = replicas[0].server;
  const exited = new Promise((resolve) => victim.on('exit', (code, signal) => resolve({ code, signal })));
  let terminatedAt = -1;
  const worker = async () => {
    while (next < total) {
      const i = next++;
      const error = await one(i);
      if (error) failures.push(error);
      if (++done === 60) {
        terminatedAt = done;
        victim.kill('SIGTERM');
      }
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  assert.equal(terminatedAt, 60, 'the replica was terminated mid-run');
  assert.deepEqual(failures, [], `${failures.length} of ${total} requests failed`);
  const { code, signal } = await exited;
  assert.equal(signal, null);
  assert.equal(code, 0, 'the drained replica exited 0');
  // The two others still serve; the drained one is out of the pool.
  assert.equal((await fetch(`${base}/ready`)).status, 200);
  for (const r of replicas.slice(1)) assert.equal((await fetch(`http://127.0.0.1:${r.port}/ready`)).status, 200);
});
