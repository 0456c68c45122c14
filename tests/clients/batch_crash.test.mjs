// Crash test: a batch of 100 and 20 async jobs with signed callbacks to a local receiver; the
// server is killed with SIGKILL mid-way and started again on the same data directory. Every
// batch line is answered exactly once in the output file, every job's callback arrives (a
// repeat only ever carries the same job id, so the receiver de-duplicates), and the receiver
// verifies every signature.
// Usage: node --test batch_crash.test.mjs  (env AUTOGLM_BIN, AUTOGLM_SHARED)
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createHmac, timingSafeEqual } from 'node:crypto';
import { existsSync, writeFileSync, mkdtempSync } from 'node:fs';
import { createServer } from 'node:http';
import { tmpdir } from 'node:os';
import { skipUnlessShared, startServer } from '../e2e/serve.mjs';

const bin = process.env.AUTOGLM_BIN;
const stories = `${process.env.AUTOGLM_SHARED}/models/stories260K.gguf`;
const skip = skipUnlessShared(existsSync(stories), stories);
const secret = 'crash-test-secret';
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// Keeps every delivery and whether its X-AutoGLM-Signature is the HMAC-SHA256 of the body.
function receiver() {
  const got = [];
  const server = createServer((req, res) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      const want = Buffer.from(`sha256=${createHmac('sha256', secret).update(body).digest('hex')}`);
      const sig = Buffer.from(req.headers['x-autoglm-signature'] ?? '');
      got.push({ job: req.headers['x-autoglm-job'], valid: sig.length === want.length && timingSafeEqual(sig, want), body: JSON.parse(body) });
      res.end('ok');
    });
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve({ server, got, port: server.address().port })));
}

async function call(base, method, path, body, headers = {}) {
  const r = await fetch(base + path, { method, headers: { 'content-type': 'application/json', ...headers }, body });
  return { status: r.status, text: await r.text() };
}

test('kill -9 mid-way: every line once, every callback delivered and signed', { skip, timeout: 240000 }, async () => {
  const hook = await receiver();
  const dir = mkdtempSync(`${tmpdir()}/crash-`);
  const config = `${dir}/serve.yaml`;
  writeFileSync(config, `access_log: ""\njobs: {data_dir: ${dir}/jobs, concurrency: 2, callback_secret: ${secret}, callback_backoff_s: 0.2}\n`);
  let started = startServer(bin, ['-m', stories, '--config', config]);
  let base = `http://127.0.0.1:${await started.port}`;

  const jsonl = Array.from({ length: 100 }, (_, i) => JSON.stringify({
    custom_id: `line-${i}`, method: 'POST', url: '/v1/completions',
    body: { prompt: `Once upon a time ${i}`, max_tokens: 120, ignore_eos: true, temperature: 0 },
  })).join('\n');
  const form = new FormData();
  form.append('purpose', 'batch');
  form.append('file', new Blob([jsonl]), 'crash.jsonl');
  const file = await (await fetch(`${base}/v1/files`, { method: 'POST', body: form })).json();
  const batch = JSON.parse((await call(base, 'POST', '/v1/batches', JSON.stringify({
    input_file_id: file.id, endpoint: '/v1/completions', completion_window: '24h',
  }))).text);
  assert.equal(batch.status, 'in_progress');
  const jobs = [];
  for (let i = 0; i < 20; ++i) {
    const r = await call(base, 'POST', '/v1/async/completions', JSON.stringify({
      prompt: `Job ${i}`, max_tokens: 60, ignore_eos: true, callback_url: `http://127.0.0.1:${hook.port}/hook`,
    }));
    assert.equal(r.status, 202, r.text);
    jobs.push(JSON.parse(r.text).id);
  }

  // Mid-way: some lines answered, not all (the kill comes once the server says ten are; a
  // minute without them fails below, naming the counts).
  let before;
  for (const deadline = Date.now() + 60000; ;) {
    before = JSON.parse((await call(base, 'GET', `/v1/batches/${batch.id}`)).text);
    if (before.request_counts.completed >= 10 || Date.now() > deadline) break;
    await sleep(20);
  }
  started.server.kill('SIGKILL');
  await new Promise((r) => started.server.once('exit', r));
  assert.equal(before.status, 'in_progress');
  assert.ok(before.request_counts.completed >= 10 && before.request_counts.completed < 100, JSON.stringify(before.request_counts));

  started = startServer(bin, ['-m', stories, '--config', config]);
  base = `http://127.0.0.1:${await started.port}`;
  try {
    let done;
    for (let i = 0; i < 1200; ++i) {
      done = JSON.parse((await call(base, 'GET', `/v1/batches/${batch.id}`)).text);
      if (done.status !== 'in_progress') break;
      await sleep(100);
    }
    assert.equal(done.status, 'completed');
    assert.deepEqual(done.request_counts, { total: 100, completed: 100, failed: 0 });
    const lines = (await call(base, 'GET', `/v1/files/${done.output_file_id}/content`)).text.trim().split('\n').map((l) => JSON.parse(l));
    assert.equal(lines.length, 100);
    assert.equal(new Set(lines.map((l) => l.custom_id)).size, 100);
    assert.ok(lines.every((l) => l.response.status_code === 200 && l.response.body.usage.completion_tokens === 120));

    for (const id of jobs) {
      let job;
      for (let i = 0; i < 1200; ++i) {
        job = JSON.parse((await call(base, 'GET', `/v1/jobs/${id}`)).text);
        if (job.callback?.state === 'delivered' || job.callback?.state === 'failed') break;
        await sleep(100);
      }
      assert.equal(job.status, 'completed', JSON.stringify(job));
      assert.equal(job.callback.state, 'delivered', JSON.stringify(job));
    }
    assert.ok(hook.got.every((g) => g.valid), 'every signature verifies');
    const delivered = new Set(hook.got.map((g) => g.job));
    assert.deepEqual([...delivered].sort(), [...jobs].sort());
    for (const g of hook.got) assert.equal(g.body.id, g.job); // a repeat names its job: de-duplicable
    assert.ok(hook.got.every((g) => g.body.status === 'completed' && g.body.result.usage.completion_tokens === 60));
  } finally {
    started.server.kill('SIGTERM');
    hook.server.close();
  }
});
