// deploy/: every Kubernetes manifest validated offline against the API's schemas (kubernetes-models,
// @kubernetes-models/gateway-api; the InferencePool against its v1 API reference), the pieces
// agreeing with each other and with the image (ports, labels, probes, grace periods, user), the
// Kustomize bases listing every file, and both shipped server configurations accepted by the server.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, readdirSync, existsSync } from 'node:fs';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseAllDocuments, parse as parseYaml } from 'yaml';
import Ajv from 'ajv';
import { ConfigMap, Service, ServiceAccount } from 'kubernetes-models/v1';
import { Deployment } from 'kubernetes-models/apps/v1';
import { PodDisruptionBudget } from 'kubernetes-models/policy/v1';
import { HorizontalPodAutoscaler } from 'kubernetes-models/autoscaling/v2';
import { Role, RoleBinding } from 'kubernetes-models/rbac.authorization.k8s.io/v1';
import { HTTPRoute } from '@kubernetes-models/gateway-api/gateway.networking.k8s.io/v1';
import { startServer, skipUnlessShared } from '../e2e/serve.mjs';

const root = join(dirname(fileURLToPath(import.meta.url)), '../..');
const k8s = join(root, 'deploy/k8s');

// InferencePool (inference.networking.k8s.io/v1) as its API reference defines it.
const inferencePoolSchema = {
  type: 'object',
  required: ['apiVersion', 'kind', 'metadata', 'spec'],
  properties: {
    metadata: { type: 'object', required: ['name'] },
    spec: {
      type: 'object',
      additionalProperties: false,
      required: ['selector', 'targetPorts', 'endpointPickerRef'],
      properties: {
        selector: {
          type: 'object',
          additionalProperties: false,
          required: ['matchLabels'],
          properties: { matchLabels: { type: 'object', minProperties: 1, additionalProperties: { type: 'string' } } },
        },
        targetPorts: {
          type: 'array', minItems: 1, maxItems: 8, uniqueItems: true,
          items: { type: 'object', additionalProperties: false, required: ['number'],
            properties: { number: { type: 'integer', minimum: 1, maximum: 65535 } } },
        },
        appProtocol: { enum: ['http', 'kubernetes.io/h2c'] },
        endpointPickerRef: {
          type: 'object',
          additionalProperties: false,
          required: ['name'],
          properties: {
            group: { type: 'string' },
            kind: { type: 'string' },
            name: { type: 'string', minLength: 1, maxLength: 253 },
            port: { type: 'object', additionalProperties: false, required: ['number'],
              properties: { number: { type: 'integer', minimum: 1, maximum: 65535 } } },
            failureMode: { enum: ['FailOpen', 'FailClose'] },
          },
        },
      },
    },
  },
};
const validatePool = new Ajv({ allErrors: true }).compile(inferencePoolSchema);

const models = {
  'v1/ConfigMap': ConfigMap,
  'v1/Service': Service,
  'v1/ServiceAccount': ServiceAccount,
  'apps/v1/Deployment': Deployment,
  'policy/v1/PodDisruptionBudget': PodDisruptionBudget,
  'autoscaling/v2/HorizontalPodAutoscaler': HorizontalPodAutoscaler,
  'rbac.authorization.k8s.io/v1/Role': Role,
  'rbac.authorization.k8s.io/v1/RoleBinding': RoleBinding,
  'gateway.networking.k8s.io/v1/HTTPRoute': HTTPRoute,
};

// Throws naming the file, the object and what is wrong.
export function validateObject(obj, where) {
  const type = `${obj.apiVersion}/${obj.kind}`;
  if (type === 'inference.networking.k8s.io/v1/InferencePool') {
    if (!validatePool(obj))
      throw new Error(`${where}: ${validatePool.errors.map((e) => `${e.instancePath} ${e.message}`).join('; ')}`);
    return;
  }
  const Model = models[type];
  if (!Model) throw new Error(`${where}: no schema for ${type}`);
  try {
    new Model(obj).validate();
  } catch (e) {
    throw new Error(`${where}: ${e.message}`);
  }
}

function manifests(dir) {
  const out = [];
  for (const file of readdirSync(dir).filter((f) => f.endsWith('.yaml') && f !== 'kustomization.yaml'))
    for (const doc of parseAllDocuments(readFileSync(join(dir, file), 'utf8'))) {
      assert.equal(doc.errors.length, 0, `${file}: ${doc.errors.join('; ')}`);
      out.push({ file, obj: doc.toJS() });
    }
  return out;
}

const all = [...manifests(k8s), ...manifests(join(k8s, 'gateway'))];
const one = (kind, name) => {
  const found = all.find(({ obj }) => obj.kind === kind && (!name || obj.metadata.name === name));
  assert.ok(found, `no ${kind} ${name ?? ''} in deploy/k8s`);
  return found.obj;
};

test('every manifest validates against its API schema', () => {
  assert.ok(all.length >= 12, `only ${all.length} objects`);
  for (const { file, obj } of all) validateObject(obj, `${file} ${obj.kind}/${obj.metadata?.name}`);
});

