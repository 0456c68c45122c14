// /metrics as Prometheus itself reads it: `promtool check metrics` finds nothing to say; a real
// Prometheus (Debian's) scrapes a running server and answers a TTFT quantile through its HTTP
// API; every PromQL expression of the Grafana dashboard parses and names only metrics the
// server exports, and so do the HPA, the Prometheus adapter's rules and the endpoint picker's flags.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseAllDocuments, parse as parseYaml } from 'yaml';
import { startServer, skipUnlessShared } from '../e2e/serve.mjs';
import { freePort, until } from './util.mjs';

const root = join(dirname(fileURLToPath(import.meta.url)), '../..');
const shared = process.env.AUTOGLM_SHARED ?? join(root, '../shared');
const model = join(shared, 'models/stories260K.gguf');
const skip = skipUnlessShared(existsSync(model), 'stories260K.gguf');
const dir = mkdtempSync(join(tmpdir(), 'autoglm-prometheus-'));
let server, base, prometheus, promUrl;

async function promQuery(expr) {
  const res = await fetch(`${promUrl}/api/v1/query?query=${encodeURIComponent(expr)}`);
  return { status: res.status, body: await res.json() };
}

// Every family the server exports (from its # TYPE lines), with its type.
async function families() {
  const text = await (await fetch(`${base}/metrics`)).text();
  return new Map([...text.matchAll(/^# TYPE (\S+) (\S+)$/gm)].map((m) => [m[1], m[2]]));
}

// A metric name as PromQL writes it, resolved to its family (a histogram's _bucket, _sum, _count).
function familyOf(name, known) {
  if (known.has(name)) return name;
  const stem = name.replace(/_(bucket|sum|count)$/, '');
  return known.get(stem) === 'histogram' ? stem : undefined;
}

function metricNames(expr) {
  return [...new Set([...expr.matchAll(/\bautoglm_[a-z0-9_]+/g)].map((m) => m[0]))];
}

// The dashboard's expressions with Grafana's variables given values Prometheus takes.
function dashboardExpressions() {
  const dashboard = JSON.parse(readFileSync(join(root, 'deploy/grafana/open-autoglm.json'), 'utf8'));
  const out = [];
  for (const panel of dashboard.panels)
    for (const t of panel.targets ?? [])
      out.push({ panel: panel.title, expr: t.expr.replaceAll('$__rate_interval', '30s').replaceAll('$model', '.*') });
  return { dashboard, out };
}

before(async () => {
  if (skip) return;
  // Every optional family on: per-op profile, response cache, async jobs, a route.
  writeFileSync(join(dir, 'serve.yaml'), `profile: true
access_log: ""
response_cache: {enabled: true}
jobs: {data_dir: ${dir}/jobs}
models:
  - {name: stories, path: ${model}}
  - {name: stories-b, path: ${model}}
routes:
  ab:
    split:
      arms: [{model: stories, weight: 50}, {model: stories-b, weight: 50}]
`);
  const started = startServer(process.env.AUTOGLM_BIN, ['--config', join(dir, 'serve.yaml'), '--host', '127.0.0.1']);
  server = started.server;
  base = `http://127.0.0.1:${await started.port}`;
  const target = base.replace('http://', '');
  writeFileSync(join(dir, 'prometheus.yml'), `global: {scrape_interval: 1s, evaluation_interval: 1s}
scrape_configs:
  - job_name: autoglm
    static_configs: [{targets: ['${target}']}]
`);
  const port = await freePort();
  promUrl = `http://127.0.0.1:${port}`;
  prometheus = spawn('prometheus', [`--config.file=${join(dir, 'prometheus.yml')}`, `--storage.tsdb.path=${join(dir, 'tsdb')}`,
    `--web.listen-address=127.0.0.1:${port}`, '--log.level=warn'], { stdio: ['ignore', 'ignore', 'pipe'] });
  let log = '';
  prometheus.stderr.on('data', (d) => (log += d));
  prometheus.on('exit', (code) => { if (code) console.error(`prometheus exited with ${code}: ${log}`); });
  await traffic();
});

// Requests for every series: plain and streamed chats, the route, a cached repeat.
async function traffic() {
  const chat = (body) => fetch(`${base}/v1/chat/completions`, { method: 'POST', headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ messages: [{ role: 'user', content: 'Once upon a time' }], max_tokens: 24, temperature: 0, ...body }) })
    .then((r) => r.text());
  for (let i = 0; i < 4; ++i) await chat({ stream: i % 2 === 1, seed: i });
  await chat({ model: 'ab' });
  await chat({ seed: 0 });
}

after(() => {
  server?.kill('SIGTERM');
  prometheus?.kill('SIGTERM');
});

test('promtool check metrics finds nothing to say about /metrics', { skip }, async () => {
  const text = await (await fetch(`${base}/metrics`)).text();
  assert.match(text, /autoglm_time_to_first_token_seconds_bucket\{/);
  assert.match(text, /autoglm_op_seconds_total\{/, 'the per-op profile is exported');
  const lint = spawnSync('promtool', ['check', 'metrics'], { input: text, encoding: 'utf8' });
  assert.equal(lint.error, undefined, `promtool: ${lint.error}`);
  assert.equal(`${lint.stdout}${lint.stderr}`.trim(), '', 'promtool reported problems');
  assert.equal(lint.status, 0);
  // The check is live: a counter without _total, a bad TYPE, are reported.
  const bad = spawnSync('promtool', ['check', 'metrics'], { encoding: 'utf8',
    input: '# HELP autoglm_x Things.\n# TYPE autoglm_x counter\nautoglm_x 1\n' });
  assert.notEqual(`${bad.stdout}${bad.stderr}`.trim(), '');
});

test('Prometheus scrapes the server and answers the TTFT quantile', { skip }, async () => {
  await until('the scrape target to be up', async () => {
    const { body } = await promQuery('up{job="autoglm"}');
    return body.data?.result?.[0]?.value?.[1] === '1';
  });
  await until('the first requests in Prometheus', async () => {
    const { body } = await promQuery('sum(autoglm_time_to_first_token_seconds_count)');
    return Number(body.data?.result?.[0]?.value?.[1]) >= 6;
  });
  // Requests while Prometheus watches: the histogram's counters rise between scrapes.
  await traffic();
  const count = await until('the TTFT histogram in Prometheus', async () => {
    const { body } = await promQuery('sum(autoglm_time_to_first_token_seconds_count)');
    const v = Number(body.data?.result?.[0]?.value?.[1]);
    return v >= 12 ? v : undefined;
  });
  assert.ok(count >= 12, `${count} requests counted`);
  const p90 = await until('a TTFT p90', async () => {
    const { body } = await promQuery(
      'histogram_quantile(0.9, sum by (le) (increase(autoglm_time_to_first_token_seconds_bucket[5m])))');
    const v = Number(body.data?.result?.[0]?.value?.[1]);
    return Number.isFinite(v) && v > 0 ? v : undefined;
  });
  assert.ok(p90 > 0 && p90 < 120, `TTFT p90 ${p90} s`);
});

test('every dashboard expression parses and names only exported metrics', { skip }, async () => {
  const known = await families();
  const { dashboard, out } = dashboardExpressions();
  assert.ok(out.length >= 30, `only ${out.length} expressions`);
  assert.ok(dashboard.templating.list.some((v) => v.type === 'datasource' && v.query === 'prometheus'),
    'a Prometheus datasource variable');
  for (const { panel, expr } of out) {
    const { status, body } = await promQuery(expr);
    assert.equal(status, 200, `${panel}: ${expr}: ${body.error}`);
    assert.equal(body.status, 'success', `${panel}: ${expr}`);
    for (const name of metricNames(expr)) assert.ok(familyOf(name, known), `${panel}: ${name} is not exported`);
  }
  // A typo is caught: by Prometheus (syntax) or by the name check.
  assert.equal((await promQuery('sum(rate(autoglm_generation_tokens_total[30s])')).status, 400);
  assert.equal(familyOf('autoglm_generation_token_total', known), undefined);
  // The dashboard's TTFT quantile has data now.
  const ttft = out.find((e) => e.panel === 'Time to first token');
  const { body } = await promQuery(ttft.expr.replace('[30s]', '[5m]'));
  assert.ok(body.data.result.length > 0, 'the TTFT panel is empty');
});

test('the HPA, adapter rules and endpoint picker name exported gauges', { skip }, async () => {
  const known = await families();
  const k8s = join(root, 'deploy/k8s');
  const docs = (file) => parseAllDocuments(readFileSync(join(k8s, file), 'utf8')).map((d) => d.toJS());
  const hpa = docs('hpa.yaml')[0];
  const hpaNames = hpa.spec.metrics.map((m) => m.pods.metric.name);
  const rules = parseYaml(docs('prometheus-adapter-rules.yaml')[0].data['config.yaml']).rules;
  for (const h of hpaNames) assert.ok(rules.some((r) => r.name.as === h), `the HPA's ${h} has no adapter rule`);
  const names = [...hpaNames, ...rules.flatMap((r) => metricNames(r.seriesQuery))];
  const epp = docs('gateway/epp.yaml').find((o) => o.kind === 'Deployment');
  const flags = epp.spec.template.spec.containers[0].args.filter((a) => a.endsWith('-metric') || a.includes('-metric='));
  assert.equal(flags.length, 4, 'queued, running, KV-cache and LoRA metrics');
  names.push(...flags.map((f) => f.split('=')[1]));
  for (const name of names) assert.equal(known.get(name), 'gauge', `${name} is not an exported gauge`);
});
