// Structured output end to end: for each schema of a suite, sampling at temperature 1.0 from
// a tiny model through `response_format: json_schema` gives text that parses and that an
// independent validator (ajv, pinned in package-lock.json) accepts, every time.
// Usage: node --test structured.test.mjs  (env AUTOGLM_BIN, AUTOGLM_SHARED)
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import Ajv from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import { skipUnlessShared, startServer } from './serve.mjs';

const bin = process.env.AUTOGLM_BIN;
const model = `${process.env.AUTOGLM_SHARED}/models/stories260K.gguf`;
const haveModel = existsSync(model);
const skip = skipUnlessShared(haveModel, model);
let server;
let base;

before(async () => {
  if (!haveModel) return;
  const started = startServer(bin, ['-m', model]);
  server = started.server;
  base = `http://127.0.0.1:${await started.port}/v1`;
});
after(() => server?.kill('SIGTERM'));

const str = (maxLength, extra = {}) => ({ type: 'string', maxLength, ...extra });
const point = { type: 'object', properties: { x: { type: 'number' }, y: { type: 'number' } }, required: ['x', 'y'] };
const schemas = {
  string: str(20),
  integer: { type: 'integer' },
  number: { type: 'number' },
  boolean: { type: 'boolean' },
  null: { type: 'null' },
  enum: { enum: ['red', 'green', 'blue'] },
  const: { const: 'fixed' },
  object_required: { type: 'object', properties: { a: str(10) }, required: ['a'] },
  object_optional_only: { type: 'object', properties: { x: { type: 'integer' }, y: { type: 'boolean' } } },
  object_mixed: {
    type: 'object',
    properties: { id: { type: 'integer' }, note: str(8), done: { type: 'boolean' } },
    required: ['done'],
  },
  nested: {
    type: 'object',
    properties: {
      user: { type: 'object', properties: { name: str(8), age: { type: 'integer', minimum: 0 } }, required: ['name', 'age'] },
      active: { type: 'boolean' },
    },
    required: ['user', 'active'],
  },
  int_array: { type: 'array', items: { type: 'integer' }, maxItems: 5 },
  string_array: { type: 'array', items: str(8), minItems: 2, maxItems: 3 },
  object_array: {
    type: 'array',
    items: { type: 'object', properties: { id: { type: 'integer' }, tag: { enum: ['a', 'b'] } }, required: ['id', 'tag'] },
    maxItems: 3,
  },
  any_of: { anyOf: [str(5), { type: 'integer' }] },
  one_of_tagged: {
    oneOf: [
      { type: 'object', properties: { kind: { const: 'a' }, v: { type: 'integer' } }, required: ['kind', 'v'] },
      { type: 'object', properties: { kind: { const: 'b' }, s: str(6) }, required: ['kind', 's'] },
    ],
  },
  refs: {
    $defs: { point },
    type: 'object',
    properties: { from: { $ref: '#/$defs/point' }, to: { $ref: '#/$defs/point' } },
    required: ['from', 'to'],
  },
  recursive_list: {
    $defs: {
      node: {
        type: 'object',
        properties: { value: { type: 'integer' }, next: { $ref: '#/$defs/node' } },
        required: ['value'],
      },
    },
    $ref: '#/$defs/node',
  },
  date: { type: 'string', format: 'date' },
  time: { type: 'string', format: 'time' },
  date_time: { type: 'string', format: 'date-time' },
  uuid: { type: 'string', format: 'uuid' },
  type_list_nullable: { type: ['string', 'null'], maxLength: 5 },
  map_of_integers: { type: 'object', additionalProperties: { type: 'integer' } },
  any_object: { type: 'object' },
  any_value: {},
  enum_array: { type: 'array', items: { enum: ['x', 'y', 'z'] }, minItems: 1, maxItems: 4 },
  deep: {
    type: 'object',
    properties: {
      a: {
        type: 'object',
        properties: {
          b: { type: 'object', properties: { c: { type: 'object', properties: { d: { type: 'boolean' } }, required: ['d'] } }, required: ['c'] },
        },
        required: ['b'],
      },
    },
    required: ['a'],
  },
  minimums: {
    type: 'object',
    properties: { count: { type: 'integer', minimum: 1 }, ratio: { type: 'number', minimum: 0 } },
    required: ['count', 'ratio'],
  },
  nested_arrays: { type: 'array', items: { type: 'array', items: { type: 'integer' }, maxItems: 2 }, maxItems: 3 },
  mixed_enum: { enum: [1, 'two', null, true] },
  openapi_nullable: { type: 'object', properties: { label: { type: 'string', maxLength: 6, nullable: true } }, required: ['label'] },
  lengths: { type: 'string', minLength: 3, maxLength: 6 },
  person: {
    type: 'object',
    properties: {
      name: str(12),
      email: str(16),
      birthday: { type: 'string', format: 'date' },
      tags: { type: 'array', items: str(6), maxItems: 3 },
      address: { type: 'object', properties: { city: str(10), zip: str(5) }, required: ['city'] },
    },
    required: ['name', 'birthday', 'address'],
    additionalProperties: false,
  },
  // What zod 4 and the SDKs emit (issue 13): safe-integer bounds, patterns, formats, tuples.
  zod_int: { type: 'integer', minimum: -9007199254740991, maximum: 9007199254740991 },
  int_range: { type: 'integer', exclusiveMinimum: -5, maximum: 300 },
  number_range: { type: 'number', minimum: -2, exclusiveMaximum: 2 },
  multiple_of: { type: 'integer', multipleOf: 12, minimum: 0, maximum: 1000 },
  pattern: { type: 'string', pattern: '^[A-Z]{2}-\\d{3}$' },
  email: { type: 'string', format: 'email', maxLength: 24 },
  uri: { type: 'string', format: 'uri', maxLength: 24 },
  ipv4: { type: 'string', format: 'ipv4' },
  ipv6: { type: 'string', format: 'ipv6', maxLength: 20 },
  hostname: { type: 'string', format: 'hostname', maxLength: 20 },
  duration: { type: 'string', format: 'duration', maxLength: 12 },
  tuple: { type: 'array', prefixItems: [{ type: 'string', maxLength: 4 }, { type: 'integer', minimum: 0, maximum: 9 }], items: false, minItems: 2 },
  all_of: { allOf: [{ type: 'object', properties: { a: { type: 'boolean' } }, required: ['a'] }, { properties: { b: { type: 'null' } }, required: ['b'] }] },
  min_properties: {
    type: 'object',
    properties: { p: { type: 'boolean' }, q: { type: 'boolean' }, r: { type: 'boolean' } },
    minProperties: 2,
    maxProperties: 2,
    additionalProperties: false,
  },
};

