// The labels of tests/data/schema_keywords.json (the tables test_json_schema_keywords checks
// the grammars against) agree with ajv, an independent JSON Schema validator: ajv is the
// oracle for which strings each keyword's grammar must accept.
// Usage: node --test schema_tables.test.mjs
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import Ajv from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';

const cases = JSON.parse(readFileSync(new URL('../data/schema_keywords.json', import.meta.url), 'utf8'));
const parses = (text) => {
  try {
    JSON.parse(text);
    return true;
  } catch {
    return false;
  }
};

test('the tables are not empty', () => assert.ok(cases.length >= 30));

for (const c of cases) {
  test(`ajv agrees with the table: ${c.name}`, () => {
    const ajv = new Ajv({ strict: false });
    addFormats(ajv);
    const validate = ajv.compile(c.schema);
    for (const text of c.valid) assert.ok(validate(JSON.parse(text)), `ajv rejects ${text}`);
    for (const text of c.invalid) assert.ok(!parses(text) || !validate(JSON.parse(text)), `ajv accepts ${text}`);
  });
}