test('the validation catches what kubectl would refuse', () => {
  const deployment = structuredClone(one('Deployment', 'open-autoglm'));
  deployment.spec.template.spec.containers[0].ports[0].containerPort = '8080';
  assert.throws(() => validateObject(deployment, 'deployment'), /containerPort must be integer/);
  const pool = structuredClone(one('InferencePool'));
  delete pool.spec.endpointPickerRef;
  assert.throws(() => validateObject(pool, 'pool'), /endpointPickerRef/);
  const hpa = structuredClone(one('HorizontalPodAutoscaler'));
  delete hpa.spec.scaleTargetRef;
  assert.throws(() => validateObject(hpa, 'hpa'), /scaleTargetRef/);
  assert.throws(() => validateObject({ apiVersion: 'v9', kind: 'Thing', metadata: {} }, 'x'), /no schema for v9\/Thing/);
});

test('the pieces agree: labels, ports, probes, grace periods and the image', () => {
  const deployment = one('Deployment', 'open-autoglm');
  const pod = deployment.spec.template;
  const server = pod.spec.containers[0];
  const config = parseYaml(one('ConfigMap', 'open-autoglm-config').data['config.yaml']);
  const port = server.ports.find((p) => p.name === 'http').containerPort;
  assert.equal(port, config.port, 'the container port is the configured port');
  const labels = pod.metadata.labels;
  const selects = (selector) => Object.entries(selector).every(([k, v]) => labels[k] === v);
  assert.ok(selects(deployment.spec.selector.matchLabels));
  assert.ok(selects(one('Service', 'open-autoglm').spec.selector), 'the Service selects the pods');
  assert.ok(selects(one('PodDisruptionBudget').spec.selector.matchLabels), 'the PDB selects the pods');
  const pool = one('InferencePool');
  assert.ok(selects(pool.spec.selector.matchLabels), 'the InferencePool selects the pods');
  assert.deepEqual(pool.spec.targetPorts, [{ number: port }]);
  // Probes: liveness and startup on /health, readiness on /ready.
  assert.equal(server.startupProbe.httpGet.path, '/health');
  assert.equal(server.livenessProbe.httpGet.path, '/health');
  assert.equal(server.readinessProbe.httpGet.path, '/ready');
  // The kubelet's SIGKILL must not cut the drain: preStop pause + shutdown_grace_s fit inside.
  const pause = Number(server.lifecycle.preStop.exec.command[1]);
  assert.ok(pod.spec.terminationGracePeriodSeconds >= pause + config.shutdown_grace_s + 5,
    `terminationGracePeriodSeconds ${pod.spec.terminationGracePeriodSeconds} < ${pause} + ${config.shutdown_grace_s} + 5`);
  // The image: its user, its config path, the model folder.
  const dockerfile = readFileSync(join(root, 'Dockerfile'), 'utf8');
  assert.match(dockerfile, new RegExp(`useradd [^\\n]*--uid ${pod.spec.securityContext.runAsUser}\\b`));
  assert.match(dockerfile, /"--config", "\/etc\/autoglm\/config\.yaml"/);
  assert.ok(server.volumeMounts.some((m) => m.mountPath === '/etc/autoglm'));
  assert.ok(server.volumeMounts.some((m) => m.mountPath === '/models' && m.readOnly));
  // The HPA scales this Deployment; the EPP's Service is the one the pool names.
  const hpa = one('HorizontalPodAutoscaler');
  assert.equal(hpa.spec.scaleTargetRef.name, deployment.metadata.name);
  const epp = one('Service', pool.spec.endpointPickerRef.name);
  assert.equal(epp.spec.ports[0].port, pool.spec.endpointPickerRef.port.number);
  const eppDeployment = one('Deployment', 'open-autoglm-epp');
  assert.ok(eppDeployment.spec.template.spec.containers[0].args.includes(`--pool-name=${pool.metadata.name}`));
  assert.equal(one('HTTPRoute').spec.rules[0].backendRefs[0].name, pool.metadata.name);
});

test('the Kustomize bases list every manifest', () => {
  for (const dir of [k8s, join(k8s, 'gateway')]) {
    const kustomization = parseYaml(readFileSync(join(dir, 'kustomization.yaml'), 'utf8'));
    for (const r of kustomization.resources) assert.ok(existsSync(join(dir, r)), `${dir}: ${r} is missing`);
    for (const f of readdirSync(dir).filter((f) => f.endsWith('.yaml') && f !== 'kustomization.yaml'))
      assert.ok(kustomization.resources.includes(f), `${dir}/kustomization.yaml does not list ${f}`);
  }
});

// The server refuses unknown keys, so this also catches a configuration that drifted from the server.
const shared = process.env.AUTOGLM_SHARED ?? join(root, '../shared');
const model = join(shared, 'models/stories260K.gguf');
for (const [name, text] of [
  ['deploy/docker/config.yaml', () => readFileSync(join(root, 'deploy/docker/config.yaml'), 'utf8')],
  ['the ConfigMap', () => one('ConfigMap', 'open-autoglm-config').data['config.yaml']],
]) {
  test(`the server starts with ${name}`, { skip: skipUnlessShared(existsSync(model), 'stories260K.gguf') }, async () => {
    const { mkdtempSync, writeFileSync } = await import('node:fs');
    const { tmpdir } = await import('node:os');
    const file = join(mkdtempSync(join(tmpdir(), 'autoglm-config-')), 'config.yaml');
    writeFileSync(file, text());
    const { server, port } = startServer(process.env.AUTOGLM_BIN, ['--config', file, '-m', model, '--host', '127.0.0.1']);
    try {
      const res = await fetch(`http://127.0.0.1:${await port}/ready`);
      assert.equal(res.status, 200);
    } finally {
      server.kill('SIGTERM');
    }
  });
}
