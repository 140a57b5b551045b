// `orchard serve` through the official OpenAI client, plus raw HTTP checks of what a client
// library would hide (malformed bodies) and of the Ollama and Anthropic adapters.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';

import OpenAI from 'openai';

import { cliGreedy, getJson, post, servedModel, serverUrl, startServer } from './harness.mjs';

// maxRetries 0: a retried failure would hide the first answer and slow the run down. The
// platform's fetch rather than the client's default node-fetch 2, whose keep-alive agent
// reports a false "Premature close" after every complete chunked stream on Node 18
// (node-fetch/node-fetch#1767; the server's chunked encoding ends properly).
function openai(baseURL, apiKey = 'unused') {
  return new OpenAI({ baseURL, apiKey, maxRetries: 0, timeout: 60_000, fetch: globalThis.fetch });
}
const client = openai(serverUrl + '/v1');
const model = await servedModel();

const chatRequest = {
  model,
  messages: [{ role: 'user', content: 'Tell me a story about a cat.' }],
  temperature: 0,
  max_tokens: 48,
};

async function collect(stream, pick) {
  const chunks = [];
  for await (const chunk of stream) chunks.push(chunk);
  return { chunks, text: chunks.map(pick).filter((t) => t).join('') };
}

describe('OpenAI API through the openai client', () => {
  test('models.list names the served model', async () => {
    const ids = [];
    for await (const m of client.models.list()) {
      assert.equal(m.object, 'model');
      ids.push(m.id);
    }
    assert.ok(ids.includes(model), `served model ${model} not in ${JSON.stringify(ids)}`);
  });

  test('chat completion returns text, usage and a finish reason', async () => {
    const res = await client.chat.completions.create(chatRequest);
    assert.equal(res.object, 'chat.completion');
    assert.equal(res.choices.length, 1);
    const choice = res.choices[0];
    assert.equal(choice.message.role, 'assistant');
    assert.equal(typeof choice.message.content, 'string');
    assert.ok(choice.message.content.length > 0, 'empty reply');
    assert.ok(['stop', 'length'].includes(choice.finish_reason), `finish_reason ${choice.finish_reason}`);
    const u = res.usage;
    assert.ok(u.prompt_tokens > 0 && u.completion_tokens > 0, JSON.stringify(u));
    assert.ok(u.completion_tokens <= chatRequest.max_tokens, JSON.stringify(u));
    assert.equal(u.total_tokens, u.prompt_tokens + u.completion_tokens);
    if (choice.finish_reason === 'length') assert.equal(u.completion_tokens, chatRequest.max_tokens);
  });

  test('streamed chat deltas add up to the greedy non-streamed reply', async (t) => {
    const whole = await client.chat.completions.create(chatRequest);
    const stream = await client.chat.completions.create({ ...chatRequest, stream: true });
    const { chunks, text } = await collect(stream, (c) => c.choices[0]?.delta?.content);
    for (const c of chunks) assert.equal(c.object, 'chat.completion.chunk');
    // The server sends what was generated since its last write, so a busy machine may merge
    // pieces; 'a long reply arrives in pieces' checks that streaming is incremental at all.
    t.diagnostic(`${chunks.filter((c) => c.choices[0]?.delta?.content).length} text chunks`);
    assert.equal(text, whole.choices[0].message.content);
    const finishes = chunks.map((c) => c.choices[0]?.finish_reason).filter((f) => f);
    assert.deepEqual(finishes, [whole.choices[0].finish_reason], 'exactly one chunk carries the finish reason');
  });

  test('greedy completion from an empty prompt equals orchard generate', async () => {
    const golden = await cliGreedy('', 40);
    const res = await client.completions.create({ model, prompt: '', temperature: 0, max_tokens: 40 });
    assert.equal(res.object, 'text_completion');
    assert.equal(res.choices[0].text, golden);
    assert.equal(res.choices[0].finish_reason, 'length');
    assert.equal(res.usage.completion_tokens, 40);
    assert.equal(res.usage.total_tokens, res.usage.prompt_tokens + res.usage.completion_tokens);
  });

  test('streamed completion equals the non-streamed one', async () => {
    const request = { model, prompt: 'Once upon a time', temperature: 0, max_tokens: 40 };
    const whole = await client.completions.create(request);
    const stream = await client.completions.create({ ...request, stream: true });
    const { chunks, text } = await collect(stream, (c) => c.choices[0]?.text);
    for (const c of chunks) assert.equal(c.object, 'text_completion');
    assert.ok(chunks.slice(0, -1).every((c) => c.choices[0].finish_reason === null));
    assert.equal(text, whole.choices[0].text);
    assert.equal(chunks.at(-1).choices[0].finish_reason, whole.choices[0].finish_reason);
  });

  test('a long reply arrives in pieces, as it is generated', async () => {
    const stream = await client.completions.create({
      model, prompt: 'Once upon a time', temperature: 0, max_tokens: 300, ignore_eos: true, stream: true,
    });
    const arrivals = [];
    let text = '';
    for await (const c of stream) {
      if (c.choices[0]?.text) {
        arrivals.push(performance.now());
        text += c.choices[0].text;
      }
    }
    assert.ok(arrivals.length > 1, 'the whole reply came in one piece');
    assert.ok(arrivals.at(-1) > arrivals[0]);
    assert.ok(text.length > 300, `only ${text.length} characters for 300 tokens`);
  });

  test('usage comes as a last chunk when stream_options asks for it', async () => {
    const stream = await client.chat.completions.create({
      ...chatRequest, max_tokens: 8, stream: true, stream_options: { include_usage: true },
    });
    const { chunks } = await collect(stream, (c) => c.choices[0]?.delta?.content);
    const last = chunks.at(-1);
    assert.deepEqual(last.choices, []);
    assert.equal(last.usage.completion_tokens, 8);
    assert.equal(last.usage.total_tokens, last.usage.prompt_tokens + 8);
  });

  test('the same seed gives the same sampled reply', async () => {
    const request = { ...chatRequest, temperature: 1, top_p: 0.9, seed: 1234 };
    const a = await client.chat.completions.create(request);
    const b = await client.chat.completions.create(request);
    assert.equal(a.choices[0].message.content, b.choices[0].message.content);
  });

  test('a wrongly typed field is a BadRequestError naming it', async () => {
    await assert.rejects(
      client.chat.completions.create({ ...chatRequest, temperature: 'hot' }),
      (err) => {
        assert.ok(err instanceof OpenAI.BadRequestError, `got ${err?.constructor?.name}: ${err?.message}`);
        assert.equal(err.status, 400);
        assert.match(err.message, /temperature/);
        return true;
      });
  });

  test('a missing field is a BadRequestError naming it', async () => {
    await assert.rejects(
      client.chat.completions.create({ model, max_tokens: 8 }),
      (err) => {
        assert.ok(err instanceof OpenAI.BadRequestError, `got ${err?.constructor?.name}: ${err?.message}`);
        assert.equal(err.status, 400);
        assert.match(err.message, /messages/);
        return true;
      });
  });
});