async function sample(schema, seed) {
  const r = await fetch(`${base}/chat/completions`, {
    method: 'POST',
    body: JSON.stringify({
      messages: [{ role: 'user', content: 'Once upon a time' }],
      temperature: 1.0,
      seed,
      max_tokens: 1500,
      response_format: { type: 'json_schema', json_schema: { name: 'out', schema, strict: true } },
    }),
  });
  assert.equal(r.status, 200, await r.clone().text());
  return (await r.json()).choices[0];
}

test('at least 30 schemas', () => assert.ok(Object.keys(schemas).length >= 30));

for (const [name, schema] of Object.entries(schemas)) {
  test(`schema ${name}: samples at temperature 1 parse and validate`, { skip }, async () => {
    const ajv = new Ajv({ strict: false, allErrors: true });
    addFormats(ajv);
    const validate = ajv.compile(schema);
    for (const seed of [1, 2, 3]) {
      const choice = await sample(schema, seed);
      assert.equal(choice.finish_reason, 'stop', `seed ${seed}: ${choice.message.content}`);
      let value;
      assert.doesNotThrow(() => { value = JSON.parse(choice.message.content); }, `seed ${seed}: ${choice.message.content}`);
      assert.ok(validate(value), `seed ${seed}: ${choice.message.content}\n${JSON.stringify(validate.errors)}`);
    }
  });
}

test('json_object gives an object; a bad schema or grammar is a 400 naming the parameter', { skip }, async () => {
  const r = await fetch(`${base}/chat/completions`, {
    method: 'POST',
    body: JSON.stringify({ messages: [{ role: 'user', content: 'Hi' }], temperature: 1, seed: 5, max_tokens: 1500,
      response_format: { type: 'json_object' } }),
  });
  const out = JSON.parse((await r.json()).choices[0].message.content);
  assert.equal(typeof out, 'object');
  assert.ok(!Array.isArray(out) && out !== null);
  for (const [body, param, text] of [
    [{ response_format: { type: 'json_schema', json_schema: { name: 'x', schema: { type: 'string', pattern: '(a)\\1' } } } },
      'response_format.json_schema.schema', 'backreferences are not supported'],
    [{ grammar: 'root ::= [a-' }, 'grammar', 'grammar line 1'],
    [{ response_format: { type: 'yaml' } }, 'response_format.type', 'json_schema'],
  ]) {
    const bad = await fetch(`${base}/chat/completions`, {
      method: 'POST', body: JSON.stringify({ messages: [{ role: 'user', content: 'Hi' }], ...body }),
    });
    assert.equal(bad.status, 400);
    const err = (await bad.json()).error;
    assert.equal(err.param, param);
    assert.ok(err.message.includes(text), err.message);
  }
});

// json_object keeps the budget rule of json_schema: with a small max_tokens the text still
// closes into a whole object (it was cut mid-JSON in 6 samples of 6).
test('json_object and json_schema end with whole JSON when max_tokens is small', { skip }, async () => {
  // The shortest completions: "{}" (a few tokens) and {"done":false} (up to 14 one-byte tokens).
  const formats = [[{ type: 'json_object' }, 4], [{ type: 'json_schema', json_schema: { name: 'o', schema: schemas.object_mixed } }, 16]];
  for (const [format, least] of formats) {
    for (const [seed, extra] of [[1, 0], [2, 1], [3, 2], [4, 4], [5, 6], [6, 9]]) {
      const max_tokens = least + extra;
      const r = await fetch(`${base}/chat/completions`, {
        method: 'POST',
        body: JSON.stringify({ messages: [{ role: 'user', content: 'Hi' }], temperature: 1, seed, max_tokens,
          response_format: format }),
      });
      const choice = (await r.json()).choices[0];
      const value = JSON.parse(choice.message.content);
      assert.equal(typeof value, 'object', `${format.type} seed ${seed}: ${choice.message.content}`);
      assert.equal(choice.finish_reason, 'stop');
    }
  }
});

test('a GBNF grammar constrains completions too', { skip }, async () => {
  const r = await fetch(`${base}/completions`, {
    method: 'POST',
    body: JSON.stringify({ prompt: 'The date is', temperature: 1, seed: 9, max_tokens: 40,
      grammar: 'root ::= [0-9]{4} "-" ("0" [1-9] | "1" [0-2]) "-" ("0" [1-9] | [12] [0-9])' }),
  });
  const text = (await r.json()).choices[0].text;
  assert.match(text, /^\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d)$/);
});
