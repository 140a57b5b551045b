// Structured output end to end: 200 generated JSON schemas (nested objects, arrays, enums,
// required, numbers in ranges, strings with lengths, anyOf, $ref), each answered by the served
// model (which knows nothing of JSON: the grammar does the work) through response_format
// json_schema; every reply must parse and validate under ajv. A few go through the official
// openai and ollama clients as well.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import Ajv2020 from 'ajv/dist/2020.js';
import { Ollama } from 'ollama';
import OpenAI from 'openai';

import { post, servedModel, serverUrl } from './harness.mjs';

const model = await servedModel();
const ajv = new Ajv2020({ strict: false, allErrors: true });

// mulberry32: a small seeded generator, so a failure names a schema that can be made again.
function random(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function schemaFor(seed) {
  const r = random(seed);
  const int = (lo, hi) => lo + Math.floor(r() * (hi - lo + 1));
  const pick = (list) => list[int(0, list.length - 1)];
  const words = ['alpha', 'beta', 'gamma', 'delta', 'omega', 'red', 'green', 'blue', 'north', 'south'];
  const defs = {};

  function leaf() {
    switch (pick(['string', 'string', 'integer', 'number', 'boolean', 'enum', 'const', 'null', 'nullable'])) {
      case 'string': {
        const s = { type: 'string' };
        if (r() < 0.5) s.minLength = int(0, 4);
        if (r() < 0.6) s.maxLength = (s.minLength ?? 0) + int(0, 12);
        return s;
      }
      case 'integer': {
        const s = { type: 'integer' };
        if (r() < 0.6) s.minimum = int(-500, 500);
        if (r() < 0.6) s.maximum = (s.minimum ?? int(-500, 0)) + int(0, 1000);
        if (s.minimum !== undefined && r() < 0.3) s.exclusiveMinimum = s.minimum - 1;
        return s;
      }
      case 'number': {
        const s = { type: 'number' };
        if (r() < 0.5) s.minimum = int(-50, 50) / 2;
        if (r() < 0.5) s.maximum = (s.minimum ?? -30) + int(1, 100) / 4;
        if (r() < 0.2) s.exclusiveMaximum = (s.maximum ?? 100) + 0.5;
        return s;
      }
      case 'boolean': return { type: 'boolean' };
      case 'null': return { type: 'null' };
      case 'nullable': return { type: [pick(['string', 'integer', 'boolean']), 'null'] };
      case 'const': return { const: pick([pick(words), int(-9, 99), true, null]) };
      default: {
        const values = new Set();
        while (values.size < int(1, 4)) values.add(r() < 0.7 ? pick(words) : int(-20, 20));
        return { enum: [...values] };
      }
    }
  }

  function node(depth) {
    const kind = depth >= 3 ? 'leaf' : pick(['leaf', 'leaf', 'object', 'array', 'anyOf', 'ref']);
    if (kind === 'object') return object(depth);
    if (kind === 'array') {
      const s = { type: 'array', items: node(depth + 1) };
      if (r() < 0.5) s.minItems = int(0, 2);
      if (r() < 0.6) s.maxItems = (s.minItems ?? 0) + int(0, 3);
      return s;
    }
    if (kind === 'anyOf') return { anyOf: [leaf(), { type: 'array', items: leaf(), maxItems: 2 }] };
    if (kind === 'ref') {
      const name = `d${Object.keys(defs).length}`;
      defs[name] = depth >= 2 ? leaf() : object(depth + 1);
      return { $ref: `#/$defs/${name}` };
    }
    return leaf();
  }

  function object(depth) {
    const properties = {};
    const names = [...words].sort(() => r() - 0.5).slice(0, int(1, 4));
    for (const name of names) properties[name] = node(depth + 1);
    const s = { type: 'object', properties, required: names.filter(() => r() < 0.6) };
    if (r() < 0.8) s.additionalProperties = false;
    return s;
  }

  const top = object(0);
  if (Object.keys(defs).length) top.$defs = defs;
  return top;
}

async function answer(schema, seed) {
  const res = await post('/v1/chat/completions', {
    model,
    messages: [{ role: 'user', content: 'Reply in JSON.' }],
    temperature: 1.0,
    seed,
    max_tokens: 300,
    response_format: { type: 'json_schema', json_schema: { name: `s${seed}`, strict: true, schema } },
  });
  const body = await res.json();
  assert.equal(res.status, 200, JSON.stringify(body));
  return body.choices[0];
}

describe('structured output', () => {
  test('200 generated schemas: every reply validates under ajv', async (t) => {
    const failures = [];
    let chars = 0;
    const seeds = Array.from({ length: 200 }, (_, i) => 1000 + i);
    // Two at a time: the server has two slots.
    for (let i = 0; i < seeds.length; i += 2) {
      await Promise.all(seeds.slice(i, i + 2).map(async (seed) => {
        const schema = schemaFor(seed);
        const validate = ajv.compile(schema);
        const choice = await answer(schema, seed);
        const text = choice.message.content;
        chars += text.length;
        let value;
        try {
          value = JSON.parse(text);
        } catch (e) {
          failures.push(`seed ${seed}: not JSON (${e.message}): ${text}\nschema ${JSON.stringify(schema)}`);
          return;
        }
        if (!validate(value)) {
          failures.push(`seed ${seed}: ${ajv.errorsText(validate.errors)}: ${text}\nschema ${JSON.stringify(schema)}`);
        } else if (choice.finish_reason !== 'stop') {
          failures.push(`seed ${seed}: finish_reason ${choice.finish_reason}: ${text}`);
        }
      }));
    }
    t.diagnostic(`200 schemas, ${chars} characters of replies, ${failures.length} failures`);
    assert.deepEqual(failures, []);
  });

  test('the openai client parses a json_schema reply', async () => {
    const client = new OpenAI({ baseURL: serverUrl + '/v1', apiKey: 'unused', maxRetries: 0, fetch: globalThis.fetch });
    const schema = {
      type: 'object',
      properties: { name: { type: 'string', maxLength: 20 }, age: { type: 'integer', minimum: 0, maximum: 130 } },
      required: ['name', 'age'],
      additionalProperties: false,
    };
    const res = await client.chat.completions.create({
      model,
      messages: [{ role: 'user', content: 'A person, as JSON.' }],
      max_tokens: 80,
      seed: 5,
      response_format: { type: 'json_schema', json_schema: { name: 'person', strict: true, schema } },
    });
    const value = JSON.parse(res.choices[0].message.content);
    assert.ok(ajv.validate(schema, value), ajv.errorsText());
  });

  test('the ollama client gets a reply in the format schema', async () => {
    const ollama = new Ollama({ host: serverUrl });
    const schema = {
      type: 'object',
      properties: { colour: { enum: ['red', 'green', 'blue'] }, count: { type: 'integer', minimum: 1, maximum: 9 } },
      required: ['colour', 'count'],
    };
    const res = await ollama.chat({
      model,
      messages: [{ role: 'user', content: 'Pick a colour.' }],
      format: schema,
      options: { num_predict: 60, seed: 3 },
    });
    assert.ok(ajv.validate(schema, JSON.parse(res.message.content)), res.message.content);
  });

  test('a schema the server cannot keep is a 400 naming the field', async () => {
    const res = await post('/v1/chat/completions', {
      model,
      messages: [{ role: 'user', content: 'x' }],
      response_format: { type: 'json_schema', json_schema: { name: 'x', schema: { type: 'object', properties: { a: { type: 'string', pattern: '^a' } } } } },
    });
    assert.equal(res.status, 400);
    const body = await res.json();
    assert.equal(body.error.param, 'response_format.json_schema.schema');
    assert.match(body.error.message, /\/properties\/a: 'pattern' is not supported/);
  });
});