describe('raw HTTP', () => {
  test('a malformed JSON body is a 400 with an OpenAI error object', async () => {
    const res = await post('/v1/chat/completions', '{"messages": [');
    assert.equal(res.status, 400);
    assert.match(res.headers.get('content-type') ?? '', /application\/json/);
    const body = await res.json();
    assert.equal(typeof body.error?.message, 'string');
    assert.ok(body.error.message.length > 0);
    assert.equal(typeof body.error.type, 'string');
  });

  test('/health and /metrics answer', async () => {
    const health = await getJson('/health');
    assert.equal(health.status, 'ok');
    assert.ok(health.slots >= 1);
    const res = await fetch(serverUrl + '/metrics');
    assert.equal(res.status, 200);
    assert.match(res.headers.get('content-type') ?? '', /text\/plain/);
    assert.match(await res.text(), /^# TYPE /m);
  });

  test('/api/cluster describes one rank holding every layer', async () => {
    const c = await getJson('/api/cluster');
    assert.equal(c.kind, 'single');
    assert.equal(c.model.id, model);
    assert.equal(c.ranks.length, 1);
    const r = c.ranks[0];
    assert.equal(r.rank, 0);
    assert.equal(typeof r.host, 'string');
    assert.deepEqual(r.layers, [0, 5]);   // stories260K has 5 blocks
    assert.ok(r.memory_bytes > 0);
    assert.ok(typeof c.tokens_per_second === 'number');
  });

  test('Ollama /api/chat streams NDJSON ending with done: true', async () => {
    const res = await post('/api/chat', {
      model, messages: [{ role: 'user', content: 'Hello' }], options: { temperature: 0, num_predict: 24 },
    });
    assert.equal(res.status, 200);
    assert.match(res.headers.get('content-type') ?? '', /application\/x-ndjson/);
    const lines = (await res.text()).split('\n').filter((l) => l.trim() !== '');
    assert.ok(lines.length >= 2, `only ${lines.length} lines`);
    const objects = lines.map((l) => JSON.parse(l));
    const last = objects.at(-1);
    assert.equal(last.done, true);
    assert.ok(objects.slice(0, -1).every((o) => o.done === false));
    const text = objects.map((o) => o.message?.content ?? '').join('');
    assert.ok(text.length > 0, 'no text streamed');
    assert.equal(objects[0].message.role, 'assistant');
  });

  test('Ollama /api/generate without streaming and /api/tags', async () => {
    const res = await post('/api/generate', { model, prompt: 'Once upon a time', stream: false, options: { temperature: 0, num_predict: 16 } });
    assert.equal(res.status, 200);
    const body = await res.json();
    assert.equal(body.done, true);
    assert.ok(typeof body.response === 'string' && body.response.length > 0);
    const tags = await getJson('/api/tags');
    assert.ok(Array.isArray(tags.models) && tags.models.length >= 1);
  });

  test('Anthropic /v1/messages returns the text in content[0]', async () => {
    const res = await post('/v1/messages', {
      model, max_tokens: 24, temperature: 0, messages: [{ role: 'user', content: 'Hello' }],
    }, { 'anthropic-version': '2023-06-01' });
    assert.equal(res.status, 200);
    const body = await res.json();
    assert.equal(body.type, 'message');
    assert.equal(body.role, 'assistant');
    assert.equal(body.content[0].type, 'text');
    assert.ok(typeof body.content[0].text === 'string' && body.content[0].text.length > 0);
    assert.ok(['end_turn', 'max_tokens', 'stop_sequence'].includes(body.stop_reason), body.stop_reason);
    assert.ok(body.usage.input_tokens > 0 && body.usage.output_tokens > 0);
  });
});

describe('a server started with --api-key', () => {
  let server;
  before(async () => { server = await startServer(['--api-key', 'orchard-test-key', '--slots', '1']); });
  after(async () => { await server?.stop(); });

  test('refuses a wrong key with 401', async () => {
    const wrong = openai(server.url + '/v1', 'wrong');
    await assert.rejects(wrong.models.list(), (err) => {
      assert.ok(err instanceof OpenAI.AuthenticationError, `got ${err?.constructor?.name}: ${err?.message}`);
      assert.equal(err.status, 401);
      return true;
    });
  });

  test('answers with the key, in either header', async () => {
    const right = openai(server.url + '/v1', 'orchard-test-key');
    const res = await right.completions.create({ model, prompt: 'Once', max_tokens: 4, temperature: 0 });
    assert.equal(res.usage.completion_tokens, 4);
    const anthropic = await fetch(server.url + '/v1/messages', {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', 'x-api-key': 'orchard-test-key' },
      body: JSON.stringify({ model, max_tokens: 4, messages: [{ role: 'user', content: 'Hi' }] }),
    });
    assert.equal(anthropic.status, 200);
  });

  test('leaves /health and the page open', async () => {
    assert.equal((await fetch(server.url + '/health')).status, 200);
    assert.equal((await fetch(server.url + '/')).status, 200);
    assert.equal((await fetch(server.url + '/api/cluster')).status, 401);
  });
});
