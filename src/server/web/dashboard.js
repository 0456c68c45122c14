// The live dashboard: scrapes the server's own /metrics every few seconds and plots it.
import { bindKeyField, headers } from './common.js';

const $ = (id) => document.getElementById(id);
const pollMs = 2000;
const keep = 150;  // points per line: five minutes at one scrape every two seconds
const history = [];  // {t, samples}
const colors = ['#2f6fed', '#e8590c', '#2b8a3e', '#9c36b5', '#c92a2a', '#0b7285'];

// The Prometheus text format: [{name, labels, value}], comments skipped.
export function parseMetrics(text) {
  const out = [];
  for (const line of text.split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)/.exec(line);
    if (!m) continue;
    const labels = {};
    for (const l of (m[2] || '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) labels[l[1]] = l[2];
    out.push({ name: m[1], labels, value: Number(m[3]) });
  }
  return out;
}

const sum = (samples, name, keepIf = () => true) =>
  samples.filter((s) => s.name === name && keepIf(s.labels)).reduce((a, s) => a + s.value, 0);

// A counter's rate per second between the last two scrapes.
function rate(name, keepIf) {
  if (history.length < 2) return 0;
  const [a, b] = history.slice(-2);
  const dt = (b.t - a.t) / 1000;
  return dt > 0 ? Math.max(0, (sum(b.samples, name, keepIf) - sum(a.samples, name, keepIf)) / dt) : 0;
}

// A histogram's counts per bucket (not cumulative), summed over its series: [[le, count]].
function buckets(samples, name) {
  const byLe = new Map();
  for (const s of samples)
    if (s.name === `${name}_bucket`) byLe.set(s.labels.le, (byLe.get(s.labels.le) || 0) + s.value);
  const sorted = [...byLe.entries()].sort((x, y) => Number(x[0]) - Number(y[0]));
  return sorted.map(([le, c], i) => [le, c - (i ? sorted[i - 1][1] : 0)]);
}

function canvasContext(id) {
  const canvas = $(id);
  const scale = window.devicePixelRatio || 1;
  canvas.width = canvas.clientWidth * scale;
  canvas.height = canvas.clientHeight * scale;
  const ctx = canvas.getContext('2d');
  ctx.scale(scale, scale);
  ctx.font = '11px system-ui, sans-serif';
  return { ctx, w: canvas.clientWidth, h: canvas.clientHeight };
}

// Lines over time: series is [{label, points: [y...]}].
function drawLines(id, series, fixedMax) {
  const { ctx, w, h } = canvasContext(id);
  const max = fixedMax ?? (Math.max(0, ...series.flatMap((s) => s.points)) || 1);
  const plotH = h - 18;
  ctx.fillStyle = '#667085';
  ctx.fillText(max.toPrecision(3), 2, 10);
  series.forEach((s, k) => {
    ctx.strokeStyle = colors[k % colors.length];
    ctx.beginPath();
    s.points.forEach((y, i) => {
      const x = 40 + (i / Math.max(1, s.points.length - 1)) * (w - 44);
      const py = plotH - (y / max) * (plotH - 12);
      if (i) ctx.lineTo(x, py);
      else ctx.moveTo(x, py);
    });
    ctx.stroke();
    ctx.fillStyle = colors[k % colors.length];
    ctx.fillText(`${s.label} ${(s.points.at(-1) ?? 0).toPrecision(3)}`, 40 + k * 130, h - 3);
  });
}

// Bars: [[label, value]].
function drawBars(id, bars, empty) {
  const { ctx, w, h } = canvasContext(id);
  const max = Math.max(0, ...bars.map((b) => b[1]));
  ctx.fillStyle = '#667085';
  if (!bars.length || max <= 0) {
    ctx.fillText(empty, 8, h / 2);
    return;
  }
  const plotH = h - 18;
  const bw = w / bars.length;
  const labelEvery = Math.ceil(48 / bw);  // labels that would overlap are skipped
  bars.forEach(([label, v], i) => {
    const bh = (v / max) * (plotH - 12);
    ctx.fillStyle = colors[0];
    ctx.fillRect(i * bw + 2, plotH - bh, bw - 4, bh);
    ctx.fillStyle = '#667085';
    if (i % labelEvery === 0) ctx.fillText(String(label).slice(0, 8), i * bw + 2, h - 3);
  });
}

function tile(label, value) {
  const div = document.createElement('div');
  div.className = 'tile';
  div.innerHTML = '<b></b><span></span>';
  div.querySelector('b').textContent = value;
  div.querySelector('span').textContent = label;
  return div;
}

function render() {
  const now = history.at(-1).samples;
  const kvUsed = sum(now, 'autoglm_kv_blocks_used');
  const kvTotal = sum(now, 'autoglm_kv_blocks_capacity');
  const queried = sum(now, 'autoglm_prefix_cache_queried_tokens_total');
  $('tiles').replaceChildren(
    tile('requests running', sum(now, 'autoglm_requests_running')),
    tile('requests waiting', sum(now, 'autoglm_requests_waiting')),
    tile('KV cache used', kvTotal ? `${((100 * kvUsed) / kvTotal).toFixed(1)} %` : '–'),
    tile('generated tok/s', rate('autoglm_generation_tokens_total').toFixed(1)),
    tile('prefix cache hits', queried ? `${((100 * sum(now, 'autoglm_prefix_cache_hit_tokens_total')) / queried).toFixed(1)} %` : '–'),
    tile('preemptions', sum(now, 'autoglm_preemptions_total')),
    tile('HTTP 5xx', sum(now, 'autoglm_http_responses_total', (l) => l.code?.startsWith('5'))));
  const line = (label, pick) => ({ label, points: history.map(pick) });
  drawLines('tokens', [line('generated', (p) => p.generation), line('prompt', (p) => p.prompt)]);
  drawLines('kv', [line('used', (p) => p.kv)], 1);
  drawLines('queue', [line('running', (p) => sum(p.samples, 'autoglm_requests_running')),
    line('waiting', (p) => sum(p.samples, 'autoglm_requests_waiting'))]);
  drawBars('ttft', buckets(now, 'autoglm_time_to_first_token_seconds'), 'no requests yet');
  drawBars('itl', buckets(now, 'autoglm_inter_token_latency_seconds'), 'no streamed tokens yet');
  const ops = new Map();
  for (const s of now) if (s.name === 'autoglm_op_seconds_total') ops.set(s.labels.op, (ops.get(s.labels.op) || 0) + s.value);
  drawBars('ops', [...ops.entries()].sort((a, b) => b[1] - a[1]), 'profiling is off (profile: true in the config)');
}

// Each model's status from /v1/models: loaded, loading (with its step), unloaded, sleeping, failed (why).
function renderModels(entries) {
  const rows = [['model', 'status', 'in use', 'detail']];
  for (const m of entries)
    if (m.kind === 'model' && m.status)
      rows.push([m.id, m.status.value, String(m.status.in_use ?? 0), m.status.reason || m.status.progress || '']);
  $('models').replaceChildren(...rows.map((cells, i) => {
    const tr = document.createElement('tr');
    for (const text of cells) {
      const cell = document.createElement(i ? 'td' : 'th');
      cell.textContent = text;
      tr.append(cell);
    }
    return tr;
  }));
}

async function scrape() {
  try {
    const res = await fetch('/metrics', { headers: headers() });
    if (!res.ok) throw new Error(`/metrics: HTTP ${res.status}`);
    const samples = parseMetrics(await res.text());
    history.push({ t: Date.now(), samples });
    const last = history.at(-1);
    last.generation = rate('autoglm_generation_tokens_total');
    last.prompt = rate('autoglm_prompt_tokens_total');
    const total = sum(samples, 'autoglm_kv_blocks_capacity');
    last.kv = total ? sum(samples, 'autoglm_kv_blocks_used') / total : 0;
    if (history.length > keep) history.shift();
    render();
    const models = await fetch('/v1/models', { headers: headers() });
    if (!models.ok) throw new Error(`/v1/models: HTTP ${models.status}`);
    renderModels((await models.json()).data);
    $('status').textContent = `updated ${new Date().toLocaleTimeString()}`;
    document.body.dataset.scrapes = String(Number(document.body.dataset.scrapes || 0) + 1);
  } catch (e) {
    $('status').textContent = e.message;
  }
}

bindKeyField($('api-key'));
scrape();
setInterval(scrape, pollMs);
